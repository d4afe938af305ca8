//! Test parameter generation for any bellperson circuit: records the circuit's R1CS in a
//! keypair assembly, draws (or takes) the toxic waste, evaluates the QAP at τ and computes
//! every query point by fixed-base multiplication. The result is an [`Srs`] that
//! bellperson's `Parameters::read` and our [`Srs::load`] read, byte-identical to what
//! bellperson's `generate_random_parameters` makes from the same RNG.
//!
//! A circuit given as parts (a prefix, then sub-circuits of one structure, as a PoRep
//! partition's challenges are) is recorded from its prefix and one part and its QAP
//! evaluated part by part on all cores ([`generate_parts`], `parts.rs`): the same bytes.
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
mod parts;
mod queries;

use std::path::Path;
use std::time::Duration;

use bellperson::{Circuit, ConstraintSystem};
use blstrs::{G1Affine, G1Projective, G2Projective};
use ff::{Field, PrimeField};
use group::Group;
use rand_core::RngCore;

use crate::sublayout::Parts;
use crate::{Scalar, Srs, SrsError, VerifyingKey};
use assembly::{Evaluated, KeypairAssembly, Streaming};
use queries::{finish, Clock, Inverses};

pub use fixed_base::{CpuFixedBase, FixedBaseError, FixedBaseMul};
pub use lagrange::{lagrange_at, omega};

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
    /// Wall time of each stage, in order: "synthesis" (recording the structure),
    /// "lagrange", "qap" (u, v, w at τ and the query scalars), then one per fixed-base
    /// product: "fb_h", "fb_a", "fb_b_g1", "fb_b_g2", "fb_l" (the few ic points go with
    /// the first), and "save" when writing to a file. With a known domain
    /// ([`generate_in_domain`]) "lagrange" comes first, and "synthesis" includes the QAP
    /// evaluation and the h query that ran beside it (no "fb_h" then).
    pub stages: Vec<(&'static str, Duration)>,
    /// The fixed-base implementation's own breakdown of each stage that ran products, by
    /// stage name (see [`FixedBaseMul::take_stages`]; empty for the CPU).
    pub fixed_base_stages: Vec<(&'static str, Vec<(&'static str, Duration)>)>,
}

/// Why parameters could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum ParamgenError {
    /// The circuit's own code failed.
    #[error("circuit synthesis failed: {0}")]
    Synthesis(#[from] bellperson::SynthesisError),
    /// A part of a circuit given as parts (or its prefix) could not be built.
    #[error("circuit part: {0}")]
    Part(crate::SynthesisError),
    /// A circuit given as parts is not a prefix followed by sub-circuits of one structure.
    #[error("the parts do not make one circuit: {0}")]
    PartsMismatch(String),
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
    /// The circuit does not fill the domain it was said to.
    #[error("the circuit has {n_rows} rows, not a domain of 2^{lg} rows as given")]
    DomainMismatch {
        /// Rows the circuit has (constraints and input rows) or, while streaming, the
        /// first row seen beyond the domain.
        n_rows: u64,
        /// The domain given.
        lg: u32,
    },
    /// A QAP evaluator thread stopped before synthesis ended.
    #[error("a QAP evaluator thread stopped before synthesis ended")]
    Evaluator,
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
    let g = generate_in_domain(circuit, &ToxicWaste::random(rng), fbm, None, Some(path))?;
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
    generate_in_domain(circuit, toxic, fbm, None, None)
}

