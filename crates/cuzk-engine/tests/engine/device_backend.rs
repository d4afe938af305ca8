//! The engine's side of a backend that keeps parameters in device memory and takes its
//! device's compute token itself (what the GPU backend does), checked with a stand-in
//! device around the CPU backend: preload puts the SRS in the `Vram` tier, evict takes it
//! out of both tiers, and the device's busy interval is the backend's own token hold.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::synthetic::SyntheticSpec;
use cuzk_engine::{
    AwaitOutcome, DeviceSpec, Engine, EngineConfig, JobSpec, JobState, KindRegistry, ProofKindId,
    ProofRequest, SrsTier, Stage,
};
use cuzk_groth16::{
    Assignment, Backend, BackendError, ComputeToken, CpuBackend, MsmOutputs, ProveReport,
    ProveStage, Srs, TokenTimes,
};
use parking_lot::Mutex;

use crate::support::{finish, spec};

/// The CPU backend plus "device-resident" SRSs (copies of their points, keyed by their
/// fingerprint, as a device holds them) and a token taken inside `compute`, after a
/// deliberate 30 ms of "upload" outside it.
struct StandInDevice {
    cpu: CpuBackend,
    resident: Mutex<HashMap<[u8; 32], Arc<Srs>>>,
    token: ComputeToken,
    /// Host bytes it reports pinned.
    pinned: u64,
    /// Whether it streams the points (from the file once the host copy is released)
    /// instead of holding them, and how many calls read them from the file.
    streams: bool,
    from_file: std::sync::atomic::AtomicUsize,
    /// Whether it was ever handed an SRS with its points in host memory.
    saw_points: std::sync::atomic::AtomicBool,
    /// Compute calls so far (its one counter).
    computes: std::sync::atomic::AtomicU64,
    /// The ids of the recorded shapes handed to `preload_matrices`.
    matrices: Mutex<Vec<u64>>,
    /// The name of the thread each compute call ran on.
    compute_threads: Mutex<Vec<String>>,
}

fn key(srs: &Srs) -> [u8; 32] {
    srs.fingerprint()
}

