//! The engine's vocabulary: proof kinds, priorities, job ids, what a client submits
//! ([`JobSpec`]) and what it gets back ([`JobOutcome`], [`JobTimings`]). Plain Rust types:
//! the server maps them to and from protobuf by hand, so nothing here knows the wire.

use std::fmt;
use std::time::Duration;

use cuzk_groth16::ProofRequest;

/// Which proof a request asks for. The numbering of the wire enum is the server's business.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProofKindId {
    /// PoRep C2 (SealCommit phase 2).
    PorepSealCommit,
    /// SnapDeals (empty sector update).
    SnapDealsUpdate,
    /// One WindowPoSt partition.
    WindowPostPartition,
    /// WinningPoSt.
    WinningPost,
    /// The synthetic PoRep-shaped circuit used by tests and benchmarks.
    Synthetic,
}

impl ProofKindId {
    /// Every kind, in wire order.
    pub const ALL: [ProofKindId; 5] = [
        ProofKindId::PorepSealCommit,
        ProofKindId::SnapDealsUpdate,
        ProofKindId::WindowPostPartition,
        ProofKindId::WinningPost,
        ProofKindId::Synthetic,
    ];

    /// Lowercase name used in metrics labels, logs and status ("porep_seal_commit", ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ProofKindId::PorepSealCommit => "porep_seal_commit",
            ProofKindId::SnapDealsUpdate => "snap_deals_update",
            ProofKindId::WindowPostPartition => "window_post_partition",
            ProofKindId::WinningPost => "winning_post",
            ProofKindId::Synthetic => "synthetic",
        }
    }

    /// Parses [`ProofKindId::as_str`]'s names back.
    pub fn from_name(name: &str) -> Option<ProofKindId> {
        ProofKindId::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// The default priority of this kind (design.md: WinningPoSt CRITICAL, WindowPoSt HIGH,
    /// PoRep and SnapDeals NORMAL; synthetic work NORMAL).
    pub fn default_priority(self) -> Priority {
        match self {
            ProofKindId::WinningPost => Priority::Critical,
            ProofKindId::WindowPostPartition => Priority::High,
            _ => Priority::Normal,
        }
    }
}

impl fmt::Display for ProofKindId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Scheduling priority; a higher one is always served first (`Critical > High > Normal > Low`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Priority {
    /// Background work.
    Low,
    /// Sealing (PoRep, SnapDeals).
    Normal,
    /// WindowPoSt.
    High,
    /// WinningPoSt: a block reward waits on it.
    Critical,
}

impl Priority {
    /// Every priority, highest first.
    pub const ALL: [Priority; 4] = [
        Priority::Critical,
        Priority::High,
        Priority::Normal,
        Priority::Low,
    ];

    /// Lowercase name for metrics labels and status.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Low => "low",
            Priority::Normal => "normal",
            Priority::High => "high",
            Priority::Critical => "critical",
        }
    }

    /// Parses [`Priority::as_str`]'s names back (case-insensitive).
    pub fn from_name(name: &str) -> Option<Priority> {
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a client submits.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The caller's key. With a digest of the payload it names the job: a submit with the
    /// same id and payload attaches to the running or completed job, while the same id with
    /// a different payload (Curio sends every WindowPoSt partition of a deadline under one
    /// id) is a new job. Empty means "no key" (every submit is a new job).
    pub request_id: String,
    /// The proof kind.
    pub kind: ProofKindId,
    /// Priority; `None` takes the kind's default.
    pub priority: Option<Priority>,
    /// The kind-neutral request fields.
    pub request: ProofRequest,
}

/// Where a job is in its life. The last three are final.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum JobState {
    /// Accepted; no partition started yet.
    Queued,
    /// At least one partition is being synthesized or waits for a prover.
    Synthesizing,
    /// At least one partition is on a prover.
    Proving,
    /// All partitions proved; assembling and verifying.
    Assembling,
    /// Finished with a verified proof.
    Completed,
    /// Finished with an error.
    Failed,
    /// Cancelled by a client.
    Cancelled,
}

impl JobState {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Synthesizing => "synthesizing",
            JobState::Proving => "proving",
            JobState::Assembling => "assembling",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Whether the state is final.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }
}

/// Where the time of a finished job went. Stage sums are over partitions, so they can
/// exceed `total` when partitions ran in parallel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobTimings {
    /// Submission to the start of its first partition.
    pub queue_wait: Duration,
    /// Time spent loading the SRS on behalf of this job (zero when it was resident).
    pub srs_load: Duration,
    /// Sum of partition synthesis times.
    pub synthesis: Duration,
    /// Sum of partition prove times (under the compute token).
    pub compute: Duration,
    /// Assembly and verification.
    pub assembly: Duration,
    /// Submission to completion.
    pub total: Duration,
}

/// The final result of a job.
#[derive(Clone, Debug)]
pub struct JobOutcome {
    /// The job.
    pub job_id: String,
    /// The caller's request id.
    pub request_id: String,
    /// The proof kind.
    pub kind: ProofKindId,
    /// `Completed`, `Failed` or `Cancelled`.
    pub state: JobState,
    /// Proof bytes (empty unless completed).
    pub proof: Vec<u8>,
    /// Why it failed or was cancelled (empty when completed).
    pub error: String,
    /// True for a failure that a retry elsewhere or later may fix (the drain timeout at
    /// shutdown passed, no healthy device, a parameters file that cannot load); false when
    /// completed or cancelled, and for failures that the request itself causes.
    pub retryable: bool,
    /// Where the time went.
    pub timings: JobTimings,
}

/// What [`crate::Engine::submit`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubmitOutcome {
    /// The job id (an existing one when `attached`).
    pub job_id: String,
    /// Active jobs ahead of this one in scheduling order.
    pub queue_position: u32,
    /// The device(s) that will prove it ("gpu:0", "cpu"); empty if not known yet.
    pub assigned_device: String,
    /// True when the request id and payload matched a running or completed job.
    pub attached: bool,
}

/// What [`crate::Engine::await_job`] returns.
#[derive(Clone, Debug)]
pub enum AwaitOutcome {
    /// The job finished.
    Finished(std::sync::Arc<JobOutcome>),
    /// The timeout passed first; the job keeps running.
    Timeout,
}
