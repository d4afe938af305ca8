//! Shared setup of the Filecoin integration tests: one cache folder for test parameters
//! and sealed sectors (`$CUZK_TEST_CACHE`, else under cargo's target tmp dir), reused by
//! every test binary and run; generation goes to a temporary name and is renamed into
//! place, so concurrent test processes never see half-written inputs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use cuzk_filecoin::testgen::{self, TestSector};
use cuzk_filecoin::{FilecoinKind, PoRepVariant, SectorSize};
use std::time::Duration;

use cuzk_engine::{
    AwaitOutcome, Engine, EngineConfig, JobOutcome, JobSpec, JobState, KindRegistry,
};
use cuzk_groth16::ProofRequest;

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

/// A sealed 2 KiB test sector (interactive PoRep) with the payloads of all kinds, made once.
pub fn sector_2k() -> TestSector {
    sector_2k_of(PoRepVariant::Interactive)
}

/// A 2 KiB test sector sealed with `variant`'s seal proof, made once per variant.
pub fn sector_2k_of(variant: PoRepVariant) -> TestSector {
    static LOCK: Mutex<()> = Mutex::new(());
    let _held = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let name = match variant {
        PoRepVariant::Interactive => "sector-2k".to_string(),
        other => format!("sector-2k-{other}"),
    };
    let dir = cache_dir().join(&name);
    if let Ok(s) = testgen::load_sector(&dir) {
        return s;
    }
    let tmp = cache_dir().join(format!("{name}.partial-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let t = Instant::now();
    testgen::gen_sector_with(SectorSize::S2KiB, variant, &tmp, 7)
        .expect("seal a 2 KiB test sector");
    eprintln!(
        "sealed a 2 KiB {variant} test sector in {:.1} s",
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

/// A CPU-backend engine serving the Filecoin kinds from the test parameter folder.
pub fn engine() -> Engine {
    engine_in(param_dir())
}

/// A CPU-backend engine serving the Filecoin kinds from `param_dir`.
pub fn engine_in(param_dir: PathBuf) -> Engine {
    let mut registry = KindRegistry::new();
    cuzk_filecoin::engine::register_in(&mut registry, param_dir.clone());
    let cfg = EngineConfig {
        param_dir,
        synthesis_workers: 1,
        cpu_workers: 1,
        ..EngineConfig::default()
    };
    Engine::start(cfg, registry, Vec::new()).expect("start the engine")
}

/// Submits `request` as `kind` to a CPU-backend engine and waits for its outcome (the
/// engine synthesizes each partition, proves it, assembles the proof bytes and verifies
/// them through the kind before completing). Prints one JSON line of timings.
pub fn prove_engine(kind: FilecoinKind, request: ProofRequest) -> Vec<u8> {
    prove_engine_on(&engine(), kind, request)
}

/// [`prove_engine`] on `engine`.
pub fn prove_engine_on(engine: &Engine, kind: FilecoinKind, request: ProofRequest) -> Vec<u8> {
    let outcome = run_engine(engine, kind, request);
    assert_eq!(
        outcome.state,
        JobState::Completed,
        "{kind}: job ended {:?}: {}",
        outcome.state,
        outcome.error
    );
    outcome.proof
}

/// Submits `request` as `kind` to `engine` and waits for the job to end, whichever way.
pub fn run_engine(engine: &Engine, kind: FilecoinKind, request: ProofRequest) -> JobOutcome {
    let wire = cuzk_filecoin::engine::KINDS
        .iter()
        .find(|(_, k)| *k == kind)
        .map(|(id, _)| *id)
        .expect("a wire kind");
    let t = Instant::now();
    let submitted = engine
        .submit(JobSpec {
            request_id: String::new(),
            kind: wire,
            priority: None,
            request,
        })
        .expect("submit");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let outcome = match runtime
        .block_on(engine.await_job(&submitted.job_id, Some(Duration::from_secs(1800))))
        .expect("await")
    {
        AwaitOutcome::Finished(o) => o,
        AwaitOutcome::Timeout => panic!("{kind}: no outcome in 30 minutes"),
    };
    eprintln!(
        "{{\"op\":\"filecoin_prove_engine\",\"kind\":\"{kind}\",\"wall_ms\":{},\"timings\":\"{:?}\"}}",
        t.elapsed().as_millis(),
        outcome.timings
    );
    (*outcome).clone()
}

#[path = "../../../cuzk-gpu/tests/support/skip.rs"]
mod skip;
pub use skip::skip;
