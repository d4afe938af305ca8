//! Shared setup of the Filecoin integration tests: one cache folder for test parameters
//! and sealed sectors (`$CUZK_TEST_CACHE`, else under cargo's target tmp dir), reused by
//! every test binary and run; generation goes to a temporary name and is renamed into
//! place, so concurrent test processes never see half-written inputs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cuzk_filecoin::testgen::{self, TestSector};
use cuzk_filecoin::{FilecoinKind, SectorSize};
use cuzk_groth16::{CpuBackend, PartitionedProof, Srs, SrsOptions};

/// The cache root; also points filecoin-proofs' parameter and parent caches into it.
/// filecoin-proofs reads these variables once per process, so every test calls this
/// before touching filecoin-proofs.
pub fn cache_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = std::env::var_os("CUZK_TEST_CACHE")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-test-cache"));
        let params = root.join("filecoin-params");
        let parents = root.join("filecoin-parents");
        for d in [&root, &params, &parents] {
            std::fs::create_dir_all(d).expect("create the test cache");
        }
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", &params);
        std::env::set_var("FIL_PROOFS_PARENT_CACHE", &parents);
        root
    })
}

/// The folder of test parameters (what `FIL_PROOFS_PARAMETER_CACHE` points at).
pub fn param_dir() -> PathBuf {
    cache_dir().join("filecoin-params")
}

/// A sealed 2 KiB test sector with the payloads of all kinds, made once.
pub fn sector_2k() -> TestSector {
    static LOCK: Mutex<()> = Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = cache_dir().join("sector-2k");
    if let Ok(s) = testgen::load_sector(&dir) {
        return s;
    }
    let tmp = cache_dir().join(format!("sector-2k.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let t = Instant::now();
    testgen::gen_sector(SectorSize::S2KiB, &tmp, 7).expect("seal a 2 KiB test sector");
    eprintln!(
        "sealed a 2 KiB test sector in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // Another process may have won the race; its sector is as good as ours.
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    testgen::load_sector(&dir).expect("load the test sector")
}

/// Test parameters of `kind` at 2 KiB, generated once.
pub fn params_2k(kind: FilecoinKind) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let t = Instant::now();
    let path = testgen::gen_params(kind, SectorSize::S2KiB, &param_dir())
        .expect("generate test parameters");
    eprintln!(
        "{kind} 2 KiB parameters ready in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    path
}

/// Proves every partition of `proof` on the CPU with cuzk's prover, then assembles and
/// verifies the bytes through the kind. Prints one JSON line of timings.
pub fn prove_cpu(kind: FilecoinKind, proof: &dyn PartitionedProof) -> Vec<u8> {
    let params = proof.params_path(&param_dir());
    let t = Instant::now();
    let srs = Srs::load(&params, SrsOptions::default()).expect("load parameters");
    let load_ms = t.elapsed().as_millis();
    let backend = CpuBackend::new();
    let (mut synth_ms, mut prove_ms) = (0, 0);
    let mut proofs = Vec::new();
    for k in 0..proof.num_partitions() {
        let t = Instant::now();
        let asg = proof.synthesize(k).expect("synthesize");
        synth_ms += t.elapsed().as_millis();
        let t = Instant::now();
        let (p, _report) = cuzk_groth16::prove_random(&asg, &srs, &backend, &mut rand::rngs::OsRng)
            .expect("prove");
        prove_ms += t.elapsed().as_millis();
        proofs.push(p);
    }
    let t = Instant::now();
    let bytes = proof
        .assemble_and_verify(&proofs, &srs.vk)
        .expect("assemble and verify");
    eprintln!(
        "{{\"op\":\"filecoin_prove\",\"kind\":\"{kind}\",\"circuit\":\"{}\",\"partitions\":{},\"srs_load_ms\":{load_ms},\"synth_ms\":{synth_ms},\"prove_ms\":{prove_ms},\"verify_ms\":{}}}",
        proof.circuit_id(),
        proof.num_partitions(),
        t.elapsed().as_millis()
    );
    bytes
}
