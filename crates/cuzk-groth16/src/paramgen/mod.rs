//! Test parameter generation for any bellperson circuit: records the circuit's R1CS in a
//! keypair assembly, draws (or takes) the toxic waste, evaluates the QAP at τ and computes
//! every query point by fixed-base multiplication. The result is an [`Srs`] that
//! bellperson's `Parameters::read` and our [`Srs::load`] read, byte-identical to what
//! bellperson's `generate_random_parameters` makes from the same RNG.
//!
//! The toxic waste is known to whoever runs this: parameters made here are for tests and
//! benchmarks only, never for a real network.
//!
//! Symbols (Groth16 paper ↔ code): u_k(τ) ↔ `u[k]` (A), v_k(τ) ↔ `v[k]` (B),
//! w_k(τ) ↔ `w[k]` (C), t(τ) = τ^n − 1 ↔ `t_tau`, and the query scalars
//! `ic_k = (β·u_k + α·v_k + w_k)/γ` (inputs), `l_k = (β·u_k + α·v_k + w_k)/δ` (aux),
//! `h_i = τ^i·t(τ)/δ` for i < n − 1.

mod assembly;
mod fixed_base;
mod lagrange;
mod save;

use std::path::Path;
use std::time::{Duration, Instant};

use bellperson::{Circuit, ConstraintSystem};
use blstrs::{G1Projective, G2Projective};
use ff::{Field, PrimeField};
use group::{Curve, Group};
use rand_core::RngCore;
use rayon::prelude::*;

use crate::{Scalar, Srs, SrsError, VerifyingKey};
use assembly::KeypairAssembly;

pub use fixed_base::{CpuFixedBase, FixedBaseError, FixedBaseMul};
pub use lagrange::{lagrange_at, omega};
pub use save::save;

/// The secrets behind a set of parameters. Anyone holding them can forge proofs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToxicWaste {
    /// The G1 generator the parameters are built on.
    pub g1: G1Projective,
    /// The G2 generator.
    pub g2: G2Projective,
    /// α.
    pub alpha: Scalar,
    /// β.
    pub beta: Scalar,
    /// γ (must be nonzero).
    pub gamma: Scalar,
    /// δ (must be nonzero).
    pub delta: Scalar,
    /// τ, the secret evaluation point.
    pub tau: Scalar,
}

impl ToxicWaste {
    /// Draws the toxic waste in bellperson's order (g1, g2, α, β, γ, δ, τ), so that the
    /// same RNG state gives the same parameters as bellperson's `generate_random_parameters`.
    pub fn random<R: RngCore>(rng: &mut R) -> ToxicWaste {
        ToxicWaste {
            g1: G1Projective::random(&mut *rng),
            g2: G2Projective::random(&mut *rng),
            alpha: Scalar::random(&mut *rng),
            beta: Scalar::random(&mut *rng),
            gamma: Scalar::random(&mut *rng),
            delta: Scalar::random(&mut *rng),
            tau: Scalar::random(&mut *rng),
        }
    }
}

