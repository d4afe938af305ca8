//! [`EngineError`]: every way an engine call can be refused. A job that fails after it was
//! accepted does not surface here; it finishes `Failed` with its reason in the outcome.

use cuzk_groth16::KindError;

/// Why the engine refused a call.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The request is malformed; the kind's parser names the field.
    #[error("{0}")]
    InvalidRequest(#[from] KindError),
    /// No parser is registered for this proof kind.
    #[error("invalid proof_kind: {kind} is not served by this daemon")]
    UnsupportedKind {
        /// The kind's name.
        kind: String,
    },
    /// Accepting the job would pass a configured admission limit (`max_queued_jobs`,
    /// `max_queued_bytes`); the message names the limit. Nothing was accepted: retry later
    /// or elsewhere.
    #[error("resource exhausted: {0}")]
    ResourceExhausted(String),
    /// No parameters are known or found for a circuit id.
    #[error("unknown SRS circuit_id {circuit_id:?}: {reason}")]
    UnknownSrs {
        /// The circuit id.
        circuit_id: String,
        /// Where we looked.
        reason: String,
    },
    /// An SRS could not be loaded.
    #[error("loading SRS {circuit_id}: {reason}")]
    SrsLoad {
        /// The circuit id.
        circuit_id: String,
        /// The reader's error.
        reason: String,
    },
    /// An SRS cannot be evicted while partitions use it.
    #[error("SRS {circuit_id} is in use by {ref_count} partitions")]
    SrsInUse {
        /// The circuit id.
        circuit_id: String,
        /// Live references.
        ref_count: u32,
    },
    /// No job with this id: this daemon (or, with a journal, an earlier run of it) never
    /// issued it.
    #[error("unknown job_id {0:?}: this daemon never issued it")]
    UnknownJob(String),
    /// This daemon issued the id, but the job's result is no longer retained
    /// (`result_retention_secs`, `result_retention_count`).
    #[error("job_id {0:?} expired: its result passed result_retention_secs or result_retention_count and is gone")]
    ExpiredJob(String),
    /// The job journal cannot be written or opened.
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    /// The engine is draining or stopped and accepts no new work.
    #[error("engine is shutting down")]
    ShuttingDown,
    /// The configuration cannot work.
    #[error("invalid config: {0}")]
    Config(String),
}
