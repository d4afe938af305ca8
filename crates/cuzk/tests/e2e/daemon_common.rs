//! Shared helpers of the daemon end-to-end tests: a daemon in this process on a real unix
//! socket (CPU backend, synthetic kind, parameters cached under the target dir), a client
//! connected through that socket, and request builders.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use cuzk_engine::synthetic::SyntheticSpec;
use cuzk_engine::KindRegistry;
use cuzk_server::pb;
use cuzk_server::{Client, Daemon, DaemonConfig, ListenAddr};

/// Parameters shared by every test binary (generated once per log_n, then reused).
pub fn param_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-daemon-params")
}

/// A fresh unix socket path for one daemon.
pub fn socket_path(name: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    // Short: unix socket paths are limited to ~108 bytes.
    std::env::temp_dir().join(format!("cuzk-{}-{name}-{n}.sock", std::process::id()))
}

/// A config for a test daemon; `edit` adjusts it.
pub fn config(name: &str, edit: impl FnOnce(&mut DaemonConfig)) -> DaemonConfig {
    let mut cfg = DaemonConfig {
        listen: format!("unix://{}", socket_path(name).display()),
        http_listen: String::new(),
        drain_timeout_secs: 30,
        allow_synthetic: true,
        // Tests that journal name their own directory.
        journal_dir: PathBuf::new(),
        ..DaemonConfig::default()
    };
    cfg.engine.param_dir = param_dir();
    cfg.engine.synthesis_workers = 2;
    cfg.engine.cpu_workers = 1;
    edit(&mut cfg);
    cfg
}

/// Starts a daemon and connects a client through its socket.
pub async fn start(cfg: DaemonConfig) -> (Daemon, Client) {
    let daemon = Daemon::start(&cfg, KindRegistry::with_synthetic(), Vec::new())
        .await
        .expect("daemon starts");
    let client = connect(daemon.grpc_addr()).await;
    (daemon, client)
}

/// Connects a new client.
pub async fn connect(addr: &ListenAddr) -> Client {
    cuzk_server::connect(addr).await.expect("client connects")
}

/// A synthetic submit request.
pub fn synthetic(
    request_id: &str,
    log_n: u32,
    n_partitions: u32,
    seed: u64,
) -> pb::SubmitProofRequest {
    pb::SubmitProofRequest {
        request_id: request_id.into(),
        proof_kind: pb::ProofKind::Synthetic as i32,
        vanilla_proof: SyntheticSpec {
            log_n,
            n_partitions,
            seed,
        }
        .encode(),
        ..Default::default()
    }
}

/// Submits and returns the job id.
pub async fn submit(client: &mut Client, req: pb::SubmitProofRequest) -> String {
    client
        .submit_proof(req)
        .await
        .expect("submit accepted")
        .into_inner()
        .job_id
}

/// Waits for a job with no timeout.
pub async fn wait(client: &mut Client, job_id: &str) -> pb::AwaitProofResponse {
    client
        .await_proof(pb::AwaitProofRequest {
            job_id: job_id.into(),
            timeout_ms: 0,
        })
        .await
        .expect("await answered")
        .into_inner()
}

/// The status enum of an await response.
pub fn status_of(r: &pb::AwaitProofResponse) -> pb::await_proof_response::Status {
    pb::await_proof_response::Status::try_from(r.status)
        .unwrap_or(pb::await_proof_response::Status::Unknown)
}

/// Polls `GetStatus` until `pred` holds (panics after `limit`).
pub async fn status_until(
    client: &mut Client,
    limit: Duration,
    pred: impl Fn(&pb::GetStatusResponse) -> bool,
) -> pb::GetStatusResponse {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let s = client
            .get_status(pb::GetStatusRequest {})
            .await
            .expect("status")
            .into_inner();
        if pred(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "condition not reached; last status {s:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Sends one HTTP/1.0 GET and returns the status code and the body.
pub async fn http_status(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("http connects");
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read");
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

/// Sends one HTTP/1.0 GET, asserts a 200 and returns the body.
pub async fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let (code, body) = http_status(addr, path).await;
    assert_eq!(code, 200, "{body}");
    body
}
