//! The wire front end of cuzk: the `cuzk.v1.ProvingEngine` gRPC service on a unix socket or
//! TCP, the standard `grpc.health.v1.Health` service, and HTTP `GET /metrics`,
//! `GET /status` and `GET /ready`. The only crate that knows protobuf.
//!
//! [`serve::Daemon`] runs an engine behind both listeners; [`grpc::ProvingService`] maps
//! each rpc onto the engine through the hand-written conversions in [`convert`];
//! [`config::DaemonConfig`] is the `cuzk.toml` format (Curio's own `cuzk.toml` is read
//! through [`curio`]); [`client::connect`] dials a daemon. Access control lives in
//! [`auth`] (bearer token) and [`socket`] (the socket's mode, one daemon per socket);
//! [`authority`] lets C-core gRPC clients use the unix socket; [`health`] says whether the
//! daemon can take proofs, and [`gate`] tells a load balancer (the daemon's name on every
//! response, HTTP 503 for work it cannot take).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod auth;
pub mod authority;
pub mod client;
pub mod config;
pub mod convert;
pub mod curio;
pub mod gate;
pub mod grpc;
pub mod health;
pub mod http;
pub mod serve;
pub mod socket;

/// Code generated from `proto/cuzk.proto` (package `cuzk.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("cuzk.v1");
}

pub use client::{connect, Client};
pub use config::{DaemonConfig, ListenAddr};
pub use serve::{Daemon, ServeError};
