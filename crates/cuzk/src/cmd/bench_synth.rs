//! `cuzk bench synth`: circuit synthesis, plain (`cuzk_groth16::synthesize`) against the
//! recorded constraint system (`cuzk_groth16::recorded`: record once, then witness plus
//! parallel sparse products), on the synthetic PoRep-shaped circuit; alternating runs with
//! fresh witnesses, medians, the two assignments required equal. One JSON line per size.

use std::time::Instant;

use anyhow::{bail, Context};
use cuzk_groth16::recorded::R1cs;
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};

/// Flags of `cuzk bench synth`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// log2 of the circuit size; repeat or comma-separate for several.
    #[arg(long = "log-n", value_delimiter = ',', default_values_t = [18u32])]
    pub log_n: Vec<u32>,
    /// Timed runs of each path (medians printed).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
}

/// Runs the comparison for each size.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.reps == 0 {
        bail!("bench synth: --reps must be at least 1");
    }
    for &lg in &args.log_n {
        let c = SyntheticCircuit::with_log_n(lg, 7, SyntheticShape::default())?;
        let t = Instant::now();
        let r = R1cs::record(c).context("recording")?;
        let record_ms = t.elapsed().as_secs_f64() * 1e3;
        let (mut plain, mut recorded) = (Vec::new(), Vec::new());
        for rep in 0..args.reps {
            let inst = c.with_witness_seed(1000 + rep as u64);
            let t = Instant::now();
            let a = cuzk_groth16::synthesize(inst)?;
            plain.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let b = r.assign(inst)?;
            recorded.push(t.elapsed().as_secs_f64() * 1e3);
            if a != b {
                bail!("2^{lg} rep {rep}: the recorded assignment differs from synthesize's");
            }
        }
        let (p, q) = (median(&mut plain), median(&mut recorded));
        println!(
            "{}",
            serde_json::json!({
                "op": "synth",
                "log_n": lg,
                "constraints": r.n_constraints(),
                "record_ms": (record_ms * 10.0).round() / 10.0,
                "recorded_bytes": r.host_bytes(),
                "synthesize_ms_median": (p * 10.0).round() / 10.0,
                "recorded_ms_median": (q * 10.0).round() / 10.0,
                "speedup": (p / q * 1000.0).round() / 1000.0,
                "equal": true,
                "reps": args.reps,
                "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            })
        );
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
