//! CRITICAL work (WinningPoSt) does not wait in the queue behind the general synthesis
//! pool: with every general worker held, one by a cold SRS load and one by a long NORMAL
//! partition, and more NORMAL partitions queued, a CRITICAL job starts at once on the
//! CRITICAL lane and completes while the NORMAL work is still held.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{EngineConfig, JobState, KindRegistry, Priority, ProofKindId};

use crate::support::{engine_with, finish, register_test_kind, spec, spec_of, wait_until, Hooks};

const LIMIT: Duration = Duration::from_secs(120);

// See: #18 (a WinningPoSt waited 1.03 s in the queue of a busy daemon).
#[test]
fn critical_job_does_not_wait_for_long_partitions_or_a_cold_srs_load() {
    let cold = Arc::new(Hooks::default());
    let long = Arc::new(Hooks::default());
    cold.load_gate.close();
    long.synthesis_gate.close();
    let mut registry = KindRegistry::with_synthetic();
    register_test_kind(
        &mut registry,
        "cold",
        &[ProofKindId::PorepSealCommit],
        cold.clone(),
    );
    register_test_kind(
        &mut registry,
        "long",
        &[ProofKindId::SnapDealsUpdate],
        long.clone(),
    );
    let engine = engine_with(
        EngineConfig {
            synthesis_workers: 2,
            critical_synthesis_workers: 1,
            cpu_workers: 1,
            ..EngineConfig::default()
        },
        registry,
    );
    // The CRITICAL job's own parameters are resident, as a daemon preloads them.
    engine.preload_srs("synthetic-5").expect("preload");

    // General worker 1: a cold SRS load that does not finish while the test runs.
    let porep = engine
        .submit(spec_of(ProofKindId::PorepSealCommit, "porep", 5, 1, 1))
        .expect("accepted");
    wait_until("the cold load starts", LIMIT, || {
        cold.loads_started.load(Ordering::SeqCst) > 0
    });
    // General worker 2: a long partition, with three more of its job queued.
    let snap = engine
        .submit(spec_of(ProofKindId::SnapDealsUpdate, "snap", 5, 4, 2))
        .expect("accepted");
    wait_until("the long partition starts", LIMIT, || {
        long.syntheses_started.load(Ordering::SeqCst) > 0
    });
    let busy = engine.status();
    assert_eq!(
        busy.queued_by_priority.iter().map(|(_, n)| n).sum::<u64>(),
        3
    );

    let mut winning = spec("winning", 5, 1, 3);
    winning.priority = Some(Priority::Critical);
    let critical = engine.submit(winning).expect("accepted");
    let done = finish(&engine, &critical.job_id, LIMIT);
    assert_eq!(done.state, JobState::Completed, "{}", done.error);
    // A functional bound: the job started without waiting for the held NORMAL work (which
    // is still held), not a latency claim.
    assert!(
        done.timings.queue_wait <= Duration::from_millis(100),
        "queue wait {:?}",
        done.timings.queue_wait
    );
    assert_eq!(
        engine.job_state(&porep.job_id),
        Some(JobState::Synthesizing)
    );

    cold.load_gate.open();
    long.synthesis_gate.open();
    for id in [&porep.job_id, &snap.job_id] {
        let done = finish(&engine, id, LIMIT);
        assert_eq!(done.state, JobState::Completed, "{}", done.error);
    }
}

// See: #29 (a WinningPoSt's host loops queued behind a PoRep partition's fill in the
// process-wide pool: 0.9-1.5 s of its compute under load).
#[test]
fn critical_synthesis_runs_in_the_critical_pool_and_normal_synthesis_does_not() {
    let critical = Arc::new(Hooks::default());
    let normal = Arc::new(Hooks::default());
    let mut registry = KindRegistry::with_synthetic();
    register_test_kind(
        &mut registry,
        "crit",
        &[ProofKindId::WinningPost],
        critical.clone(),
    );
    register_test_kind(
        &mut registry,
        "norm",
        &[ProofKindId::PorepSealCommit],
        normal.clone(),
    );
    let engine = engine_with(
        EngineConfig {
            synthesis_workers: 1,
            critical_synthesis_workers: 1,
            cpu_workers: 1,
            ..EngineConfig::default()
        },
        registry,
    );
    let mut winning = spec_of(ProofKindId::WinningPost, "crit", 5, 1, 1);
    winning.priority = Some(Priority::Critical);
    let jobs = [
        engine.submit(winning).expect("accepted"),
        engine
            .submit(spec_of(ProofKindId::PorepSealCommit, "norm", 5, 2, 2))
            .expect("accepted"),
    ];
    for job in &jobs {
        let done = finish(&engine, &job.job_id, LIMIT);
        assert_eq!(done.state, JobState::Completed, "{}", done.error);
    }
    let crit = critical.synthesis_threads.lock().clone();
    let norm = normal.synthesis_threads.lock().clone();
    assert_eq!(crit.len(), 1);
    assert!(crit[0].starts_with("cuzk-critical-"), "{crit:?}");
    assert_eq!(norm.len(), 2);
    assert!(
        norm.iter().all(|t| t.starts_with("cuzk-synth-")),
        "{norm:?}"
    );
}
