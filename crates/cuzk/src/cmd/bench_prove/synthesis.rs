//! cuzk's synthesis in the head-to-head, as the daemon's: the shape recorded once, then
//! each instance through the shape cache, with plain synthesis beside it and, for
//! `--deferred`, the witness alone timed apart from the host's a, b, c.

use std::time::Instant;

use anyhow::{bail, Context};
use cuzk_groth16::synthetic::SyntheticCircuit;
use cuzk_groth16::Synthesizer;

use super::Args;

/// cuzk's synthesis of one benchmark size as the daemon does it: the circuit's shape
/// recorded once in a synthesizer's shape cache, then each instance through it.
pub(super) struct Synthesis {
    /// This size's synthesizer (default budget, a, b, c evaluated on the host).
    pub(super) synth: Synthesizer,
    /// The shape cache's id for this size and structure.
    pub(super) id: String,
    /// The first call of the id: the recording (the assignment it returns is dropped).
    pub(super) record_ms: f64,
    pub(super) recorded_bytes: u64,
    /// Parts the cache computes the witness in (1: the whole circuit on one thread).
    pub(super) parts: usize,
}

impl Synthesis {
    pub(super) fn record(
        args: &Args,
        lg: u32,
        circuit: SyntheticCircuit,
    ) -> anyhow::Result<Synthesis> {
        let synth = Synthesizer::default();
        let id = format!(
            "bench-synthetic-{:x}-{lg}{}",
            args.seed,
            args.shape.to_args().concat()
        );
        let t = Instant::now();
        synth
            .synthesize_parts(&id, circuit, &circuit)
            .with_context(|| format!("recording the 2^{lg} shape"))?;
        let record_ms = t.elapsed().as_secs_f64() * 1e3;
        let recorded_bytes = synth.recorded_bytes();
        if recorded_bytes == 0 {
            bail!("2^{lg}: the shape was not recorded (over the recording budget?)");
        }
        Ok(Synthesis {
            parts: synth.layout(&id).map_or(1, |l| l.n_parts),
            synth,
            id,
            record_ms,
            recorded_bytes,
        })
    }

    /// One instance through the recorded shape, then, when `plain`, plain synthesis (its
    /// assignment must be the same). With `deferred`, the synthesis stops at the witness
    /// (timed apart) and a, b, c are evaluated on a copy of it, the copy untimed.
    pub(super) fn run(
        &self,
        circuit: SyntheticCircuit,
        plain: bool,
        deferred: bool,
    ) -> anyhow::Result<Instance> {
        let t = Instant::now();
        let (evaluated, deferred) = if deferred {
            let asg = self
                .synth
                .with_defer(true)
                .synthesize_parts(&self.id, circuit, &circuit)?;
            let witness_ms = t.elapsed().as_secs_f64() * 1e3;
            if !asg.is_deferred() {
                bail!("the recorded shape's call did not defer a, b, c");
            }
            let mut evaluated = asg.clone();
            let t = Instant::now();
            evaluated.evaluate()?;
            let products_ms = t.elapsed().as_secs_f64() * 1e3;
            (
                evaluated,
                Some(Deferred {
                    asg,
                    witness_ms,
                    products_ms,
                }),
            )
        } else {
            let asg = self.synth.synthesize_parts(&self.id, circuit, &circuit)?;
            (asg, None)
        };
        let synth_ms = match &deferred {
            Some(d) => d.witness_ms + d.products_ms,
            None => t.elapsed().as_secs_f64() * 1e3,
        };
        let mut plain_ms = 0.0;
        if plain {
            let t = Instant::now();
            let asg = cuzk_groth16::synthesize(circuit)?;
            plain_ms = t.elapsed().as_secs_f64() * 1e3;
            if asg != evaluated {
                bail!("the recorded shape's assignment differs from plain synthesis's");
            }
        }
        Ok(Instance {
            evaluated,
            synth_ms,
            deferred,
            plain_ms,
        })
    }
}

/// One instance's assignments and synthesis times (ms).
pub(super) struct Instance {
    /// With a, b, c evaluated on the host.
    pub(super) evaluated: cuzk_groth16::Assignment,
    /// The steady-state synthesis of `evaluated`: with `deferred`, its witness plus
    /// products.
    pub(super) synth_ms: f64,
    /// The same witness with a, b, c left to the backend (`--deferred`).
    pub(super) deferred: Option<Deferred>,
    /// Plain synthesis, when run (else 0).
    pub(super) plain_ms: f64,
}

/// An instance's assignment with a, b, c left to the backend, and its synthesis times.
pub(super) struct Deferred {
    pub(super) asg: cuzk_groth16::Assignment,
    /// Its synthesis (the witness only).
    pub(super) witness_ms: f64,
    /// The host's evaluation of a, b, c on a copy (what the evaluated prover's synthesis
    /// adds).
    pub(super) products_ms: f64,
}
