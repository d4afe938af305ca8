//! Admission control and retention: beyond `max_queued_jobs` or `max_queued_bytes` a
//! submit is refused with `ResourceExhausted` and nothing accepted is lost; finished jobs
//! keep their outcome, not their parsed request; results expire by age even when nothing
//! else finishes, and the engine's books return to their baseline.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{EngineConfig, EngineError, JobState, KindRegistry, ProofKindId};

use crate::support::{
    engine_with, finish, register_test_kind, runtime, spec_of, wait_until, Hooks,
};

const LIMIT: Duration = Duration::from_secs(120);

fn gated(cfg: EngineConfig, hooks: &Arc<Hooks>) -> cuzk_engine::Engine {
    let mut registry = KindRegistry::with_synthetic();
    register_test_kind(
        &mut registry,
        "admit",
        &[ProofKindId::PorepSealCommit],
        hooks.clone(),
    );
    engine_with(cfg, registry)
}

fn porep(request_id: &str, seed: u64) -> cuzk_engine::JobSpec {
    spec_of(ProofKindId::PorepSealCommit, request_id, 5, 1, seed)
}

// See: #18 (the queue was unbounded).
#[test]
fn submits_beyond_max_queued_jobs_are_refused_and_nothing_accepted_is_lost() {
    let hooks = Arc::new(Hooks::default());
    hooks.synthesis_gate.close();
    let engine = gated(
        EngineConfig {
            max_queued_jobs: 3,
            ..EngineConfig::default()
        },
        &hooks,
    );
    let accepted: Vec<String> = (0..3)
        .map(|seed| {
            engine
                .submit(porep(&format!("job-{seed}"), seed))
                .expect("accepted")
                .job_id
        })
        .collect();
    match engine.submit(porep("job-3", 3)) {
        Err(EngineError::ResourceExhausted(message)) => {
            assert!(message.contains("max_queued_jobs"), "{message}")
        }
        other => panic!("expected ResourceExhausted, got {other:?}"),
    }
    // Attaching to an accepted job adds no work and is not refused.
    let again = engine.submit(porep("job-1", 1)).expect("attached");
    assert!(again.attached);
    assert!(engine
        .metrics_text()
        .contains("cuzk_submits_refused_total{limit=\"max_queued_jobs\"} 1"));

    hooks.synthesis_gate.open();
    for id in &accepted {
        let done = finish(&engine, id, LIMIT);
        assert_eq!(done.state, JobState::Completed, "{}", done.error);
    }
    // Room again.
    let later = engine.submit(porep("job-3", 3)).expect("accepted");
    finish(&engine, &later.job_id, LIMIT);
}

#[test]
fn submits_beyond_max_queued_bytes_are_refused_but_a_lone_big_job_runs() {
    // Each synthetic payload is 24 bytes.
    let hooks = Arc::new(Hooks::default());
    hooks.synthesis_gate.close();
    let engine = gated(
        EngineConfig {
            max_queued_bytes: 50,
            ..EngineConfig::default()
        },
        &hooks,
    );
    let a = engine.submit(porep("", 1)).expect("accepted");
    let b = engine.submit(porep("", 2)).expect("accepted");
    assert_eq!(engine.status().queued_payload_bytes, 48);
    match engine.submit(porep("", 3)) {
        Err(EngineError::ResourceExhausted(message)) => {
            assert!(message.contains("max_queued_bytes"), "{message}")
        }
        other => panic!("expected ResourceExhausted, got {other:?}"),
    }
    hooks.synthesis_gate.open();
    for id in [&a.job_id, &b.job_id] {
        assert_eq!(finish(&engine, id, LIMIT).state, JobState::Completed);
    }
    assert_eq!(engine.status().queued_payload_bytes, 0);

    let tiny = gated(
        EngineConfig {
            max_queued_bytes: 10,
            ..EngineConfig::default()
        },
        &Arc::new(Hooks::default()),
    );
    let alone = tiny
        .submit(porep("", 4))
        .expect("a lone job bigger than the limit runs");
    assert_eq!(
        finish(&tiny, &alone.job_id, LIMIT).state,
        JobState::Completed
    );
}

// See: #18 (retained results kept every job's parsed payload, and expired only when
// another job finished).
#[test]
fn results_expire_by_age_and_memory_returns_to_baseline() {
    let hooks = Arc::new(Hooks::default());
    let engine = gated(
        EngineConfig {
            result_retention: Duration::from_millis(300),
            ..EngineConfig::default()
        },
        &hooks,
    );
    let ids: Vec<String> = (0..3)
        .map(|seed| {
            engine
                .submit(porep(&format!("expire-{seed}"), seed))
                .expect("accepted")
                .job_id
        })
        .collect();
    for id in &ids {
        assert_eq!(finish(&engine, id, LIMIT).state, JobState::Completed);
    }
    // A finished job keeps its outcome only: its parsed request is freed.
    wait_until("parsed requests freed", Duration::from_secs(10), || {
        hooks.live.load(Ordering::SeqCst) == 0
    });
    let status = engine.status();
    assert_eq!(status.retained_results, 3);
    assert_eq!(status.active_jobs, 0);
    assert_eq!(status.memory_reserved_bytes, 0);
    assert_eq!(status.queued_payload_bytes, 0);

    // Nothing else finishes; the results still expire.
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(engine.status().retained_results, 0);
    assert!(engine.metrics_text().contains("cuzk_retained_results 0"));
    assert_eq!(engine.job_state(&ids[0]), None);
    assert_eq!(engine.job_for_request("expire-0"), None);
    assert!(matches!(
        runtime().block_on(engine.await_job(&ids[0], None)),
        // See: #32 item 6: an id this engine issued says it expired.
        Err(EngineError::ExpiredJob(_))
    ));
    // The same identity after expiry is a new job.
    let again = engine.submit(porep("expire-0", 0)).expect("accepted");
    assert!(!again.attached);
    finish(&engine, &again.job_id, LIMIT);
}
