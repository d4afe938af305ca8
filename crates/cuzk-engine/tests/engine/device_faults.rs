//! A faulty device fails partitions, not jobs (issue 18, item 2): with stand-in GPU
//! backends that always fail, never return, or return proofs that do not verify, jobs
//! complete on the CPU fallback, the device goes out of service after the configured
//! number of faults (status and metrics say so and why), and with nowhere left to prove a
//! job fails with a "no healthy device" reason instead of waiting.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_engine::{
    AwaitOutcome, DeviceSpec, DeviceStatus, Engine, EngineConfig, JobOutcome, JobSpec, JobState,
    KindRegistry, ProofKindId, Stage,
};
use cuzk_groth16::{
    Assignment, Backend, BackendError, CpuBackend, MsmOutputs, ProveReport, ProveStage, Srs,
};
use parking_lot::Mutex;

/// How the stand-in GPU misbehaves.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every call returns a device error.
    Fail,
    /// Every call blocks until the test ends.
    Hang,
    /// Every call returns sums whose proof does not verify.
    Corrupt,
}

struct FaultyGpu {
    mode: Mode,
    cpu: CpuBackend,
    calls: AtomicUsize,
    /// Whether it reports that it streams the SRS from its file.
    streams: bool,
    /// A hung call waits here; dropping the test's sender lets it go.
    hang: Mutex<Receiver<()>>,
}

impl Backend for FaultyGpu {
    fn name(&self) -> String {
        "faulty:0".into()
    }

    fn streams_srs_from_file(&self, _srs: &Srs) -> bool {
        self.streams
    }

    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.mode {
            Mode::Fail => Err(BackendError::Device {
                device: "gpu:0".into(),
                stage: ProveStage::MsmH,
                message: "injected failure".into(),
            }),
            Mode::Hang => {
                let _ = self.hang.lock().recv();
                Err(BackendError::Cancelled)
            }
            Mode::Corrupt => {
                let mut out = self.cpu.compute(asg, srs, report)?;
                // δ is never the identity (the prover refuses such parameters).
                out.h += &srs.vk.delta_g1;
                Ok(out)
            }
        }
    }
}

/// A stand-in GPU in `mode` and the sender that releases its hung calls.
fn faulty_gpu(mode: Mode, workers: usize) -> (Arc<FaultyGpu>, DeviceSpec, Sender<()>) {
    faulty_gpu_streaming(mode, workers, false)
}

/// [`faulty_gpu`], reporting that it streams the SRS from its file when `streams`.
fn faulty_gpu_streaming(
    mode: Mode,
    workers: usize,
    streams: bool,
) -> (Arc<FaultyGpu>, DeviceSpec, Sender<()>) {
    let (release, hang) = channel();
    let backend = Arc::new(FaultyGpu {
        mode,
        cpu: CpuBackend::new(),
        calls: AtomicUsize::new(0),
        streams,
        hang: Mutex::new(hang),
    });
    let spec = DeviceSpec {
        name: "gpu:0".into(),
        hardware: "faulty stand-in".into(),
        is_gpu: true,
        ordinal: 0,
        vram_total_bytes: 1 << 30,
        backend: backend.clone(),
        workers: Some(workers),
        critical_only: false,
    };
    (backend, spec, release)
}

fn engine(cfg: EngineConfig, device: DeviceSpec) -> Engine {
    let cfg = EngineConfig {
        param_dir: PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params"),
        ..cfg
    };
    Engine::start(cfg, KindRegistry::with_synthetic(), vec![device]).expect("engine starts")
}

fn spec(log_n: u32, n_partitions: u32, seed: u64) -> JobSpec {
    crate::support::spec_of(ProofKindId::Synthetic, "", log_n, n_partitions, seed)
}

