//! Access control and admission at the wire (issue #18 items 3 and 4): the bearer token
//! over TCP, no unauthenticated gRPC on a non-loopback address unless allowed, the
//! socket's mode and one daemon per socket, SYNTHETIC refused unless enabled, `gen params`
//! keeping test files out of the production directory, the request size limit and the
//! per-connection stream limit.

use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::daemon_common::*;
use cuzk_engine::KindRegistry;
use cuzk_server::pb;
use cuzk_server::serve::ServeError;
use cuzk_server::socket::SocketError;
use cuzk_server::{Daemon, ListenAddr};
use tonic::Code;

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cuzk-access-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

async fn start_err(cfg: cuzk_server::DaemonConfig) -> ServeError {
    match Daemon::start(&cfg, KindRegistry::with_synthetic(), Vec::new()).await {
        Ok(_) => panic!("daemon started on {}", cfg.listen),
        Err(e) => e,
    }
}

// See: #18 item 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_calls_need_the_token() {
    let dir = scratch("token");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "s3cret-token\n").unwrap();
    let cfg = config("token", |c| {
        c.listen = "127.0.0.1:0".into();
        c.auth_token_file = token_file.clone();
    });
    let (daemon, mut client) = start(cfg).await;
    assert!(matches!(daemon.grpc_addr(), ListenAddr::Tcp(a) if !a.ends_with(":0")));

    let err = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    let wrong = cuzk_server::auth::request(pb::GetStatusRequest {}, Some("s3cret-tok")).unwrap();
    let err = client.get_status(wrong).await.expect_err("wrong token");
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    let req = cuzk_server::auth::request(synthetic("tok-1", 5, 1, 1), None).unwrap();
    let err = client.submit_proof(req).await.expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");

    let right = cuzk_server::auth::request(pb::GetStatusRequest {}, Some("s3cret-token")).unwrap();
    client.get_status(right).await.expect("token accepted");
    let req =
        cuzk_server::auth::request(synthetic("tok-2", 5, 1, 1), Some("s3cret-token")).unwrap();
    client.submit_proof(req).await.expect("submit with token");

    // The health service answers without one: load balancers probe without credentials.
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", daemon.grpc_addr()))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    health
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health needs no token");
    daemon.shutdown().await.expect("shutdown");

    let empty = dir.join("empty");
    std::fs::write(&empty, "\n").unwrap();
    let err = start_err(config("token-empty", |c| c.auth_token_file = empty.clone())).await;
    assert!(err.to_string().contains("empty"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #18 item 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_loopback_tcp_needs_a_token_or_an_explicit_allowance() {
    let err = start_err(config("open", |c| c.listen = "0.0.0.0:0".into())).await;
    assert!(matches!(err, ServeError::Unprotected { .. }), "{err}");
    assert!(
        err.to_string().contains("allow_unauthenticated_remote"),
        "{err}"
    );

    let cfg = config("open-allowed", |c| {
        c.listen = "0.0.0.0:0".into();
        c.allow_unauthenticated_remote = true;
    });
    let daemon = Daemon::start(&cfg, KindRegistry::with_synthetic(), Vec::new())
        .await
        .expect("allowed explicitly");
    daemon.shutdown().await.expect("shutdown");

    let dir = scratch("open-token");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "t").unwrap();
    let cfg = config("open-token", |c| {
        c.listen = "0.0.0.0:0".into();
        c.auth_token_file = token_file.clone();
    });
    let daemon = Daemon::start(&cfg, KindRegistry::with_synthetic(), Vec::new())
        .await
        .expect("a token makes it safe");
    daemon.shutdown().await.expect("shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #18 item 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_is_0660_and_a_live_daemon_keeps_it() {
    let cfg = config("owner", |_| {});
    let (daemon, mut client) = start(cfg.clone()).await;
    let ListenAddr::Unix(path) = daemon.grpc_addr().clone() else {
        panic!("unix socket expected")
    };
    let meta = std::fs::symlink_metadata(&path).expect("socket");
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.mode() & 0o777, 0o660, "mode {:o}", meta.mode() & 0o777);

    let err = start_err(cfg.clone()).await;
    assert!(
        matches!(err, ServeError::Socket(SocketError::InUse(_))),
        "{err}"
    );
    // The first daemon still answers on its socket.
    client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("first daemon still serves");
    let mut fresh = connect(daemon.grpc_addr()).await;
    fresh
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("new connections reach the first daemon");
    daemon.shutdown().await.expect("shutdown");

    // A socket file with nobody behind it is stale: replaced.
    let stale = std::os::unix::net::UnixListener::bind(&path).expect("stale socket");
    drop(stale);
    assert!(path.exists());
    let (daemon, mut client) = start(cfg).await;
    client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("serves on the replaced socket");
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synthetic_is_refused_unless_enabled() {
    let cfg = config("nosynth", |c| c.allow_synthetic = false);
    let (daemon, mut client) = start(cfg).await;
    let err = client
        .submit_proof(synthetic("nosynth-1", 5, 1, 1))
        .await
        .expect_err("synthetic refused");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    assert!(err.message().contains("allow_synthetic"), "{err}");
    let err = client
        .prove(pb::ProveRequest {
            submit: Some(synthetic("nosynth-2", 5, 1, 1)),
        })
        .await
        .expect_err("synthetic refused");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    let err = client
        .preload_srs(pb::PreloadSrsRequest {
            circuit_id: "synthetic-20".into(),
        })
        .await
        .expect_err("no parameters generated on request");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err}");
    assert!(!param_dir().join("cuzk-synthetic-20.params").exists());
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 4.
#[test]
fn gen_params_keeps_test_files_out_of_the_production_directory() {
    let dir = scratch("gen-params");
    let production = dir.join("production");
    std::fs::create_dir_all(&production).unwrap();
    let run = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_cuzk"))
            .args([
                "gen",
                "params",
                "--kind",
                "winning-post",
                "--sector-size",
                "2KiB",
                "--cpu",
            ])
            .args(extra)
            .env("FIL_PROOFS_PARAMETER_CACHE", &production)
            .output()
            .expect("run cuzk")
    };
    for extra in [&[][..], &["--dir", production.to_str().unwrap()][..]] {
        let out = run(extra);
        assert!(!out.status.success(), "refused with {extra:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("--i-know-these-are-test-params"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_dir(&production).unwrap().count(),
            0,
            "nothing written"
        );
    }
    // The same directory through a link is still the production one.
    let link = dir.join("link");
    std::os::unix::fs::symlink(&production, &link).unwrap();
    let out = run(&["--dir", link.to_str().unwrap()]);
    assert!(!out.status.success(), "refused through a link");
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #18 item 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_over_the_size_limit_is_resource_exhausted() {
    let cfg = config("size", |c| c.max_request_bytes = 4096);
    let (daemon, mut client) = start(cfg).await;
    let mut req = synthetic("size-1", 5, 1, 1);
    req.vanilla_proofs = vec![vec![7u8; 8192]];
    let err = client.submit_proof(req).await.expect_err("too large");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    assert!(err.message().contains("4096"), "{err}");
    // The connection stays usable, and small requests pass.
    let job = submit(&mut client, synthetic("size-2", 5, 1, 1)).await;
    assert_eq!(
        status_of(&wait(&mut client, &job).await),
        pb::await_proof_response::Status::Completed
    );
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_beyond_the_queue_limit_are_resource_exhausted() {
    let cfg = config("queued", |c| {
        c.engine.max_queued_jobs = 1;
        c.engine.synthesis_workers = 1;
    });
    let (daemon, mut client) = start(cfg).await;
    let job = submit(&mut client, synthetic("queued-1", 10, 16, 11)).await;
    let err = client
        .submit_proof(synthetic("queued-2", 5, 1, 1))
        .await
        .expect_err("queue full");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    assert!(err.message().contains("max_queued_jobs"), "{err}");
    client
        .cancel_proof(pb::CancelProofRequest { job_id: job })
        .await
        .expect("cancel");
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_per_connection_queues_the_second_call() {
    let cfg = config("streams", |c| {
        c.max_concurrent_streams = 1;
        c.engine.synthesis_workers = 1;
    });
    let (daemon, mut client) = start(cfg).await;
    let job = submit(&mut client, synthetic("streams-1", 12, 64, 9)).await;
    // The await holds the connection's only stream for 1 s (the job takes longer). Both
    // calls are driven from one task, the await first, so it takes the stream first on
    // a busy machine too (the channel's buffer is FIFO). See: #33.
    let mut holder = client.clone();
    let t = Instant::now();
    let (held, status) = tokio::join!(
        async {
            let r = holder
                .await_proof(pb::AwaitProofRequest {
                    job_id: job.clone(),
                    timeout_ms: 1000,
                })
                .await;
            (r, t.elapsed())
        },
        async {
            let r = client.clone().get_status(pb::GetStatusRequest {}).await;
            (r, t.elapsed())
        },
    );
    let (first, held_done) = held;
    let first = first.expect("await answered").into_inner();
    assert_eq!(status_of(&first), pb::await_proof_response::Status::Timeout);
    let (status, status_done) = status;
    status.expect("status after the await");
    // Both calls start at once, so the status call, queued behind the await, cannot
    // finish before the await's 1 s on the server; beside it, it would take milliseconds.
    // (Which of two answers landing in one wake-up join! sees first is not an order.)
    assert!(
        status_done >= Duration::from_millis(1000),
        "the second call ran beside the first (status at {status_done:?}, await at {held_done:?})"
    );
    client
        .cancel_proof(pb::CancelProofRequest { job_id: job })
        .await
        .expect("cancel");
    daemon.shutdown().await.expect("shutdown");
}
