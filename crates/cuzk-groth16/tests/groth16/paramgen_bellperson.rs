//! Parameter generation checked against bellperson: the same RNG gives byte-identical
//! parameters to `generate_random_parameters`, bellperson reads and proves with ours, and
//! circuits bellperson refuses are refused with a named error.

use bellperson::groth16::{
    create_random_proof, generate_random_parameters, prepare_verifying_key, verify_proof,
    Parameters,
};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Bls12;
use cuzk_groth16::paramgen::{self, CpuFixedBase, ParamgenError};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{Scalar, Srs, SrsOptions};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

fn bytes_of(srs: &Srs) -> Vec<u8> {
    let mut out = Vec::new();
    srs.write_to(&mut out).expect("write to memory");
    out
}

/// A circuit that allocates its public inputs late, between constraints, and uses an
/// input in B: x² = y, y·p = z, z + p = q (p, q public).
#[derive(Clone, Copy)]
struct LateInputs {
    x: u64,
}

impl Circuit<Scalar> for LateInputs {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let x_val = Scalar::from(self.x);
        let x = cs.alloc(|| "x", || Ok(x_val))?;
        let y = cs.alloc(|| "y", || Ok(x_val.square()))?;
        cs.enforce(|| "x*x=y", |lc| lc + x, |lc| lc + x, |lc| lc + y);
        let p_val = Scalar::from(7u64);
        let p = cs.alloc_input(|| "p", || Ok(p_val))?;
        let z = cs.alloc(|| "z", || Ok(x_val.square() * p_val))?;
        cs.enforce(|| "y*p=z", |lc| lc + y, |lc| lc + p, |lc| lc + z);
        let q = cs.alloc_input(|| "q", || Ok(x_val.square() * p_val + p_val))?;
        cs.enforce(
            || "(z+p)*1=q",
            |lc| lc + z + p,
            |lc| lc + CS::one(),
            |lc| lc + q,
        );
        Ok(())
    }
}

#[test]
fn same_rng_gives_bellpersons_bytes() {
    let synthetic =
        SyntheticCircuit::with_log_n(9, 21, SyntheticShape::default()).expect("valid size");
    for (name, seed) in [("synthetic", 1u64), ("late-inputs", 2)] {
        let theirs = match name {
            "synthetic" => generate_random_parameters::<Bls12, _, _>(
                synthetic,
                &mut ChaCha8Rng::seed_from_u64(seed),
            ),
            _ => generate_random_parameters::<Bls12, _, _>(
                LateInputs { x: 3 },
                &mut ChaCha8Rng::seed_from_u64(seed),
            ),
        }
        .expect("bellperson generates");
        let ours = match name {
            "synthetic" => paramgen::generate(
                synthetic,
                &mut ChaCha8Rng::seed_from_u64(seed),
                &CpuFixedBase::default(),
            ),
            _ => paramgen::generate(
                LateInputs { x: 3 },
                &mut ChaCha8Rng::seed_from_u64(seed),
                &CpuFixedBase::default(),
            ),
        }
        .expect("we generate");
        let mut theirs_bytes = Vec::new();
        theirs.write(&mut theirs_bytes).expect("write to memory");
        assert!(
            bytes_of(&ours.srs) == theirs_bytes,
            "{name}: parameters differ from bellperson's"
        );
    }
}

