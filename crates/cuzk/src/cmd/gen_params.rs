//! `cuzk gen params`: writes a bellperson-format parameters file for a circuit, from
//! toxic waste drawn here and printed: test parameters only. The generator is
//! `cuzk_groth16::paramgen`; this module parses flags and prints.

use std::path::PathBuf;

use anyhow::Context;
use cuzk_groth16::paramgen::{self, CpuFixedBase};
use rand::SeedableRng;

use super::prove::CircuitArgs;

/// Flags of `cuzk gen params`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The circuit (the same flags must be given to `cuzk prove`).
    #[command(flatten)]
    pub circuit: CircuitArgs,
    /// Output file.
    #[arg(long)]
    pub out: PathBuf,
    /// Seed for the toxic waste, for reproducible files (default: fresh OS randomness).
    #[arg(long)]
    pub toxic_seed: Option<u64>,
    /// Window width of the fixed-base multiplication (default: chosen from the size).
    #[arg(long)]
    pub window_bits: Option<u32>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let lg = args.circuit.log_n()?;
    let circuit = args.circuit.synthetic(lg)?;
    let fbm = CpuFixedBase {
        window_bits: args.window_bits,
    };
    let g = match args.toxic_seed {
        Some(seed) => paramgen::generate(
            circuit,
            &mut rand_chacha::ChaCha20Rng::seed_from_u64(seed),
            &fbm,
        ),
        None => paramgen::generate(circuit, &mut rand::thread_rng(), &fbm),
    }
    .context("generating parameters")?;
    let t = std::time::Instant::now();
    g.srs
        .save(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    let save = t.elapsed();

    println!(
        "WARNING: test-only parameters: the toxic waste below was drawn here and forges proofs"
    );
    let tw = &g.toxic;
    for (name, value) in [
        ("tau", tw.tau),
        ("alpha", tw.alpha),
        ("beta", tw.beta),
        ("gamma", tw.gamma),
        ("delta", tw.delta),
    ] {
        println!("  {name:<6} {value:?}");
    }
    println!(
        "circuit synthetic seed={}: {} rows (domain 2^{lg}), {} inputs, {} aux; points: h {}, l {}, a {}, b {}",
        circuit.seed,
        g.n_rows,
        g.srs.n_inputs(),
        g.srs.n_aux(),
        g.srs.h.len(),
        g.srs.l.len(),
        g.srs.a.len(),
        g.srs.b_g1.len()
    );
    println!("{:<10} {:>12}", "stage", "wall_ms");
    let mut total = save;
    for (name, wall) in &g.stages {
        println!("{name:<10} {:>12.3}", wall.as_secs_f64() * 1e3);
        total += *wall;
    }
    println!("{:<10} {:>12.3}", "save", save.as_secs_f64() * 1e3);
    println!("{:<10} {:>12.3}", "total", total.as_secs_f64() * 1e3);
    let size = std::fs::metadata(&args.out).map(|m| m.len()).unwrap_or(0);
    println!("wrote {} ({size} bytes)", args.out.display());
    Ok(())
}
