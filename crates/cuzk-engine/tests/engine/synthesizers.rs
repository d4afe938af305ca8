//! Synthesis is each engine's own: an engine builds its `Synthesizer` (recorded shapes,
//! recording budget, deferral, pool gate) from its config, and two engines in one process
//! share none of it.

use std::time::Duration;

use cuzk_engine::synthetic::{params_file, SyntheticProof};
use cuzk_engine::{EngineConfig, JobState};
use cuzk_groth16::{PartitionedProof, Proof, Srs, SrsOptions};

use crate::support::{engine, finish, param_dir, spec};

const LIMIT: Duration = Duration::from_secs(120);

/// Two engines in one process, one with the default recording budget and one with a
/// budget of 0 (never record), prove jobs of the same circuit at the same time: the first
/// records the shape and holds its bytes, the second records nothing and synthesizes the
/// plain way, and every partition proof of both verifies on its own. Before, the budget
/// and the shape cache were process-wide: the second engine's start set the first's budget
/// to 0. See: #31.
#[test]
fn two_engines_in_one_process_keep_their_own_recording_budgets() {
    let recording = engine(EngineConfig::default());
    let never = engine(EngineConfig {
        recorded_r1cs_budget_bytes: 0,
        ..EngineConfig::default()
    });
    assert!(recording.synthesizer().recording_on());
    assert!(!never.synthesizer().recording_on());
    let id = "synthetic-7";
    let jobs = [
        (&recording, spec("kept", 7, 3, 71)),
        (&never, spec("plain", 7, 3, 72)),
    ]
    .map(|(engine, spec)| {
        let out = engine.submit(spec.clone()).expect("accepted");
        (engine, spec, out.job_id)
    });
    let outcomes = jobs.map(|(engine, spec, job_id)| (spec, finish(engine, &job_id, LIMIT)));
    // The parameters exist once a job has proved.
    let srs = Srs::load(&params_file(&param_dir(), 7), SrsOptions::default()).expect("params");
    let pvk = bellperson::groth16::prepare_verifying_key(&srs.vk);
    for (spec, outcome) in &outcomes {
        assert_eq!(outcome.state, JobState::Completed, "{}", outcome.error);
        assert_eq!(outcome.proof.len(), 3 * 192);
        let kind = SyntheticProof::parse(&spec.request).expect("parse");
        for (i, chunk) in outcome.proof.chunks(192).enumerate() {
            let proof = Proof::read(chunk).expect("192-byte proof");
            let inputs = kind.public_inputs(i).expect("inputs");
            assert!(
                bellperson::groth16::verify_proof(&pvk, &proof, &inputs).expect("verify"),
                "{} partition {i}",
                spec.request_id
            );
        }
    }
    let kept = recording.synthesizer();
    assert!(
        kept.is_recorded(id),
        "the engine with a budget recorded {id}"
    );
    assert!(kept.recorded_bytes() > 0);
    assert_eq!(
        recording.status().memory_ledger.recorded_bytes,
        kept.recorded_bytes()
    );
    let plain = never.synthesizer();
    assert!(
        !plain.is_recorded(id),
        "the engine of budget 0 recorded {id}"
    );
    assert_eq!(plain.recorded_bytes(), 0);
    assert_eq!(never.status().memory_ledger.recorded_bytes, 0);
}