#[test]
fn bellperson_proves_and_verifies_with_our_parameters() {
    let circuit =
        SyntheticCircuit::with_log_n(10, 5, SyntheticShape::default()).expect("valid size");
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    let g = paramgen::generate(circuit, &mut rng, &CpuFixedBase::default()).expect("we generate");
    assert_eq!(g.n_rows, 1 << 10);
    assert_eq!(g.srs.h.len(), (1 << 10) - 1);

    // Through a file: our writer, bellperson's reader and our reader agree.
    let path = std::env::temp_dir().join(format!("cuzk-paramgen-{}.params", std::process::id()));
    g.srs.save(&path).expect("temp dir is writable");
    let file = std::fs::read(&path).expect("just written");
    let loaded =
        Srs::load(&path, SrsOptions { check_points: true }).expect("our reader accepts our file");
    let _ = std::fs::remove_file(&path);
    let params = Parameters::<Bls12>::read(&file[..], true).expect("bellperson reads our file");
    assert_eq!(loaded.vk, params.vk);
    assert!(bytes_of(&loaded) == file);

    let proof = create_random_proof(circuit, &params, &mut rng).expect("bellperson proves");
    let asg = cuzk_groth16::synthesize(circuit).expect("synthesizes");
    let inputs = &asg.input_assignment[1..];
    let pvk = prepare_verifying_key(&params.vk);
    assert!(verify_proof(&pvk, &proof, inputs).expect("well-formed"));
    let mut wrong = inputs.to_vec();
    wrong[0] += Scalar::ONE;
    assert!(!verify_proof(&pvk, &proof, &wrong).expect("well-formed"));

    // Another witness for the same structure proves with the same parameters.
    let other = circuit.with_witness_seed(77);
    let proof = create_random_proof(other, &params, &mut rng).expect("bellperson proves");
    let asg = cuzk_groth16::synthesize(other).expect("synthesizes");
    assert!(verify_proof(&pvk, &proof, &asg.input_assignment[1..]).expect("well-formed"));
}

#[test]
fn our_prover_verifies_with_our_parameters() {
    let circuit = LateInputs { x: 5 };
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let g = paramgen::generate(
        circuit,
        &mut rng,
        &CpuFixedBase {
            window_bits: Some(3),
        },
    )
    .expect("we generate");
    let asg = cuzk_groth16::synthesize(circuit).expect("synthesizes");
    let backend = cuzk_groth16::CpuBackend::default();
    let (proof, _) = cuzk_groth16::prove_random(&asg, &g.srs, &backend, &mut rng).expect("proves");
    let pvk = prepare_verifying_key(&g.srs.vk);
    assert!(verify_proof(&pvk, &proof, &asg.input_assignment[1..]).expect("well-formed"));
}

/// Allocates an aux variable no constraint uses.
struct Unconstrained;

impl Circuit<Scalar> for Unconstrained {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::ONE))?;
        let _unused = cs.alloc(|| "unused", || Ok(Scalar::ONE))?;
        cs.enforce(|| "a*a=a", |lc| lc + a, |lc| lc + a, |lc| lc + a);
        Ok(())
    }
}

/// Enforces a constraint on a variable index it never allocated.
struct Dangling;

impl Circuit<Scalar> for Dangling {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || Ok(Scalar::ONE))?;
        let ghost = bellperson::Variable::new_unchecked(bellperson::Index::Aux(5));
        cs.enforce(|| "a*ghost=a", |lc| lc + a, |lc| lc + ghost, |lc| lc + a);
        Ok(())
    }
}

/// Fails during synthesis.
struct Failing;

impl Circuit<Scalar> for Failing {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, _: &mut CS) -> Result<(), SynthesisError> {
        Err(SynthesisError::Unsatisfiable)
    }
}

#[test]
fn refused_circuits_name_the_problem() {
    let fb = CpuFixedBase::default();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    assert!(matches!(
        paramgen::generate(Unconstrained, &mut rng, &fb),
        Err(ParamgenError::UnconstrainedVariable { index: 1 })
    ));
    assert!(matches!(
        paramgen::generate(Dangling, &mut rng, &fb),
        Err(ParamgenError::UnknownVariable {
            kind: "aux",
            index: 5,
            allocated: 1
        })
    ));
    assert!(matches!(
        paramgen::generate(Failing, &mut rng, &fb),
        Err(ParamgenError::Synthesis(_))
    ));
    let mut toxic = paramgen::ToxicWaste::random(&mut rng);
    toxic.delta = Scalar::ZERO;
    assert!(matches!(
        paramgen::generate_with(LateInputs { x: 1 }, &toxic, &fb),
        Err(ParamgenError::DegenerateTrapdoor(_))
    ));
}
