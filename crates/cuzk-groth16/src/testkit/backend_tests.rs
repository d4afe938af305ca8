//! The prove tests every backend must pass, as functions of the backend: proofs verify
//! with bellperson's verifier, equal bellperson's `create_proof` byte for byte for the same
//! r and s, and bad proofs, inputs and keys are rejected. cuzk-groth16's tests run them on
//! the CPU backend and cuzk-gpu's on the CPU and GPU backends, each through its own
//! `backend_test!` over [`for_each_backend_test!`](crate::for_each_backend_test).

use super::{bellperson_params, srs_from_params, TestCircuit};
use crate::recorded::R1cs;
use crate::Abc;
use crate::{
    prove, prove_random, synthesize, verify, Backend, BackendError, Proof, ProveError, ProveStage,
    Scalar, Srs, SrsOptions,
};
use bellperson::groth16::{create_proof, create_random_proof};
use blstrs::Bls12;
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn proof_bytes(proof: &Proof) -> Vec<u8> {
    let mut out = Vec::new();
    proof.write(&mut out).expect("writing to a Vec cannot fail");
    out
}

/// Random circuits of 1 to 2,750 rows (powers of two, one past, late inputs) prove and verify.
pub fn random_circuits_verify(backend: &dyn Backend) {
    // Row counts: 1 + 0 + 0 = 1, 13, 2^7 exactly, 2^7 + 1, 2^10 − 1, a random one.
    for (n_constraints, n_inputs, late) in [
        (0, 0, false),
        (10, 2, false),
        (125, 2, true),
        (126, 2, false),
        (1017, 5, true),
        (2741, 9, true),
    ] {
        let circuit = TestCircuit::new(n_constraints, n_inputs, late, n_constraints as u64);
        let params = bellperson_params(&circuit, 1);
        let srs = srs_from_params(&params);
        let asg = synthesize(circuit.clone()).unwrap();
        assert_eq!(asg.n_rows(), circuit.n_rows());
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let (proof, report) = prove_random(&asg, &srs, backend, &mut rng).unwrap();
        assert!(
            verify(&srs.vk, &proof, &circuit.public_inputs()).unwrap(),
            "{n_constraints} constraints, {n_inputs} inputs, late {late}"
        );
        assert!(report.stage(ProveStage::MsmH).is_some());
        assert!(report.stage(ProveStage::Assemble).is_some());
    }
}

/// Proofs equal bellperson's `create_proof` byte for byte for the same r and s (r = s = 0 too), and `create_random_proof` for the same seeded RNG.
pub fn matches_bellperson_byte_for_byte(backend: &dyn Backend) {
    for (n_constraints, n_inputs, late) in [(1, 1, false), (300, 4, true), (1500, 6, false)] {
        let circuit = TestCircuit::new(n_constraints, n_inputs, late, 40 + n_constraints as u64);
        let params = bellperson_params(&circuit, 2);
        let srs = srs_from_params(&params);
        let asg = synthesize(circuit.clone()).unwrap();

        // Fixed r, s, including the degenerate r = s = 0.
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for (r, s) in [
            (Scalar::random(&mut rng), Scalar::random(&mut rng)),
            (Scalar::ZERO, Scalar::ZERO),
        ] {
            let theirs = create_proof::<Bls12, _, _>(circuit.clone(), &params, r, s).unwrap();
            let (ours, _) = prove(&asg, &srs, r, s, backend).unwrap();
            assert_eq!(
                proof_bytes(&ours),
                proof_bytes(&theirs),
                "{n_constraints} constraints"
            );
            assert_eq!(proof_bytes(&ours).len(), 192);
        }

        // Randomized: the same seeded RNG draws the same r, s in both provers.
        let theirs = create_random_proof::<Bls12, _, _, _>(
            circuit.clone(),
            &params,
            &mut ChaCha8Rng::seed_from_u64(9),
        )
        .unwrap();
        let (ours, _) =
            prove_random(&asg, &srs, backend, &mut ChaCha8Rng::seed_from_u64(9)).unwrap();
        assert_eq!(proof_bytes(&ours), proof_bytes(&theirs));
    }
}

