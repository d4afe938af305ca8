//! [`Engine`]: the public handle. Starts the worker threads, accepts jobs (job identity =
//! request id + payload digest, admission limits, parsing through the [`KindRegistry`]),
//! awaits, cancels, reports status and metrics; preloading and evicting parameters live in
//! `engine_params.rs`, the drain on shutdown in `engine_drain.rs`. Any front end (the gRPC
//! server, `cuzk bench batch` in-process) drives the engine through this type only.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cuzk_groth16::{SrsOptions, Synthesizer};
use parking_lot::Mutex;
use rand::RngCore;
use tokio::sync::watch;
use tracing::info;

use crate::device::DeviceSpec;
use crate::faults::JobFaults;
use crate::journal::{Journal, Replayed};
use crate::metrics::{Ending, Gauges, Metrics};
use crate::srs_manager::SrsManager;
use crate::state::{payload_bytes, payload_digest, Job, JobEnd, Progress, Shared, State};
use crate::status::{EngineStatus, KindQueue};
use crate::timeline::{Timeline, TimelineEvent};
use crate::workers::{prove_worker, synthesis_worker};
use crate::{
    AwaitOutcome, EngineConfig, EngineError, JobSpec, JobState, KindRegistry, Priority,
    SubmitOutcome,
};

/// The proving engine. Cheap to share behind an `Arc`; all methods take `&self`.
pub struct Engine {
    pub(crate) shared: Arc<Shared>,
}

