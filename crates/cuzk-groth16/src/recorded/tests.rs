use super::*;
use crate::synthetic::{SyntheticCircuit, SyntheticShape};

/// The recorded path gives exactly `synthesize`'s assignment, for other witnesses of
/// the recorded shape, at sizes and shapes around the defaults.
#[test]
fn assign_equals_synthesize() {
    let shapes = [
        SyntheticShape::default(),
        SyntheticShape {
            bit_fraction: 0.5,
            b_aux_fraction: 0.6,
            ..SyntheticShape::default()
        },
    ];
    for (lg, shape) in [
        (6u32, shapes[0]),
        (10, shapes[0]),
        (11, shapes[1]),
        (13, shapes[0]),
    ] {
        let c = SyntheticCircuit::with_log_n(lg, 5, shape).expect("valid size");
        let r = R1cs::record(c).expect("records");
        for w in [5u64, 77, 1234] {
            let inst = c.with_witness_seed(w);
            let want = crate::synthesize(inst).expect("synthesizes");
            let got = r.assign(inst).expect("assigns");
            assert_eq!(got.a(), want.a(), "a at 2^{lg}, witness {w}");
            assert_eq!(got.b(), want.b(), "b at 2^{lg}, witness {w}");
            assert_eq!(got.c(), want.c(), "c at 2^{lg}, witness {w}");
            assert_eq!(got.input_assignment, want.input_assignment);
            assert_eq!(got.aux_assignment, want.aux_assignment);
            assert_eq!(got.a_aux_density, want.a_aux_density);
            assert_eq!(got.b_input_density, want.b_input_density);
            assert_eq!(got.b_aux_density, want.b_aux_density);
        }
    }
}

/// The cache records once per id and gives `synthesize`'s result; an instance of
/// another shape under the same id falls back to plain synthesis.
#[test]
fn cached_synthesis_matches_and_falls_back() {
    let c = SyntheticCircuit::with_log_n(9, 3, SyntheticShape::default()).expect("valid");
    let (synth, id) = (crate::Synthesizer::default(), "recorded-9");
    for w in [1u64, 2] {
        let got = synth
            .synthesize(id, c.with_witness_seed(w))
            .expect("cached");
        assert_eq!(
            got,
            crate::synthesize(c.with_witness_seed(w)).expect("plain")
        );
    }
    assert!(synth.recorded_bytes() > 0, "the shape was recorded");
    let other = SyntheticCircuit::with_log_n(10, 3, SyntheticShape::default()).expect("valid");
    let got = synth.synthesize(id, other).expect("falls back");
    assert_eq!(got, crate::synthesize(other).expect("plain"));
}

/// A deferred assignment holds no a, b, c, counts its rows and bytes truthfully, and
/// evaluates (borrowed or in place) to exactly `synthesize`'s assignment. See: #17.
#[test]
fn deferred_assignments_evaluate_to_the_synthesized_one() {
    let c = SyntheticCircuit::with_log_n(10, 4, SyntheticShape::default()).expect("valid");
    let r = Arc::new(R1cs::record(c).expect("records"));
    for w in [3u64, 44] {
        let inst = c.with_witness_seed(w);
        let want = crate::synthesize(inst).expect("synthesizes");
        let mut got = r.assign_deferred(inst).expect("assigns");
        assert!(matches!(&got.abc, Abc::Deferred(d) if Arc::ptr_eq(d, &r)));
        assert!(got.a().is_empty() && got.b().is_empty() && got.c().is_empty());
        assert_eq!(got.n_rows(), want.n_rows());
        assert_eq!(got.lg_domain(), want.lg_domain());
        assert_eq!(
            got.host_bytes() + 3 * 32 * want.n_rows(),
            want.host_bytes(),
            "the deferred a, b, c are not counted"
        );
        let abc = got.abc_values().expect("evaluates");
        assert_eq!((&*abc.a, &*abc.b, &*abc.c), (want.a(), want.b(), want.c()));
        assert_eq!(*got.evaluated().expect("evaluates"), want);
        got.evaluate().expect("evaluates");
        assert_eq!(got, want);
    }
}

