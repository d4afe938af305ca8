//! Proof assembly: owns [`prove`], [`prove_random`], [`verify`] and [`ProveError`]. A
//! [`Backend`] computes the H polynomial and the MSM sums; this module adds the
//! randomness r, s and the verifying key's points, on the CPU, in microseconds.
//!
//! Groth16 (Groth 2016, §3.2) with bellperson's names, where Σa, Σb are the A and B
//! query sums of [`MsmOutputs`]:
//! - A = α + Σa + r·δ (G1)
//! - B = β + Σb_g2 + s·δ (G2), and B1 = β + Σb_g1 + s·δ in G1
//! - C = s·A + r·B1 − r·s·δ + H + L (G1)
//!
//! For the same r and s this gives the same proof as bellperson 0.27's `create_proof`.

use std::time::Instant;

use bellperson::groth16::{prepare_verifying_key, verify_proof};
use blstrs::{G1Projective, G2Projective};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve};
use rand_core::RngCore;

use crate::backend::{Backend, BackendError, MsmOutputs, ProveReport};
use crate::{Assignment, Proof, Scalar, Srs, VerifyingKey};

/// Why a proof could not be made or checked.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// The backend failed or found the assignment does not fit the parameters.
    #[error("backend: {0}")]
    Backend(#[from] BackendError),
    /// The circuit has a different number of public inputs than the verifying key.
    #[error("circuit has {got} public inputs (with ONE), verifying key expects {expected}")]
    InputCount {
        /// `vk.ic.len()`.
        expected: usize,
        /// `input_assignment.len()`.
        got: usize,
    },
    /// δ is the identity in the parameters: a subverted or corrupt SRS.
    #[error("delta is the identity in the parameters")]
    IdentityDelta,
    /// The verifier rejected the key or inputs as malformed (not a "false" verdict).
    #[error("verify: {0}")]
    Verify(#[source] bellperson::SynthesisError),
}

/// Proves `asg` with parameters `srs` and randomness `r`, `s`, computing the MSMs on
/// `backend`. The report holds the backend's stages plus "assemble".
///
/// # Errors
/// [`ProveError::InputCount`] or [`ProveError::Backend`] (`Mismatch`) when the assignment
/// does not belong to these parameters, [`ProveError::IdentityDelta`] for a bad SRS,
/// [`ProveError::Backend`] for a backend failure.
pub fn prove(
    asg: &Assignment,
    srs: &Srs,
    r: Scalar,
    s: Scalar,
    backend: &dyn Backend,
) -> Result<(Proof, ProveReport), ProveError> {
    let vk = &srs.vk;
    if asg.input_assignment.len() != vk.ic.len() {
        return Err(ProveError::InputCount {
            expected: vk.ic.len(),
            got: asg.input_assignment.len(),
        });
    }
    if bool::from(vk.delta_g1.is_identity() | vk.delta_g2.is_identity()) {
        return Err(ProveError::IdentityDelta);
    }
    let mut report = ProveReport {
        backend: backend.name(),
        ..ProveReport::default()
    };
    let sums = backend.compute(asg, srs, &mut report)?;
    let t = Instant::now();
    let proof = assemble(vk, &sums, r, s);
    report.push(crate::ProveStage::Assemble, t.elapsed());
    Ok((proof, report))
}

/// [`prove`] with r and s drawn from `rng`, r first, as bellperson's
/// `create_random_proof` draws them: the same seeded RNG gives the same proof.
///
/// # Errors
/// As [`prove`].
pub fn prove_random<R: RngCore>(
    asg: &Assignment,
    srs: &Srs,
    backend: &dyn Backend,
    rng: &mut R,
) -> Result<(Proof, ProveReport), ProveError> {
    let r = Scalar::random(&mut *rng);
    let s = Scalar::random(&mut *rng);
    prove(asg, srs, r, s, backend)
}

/// Checks `proof` against `vk` and the public inputs (without the leading ONE) with
/// bellperson's verifier. `Ok(false)` means the proof is invalid.
///
/// # Errors
/// [`ProveError::Verify`] when the key and the inputs do not fit together.
pub fn verify(
    vk: &VerifyingKey,
    proof: &Proof,
    public_inputs: &[Scalar],
) -> Result<bool, ProveError> {
    let pvk = prepare_verifying_key(vk);
    verify_proof(&pvk, proof, public_inputs).map_err(ProveError::Verify)
}

/// A, B, C from the backend's sums; see the module docs for the formulas.
fn assemble(vk: &VerifyingKey, sums: &MsmOutputs, r: Scalar, s: Scalar) -> Proof {
    let delta_g1 = G1Projective::from(vk.delta_g1);
    let delta_g2 = G2Projective::from(vk.delta_g2);
    // A = α + Σa + r·δ
    let a = G1Projective::from(vk.alpha_g1) + sums.a + delta_g1 * r;
    // B = β + Σb + s·δ, in G2 for the proof and in G1 for C.
    let b = G2Projective::from(vk.beta_g2) + sums.b_g2 + delta_g2 * s;
    let b1 = G1Projective::from(vk.beta_g1) + sums.b_g1 + delta_g1 * s;
    // C = s·A + r·B1 − r·s·δ + H + L
    let c = a * s + b1 * r - delta_g1 * (r * s) + sums.h + sums.l;
    Proof {
        a: a.to_affine(),
        b: b.to_affine(),
        c: c.to_affine(),
    }
}