/// As [`generate_with`], for a circuit whose domain is known to be 2^`lg_hint` rows
/// when given (the synthetic circuits' is): then the Lagrange coefficients come first,
/// and the QAP evaluation and the h query (which depends on the domain alone) run beside
/// the single-threaded synthesis instead of after it. With `out`, the parameters are also
/// written there (bellperson format), each query while the next is computed, and the
/// last stage, "save", is the wait for the rest of the file and its sync.
///
/// # Errors
/// See [`ParamgenError`]; [`ParamgenError::DomainMismatch`] when the circuit does not
/// fill a domain of 2^`lg_hint` rows; [`ParamgenError::Write`] when `out` cannot be
/// written (no file is left then).
pub fn generate_in_domain<C>(
    circuit: C,
    toxic: &ToxicWaste,
    fbm: &dyn FixedBaseMul,
    lg_hint: Option<u32>,
    out: Option<&Path>,
) -> Result<Generated, ParamgenError>
where
    C: Circuit<Scalar>,
{
    let inv = Inverses::of(toxic)?;
    tracing::warn!("drawing parameters from local toxic waste: for tests only");
    let mut clock = Clock::start();
    let recorded = match lg_hint {
        None => record_then_evaluate(circuit, toxic.tau, &mut clock)?,
        Some(lg) => {
            let h = |lg| fbm.mul_g1(toxic.g1, &h_scalars(toxic.tau, inv.delta, lg));
            record_while_evaluating(circuit, toxic.tau, lg, h, &mut clock)?
        }
    };
    finish(recorded, toxic, &inv, fbm, clock, out)
}

/// As [`generate_with`], for a circuit given as parts ([`Parts`]: a prefix, then
/// sub-circuits of one structure): the structure is recorded from the prefix and one part
/// and the QAP evaluated part by part on all cores (`parts.rs`), instead of synthesizing
/// the whole circuit on one thread. The parameters are the whole circuit's, byte for
/// byte. `Ok(None)` when `parts` has fewer than 2 parts or cannot give its prefix alone:
/// generate from the whole circuit then. `out` as for [`generate_in_domain`].
///
/// # Errors
/// See [`ParamgenError`]; [`ParamgenError::Part`] and [`ParamgenError::PartsMismatch`]
/// when the parts cannot be built or do not make one circuit of equal sub-circuits.
pub fn generate_parts<P: Parts>(
    parts: &P,
    toxic: &ToxicWaste,
    fbm: &dyn FixedBaseMul,
    out: Option<&Path>,
) -> Result<Option<Generated>, ParamgenError> {
    let inv = Inverses::of(toxic)?;
    let mut clock = Clock::start();
    let Some(recorded) = record_parts_then_evaluate(parts, toxic.tau, &mut clock)? else {
        return Ok(None);
    };
    tracing::warn!("drawing parameters from local toxic waste: for tests only");
    finish(recorded, toxic, &inv, fbm, clock, out).map(Some)
}

/// A circuit's QAP at τ, the part of its parameters that depends on its structure:
/// counts, and u_k(τ), v_k(τ), w_k(τ) of every variable k (inputs, `ONE` first, then aux;
/// the `input_i · 0 = 0` rows included). Two circuits with equal [`Qap`]s at the same
/// τ get identical parameters from the same toxic waste.
#[derive(Debug, PartialEq, Eq)]
pub struct Qap {
    /// Public inputs, `ONE` included.
    pub n_inputs: usize,
    /// Private variables.
    pub n_aux: usize,
    /// Rows: constraints and one per input.
    pub n_rows: usize,
    /// log2 of the evaluation domain.
    pub lg_domain: u32,
    /// u_k(τ) (A).
    pub u: Vec<Scalar>,
    /// v_k(τ) (B).
    pub v: Vec<Scalar>,
    /// w_k(τ) (C).
    pub w: Vec<Scalar>,
}

impl Qap {
    /// The QAP of `circuit` synthesized whole.
    ///
    /// # Errors
    /// As [`generate_with`] before the fixed-base products.
    pub fn of_circuit<C: Circuit<Scalar>>(circuit: C, tau: Scalar) -> Result<Qap, ParamgenError> {
        record_then_evaluate(circuit, tau, &mut Clock::start()).map(Qap::from)
    }

    /// The QAP of the circuit `parts` describes, from its prefix and one part; `Ok(None)`
    /// as for [`generate_parts`].
    ///
    /// # Errors
    /// As [`generate_parts`] before the fixed-base products.
    pub fn of_parts<P: Parts>(parts: &P, tau: Scalar) -> Result<Option<Qap>, ParamgenError> {
        Ok(record_parts_then_evaluate(parts, tau, &mut Clock::start())?.map(Qap::from))
    }
}

