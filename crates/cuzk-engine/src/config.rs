//! [`EngineConfig`]: every knob of the engine with its default. The TOML file format and
//! the CLI flags that fill it belong to the server and binary crates.

use std::path::PathBuf;
use std::time::Duration;

use crate::sizing::{Machine, Sizing};

/// The engine's settings. `Default` gives the documented defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct EngineConfig {
    /// Directory of parameter files (`FIL_PROOFS_PARAMETER_CACHE`); synthetic parameters
    /// are generated here on first use.
    pub param_dir: PathBuf,
    /// Partitions synthesized at once (CPU threads of the synthesis pool). Default: from
    /// the cores ([`crate::sizing`]).
    pub synthesis_workers: usize,
    /// Synthesis threads beyond `synthesis_workers` that take CRITICAL partitions only
    /// (WinningPoSt), so that a block reward never waits for a long PoRep partition or a
    /// cold SRS load on the general pool. They skip the look-ahead bound and may overdraw
    /// the host memory budget by one partition each (CRITICAL partitions are small); 0
    /// turns the lane off.
    pub critical_synthesis_workers: usize,
    /// Synthesized partitions allowed to wait for a prover beyond those being proved: how
    /// far synthesis runs ahead of the provers.
    pub handoff_depth: usize,
    /// Prove workers per GPU; they share the device's compute token.
    pub gpu_workers_per_device: usize,
    /// Prove workers on the CPU backend when no GPU is given.
    pub cpu_workers: usize,
    /// Host bytes that synthesized partitions may hold at once (admission budget).
    /// Default: from the host memory ([`crate::sizing`]), as are the next two.
    pub host_memory_budget_bytes: u64,
    /// Host bytes of resident SRSs before idle ones are evicted least-recently-used first.
    /// An SRS larger than this that every device streams is streamed from its file instead
    /// of held (`engine_params.rs`, `SrsManager::release_to_file`).
    pub srs_budget_bytes: u64,
    /// Host bytes of recorded constraint systems (one per circuit shape, used to
    /// synthesize later partitions without building linear combinations); 0 turns
    /// recording off.
    pub recorded_r1cs_budget_bytes: u64,
    /// Check every SRS point's curve and subgroup membership on load (slow).
    pub srs_check_points: bool,
    /// Jobs accepted and not finished at most; a submit beyond it is refused with
    /// [`crate::EngineError::ResourceExhausted`] (attaching to an existing job is not).
    pub max_queued_jobs: usize,
    /// Request payload bytes (vanilla proofs and the other request fields) of jobs accepted
    /// and not finished at most; a submit beyond it is refused like `max_queued_jobs`. A
    /// job bigger than the whole limit is still accepted when nothing else is queued.
    pub max_queued_bytes: u64,
    /// How long finished results are kept for `AwaitProof` and re-submits.
    pub result_retention: Duration,
    /// How many finished results are kept at most.
    pub result_retention_count: usize,
    /// Timeline events kept (a ring; the oldest are dropped).
    pub timeline_capacity: usize,
    // Fault handling (faults.rs).
    /// Consecutive faults (backend errors or panics, proofs that fail verification)
    /// after which a device is taken out of service.
    pub device_fault_threshold: u32,
    /// Longest a GPU backend call may run: past it the partition is proved elsewhere and
    /// the device, presumed hung, goes out of service. CPU backends are not watched.
    pub prove_timeout: Duration,
    /// With only GPUs given, add a CPU backend device that proves the partitions no
    /// in-service GPU may take (after faults) and retries those whose proof failed
    /// verification.
    pub cpu_fallback: bool,
    /// Directory of the job journal (`journal.rs`): accepted jobs and finished results
    /// survive a crash and are replayed at start. Empty (the engine's default; the
    /// daemon's is a state directory) runs without one.
    pub journal_dir: PathBuf,
    /// This engine's name, the first part of every job id it issues (`NAME.…`), so that a
    /// job id names the daemon that holds it (a balancer in front of many routes
    /// `AwaitProof` by it). Empty: ids without a name. Letters, digits, `_` and `-`.
    pub name: String,
}

impl Default for EngineConfig {
    /// The documented defaults, with the synthesis pool and the memory budgets sized for
    /// this machine ([`crate::sizing`]).
    fn default() -> Self {
        let sized = Sizing::for_machine(Machine::detect());
        EngineConfig {
            param_dir: std::env::var_os("FIL_PROOFS_PARAMETER_CACHE")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/var/tmp/filecoin-proof-parameters")),
            synthesis_workers: sized.synthesis_workers,
            critical_synthesis_workers: 1,
            handoff_depth: 2,
            gpu_workers_per_device: 2,
            cpu_workers: 1,
            host_memory_budget_bytes: sized.host_memory_budget_bytes,
            srs_budget_bytes: sized.srs_budget_bytes,
            recorded_r1cs_budget_bytes: sized.recorded_r1cs_budget_bytes,
            srs_check_points: false,
            max_queued_jobs: 1000,
            max_queued_bytes: 16 << 30,
            result_retention: Duration::from_secs(3600),
            result_retention_count: 1000,
            timeline_capacity: 100_000,
            device_fault_threshold: 3,
            prove_timeout: Duration::from_secs(600),
            cpu_fallback: true,
            journal_dir: PathBuf::new(),
            name: String::new(),
        }
    }
}

impl EngineConfig {
    /// Checks the settings that would make the engine unable to run.
    ///
    /// # Errors
    /// A message naming the key.
    pub fn validate(&self) -> Result<(), String> {
        if self.synthesis_workers == 0 {
            return Err("synthesis_workers must be at least 1".into());
        }
        if self.gpu_workers_per_device == 0 {
            return Err("gpu_workers_per_device must be at least 1".into());
        }
        if self.cpu_workers == 0 {
            return Err("cpu_workers must be at least 1".into());
        }
        if self.host_memory_budget_bytes == 0 {
            return Err("host_memory_budget_bytes must be positive".into());
        }
        if self.device_fault_threshold == 0 {
            return Err("device_fault_threshold must be at least 1".into());
        }
        if self.prove_timeout.is_zero() {
            return Err("prove_timeout_secs must be positive".into());
        }
        if self.max_queued_jobs == 0 {
            return Err("max_queued_jobs must be at least 1".into());
        }
        if self.max_queued_bytes == 0 {
            return Err("max_queued_bytes must be positive".into());
        }
        if self.result_retention_count == 0 {
            return Err("result_retention_count must be at least 1".into());
        }
        check_name(&self.name)
    }
}

/// The longest engine name: it starts every job id.
pub const MAX_NAME_LEN: usize = 64;

/// Whether `c` may stand in an engine name: letters, digits, `_` and `-`.
pub fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Checks an engine name (see [`EngineConfig::name`]).
///
/// # Errors
/// A message naming `name` and what is wrong with it.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.len() > MAX_NAME_LEN {
        return Err(format!(
            "name {name:?} is longer than {MAX_NAME_LEN} characters"
        ));
    }
    match name.chars().find(|c| !is_name_char(*c)) {
        Some(c) => Err(format!(
            "name {name:?} holds {c:?}: use letters, digits, '_' and '-' only (it starts \
             every job id)"
        )),
        None => Ok(()),
    }
}
