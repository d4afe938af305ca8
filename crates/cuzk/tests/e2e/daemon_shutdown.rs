//! Shutdown: the `cuzk daemon` binary drains accepted jobs on SIGTERM (their callers get
//! COMPLETED) and exits 0; a drain timeout fails the rest with a reason, which their
//! callers get as UNAVAILABLE; `--print-config`
//! prints the effective config with flags applied, its budgets sized from the memory
//! cgroup it runs in.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::daemon_common::*;
use cuzk_server::pb;
use cuzk_server::{DaemonConfig, ListenAddr};
use pb::await_proof_response::Status as S;

#[test]
fn print_config_applies_flags() {
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "daemon",
            "--print-config",
            "--synthesis-workers",
            "3",
            "--listen",
            "127.0.0.1:7777",
            "--http",
            "",
        ])
        .output()
        .expect("run cuzk");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cfg =
        DaemonConfig::parse(&String::from_utf8_lossy(&out.stdout)).expect("valid TOML config");
    assert_eq!(cfg.engine.synthesis_workers, 3);
    assert_eq!(cfg.listen, "127.0.0.1:7777");
    assert_eq!(cfg.http_listen, "");
    assert_eq!(
        cfg.engine.cpu_workers,
        DaemonConfig::default().engine.cpu_workers
    );
}

// See: #26 item 3 (the budgets' default from MemTotal and the cgroup limit). A container
// on a v1 or hybrid host (this project's CI machine is one) sets its limit in v1's
// memory.limit_in_bytes, which a v2-only reading missed: the daemon then budgeted for the
// whole host and the cgroup's OOM killer ended it.
#[test]
fn print_config_sizes_the_budgets_from_the_memory_cgroup_it_runs_in() {
    use cuzk_engine::sizing::{Machine, Sizing};
    let limit: u64 = 4 << 30;
    if Machine::detect().mem_total_bytes <= limit {
        crate::support::skip("this machine's memory is within the test's cgroup limit");
        return;
    }
    // A child of this test's own memory cgroup, limited to 4 GiB, made, entered and
    // removed by the bench script that runs loads under a limit.
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../bench/cgroup_run.py");
    let out = Command::new("python3")
        .args([script, &limit.to_string(), "--"])
        .args([env!("CARGO_BIN_EXE_cuzk"), "daemon", "--print-config"])
        .output()
        .expect("run python3 (the tests need it: README)");
    if out.status.code() == Some(3) {
        crate::support::skip("no writable memory cgroup (needs root and a v1 memory controller or a delegated v2 one)");
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The daemon's config, then the script's JSON line.
    let (config, report) = stdout.trim_end().rsplit_once('\n').expect("two parts");
    let report: serde_json::Value = serde_json::from_str(report).expect("the script's JSON");
    let cgroup = report["cgroup"].as_str().expect("cgroup named");
    assert_eq!(report["removed"], true, "{cgroup} stayed");
    let limit_file = match cgroup.split_once(' ') {
        Some(("v1", dir)) => format!("{dir}/memory.limit_in_bytes"),
        Some(("v2", dir)) => format!("{dir}/memory.max"),
        _ => panic!("cgroup {cgroup}"),
    };
    let origin = format!("4.0 GiB ({limit_file})");
    assert!(
        config.lines().next().is_some_and(|l| l.contains(&origin)),
        "the first line names {origin}:\n{config}"
    );
    let cfg = DaemonConfig::parse(config).expect("valid TOML config");
    let sized = Sizing::for_machine(Machine {
        // The budgets do not depend on the cores.
        cores: 1,
        mem_total_bytes: limit,
    });
    assert_eq!(
        (
            cfg.engine.host_memory_budget_bytes,
            cfg.engine.srs_budget_bytes,
            cfg.engine.recorded_r1cs_budget_bytes
        ),
        (
            sized.host_memory_budget_bytes,
            sized.srs_budget_bytes,
            sized.recorded_r1cs_budget_bytes
        )
    );
}

#[test]
fn example_config_is_the_default_config() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../cuzk.example.toml");
    let mut example = DaemonConfig::load(std::path::Path::new(path)).expect("example parses");
    // param_dir's default comes from the environment.
    example.engine.param_dir = DaemonConfig::default().engine.param_dir;
    // So does journal_dir's.
    example.journal_dir = DaemonConfig::default().journal_dir;
    assert_eq!(example, DaemonConfig::default());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_drains_accepted_jobs() {
    let socket = socket_path("sigterm");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "daemon",
            "--http",
            "",
            "--drain-timeout-secs",
            "60",
            "--allow-synthetic",
            "--journal-dir",
            "",
        ])
        .arg("--listen")
        .arg(format!("unix://{}", socket.display()))
        .arg("--param-dir")
        .arg(param_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start daemon");
    let addr = ListenAddr::Unix(socket.clone());
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut client = loop {
        if let Ok(c) = cuzk_server::connect(&addr).await {
            break c;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "daemon did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let jobs = [
        submit(&mut client, synthetic("drain-1", 8, 2, 1)).await,
        submit(&mut client, synthetic("drain-2", 8, 2, 2)).await,
    ];
    let mut waits = Vec::new();
    for job in jobs.clone() {
        let mut c = client.clone();
        waits.push(tokio::spawn(async move { wait(&mut c, &job).await }));
    }
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    for w in waits {
        let done = w.await.expect("await task");
        assert_eq!(status_of(&done), S::Completed, "{}", done.error_message);
    }
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "daemon exit {status:?}");
    assert!(!socket.exists(), "socket removed on exit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_timeout_fails_the_rest_with_a_reason() {
    let cfg = config("drain0", |c| {
        c.drain_timeout_secs = 0;
        c.engine.synthesis_workers = 1;
    });
    let (daemon, mut client) = start(cfg).await;
    let job = submit(&mut client, synthetic("", 10, 16, 4)).await;
    let mut waiter = client.clone();
    let wait_task = tokio::spawn({
        let job = job.clone();
        async move {
            waiter
                .await_proof(pb::AwaitProofRequest {
                    job_id: job,
                    timeout_ms: 0,
                })
                .await
        }
    });
    status_until(&mut client, Duration::from_secs(30), |s| s.active_jobs == 1).await;
    let report = daemon.shutdown().await.expect("shutdown");
    assert_eq!((report.drained, report.failed), (0, 1));
    // See: #18 item 8. Another daemon can prove it: UNAVAILABLE, which clients and load
    // balancers retry, not OK with status FAILED.
    let err = wait_task
        .await
        .expect("await task")
        .expect_err("a drain timeout is retryable");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err}");
    assert!(err.message().contains("drain timeout"), "{err}");
}
