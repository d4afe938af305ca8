//! The built `cuzk` binary end to end: `gen params` then `prove` at a small size, with
//! the proof, verifying key and public inputs read back from their files and checked by
//! bellperson's verifier; `prove --demo` from an empty cache and again from a warm one.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use bellperson::groth16::{prepare_verifying_key, verify_proof, Proof, VerifyingKey};
use blstrs::{Bls12, Scalar};
use ff::Field;

fn cuzk(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cuzk"));
    cmd.args(args).env("RUST_LOG", "warn");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("the cuzk binary runs")
}

fn ok(out: Output, what: &str) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{what} failed: {}\nstdout:\n{stdout}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuzk-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir is writable");
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

#[test]
fn gen_params_then_prove_verifies_with_bellperson() {
    let dir = scratch("prove");
    let params = dir.join("synthetic-10.params");
    let (proof_p, vk_p, inputs_p) = (dir.join("proof"), dir.join("vk"), dir.join("inputs"));
    let gen = ok(
        cuzk(
            &[
                "gen",
                "params",
                "--circuit",
                "synthetic",
                "--log-n",
                "10",
                "--seed",
                "3",
                "--out",
                s(&params),
            ],
            &[],
        ),
        "gen params",
    );
    assert!(
        gen.contains("test-only"),
        "gen params prints the toxic-waste warning:\n{gen}"
    );
    let out = ok(
        cuzk(
            &[
                "prove",
                "--circuit",
                "synthetic",
                "--log-n",
                "10",
                "--seed",
                "3",
                "--witness-seed",
                "11",
                "--params",
                s(&params),
                "--proof-out",
                s(&proof_p),
                "--vk-out",
                s(&vk_p),
                "--inputs-out",
                s(&inputs_p),
            ],
            &[],
        ),
        "prove",
    );
    for stage in [
        "synthesis",
        "ntt_h",
        "msm_l",
        "msm_b_g2",
        "assemble",
        "verify",
        "total",
    ] {
        assert!(out.contains(stage), "stage table lacks {stage}:\n{out}");
    }

    let proof_bytes = std::fs::read(&proof_p).expect("proof written");
    assert_eq!(proof_bytes.len(), 192);
    let proof = Proof::<Bls12>::read(&proof_bytes[..]).expect("bellperson reads the proof");
    let vk = VerifyingKey::<Bls12>::read(&std::fs::read(&vk_p).expect("vk written")[..])
        .expect("bellperson reads the vk");
    let input_bytes = std::fs::read(&inputs_p).expect("inputs written");
    assert_eq!(input_bytes.len() % 32, 0);
    let inputs: Vec<Scalar> = input_bytes
        .chunks_exact(32)
        .map(|c| {
            let raw: [u8; 32] = c.try_into().expect("32-byte chunks");
            Option::from(Scalar::from_bytes_le(&raw)).expect("canonical scalars")
        })
        .collect();
    assert_eq!(inputs.len() + 1, vk.ic.len());
    let pvk = prepare_verifying_key(&vk);
    assert!(verify_proof(&pvk, &proof, &inputs).expect("well-formed"));
    let mut wrong = inputs.clone();
    wrong[0] += Scalar::ONE;
    assert!(!verify_proof(&pvk, &proof, &wrong).expect("well-formed"));

    // Parameters belong to one circuit structure: another seed is refused.
    let other = cuzk(
        &[
            "prove",
            "--log-n",
            "10",
            "--seed",
            "4",
            "--params",
            s(&params),
        ],
        &[],
    );
    assert!(
        !other.status.success(),
        "a proof for another circuit must not pass"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn demo_makes_then_reuses_its_parameters() {
    let cache = scratch("demo");
    let first = ok(
        cuzk(&["prove", "--demo"], &[("XDG_CACHE_HOME", &cache)]),
        "first demo",
    );
    assert!(first.contains("generated test-only parameters"), "{first}");
    assert!(first.contains("proof verified"), "{first}");
    let cached: Vec<_> = std::fs::read_dir(cache.join("cuzk"))
        .expect("cache dir made")
        .collect();
    assert_eq!(cached.len(), 1, "one parameters file, no temporaries left");
    let second = ok(
        cuzk(&["prove", "--demo"], &[("XDG_CACHE_HOME", &cache)]),
        "second demo",
    );
    assert!(second.contains("reusing parameters"), "{second}");
    assert!(second.contains("proof verified"), "{second}");
    let gpu = cuzk(
        &["prove", "--demo", "--backend", "gpu"],
        &[("XDG_CACHE_HOME", &cache)],
    );
    // With a GPU the demo proves on it; without one it fails saying so, before any work.
    let (out, err) = (
        String::from_utf8_lossy(&gpu.stdout),
        String::from_utf8_lossy(&gpu.stderr),
    );
    if gpu.status.success() {
        assert!(
            out.contains("proof verified") && out.contains("gpu:0"),
            "{out}"
        );
    } else {
        assert!(err.contains("no usable CUDA device"), "{err}");
        crate::support::skip("no CUDA device");
    }
    let _ = std::fs::remove_dir_all(&cache);
}
