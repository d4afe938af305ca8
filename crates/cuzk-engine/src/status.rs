//! [`EngineStatus`]: a snapshot of the engine for `GetStatus`, `/status` and `cuzk status`:
//! devices, SRS entries with their true tiers, per-kind queues, partitions per stage,
//! memory reserved against the budget, and lifetime totals.

use std::time::Duration;

use crate::srs_manager::SrsStatus;
use crate::{Priority, ProofKindId};

/// One device.
#[derive(Clone, Debug)]
pub struct DeviceStatus {
    /// Engine name ("gpu:0", "cpu").
    pub name: String,
    /// Hardware name.
    pub hardware: String,
    /// Whether it is a GPU.
    pub is_gpu: bool,
    /// Ordinal.
    pub ordinal: u32,
    /// Device memory (0 for the CPU).
    pub vram_total_bytes: u64,
    /// Device memory held by recorded constraint matrices (a, b, c computed on the
    /// device), beside the resident SRSs.
    pub matrices_vram_bytes: u64,
    /// Device memory the backend may hold in all (its VRAM budget; 0 for the CPU).
    pub vram_budget_bytes: u64,
    /// Device memory the backend holds now (SRSs, matrices, slots, scratch).
    pub vram_used_bytes: u64,
    /// How the backend proves (the GPU's mode within its budget, e.g. "srs streamed, 1
    /// lean worker (2097152-point chunks)"); empty before the first shape or for the CPU.
    pub proving_mode: String,
    /// The backend's counts of how its proves went (`Backend::counters`), for benchmarks.
    pub counters: Vec<(&'static str, u64)>,
    /// Prove workers on it.
    pub workers: usize,
    /// Time spent under its compute token since start.
    pub busy: Duration,
    /// The job a worker holds now, or empty.
    pub current_job_id: String,
    /// That job's kind.
    pub current_kind: Option<ProofKindId>,
    // Fault handling (see faults.rs).
    /// The CPU fallback device: proves only partitions no in-service device may take.
    pub fallback: bool,
    /// A critical lane: proves only CRITICAL partitions, beside its GPU's regular device
    /// (`DeviceSpec::critical_only`).
    pub critical_only: bool,
    /// False once faults took the device out of service; no partition goes to it then.
    pub in_service: bool,
    /// Why it is out of service (empty while in service).
    pub out_of_service_reason: String,
    /// How long it has been out of service.
    pub out_of_service_for: Option<Duration>,
    /// Faults since start: backend errors, panics, hung calls, proofs that failed
    /// verification.
    pub faults_total: u64,
    /// The last fault's reason (empty if none).
    pub last_fault: String,
}

/// Jobs of one kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindQueue {
    /// The kind.
    pub kind: ProofKindId,
    /// Jobs accepted and not started.
    pub pending: u32,
    /// Jobs started and not finished.
    pub in_progress: u32,
}

/// The whole snapshot.
#[derive(Clone, Debug)]
pub struct EngineStatus {
    /// Prover devices.
    pub devices: Vec<DeviceStatus>,
    /// SRS entries.
    pub srs: Vec<SrsStatus>,
    /// Per-kind job counts.
    pub queues: Vec<KindQueue>,
    /// Partitions waiting for synthesis, per priority (highest first).
    pub queued_by_priority: Vec<(Priority, u64)>,
    /// Partitions per stage ("queued", "synthesizing", "ready", "proving", "assembling").
    pub partitions_by_stage: Vec<(&'static str, u64)>,
    /// Jobs accepted and not finished.
    pub active_jobs: u64,
    /// Finished results kept for `AwaitProof`.
    pub retained_results: u64,
    /// Jobs completed since start.
    pub total_completed: u64,
    /// Jobs failed since start.
    pub total_failed: u64,
    /// Jobs cancelled since start.
    pub total_cancelled: u64,
    /// Time since start.
    pub uptime: Duration,
    /// Request payload bytes of jobs accepted and not finished (`max_queued_bytes`).
    pub queued_payload_bytes: u64,
    /// Host bytes reserved by partitions in flight.
    pub memory_reserved_bytes: u64,
    /// Host bytes partitions in flight may reserve: the host memory budget less the
    /// devices' pinned staging.
    pub memory_limit_bytes: u64,
    /// False once a drain has begun.
    pub accepting: bool,
    /// The host-memory ledger by item, against its one budget.
    pub memory_ledger: crate::state::MemoryLedger,
    /// Which circuits the parameter files can prove (readiness).
    pub params: crate::params_check::ParamsSummary,
}
