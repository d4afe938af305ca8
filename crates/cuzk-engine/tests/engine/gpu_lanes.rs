//! Critical lanes (#29): a second device on a GPU ("gpu:0/critical", `critical_only`)
//! proves only CRITICAL partitions whose SRS it holds; the GPU's regular device leaves
//! those to it while it is in service, so a CRITICAL job never queues behind a partition
//! that holds the regular device; with the lane out of service, unable to hold the SRS,
//! or failing the partition, the regular device proves it. Stand-in GPUs prove on the
//! CPU backend and count their calls.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{DeviceSpec, Engine, EngineConfig, JobSpec, JobState, KindRegistry, Priority};
use cuzk_groth16::{
    Assignment, Backend, BackendError, CpuBackend, MsmOutputs, ProveReport, ProveStage, Srs,
};

use crate::support::{finish, param_dir, spec, wait_until, Gate};

const LIMIT: Duration = Duration::from_secs(120);

/// A GPU stand-in: the CPU backend behind a gate, with a VRAM budget to report and,
/// when `fails`, a device error on every call.
#[derive(Default)]
struct StandIn {
    cpu: CpuBackend,
    calls: AtomicUsize,
    budget_bytes: u64,
    fails: bool,
    /// Calls wait here (after counting themselves) while it is closed.
    gate: Gate,
}

impl Backend for StandIn {
    fn name(&self) -> String {
        "stand-in".into()
    }

    fn vram_budget_bytes(&self) -> u64 {
        self.budget_bytes
    }

    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.gate.pass();
        if self.fails {
            return Err(BackendError::Device {
                device: "gpu:0/critical".into(),
                stage: ProveStage::MsmH,
                message: "injected lane failure".into(),
            });
        }
        self.cpu.compute(asg, srs, report)
    }
}

fn device(name: &str, backend: &Arc<StandIn>, critical_only: bool) -> DeviceSpec {
    DeviceSpec {
        name: name.into(),
        hardware: "stand-in".into(),
        is_gpu: true,
        ordinal: 0,
        vram_total_bytes: 1 << 30,
        backend: backend.clone(),
        workers: Some(1),
        critical_only,
    }
}

/// An engine with the regular device `main` and the lane `lane` on "GPU 0".
fn engine(main: &Arc<StandIn>, lane: &Arc<StandIn>, threshold: u32) -> Engine {
    let cfg = EngineConfig {
        param_dir: param_dir(),
        device_fault_threshold: threshold,
        ..EngineConfig::default()
    };
    let devices = vec![
        device("gpu:0", main, false),
        device("gpu:0/critical", lane, true),
    ];
    Engine::start(cfg, KindRegistry::with_synthetic(), devices).expect("engine starts")
}

fn critical(request_id: &str, seed: u64) -> JobSpec {
    let mut s = spec(request_id, 5, 1, seed);
    s.priority = Some(Priority::Critical);
    s
}

fn calls(b: &StandIn) -> usize {
    b.calls.load(Ordering::SeqCst)
}

// See: #29 (a WinningPoSt waited behind PoRep partitions on the GPU).
#[test]
fn lane_proves_critical_jobs_while_the_regular_device_is_held_and_nothing_else() {
    let main = Arc::new(StandIn::default());
    let lane = Arc::new(StandIn {
        budget_bytes: 1 << 30,
        ..StandIn::default()
    });
    main.gate.close();
    let engine = engine(&main, &lane, 3);
    let held = engine.submit(spec("held", 5, 1, 1)).expect("accepted");
    wait_until("the regular device holds a partition", LIMIT, || {
        calls(&main) == 1
    });
    // NORMAL work queued behind the held partition stays there: the lane does not take it.
    let queued = engine.submit(spec("queued", 5, 1, 2)).expect("accepted");

    for seed in 0..3 {
        let job = engine
            .submit(critical(&format!("winning-{seed}"), 10 + seed))
            .expect("accepted");
        let done = finish(&engine, &job.job_id, LIMIT);
        assert_eq!(done.state, JobState::Completed, "{}", done.error);
    }
    assert_eq!(calls(&lane), 3, "every CRITICAL partition went to the lane");
    assert_eq!(
        calls(&main),
        1,
        "the regular device still holds its partition"
    );
    let status = engine.status();
    let lane_status = status
        .devices
        .iter()
        .find(|d| d.name == "gpu:0/critical")
        .expect("the lane is a device of its own");
    assert!(lane_status.critical_only && lane_status.in_service);
    let metrics = engine.metrics_text();
    assert!(
        metrics.contains("cuzk_device_busy_seconds_total{device=\"gpu:0/critical\"}"),
        "{metrics}"
    );

    main.gate.open();
    for id in [&held.job_id, &queued.job_id] {
        let done = finish(&engine, id, LIMIT);
        assert_eq!(done.state, JobState::Completed, "{}", done.error);
    }
    assert_eq!(calls(&main), 2);
    assert_eq!(calls(&lane), 3, "the lane took no NORMAL partition");
}

#[test]
fn regular_device_proves_a_critical_job_whose_srs_the_lane_cannot_hold() {
    let main = Arc::new(StandIn::default());
    // A budget below twice the synthetic SRS's points: the lane holds none of it.
    let lane = Arc::new(StandIn {
        budget_bytes: 64,
        ..StandIn::default()
    });
    let engine = engine(&main, &lane, 3);
    let job = engine.submit(critical("winning", 1)).expect("accepted");
    let done = finish(&engine, &job.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
    assert_eq!((calls(&main), calls(&lane)), (1, 0));
}

#[test]
fn a_lane_fault_sends_its_partition_to_the_regular_device_and_takes_out_only_the_lane() {
    let main = Arc::new(StandIn::default());
    let lane = Arc::new(StandIn {
        budget_bytes: 1 << 30,
        fails: true,
        ..StandIn::default()
    });
    // One fault takes a device out of service.
    let engine = engine(&main, &lane, 1);
    let first = engine.submit(critical("winning-1", 1)).expect("accepted");
    let done = finish(&engine, &first.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
    assert_eq!((calls(&main), calls(&lane)), (1, 1));

    let status = engine.status();
    let by_name = |name: &str| {
        status
            .devices
            .iter()
            .find(|d| d.name == name)
            .unwrap_or_else(|| panic!("no device {name}"))
            .clone()
    };
    let lane_status = by_name("gpu:0/critical");
    assert!(!lane_status.in_service, "{lane_status:?}");
    assert!(
        lane_status.last_fault.contains("injected lane failure"),
        "{lane_status:?}"
    );
    assert!(by_name("gpu:0").in_service, "the GPU stays in service");

    // With the lane out of service the regular device takes CRITICAL work at once.
    let second = engine.submit(critical("winning-2", 2)).expect("accepted");
    let done = finish(&engine, &second.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
    assert_eq!((calls(&main), calls(&lane)), (2, 1));
}