/// Parameters fresh from the generator.
#[derive(Debug)]
pub struct Generated {
    /// The parameters (path empty until saved).
    pub srs: Srs,
    /// The secrets they were made with.
    pub toxic: ToxicWaste,
    /// Constraints, including the `input · 0 = 0` rows.
    pub n_rows: usize,
    /// Wall time of each stage, in order ("synthesis", "lagrange", "qap", "msm_g1", "msm_g2").
    pub stages: Vec<(&'static str, Duration)>,
    /// The fixed-base implementation's own breakdown of "msm_g1" and "msm_g2" (see
    /// [`FixedBaseMul::take_stages`]; empty for the CPU).
    pub fixed_base_stages: [Vec<(&'static str, Duration)>; 2],
}

/// Why parameters could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum ParamgenError {
    /// The circuit's own code failed.
    #[error("circuit synthesis failed: {0}")]
    Synthesis(#[from] bellperson::SynthesisError),
    /// A constraint names a variable that was never allocated.
    #[error("constraint uses unallocated {kind} variable {index} (have {allocated})")]
    UnknownVariable {
        /// "input" or "aux".
        kind: &'static str,
        /// The index used.
        index: usize,
        /// How many existed.
        allocated: usize,
    },
    /// An aux variable appears in no constraint, so its L-query point would be the
    /// identity (bellperson refuses such circuits too).
    #[error("aux variable {index} is unconstrained")]
    UnconstrainedVariable {
        /// Its index among the aux variables.
        index: usize,
    },
    /// The circuit exceeds a format or field limit.
    #[error("too many {what}: {count}")]
    TooLarge {
        /// What overflowed.
        what: &'static str,
        /// How many there were.
        count: u64,
    },
    /// γ or δ is zero, or τ lies in the evaluation domain: draw the toxic waste again.
    #[error("degenerate toxic waste: {0}")]
    DegenerateTrapdoor(&'static str),
    /// τ is a root of unity of the domain.
    #[error("degenerate toxic waste: tau lies in the evaluation domain")]
    DegenerateTau,
    /// The fixed-base multiplication failed.
    #[error(transparent)]
    FixedBase(#[from] FixedBaseError),
    /// Writing the parameters failed.
    #[error(transparent)]
    Write(#[from] SrsError),
}

/// Generates parameters for `circuit` with toxic waste drawn from `rng`.
///
/// # Errors
/// See [`ParamgenError`].
pub fn generate<C, R>(
    circuit: C,
    rng: &mut R,
    fbm: &dyn FixedBaseMul,
) -> Result<Generated, ParamgenError>
where
    C: Circuit<Scalar>,
    R: RngCore,
{
    generate_with(circuit, &ToxicWaste::random(rng), fbm)
}

/// Generates parameters for `circuit`, writes them to `path` (bellperson format) and
/// returns the verifying key and the toxic waste.
///
/// # Errors
/// See [`ParamgenError`]; [`ParamgenError::Write`] when the file cannot be written.
pub fn generate_to_file<C, R>(
    circuit: C,
    rng: &mut R,
    path: &Path,
    fbm: &dyn FixedBaseMul,
) -> Result<(VerifyingKey, ToxicWaste), ParamgenError>
where
    C: Circuit<Scalar>,
    R: RngCore,
{
    let mut g = generate(circuit, rng, fbm)?;
    save(&g.srs, path)?;
    g.srs.path = path.to_path_buf();
    Ok((g.srs.vk, g.toxic))
}

/// Generates parameters for `circuit` from the given toxic waste.
///
/// # Errors
/// See [`ParamgenError`].
pub fn generate_with<C>(
    circuit: C,
    toxic: &ToxicWaste,
    fbm: &dyn FixedBaseMul,
) -> Result<Generated, ParamgenError>
where
    C: Circuit<Scalar>,
{
    let ToxicWaste {
        g1,
        g2,
        alpha,
        beta,
        gamma,
        delta,
        tau,
    } = *toxic;
    let gamma_inv = Option::<Scalar>::from(gamma.invert())
        .ok_or(ParamgenError::DegenerateTrapdoor("gamma is zero"))?;
    let delta_inv = Option::<Scalar>::from(delta.invert())
        .ok_or(ParamgenError::DegenerateTrapdoor("delta is zero"))?;
    tracing::warn!("drawing parameters from local toxic waste: for tests only");
    let mut stages = Vec::new();
    let mut clock = Instant::now();
    let mut lap = |name: &'static str, stages: &mut Vec<(&'static str, Duration)>| {
        stages.push((name, clock.elapsed()));
        clock = Instant::now();
    };

    let mut cs = KeypairAssembly::default();
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    cs.add_input_rows()?;
    let (n_inputs, n_aux, n_rows) = (cs.n_inputs, cs.n_aux, cs.n_constraints);
    lap("synthesis", &mut stages);

    let lg = n_rows.next_power_of_two().trailing_zeros();
    // bellperson's EvaluationDomain refuses 2^32 too.
    if lg >= Scalar::S {
        return Err(ParamgenError::TooLarge {
            what: "constraints",
            count: n_rows as u64,
        });
    }
    let n = 1usize << lg;
    let lagrange = lagrange_at(tau, lg)?;
    lap("lagrange", &mut stages);

    // u, v, w for every variable (inputs, then aux), one matrix at a time.
    let a = std::mem::take(&mut cs.a);
    let u = cs.evaluate(a, &lagrange)?;
    let b = std::mem::take(&mut cs.b);
    let v = cs.evaluate(b, &lagrange)?;
    let c = std::mem::take(&mut cs.c);
    let w = cs.evaluate(c, &lagrange)?;
    drop(lagrange);

    // The query scalars, on all cores. bellperson filters the identity points out of a,
    // b_g1 and b_g2, so only the nonzero u_k and v_k make points.
    let t_tau = tau.pow_vartime([n as u64]) - Scalar::ONE;
    let h_scalars = lagrange::scaled_powers(tau, t_tau * delta_inv, n - 1);
    let nonzero = |x: &[Scalar]| -> Vec<Scalar> {
        x.par_iter()
            .copied()
            .filter(|s| !bool::from(s.is_zero()))
            .collect()
    };
    let a_scalars = nonzero(&u);
    let b_scalars = nonzero(&v);
    let mut ext: Vec<Scalar> = u
        .par_iter()
        .zip(&v)
        .zip(&w)
        .map(|((u, v), w)| beta * u + alpha * v + w)
        .collect();
    drop((u, v, w));
    if let Some(k) = ext.par_iter().position_first(|e| bool::from(e.is_zero())) {
        // An input always has u ≠ 0 through its input·0 = 0 row, so only an aux
        // variable can end up here.
        return Err(ParamgenError::UnconstrainedVariable {
            index: k.saturating_sub(n_inputs),
        });
    }
    let mut l_scalars = ext.split_off(n_inputs);
    let mut ic_scalars = ext;
    ic_scalars.par_iter_mut().for_each(|s| *s *= gamma_inv);
    l_scalars.par_iter_mut().for_each(|s| *s *= delta_inv);
    lap("qap", &mut stages);

    // One fixed-base run per query, each into its own vector (no splitting copies).
    let mul_g1 = |scalars: Vec<Scalar>| fbm.mul_g1(g1, &scalars);
    let h = mul_g1(h_scalars)?;
    let a = mul_g1(a_scalars)?;
    let b_g1 = fbm.mul_g1(g1, &b_scalars)?;
    let ic = mul_g1(ic_scalars)?;
    let l = mul_g1(l_scalars)?;
    lap("msm_g1", &mut stages);
    let fb_g1 = fbm.take_stages();
    let b_g2 = fbm.mul_g2(g2, &b_scalars)?;
    drop(b_scalars);
    lap("msm_g2", &mut stages);
    let fixed_base_stages = [fb_g1, fbm.take_stages()];
    debug_assert_eq!(l.len(), n_aux);

    let (g1, g2) = (g1.to_affine(), g2.to_affine());
    let vk = VerifyingKey {
        alpha_g1: (g1 * alpha).to_affine(),
        beta_g1: (g1 * beta).to_affine(),
        beta_g2: (g2 * beta).to_affine(),
        gamma_g2: (g2 * gamma).to_affine(),
        delta_g1: (g1 * delta).to_affine(),
        delta_g2: (g2 * delta).to_affine(),
        ic,
    };
    tracing::info!(
        n_rows,
        n_inputs,
        n_aux,
        lg_domain = lg,
        n_a = a.len(),
        n_b = b_g2.len(),
        "parameters generated"
    );
    let srs = Srs {
        path: Default::default(),
        vk,
        h,
        l,
        a,
        b_g1,
        b_g2,
    };
    Ok(Generated {
        srs,
        toxic: *toxic,
        n_rows,
        stages,
        fixed_base_stages,
    })
}