impl Engine {
    /// Starts the worker threads: `synthesis_workers` synthesis threads,
    /// `critical_synthesis_workers` more for CRITICAL partitions only and, per device, its
    /// prove workers. With no devices the CPU backend proves with `cpu_workers` workers.
    ///
    /// # Errors
    /// [`EngineError::Config`] for an unusable config or a thread that cannot start.
    pub fn start(
        cfg: EngineConfig,
        registry: KindRegistry,
        devices: Vec<DeviceSpec>,
    ) -> Result<Engine, EngineError> {
        cfg.validate().map_err(EngineError::Config)?;
        // Partitions of recorded shapes leave a, b, c to the backend: the GPU computes them
        // from the witness it uploads (or the host does when the matrices do not fit), the
        // CPU backend evaluates them itself; either way the host holds no a, b, c between
        // synthesis and the prove.
        let synth = Synthesizer::new(cfg.recorded_r1cs_budget_bytes).with_defer(true);
        let devices = crate::device::build_devices(&cfg, devices);
        let registry = Arc::new(registry);
        let srs = Arc::new(SrsManager::new(
            cfg.param_dir.clone(),
            cfg.srs_budget_bytes,
            SrsOptions {
                check_points: cfg.srs_check_points,
            },
            registry.clone(),
        ));
        let stream_devices = devices.clone();
        srs.set_stream_rule(Box::new(move |s| {
            crate::engine_params::every_device_streams(&stream_devices, s)
        }));
        let (journal, replayed) = if cfg.journal_dir.as_os_str().is_empty() {
            (None, Replayed::default())
        } else {
            let (j, r) = Journal::open(
                &cfg.journal_dir,
                cfg.result_retention,
                cfg.result_retention_count,
            )?;
            (Some(j), r)
        };
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        // This run's ids: `[NAME.]EPOCH-RANDOM-SEQ`, unique across restarts and daemons.
        let run = format!("{epoch_ms:x}-{:016x}", rand::rngs::OsRng.next_u64());
        let id_prefix = if cfg.name.is_empty() {
            run
        } else {
            format!("{}.{run}", cfg.name)
        };
        let critical_pool = critical_pool(&cfg, &devices)?;
        let shared = Arc::new(Shared {
            critical_pool,
            timeline: Timeline::new(cfg.timeline_capacity),
            cfg,
            registry,
            synth,
            srs,
            metrics: Metrics::new(),
            devices,
            state: Mutex::new(State {
                accepting: true,
                ..State::default()
            }),
            synth_cv: Default::default(),
            prove_cv: Default::default(),
            started: Instant::now(),
            id_prefix,
            journal,
            prior_prefixes: replayed.prefixes.clone(),
        });
        if let Some(journal) = &shared.journal {
            journal.started(&shared.id_prefix)?;
        }
        let spawn = |name: String, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name)
                .spawn(f)
                .map(|_| ())
                .map_err(|e| EngineError::Config(format!("cannot start worker thread: {e}")))
        };
        // The CRITICAL lane's threads are numbered after the general pool's.
        for i in 0..shared.cfg.synthesis_workers + shared.cfg.critical_synthesis_workers {
            let s = shared.clone();
            spawn(
                format!("cuzk-synth-{i}"),
                Box::new(move || synthesis_worker(s, i)),
            )?;
        }
        for device in &shared.devices {
            for w in 0..device.workers {
                let (s, d) = (shared.clone(), device.clone());
                spawn(
                    format!("cuzk-{}-w{w}", device.spec.name),
                    Box::new(move || prove_worker(s, d, w)),
                )?;
            }
        }
        info!(
            synthesis_workers = shared.cfg.synthesis_workers,
            critical_synthesis_workers = shared.cfg.critical_synthesis_workers,
            devices = ?shared.devices.iter().map(|d| format!("{}x{}", d.spec.name, d.workers)).collect::<Vec<_>>(),
            kinds = ?shared.registry.kinds(),
            "engine started"
        );
        shared.srs.params().log_at_start();
        let engine = Engine { shared };
        engine.replay(replayed);
        Ok(engine)
    }

    /// Accepts a job, or attaches to the running or completed job of the same identity
    /// (`spec.request_id` and the same payload). The same request id with another payload
    /// is a new job; so is a repeat of one whose job failed or was cancelled. Parses the
    /// request (may take a while for large payloads; call from a blocking context).
    ///
    /// # Errors
    /// [`EngineError::InvalidRequest`] naming the bad field, [`EngineError::UnsupportedKind`],
    /// [`EngineError::UnknownSrs`], [`EngineError::ResourceExhausted`] beyond
    /// `max_queued_jobs` or `max_queued_bytes`, [`EngineError::ShuttingDown`].
    pub fn submit(&self, spec: JobSpec) -> Result<SubmitOutcome, EngineError> {
        self.submit_as(spec, None)
    }

    /// [`Engine::submit`], or with `restored`, the journal's replay of a job accepted
    /// before a restart: it keeps its id, skips attaching and admission (it was admitted
    /// once) and is not journaled again.
    pub(crate) fn submit_as(
        &self,
        spec: JobSpec,
        restored: Option<String>,
    ) -> Result<SubmitOutcome, EngineError> {
        let digest = payload_digest(&spec);
        let payload_bytes = payload_bytes(&spec);
        if restored.is_none() {
            let mut st = self.shared.state.lock();
            if !st.accepting {
                return Err(EngineError::ShuttingDown);
            }
            self.shared.prune_finished(&mut st, Instant::now());
            if let Some(existing) = self.attach(&st, &spec.request_id, &digest) {
                return Ok(existing);
            }
            // Refuse before parsing: under overload, parsing is wasted work.
            self.shared.admit(&st, payload_bytes)?;
        }
        let proof = self
            .shared
            .registry
            .parse(spec.kind, &spec.request)
            .ok_or_else(|| EngineError::UnsupportedKind {
                kind: spec.kind.to_string(),
            })??;
        let n_partitions = proof.num_partitions();
        if n_partitions == 0 || n_partitions > u32::MAX as usize {
            return Err(EngineError::InvalidRequest(cuzk_groth16::KindError::Other(
                format!("request has {n_partitions} partitions"),
            )));
        }
        let circuit_id = proof.circuit_id();
        self.shared.srs.check_known(&circuit_id)?;
        let priority = spec
            .priority
            .unwrap_or_else(|| spec.kind.default_priority());

        let mut st = self.shared.state.lock();
        if !st.accepting {
            return Err(EngineError::ShuttingDown);
        }
        if restored.is_none() {
            // Another submit of the same identity may have won the race while we parsed.
            if let Some(existing) = self.attach(&st, &spec.request_id, &digest) {
                return Ok(existing);
            }
            self.shared.admit(&st, payload_bytes)?;
        }
        let seq = st.next_seq;
        st.next_seq += 1;
        let journal_it = restored.is_none();
        let id = restored.unwrap_or_else(|| format!("{}-{seq}", self.shared.id_prefix));
        let (outcome, _) = watch::channel(None);
        let job = Arc::new(Job {
            id: id.clone(),
            seq,
            request_id: spec.request_id.clone(),
            digest,
            kind: spec.kind,
            priority,
            host_bytes: proof.partition_host_bytes(&self.shared.synth) as u64,
            payload_bytes,
            proof,
            circuit_id,
            n_partitions,
            submitted: Instant::now(),
            outcome,
        });
        for idx in 0..n_partitions as u32 {
            st.synth_queue.insert(job.key(idx), job.clone());
        }
        st.active.insert(
            id.clone(),
            Progress {
                state: JobState::Queued,
                proofs: vec![None; n_partitions],
                proved: 0,
                first_start: None,
                srs_load: Duration::ZERO,
                synthesis: Duration::ZERO,
                compute: Duration::ZERO,
                vk: None,
                faults: JobFaults::new(n_partitions),
            },
        );
        st.active_payload_bytes += payload_bytes;
        if !spec.request_id.is_empty() {
            st.by_request.insert(spec.request_id.clone(), id.clone());
            st.by_identity
                .insert((spec.request_id.clone(), digest), id.clone());
        }
        let queue_position = self.position(&st, &job);
        st.jobs.insert(id.clone(), job.clone());
        drop(st);
        if journal_it {
            self.journal_accepted(&id, &spec)?;
        }
        self.shared.synth_cv.notify_all();
        info!(job = %id, kind = %job.kind, %priority, partitions = n_partitions, circuit = %job.circuit_id, "job accepted");
        Ok(SubmitOutcome {
            job_id: id,
            queue_position,
            assigned_device: self.device_names(),
            attached: false,
        })
    }

    /// The newest job submitted under `request_id` (several share one id when their
    /// payloads differ, e.g. the WindowPoSt partitions of a deadline, or after a retry of a
    /// failed job), while it is active or its result is retained.
    pub fn job_for_request(&self, request_id: &str) -> Option<String> {
        let mut st = self.shared.state.lock();
        self.shared.prune_finished(&mut st, Instant::now());
        st.by_request.get(request_id).cloned()
    }

    /// Waits for `job_id` to finish, up to `timeout` (`None`: forever).
    ///
    /// # Errors
    /// [`EngineError::UnknownJob`]: never existed, or its result expired.
    pub async fn await_job(
        &self,
        job_id: &str,
        timeout: Option<Duration>,
    ) -> Result<AwaitOutcome, EngineError> {
        let mut rx = {
            let mut st = self.shared.state.lock();
            self.shared.prune_finished(&mut st, Instant::now());
            if let Some(retained) = st.results.get(job_id) {
                return Ok(AwaitOutcome::Finished(retained.outcome.clone()));
            }
            match st.jobs.get(job_id) {
                Some(job) => job.outcome.subscribe(),
                None => return Err(self.unknown(&st, job_id)),
            }
        };
        let wait = async {
            match rx.wait_for(Option::is_some).await {
                Ok(v) => v.clone(),
                Err(_) => None,
            }
        };
        let outcome = match timeout {
            None => wait.await,
            Some(t) => match tokio::time::timeout(t, wait).await {
                Ok(v) => v,
                Err(_) => return Ok(AwaitOutcome::Timeout),
            },
        };
        outcome
            .map(AwaitOutcome::Finished)
            .ok_or_else(|| EngineError::UnknownJob(job_id.to_string()))
    }

    /// Cancels a job: its queued partitions go at once, in-flight ones are discarded when
    /// they finish. Returns whether it had started (false for a queued or finished job).
    ///
    /// # Errors
    /// [`EngineError::UnknownJob`].
    pub fn cancel(&self, job_id: &str) -> Result<bool, EngineError> {
        let mut st = self.shared.state.lock();
        let Some(progress) = st.active.get(job_id) else {
            return if st.results.contains_key(job_id) {
                Ok(false)
            } else {
                Err(self.unknown(&st, job_id))
            };
        };
        let was_running = progress.state != JobState::Queued;
        let end = JobEnd::Cancelled {
            reason: "cancelled by request".to_string(),
        };
        let dropped = self.shared.finish_job(&mut st, job_id, end);
        drop(st);
        drop(dropped);
        Ok(was_running)
    }

    /// The state of a job, if known (active, or its result retained).
    pub fn job_state(&self, job_id: &str) -> Option<JobState> {
        let mut st = self.shared.state.lock();
        self.shared.prune_finished(&mut st, Instant::now());
        if let Some(p) = st.active.get(job_id) {
            return Some(p.state);
        }
        st.results.get(job_id).map(|r| r.outcome.state)
    }

    /// Timeline events that ended at or after `since_us`, and the engine clock now (µs).
    pub fn timeline(&self, since_us: u64) -> (Vec<TimelineEvent>, u64) {
        (
            self.shared.timeline.events_since(since_us),
            self.shared.timeline.now_us(),
        )
    }

    /// A snapshot of the daemon's state.
    pub fn status(&self) -> EngineStatus {
        let mut st = self.shared.state.lock();
        // Results expire by age even when no other job finishes.
        self.shared.prune_finished(&mut st, Instant::now());
        let mut queues: Vec<KindQueue> = self
            .shared
            .registry
            .kinds()
            .into_iter()
            .map(|kind| KindQueue {
                kind,
                pending: 0,
                in_progress: 0,
            })
            .collect();
        for (id, progress) in &st.active {
            let Some(job) = st.jobs.get(id) else { continue };
            if let Some(q) = queues.iter_mut().find(|q| q.kind == job.kind) {
                if progress.state == JobState::Queued {
                    q.pending += 1;
                } else {
                    q.in_progress += 1;
                }
            }
        }
        let queued_by_priority = Priority::ALL
            .into_iter()
            .map(|p| {
                (
                    p,
                    st.synth_queue.keys().filter(|k| k.0 .0 == p).count() as u64,
                )
            })
            .collect();
        let partitions_by_stage = vec![
            ("queued", st.synth_queue.len() as u64),
            ("synthesizing", st.in_synthesis as u64),
            ("ready", st.ready.len() as u64),
            ("proving", st.in_proving as u64),
            ("assembling", st.in_assembly as u64),
        ];
        let status = EngineStatus {
            devices: self.shared.devices.iter().map(|d| d.status()).collect(),
            srs: Vec::new(),
            queues,
            queued_by_priority,
            partitions_by_stage,
            active_jobs: st.active.len() as u64,
            retained_results: st.finished.len() as u64,
            total_completed: self.shared.metrics.total(Ending::Completed),
            total_failed: self.shared.metrics.total(Ending::Failed),
            total_cancelled: self.shared.metrics.total(Ending::Cancelled),
            uptime: self.shared.started.elapsed(),
            queued_payload_bytes: st.active_payload_bytes,
            memory_reserved_bytes: st.reserved_bytes,
            memory_limit_bytes: self.shared.partition_budget(),
            accepting: st.accepting,
            memory_ledger: crate::state::MemoryLedger {
                partitions_bytes: st.reserved_bytes,
                ..self.shared.memory_ledger()
            },
            params: Default::default(),
        };
        drop(st);
        EngineStatus {
            srs: self.srs_status(),
            // Outside the state lock: it may read a file's length prefixes.
            params: self.shared.srs.params(),
            ..status
        }
    }

    /// Counts a submit that a front end refused because the engine was not ready (the
    /// server's gate), under `cuzk_submits_refused_total{limit="not_ready"}`.
    pub fn count_refused_not_ready(&self) {
        self.shared
            .metrics
            .submit_refused(crate::metrics::Limit::NotReady);
    }

    /// Prometheus text exposition.
    pub fn metrics_text(&self) -> String {
        let status = self.status();
        let gauges = Gauges {
            queued_by_priority: status.queued_by_priority.clone(),
            partitions_by_stage: status.partitions_by_stage.clone(),
            active_jobs: status.active_jobs,
            queued_payload_bytes: status.queued_payload_bytes,
            retained_results: status.retained_results,
            memory_reserved_bytes: status.memory_reserved_bytes,
            memory_limit_bytes: status.memory_limit_bytes,
            srs_resident_bytes: status.srs.iter().map(|s| s.size_bytes).sum(),
            memory_ledger: status.memory_ledger,
            device_vram: status
                .devices
                .iter()
                .filter(|d| d.is_gpu)
                .map(|d| (d.name.clone(), d.vram_budget_bytes, d.vram_used_bytes))
                .collect(),
            device_busy_s: status
                .devices
                .iter()
                .map(|d| (d.name.clone(), d.busy.as_secs_f64()))
                .collect(),
            device_health: status
                .devices
                .iter()
                .map(|d| (d.name.clone(), d.in_service, d.faults_total))
                .collect(),
            uptime_s: status.uptime.as_secs_f64(),
        };
        self.shared.metrics.render(&gauges)
    }

    /// The engine's config.
    pub fn config(&self) -> &EngineConfig {
        &self.shared.cfg
    }

    /// How this engine synthesizes: built at start from `recorded_r1cs_budget_bytes`,
    /// deferring a, b, c to the backend; its recorded shapes are this engine's alone.
    pub fn synthesizer(&self) -> &Synthesizer {
        &self.shared.synth
    }

    /// The submit of identity (`request_id`, `digest`) attaches to the newest job with it
    /// when that job is active or completed; a failed or cancelled one is retried as a new
    /// job (Curio's retries reuse deterministic ids).
    fn attach(&self, st: &State, request_id: &str, digest: &[u8; 32]) -> Option<SubmitOutcome> {
        if request_id.is_empty() {
            return None;
        }
        let id = st.by_identity.get(&(request_id.to_string(), *digest))?;
        let queue_position = if let Some(job) = st.jobs.get(id) {
            self.position(st, job)
        } else if st
            .results
            .get(id)
            .is_some_and(|r| r.outcome.state == JobState::Completed)
        {
            0
        } else {
            return None;
        };
        Some(SubmitOutcome {
            job_id: id.clone(),
            queue_position,
            assigned_device: self.device_names(),
            attached: true,
        })
    }

    /// Active jobs scheduled before `job`.
    fn position(&self, st: &State, job: &Job) -> u32 {
        let key = job.key(0);
        st.active
            .keys()
            .filter_map(|id| st.jobs.get(id))
            .filter(|other| other.id != job.id && other.key(0) < key)
            .count() as u32
    }

    fn device_names(&self) -> String {
        self.shared
            .devices
            .iter()
            .map(|d| d.spec.name.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// The pool of CRITICAL work's host-parallel steps ([`Shared::critical_pool`]), where
/// there is a critical synthesis worker or a critical-only device.
fn critical_pool(
    cfg: &EngineConfig,
    devices: &[Arc<crate::device::Device>],
) -> Result<Option<Arc<rayon::ThreadPool>>, EngineError> {
    if cfg.critical_synthesis_workers == 0 && !devices.iter().any(|d| d.spec.critical_only) {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(crate::state::CRITICAL_POOL_THREADS)
        .thread_name(|i| format!("cuzk-critical-{i}"))
        .build()
        .map(|pool| Some(Arc::new(pool)))
        .map_err(|e| EngineError::Config(format!("cannot start the critical pool: {e}")))
}