fn finish(engine: &Engine, job_id: &str) -> Arc<JobOutcome> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    match rt
        .block_on(engine.await_job(job_id, Some(Duration::from_secs(120))))
        .expect("known job")
    {
        AwaitOutcome::Finished(o) => o,
        AwaitOutcome::Timeout => panic!("job {job_id} still running after 120 s"),
    }
}

fn device(engine: &Engine, name: &str) -> DeviceStatus {
    engine
        .status()
        .devices
        .into_iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("no device {name}"))
}

// See: issue 18, item 2.
#[test]
fn jobs_complete_on_the_fallback_when_a_device_always_fails() {
    let (backend, gpu, _release) = faulty_gpu(Mode::Fail, 2);
    let engine = engine(
        EngineConfig {
            device_fault_threshold: 3,
            ..EngineConfig::default()
        },
        gpu,
    );
    let ids: Vec<String> = (0..20)
        .map(|seed| engine.submit(spec(5, 1, seed)).expect("accepted").job_id)
        .collect();
    for id in &ids {
        let out = finish(&engine, id);
        assert_eq!(out.state, JobState::Completed, "{id}: {}", out.error);
    }

    let gpu = device(&engine, "gpu:0");
    assert!(!gpu.in_service, "{gpu:?}");
    assert!(
        gpu.out_of_service_reason.contains("3 consecutive faults")
            && gpu.out_of_service_reason.contains("injected failure"),
        "{gpu:?}"
    );
    // Its two workers share the engine's compute token, which a failed call keeps until
    // its fault is counted: no call starts on a device that is out of service.
    assert_eq!(gpu.faults_total, 3, "{gpu:?}");
    assert_eq!(
        backend.calls.load(Ordering::SeqCst) as u64,
        gpu.faults_total,
        "nothing was sent to the device once it was out of service"
    );
    let cpu = device(&engine, "cpu");
    assert!(
        cpu.fallback && cpu.in_service && cpu.faults_total == 0,
        "{cpu:?}"
    );

    let metrics = engine.metrics_text();
    assert!(
        metrics.contains("cuzk_device_in_service{device=\"gpu:0\"} 0"),
        "{metrics}"
    );
    assert!(
        metrics.contains("cuzk_device_in_service{device=\"cpu\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "cuzk_partition_retries_total{{cause=\"device_error\"}} {}",
            gpu.faults_total
        )),
        "{metrics}"
    );
    let status = engine.status();
    assert_eq!(status.total_completed, 20);
    assert_eq!(status.memory_reserved_bytes, 0);
}

// See: issue 18, item 2.
#[test]
fn a_hung_call_fails_its_partition_within_the_limit_and_the_job_completes() {
    let (backend, gpu, release) = faulty_gpu(Mode::Hang, 2);
    let limit = Duration::from_millis(500);
    let engine = engine(
        EngineConfig {
            prove_timeout: limit,
            ..EngineConfig::default()
        },
        gpu,
    );
    let t = Instant::now();
    let job = engine.submit(spec(5, 2, 7)).expect("accepted").job_id;
    let out = finish(&engine, &job);
    assert_eq!(out.state, JobState::Completed, "{}", out.error);
    assert!(t.elapsed() >= limit, "the hung call was waited for");

    let gpu = device(&engine, "gpu:0");
    assert!(!gpu.in_service, "{gpu:?}");
    assert!(
        gpu.out_of_service_reason.contains("prove_timeout"),
        "{gpu:?}"
    );
    // The other worker waited for the token behind the hung call, then found the device
    // out of service.
    let calls = backend.calls.load(Ordering::SeqCst);
    assert_eq!(calls, 1, "{calls} calls");
    // The partitions that hung were proved by the fallback.
    let (events, _) = engine.timeline(0);
    let cpu_computes = events
        .iter()
        .filter(|e| e.stage == Stage::Compute && e.device == "cpu")
        .count();
    assert_eq!(cpu_computes, 2);
    assert!(engine.metrics_text().contains(&format!(
        "cuzk_partition_retries_total{{cause=\"hung\"}} {calls}"
    )));
    // Let the hung calls return so their threads end.
    drop(release);
}

// See: issue 18, item 2; design.md: "a GPU result that fails verification is retried once
// on the CPU path and reported".
#[test]
fn partitions_whose_proof_fails_verification_are_proved_again_on_the_cpu() {
    let (_backend, gpu, _release) = faulty_gpu(Mode::Corrupt, 2);
    let engine = engine(
        EngineConfig {
            device_fault_threshold: 10,
            ..EngineConfig::default()
        },
        gpu,
    );
    let job = engine.submit(spec(5, 3, 9)).expect("accepted").job_id;
    let out = finish(&engine, &job);
    assert_eq!(out.state, JobState::Completed, "{}", out.error);
    assert_eq!(out.proof.len(), 3 * 192);

    let gpu = device(&engine, "gpu:0");
    assert_eq!(gpu.faults_total, 3, "{gpu:?}");
    assert!(gpu.in_service, "below the threshold: {gpu:?}");
    assert!(gpu.last_fault.contains("failed verification"), "{gpu:?}");
    assert!(engine
        .metrics_text()
        .contains("cuzk_partition_retries_total{cause=\"verification\"} 3"));
}

// See: issue 18, item 2.
#[test]
fn with_no_healthy_device_left_jobs_fail_with_a_reason_until_it_is_restored() {
    let (_backend, gpu, _release) = faulty_gpu(Mode::Fail, 1);
    let engine = engine(
        EngineConfig {
            device_fault_threshold: 1,
            cpu_fallback: false,
            ..EngineConfig::default()
        },
        gpu,
    );
    for seed in 0..2 {
        let job = engine.submit(spec(5, 2, seed)).expect("accepted").job_id;
        let out = finish(&engine, &job);
        assert_eq!(out.state, JobState::Failed);
        assert!(out.error.starts_with("no healthy device"), "{}", out.error);
        assert!(out.retryable, "another daemon may prove it");
    }
    let gpu = device(&engine, "gpu:0");
    assert!(!gpu.in_service && gpu.faults_total == 1, "{gpu:?}");
    assert_eq!(
        engine.status().devices.len(),
        1,
        "no fallback was asked for"
    );
    // A partition still in synthesis when its job failed returns its bytes when it ends.
    let deadline = Instant::now() + Duration::from_secs(10);
    while engine.status().memory_reserved_bytes != 0 {
        assert!(Instant::now() < deadline, "reservations not returned");
        std::thread::sleep(Duration::from_millis(10));
    }

    assert!(engine.restore_device("gpu:0"));
    assert!(device(&engine, "gpu:0").in_service);
    assert!(!engine.restore_device("gpu:0"), "already in service");
    assert!(!engine.restore_device("gpu:9"), "no such device");
}

// An SRS streamed from its file because it is larger than its host budget is not read
// back into host memory for the CPU fallback: with the GPU failing, the job fails with
// that reason instead of taking the host past its budget. See: #26.
#[test]
fn the_fallback_does_not_read_back_an_srs_larger_than_its_budget() {
    let (_, gpu, _release) = faulty_gpu_streaming(Mode::Fail, 1, true);
    let engine = engine(
        EngineConfig {
            device_fault_threshold: 1,
            srs_budget_bytes: 4096,
            ..EngineConfig::default()
        },
        gpu,
    );
    let id = engine.submit(spec(5, 1, 77)).expect("accepted").job_id;
    let out = finish(&engine, &id);
    assert_eq!(out.state, JobState::Failed, "{out:?}");
    assert!(
        out.error.contains("CPU fallback") && out.error.contains("srs budget"),
        "{}",
        out.error
    );
    let srs = engine.srs_status();
    assert!(
        srs.iter().all(|s| s.size_bytes == 0),
        "not read back: {srs:?}"
    );
}