impl Backend for StandInDevice {
    fn name(&self) -> String {
        "standin:0".into()
    }

    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError> {
        std::thread::sleep(Duration::from_millis(30));
        report.push(ProveStage::Upload, Duration::from_millis(30));
        self.computes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let thread = std::thread::current().name().unwrap_or("").to_string();
        self.compute_threads.lock().push(thread);
        let t = std::time::Instant::now();
        let _token = self.token.acquire();
        let wait = t.elapsed();
        report.push(ProveStage::TokenWait, wait);
        let held = std::time::Instant::now();
        if !srs.is_released() {
            self.saw_points
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        // Released host points: the device's own copy, as a GPU reads its resident one,
        // or the points read from the file, as a GPU streams them.
        let own = self.resident.lock().get(&key(srs)).cloned();
        let out = match (own, &srs.file) {
            (Some(own), _) => self.cpu.compute(asg, &own, report)?,
            (None, Some(_)) if self.streams && srs.is_released() => {
                self.from_file
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.cpu
                    .compute(asg, &cuzk_groth16::testkit::read_from_file(srs), report)?
            }
            (None, _) => self.cpu.compute(asg, srs, report)?,
        };
        report.token = Some(TokenTimes {
            wait_start: Duration::from_millis(30),
            wait,
            held: held.elapsed(),
        });
        Ok(out)
    }

    fn owns_compute_token(&self) -> bool {
        true
    }

    fn host_pinned_bytes(&self) -> u64 {
        self.pinned
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let n = self.computes.load(std::sync::atomic::Ordering::Relaxed);
        vec![("computes", n)]
    }

    fn proving_mode(&self) -> String {
        match self.streams {
            true => "stand-in streamed".into(),
            false => "stand-in resident".into(),
        }
    }

    fn srs_device_bytes(&self, srs: &Srs) -> u64 {
        self.resident
            .lock()
            .get(&key(srs))
            .map_or(0, |own| own.host_bytes() as u64)
    }

    fn streams_srs_from_file(&self, srs: &Srs) -> bool {
        if !srs.is_released() {
            self.saw_points
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        self.streams
    }

    fn preload_srs(&self, srs: &Srs) -> Result<u64, BackendError> {
        if self.streams {
            return Ok(0);
        }
        if srs.is_released() {
            return Err(BackendError::SrsReleased);
        }
        self.resident.lock().insert(key(srs), Arc::new(srs.clone()));
        Ok(srs.host_bytes() as u64)
    }

    fn preload_matrices(
        &self,
        _srs: &Srs,
        r1cs: &cuzk_groth16::recorded::R1cs,
    ) -> Result<u64, BackendError> {
        self.matrices.lock().push(r1cs.id());
        Ok(r1cs.n_rows() as u64)
    }

    fn evict_srs(&self, srs: &Srs) -> u64 {
        self.resident
            .lock()
            .remove(&key(srs))
            .map_or(0, |own| own.host_bytes() as u64)
    }
}

/// A stand-in device reporting `pinned` host bytes, with `workers` prove workers.
fn stand_in(pinned: u64, workers: usize) -> (Arc<StandInDevice>, DeviceSpec) {
    stand_in_device(pinned, workers, false)
}

/// [`stand_in`], streaming the points instead of holding them when `streams`.
fn stand_in_device(pinned: u64, workers: usize, streams: bool) -> (Arc<StandInDevice>, DeviceSpec) {
    let backend = Arc::new(StandInDevice {
        cpu: CpuBackend::new(),
        resident: Mutex::new(HashMap::new()),
        token: ComputeToken::new(),
        pinned,
        streams,
        from_file: Default::default(),
        saw_points: Default::default(),
        computes: Default::default(),
        matrices: Default::default(),
        compute_threads: Default::default(),
    });
    let device = DeviceSpec {
        name: "gpu:0".into(),
        hardware: "stand-in".into(),
        is_gpu: true,
        ordinal: 0,
        vram_total_bytes: 1 << 30,
        backend: backend.clone(),
        workers: Some(workers),
        critical_only: false,
    };
    (backend, device)
}

#[test]
fn device_tier_and_backend_token_hold() {
    let (backend, device) = stand_in(0, 2);
    let cfg = EngineConfig {
        param_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params"),
        ..EngineConfig::default()
    };
    let engine =
        Engine::start(cfg, KindRegistry::with_synthetic(), vec![device]).expect("engine starts");
    let id = SyntheticSpec {
        log_n: 6,
        n_partitions: 1,
        seed: 0,
    }
    .circuit_id();
    engine.preload_srs(&id).expect("preload");
    // The shape recorded at preload went to the device with it, once, so that its first
    // prove does not load the matrices (#26).
    let recorded = engine
        .synthesizer()
        .recorded(&id)
        .expect("recorded at preload");
    assert_eq!(*backend.matrices.lock(), vec![recorded.id()]);
    let tier = |e: &Engine| {
        e.srs_status()
            .into_iter()
            .find(|s| s.circuit_id == id)
            .map(|s| s.tier)
    };
    assert_eq!(tier(&engine), Some(SrsTier::Vram));
    // The status shows the backend's proving mode.
    let status = engine.status();
    let gpu = status.devices.iter().find(|d| d.name == "gpu:0");
    assert_eq!(
        gpu.map(|d| d.proving_mode.as_str()),
        Some("stand-in resident")
    );
    assert_eq!(gpu.map(|d| d.counters.clone()), Some(vec![("computes", 0)]));

    let request = ProofRequest {
        vanilla_proof: SyntheticSpec {
            log_n: 6,
            n_partitions: 4,
            seed: 3,
        }
        .encode(),
        ..ProofRequest::default()
    };
    let job = engine
        .submit(JobSpec {
            request_id: String::new(),
            kind: ProofKindId::Synthetic,
            priority: None,
            request,
        })
        .expect("accepted");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let AwaitOutcome::Finished(out) = rt
        .block_on(engine.await_job(&job.job_id, Some(Duration::from_secs(300))))
        .expect("known job")
    else {
        panic!("no outcome in 300 s");
    };
    assert_eq!(out.state, JobState::Completed, "{}", out.error);
    // The status carries the backend's counters: a call a partition.
    let status = engine.status();
    let gpu = status.devices.iter().find(|d| d.name == "gpu:0");
    assert_eq!(gpu.map(|d| d.counters.clone()), Some(vec![("computes", 4)]));

    // Each partition's compute interval starts after the backend's own upload + wait.
    let (events, _) = engine.timeline(0);
    let computes: Vec<_> = events
        .iter()
        .filter(|e| e.stage == Stage::Compute)
        .collect();
    assert_eq!(computes.len(), 4);
    for c in &computes {
        let same = |e: &&cuzk_engine::TimelineEvent| {
            e.partition_idx == c.partition_idx && e.job_id == c.job_id
        };
        let upload = events
            .iter()
            .filter(same)
            .find(|e| e.stage == Stage::Backend && e.detail == "upload")
            .expect("the backend's upload stage is on the timeline");
        let wait = events
            .iter()
            .filter(same)
            .find(|e| e.stage == Stage::TokenWait)
            .expect("a token wait event per partition");
        assert!(upload.end_us - upload.start_us >= 29_000, "{upload:?}");
        assert!(
            wait.start_us >= upload.end_us,
            "{wait:?} overlaps {upload:?}"
        );
        assert!(
            c.start_us >= wait.end_us,
            "{c:?} starts before {wait:?} ends"
        );
    }

    let (was, freed) = engine.evict_srs(&id).expect("evict");
    assert!(was && freed > 0);
    assert_eq!(tier(&engine), Some(SrsTier::Disk));
    assert!(
        backend.resident.lock().is_empty(),
        "the device copy is gone too"
    );
}

/// A device's pinned staging is host memory: the engine lets partitions reserve the
/// budget less it (what `status` reports as the limit), so a GPU worker's 9.4 GB of
/// staging at 2^27 is not on top of the partitions' budget. See: #17.
#[test]
fn pinned_staging_is_taken_from_the_partition_budget() {
    let gib = 1u64 << 30;
    for (pinned, limit) in [(0, 8 * gib), (3 * gib, 5 * gib), (9 * gib, 0)] {
        let (_, device) = stand_in(pinned, 1);
        let cfg = EngineConfig {
            param_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params"),
            host_memory_budget_bytes: 8 * gib,
            cpu_fallback: false,
            ..EngineConfig::default()
        };
        let engine = Engine::start(cfg, KindRegistry::with_synthetic(), vec![device])
            .expect("engine starts");
        assert_eq!(engine.status().memory_limit_bytes, limit, "{pinned} pinned");
        // A partition still runs when the staging leaves no budget: one at a time.
        if limit == 0 {
            let job = engine
                .submit(JobSpec {
                    request_id: String::new(),
                    kind: ProofKindId::Synthetic,
                    priority: None,
                    request: ProofRequest {
                        vanilla_proof: SyntheticSpec {
                            log_n: 6,
                            n_partitions: 2,
                            seed: 4,
                        }
                        .encode(),
                        ..ProofRequest::default()
                    },
                })
                .expect("accepted");
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            match rt.block_on(engine.await_job(&job.job_id, Some(Duration::from_secs(120)))) {
                Ok(AwaitOutcome::Finished(o)) => {
                    assert_eq!(o.state, JobState::Completed, "{}", o.error)
                }
                other => panic!("job did not finish: {other:?}"),
            }
        }
    }
}

/// One synthetic job of `n_partitions` partitions of 2^6, proved to the end.
fn prove_one(engine: &Engine, seed: u64, n_partitions: u32) -> Arc<cuzk_engine::JobOutcome> {
    let request = ProofRequest {
        vanilla_proof: SyntheticSpec {
            log_n: 6,
            n_partitions,
            seed,
        }
        .encode(),
        ..ProofRequest::default()
    };
    let job = engine
        .submit(JobSpec {
            request_id: String::new(),
            kind: ProofKindId::Synthetic,
            priority: None,
            request,
        })
        .expect("accepted");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let AwaitOutcome::Finished(out) = rt
        .block_on(engine.await_job(&job.job_id, Some(Duration::from_secs(300))))
        .expect("known job")
    else {
        panic!("no outcome in 300 s");
    };
    out
}

// See: #26.
#[test]
fn the_host_copy_goes_once_the_device_holds_the_srs_and_comes_back_when_it_does_not() {
    let (backend, device) = stand_in(0, 2);
    let cfg = EngineConfig {
        param_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params"),
        ..EngineConfig::default()
    };
    let engine =
        Engine::start(cfg, KindRegistry::with_synthetic(), vec![device]).expect("engine starts");
    let id = SyntheticSpec {
        log_n: 6,
        n_partitions: 1,
        seed: 0,
    }
    .circuit_id();
    let entry = |e: &Engine| {
        e.srs_status()
            .into_iter()
            .find(|s| s.circuit_id == id)
            .expect("listed")
    };
    engine.preload_srs(&id).expect("preload");
    // Resident on the only device: the host copy is released.
    let s = entry(&engine);
    assert_eq!((s.tier, s.size_bytes), (SrsTier::Vram, 0), "{s:?}");
    let out = prove_one(&engine, 5, 3);
    assert_eq!(out.state, JobState::Completed, "{}", out.error);
    assert_eq!(entry(&engine).size_bytes, 0);

    // The device loses its copy: the next partitions read the points back and prove.
    backend.resident.lock().clear();
    let out = prove_one(&engine, 6, 3);
    assert_eq!(out.state, JobState::Completed, "{}", out.error);
    let s = entry(&engine);
    assert_eq!(s.tier, SrsTier::Host, "{s:?}");
    assert!(s.size_bytes > 0, "{s:?}");
}

// An SRS larger than its host budget, on a device that streams the points: it is opened
// to stream from its file and never decoded into host memory (no device ever sees its
// points there), the entry reports the `File` tier with no host bytes, and the partitions
// read the points from the file (the engine never reads them back). See: #26.
#[test]
fn an_srs_larger_than_its_budget_is_streamed_from_its_file() {
    let (backend, engine) = streaming_engine();
    let id = SyntheticSpec {
        log_n: 6,
        n_partitions: 1,
        seed: 0,
    }
    .circuit_id();
    engine.preload_srs(&id).expect("preload");
    let s = engine.srs_status().into_iter().next().expect("listed");
    assert_eq!((s.tier, s.size_bytes), (SrsTier::File, 0), "{s:?}");
    proves_from_the_file(&backend, &engine, 7, 3);
}

/// A stand-in device that streams the points, in an engine whose SRS budget (4 KiB) no
/// SRS fits.
fn streaming_engine() -> (Arc<StandInDevice>, Engine) {
    let (backend, device) = stand_in_device(0, 2, true);
    let cfg = EngineConfig {
        param_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params"),
        srs_budget_bytes: 4096,
        ..EngineConfig::default()
    };
    let engine =
        Engine::start(cfg, KindRegistry::with_synthetic(), vec![device]).expect("engine starts");
    (backend, engine)
}

/// One job of `n` partitions completes, every partition read the points from the file,
/// the SRS stays in the `File` tier with no host bytes, and no device was ever handed its
/// points in host memory.
fn proves_from_the_file(backend: &StandInDevice, engine: &Engine, seed: u64, n: u32) {
    let out = prove_one(engine, seed, n);
    assert_eq!(out.state, JobState::Completed, "{}", out.error);
    assert_eq!(
        backend.from_file.load(std::sync::atomic::Ordering::Relaxed),
        n as usize,
        "every partition read the points from the file"
    );
    let s = engine.srs_status().into_iter().next().expect("listed");
    assert_eq!((s.tier, s.size_bytes), (SrsTier::File, 0), "{s:?}");
    assert!(
        !backend
            .saw_points
            .load(std::sync::atomic::Ordering::Relaxed),
        "the points were never decoded into host memory"
    );
}

// The same without a preload: the first partition's acquire opens it to stream, so no
// partition proves from a host copy. See: #26.
#[test]
fn an_srs_larger_than_its_budget_is_streamed_from_its_file_without_a_preload() {
    let (backend, engine) = streaming_engine();
    proves_from_the_file(&backend, &engine, 8, 4);
}

/// A CRITICAL partition's compute call runs on the critical pool's threads (its host loops
/// then do not queue behind the main load's in the process-wide pool), a NORMAL one on the
/// watched call's own thread. See: #29 (a 32 GiB WinningPoSt's prove spent 0.3-1.1 s on
/// the host beside a PoRep load).
#[test]
fn a_critical_partitions_call_runs_in_the_critical_pool() {
    let (backend, device) = stand_in(0, 1);
    let cfg = EngineConfig {
        param_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params"),
        critical_synthesis_workers: 1,
        ..EngineConfig::default()
    };
    let engine =
        Engine::start(cfg, KindRegistry::with_synthetic(), vec![device]).expect("engine starts");
    for priority in [Some(cuzk_engine::Priority::Critical), None] {
        let mut job = spec(&format!("{priority:?}"), 5, 1, 9);
        job.priority = priority;
        let job = engine.submit(job).expect("accepted");
        let out = finish(&engine, &job.job_id, Duration::from_secs(300));
        assert_eq!(out.state, JobState::Completed, "{}", out.error);
    }
    let threads = backend.compute_threads.lock().clone();
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert!(threads[0].starts_with("cuzk-critical-"), "{threads:?}");
    assert_eq!(threads[1], "cuzk-call-gpu:0", "{threads:?}");
}
