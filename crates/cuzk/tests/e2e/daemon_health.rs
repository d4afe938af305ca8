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
    }
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
