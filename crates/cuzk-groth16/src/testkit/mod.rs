//! What the tests of this crate and of the backends above it share (feature `testkit`):
//! a seeded random circuit with the features the prover must get right (bits, zero and
//! one values, field elements, public inputs in A and B, inputs allocated late), an
//! [`Srs`] built from bellperson's in-memory `Parameters`, and the prove tests every
//! backend must pass ([`backend_tests`], run through [`for_each_backend_test!`]).

pub mod backend_tests;

use std::path::PathBuf;

use crate::{point_bytes, Scalar, Srs, SrsQuery};
use bellperson::groth16::{generate_random_parameters, Parameters};
use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use blstrs::{Bls12, Fp, Fp2, G1Affine, G2Affine};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A random but satisfied circuit of `n_constraints` constraints and `n_inputs` public
/// inputs (besides ONE). With `late_inputs`, half of the inputs are allocated only after
/// constraints have been enforced, interleaved with them.
#[derive(Clone, Debug)]
pub struct TestCircuit {
    /// Constraints the circuit enforces (the prover adds one row per input).
    pub n_constraints: usize,
    /// Public inputs besides ONE.
    pub n_inputs: usize,
    /// Allocate half the inputs after some constraints.
    pub late_inputs: bool,
    /// Seed of every value.
    pub seed: u64,
}

impl TestCircuit {
    /// A circuit with the given sizes.
    pub fn new(n_constraints: usize, n_inputs: usize, late_inputs: bool, seed: u64) -> Self {
        TestCircuit {
            n_constraints,
            n_inputs,
            late_inputs,
            seed,
        }
    }

    /// The public inputs (without ONE) this circuit allocates, in allocation order.
    pub fn public_inputs(&self) -> Vec<Scalar> {
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed ^ 0x1a2b);
        (0..self.n_inputs)
            .map(|_| Scalar::random(&mut rng))
            .collect()
    }

    /// Rows of the assignment: constraints plus ONE plus the inputs.
    pub fn n_rows(&self) -> usize {
        self.n_constraints + self.n_inputs + 1
    }
}

impl Circuit<Scalar> for TestCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let inputs = self.public_inputs();
        let n_early = if self.late_inputs {
            self.n_inputs / 2
        } else {
            self.n_inputs
        };
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut input_vars: Vec<(Variable, Scalar)> = Vec::new();
        for (i, v) in inputs.iter().enumerate().take(n_early) {
            let var = cs.alloc_input(|| format!("input {i}"), || Ok(*v))?;
            input_vars.push((var, *v));
        }
        // Late inputs are allocated evenly among the constraints.
        let n_late = self.n_inputs - n_early;
        let late_every = self
            .n_constraints
            .checked_div(n_late)
            .unwrap_or(usize::MAX)
            .max(1);
        let mut next_late = n_early;
        // Recent variables with their values, operands of later constraints.
        let mut vars: Vec<(Variable, Scalar)> = vec![(CS::one(), Scalar::ONE)];
        for j in 0..self.n_constraints {
            if j % late_every == late_every - 1 && next_late < self.n_inputs {
                let v = inputs[next_late];
                let var = cs.alloc_input(|| format!("input {next_late}"), || Ok(v))?;
                input_vars.push((var, v));
                next_late += 1;
            }
            let pick = |rng: &mut ChaCha8Rng, vars: &[(Variable, Scalar)]| {
                vars[vars.len() - 1 - rng.gen_range(0..vars.len().min(16))]
            };
            match rng.gen_range(0..6) {
                // A bit: (ONE − v)·v = 0.
                0 | 1 => {
                    let bit = if rng.gen_bool(0.5) {
                        Scalar::ONE
                    } else {
                        Scalar::ZERO
                    };
                    let v = cs.alloc(|| "bit", || Ok(bit))?;
                    cs.enforce(|| "boolean", |lc| lc + CS::one() - v, |lc| lc + v, |lc| lc);
                    vars.push((v, bit));
                }
                // A product of two earlier variables, one of them maybe times a constant.
                2 | 3 => {
                    let (x, xv) = pick(&mut rng, &vars);
                    let (y, yv) = pick(&mut rng, &vars);
                    let k = Scalar::from(rng.gen_range(1..5u64));
                    let prod = xv * k * yv;
                    let v = cs.alloc(|| "product", || Ok(prod))?;
                    cs.enforce(|| "mul", |lc| lc + (k, x), |lc| lc + y, |lc| lc + v);
                    vars.push((v, prod));
                }
                // A fresh field element (sometimes zero or one) times ONE.
                4 => {
                    let val = match rng.gen_range(0..4) {
                        0 => Scalar::ZERO,
                        1 => Scalar::ONE,
                        _ => Scalar::random(&mut rng),
                    };
                    let v = cs.alloc(|| "value", || Ok(val))?;
                    cs.enforce(|| "value", |lc| lc + v, |lc| lc + CS::one(), |lc| lc + v);
                    vars.push((v, val));
                }
                // A public input in B: (x)·(input) = v, or the input in A.
                _ => {
                    if let Some(&(p, pv)) =
                        input_vars.get(rng.gen_range(0..input_vars.len().max(1)))
                    {
                        let (x, xv) = pick(&mut rng, &vars);
                        let val = xv * pv;
                        let v = cs.alloc(|| "input use", || Ok(val))?;
                        if rng.gen_bool(0.5) {
                            cs.enforce(|| "in b", |lc| lc + x, |lc| lc + p, |lc| lc + v);
                        } else {
                            cs.enforce(|| "in a", |lc| lc + p, |lc| lc + x, |lc| lc + v);
                        }
                        vars.push((v, val));
                    } else {
                        // ONE · ONE = ONE, built from a prepared linear combination.
                        let one = LinearCombination::zero() + CS::one();
                        let also_one = one.clone();
                        cs.enforce(|| "one", |_| one, |l| l + CS::one(), |_| also_one);
                    }
                }
            }
            if vars.len() > 64 {
                vars.drain(1..33);
            }
        }
        // Inputs still unallocated (tiny circuits) go at the end, after every constraint.
        for (i, v) in inputs.iter().enumerate().skip(next_late) {
            cs.alloc_input(|| format!("input {i}"), || Ok(*v))?;
        }
        Ok(())
    }
}

