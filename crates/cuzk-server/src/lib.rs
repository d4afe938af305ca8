//! The wire front end of cuzk: the `cuzk.v1.ProvingEngine` gRPC service on a unix socket or
//! TCP, and HTTP `GET /metrics` and `GET /status`. The only crate that knows protobuf.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
