//! Interop (issue #18 item 6): a Python `grpcio` client (gRPC C core) on the unix socket
//! with default options, which sends the socket path as `:authority`, and the same client
//! sending `localhost` as grpc-go (Curio) does; Curio's own `cuzk.toml` accepted by
//! `cuzk daemon --config`; the default address is Curio's.

use std::process::Command;

use crate::daemon_common::*;
use cuzk_server::pb;
use cuzk_server::{DaemonConfig, ListenAddr};
use pb::await_proof_response::Status as S;
use prost::Message;

/// GetStatus, then Prove with the given serialized request, through `grpc.insecure_channel`
/// with no options or only `grpc.default_authority`; prints both responses as hex.
const CLIENT: &str = r#"
import binascii, sys, grpc
target, prove_hex, authority = sys.argv[1], sys.argv[2], sys.argv[3]
options = [("grpc.default_authority", authority)] if authority else []
channel = grpc.insecure_channel(target, options=options)
raw = lambda b: b
def call(method, body):
    rpc = channel.unary_unary("/cuzk.v1.ProvingEngine/" + method,
                              request_serializer=raw, response_deserializer=raw)
    return rpc(body, timeout=120)
print(call("GetStatus", b"").hex())
print(call("Prove", binascii.unhexlify(prove_hex)).hex())
"#;

/// Makes sure `python3` can import `grpc`, installing `grpcio` with pip when it cannot.
fn python_with_grpcio() {
    let has = |_: ()| {
        Command::new("python3")
            .args(["-c", "import grpc"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if has(()) {
        return;
    }
    let installed = Command::new("python3")
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "grpcio",
        ])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        installed && has(()),
        "this test needs python3 with grpcio (pip install grpcio; .ci/run installs it)"
    );
}

fn run_client(
    target: &str,
    authority: &str,
    prove: &pb::ProveRequest,
) -> (pb::GetStatusResponse, pb::AwaitProofResponse) {
    let out = Command::new("python3")
        .args(["-c", CLIENT, target])
        .arg(hex::encode(prove.encode_to_vec()))
        .arg(authority)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "grpcio client with authority {authority:?} failed:\n{}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines();
    let mut next = || hex::decode(lines.next().expect("a response line")).expect("hex");
    let status = pb::GetStatusResponse::decode(&next()[..]).expect("GetStatusResponse");
    let proved = pb::ProveResponse::decode(&next()[..]).expect("ProveResponse");
    (status, proved.result.expect("result"))
}

// See: #18 item 6.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_grpcio_client_works_on_the_unix_socket() {
    python_with_grpcio();
    let (daemon, _client) = start(config("grpcio", |_| {})).await;
    let ListenAddr::Unix(path) = daemon.grpc_addr().clone() else {
        panic!("unix socket expected")
    };
    let target = format!("unix://{}", path.display());
    // Default options: the C core sends the socket path as :authority. Then "localhost",
    // what grpc-go sends.
    for (i, authority) in ["", "localhost"].into_iter().enumerate() {
        let prove = pb::ProveRequest {
            submit: Some(synthetic(&format!("grpcio-{i}"), 5, 1, 40 + i as u64)),
        };
        let target = target.clone();
        let (status, result) =
            tokio::task::spawn_blocking(move || run_client(&target, authority, &prove))
                .await
                .expect("join");
        assert_eq!(status.devices.len(), 1, "{status:?}");
        assert_eq!(
            S::try_from(result.status),
            Ok(S::Completed),
            "{}",
            result.error_message
        );
        assert_eq!(result.proof.len(), 192);
    }
    daemon.shutdown().await.expect("shutdown");
}

// See: #18 item 6.
#[test]
fn curio_cuzk_toml_is_accepted_with_each_ignored_key_named() {
    let dir = std::env::temp_dir().join(format!("cuzk-curio-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("cuzk.toml");
    // The keys of Curio's extern/cuzk/cuzk.example.toml.
    std::fs::write(
        &file,
        r#"
[daemon]
listen = "127.0.0.1:9820"

[srs]
param_cache = "/data/zk/params"

[memory]
total_budget = "auto"
safety_margin = "5GiB"
eviction_min_idle = "5m"

[gpus]
devices = []
gpu_threads = 32
gpu_workers_per_device = 2

[scheduler]
max_batch_size = 1
max_batch_wait_ms = 10000
sort_by_type = true

[synthesis]
threads = 0

[pipeline]
enabled = true
synthesis_lookahead = 1
synthesis_concurrency = 1

[logging]
level = "info"
"#,
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--print-config", "--config"])
        .arg(&file)
        .output()
        .expect("run cuzk");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let cfg = DaemonConfig::parse(&String::from_utf8_lossy(&out.stdout)).expect("cuzk's format");
    assert_eq!(cfg.listen, "127.0.0.1:9820");
    assert_eq!(
        cfg.engine.param_dir,
        std::path::PathBuf::from("/data/zk/params")
    );
    assert_eq!(cfg.engine.gpu_workers_per_device, 2);
    for key in [
        "[memory] total_budget",
        "[memory] safety_margin",
        "[memory] eviction_min_idle",
        "[gpus] gpu_threads",
        "[scheduler] max_batch_size",
        "[scheduler] max_batch_wait_ms",
        "[scheduler] sort_by_type",
        "[synthesis] threads",
        "[pipeline] enabled",
        "[pipeline] synthesis_lookahead",
        "[pipeline] synthesis_concurrency",
        "[logging] level",
    ] {
        assert!(stderr.contains(key), "no warning names {key}:\n{stderr}");
    }
    for mapped in [
        "[daemon] listen",
        "[srs] param_cache",
        "gpu_workers_per_device",
    ] {
        assert!(
            !stderr.contains(mapped),
            "{mapped} was mapped, not ignored:\n{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #18 item 6.
#[test]
fn default_listen_is_curios_address() {
    assert_eq!(
        DaemonConfig::default().listen,
        "unix:///run/curio/cuzk.sock"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--print-config"])
        .output()
        .expect("run cuzk");
    let cfg = DaemonConfig::parse(&String::from_utf8_lossy(&out.stdout)).expect("config");
    assert_eq!(cfg.listen, "unix:///run/curio/cuzk.sock");
}
