//! Scale-out behind nginx (issue #30): three `cuzk daemon`s and a fourth whose parameters
//! are broken (so not ready), behind an nginx that runs `deploy/nginx/gen.sh`'s config.
//! A bounded load of small synthetic proofs goes through it, half with `Prove` and half
//! with `SubmitProof` + `AwaitProof` (routed back by `x-cuzk-daemon`), by a client that
//! follows the retry rule of docs/operations.md; one daemon is killed with SIGKILL
//! mid-run. Every request id completes exactly once with a proof that verifies, no live
//! daemon proved a request id another one answered, and the broken daemon proved nothing:
//! its gate's 503s made nginx pass each call on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use crate::daemon_common::*;
use crate::support::skip;
use cuzk_groth16::PartitionedProof;
use cuzk_server::pb;
use cuzk_server::{Client, ListenAddr};
use pb::await_proof_response::Status as S;
use tonic::Code;

/// log2 of each partition's domain, and partitions per job: a job takes a few hundred
/// milliseconds on one core, so a kill lands among running and queued jobs.
const LOG_N: u32 = 12;
const PARTITIONS: u32 = 2;
const JOBS: usize = 48;
/// Calls in flight at once (a few per daemon: least_conn has queues to compare).
const CONCURRENCY: usize = 8;
/// The header that names a daemon (crates/cuzk-server/src/gate.rs).
const DAEMON_HEADER: &str = cuzk_server::gate::DAEMON_HEADER;

/// A child process ended on drop with SIGTERM (a daemon drains; nginx's master stops its
/// workers), so that a failed assert leaves no process behind.
struct Proc {
    child: Option<Child>,
}

impl Proc {
    fn new(child: Child) -> Proc {
        Proc { child: Some(child) }
    }

    /// SIGKILL now, and reap it.
    fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while std::time::Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// nginx's binary, or `None` (the test then skips).
fn nginx_binary() -> Option<PathBuf> {
    let on_path = Command::new("sh")
        .args(["-c", "command -v nginx"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    on_path
        .or_else(|| Some(PathBuf::from("/usr/sbin/nginx")))
        .filter(|p| p.is_file())
}

/// Starts `cuzk daemon --name NAME` on a unix socket.
fn spawn_daemon(name: &str, socket: &Path, params: &Path, journal: &Path) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "daemon",
            "--http",
            "",
            "--drain-timeout-secs",
            "10",
            "--allow-synthetic",
            "--synthesis-workers",
            "1",
            "--name",
            name,
        ])
        .arg("--listen")
        .arg(format!("unix://{}", socket.display()))
        .arg("--param-dir")
        .arg(params)
        .arg("--journal-dir")
        .arg(journal)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start daemon");
    Proc::new(child)
}

