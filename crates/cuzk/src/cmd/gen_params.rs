//! `cuzk gen params`: writes bellperson-format parameters from toxic waste drawn here:
//! **test parameters only**. Two forms: a synthetic circuit (`--log-n K --out FILE`, toxic
//! waste printed), or a Filecoin kind (`--kind porep --sector-size 2KiB [--dir D]`, the
//! standard `v28-*` `.params` and `.vk` names in D). Test files under production names
//! must not land where a production daemon or filecoin-proofs reads its parameters, so the
//! `--kind` form refuses the production directory unless `--i-know-these-are-test-params`
//! is given. The query points are computed on the first GPU when there is one (`--cpu`
//! forces the CPU). `--no-write` generates a synthetic circuit's parameters and drops
//! them (a benchmark of the generation alone). Both forms print the wall time of each
//! stage (recording the structure, Lagrange, QAP, each fixed-base product, save). A
//! circuit given as parts (PoRep, PoSt, a synthetic circuit with `--parts` ≥ 2) is recorded
//! from its prefix and one part; `--whole` records it whole on one thread (the older
//! path, to compare: the files are byte-identical for one `--toxic-seed`). The generator
//! is `cuzk_groth16::paramgen`; this module parses flags and prints.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use cuzk_filecoin::testgen::ParamsOptions;
use cuzk_filecoin::{FilecoinKind, SectorSize};
use cuzk_groth16::paramgen::{self, FixedBaseMul};
use rand::SeedableRng;

use super::prove::CircuitArgs;

/// Flags of `cuzk gen params`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// The circuit (the same flags must be given to `cuzk prove`).
    #[command(flatten)]
    pub circuit: CircuitArgs,
    /// Output file (synthetic circuits).
    #[arg(long, required_unless_present_any = ["kind", "no_write"], conflicts_with_all = ["kind", "no_write"])]
    pub out: Option<PathBuf>,
    /// Synthetic circuits: generate, print the stage times and write nothing (times the
    /// generation alone; the parameters are dropped).
    #[arg(long, conflicts_with = "kind")]
    pub no_write: bool,
    /// A Filecoin proof kind instead of a synthetic circuit: porep, window-post,
    /// winning-post or snap.
    #[arg(long, requires = "sector_size", conflicts_with = "log_n")]
    pub kind: Option<String>,
    /// Sector size of `--kind`: 2KiB, 8MiB, 512MiB, 32GiB or 64GiB.
    #[arg(long, requires = "kind")]
    pub sector_size: Option<String>,
    /// Directory for `--kind` files; the production directory ($FIL_PROOFS_PARAMETER_CACHE,
    /// /var/tmp/filecoin-proof-parameters, the default) only with
    /// --i-know-these-are-test-params.
    #[arg(long, requires = "kind")]
    pub dir: Option<PathBuf>,
    /// Write test parameters into the production parameter directory anyway.
    #[arg(long, requires = "kind")]
    pub i_know_these_are_test_params: bool,
    /// Compute the query points on the CPU even when a GPU is present.
    #[arg(long)]
    pub cpu: bool,
    /// Seed for the toxic waste, for reproducible files (default: fresh OS randomness).
    #[arg(long)]
    pub toxic_seed: Option<u64>,
    /// Record a circuit given as parts whole, on one thread, instead of from its prefix
    /// and one part (the older path; same parameters, to compare).
    #[arg(long)]
    pub whole: bool,
    /// Window width of the fixed-base multiplication (default: chosen from the size).
    #[arg(long)]
    pub window_bits: Option<u32>,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let fbm = super::devices::fixed_base_on(&super::devices::gpus(args.cpu), args.window_bits);
    if let Some(kind) = &args.kind {
        return run_filecoin(&args, kind, fbm.as_ref());
    }
    let out = match args.no_write {
        true => None,
        false => Some(args.out.clone().context("--out FILE is required")?),
    };
    let lg = args.circuit.log_n()?;
    let circuit = args.circuit.synthetic(lg)?;
    let toxic = match args.toxic_seed {
        Some(seed) => {
            paramgen::ToxicWaste::random(&mut rand_chacha::ChaCha20Rng::seed_from_u64(seed))
        }
        None => paramgen::ToxicWaste::random(&mut rand::thread_rng()),
    };
    // Each query is written while the next is computed; "save" is the rest.
    let from_parts = match args.whole {
        true => None,
        false => paramgen::generate_parts(&circuit, &toxic, fbm.as_ref(), out.as_deref())
            .context("generating parameters from the circuit's parts")?,
    };
    let g = match from_parts {
        Some(g) => g,
        // The synthetic circuit fills exactly 2^lg rows: the QAP evaluation and the h
        // query run beside its synthesis.
        None => {
            paramgen::generate_in_domain(circuit, &toxic, fbm.as_ref(), Some(lg), out.as_deref())
                .context("generating parameters")?
        }
    };

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
    println!("fixed-base multiplication on {}", fbm.name());
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
    let generation = print_stages(&g.stages, &g.fixed_base_stages);
    println!("{:<10} {:>12.3}", "total", generation.as_secs_f64() * 1e3);
    match &out {
        Some(out) => {
            let size = std::fs::metadata(out).map(|m| m.len()).unwrap_or(0);
            println!("wrote {} ({size} bytes)", out.display());
        }
        None => println!("--no-write: nothing written; generation is the whole figure"),
    }
    Ok(())
}

