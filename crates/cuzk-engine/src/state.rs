//! The engine's shared state behind one lock: the job tracker (active jobs by id, job
//! identity = request id + payload digest, bounded retention of finished results, the
//! totals that admission control checks), the two scheduling queues (partitions to
//! synthesize, synthesized partitions waiting for a prover) ordered priority first, then
//! oldest job, then partition index, the host-memory budget with its RAII
//! [`Reservation`]s, and how a job ends ([`JobEnd`]). Workers live in `workers.rs`; the
//! public API in `engine.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{Assignment, PartitionedProof, Proof, Synthesizer, VerifyingKey};
use parking_lot::{Condvar, Mutex};
use sha2::{Digest, Sha256};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::device::Device;
use crate::faults::{JobFaults, Route};
use crate::metrics::{Ending, Limit, Metrics};
use crate::srs_manager::{SrsLease, SrsManager};
use crate::timeline::Timeline;
use crate::{
    EngineConfig, EngineError, JobOutcome, JobSpec, JobState, JobTimings, KindRegistry, Priority,
    ProofKindId,
};

/// Scheduling order: higher priority first, then the older job, then the lower partition.
pub(crate) type TaskKey = (Reverse<Priority>, u64, u32);

/// A job's identity: the caller's request id and the digest of its payload.
pub(crate) type Identity = (String, [u8; 32]);

/// How a job ends: the one way to finish it ([`Shared::finish_job`]).
pub(crate) enum JobEnd {
    /// All partitions proved; the assembled proof verified.
    Completed {
        /// The proof bytes the client receives.
        proof: Vec<u8>,
        /// Assembly and verification time.
        assembly: Duration,
    },
    /// It cannot complete.
    Failed {
        /// Why, naming the partition or stage.
        reason: String,
        /// Whether a retry elsewhere or later may succeed (see [`JobOutcome::retryable`]).
        retryable: bool,
    },
    /// A client cancelled it.
    Cancelled {
        /// Why.
        reason: String,
    },
}

impl JobEnd {
    /// A failure the request itself causes: a retry would fail the same way.
    pub fn failed(reason: impl Into<String>) -> JobEnd {
        JobEnd::Failed {
            reason: reason.into(),
            retryable: false,
        }
    }

    /// A failure of this daemon, not of the request: a retry elsewhere or later may succeed.
    pub fn retryable(reason: impl Into<String>) -> JobEnd {
        JobEnd::Failed {
            reason: reason.into(),
            retryable: true,
        }
    }
}

/// An accepted job; immutable after submission. It holds the parsed request, which
/// synthesis and the verification at assembly need; once the job ends only its
/// [`JobOutcome`] is kept.
pub(crate) struct Job {
    pub id: String,
    pub seq: u64,
    pub request_id: String,
    pub digest: [u8; 32],
    pub kind: ProofKindId,
    pub priority: Priority,
    pub proof: Arc<dyn PartitionedProof>,
    pub circuit_id: String,
    pub n_partitions: usize,
    pub host_bytes: u64,
    /// Request payload bytes, counted against `max_queued_bytes` while the job is active.
    pub payload_bytes: u64,
    pub submitted: Instant,
    pub outcome: watch::Sender<Option<Arc<JobOutcome>>>,
}

impl Job {
    pub fn key(&self, partition_idx: u32) -> TaskKey {
        (Reverse(self.priority), self.seq, partition_idx)
    }
}

/// The mutable progress of an active job.
pub(crate) struct Progress {
    pub state: JobState,
    pub proofs: Vec<Option<Proof>>,
    pub proved: usize,
    pub first_start: Option<Instant>,
    pub srs_load: Duration,
    pub synthesis: Duration,
    pub compute: Duration,
    pub vk: Option<VerifyingKey>,
    /// Which device proved each partition, and CPU retries (faults.rs).
    pub faults: JobFaults,
}

/// A synthesized partition waiting for a prover. Its reservation and SRS lease travel
/// with it and are released when it is dropped.
pub(crate) struct Ready {
    pub job: Arc<Job>,
    pub partition_idx: u32,
    /// Shared with a watched backend call, which may outlive its watcher (faults.rs).
    pub asg: Arc<Assignment>,
    pub reservation: Reservation,
    pub lease: SrsLease,
    pub ready_at: Instant,
    /// The devices that may still prove it.
    pub route: Route,
}

/// A finished result kept for `AwaitProof` and re-submits.
pub(crate) struct Retained {
    pub outcome: Arc<JobOutcome>,
    pub digest: [u8; 32],
}