/// `eval_row` gives `evaluate`'s a, b, c row by row, the input rows included, and zeros
/// past them (the padding a backend writes to the domain).
#[test]
fn rows_one_by_one_equal_the_evaluated_vectors() {
    for (lg, seed) in [(6u32, 1u64), (9, 4), (11, 7)] {
        let c =
            SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("valid size");
        let r = Arc::new(R1cs::record(c).expect("records"));
        let got = r.assign_deferred(c.with_witness_seed(9)).expect("assigns");
        let (z_in, z_aux) = (&got.input_assignment, &got.aux_assignment);
        let z = r
            .row_witness(z_in, z_aux)
            .expect("a witness of the recording");
        let want = r.evaluate(z_in, z_aux).expect("evaluates");
        for (m, v) in Matrix::ALL.into_iter().zip(&want) {
            assert_eq!(v.len(), r.n_rows());
            let rows: Vec<Scalar> = (0..r.n_rows() + 3).map(|i| r.eval_row(m, i, &z)).collect();
            assert_eq!(&rows[..r.n_rows()], &v[..], "{m:?} at 2^{lg}");
            assert!(rows[r.n_rows()..].iter().all(|s| *s == Scalar::ZERO));
        }
    }
}

/// A witness of other counts, or without ONE first, is refused by name.
#[test]
fn a_witness_of_other_counts_is_refused() {
    let c = SyntheticCircuit::with_log_n(6, 4, SyntheticShape::default()).expect("valid");
    let r = Arc::new(R1cs::record(c).expect("records"));
    let asg = crate::synthesize(c).expect("synthesizes");
    let (ins, aux) = (asg.input_assignment.clone(), asg.aux_assignment.clone());
    let short = aux[1..].to_vec();
    let err = r
        .with_witness(ins.clone(), short.clone())
        .expect_err("short aux");
    assert!(matches!(err, SynthesisError::ShapeMismatch { .. }), "{err}");
    assert!(r.evaluate(&ins, &short).is_err());
    let mut no_one = ins.clone();
    no_one[0] = Scalar::ZERO;
    let err = r.with_witness(no_one, aux.clone()).expect_err("no ONE");
    assert!(err.to_string().contains("ONE"), "{err}");
    // A hand-made deferred assignment of the wrong counts fails to evaluate, no panic.
    let mut bad = r.with_witness(ins, aux).expect("fits");
    bad.aux_assignment.pop();
    assert!(matches!(
        bad.abc_values(),
        Err(SynthesisError::ShapeMismatch { .. })
    ));
}

/// A recording rebuilt from its matrices evaluates the same and has the same densities;
/// inconsistent matrices are refused.
#[test]
fn from_csr_rebuilds_and_checks_matrices() {
    let c = SyntheticCircuit::with_log_n(7, 2, SyntheticShape::default()).expect("valid");
    let r = R1cs::record(c).expect("records");
    let parts = |m: Matrix| {
        let v = r.matrix(m);
        (v.row_start.to_vec(), v.col.to_vec(), v.coeff.to_vec())
    };
    type Edit = dyn Fn(&mut [(Vec<u32>, Vec<u32>, Vec<u32>); 3], &mut Vec<Scalar>);
    let rebuild = |f: &Edit| {
        let mut m = Matrix::ALL.map(parts);
        let mut coeffs = r.coeffs().to_vec();
        f(&mut m, &mut coeffs);
        R1cs::from_csr(r.n_inputs(), r.n_aux(), coeffs, m)
    };
    let same = rebuild(&|_, _| {}).expect("consistent");
    assert_ne!(same.id(), r.id());
    let asg = crate::synthesize(c).expect("synthesizes");
    let (ins, aux) = (&asg.input_assignment, &asg.aux_assignment);
    assert_eq!(
        same.evaluate(ins, aux).expect("fits"),
        r.evaluate(ins, aux).expect("fits")
    );
    assert_eq!(same.a_aux_density, r.a_aux_density);
    assert_eq!(same.b_input_density, r.b_input_density);
    assert_eq!(same.b_aux_density, r.b_aux_density);
    let broken: [&Edit; 5] = [
        &|m, _| m[1].0.pop().map(drop).unwrap_or(()),
        &|m, _| m[0].0.swap(1, 2),
        &|m, coeffs| {
            m[2].1
                .iter_mut()
                .for_each(|k| *k = coeffs.len() as u32 | INPUT)
        },
        &|m, coeffs| m[2].2[0] = coeffs.len() as u32,
        &|_, coeffs| coeffs[0] = Scalar::ZERO,
    ];
    for (i, f) in broken.iter().enumerate() {
        let err = rebuild(f).expect_err("inconsistent");
        assert!(
            matches!(err, SynthesisError::ShapeMismatch { .. }),
            "case {i}: {err}"
        );
    }
}

