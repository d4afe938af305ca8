//! The service core of cuzk, with no wire protocol: job tracker, scheduler, partition
//! pipeline (synthesis pool, GPU/CPU workers), SRS manager, memory budget, metrics and the
//! per-partition timeline.
//!
//! A job is one proof request; it fans out into partitions. Each partition is admitted
//! against the host-memory budget, synthesized on a synthesis worker, handed over a
//! bounded queue to a prove worker of some device (which proves it under the device's
//! fair compute token), and when all of a job's partitions are in, the job's proof is
//! assembled and verified by its kind before the job completes. Both queues serve
//! priority first, then the oldest job, then the lowest partition index.
//!
//! A device fault (a backend error or panic, a GPU call past `prove_timeout`, a proof that
//! fails verification) sends the partition to another device in service or to the CPU
//! fallback, and repeated faults take the device out of service (`faults.rs`).
//!
//! Proof kinds plug in through [`KindRegistry`]; devices through [`DeviceSpec`] (an
//! `Arc<dyn Backend>` each). The engine works fully on the CPU backend. Its default pool
//! and memory sizes derive from the machine ([`sizing`]).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod config;
pub mod device;
mod engine;
mod engine_drain;
mod engine_journal;
mod engine_params;
pub mod error;
mod faults;
pub mod journal;
pub mod metrics;
pub mod params_check;
pub mod registry;
pub mod sizing;
pub mod srs_manager;
mod state;
pub mod status;
pub mod synthetic;
pub mod timeline;
/// The fair per-device compute token (shared with backends that schedule themselves).
pub mod token {
    pub use cuzk_groth16::token::*;
}
pub mod types;
mod workers;

pub use config::EngineConfig;
/// The kind-neutral request fields, re-exported so front ends need not depend on
/// `cuzk-groth16` to build a [`JobSpec`].
pub use cuzk_groth16::ProofRequest;
pub use device::DeviceSpec;
pub use engine::Engine;
pub use engine_drain::ShutdownReport;
pub use error::EngineError;
pub use faults::RetryCause;
pub use params_check::{ParamsState, ParamsStatus, ParamsSummary};
pub use registry::{KindRegistry, ParamsProvider};
pub use srs_manager::{SrsStatus, SrsTier};
pub use state::MemoryLedger;
pub use status::{DeviceStatus, EngineStatus, KindQueue};
pub use timeline::{Stage, TimelineEvent};
pub use types::{
    AwaitOutcome, JobOutcome, JobSpec, JobState, JobTimings, Priority, ProofKindId, SubmitOutcome,
};
