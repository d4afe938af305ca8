//! Head-to-head timing of our prover against bellperson 0.27's native prover on the same
//! circuit, parameters and witness, in one process: owns [`compare_with_bellperson`],
//! [`CompareOptions`], [`Comparison`] and [`CompareError`]. `cuzk bench prove` prints its
//! result; the circuits come from `synthetic.rs`, the parameters from `paramgen`.
//!
//! Both sides are timed from the circuit to the proof: bellperson's `create_proof`
//! synthesizes internally, so ours counts [`synthesize`] plus [`prove`]. Both hold the
//! parameters decoded in memory (bellperson's `Parameters`, our [`Srs`]), and the runs
//! alternate so that load on the machine hits both alike. Every proof is verified
//! outside the timed region.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use bellperson::groth16::{create_proof, Parameters};
use blstrs::Bls12;
use ff::Field;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::paramgen::{self, CpuFixedBase, ParamgenError};
use crate::stats::median;
use crate::synthetic::{SyntheticCircuit, SyntheticError, SyntheticShape};
use crate::{prove, synthesize, verify, Backend, ProveError, Scalar, Srs, SynthesisError};

/// What to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// log2 of the domain: the synthetic circuit fills exactly 2^lg_n rows.
    pub lg_n: u32,
    /// Proofs per prover (at least 1).
    pub reps: usize,
    /// Seed of the circuit, the parameters and r, s.
    pub seed: u64,
}

/// Timings of one comparison, in milliseconds.
#[derive(Clone, Debug, Default)]
pub struct Comparison {
    /// log2 of the domain.
    pub lg_n: u32,
    /// Constraints of the circuit (without the input rows).
    pub n_constraints: usize,
    /// Time to generate the parameters (not part of either prover's time).
    pub paramgen_ms: f64,
    /// Ours, circuit to proof, per rep.
    pub cuzk_ms: Vec<f64>,
    /// bellperson's `create_proof`, per rep.
    pub bellperson_ms: Vec<f64>,
    /// Median per stage of ours: "synthesis" and the prover report's stages.
    pub cuzk_stage_ms: BTreeMap<String, f64>,
    /// Every proof of both provers verified, and both gave the same bytes.
    pub verified: bool,
}

impl Comparison {
    /// Median of our times.
    pub fn cuzk_ms_median(&self) -> f64 {
        median(&self.cuzk_ms)
    }

    /// Median of bellperson's times.
    pub fn bellperson_ms_median(&self) -> f64 {
        median(&self.bellperson_ms)
    }

    /// bellperson's median over ours: above 1 means we are faster.
    pub fn speedup(&self) -> f64 {
        self.bellperson_ms_median() / self.cuzk_ms_median()
    }
}

/// Why a comparison could not run.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// The synthetic circuit cannot have that size.
    #[error("synthetic circuit: {0}")]
    Synthetic(#[from] SyntheticError),
    /// Parameter generation failed.
    #[error("parameter generation: {0}")]
    Paramgen(#[from] ParamgenError),
    /// Our synthesis failed.
    #[error("synthesis: {0}")]
    Synthesis(#[from] SynthesisError),
    /// Our prover failed.
    #[error("cuzk prove: {0}")]
    Prove(#[from] ProveError),
    /// bellperson's prover failed.
    #[error("bellperson prove: {0}")]
    Bellperson(#[source] bellperson::SynthesisError),
    /// A proof did not verify, or the two provers disagreed.
    #[error("rep {rep}: {what}")]
    BadProof {
        /// Which rep.
        rep: usize,
        /// What went wrong.
        what: &'static str,
    },
}

/// Proves the PoRep-shaped synthetic circuit of 2^lg_n rows `reps` times with ours (on
/// `backend`) and with bellperson, alternating, with the same r and s per rep.
///
/// # Errors
/// See [`CompareError`]; a proof that fails verification is an error, not a timing.
pub fn compare_with_bellperson(
    opts: &CompareOptions,
    backend: &dyn Backend,
) -> Result<Comparison, CompareError> {
    let circuit = SyntheticCircuit::with_log_n(opts.lg_n, opts.seed, SyntheticShape::default())?;
    let t = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let srs = paramgen::generate(circuit, &mut rng, &CpuFixedBase::default())?.srs;
    let params = bellperson_parameters(&srs);
    let paramgen_ms = ms(t);
    let inputs: Vec<Scalar> = synthesize(circuit)?.input_assignment[1..].to_vec();

    let mut out = Comparison {
        lg_n: opts.lg_n,
        n_constraints: circuit.n_constraints,
        paramgen_ms,
        verified: true,
        ..Comparison::default()
    };
    let mut stages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for rep in 0..opts.reps.max(1) {
        let r = Scalar::random(&mut rng);
        let s = Scalar::random(&mut rng);
        // Alternate which prover goes first, so neither always runs on a warm cache.
        let mut ours = None;
        let mut theirs = None;
        for turn in 0..2 {
            if (turn == 0) == (rep % 2 == 0) {
                let t = Instant::now();
                let asg = synthesize(circuit)?;
                let synth_ms = ms(t);
                let (proof, report) = prove(&asg, &srs, r, s, backend)?;
                out.cuzk_ms.push(ms(t));
                drop(asg);
                stages.entry("synthesis".into()).or_default().push(synth_ms);
                for st in &report.stages {
                    stages
                        .entry(st.stage.to_string())
                        .or_default()
                        .push(st.wall.as_secs_f64() * 1e3);
                }
                ours = Some(proof);
            } else {
                let t = Instant::now();
                let proof = create_proof::<Bls12, _, _>(circuit, &params, r, s)
                    .map_err(CompareError::Bellperson)?;
                out.bellperson_ms.push(ms(t));
                theirs = Some(proof);
            }
        }
        let (Some(ours), Some(theirs)) = (ours, theirs) else {
            return Err(CompareError::BadProof {
                rep,
                what: "a prover did not run",
            });
        };
        if !verify(&srs.vk, &ours, &inputs)? {
            return Err(CompareError::BadProof {
                rep,
                what: "cuzk proof does not verify",
            });
        }
        if !verify(&srs.vk, &theirs, &inputs)? {
            return Err(CompareError::BadProof {
                rep,
                what: "bellperson proof does not verify",
            });
        }
        if ours != theirs {
            return Err(CompareError::BadProof {
                rep,
                what: "cuzk and bellperson proofs differ",
            });
        }
    }
    out.cuzk_stage_ms = stages.into_iter().map(|(k, v)| (k, median(&v))).collect();
    Ok(out)
}

/// bellperson's in-memory parameters holding the same points as `srs`.
pub fn bellperson_parameters(srs: &Srs) -> Parameters<Bls12> {
    Parameters {
        vk: srs.vk.clone(),
        h: Arc::new(srs.h.clone()),
        l: Arc::new(srs.l.clone()),
        a: Arc::new(srs.a.clone()),
        b_g1: Arc::new(srs.b_g1.clone()),
        b_g2: Arc::new(srs.b_g2.clone()),
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}
