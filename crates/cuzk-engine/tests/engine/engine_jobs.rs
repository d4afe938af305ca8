//! The engine in-process on the CPU backend with tiny synthetic circuits: multi-partition
//! jobs complete with proofs that verify on their own, a job's identity is its request id
//! and payload (attach to running or completed jobs, run failed or cancelled ones again),
//! job ids are unique across engines, failures say whether a retry may help, bad requests
//! are refused naming the field, finished results are retained within bounds, and every
//! reservation is returned.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::synthetic::params_file;
use cuzk_engine::{AwaitOutcome, EngineConfig, EngineError, JobState, KindRegistry, ProofKindId};
use cuzk_groth16::{Proof, Scalar, Srs, SrsOptions};

use crate::support::{
    engine, engine_with, finish, param_dir, register_test_kind, runtime, spec, spec_of, wait_until,
    Hooks,
};

const LIMIT: Duration = Duration::from_secs(120);

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

// See: #18 (Curio sends every WindowPoSt partition of a deadline under one request_id).
#[test]
fn one_request_id_with_different_payloads_is_several_jobs() {
    let engine = engine(EngineConfig::default());
    let first = engine
        .submit(spec("wdpost-1000-0-ab", 5, 1, 1))
        .expect("accepted");
    let second = engine
        .submit(spec("wdpost-1000-0-ab", 5, 1, 2))
        .expect("accepted");
    assert!(!first.attached && !second.attached);
    assert_ne!(second.job_id, first.job_id);
    // A request-id lookup names the newest job submitted under it.
    assert_eq!(
        engine.job_for_request("wdpost-1000-0-ab").as_deref(),
        Some(second.job_id.as_str())
    );
    for id in [&first.job_id, &second.job_id] {
        let done = finish(&engine, id, LIMIT);
        assert_eq!(done.state, JobState::Completed, "{}", done.error);
    }
    // The same identity again attaches to its completed job, each to its own.
    let again = engine
        .submit(spec("wdpost-1000-0-ab", 5, 1, 1))
        .expect("attached");
    assert!(again.attached);
    assert_eq!(again.job_id, first.job_id);
    let other = engine.submit(spec("other-id", 5, 1, 1)).expect("accepted");
    assert!(!other.attached, "another request id is another job");
    assert_ne!(other.job_id, first.job_id);
    finish(&engine, &other.job_id, LIMIT);
}

fn gated_engine(hooks: &Arc<Hooks>) -> cuzk_engine::Engine {
    let mut registry = KindRegistry::with_synthetic();
    register_test_kind(
        &mut registry,
        "gated",
        &[ProofKindId::PorepSealCommit],
        hooks.clone(),
    );
    engine_with(EngineConfig::default(), registry)
}