/// A deferred assignment (a, b, c left to the backend, the recording carried instead) proves to the same bytes as the evaluated one for the same r and s. See: #17.
pub fn deferred_assignments_prove_as_evaluated(backend: &dyn Backend) {
    for (n_constraints, n_inputs, late) in [(0, 0, false), (300, 4, true), (1100, 3, false)] {
        let circuit = TestCircuit::new(n_constraints, n_inputs, late, 70 + n_constraints as u64);
        let params = bellperson_params(&circuit, 4);
        let srs = srs_from_params(&params);
        let asg = synthesize(circuit.clone()).unwrap();
        let r1cs = std::sync::Arc::new(R1cs::record(circuit.clone()).unwrap());
        let deferred = r1cs.assign_deferred(circuit.clone()).unwrap();
        assert!(deferred.is_deferred() && deferred.a().is_empty());
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let (want, _) = prove(&asg, &srs, r, s, backend).unwrap();
        let (got, _) = prove(&deferred, &srs, r, s, backend).unwrap();
        assert_eq!(
            proof_bytes(&got),
            proof_bytes(&want),
            "{n_constraints} constraints"
        );
    }
}

/// Tampered proofs, wrong or missing public inputs and another circuit's key are rejected.
pub fn bad_proofs_inputs_and_keys_are_rejected(backend: &dyn Backend) {
    let circuit = TestCircuit::new(500, 3, true, 11);
    let params = bellperson_params(&circuit, 3);
    let srs = srs_from_params(&params);
    let asg = synthesize(circuit.clone()).unwrap();
    let inputs = circuit.public_inputs();
    let (proof, _) = prove_random(&asg, &srs, backend, &mut ChaCha8Rng::seed_from_u64(1)).unwrap();
    assert!(verify(&srs.vk, &proof, &inputs).unwrap());

    // Tampered: each of A, B, C moved by the generator.
    let mut bad = proof.clone();
    bad.a = (bad.a.to_curve() + blstrs::G1Affine::generator()).to_affine();
    assert!(!verify(&srs.vk, &bad, &inputs).unwrap());
    let mut bad = proof.clone();
    bad.b = (bad.b.to_curve() + blstrs::G2Affine::generator()).to_affine();
    assert!(!verify(&srs.vk, &bad, &inputs).unwrap());
    let mut bad = proof.clone();
    bad.c = (bad.c.to_curve() + blstrs::G1Affine::generator()).to_affine();
    assert!(!verify(&srs.vk, &bad, &inputs).unwrap());

    // Wrong public inputs: one changed, or one missing (a malformed call, not a verdict).
    let mut wrong = inputs.clone();
    wrong[1] += Scalar::ONE;
    assert!(!verify(&srs.vk, &proof, &wrong).unwrap());
    assert!(matches!(
        verify(&srs.vk, &proof, &inputs[1..]),
        Err(ProveError::Verify(_))
    ));

    // Another circuit of the same shape, with its own key.
    let other = TestCircuit::new(500, 3, true, 12);
    let other_params = bellperson_params(&other, 4);
    assert!(!verify(&other_params.vk, &proof, &inputs).unwrap());
}

/// A proof's 192 bytes read back to the same proof, which verifies.
pub fn proof_bytes_round_trip(backend: &dyn Backend) {
    let circuit = TestCircuit::new(200, 2, false, 21);
    let params = bellperson_params(&circuit, 5);
    let srs = srs_from_params(&params);
    let asg = synthesize(circuit.clone()).unwrap();
    let (proof, _) = prove_random(&asg, &srs, backend, &mut ChaCha8Rng::seed_from_u64(2)).unwrap();
    let bytes = proof_bytes(&proof);
    let read = Proof::read(&bytes[..]).unwrap();
    assert_eq!(read, proof);
    assert_eq!(proof_bytes(&read), bytes);
    assert!(verify(&srs.vk, &read, &circuit.public_inputs()).unwrap());
}