impl From<Recorded> for Qap {
    fn from(r: Recorded) -> Qap {
        let [u, v, w] = r.uvw.map(|e| e.inputs.into_iter().chain(e.aux).collect());
        Qap {
            n_inputs: r.n_inputs,
            n_aux: r.n_aux,
            n_rows: r.n_rows,
            lg_domain: r.lg,
            u,
            v,
            w,
        }
    }
}

/// A recorded circuit's counts and its u, v, w at τ (and the h query when it was made
/// during synthesis).
struct Recorded {
    n_inputs: usize,
    n_aux: usize,
    n_rows: usize,
    lg: u32,
    uvw: [Evaluated; 3],
    h: Option<Vec<G1Affine>>,
}

/// `h_i = τ^i·t(τ)/δ` for i < n − 1, with t(τ) = τ^n − 1.
fn h_scalars(tau: Scalar, delta_inv: Scalar, lg: u32) -> Vec<Scalar> {
    let n = 1u64 << lg;
    let t_tau = tau.pow_vartime([n]) - Scalar::ONE;
    lagrange::scaled_powers(tau, t_tau * delta_inv, n as usize - 1)
}

/// The domain of `n_rows` rows, refused from 2^32 up as bellperson's EvaluationDomain
/// refuses it.
fn domain_of(n_rows: usize) -> Result<u32, ParamgenError> {
    let lg = n_rows.next_power_of_two().trailing_zeros();
    match lg < Scalar::S {
        true => Ok(lg),
        false => Err(ParamgenError::TooLarge {
            what: "constraints",
            count: n_rows as u64,
        }),
    }
}

/// Synthesizes `circuit` keeping its terms, then evaluates the matrices on all cores.
fn record_then_evaluate<C: Circuit<Scalar>>(
    circuit: C,
    tau: Scalar,
    clock: &mut Clock,
) -> Result<Recorded, ParamgenError> {
    let mut cs = KeypairAssembly::default();
    cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
    circuit.synthesize(&mut cs)?;
    cs.add_input_rows()?;
    clock.lap("synthesis");
    let lg = domain_of(cs.n_constraints)?;
    let lagrange = lagrange_at(tau, lg)?;
    clock.lap("lagrange");
    let a = std::mem::take(&mut cs.a);
    let u = cs.evaluate(a, &lagrange)?;
    let b = std::mem::take(&mut cs.b);
    let v = cs.evaluate(b, &lagrange)?;
    let c = std::mem::take(&mut cs.c);
    let w = cs.evaluate(c, &lagrange)?;
    Ok(Recorded {
        n_inputs: cs.n_inputs,
        n_aux: cs.n_aux,
        n_rows: cs.n_constraints,
        lg,
        uvw: [u, v, w],
        h: None,
    })
}

/// Records `parts` from its prefix and one part (`parts.rs`), then evaluates every part's
/// matrices on all cores; `Ok(None)` when it is not a circuit of parts.
fn record_parts_then_evaluate<P: Parts>(
    parts: &P,
    tau: Scalar,
    clock: &mut Clock,
) -> Result<Option<Recorded>, ParamgenError> {
    let Some(rec) = parts::record_parts(parts)? else {
        return Ok(None);
    };
    clock.lap("synthesis");
    let n_rows = rec.n_rows();
    let lg = domain_of(n_rows)?;
    let lagrange = lagrange_at(tau, lg)?;
    clock.lap("lagrange");
    let uvw = rec.evaluate(&lagrange);
    let total = rec.layout.total();
    Ok(Some(Recorded {
        n_inputs: total.inputs,
        n_aux: total.aux,
        n_rows,
        lg,
        uvw,
        h: None,
    }))
}