#[test]
fn duplicate_of_a_running_job_attaches() {
    let hooks = Arc::new(Hooks::default());
    hooks.synthesis_gate.close();
    let engine = gated_engine(&hooks);
    let porep = |seed| spec_of(ProofKindId::PorepSealCommit, "porep-7", 5, 1, seed);
    let first = engine.submit(porep(3)).expect("accepted");
    wait_until("synthesis starts", LIMIT, || {
        hooks.syntheses_started.load(Ordering::SeqCst) > 0
    });
    assert_eq!(
        engine.job_state(&first.job_id),
        Some(JobState::Synthesizing)
    );
    let again = engine.submit(porep(3)).expect("attached");
    assert!(again.attached);
    assert_eq!(again.job_id, first.job_id);
    hooks.synthesis_gate.open();
    let done = finish(&engine, &first.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
    assert_eq!(engine.status().total_completed, 1, "one job, not two");
}

// See: #18 (a failed job's stored failure came back to every retry for an hour).
#[test]
fn failed_job_resubmitted_with_the_same_identity_runs_again() {
    let hooks = Arc::new(Hooks::default());
    hooks.failures_left.store(1, Ordering::SeqCst);
    let engine = gated_engine(&hooks);
    let porep = || spec_of(ProofKindId::PorepSealCommit, "porep-8", 5, 1, 4);
    let first = engine.submit(porep()).expect("accepted");
    let failed = finish(&engine, &first.job_id, LIMIT);
    assert_eq!(failed.state, JobState::Failed);
    assert!(
        failed.error.contains("injected failure"),
        "{}",
        failed.error
    );
    assert!(!failed.retryable, "a synthesis error is the request's own");

    let retry = engine.submit(porep()).expect("accepted");
    assert!(!retry.attached, "a failed job is not attached to");
    assert_ne!(retry.job_id, first.job_id);
    let done = finish(&engine, &retry.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
    // The first attempt's result stays readable under its own job id.
    assert_eq!(engine.job_state(&first.job_id), Some(JobState::Failed));
    // And a repeat now attaches to the completed retry.
    let again = engine.submit(porep()).expect("attached");
    assert!(again.attached);
    assert_eq!(again.job_id, retry.job_id);
}

#[test]
fn cancelled_job_resubmitted_with_the_same_identity_runs_again() {
    let hooks = Arc::new(Hooks::default());
    hooks.synthesis_gate.close();
    let engine = gated_engine(&hooks);
    let porep = || spec_of(ProofKindId::PorepSealCommit, "porep-9", 5, 1, 5);
    let first = engine.submit(porep()).expect("accepted");
    engine.cancel(&first.job_id).expect("known job");
    let cancelled = finish(&engine, &first.job_id, LIMIT);
    assert_eq!(cancelled.state, JobState::Cancelled);
    assert!(!cancelled.retryable);

    let retry = engine.submit(porep()).expect("accepted");
    assert!(!retry.attached, "a cancelled job is not attached to");
    assert_ne!(retry.job_id, first.job_id);
    hooks.synthesis_gate.open();
    let done = finish(&engine, &retry.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
}

// See: #18 (job ids `<start-ms hex>-<seq>` collided between daemons started in the same
// millisecond behind a load balancer).
#[test]
fn job_ids_are_unique_across_engines_started_back_to_back() {
    let a = engine(EngineConfig::default());
    let b = engine(EngineConfig::default());
    let id_a = a.submit(spec("", 5, 1, 1)).expect("accepted").job_id;
    let id_b = b.submit(spec("", 5, 1, 1)).expect("accepted").job_id;
    assert_ne!(id_a, id_b);
    // <start ms hex>-<64 random bits hex>-<seq>
    for id in [&id_a, &id_b] {
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(parts.len(), 3, "{id}");
        assert_eq!(parts[1].len(), 16, "{id}");
        assert!(parts[1].chars().all(|c| c.is_ascii_hexdigit()), "{id}");
    }
    finish(&a, &id_a, LIMIT);
    finish(&b, &id_b, LIMIT);
}

// See: #18 (failures a retry elsewhere would fix must say so).
#[test]
fn failures_a_retry_may_fix_are_retryable() {
    let hooks = Arc::new(Hooks::default());
    hooks.load_fails.store(true, Ordering::SeqCst);
    let engine = gated_engine(&hooks);
    let unloadable = engine
        .submit(spec_of(ProofKindId::PorepSealCommit, "", 5, 1, 6))
        .expect("accepted");
    let failed = finish(&engine, &unloadable.job_id, LIMIT);
    assert_eq!(failed.state, JobState::Failed);
    assert!(
        failed.retryable,
        "parameters that cannot load: {}",
        failed.error
    );

    // A job still running when the drain timeout passes.
    hooks.load_fails.store(false, Ordering::SeqCst);
    hooks.synthesis_gate.close();
    let stuck = engine
        .submit(spec_of(ProofKindId::PorepSealCommit, "", 5, 1, 7))
        .expect("accepted");
    let report = runtime().block_on(engine.shutdown(Duration::from_millis(50)));
    assert_eq!(report.failed, 1);
    let drained = finish(&engine, &stuck.job_id, LIMIT);
    assert_eq!(drained.state, JobState::Failed);
    assert!(drained.retryable, "drain timeout: {}", drained.error);
    hooks.synthesis_gate.open();
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
    // Not awaited one by one: a job that finishes early may already be forgotten.
    wait_until("every job finishes", LIMIT, || {
        engine.status().active_jobs == 0
    });
    // Three finished, two kept: the oldest finished result is gone.
    let forgotten = ids
        .iter()
        .filter(|id| engine.job_state(id).is_none())
        .count();
    assert_eq!(forgotten, 1);
    assert_eq!(engine.status().retained_results, 2);
}

/// Preloading an SRS also records its circuit's shape in the engine's synthesizer (a warm
/// daemon's first proof then synthesizes witness-only at once), and the proofs made on
/// that recording verify. See: #17.
#[test]
fn preloading_records_the_shape_and_its_proofs_verify() {
    let engine = engine(EngineConfig::default());
    assert!(!engine.synthesizer().is_recorded("synthetic-8"));
    engine.preload_srs("synthetic-8").expect("preload");
    assert!(
        engine.synthesizer().is_recorded("synthetic-8"),
        "recorded at preload"
    );
    let out = engine.submit(spec("warm", 8, 2, 21)).expect("accepted");
    let outcome = finish(&engine, &out.job_id, LIMIT);
    assert_eq!(outcome.state, JobState::Completed, "{}", outcome.error);
}