/// Everything behind the engine's lock.
#[derive(Default)]
pub(crate) struct State {
    /// Active jobs (accepted, not finished); the same keys as `active`.
    pub jobs: HashMap<String, Arc<Job>>,
    pub active: HashMap<String, Progress>,
    /// Payload bytes of the active jobs (admission: `max_queued_bytes`).
    pub active_payload_bytes: u64,
    /// Finished results by job id; `finished` orders them oldest first for pruning.
    pub results: HashMap<String, Retained>,
    pub finished: VecDeque<(String, Instant)>,
    /// Identity → the newest job with it (active or retained).
    pub by_identity: HashMap<Identity, String>,
    /// Request id → the newest job submitted under it (active or retained).
    pub by_request: HashMap<String, String>,
    pub synth_queue: BTreeMap<TaskKey, Arc<Job>>,
    pub ready: BTreeMap<TaskKey, Ready>,
    pub in_synthesis: usize,
    pub in_proving: usize,
    pub in_assembly: usize,
    pub reserved_bytes: u64,
    pub accepting: bool,
    pub stopping: bool,
    pub next_seq: u64,
}

/// State shared by the engine handle and every worker thread.
pub(crate) struct Shared {
    pub cfg: EngineConfig,
    pub registry: Arc<KindRegistry>,
    /// How this engine synthesizes: its own recorded shapes (within
    /// `recorded_r1cs_budget_bytes`), deferral and pool gate, shared by its workers and
    /// by no other engine.
    pub synth: Synthesizer,
    pub srs: Arc<SrsManager>,
    pub metrics: Metrics,
    pub timeline: Timeline,
    pub devices: Vec<Arc<Device>>,
    pub state: Mutex<State>,
    /// Synthesis workers wait here for work, budget or look-ahead room.
    pub synth_cv: Condvar,
    /// Prove workers wait here for synthesized partitions.
    pub prove_cv: Condvar,
    pub started: Instant,
    /// Makes job ids unique across daemon restarts and across daemons: the start time
    /// (ms, hex) and 64 random bits from the OS (hex).
    pub id_prefix: String,
    /// The job journal (`journal.rs`), when `journal_dir` is set, and the id prefixes of
    /// the earlier runs it remembers.
    pub journal: Option<crate::journal::Journal>,
    pub prior_prefixes: Vec<String>,
    /// The threads of CRITICAL work's host-parallel steps (its synthesis, its prove's
    /// fill and copies): a pool of its own, so that a WinningPoSt's parallel loops do not
    /// queue behind the main load's in the process-wide pool, whose threads finish a
    /// 32 GiB PoRep partition's fill (~1 s) before they take anything else. `None` where
    /// the engine has no critical synthesis worker and no critical-only device.
    pub critical_pool: Option<Arc<rayon::ThreadPool>>,
}

