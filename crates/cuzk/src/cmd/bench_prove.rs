//! `cuzk bench prove`: whole-partition proving, a cuzk backend against a reference
//! prover, one JSON line per size. The comparison itself (circuit, parameters,
//! alternating timed runs, verification) is `cuzk_groth16::compare`; this module parses
//! flags and prints.

use anyhow::{bail, Context};
use cuzk_groth16::compare::{compare_with_bellperson, CompareOptions};
use cuzk_groth16::CpuBackend;

/// Flags of `cuzk bench prove`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Backend under test: "cpu" (or "gpu", once the GPU backend is wired in here).
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// log2 of the circuit size (rows of the domain); repeat or comma-separate for several.
    #[arg(long = "log-n", value_delimiter = ',', default_values_t = [16u32])]
    pub log_n: Vec<u32>,
    /// Proofs per prover and size (the medians are printed).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Reference provers to compare against: "bellperson" (later also "supraseal", "cpu").
    #[arg(long, value_delimiter = ',', default_values_t = ["bellperson".to_string()])]
    pub compare: Vec<String>,
    /// Seed of the synthetic circuit, its parameters and the proofs' r, s.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs the comparison for each size and prints one JSON line per size on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.backend.as_str() {
        "cpu" => {}
        "gpu" => {
            bail!("bench prove --backend gpu: the GPU backend is not wired into this benchmark yet")
        }
        other => bail!("bench prove: unknown backend {other:?} (expected cpu or gpu)"),
    }
    for reference in &args.compare {
        if reference != "bellperson" {
            bail!("bench prove: cannot compare against {reference:?} yet (supported: bellperson)");
        }
    }
    if args.reps == 0 {
        bail!("bench prove: --reps must be at least 1");
    }
    let backend = CpuBackend::new();
    for &lg_n in &args.log_n {
        let opts = CompareOptions {
            lg_n,
            reps: args.reps,
            seed: args.seed,
        };
        let cmp = compare_with_bellperson(&opts, &backend)
            .with_context(|| format!("bench prove at 2^{lg_n}"))?;
        let line = serde_json::json!({
            "op": "prove",
            "log_n": lg_n,
            "backend": args.backend,
            "n_constraints": cmp.n_constraints,
            "cuzk_ms_median": round1(cmp.cuzk_ms_median()),
            "bellperson_ms_median": round1(cmp.bellperson_ms_median()),
            "speedup": (cmp.speedup() * 1000.0).round() / 1000.0,
            "verified": cmp.verified,
            "reps": args.reps,
            "threads": std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            "cuzk_stages_ms": cmp.cuzk_stage_ms.iter().map(|(k, v)| (k.clone(), round1(*v))).collect::<serde_json::Map<_, _>>(),
            "paramgen_ms": round1(cmp.paramgen_ms),
        });
        println!("{line}");
    }
    Ok(())
}

fn round1(v: f64) -> serde_json::Value {
    serde_json::Value::from((v * 10.0).round() / 10.0)
}
