//! The engine in-process on the CPU backend with tiny synthetic circuits: multi-partition
//! jobs complete with proofs that verify on their own, request ids are idempotency keys,
//! bad requests are refused naming the field, finished results are retained within bounds,
//! and every reservation is returned.

use std::path::PathBuf;
use std::time::Duration;

use cuzk_engine::synthetic::{params_file, SyntheticSpec};
use cuzk_engine::{
    AwaitOutcome, Engine, EngineConfig, EngineError, JobSpec, JobState, KindRegistry, ProofKindId,
    ProofRequest,
};
use cuzk_groth16::{Proof, Scalar, Srs, SrsOptions};

/// One parameter directory for every test of this binary (the files are generated once).
fn param_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params")
}

fn engine(cfg: EngineConfig) -> Engine {
    let cfg = EngineConfig {
        param_dir: param_dir(),
        ..cfg
    };
    Engine::start(cfg, KindRegistry::with_synthetic(), Vec::new()).expect("engine starts")
}

fn spec(request_id: &str, log_n: u32, n_partitions: u32, seed: u64) -> JobSpec {
    JobSpec {
        request_id: request_id.into(),
        kind: ProofKindId::Synthetic,
        priority: None,
        request: ProofRequest {
            vanilla_proof: SyntheticSpec {
                log_n,
                n_partitions,
                seed,
            }
            .encode(),
            ..ProofRequest::default()
        },
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

#[test]
fn multi_partition_job_completes_with_proofs_that_verify() {
    let engine = engine(EngineConfig::default());
    let out = engine.submit(spec("multi", 6, 3, 11)).expect("accepted");
    assert!(!out.attached);
    let outcome = match runtime()
        .block_on(engine.await_job(&out.job_id, None))
        .expect("known job")
    {
        AwaitOutcome::Finished(o) => o,
        AwaitOutcome::Timeout => panic!("no timeout was set"),
    };
    assert_eq!(outcome.state, JobState::Completed, "{}", outcome.error);
    assert_eq!(outcome.proof.len(), 3 * 192);

    // Check each partition proof independently of the engine's own verification.
    let srs = Srs::load(&params_file(&param_dir(), 6), SrsOptions::default()).expect("params");
    let pvk = bellperson::groth16::prepare_verifying_key(&srs.vk);
    let kind =
        cuzk_engine::synthetic::SyntheticProof::parse(&spec("", 6, 3, 11).request).expect("parse");
    for (i, chunk) in outcome.proof.chunks(192).enumerate() {
        let proof = Proof::read(chunk).expect("192-byte proof");
        let inputs: Vec<Scalar> =
            cuzk_groth16::PartitionedProof::public_inputs(&kind, i).expect("inputs");
        assert!(
            bellperson::groth16::verify_proof(&pvk, &proof, &inputs).expect("verify"),
            "partition {i}"
        );
        let mut wrong = inputs.clone();
        wrong[0] += Scalar::from(1u64);
        assert!(!bellperson::groth16::verify_proof(&pvk, &proof, &wrong).expect("verify"));
    }
    let status = engine.status();
    assert_eq!(status.memory_reserved_bytes, 0);
    assert_eq!(status.total_completed, 1);
    assert!(status
        .srs
        .iter()
        .any(|s| s.circuit_id == "synthetic-6" && s.ref_count == 0));
}

#[test]
fn request_id_attaches_or_conflicts() {
    let engine = engine(EngineConfig::default());
    let first = engine.submit(spec("same-id", 5, 1, 1)).expect("accepted");
    let again = engine.submit(spec("same-id", 5, 1, 1)).expect("attached");
    assert_eq!(again.job_id, first.job_id);
    assert!(again.attached);
    match engine.submit(spec("same-id", 5, 1, 2)) {
        Err(EngineError::RequestIdConflict { job_id, .. }) => assert_eq!(job_id, first.job_id),
        other => panic!("expected RequestIdConflict, got {other:?}"),
    }
    let other = engine.submit(spec("other-id", 5, 1, 1)).expect("accepted");
    assert_ne!(other.job_id, first.job_id, "job ids are never shared");
    let rt = runtime();
    for id in [&first.job_id, &other.job_id] {
        let done = rt.block_on(engine.await_job(id, None)).expect("known");
        assert!(matches!(done, AwaitOutcome::Finished(o) if o.state == JobState::Completed));
    }
    // After completion, the same request id still returns the finished job.
    let after = engine.submit(spec("same-id", 5, 1, 1)).expect("attached");
    assert_eq!(after.job_id, first.job_id);
}

#[test]
fn bad_requests_are_refused_naming_the_field() {
    let engine = engine(EngineConfig::default());
    let mut garbage = spec("g", 5, 1, 1);
    garbage.request.vanilla_proof = vec![0xAB; 7];
    match engine.submit(garbage) {
        Err(EngineError::InvalidRequest(e)) => {
            assert!(e.to_string().contains("vanilla_proof"), "{e}")
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
    let mut wrong_kind = spec("k", 5, 1, 1);
    wrong_kind.kind = ProofKindId::PorepSealCommit;
    assert!(matches!(
        engine.submit(wrong_kind),
        Err(EngineError::UnsupportedKind { .. })
    ));
    assert!(matches!(
        engine.preload_srs("porep-32g"),
        Err(EngineError::UnknownSrs { .. })
    ));
    assert!(matches!(
        engine.evict_srs("nope"),
        Err(EngineError::UnknownSrs { .. })
    ));
    assert!(matches!(
        engine.cancel("no-such-job"),
        Err(EngineError::UnknownJob(_))
    ));
}

#[test]
fn await_times_out_and_results_expire_by_count() {
    let engine = engine(EngineConfig {
        result_retention_count: 2,
        ..EngineConfig::default()
    });
    let rt = runtime();
    let first = engine.submit(spec("", 7, 2, 3)).expect("accepted");
    let early = rt
        .block_on(engine.await_job(&first.job_id, Some(Duration::from_millis(1))))
        .expect("known");
    assert!(matches!(early, AwaitOutcome::Timeout));
    let mut ids = vec![first.job_id];
    for seed in 0..2 {
        ids.push(
            engine
                .submit(spec("", 5, 1, seed))
                .expect("accepted")
                .job_id,
        );
    }
    for id in &ids {
        rt.block_on(engine.await_job(id, None)).expect("known");
    }
    // Three finished, two kept: the oldest finished result is gone.
    let forgotten = ids
        .iter()
        .filter(|id| engine.job_state(id).is_none())
        .count();
    assert_eq!(forgotten, 1);
    assert_eq!(engine.status().retained_results, 2);
}
