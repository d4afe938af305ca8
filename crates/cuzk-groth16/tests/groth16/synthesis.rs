//! Synthesis tests: the a/b/c evaluations, witness and densities of small hand-written
//! circuits (including inputs allocated after constraints), and the errors for failing
//! or malformed circuits.

use bellperson::{Circuit, ConstraintSystem, Index, SynthesisError as CircuitError, Variable};
use cuzk_groth16::{synthesize, Scalar, SynthesisCs, SynthesisError};
use ff::Field;

fn s(v: u64) -> Scalar {
    Scalar::from(v)
}

/// x = 3 (aux), y = x·x = 9 (aux), then input p = 5 allocated late, then p·x = z (aux 15),
/// and a B-only use of ONE: (y + 2x)·ONE = w.
struct LateInput;

impl Circuit<Scalar> for LateInput {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), CircuitError> {
        let x = cs.alloc(|| "x", || Ok(s(3)))?;
        let y = cs.alloc(|| "y", || Ok(s(9)))?;
        cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        let p = cs.alloc_input(|| "p", || Ok(s(5)))?;
        let z = cs.alloc(|| "z", || Ok(s(15)))?;
        cs.enforce(|| "p*x=z", |lc| lc + p, |lc| lc + x, |lc| lc + z);
        let w = cs.alloc(|| "w", || Ok(s(15)))?;
        cs.enforce(
            || "(y+2x)*1=w",
            |lc| lc + y + (s(2), x),
            |lc| lc + CS::one(),
            |lc| lc + w,
        );
        // A zero coefficient does not enter the density (as in bellperson).
        cs.enforce(
            || "0*z",
            |lc| lc + (Scalar::ZERO, z),
            |lc| lc + (Scalar::ZERO, w),
            |lc| lc,
        );
        Ok(())
    }
}

#[test]
fn late_input_assignment_is_exact() {
    let asg = synthesize(LateInput).unwrap();
    // 4 constraints + 2 input rows (ONE, p).
    assert_eq!(asg.n_rows(), 6);
    assert_eq!(asg.lg_domain(), 3);
    assert_eq!(asg.input_assignment, vec![Scalar::ONE, s(5)]);
    assert_eq!(asg.aux_assignment, vec![s(3), s(9), s(15), s(15)]);
    assert_eq!(
        asg.a(),
        [s(3), s(5), s(15), Scalar::ZERO, Scalar::ONE, s(5)]
    );
    assert_eq!(
        asg.b(),
        [
            s(3),
            s(3),
            Scalar::ONE,
            Scalar::ZERO,
            Scalar::ZERO,
            Scalar::ZERO
        ]
    );
    assert_eq!(
        asg.c(),
        [s(9), s(15), s(15), Scalar::ZERO, Scalar::ZERO, Scalar::ZERO]
    );
    let bits = |d: &cuzk_groth16::Density| (0..d.len()).map(|i| d.get(i)).collect::<Vec<_>>();
    // A: x (twice), y; p is an input (inputs are not tracked in A); z, w never in A
    // with a nonzero coefficient.
    assert_eq!(bits(&asg.a_aux_density), vec![true, true, false, false]);
    // B: x; ONE (input 0) but not p.
    assert_eq!(bits(&asg.b_aux_density), vec![true, false, false, false]);
    assert_eq!(bits(&asg.b_input_density), vec![true, false]);
}

struct Failing;

impl Circuit<Scalar> for Failing {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), CircuitError> {
        let x = cs.alloc(|| "x", || Ok(s(1)))?;
        cs.enforce(|| "x", |lc| lc + x, |lc| lc + x, |lc| lc + x);
        cs.alloc(|| "missing", || Err(CircuitError::AssignmentMissing))?;
        Ok(())
    }
}

#[test]
fn circuit_errors_carry_the_constraint_count() {
    match synthesize(Failing) {
        Err(SynthesisError::Circuit {
            n_constraints: 1,
            source: CircuitError::AssignmentMissing,
        }) => {}
        other => panic!("expected Circuit error after 1 constraint, got {other:?}"),
    }
}

struct Dangling;

impl Circuit<Scalar> for Dangling {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), CircuitError> {
        let x = cs.alloc(|| "x", || Ok(s(1)))?;
        cs.enforce(|| "ok", |lc| lc + x, |lc| lc + x, |lc| lc + x);
        let ghost = Variable::new_unchecked(Index::Aux(7));
        cs.enforce(|| "ghost", |lc| lc + x, |lc| lc + ghost, |lc| lc);
        let ghost_input = Variable::new_unchecked(Index::Input(3));
        cs.enforce(|| "ghost input", |lc| lc + ghost_input, |lc| lc, |lc| lc);
        Ok(())
    }
}

#[test]
fn unallocated_variables_are_errors_not_panics() {
    match synthesize(Dangling) {
        Err(SynthesisError::UnknownVariable {
            constraint: 1,
            kind: "aux",
            index: 7,
            allocated: 1,
        }) => {}
        other => panic!("expected UnknownVariable, got {other:?}"),
    }
}

#[test]
fn extend_matches_one_system() {
    // Two halves built separately and joined equal the same circuit run in one system.
    let whole = synthesize(LateInput).unwrap();
    let mut first = SynthesisCs::new();
    let mut second = SynthesisCs::new();
    LateInput.synthesize(&mut second).unwrap();
    first.extend(&second);
    let joined = first.finish().unwrap();
    assert_eq!(joined.abc, whole.abc);
    assert_eq!(joined.input_assignment, whole.input_assignment);
    assert_eq!(joined.aux_assignment, whole.aux_assignment);
    assert_eq!(joined.a_aux_density, whole.a_aux_density);
    assert_eq!(joined.b_aux_density, whole.b_aux_density);
    assert_eq!(joined.b_input_density, whole.b_input_density);
}