/// With deferral on, the cache's assignments of a recorded shape (the recording run's
/// included) are deferred and evaluate to `synthesize`'s; off, they are evaluated.
#[test]
fn cached_synthesis_defers_when_asked() {
    let c = SyntheticCircuit::with_log_n(9, 6, SyntheticShape::default()).expect("valid");
    let id = "deferred-9";
    let deferring = crate::Synthesizer::default().with_defer(true);
    let evaluating = deferring.with_defer(false);
    for w in [1u64, 2, 3] {
        let inst = c.with_witness_seed(w);
        let got = deferring.synthesize(id, inst).expect("cached");
        assert!(got.is_deferred(), "witness {w}");
        let want = crate::synthesize(inst).expect("plain");
        assert_eq!(*got.evaluated().expect("evaluates"), want);
        let evaluated = evaluating.synthesize(id, inst).expect("cached");
        assert_eq!(evaluated, want);
    }
}

/// A circuit of another shape is refused, naming both shapes.
#[test]
fn another_shape_is_refused() {
    let small = SyntheticCircuit::with_log_n(8, 5, SyntheticShape::default()).expect("valid");
    let big = SyntheticCircuit::with_log_n(9, 5, SyntheticShape::default()).expect("valid");
    let r = R1cs::record(small).expect("records");
    let err = r.assign(big).expect_err("another shape");
    assert!(err.to_string().contains("not the recorded shape"), "{err}");
}

/// Sums `x_j · x_j` for sectors `j`, each in a `CS::new()` child when the system is
/// extensible (as storage-proofs' PoSt does), else in line.
struct Extending(Vec<u64>);

impl Circuit<Scalar> for Extending {
    fn synthesize<CS: ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        use bellperson::gadgets::num::AllocatedNum;
        fn sector<CS: ConstraintSystem<Scalar>>(
            cs: &mut CS,
            x: u64,
        ) -> Result<(), bellperson::SynthesisError> {
            let n = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(x)))?;
            n.inputize(cs.namespace(|| "x input"))?;
            n.square(cs.namespace(|| "x²"))?;
            Ok(())
        }
        if !CS::is_extensible() {
            return self.0.iter().try_for_each(|&x| sector(cs, x));
        }
        for chunk in self.0.chunks(2) {
            let mut child = CS::new();
            child.alloc_input(|| "temp ONE", || Ok(Scalar::ONE))?;
            for &x in chunk {
                sector(&mut child, x)?;
            }
            cs.extend(&child);
        }
        Ok(())
    }
}

/// The witness-only system is extensible, and extending gives the sequential layout.
#[test]
fn extending_circuits_assign_as_synthesized() {
    assert!(<WitnessCs as ConstraintSystem<Scalar>>::is_extensible());
    let r = R1cs::record(Extending(vec![1, 2, 3, 4, 5])).expect("records");
    let xs = vec![9, 8, 7, 6, 5];
    let want = crate::synthesize(Extending(xs.clone())).expect("plain");
    assert_eq!(r.assign(Extending(xs)).expect("assigns"), want);
}
