//! The whole-proof benchmark end to end on the CPU backend at 2 KiB: `gen params`, `gen
//! request --fake`, then `bench batch --fake` proving the fake WindowPoSt request twice
//! through the in-process engine, with its JSON line, table and timeline picture; and the
//! refusals: a fake without `--fake`, `gen request` without `--fake`. See: #17.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn cuzk(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the cuzk binary runs")
}

fn stdout_of(out: &Output, what: &str) -> String {
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json_line(stdout: &str) -> serde_json::Value {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON line in:\n{stdout}"));
    serde_json::from_str(line).expect("a JSON line")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// Test parameters shared across runs (the 2 KiB WindowPoSt file takes a second).
fn param_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-bench-filecoin-params")
}

/// The 2 KiB WindowPoSt test parameters in [`param_dir`], made on the CPU.
fn wpost_2k_params() -> PathBuf {
    let params = param_dir();
    stdout_of(
        &cuzk(&[
            "gen",
            "params",
            "--kind",
            "window-post",
            "--sector-size",
            "2KiB",
            "--dir",
            s(&params),
            "--cpu",
        ]),
        "gen params",
    );
    params
}

#[test]
fn bench_batch_proves_a_fake_2kib_request_twice_and_reports_the_run() {
    let dir = std::env::temp_dir().join(format!("cuzk-bench-proof-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let params = wpost_2k_params();

    let req = dir.join("fake-wpost-2k.cuzkreq");
    let gen = json_line(&stdout_of(
        &cuzk(&[
            "gen",
            "request",
            "--kind",
            "window-post",
            "--sector-size",
            "2KiB",
            "--fake",
            "--out",
            s(&req),
        ]),
        "gen request",
    ));
    assert_eq!(gen["fake"], true);
    assert_eq!(gen["partitions"], 1);
    assert_eq!(gen["uniform"], true);

    let svg = dir.join("timeline.svg");
    let out = cuzk(&[
        "bench",
        "batch",
        "--kind",
        "window-post",
        "--request",
        s(&req),
        "--fake",
        "--count",
        "2",
        "--concurrency",
        "1",
        "--param-dir",
        s(&params),
        "--no-gpu",
        "--timeline",
        s(&svg),
    ]);
    let line = json_line(&stdout_of(&out, "bench batch --fake"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{line}\n{stderr}");
    assert_eq!(line["op"], "batch");
    assert_eq!(line["fake"], true);
    assert_eq!(line["circuit_id"], "wpost-2k");
    assert_eq!(line["count"], 2);
    assert_eq!(line["failed"], 0, "{stderr}");
    assert!(line["s_per_proof"].as_f64().is_some_and(|v| v > 0.0));
    assert!(line["synthesis_ms_per_partition"]
        .as_f64()
        .is_some_and(|v| v > 0.0));
    assert!(line["prove_ms_per_partition"]
        .as_f64()
        .is_some_and(|v| v > 0.0));
    assert!(line["peak_rss_bytes"].as_u64().is_some_and(|v| v > 1 << 20));
    assert!(line["devices"].as_array().is_some_and(|d| !d.is_empty()));
    assert!(stderr.contains("compared against:"), "{stderr}");
    assert!(
        stderr.contains("FAKE"),
        "every report of a fake says so:\n{stderr}"
    );
    let picture = std::fs::read_to_string(&svg).expect("timeline written");
    assert!(picture.starts_with("<svg") && picture.contains("FAKE"));

    // A fake without --fake, and gen request without --fake, are refused.
    let refused = cuzk(&[
        "bench",
        "batch",
        "--kind",
        "window-post",
        "--request",
        s(&req),
        "--param-dir",
        s(&params),
        "--no-gpu",
    ]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("pass --fake"));
    let refused = cuzk(&["gen", "request", "--kind", "porep", "--out", s(&req)]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--fake"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A real test sector's proofs through `bench batch` are each checked once more by
/// filecoin-proofs' own verifier, and the run says how many it accepted. See: #17.
#[test]
fn bench_batch_checks_a_real_sectors_proofs_with_filecoin_proofs() {
    let dir = std::env::temp_dir().join(format!("cuzk-bench-real-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let params = wpost_2k_params();
    let sector = dir.join("sector");
    let sealed = Command::new(env!("CARGO_BIN_EXE_cuzk"))
        .args([
            "gen",
            "sector",
            "--sector-size",
            "2KiB",
            "--out",
            s(&sector),
        ])
        .env("RUST_LOG", "warn")
        .env("FIL_PROOFS_PARENT_CACHE", dir.join("parents"))
        .output()
        .expect("the cuzk binary runs");
    stdout_of(&sealed, "gen sector");
    let out = cuzk(&[
        "bench",
        "batch",
        "--kind",
        "window-post",
        "--sector",
        s(&sector),
        "--count",
        "2",
        "--concurrency",
        "2",
        "--param-dir",
        s(&params),
        "--no-gpu",
    ]);
    let line = json_line(&stdout_of(&out, "bench batch --sector"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(line["fake"], false);
    assert_eq!(line["failed"], 0, "{stderr}");
    assert_eq!(line["filecoin_proofs_checked"], 2, "{line}");
    assert_eq!(line["filecoin_proofs_verified"], 2, "{line}\n{stderr}");
    assert!(
        stderr.contains("filecoin-proofs' verifier accepted 2 of 2"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench prove`'s head-to-head synthesizes as the daemon does: the shape recorded once
/// (timed apart), then each proof's witness part by part through the shape cache, with
/// plain synthesis reported beside it and required equal. See: #17. With `--deferred`, a
/// second prover of the same backend gets the witness alone (a, b, c left to it, as the
/// daemon's where the matrices fit) and its proofs must equal the first's.
#[test]
fn bench_prove_reports_the_recorded_parts_path_and_plain_beside_it() {
    let dir = std::env::temp_dir().join(format!("cuzk-bench-prove-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = cuzk(&[
        "bench",
        "prove",
        "--backend",
        "cpu",
        "--compare",
        "cpu",
        "--log-n",
        "10",
        "--parts",
        "4",
        "--reps",
        "1",
        "--deferred",
        "--params-dir",
        s(&dir),
    ]);
    let line = json_line(&stdout_of(&out, "bench prove --parts 4"));
    eprintln!("{line}");
    assert_eq!(line["op"], "prove_head_to_head");
    assert_eq!(line["parts"], 4, "the witness ran in 4 parts");
    assert_eq!(line["synthesis_path"], "recorded+parts");
    assert_eq!(line["equal_assignments"], true);
    assert_eq!(
        line["identical_proofs"], true,
        "deferred and evaluated: {line}"
    );
    assert_eq!(line["deferred"], true);
    assert!(line["recorded_bytes"].as_u64().is_some_and(|v| v > 0));
    for key in [
        "record_ms",
        "synthesis_ms_median",
        "plain_synthesis_ms_median",
        "cpu_ms_median",
        "cpu_plain_ms_median",
        "cpu_prove_ms_median",
        "cpu_deferred_ms_median",
        "cpu_deferred_prove_ms_median",
        "witness_ms_median",
        "products_ms_median",
    ] {
        assert!(line[key].as_f64().is_some_and(|v| v > 0.0), "{key}: {line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench gpu staging` runs without a device: per size and kind of a, b, c, one JSON line
/// whose staging holds the slot layout (a, b, c padded to the domain, the witness
/// vectors) and whose two steps took time.
#[test]
fn bench_gpu_staging_times_the_host_side_without_a_device() {
    for deferred in [false, true] {
        // Sizes whose fill takes over 0.05 ms (the line rounds to 0.1).
        let mut args = vec!["bench", "gpu", "staging", "--log-n", "14,15", "--runs", "1"];
        if deferred {
            args.push("--deferred");
        }
        let out = stdout_of(&cuzk(&args), "bench gpu staging");
        let lines: Vec<serde_json::Value> = out
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect();
        assert_eq!(lines.len(), 2, "{out}");
        for (line, lg) in lines.iter().zip([14u64, 15]) {
            assert_eq!(line["op"], "gpu_staging");
            assert_eq!(line["log_n"], lg);
            assert_eq!(line["abc"], if deferred { "deferred" } else { "evaluated" });
            // a, b, c alone fill 3 × 2^lg scalars of 32 bytes.
            let abc = (3 * 32) << lg;
            assert!(line["bytes"].as_u64().is_some_and(|b| b > abc), "{line}");
            assert!(line["fill_ms"].as_f64().is_some_and(|v| v > 0.0), "{line}");
            assert!(
                line["pieces_ms"].as_f64().is_some_and(|v| v >= 0.0),
                "{line}"
            );
        }
    }
}