/// bellperson parameters for `circuit`, from a seeded RNG.
pub fn bellperson_params(circuit: &TestCircuit, seed: u64) -> Parameters<Bls12> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    generate_random_parameters::<Bls12, _, _>(circuit.clone(), &mut rng)
        .expect("bellperson generates parameters for a satisfiable test circuit")
}

/// Our resident SRS holding the same points as bellperson's in-memory parameters.
pub fn srs_from_params(params: &Parameters<Bls12>) -> Srs {
    Srs {
        path: PathBuf::from("<bellperson in memory>"),
        ..Srs::from_bellperson(params)
    }
}

/// G1 points from bytes in blst's affine layout (what [`crate::SrsFile::read_into`]
/// writes: Montgomery limbs, little-endian, x then y).
pub fn g1_from_blst_bytes(bytes: &[u8]) -> Vec<G1Affine> {
    bytes
        .chunks(96)
        .map(|p| G1Affine::from_raw_unchecked(fp_at(p, 0), fp_at(p, 1), false))
        .collect()
}

/// G2 points from bytes in blst's affine layout (each coordinate c0 then c1).
pub fn g2_from_blst_bytes(bytes: &[u8]) -> Vec<G2Affine> {
    bytes
        .chunks(192)
        .map(|p| {
            let x = Fp2::new(fp_at(p, 0), fp_at(p, 1));
            let y = Fp2::new(fp_at(p, 2), fp_at(p, 3));
            G2Affine::from_raw_unchecked(x, y, false)
        })
        .collect()
}

/// The `c`-th 48-byte field element of `p`, as blst holds it.
fn fp_at(p: &[u8], c: usize) -> Fp {
    let mut l = [0u64; 6];
    for (w, limb) in l.iter_mut().enumerate() {
        let at = c * 48 + w * 8;
        *limb = u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"));
    }
    Fp::from_raw_unchecked(l)
}

/// A released SRS's points read back from its file ([`Srs::file`]) into an SRS that holds
/// them, as a device that streams them reads them (here all at once).
///
/// # Panics
/// Without a file, or when the file does not read.
pub fn read_from_file(srs: &Srs) -> Srs {
    let file = srs.file.as_ref().expect("a file");
    let bytes = |q: SrsQuery| {
        let mut dst = vec![0u8; file.len(q) * point_bytes(q)];
        file.read_into(q, 0, &mut dst).expect("the file reads");
        dst
    };
    Srs {
        host_pins: Default::default(),
        path: srs.path.clone(),
        vk: srs.vk.clone(),
        h: g1_from_blst_bytes(&bytes(SrsQuery::H)),
        l: g1_from_blst_bytes(&bytes(SrsQuery::L)),
        a: g1_from_blst_bytes(&bytes(SrsQuery::A)),
        b_g1: g1_from_blst_bytes(&bytes(SrsQuery::BG1)),
        b_g2: g2_from_blst_bytes(&bytes(SrsQuery::BG2)),
        released: None,
        file: None,
    }
}

/// Invokes the macro `$m` as `$m!(name, path::to::body)` for each test of
/// [`backend_tests`], so that a test crate runs them all on its backends through its own
/// `backend_test!(name, body)` (the body a function of `&dyn Backend`).
#[macro_export]
macro_rules! for_each_backend_test {
    ($m:ident) => {
        $m!(
            random_circuits_verify,
            $crate::testkit::backend_tests::random_circuits_verify
        );
        $m!(
            matches_bellperson_byte_for_byte,
            $crate::testkit::backend_tests::matches_bellperson_byte_for_byte
        );
        $m!(
            deferred_assignments_prove_as_evaluated,
            $crate::testkit::backend_tests::deferred_assignments_prove_as_evaluated
        );
        $m!(
            bad_proofs_inputs_and_keys_are_rejected,
            $crate::testkit::backend_tests::bad_proofs_inputs_and_keys_are_rejected
        );
        $m!(
            proof_bytes_round_trip,
            $crate::testkit::backend_tests::proof_bytes_round_trip
        );
        $m!(
            params_written_by_bellperson_prove,
            $crate::testkit::backend_tests::params_written_by_bellperson_prove
        );
        $m!(
            mismatched_parameters_are_errors,
            $crate::testkit::backend_tests::mismatched_parameters_are_errors
        );
        $m!(
            synthetic_porep_shaped_circuits_match_bellperson,
            $crate::testkit::backend_tests::synthetic_porep_shaped_circuits_match_bellperson
        );
    };
}
