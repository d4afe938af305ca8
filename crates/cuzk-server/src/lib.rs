//! The wire front end of cuzk: the `cuzk.v1.ProvingEngine` gRPC service on a unix socket or
//! TCP, and HTTP `GET /metrics` and `GET /status`. The only crate that knows protobuf.
//!
//! [`serve::Daemon`] runs an engine behind both listeners; [`grpc::ProvingService`] maps
//! each rpc onto the engine through the hand-written conversions in [`convert`];
//! [`config::DaemonConfig`] is the `cuzk.toml` format; [`client::connect`] dials a daemon.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod client;
pub mod config;
pub mod convert;
pub mod grpc;
pub mod http;
pub mod serve;

/// Code generated from `proto/cuzk.proto` (package `cuzk.v1`).
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("cuzk.v1");
}

pub use client::{connect, Client};
pub use config::{DaemonConfig, ListenAddr};
pub use serve::{Daemon, ServeError};