/// Prints one line per stage with the fixed-base implementation's breakdown under the
/// stages that ran products; returns the stages' sum.
fn print_stages(
    stages: &[(&'static str, Duration)],
    fixed_base: &[(&'static str, Vec<(&'static str, Duration)>)],
) -> Duration {
    println!("{:<10} {:>12}", "stage", "wall_ms");
    let mut sum = Duration::ZERO;
    for (name, wall) in stages {
        println!("{name:<10} {:>12.3}", wall.as_secs_f64() * 1e3);
        sum += *wall;
        let sub = fixed_base.iter().filter(|(s, _)| s == name);
        for (part, d) in sub.flat_map(|(_, sub)| sub) {
            println!("  {part:<14} {:>10.3}", d.as_secs_f64() * 1e3);
        }
    }
    sum
}

/// `--kind K --sector-size S`: the kind's standard files, skipped when already present.
fn run_filecoin(args: &Args, kind: &str, fbm: &dyn FixedBaseMul) -> anyhow::Result<()> {
    let kind = FilecoinKind::from_cli_name(kind).map_err(anyhow::Error::msg)?;
    let size = args
        .sector_size
        .as_deref()
        .context("--sector-size is required with --kind")?;
    let size = SectorSize::parse(size).map_err(anyhow::Error::msg)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(cuzk_filecoin::default_param_dir);
    if let Some(production) = production_dir(&dir) {
        if !args.i_know_these_are_test_params {
            anyhow::bail!(
                "refusing to write test parameters (local toxic waste) under production v28-* \
                 names into the production parameter directory {}: pass --dir with another \
                 directory, or --i-know-these-are-test-params",
                production.display()
            );
        }
    }
    println!("WARNING: test-only parameters (local toxic waste); never use them on a network");
    let t = std::time::Instant::now();
    let opts = ParamsOptions {
        toxic_seed: args.toxic_seed,
        whole: args.whole,
    };
    let report = cuzk_filecoin::testgen::gen_params_report(kind, size, &dir, fbm, &opts)
        .with_context(|| format!("generating {kind} {size} parameters in {}", dir.display()))?;
    let path = report.path;
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    let (from_parts, n_rows) = match &report.made {
        Some(made) => {
            println!("fixed-base multiplication on {}", fbm.name());
            let total = print_stages(&made.stages, &made.fixed_base_stages);
            println!("{:<10} {:>12.3}", "total", total.as_secs_f64() * 1e3);
            (Some(made.from_parts), Some(made.n_rows))
        }
        None => {
            println!("{} is already there: nothing generated", path.display());
            (None, None)
        }
    };
    println!(
        "{}",
        serde_json::json!({
            "op": "gen_params",
            "kind": kind.to_string(),
            "sector_size": size.to_string(),
            "circuit_id": cuzk_filecoin::circuit_id(kind, size),
            "fixed_base": fbm.name(),
            "from_parts": from_parts,
            "n_rows": n_rows,
            "path": path.display().to_string(),
            "bytes": bytes,
            "wall_ms": t.elapsed().as_millis() as u64,
        })
    );
    Ok(())
}

/// The production parameter directory that `dir` is, if it is one: the default of
/// filecoin-proofs ($FIL_PROOFS_PARAMETER_CACHE, else /var/tmp/filecoin-proof-parameters)
/// or /var/tmp/filecoin-proof-parameters itself, compared after resolving links.
fn production_dir(dir: &std::path::Path) -> Option<PathBuf> {
    let resolve = |p: &std::path::Path| {
        std::fs::canonicalize(p)
            .or_else(|_| std::path::absolute(p))
            .unwrap_or_else(|_| p.to_path_buf())
    };
    let target = resolve(dir);
    [
        cuzk_filecoin::default_param_dir(),
        PathBuf::from("/var/tmp/filecoin-proof-parameters"),
    ]
    .into_iter()
    .find(|p| resolve(p) == target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("gen-params").chain(argv.iter().copied()))
            .map(|c| c.args)
    }

    /// `--no-write` generates without `--out` and writes nothing; with `--out` or `--kind`
    /// it is refused, and without either a synthetic circuit still needs `--out`.
    #[test]
    fn no_write_generates_without_a_file() {
        let args = parse(&["--log-n", "8", "--seed", "2", "--no-write", "--cpu"]).expect("parses");
        assert!(args.no_write && args.out.is_none());
        run(args).expect("generates");
        assert!(parse(&["--log-n", "8", "--no-write", "--out", "/tmp/x"]).is_err());
        assert!(parse(&["--no-write", "--kind", "porep", "--sector-size", "2KiB"]).is_err());
        assert!(parse(&["--log-n", "8"]).is_err());
    }
}