/// Writes `DIR/nginx.conf` around gen.sh's output and starts nginx on `DIR/nginx.sock`.
fn spawn_nginx(nginx: &Path, dir: &Path, daemons: &[(String, PathBuf)]) -> (Proc, PathBuf) {
    let gen = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/nginx/gen.sh");
    let listen = dir.join("nginx.sock");
    let mut args = vec!["--listen".to_string(), format!("unix:{}", listen.display())];
    for (name, socket) in daemons {
        args.push(format!("{name}=unix:{}", socket.display()));
    }
    let out = Command::new("bash")
        .arg(&gen)
        .args(&args)
        .output()
        .expect("run gen.sh");
    assert!(
        out.status.success(),
        "gen.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(dir.join("cuzk.conf"), &out.stdout).unwrap();
    // As root, nginx's workers would run as nobody, who cannot open the daemons' 0660
    // sockets; as another user the directive is ignored.
    let user = if running_as_root() { "user root;" } else { "" };
    let d = dir.display();
    let conf = format!(
        "{user}\nworker_processes 1;\npid {d}/nginx.pid;\nerror_log stderr warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n\
           log_format cuzk '$uri|$upstream_addr|$upstream_status|$status';\n\
           access_log {d}/access.log cuzk;\n\
           client_body_temp_path {d}/body; proxy_temp_path {d}/proxy;\n\
           fastcgi_temp_path {d}/fastcgi; uwsgi_temp_path {d}/uwsgi; scgi_temp_path {d}/scgi;\n\
           include {d}/cuzk.conf;\n\
         }}\n"
    );
    std::fs::write(dir.join("nginx.conf"), conf).unwrap();
    let child = Command::new(nginx)
        .arg("-p")
        .arg(dir)
        .arg("-c")
        .arg(dir.join("nginx.conf"))
        .args(["-e", "stderr", "-g", "daemon off;"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start nginx");
    (Proc::new(child), listen)
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Connects to `addr` once a `GetStatus` answers there (bounded wait).
async fn connect_when_up(addr: &ListenAddr, header: Option<&str>) -> Client {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(mut c) = cuzk_server::connect(addr).await {
            if c.get_status(named(pb::GetStatusRequest {}, header))
                .await
                .is_ok()
            {
                return c;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{addr:?} did not come up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A request carrying `x-cuzk-daemon: NAME` when a name is given.
fn named<T>(message: T, daemon: Option<&str>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(name) = daemon {
        request
            .metadata_mut()
            .insert(DAEMON_HEADER, name.parse().expect("a header value"));
    }
    request
}

/// The daemon a response or an error names.
fn daemon_of(metadata: &tonic::metadata::MetadataMap) -> Option<String> {
    metadata
        .get(DAEMON_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(String::from)
}

/// One request id's ending, as the client saw it.
#[derive(Debug)]
struct Done {
    daemon: String,
    job_id: String,
    proof: Vec<u8>,
    /// Calls that got UNAVAILABLE (or lost their connection) and were retried.
    retries: u32,
}

/// Whether the retry rule retries this error: UNAVAILABLE, which nginx also gives when a
/// daemon is gone (502) or it timed out (504), and a connection lost mid-call.
fn retryable(status: &tonic::Status) -> bool {
    matches!(
        status.code(),
        Code::Unavailable | Code::Unknown | Code::Cancelled
    )
}

/// The client side of docs/operations.md's retry rule, through the balancer at `client`.
/// `Prove`: retry UNAVAILABLE with the same request (same request_id, same payload).
/// `SubmitProof` + `AwaitProof`: submit as `Prove` does, then await on the daemon the
/// submit's `x-cuzk-daemon` names; when that daemon is gone (UNAVAILABLE), submit again.
struct RetryingClient {
    client: Client,
    deadline: tokio::time::Instant,
}

impl RetryingClient {
    async fn backoff(&self, what: &str, status: &tonic::Status) {
        assert!(
            tokio::time::Instant::now() < self.deadline,
            "{what}: still failing at the deadline: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    async fn prove(&mut self, req: &pb::SubmitProofRequest) -> Done {
        let mut retries = 0;
        loop {
            let call = pb::ProveRequest {
                submit: Some(req.clone()),
            };
            match self.client.prove(named(call, None)).await {
                Ok(response) => {
                    let daemon = daemon_of(response.metadata()).expect("response names its daemon");
                    let result = response.into_inner().result.expect("a result");
                    assert_eq!(status_of(&result), S::Completed, "{}", result.error_message);
                    return Done {
                        daemon,
                        job_id: result.job_id,
                        proof: result.proof,
                        retries,
                    };
                }
                Err(status) if retryable(&status) => {
                    retries += 1;
                    self.backoff(&format!("prove {}", req.request_id), &status)
                        .await;
                }
                Err(status) => panic!("prove {}: {status}", req.request_id),
            }
        }
    }

    async fn submit_and_await(&mut self, req: &pb::SubmitProofRequest) -> Done {
        let mut retries = 0;
        loop {
            let submitted = match self.client.submit_proof(named(req.clone(), None)).await {
                Ok(r) => r,
                Err(status) if retryable(&status) => {
                    retries += 1;
                    self.backoff(&format!("submit {}", req.request_id), &status)
                        .await;
                    continue;
                }
                Err(status) => panic!("submit {}: {status}", req.request_id),
            };
            let daemon = daemon_of(submitted.metadata()).expect("submit names its daemon");
            let job_id = submitted.into_inner().job_id;
            // The job id names its daemon too: `NAME.…`.
            assert_eq!(
                job_id.split('.').next(),
                Some(daemon.as_str()),
                "job id {job_id} from {daemon}"
            );
            let wait = pb::AwaitProofRequest {
                job_id: job_id.clone(),
                timeout_ms: 0,
            };
            match self.client.await_proof(named(wait, Some(&daemon))).await {
                Ok(response) => {
                    let from = daemon_of(response.metadata()).expect("await names its daemon");
                    assert_eq!(from, daemon, "AwaitProof went to another daemon");
                    let result = response.into_inner();
                    assert_eq!(status_of(&result), S::Completed, "{}", result.error_message);
                    return Done {
                        daemon,
                        job_id,
                        proof: result.proof,
                        retries,
                    };
                }
                // The daemon that holds the job is gone: submit again, same request.
                Err(status) if retryable(&status) => {
                    retries += 1;
                    self.backoff(&format!("await {job_id}"), &status).await;
                }
                Err(status) => panic!("await {job_id} on {daemon}: {status}"),
            }
        }
    }
}

/// The synthetic request of job `i`.
fn request(i: usize) -> pb::SubmitProofRequest {
    synthetic(&format!("scaleout-{i}"), LOG_N, PARTITIONS, 3000 + i as u64)
}

/// Verifies `proof` for `req` against the verifying key in the parameters file, the way
/// the engine does (each partition's public inputs from its synthesis).
fn verify(req: &pb::SubmitProofRequest, proof: &[u8], vk: &cuzk_groth16::VerifyingKey) {
    assert_eq!(proof.len(), 192 * PARTITIONS as usize, "{}", req.request_id);
    let parsed = cuzk_engine::synthetic::SyntheticProof::parse(&cuzk_groth16::ProofRequest {
        vanilla_proof: req.vanilla_proof.clone(),
        ..Default::default()
    })
    .expect("synthetic request");
    let proofs: Vec<cuzk_groth16::Proof> = proof
        .chunks(192)
        .map(|c| cuzk_groth16::Proof::read(c).expect("a proof"))
        .collect();
    let again = parsed
        .assemble_and_verify(&proofs, vk)
        .unwrap_or_else(|e| panic!("{}: proof does not verify: {e}", req.request_id));
    assert_eq!(again, proof);
}

// See: #30.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_behind_nginx_lose_nothing_when_one_is_killed_and_a_broken_one_draws_no_work()
{
    let Some(nginx) = nginx_binary() else {
        skip("nginx not installed");
        return;
    };
    let dir = std::env::temp_dir().join(format!("cuzk-scaleout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();

    // The broken daemon: a truncated PoRep parameters file (readiness says no) and a
    // synthetic one that cannot load (a job it took would fail at once).
    let bad_params = dir.join("bad-params");
    std::fs::create_dir_all(&bad_params).unwrap();
    let porep = cuzk_filecoin::params_file_name(
        cuzk_filecoin::FilecoinKind::PoRep,
        cuzk_filecoin::SectorSize::S2KiB,
    )
    .unwrap();
    std::fs::write(bad_params.join(porep), b"truncated").unwrap();
    std::fs::write(
        cuzk_engine::synthetic::params_file(&bad_params, LOG_N),
        b"not a parameters file",
    )
    .unwrap();

    let names = ["d1", "d2", "d3", "bad"];
    let mut daemons = HashMap::new();
    let mut sockets = Vec::new();
    for name in names {
        let socket = socket_path(&format!("so-{name}"));
        let params = if name == "bad" {
            bad_params.clone()
        } else {
            param_dir()
        };
        let proc = spawn_daemon(name, &socket, &params, &dir.join(format!("journal-{name}")));
        sockets.push((name.to_string(), socket.clone()));
        daemons.insert(name, (proc, ListenAddr::Unix(socket)));
    }
    // Direct clients, for the daemons' own counts.
    let mut direct = HashMap::new();
    for name in names {
        direct.insert(name, connect_when_up(&daemons[name].1, None).await);
    }
    let bad_status = direct
        .get_mut("bad")
        .unwrap()
        .get_status(pb::GetStatusRequest {})
        .await
        .unwrap()
        .into_inner();
    assert!(!bad_status.ready, "the broken daemon must not be ready");
    // Parameters made once, before the clock of the load starts.
    let mut warm = direct["d1"].clone();
    warm.preload_srs(pb::PreloadSrsRequest {
        circuit_id: format!("synthetic-{LOG_N}"),
    })
    .await
    .expect("preload");
    let vk = cuzk_groth16::Srs::load(
        &cuzk_engine::synthetic::params_file(&param_dir(), LOG_N),
        Default::default(),
    )
    .expect("parameters load")
    .vk;

    let (_nginx, nginx_socket) = spawn_nginx(&nginx, &dir, &sockets);
    let balancer = ListenAddr::Unix(nginx_socket);
    let mut client = connect_when_up(&balancer, None).await;
    // Affinity: a call that names a daemon reaches that daemon.
    for name in names {
        let r = client
            .get_status(named(pb::GetStatusRequest {}, Some(name)))
            .await
            .expect("status by name");
        assert_eq!(daemon_of(r.metadata()).as_deref(), Some(name));
    }

    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    let gate = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
    let finished = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for i in 0..JOBS {
        let mut rc = RetryingClient {
            client: client.clone(),
            deadline,
        };
        let (gate, finished) = (gate.clone(), finished.clone());
        tasks.push(tokio::spawn(async move {
            let _slot = gate.acquire_owned().await.unwrap();
            let req = request(i);
            let done = if i % 2 == 0 {
                rc.prove(&req).await
            } else {
                rc.submit_and_await(&req).await
            };
            finished.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            (req, done)
        }));
    }

    // Mid-run: SIGKILL a daemon that holds jobs.
    while finished.load(std::sync::atomic::Ordering::Relaxed) < JOBS / 4 {
        assert!(tokio::time::Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let victim = loop {
        let mut busiest = None;
        for name in ["d1", "d2", "d3"] {
            let s = direct
                .get_mut(name)
                .unwrap()
                .get_status(pb::GetStatusRequest {})
                .await
                .unwrap()
                .into_inner();
            if s.active_jobs > 0 && busiest.is_none_or(|(_, n)| s.active_jobs > n) {
                busiest = Some((name, s.active_jobs));
            }
        }
        if let Some((name, _)) = busiest {
            break name;
        }
        assert!(tokio::time::Instant::now() < deadline, "no daemon busy");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    daemons.get_mut(victim).unwrap().0.kill_9();
    direct.remove(victim);
    let killed_at = finished.load(std::sync::atomic::Ordering::Relaxed);

    let mut by_daemon: HashMap<String, u64> = HashMap::new();
    let mut retries = 0;
    let mut seen = std::collections::HashSet::new();
    for task in tasks {
        let (req, done) = task.await.expect("client task");
        assert!(
            seen.insert(req.request_id.clone()),
            "{} twice",
            req.request_id
        );
        assert_eq!(
            done.job_id.split('.').next(),
            Some(done.daemon.as_str()),
            "{done:?}"
        );
        assert_ne!(done.daemon, "bad", "the broken daemon answered {done:?}");
        verify(&req, &done.proof, &vk);
        *by_daemon.entry(done.daemon).or_default() += 1;
        retries += done.retries;
    }
    assert_eq!(seen.len(), JOBS);

    // Each live daemon proved exactly what the client got from it: nothing proved twice
    // (a second copy would be a completion no client saw) and nothing left running.
    for (name, c) in direct.iter_mut() {
        let s = c
            .get_status(pb::GetStatusRequest {})
            .await
            .unwrap()
            .into_inner();
        let mine = by_daemon.get(*name).copied().unwrap_or(0);
        assert_eq!(
            (
                s.total_proofs_completed,
                s.total_proofs_failed,
                s.active_jobs
            ),
            (mine, 0, 0),
            "{name}: completed, failed, active vs the {mine} the client got from it"
        );
    }
    assert!(
        by_daemon.len() >= 2,
        "the work spread over the live daemons: {by_daemon:?}"
    );
    // nginx tried the broken daemon and moved on: its 503 was followed by another
    // daemon's answer within the same call.
    let log = std::fs::read_to_string(dir.join("access.log")).unwrap_or_default();
    let bad_socket = format!("unix:{}", sockets[3].1.display());
    let passed_on = log
        .lines()
        .filter(|l| l.contains(&bad_socket) && l.contains("503, "))
        .count();
    assert!(
        passed_on > 0,
        "no call was passed on from the broken daemon; access log:\n{log}"
    );
    // The kill hit calls in flight, and they were recovered: nginx passed a Prove on after
    // the connection broke, or the client retried.
    let victim_socket = format!(
        "unix:{}",
        sockets
            .iter()
            .find(|(n, _)| n == victim)
            .unwrap()
            .1
            .display()
    );
    let recovered = log
        .lines()
        .filter(|l| l.contains(&format!("{victim_socket}, ")))
        .count();
    assert!(
        retries + recovered as u32 > 0,
        "killing {victim} with jobs running disturbed no call; access log:\n{log}"
    );
    // The live daemons never failed a call nginx gave them: nginx 1.22's retries did not
    // break their connections (see gen.sh's notes on keepalive and gate.rs's on the
    // refusal), so they never left rotation.
    for line in log.lines() {
        let parts: Vec<&str> = line.split('|').collect();
        let [_, addrs, statuses, _] = parts[..] else {
            continue;
        };
        for (addr, status) in addrs.split(", ").zip(statuses.split(", ")) {
            let live = sockets.iter().any(|(name, socket)| {
                name != victim && name != "bad" && addr == format!("unix:{}", socket.display())
            });
            assert!(
                !live || status == "200",
                "a live daemon answered {status}: {line}\naccess log:\n{log}"
            );
        }
    }
    println!(
        "scaleout: {JOBS} jobs, killed {victim} after {killed_at}, per daemon {by_daemon:?}, \
         {retries} client retries, {recovered} calls nginx passed on from {victim}, \
         {passed_on} from the broken daemon"
    );
    drop(direct);
    drop(daemons);
    let _ = std::fs::remove_dir_all(&dir);
}

// deploy/nginx/cuzk.conf is what gen.sh prints for its example daemons, so the example
// an operator reads is the config the test above runs. See: #30.
#[test]
fn the_example_nginx_config_is_gen_sh_output() {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/nginx");
    let example = std::fs::read_to_string(deploy.join("cuzk.conf")).expect("cuzk.conf");
    let command = example
        .lines()
        .nth(1)
        .and_then(|l| l.strip_prefix("#   deploy/nginx/gen.sh "))
        .expect("its second line names the command that made it");
    let out = Command::new("bash")
        .arg(deploy.join("gen.sh"))
        .args(command.split(' '))
        .output()
        .expect("run gen.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        example,
        "regenerate it: deploy/nginx/gen.sh {command} >deploy/nginx/cuzk.conf"
    );
}
