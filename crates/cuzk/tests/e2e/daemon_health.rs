//! Readiness for load balancers (issue #18 item 8): the standard gRPC health service and
//! HTTP `GET /ready` say SERVING / 200 while the daemon takes proofs and NOT_SERVING / 503
//! from the moment it drains; failures a retry elsewhere may fix answer UNAVAILABLE; the
//! default drain outlasts a 32 GiB proof.

use std::time::Duration;

use crate::daemon_common::*;
use cuzk_server::pb;
use cuzk_server::{DaemonConfig, ListenAddr};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// A health client on the daemon's gRPC address.
async fn health_client(addr: &ListenAddr) -> HealthClient<tonic::transport::Channel> {
    HealthClient::new(
        cuzk_server::client::channel(addr)
            .await
            .expect("health connects"),
    )
}

async fn check(
    client: &mut HealthClient<tonic::transport::Channel>,
    service: &str,
) -> ServingStatus {
    let status = client
        .check(HealthCheckRequest {
            service: service.into(),
        })
        .await
        .expect("health check")
        .into_inner()
        .status;
    ServingStatus::try_from(status).expect("known status")
}

// See: #18 item 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_ready_turn_off_when_draining() {
    let cfg = config("health", |c| {
        c.http_listen = "127.0.0.1:0".into();
        c.engine.synthesis_workers = 1;
    });
    let (daemon, mut client) = start(cfg).await;
    let http = daemon.http_addr().expect("http enabled");
    let mut health = health_client(daemon.grpc_addr()).await;
    assert_eq!(check(&mut health, "").await, ServingStatus::Serving);
    assert_eq!(
        check(&mut health, "cuzk.v1.ProvingEngine").await,
        ServingStatus::Serving
    );
    assert_eq!(http_status(http, "/ready").await, (200, "ready\n".into()));

    // A job that outlives the checks below keeps the daemon draining.
    let job = submit(&mut client, synthetic("health-1", 12, 64, 5)).await;
    status_until(&mut client, Duration::from_secs(30), |s| s.active_jobs == 1).await;
    let shutdown = tokio::spawn(daemon.shutdown());
    // Each state is waited for with a deadline: under load the drain may not have begun
    // when the first probe lands. Once health says NOT_SERVING, `/ready` must agree at
    // once (the engine stops accepting before health changes). See: #33.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while check(&mut health, "").await != ServingStatus::NotServing {
        assert!(tokio::time::Instant::now() < deadline, "still serving");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (code, body) = http_status(http, "/ready").await;
    assert_eq!(code, 503, "health said NOT_SERVING but /ready: {body}");
    assert!(body.contains("draining"), "{body}");
    while check(&mut health, "cuzk.v1.ProvingEngine").await != ServingStatus::NotServing {
        assert!(
            tokio::time::Instant::now() < deadline,
            "service still serving"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client
        .cancel_proof(pb::CancelProofRequest { job_id: job })
        .await
        .expect("cancel");
    shutdown.await.expect("join").expect("shutdown");
}

// See: #18 item 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_that_cannot_load_answer_unavailable() {
    let dir = std::env::temp_dir().join(format!("cuzk-badparams-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        cuzk_engine::synthetic::params_file(&dir, 6),
        b"not a parameters file",
    )
    .unwrap();
    let cfg = config("badparams", |c| c.engine.param_dir = dir.clone());
    let (daemon, mut client) = start(cfg).await;
    let err = client
        .prove(pb::ProveRequest {
            submit: Some(synthetic("badparams-1", 6, 1, 1)),
        })
        .await
        .expect_err("a parameters file that cannot load is retryable");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    assert!(err.message().contains("retry"), "{err}");
    let job = submit(&mut client, synthetic("badparams-2", 6, 1, 2)).await;
    let err = client
        .await_proof(pb::AwaitProofRequest {
            job_id: job,
            timeout_ms: 0,
        })
        .await
        .expect_err("AwaitProof says the same");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    // PreloadSRS of the same parameters too.
    let err = client
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "synthetic-6".into(),
        })
        .await
        .expect_err("cannot load");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    daemon.shutdown().await.expect("shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A stand-in GPU whose every call fails.
struct FailingGpu;

impl cuzk_groth16::Backend for FailingGpu {
    fn name(&self) -> String {
        "failing:0".into()
    }

    fn compute(
        &self,
        _asg: &cuzk_groth16::Assignment,
        _srs: &cuzk_groth16::Srs,
        _report: &mut cuzk_groth16::ProveReport,
    ) -> Result<cuzk_groth16::MsmOutputs, cuzk_groth16::BackendError> {
        Err(cuzk_groth16::BackendError::Device {
            device: "gpu:0".into(),
            stage: cuzk_groth16::ProveStage::MsmH,
            message: "injected failure".into(),
        })
    }
}

fn failing_gpu() -> cuzk_engine::DeviceSpec {
    cuzk_engine::DeviceSpec {
        name: "gpu:0".into(),
        hardware: "failing stand-in".into(),
        is_gpu: true,
        ordinal: 0,
        vram_total_bytes: 1 << 30,
        backend: std::sync::Arc::new(FailingGpu),
        workers: Some(1),
        critical_only: false,
    }
}

/// A stand-in critical lane: the CPU backend with a VRAM budget that holds small SRSs.
struct LaneStandIn(cuzk_groth16::CpuBackend);

impl cuzk_groth16::Backend for LaneStandIn {
    fn name(&self) -> String {
        "lane:0".into()
    }

    fn vram_budget_bytes(&self) -> u64 {
        1 << 30
    }

    fn compute(
        &self,
        asg: &cuzk_groth16::Assignment,
        srs: &cuzk_groth16::Srs,
        report: &mut cuzk_groth16::ProveReport,
    ) -> Result<cuzk_groth16::MsmOutputs, cuzk_groth16::BackendError> {
        self.0.compute(asg, srs, report)
    }
}

// See: #29. The critical lane is a device of its own in GetStatus.devices and /metrics,
// but not a second card in GetStatus.gpus (the wire's one entry per GPU), and it alone in
// service does not make the daemon ready: it proves only CRITICAL work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn critical_lane_is_listed_as_a_device_not_a_card_and_not_as_readiness() {
    let cfg = config("lane", |c| {
        c.http_listen = "127.0.0.1:0".into();
        c.engine.device_fault_threshold = 1;
    });
    let lane = cuzk_engine::DeviceSpec {
        name: "gpu:0/critical".into(),
        critical_only: true,
        backend: std::sync::Arc::new(LaneStandIn(cuzk_groth16::CpuBackend::new())),
        ..failing_gpu()
    };
    let daemon = cuzk_server::Daemon::start(
        &cfg,
        cuzk_engine::KindRegistry::with_synthetic(),
        vec![failing_gpu(), lane],
    )
    .await
    .expect("daemon starts");
    let mut client = connect(daemon.grpc_addr()).await;
    let mut critical = synthetic("lane-1", 5, 1, 1);
    critical.priority = pb::Priority::Critical as i32;
    let job = submit(&mut client, critical).await;
    assert_eq!(
        status_of(&wait(&mut client, &job).await),
        pb::await_proof_response::Status::Completed
    );
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert_eq!(status.gpus.len(), 1, "{:?}", status.gpus);
    let lane = status
        .devices
        .iter()
        .find(|d| d.name == "gpu:0/critical")
        .expect("lane listed");
    assert!(lane.critical_only && lane.in_service, "{lane:?}");
    let gpu = status
        .devices
        .iter()
        .find(|d| d.name == "gpu:0")
        .expect("gpu listed");
    // The failing GPU never saw the CRITICAL job: the lane proved it.
    assert!(gpu.in_service && gpu.faults_total == 0, "{gpu:?}");
    let http = daemon.http_addr().expect("http");
    let (_, metrics) = http_status(http, "/metrics").await;
    assert!(
        metrics.contains("cuzk_device_in_service{device=\"gpu:0/critical\"} 1"),
        "{metrics}"
    );

    // A NORMAL job goes to the failing GPU (the lane does not take it), which goes out of
    // service; the CPU fallback proves it. The lane alone does not make the daemon ready.
    let job = submit(&mut client, synthetic("lane-2", 5, 1, 2)).await;
    assert_eq!(
        status_of(&wait(&mut client, &job).await),
        pb::await_proof_response::Status::Completed
    );
    let body = http_until(http, "/ready", 503).await;
    assert!(body.contains("no device in service"), "{body}");
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 8.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_of_service_gpu_turns_health_off_and_its_jobs_unavailable() {
    // With the CPU fallback: the job completes there, the GPU goes out of service, and the
    // daemon stops asking balancers for work.
    let cfg = config("faulty", |c| {
        c.http_listen = "127.0.0.1:0".into();
        c.engine.device_fault_threshold = 1;
    });
    let daemon = cuzk_server::Daemon::start(
        &cfg,
        cuzk_engine::KindRegistry::with_synthetic(),
        vec![failing_gpu()],
    )
    .await
    .expect("daemon starts");
    let mut client = connect(daemon.grpc_addr()).await;
    let mut health = health_client(daemon.grpc_addr()).await;
    assert_eq!(check(&mut health, "").await, ServingStatus::Serving);
    let job = submit(&mut client, synthetic("faulty-1", 5, 1, 1)).await;
    assert_eq!(
        status_of(&wait(&mut client, &job).await),
        pb::await_proof_response::Status::Completed
    );
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    let gpu = status
        .devices
        .iter()
        .find(|d| d.name == "gpu:0")
        .expect("gpu listed");
    assert!(!gpu.in_service, "{gpu:?}");
    assert!(
        gpu.faults_total >= 1 && gpu.last_fault.contains("injected"),
        "{gpu:?}"
    );
    assert!(!gpu.out_of_service_reason.is_empty());
    assert!(status.devices.iter().any(|d| d.fallback && d.in_service));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while check(&mut health, "").await != ServingStatus::NotServing {
        assert!(tokio::time::Instant::now() < deadline, "still serving");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let http = daemon.http_addr().expect("http");
    let (code, body) = http_status(http, "/ready").await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("no device in service") && body.contains("gpu:0"),
        "{body}"
    );
    daemon.shutdown().await.expect("shutdown");

    // Without a fallback there is nowhere to prove: the job fails "no healthy device",
    // which another daemon can fix, so the caller gets UNAVAILABLE.
    let cfg = config("faulty-nofallback", |c| {
        c.engine.device_fault_threshold = 1;
        c.engine.cpu_fallback = false;
    });
    let daemon = cuzk_server::Daemon::start(
        &cfg,
        cuzk_engine::KindRegistry::with_synthetic(),
        vec![failing_gpu()],
    )
    .await
    .expect("daemon starts");
    let mut client = connect(daemon.grpc_addr()).await;
    let err = client
        .prove(pb::ProveRequest {
            submit: Some(synthetic("faulty-2", 5, 1, 2)),
        })
        .await
        .expect_err("no healthy device");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    assert!(err.message().contains("no healthy device"), "{err}");
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 8.
#[test]
fn default_drain_outlasts_a_32_gib_proof() {
    // A 32 GiB PoRep C2 is 10 partitions of ~130M constraints: minutes on one GPU, more
    // behind a queue (docs/benchmarks.md); 60 s failed such jobs at every restart.
    assert!(DaemonConfig::default().drain_timeout_secs >= 30 * 60);
}

/// A file with a whole `.params` layout (one input, a domain of 2, one A point; every point
/// zero): what readiness checks without decoding points.
fn whole_layout() -> Vec<u8> {
    const VK_FIXED: usize = 3 * 96 + 3 * 192;
    let mut out = vec![0u8; VK_FIXED];
    for (len, point) in [(1u32, 96), (1, 96), (0, 96), (1, 96), (0, 96), (0, 192)] {
        out.extend_from_slice(&len.to_be_bytes());
        out.extend(std::iter::repeat_n(0u8, len as usize * point));
    }
    out
}

/// Replaces `path` in one step, so the daemon never reads half a file.
fn put(path: &std::path::Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// Polls `GET path` until its status is `code`, returning the body.
async fn http_until(addr: std::net::SocketAddr, path: &str, code: u16) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (got, body) = http_status(addr, path).await;
        if got == code {
            return body;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{path}: {got} {body}, want {code}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn health_until(
    client: &mut HealthClient<tonic::transport::Channel>,
    service: &str,
    want: ServingStatus,
) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while check(client, service).await != want {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{service:?} never became {want:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

// A daemon on a parameter directory that does not exist, then one holding a truncated
// file, is not ready, and says why; a whole file brings it back without a restart.
// See: #32 item 3, #34 item 5, #30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_broken_parameters_turn_readiness_off() {
    use cuzk_filecoin::{circuit_id, params_file_name, FilecoinKind, SectorSize};
    let root = std::env::temp_dir().join(format!("cuzk-params-ready-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("filecoin-proof-parameters");
    let cfg = config("paramsready", |c| {
        c.http_listen = "127.0.0.1:0".into();
        c.allow_synthetic = false;
        c.engine.param_dir = dir.clone();
    });
    let mut registry = cuzk_engine::KindRegistry::new();
    cuzk_filecoin::engine::register_in(&mut registry, dir.clone());
    let daemon = cuzk_server::Daemon::start(&cfg, registry, Vec::new())
        .await
        .expect("daemon starts");
    let http = daemon.http_addr().expect("http enabled");
    let mut health = health_client(daemon.grpc_addr()).await;

    let body = http_until(http, "/ready", 503).await;
    assert!(
        body.contains("no parameters to prove with")
            && body.contains(&format!("{} does not exist", dir.display())),
        "{body}"
    );
    health_until(&mut health, "", ServingStatus::NotServing).await;

    let porep = circuit_id(FilecoinKind::PoRep, SectorSize::S2KiB);
    let file = dir.join(params_file_name(FilecoinKind::PoRep, SectorSize::S2KiB).unwrap());
    std::fs::create_dir_all(&dir).unwrap();
    let whole = whole_layout();
    put(&file, &whole[..whole.len() - 50]);
    let body = http_until(http, "/ready", 503).await;
    assert!(
        body.contains(&format!("broken parameters: {porep}")) && body.contains("truncated"),
        "{body}"
    );
    let body = http_until(http, &format!("/ready?circuit={porep}"), 503).await;
    assert!(body.contains("truncated"), "{body}");
    let service = cuzk_server::health::circuit_service(&porep);
    health_until(&mut health, &service, ServingStatus::NotServing).await;
    let status: serde_json::Value =
        serde_json::from_str(&http_get(http, "/status").await).expect("status json");
    let entry = status["params"]["circuits"]
        .as_array()
        .expect("circuits")
        .iter()
        .find(|c| c["circuit_id"] == porep.as_str())
        .expect("porep listed")
        .clone();
    assert_eq!(entry["state"], "broken", "{entry}");
    assert!(entry["reason"].as_str().unwrap().contains("truncated"));

    put(&file, &whole);
    assert_eq!(http_until(http, "/ready", 200).await, "ready\n");
    http_until(http, &format!("/ready?circuit={porep}"), 200).await;
    health_until(&mut health, "", ServingStatus::Serving).await;
    health_until(&mut health, &service, ServingStatus::Serving).await;
    // Another circuit of the same daemon still has no file.
    let winning = circuit_id(FilecoinKind::WinningPoSt, SectorSize::S2KiB);
    let body = http_until(http, &format!("/ready?circuit={winning}"), 503).await;
    assert!(body.contains("no parameters file"), "{body}");
    let mut client = connect(daemon.grpc_addr()).await;
    let s = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status")
        .into_inner();
    assert!(s.ready, "{}", s.not_ready_reason);

    daemon.shutdown().await.expect("shutdown");
    let _ = std::fs::remove_dir_all(&root);
}
