//! Durability (issue #32): the real `cuzk daemon` binary with a journal loses no
//! accepted job across a SIGKILL (every id completes after a restart on the same
//! journal, which itself comes right after the kill), keeps serving reads during a
//! SIGTERM drain (a job whose client left is collected during the drain and after the
//! restart), and a unix socket authorised by its mode serves a tokenless client while
//! TCP refuses it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::daemon_common::*;
use cuzk_server::pb;
use cuzk_server::{Client, ListenAddr};
use pb::await_proof_response::Status as S;
use tonic::Code;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuzk-durable-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Starts `cuzk daemon` on `socket` with its journal in `journal`.
fn spawn_daemon(socket: &Path, journal: &Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "daemon",
            "--http",
            "",
            "--drain-timeout-secs",
            "120",
            "--allow-synthetic",
            "--synthesis-workers",
            "1",
        ])
        .arg("--listen")
        .arg(format!("unix://{}", socket.display()))
        .arg("--param-dir")
        .arg(param_dir())
        .arg("--journal-dir")
        .arg(journal)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start daemon")
}

/// Connects to a daemon that is starting (bounded wait).
async fn connect_when_up(socket: &Path) -> Client {
    let addr = ListenAddr::Unix(socket.to_path_buf());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut c) = cuzk_server::connect(&addr).await {
            if c.get_status(pb::GetStatusRequest {}).await.is_ok() {
                return c;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "daemon did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(ok.success());
}

async fn exit_of(child: Child) -> std::process::ExitStatus {
    let mut child = child;
    tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait")
}

// See: #32 items 1 and 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_loses_no_accepted_job_and_a_restart_right_after_it_succeeds() {
    let dir = scratch("kill9");
    let socket = socket_path("kill9");
    let journal = dir.join("journal");
    let child = spawn_daemon(&socket, &journal);
    let mut client = connect_when_up(&socket).await;
    // One running, the others queued behind it (one synthesis worker).
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(submit(&mut client, synthetic(&format!("kill9-{i}"), 10, 4, 40 + i)).await);
    }
    status_until(&mut client, Duration::from_secs(60), |s| s.active_jobs == 3).await;
    let mut child = child;
    child.kill().expect("SIGKILL");
    let _ = exit_of(child).await;
    drop(client);

    // Restarted at once on the same socket (the stale socket is replaced) and journal.
    let child = spawn_daemon(&socket, &journal);
    let mut client = connect_when_up(&socket).await;
    for id in &ids {
        let done = wait(&mut client, id).await;
        // COMPLETED only after the engine verified the assembled proof.
        assert_eq!(
            status_of(&done),
            S::Completed,
            "{id}: {}",
            done.error_message
        );
        assert!(!done.proof.is_empty(), "{id}");
    }
    // A re-submit of the same request attaches to the replayed job.
    let again = client
        .submit_proof(synthetic("kill9-0", 10, 4, 40))
        .await
        .expect("re-submit")
        .into_inner();
    assert_eq!(again.job_id, ids[0]);
    // An id never issued and one issued are told apart.
    let err = client
        .await_proof(pb::AwaitProofRequest {
            job_id: "nonsense-7".into(),
            timeout_ms: 0,
        })
        .await
        .expect_err("unknown");
    assert_eq!(err.code(), Code::NotFound);
    assert!(err.message().contains("never issued"), "{err}");
    signal(&child, "-TERM");
    assert!(exit_of(child).await.success());
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #32 item 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_keeps_answering_reads_and_the_proof_outlives_the_exit() {
    let dir = scratch("drain");
    let socket = socket_path("drainreads");
    let journal = dir.join("journal");
    let child = spawn_daemon(&socket, &journal);
    let job = {
        // The submitting client leaves at once.
        let mut gone = connect_when_up(&socket).await;
        submit(&mut gone, synthetic("drain-reads", 11, 6, 7)).await
    };
    let mut client = connect_when_up(&socket).await;
    status_until(&mut client, Duration::from_secs(60), |s| s.active_jobs == 1).await;
    signal(&child, "-TERM");
    // Draining: submits refused, status and health answer, the job is collected. Until
    // the signal lands (late on a busy machine) a submit is accepted as usual: each
    // carries the same request and so attaches to the first of them, one job at most.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut accepted = std::collections::BTreeSet::new();
    let refused = loop {
        match client.submit_proof(synthetic("drain-new", 5, 1, 1)).await {
            Err(e) => break e,
            Ok(r) => {
                accepted.insert(r.into_inner().job_id);
                assert!(tokio::time::Instant::now() < deadline, "never refused");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(refused.code(), Code::Unavailable, "{refused}");
    assert!(accepted.len() <= 1, "one request, one job: {accepted:?}");
    let status = client
        .get_status(pb::GetStatusRequest {})
        .await
        .expect("status answers during the drain")
        .into_inner();
    assert!(
        status.active_jobs <= 1 + accepted.len() as u64,
        "{} active, {} accepted before the drain",
        status.active_jobs,
        accepted.len()
    );
    let channel = cuzk_server::client::channel(&ListenAddr::Unix(socket.clone()))
        .await
        .expect("health connects during the drain");
    let health = tonic_health::pb::health_client::HealthClient::new(channel)
        .check(tonic_health::pb::HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health answers")
        .into_inner();
    assert_eq!(
        health.status,
        tonic_health::pb::health_check_response::ServingStatus::NotServing as i32
    );
    let done = wait(&mut client, &job).await;
    assert_eq!(status_of(&done), S::Completed, "{}", done.error_message);
    assert!(exit_of(child).await.success());

    // After the restart the result is still there.
    let child = spawn_daemon(&socket, &journal);
    let mut client = connect_when_up(&socket).await;
    let again = wait(&mut client, &job).await;
    assert_eq!(status_of(&again), S::Completed);
    assert_eq!(again.proof, done.proof);
    signal(&child, "-TERM");
    assert!(exit_of(child).await.success());
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #32 item 5.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tokenless_client_proves_over_the_unix_socket_while_tcp_needs_the_token() {
    let dir = scratch("listeners");
    let token_file = dir.join("token");
    std::fs::write(&token_file, "listener-token\n").unwrap();
    let cfg = config("listeners", |c| {
        c.listen_also = vec!["127.0.0.1:0".into()];
        c.auth_token_file = token_file.clone();
        c.token_on_unix_sockets = false;
    });
    let (daemon, mut unix) = start(cfg).await;
    let job = submit(&mut unix, synthetic("unix-no-token", 6, 1, 3)).await;
    let done = wait(&mut unix, &job).await;
    assert_eq!(status_of(&done), S::Completed, "{}", done.error_message);

    let tcp_addr = daemon.grpc_addrs()[1].clone();
    assert!(matches!(&tcp_addr, ListenAddr::Tcp(_)));
    let mut tcp = connect(&tcp_addr).await;
    let err = tcp
        .get_status(pb::GetStatusRequest {})
        .await
        .expect_err("tcp without the token");
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    let with = cuzk_server::auth::request(pb::GetStatusRequest {}, Some("listener-token")).unwrap();
    tcp.get_status(with).await.expect("tcp with the token");
    daemon.shutdown().await.expect("shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}
