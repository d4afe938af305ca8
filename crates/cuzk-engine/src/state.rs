//! The engine's shared state behind one lock: the job tracker (jobs by id, request-id
//! idempotency, bounded retention of finished results), the two scheduling queues
//! (partitions to synthesize, synthesized partitions waiting for a prover) ordered
//! priority first, then oldest job, then partition index, and the host-memory budget with
//! its RAII [`Reservation`]s. Workers live in `workers.rs`; the public API in `engine.rs`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{Assignment, PartitionedProof, Proof, VerifyingKey};
use parking_lot::{Condvar, Mutex};
use tokio::sync::watch;
use tracing::{info, warn};

use crate::device::Device;
use crate::faults::{JobFaults, Route};
use crate::metrics::{Ending, Metrics};
use crate::srs_manager::{SrsLease, SrsManager};
use crate::timeline::Timeline;
use crate::{EngineConfig, JobOutcome, JobState, JobTimings, KindRegistry, Priority, ProofKindId};

/// Scheduling order: higher priority first, then the older job, then the lower partition.
pub(crate) type TaskKey = (Reverse<Priority>, u64, u32);

/// An accepted job; immutable after submission.
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

/// Everything behind the engine's lock.
#[derive(Default)]
pub(crate) struct State {
    /// Every known job: active ones and retained finished ones.
    pub jobs: HashMap<String, Arc<Job>>,
    pub active: HashMap<String, Progress>,
    pub by_request: HashMap<String, String>,
    pub finished: VecDeque<(String, Instant)>,
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
    /// Makes job ids unique across daemon restarts.
    pub id_prefix: String,
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
    /// Takes the next partition to synthesize if look-ahead and the memory budget allow,
    /// strictly in scheduling order (a big partition at the head is not overtaken by a
    /// small one behind it). A partition bigger than the whole budget runs alone.
    pub fn pick_synthesis(
        self: &Arc<Self>,
        st: &mut State,
    ) -> Option<(Arc<Job>, u32, Reservation)> {
        if st.in_synthesis + st.ready.len() >= self.cfg.synthesis_workers + self.cfg.handoff_depth {
            return None;
        }
        let (_, job) = st.synth_queue.first_key_value()?;
        let bytes = job.host_bytes;
        if st.reserved_bytes > 0 && st.reserved_bytes + bytes > self.cfg.host_memory_budget_bytes {
            return None;
        }
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
    /// it and retains the result. Returns the synthesized partitions it held, which the
    /// caller drops after releasing the lock. A job that is no longer active is left alone.
    pub fn finish_job(
        &self,
        st: &mut State,
        job_id: &str,
        state: JobState,
        proof: Vec<u8>,
        error: String,
        assembly: Duration,
    ) -> Vec<Ready> {
        let Some(progress) = st.active.remove(job_id) else {
            return Vec::new();
        };
        let Some(job) = st.jobs.get(job_id).cloned() else {
            return Vec::new();
        };
        st.synth_queue.retain(|_, j| j.id != job_id);
        let keys: Vec<TaskKey> = st
            .ready
            .iter()
            .filter(|(_, r)| r.job.id == job_id)
            .map(|(k, _)| *k)
            .collect();
        let dropped: Vec<Ready> = keys.iter().filter_map(|k| st.ready.remove(k)).collect();

        let now = Instant::now();
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
                warn!(job = %job.id, kind = %job.kind, state = state.as_str(), reason = %error, "job ended")
            }
        }
        let outcome = JobOutcome {
            job_id: job.id.clone(),
            request_id: job.request_id.clone(),
            kind: job.kind,
            state,
            proof,
            error,
            timings,
        };
        job.outcome.send_replace(Some(Arc::new(outcome)));
        st.finished.push_back((job.id.clone(), now));
        self.prune_finished(st, now);
        self.synth_cv.notify_all();
        dropped
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
            if let Some(job) = st.jobs.remove(&id) {
                if st.by_request.get(&job.request_id) == Some(&id) {
                    st.by_request.remove(&job.request_id);
                }
            }
        }
    }
}