/// Synthesizes `circuit` while three threads evaluate its matrices at τ from streamed
/// terms and another computes the h query with `h` (the synthesis itself is one thread).
fn record_while_evaluating<C, H>(
    circuit: C,
    tau: Scalar,
    lg: u32,
    h: H,
    clock: &mut Clock,
) -> Result<Recorded, ParamgenError>
where
    C: Circuit<Scalar>,
    H: FnOnce(u32) -> Result<Vec<G1Affine>, FixedBaseError> + Send,
{
    if lg >= Scalar::S {
        return Err(ParamgenError::TooLarge {
            what: "constraints",
            count: 1u64 << lg,
        });
    }
    let lagrange = lagrange_at(tau, lg)?;
    clock.lap("lagrange");
    let mismatch = |n_rows: u64| ParamgenError::DomainMismatch { n_rows, lg };
    let (synthesized, evaluated, h) = std::thread::scope(|s| {
        let h = s.spawn(move || h(lg));
        let (stream, evaluators) = Streaming::spawn(s, &lagrange);
        let mut cs = KeypairAssembly::streaming(stream);
        let synthesized = (|| {
            cs.alloc_input(|| "ONE", || Ok(Scalar::ONE))?;
            circuit.synthesize(&mut cs)?;
            cs.add_input_rows()?;
            cs.close_stream()?;
            Ok::<_, ParamgenError>((cs.n_inputs, cs.n_aux, cs.n_constraints))
        })();
        // Dropping the assembly closes the stream on the error path too.
        drop(cs);
        let evaluated = evaluators.map(|e| joined(e.join()));
        (synthesized, evaluated, joined(h.join()))
    });
    let (n_inputs, n_aux, n_rows) = synthesized?;
    let [u, v, w] = evaluated.map(|e| {
        e.map(|mut e| {
            e.inputs.resize(n_inputs, Scalar::ZERO);
            e.aux.resize(n_aux, Scalar::ZERO);
            e
        })
    });
    let uvw = [
        u.map_err(|row| mismatch(u64::from(row) + 1))?,
        v.map_err(|row| mismatch(u64::from(row) + 1))?,
        w.map_err(|row| mismatch(u64::from(row) + 1))?,
    ];
    if domain_of(n_rows)? != lg {
        return Err(mismatch(n_rows as u64));
    }
    let h = h?;
    clock.lap("synthesis");
    Ok(Recorded {
        n_inputs,
        n_aux,
        n_rows,
        lg,
        uvw,
        h: Some(h),
    })
}

/// A scoped thread's result; its panic (a bug) continues in the caller.
fn joined<T>(r: std::thread::Result<T>) -> T {
    r.unwrap_or_else(|p| std::panic::resume_unwind(p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};
    use rand_chacha::rand_core::SeedableRng;

    fn bytes(srs: &Srs) -> Vec<u8> {
        let mut b = Vec::new();
        srs.write_to(&mut b).expect("writes");
        b
    }

    /// With the domain known, the streamed evaluation and the h query made beside
    /// synthesis give the same parameters as the plain order; a wrong domain is refused.
    #[test]
    fn known_domain_gives_the_same_parameters() {
        let c = SyntheticCircuit::with_log_n(12, 8, SyntheticShape::default()).expect("circuit");
        let toxic = ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(3));
        let fb = CpuFixedBase::default();
        let plain = generate_with(c, &toxic, &fb).expect("plain");
        let streamed = generate_in_domain(c, &toxic, &fb, Some(12), None).expect("streamed");
        assert_eq!(streamed.n_rows, plain.n_rows);
        assert!(
            bytes(&streamed.srs) == bytes(&plain.srs),
            "parameters differ"
        );
        let names: Vec<_> = streamed.stages.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "lagrange",
                "synthesis",
                "qap",
                "fb_a",
                "fb_b_g1",
                "fb_b_g2",
                "fb_l"
            ]
        );
        for lg in [11, 13] {
            match generate_in_domain(c, &toxic, &fb, Some(lg), None) {
                Err(ParamgenError::DomainMismatch { lg: got, .. }) => assert_eq!(got, lg),
                other => panic!("2^{lg}: expected a domain mismatch, got {other:?}"),
            }
        }
    }
}