/// Parameters written by bellperson's `Parameters::write` and read by `Srs::load` prove, as the in-memory ones do.
pub fn params_written_by_bellperson_prove(backend: &dyn Backend) {
    // A .params file written by bellperson's own Parameters::write, read by Srs::load.
    let circuit = TestCircuit::new(700, 4, true, 31);
    let params = bellperson_params(&circuit, 6);
    // One file per backend: the backends' tests run at once in one process.
    let path = std::env::temp_dir().join(format!(
        "cuzk-h1a-prove-{}-{}.params",
        std::process::id(),
        backend.name().replace(':', "-")
    ));
    let mut file = std::fs::File::create(&path).unwrap();
    params.write(&mut file).unwrap();
    drop(file);
    let loaded = Srs::load(&path, SrsOptions { check_points: true });
    std::fs::remove_file(&path).unwrap();
    let srs = loaded.unwrap();
    let asg = synthesize(circuit.clone()).unwrap();
    let (proof, _) = prove_random(&asg, &srs, backend, &mut ChaCha8Rng::seed_from_u64(4)).unwrap();
    assert!(verify(&srs.vk, &proof, &circuit.public_inputs()).unwrap());
    // The same proof as from the in-memory parameters.
    let mem = srs_from_params(&params);
    let (again, _) = prove_random(&asg, &mem, backend, &mut ChaCha8Rng::seed_from_u64(4)).unwrap();
    assert_eq!(proof, again);
}

/// Parameters of another shape (inputs, domain, densities, a truncated a/b/c) are errors before any MSM, never a panic.
pub fn mismatched_parameters_are_errors(backend: &dyn Backend) {
    let small = TestCircuit::new(100, 2, false, 51);
    let params = bellperson_params(&small, 7);
    let srs = srs_from_params(&params);
    let (r, s) = (Scalar::ONE, Scalar::ONE);

    // More inputs than the key has.
    let asg = synthesize(TestCircuit::new(100, 3, false, 51)).unwrap();
    assert!(matches!(
        prove(&asg, &srs, r, s, backend),
        Err(ProveError::InputCount {
            expected: 3,
            got: 4
        })
    ));
    // Same inputs, a larger domain: the h query is too short.
    let asg = synthesize(TestCircuit::new(300, 2, false, 51)).unwrap();
    assert!(matches!(
        prove(&asg, &srs, r, s, backend),
        Err(ProveError::Backend(BackendError::Mismatch { .. }))
    ));
    // Same domain, other densities: caught before any MSM, never a panic.
    let asg = synthesize(TestCircuit::new(101, 2, false, 52)).unwrap();
    assert!(matches!(
        prove(&asg, &srs, r, s, backend),
        Err(ProveError::Backend(BackendError::Mismatch { .. }))
    ));
    // A truncated a/b/c.
    let mut asg = synthesize(small.clone()).unwrap();
    if let Abc::Evaluated { c, .. } = &mut asg.abc {
        c.pop();
    }
    assert!(matches!(
        prove(&asg, &srs, r, s, backend),
        Err(ProveError::Backend(BackendError::Mismatch { .. }))
    ));
}

/// The benchmark's synthetic PoRep-shaped circuits and parameter generator at test sizes prove to bellperson's bytes.
pub fn synthetic_porep_shaped_circuits_match_bellperson(backend: &dyn Backend) {
    use crate::compare::bellperson_parameters;
    use crate::paramgen::{generate, CpuFixedBase};
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};
    // The benchmark's circuit and generator at test sizes: exactly 2^10 rows, and a
    // row count just past 2^11 (a domain of 2^12 mostly padding).
    for (n_constraints, lg) in [(None, 10), (Some(2049), 12)] {
        let circuit = match n_constraints {
            None => SyntheticCircuit::with_log_n(lg, 5, SyntheticShape::default()),
            Some(n) => SyntheticCircuit::new(n, 5, SyntheticShape::default()),
        }
        .unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(8);
        let srs = generate(circuit, &mut rng, &CpuFixedBase::default())
            .unwrap()
            .srs;
        let asg = synthesize(circuit).unwrap();
        assert_eq!(asg.lg_domain(), lg);
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        let (ours, _) = prove(&asg, &srs, r, s, backend).unwrap();
        assert!(verify(&srs.vk, &ours, &asg.input_assignment[1..]).unwrap());
        let params = bellperson_parameters(&srs);
        let theirs = create_proof::<Bls12, _, _>(circuit, &params, r, s).unwrap();
        assert_eq!(proof_bytes(&ours), proof_bytes(&theirs), "2^{lg}");
    }
}