/// Runs `f` in `pool` when there is one, else here.
pub(crate) fn in_pool<R: Send>(
    pool: Option<&rayon::ThreadPool>,
    f: impl FnOnce() -> R + Send,
) -> R {
    match pool {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// Threads in [`Shared::critical_pool`]: a WinningPoSt's loops are small (2^19 rows).
pub(crate) const CRITICAL_POOL_THREADS: usize = 4;

impl Shared {
    /// Runs `f` in the critical pool where `critical` and the pool exists, else here.
    pub(crate) fn on_pool<R: Send>(&self, critical: bool, f: impl FnOnce() -> R + Send) -> R {
        in_pool(self.pool_for(critical).as_deref(), f)
    }

    /// The critical pool where `critical` and it exists.
    pub(crate) fn pool_for(&self, critical: bool) -> Option<Arc<rayon::ThreadPool>> {
        self.critical_pool.clone().filter(|_| critical)
    }
}

/// The host-memory ledger: what the process holds, by item, and the one budget their sum
/// stays under (`host_memory_budget_bytes + srs_budget_bytes + recorded_r1cs_budget_bytes`,
/// by default the machine's memory less an eighth: `sizing.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryLedger {
    /// The whole budget.
    pub budget_bytes: u64,
    /// Host copies of SRSs (0 for one released while every device holds it).
    pub srs_bytes: u64,
    /// Recorded constraint systems (the shapes whose witness-only synthesis they allow).
    pub recorded_bytes: u64,
    /// The devices' pinned staging.
    pub pinned_bytes: u64,
    /// What the devices' compute calls allocate on the host (a, b, c evaluated there).
    pub device_compute_bytes: u64,
    /// Reserved by partitions in flight.
    pub partitions_bytes: u64,
}

impl MemoryLedger {
    /// The items' sum.
    pub fn total_bytes(&self) -> u64 {
        self.srs_bytes
            + self.recorded_bytes
            + self.pinned_bytes
            + self.device_compute_bytes
            + self.partitions_bytes
    }

    /// What the items held for good (SRS host copies, recorded shapes, the devices'
    /// staging) take beyond the whole budget, in words with each figure, or `None` when
    /// they fit. Partitions then run one at a time and the process holds more than its
    /// budget: on a host of 64 GiB, a 32 GiB PoRep SRS streamed to a 16 GiB card keeps
    /// its 47.4 GB host copy beside the 7.3 GB shape and 22.3 GB of staging.
    pub fn overdrawn(&self) -> Option<String> {
        let fixed =
            self.srs_bytes + self.recorded_bytes + self.pinned_bytes + self.device_compute_bytes;
        let gb = |b: u64| b as f64 / 1e9;
        (fixed > self.budget_bytes).then(|| {
            format!(
                "host memory budget overdrawn: SRS host copies {:.1} GB, recorded shapes {:.1} GB, \
                 device staging {:.1} GB and device compute {:.1} GB hold {:.1} GB of a {:.1} GB budget; \
                 partitions run one at a time and the process exceeds its budget",
                gb(self.srs_bytes),
                gb(self.recorded_bytes),
                gb(self.pinned_bytes),
                gb(self.device_compute_bytes),
                gb(fixed),
                gb(self.budget_bytes)
            )
        })
    }
}

/// Host bytes reserved from the budget; returned (and waiters woken) on drop.
/// Never drop one while holding the state lock: its drop takes that lock.
pub(crate) struct Reservation {
    shared: Arc<Shared>,
    bytes: u64,
}

impl Drop for Reservation {
    fn drop(&mut self) {
        let mut st = self.shared.state.lock();
        st.reserved_bytes = st.reserved_bytes.saturating_sub(self.bytes);
        drop(st);
        self.shared.synth_cv.notify_all();
    }
}

impl Shared {
    /// Whether synthesis worker `worker_idx` belongs to the CRITICAL lane: the
    /// `critical_synthesis_workers` threads numbered after the general pool.
    pub fn is_critical_lane(&self, worker_idx: usize) -> bool {
        worker_idx >= self.cfg.synthesis_workers
    }

    /// Host bytes partitions in flight may reserve now, from the one host-memory ledger
    /// ([`Shared::memory_ledger`]): `host_memory_budget_bytes` less what the devices hold
    /// on the host (pinned staging: 9.4 GB per GPU worker at 2^27, 22.3 GB when it stages
    /// a, b, c too, which it then evaluates into that staging; what a backend's compute
    /// allocates besides, `Backend::host_compute_bytes`), and never more than the whole
    /// budget (the three budgets' sum)
    /// less everything else the ledger holds. Read at each admission: the devices' parts
    /// appear on their first proves.
    pub fn partition_budget(&self) -> u64 {
        let ledger = self.memory_ledger();
        let devices = ledger.pinned_bytes + ledger.device_compute_bytes;
        let by_item = self.cfg.host_memory_budget_bytes.saturating_sub(devices);
        let by_total = ledger
            .budget_bytes
            .saturating_sub(devices + ledger.srs_bytes + ledger.recorded_bytes);
        by_item.min(by_total)
    }

    /// What the process holds in host memory, by item, against its one budget.
    pub fn memory_ledger(&self) -> MemoryLedger {
        let sum = |f: fn(&dyn cuzk_groth16::Backend) -> u64| -> u64 {
            self.devices.iter().map(|d| f(&*d.spec.backend)).sum()
        };
        MemoryLedger {
            budget_bytes: self.cfg.host_memory_budget_bytes
                + self.cfg.srs_budget_bytes
                + self.cfg.recorded_r1cs_budget_bytes,
            srs_bytes: self.srs.resident_bytes(),
            recorded_bytes: self.synth.recorded_bytes(),
            pinned_bytes: sum(|b| b.host_pinned_bytes()),
            device_compute_bytes: sum(|b| b.host_compute_bytes()),
            partitions_bytes: 0,
        }
    }

    /// Takes the next partition to synthesize for worker `worker_idx` if look-ahead and the
    /// memory budget allow, strictly in scheduling order (a big partition at the head is
    /// not overtaken by a small one behind it). A partition bigger than the whole budget
    /// runs alone. A CRITICAL-lane worker takes CRITICAL partitions only, without the
    /// look-ahead bound or the budget check: the lane exists so that CRITICAL work never
    /// waits for the general pool, and it overdraws the budget by at most one (small)
    /// partition per lane worker.
    pub fn pick_synthesis(
        self: &Arc<Self>,
        st: &mut State,
        worker_idx: usize,
    ) -> Option<(Arc<Job>, u32, Reservation)> {
        let (key, job) = st.synth_queue.first_key_value()?;
        if self.is_critical_lane(worker_idx) {
            if key.0 .0 != Priority::Critical {
                return None;
            }
        } else {
            let look_ahead = self.cfg.synthesis_workers + self.cfg.handoff_depth;
            if st.in_synthesis + st.ready.len() >= look_ahead {
                return None;
            }
            if st.reserved_bytes > 0 && st.reserved_bytes + job.host_bytes > self.partition_budget()
            {
                return None;
            }
        }
        let bytes = job.host_bytes;
        let (key, job) = st.synth_queue.pop_first()?;
        st.reserved_bytes += bytes;
        st.in_synthesis += 1;
        if let Some(progress) = st.active.get_mut(&job.id) {
            if progress.state == JobState::Queued {
                progress.state = JobState::Synthesizing;
            }
            progress.first_start.get_or_insert_with(Instant::now);
        }
        Some((
            job,
            key.2,
            Reservation {
                shared: self.clone(),
                bytes,
            },
        ))
    }

    /// Ends an active job: removes its queued partitions, publishes the outcome, counts
    /// it and retains the result (the outcome, not the parsed request). Returns the
    /// synthesized partitions it held, which the caller drops after releasing the lock. A
    /// job that is no longer active is left alone.
    pub fn finish_job(&self, st: &mut State, job_id: &str, end: JobEnd) -> Vec<Ready> {
        let Some(progress) = st.active.remove(job_id) else {
            return Vec::new();
        };
        let Some(job) = st.jobs.remove(job_id) else {
            return Vec::new();
        };
        st.active_payload_bytes = st.active_payload_bytes.saturating_sub(job.payload_bytes);
        st.synth_queue.retain(|_, j| j.id != job_id);
        let keys: Vec<TaskKey> = st
            .ready
            .iter()
            .filter(|(_, r)| r.job.id == job_id)
            .map(|(k, _)| *k)
            .collect();
        let dropped: Vec<Ready> = keys.iter().filter_map(|k| st.ready.remove(k)).collect();

        let now = Instant::now();
        let (state, proof, error, retryable, assembly) = match end {
            JobEnd::Completed { proof, assembly } => {
                (JobState::Completed, proof, String::new(), false, assembly)
            }
            JobEnd::Failed { reason, retryable } => (
                JobState::Failed,
                Vec::new(),
                reason,
                retryable,
                Duration::ZERO,
            ),
            JobEnd::Cancelled { reason } => (
                JobState::Cancelled,
                Vec::new(),
                reason,
                false,
                Duration::ZERO,
            ),
        };
        let timings = JobTimings {
            queue_wait: progress
                .first_start
                .unwrap_or(now)
                .saturating_duration_since(job.submitted),
            srs_load: progress.srs_load,
            synthesis: progress.synthesis,
            compute: progress.compute,
            assembly,
            total: now.saturating_duration_since(job.submitted),
        };
        let ending = match state {
            JobState::Completed => Ending::Completed,
            JobState::Cancelled => Ending::Cancelled,
            _ => Ending::Failed,
        };
        self.metrics.job_ended(job.kind, ending, timings.total);
        match ending {
            Ending::Completed => {
                info!(job = %job.id, kind = %job.kind, total_ms = timings.total.as_millis() as u64, "job completed")
            }
            _ => {
                warn!(job = %job.id, kind = %job.kind, state = state.as_str(), retryable, reason = %error, "job ended")
            }
        }
        let outcome = Arc::new(JobOutcome {
            job_id: job.id.clone(),
            request_id: job.request_id.clone(),
            kind: job.kind,
            state,
            proof,
            error,
            retryable,
            timings,
        });
        if let Some(journal) = &self.journal {
            journal.finished(&outcome, &job.digest);
        }
        job.outcome.send_replace(Some(outcome.clone()));
        st.results.insert(
            job.id.clone(),
            Retained {
                outcome,
                digest: job.digest,
            },
        );
        st.finished.push_back((job.id.clone(), now));
        self.prune_finished(st, now);
        self.synth_cv.notify_all();
        dropped
    }

    /// Admission control: refuses a new job of `payload_bytes` beyond `max_queued_jobs` or
    /// `max_queued_bytes` (one job bigger than the byte limit runs when it is alone).
    pub fn admit(&self, st: &State, payload_bytes: u64) -> Result<(), EngineError> {
        let cfg = &self.cfg;
        let refuse = |limit: Limit, message: String| {
            self.metrics.submit_refused(limit);
            warn!(limit = limit.as_str(), "submit refused: {message}");
            Err(EngineError::ResourceExhausted(message))
        };
        if st.jobs.len() >= cfg.max_queued_jobs {
            return refuse(
                Limit::MaxQueuedJobs,
                format!(
                    "{} jobs queued or running, max_queued_jobs is {}",
                    st.jobs.len(),
                    cfg.max_queued_jobs
                ),
            );
        }
        let total = st.active_payload_bytes + payload_bytes;
        if !st.jobs.is_empty() && total > cfg.max_queued_bytes {
            return refuse(
                Limit::MaxQueuedBytes,
                format!(
                    "{} payload bytes queued or running plus {payload_bytes} would pass max_queued_bytes {}",
                    st.active_payload_bytes, cfg.max_queued_bytes
                ),
            );
        }
        Ok(())
    }

    /// Forgets finished results beyond the retention count or age.
    pub fn prune_finished(&self, st: &mut State, now: Instant) {
        while let Some((id, at)) = st.finished.front() {
            let too_many = st.finished.len() > self.cfg.result_retention_count;
            let too_old = now.saturating_duration_since(*at) > self.cfg.result_retention;
            if !(too_many || too_old) {
                break;
            }
            let id = id.clone();
            st.finished.pop_front();
            let Some(retained) = st.results.remove(&id) else {
                continue;
            };
            let request_id = &retained.outcome.request_id;
            if st.by_request.get(request_id) == Some(&id) {
                st.by_request.remove(request_id);
            }
            let identity = (request_id.clone(), retained.digest);
            if st.by_identity.get(&identity) == Some(&id) {
                st.by_identity.remove(&identity);
            }
        }
    }
}

/// The request's payload bytes, for `max_queued_bytes`.
pub(crate) fn payload_bytes(spec: &JobSpec) -> u64 {
    let r = &spec.request;
    let proofs: usize = r.vanilla_proofs.iter().map(Vec::len).sum();
    (r.vanilla_proof.len()
        + proofs
        + r.randomness.len()
        + r.comm_r_old.len()
        + r.comm_r_new.len()
        + r.comm_d_new.len()) as u64
}

/// The payload digest of a job's identity: kind and every request field, length-prefixed.
pub(crate) fn payload_digest(spec: &JobSpec) -> [u8; 32] {
    let r = &spec.request;
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(spec.kind.as_str().as_bytes());
    field(&r.sector_size.to_le_bytes());
    field(&r.registered_proof.to_le_bytes());
    field(&r.vanilla_proof);
    field(&(r.vanilla_proofs.len() as u64).to_le_bytes());
    for p in &r.vanilla_proofs {
        field(p);
    }
    field(&r.sector_number.to_le_bytes());
    field(&r.miner_id.to_le_bytes());
    field(&r.randomness);
    field(&r.partition_index.to_le_bytes());
    field(&r.comm_r_old);
    field(&r.comm_r_new);
    field(&r.comm_d_new);
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::MemoryLedger;

    const GIB: u64 = 1 << 30;

    /// A 64 GiB host (its derived budget, 56 GiB) streaming a 32 GiB PoRep SRS to a 16 GiB
    /// card is overdrawn before any partition, and says by what; the same items on a
    /// 128 GiB host (112 GiB) are not.
    #[test]
    fn fixed_items_beyond_the_budget_are_named() {
        let ledger = |budget_bytes| MemoryLedger {
            budget_bytes,
            srs_bytes: 47_373_896_256,
            recorded_bytes: 7_342_529_920,
            pinned_bytes: 22_300_000_000,
            device_compute_bytes: 0,
            partitions_bytes: 4 * GIB,
        };
        let why = ledger(56 * GIB).overdrawn().expect("overdrawn");
        assert!(
            why.contains("SRS host copies 47.4 GB")
                && why.contains("recorded shapes 7.3 GB")
                && why.contains("device staging 22.3 GB")
                && why.contains("hold 77.0 GB of a 60.1 GB budget"),
            "{why}"
        );
        assert_eq!(ledger(112 * GIB).overdrawn(), None);
    }
}
