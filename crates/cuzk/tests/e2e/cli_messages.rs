//! What the `cuzk` binary tells an operator when something is missing or wrong, word for
//! word: each cause once, and the next step where there is one. Also that its log lines
//! carry no colour codes when stderr is not a terminal. See: #34.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs the binary with stderr to a pipe and returns (exit code, stderr).
fn cuzk(args: &[&str]) -> (Option<i32>, String) {
    let out: Output = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("NO_COLOR")
        .output()
        .expect("the cuzk binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuzk-msg-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// The OS's text for ENOENT, as Rust prints it.
fn enoent() -> String {
    std::io::Error::from_raw_os_error(2).to_string()
}

#[test]
fn status_without_a_daemon_names_the_os_error_once_and_says_to_start_one() {
    let dir = scratch("status");
    let sock = dir.join("nobody.sock");
    let addr = format!("unix://{}", sock.display());
    let (code, err) = cuzk(&["status", "--connect", &addr]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: connecting to {addr}: {}; is the daemon running? start it with \
             `cuzk daemon` (or pass --connect ADDR)\n",
            enoent()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_socket_file_with_no_daemon_behind_it_gets_the_same_hint() {
    let dir = scratch("stale");
    let sock = dir.join("stale.sock");
    // Bound, then closed: the file stays and connecting to it is refused.
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("bind a unix socket"));
    let addr = format!("unix://{}", sock.display());
    let (code, err) = cuzk(&["status", "--connect", &addr]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: connecting to {addr}: {}; is the daemon running? start it with \
             `cuzk daemon` (or pass --connect ADDR)\n",
            std::io::Error::from_raw_os_error(111)
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn prove_with_nothing_to_prove_names_demo_kind_and_params() {
    let (code, err) = cuzk(&["prove"]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "error: cuzk prove needs something to prove: --demo (a small synthetic circuit, \
         parameters made on first use), --kind porep|window-post|winning-post|snap --sector \
         DIR (a Filecoin proof of a test sector), or --log-n K --params FILE (the synthetic \
         circuit with parameters from `cuzk gen params`)\n"
    );
}

#[test]
fn a_missing_params_file_is_named_once_with_its_os_error_once() {
    let dir = scratch("missing");
    let params = dir.join("missing.params");
    let (code, err) = cuzk(&["prove", "--log-n", "8", "--params", s(&params)]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: loading the parameters: {}: {}\n",
            params.display(),
            enoent()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_params_file_of_the_wrong_size_is_named_once_with_its_excess() {
    let dir = scratch("size");
    let params = dir.join("synthetic-8.params");
    let (code, err) = cuzk(&["gen", "params", "--log-n", "8", "--out", s(&params)]);
    assert_eq!(code, Some(0), "gen params: {err}");
    // The toxic-waste warning is a log line: written to a pipe, it carries no colour.
    assert!(err.contains("WARN"), "gen params logs a warning: {err}");
    assert!(
        !err.contains("\x1b["),
        "colour codes in piped logs: {err:?}"
    );
    let len = std::fs::metadata(&params).expect("params written").len();
    let mut bytes = std::fs::read(&params).expect("params readable");
    bytes.extend_from_slice(&[0; 100]);
    std::fs::write(&params, &bytes).expect("params writable");
    let (code, err) = cuzk(&["prove", "--log-n", "8", "--params", s(&params)]);
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "error: loading the parameters: {}: 100 trailing bytes after offset {len}\n",
            params.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

// A daemon started on a parameter directory that does not exist says so once, at start,
// with what it means (nothing to prove, not ready), instead of answering /ready 200.
// See: #34 item 5.
#[test]
fn a_daemon_on_a_missing_parameter_directory_says_it_is_not_ready_and_why() {
    use std::io::Read;
    let dir = scratch("noparams");
    let params = dir.join("filecoin-proof-parameters");
    let socket = dir.join("d.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(["daemon", "--http", "", "--journal-dir", ""])
        .arg("--listen")
        .arg(format!("unix://{}", socket.display()))
        .arg("--param-dir")
        .arg(&params)
        .env("RUST_LOG", "warn")
        .env_remove("NO_COLOR")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the cuzk binary runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !socket.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the daemon never listened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = child.id().to_string();
    let killed = Command::new("kill").args(["-TERM", &pid]).status();
    assert!(killed.expect("kill runs").success());
    let mut err = String::new();
    child
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut err)
        .expect("stderr readable");
    assert!(child.wait().expect("daemon exits").success(), "{err}");
    let want = format!(
        "not ready: no parameters to prove with: the parameter directory {} does not exist",
        params.display()
    );
    assert_eq!(err.matches(&want).count(), 1, "{err}");
    assert!(
        !err.contains("\x1b["),
        "colour codes in piped logs: {err:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
