//! `cuzk prove`: synthesize, prove and verify one circuit in-process (no daemon), write
//! the proof, verifying key and public inputs, and print a stage table. `--demo` builds a
//! small synthetic circuit and its parameters in the cache directory first. Also owns the
//! synthetic-circuit flags that `cuzk gen params` shares.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{Backend, CpuBackend, Srs, SrsOptions};

/// The circuits `prove` and `gen params` know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CircuitKind {
    /// A PoRep-shaped synthetic circuit (`cuzk_groth16::synthetic`).
    Synthetic,
}

/// Which circuit, shared by `cuzk prove` and `cuzk gen params` (the parameters belong to
/// one circuit, `--circuit`, `--log-n`, `--seed` and the shape flags included).
#[derive(clap::Args, Clone, Debug)]
pub struct CircuitArgs {
    /// Circuit family.
    #[arg(long, value_enum, default_value = "synthetic")]
    pub circuit: CircuitKind,
    /// log2 of the evaluation domain: constraints plus public inputs fill exactly 2^K rows.
    #[arg(long = "log-n", value_name = "K")]
    pub log_n: Option<u32>,
    /// Seed of the circuit's structure (parameters are made for one seed).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Densities and value mix.
    #[command(flatten)]
    pub shape: ShapeArgs,
}

/// The synthetic circuit's shape flags (`SyntheticShape`), shared by `cuzk prove`, `cuzk gen
/// params` and `cuzk bench prove`; each unset flag keeps the PoRep-like default.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ShapeArgs {
    /// Fraction of aux variables in A (default: PoRep's 0.997).
    #[arg(long)]
    pub a_density: Option<f64>,
    /// Fraction of aux variables in B (default: PoRep's 0.25).
    #[arg(long)]
    pub b_density: Option<f64>,
    /// Fraction of aux values that are bits (default 0.9).
    #[arg(long)]
    pub bit_fraction: Option<f64>,
    /// Public inputs including ONE (default: scales with the size, 328 from 2^19).
    #[arg(long)]
    pub inputs: Option<usize>,
    /// Independent sub-circuits after a short prefix, as a PoRep partition's 18 challenges
    /// (default 1: one sequential circuit); a recorded shape computes their witness in
    /// parallel.
    #[arg(long)]
    pub parts: Option<usize>,
}

impl ShapeArgs {
    /// The shape these flags describe.
    pub fn shape(&self) -> SyntheticShape {
        let d = SyntheticShape::default();
        SyntheticShape {
            a_aux_fraction: self.a_density.unwrap_or(d.a_aux_fraction),
            b_aux_fraction: self.b_density.unwrap_or(d.b_aux_fraction),
            bit_fraction: self.bit_fraction.unwrap_or(d.bit_fraction),
            n_inputs: self.inputs,
            parts: self.parts.unwrap_or(d.parts),
            ..d
        }
    }

    /// Whether any flag is set.
    pub fn is_set(&self) -> bool {
        !self.to_args().is_empty()
    }

    /// The flags that are set, as command-line arguments (to hand the same circuit to
    /// another program, e.g. the SupraSeal baseline).
    pub fn to_args(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut push = |flag: &str, val: Option<String>| {
            if let Some(val) = val {
                v.push(flag.to_string());
                v.push(val);
            }
        };
        push("--a-density", self.a_density.map(|x| x.to_string()));
        push("--b-density", self.b_density.map(|x| x.to_string()));
        push("--bit-fraction", self.bit_fraction.map(|x| x.to_string()));
        push("--inputs", self.inputs.map(|x| x.to_string()));
        push("--parts", self.parts.map(|x| x.to_string()));
        v
    }
}

impl CircuitArgs {
    /// The synthetic circuit these flags describe, at 2^`lg` rows.
    pub fn synthetic(&self, lg: u32) -> anyhow::Result<SyntheticCircuit> {
        let shape = self.shape.shape();
        let CircuitKind::Synthetic = self.circuit;
        SyntheticCircuit::with_log_n(lg, self.seed, shape).context("synthetic circuit")
    }

    /// `--log-n`, which every circuit needs.
    pub fn log_n(&self) -> anyhow::Result<u32> {
        self.log_n.context("--log-n K is required (or use --demo)")
    }
}

/// Where the MSMs run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// The CPU backend (rayon + blst).
    Cpu,
    /// The CUDA backend.
    Gpu,
}

/// Flags of `cuzk prove`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Prove a small synthetic circuit with parameters cached in $XDG_CACHE_HOME/cuzk
    /// (made on first use): no other flag needed, no GPU, no network.
    #[arg(long, conflicts_with_all = ["params", "log_n", "a_density", "b_density", "bit_fraction", "inputs"])]
    pub demo: bool,
    /// The circuit.
    #[command(flatten)]
    pub circuit: CircuitArgs,
    /// Parameters file (bellperson format) made for this circuit, e.g. by `cuzk gen params`
    /// (needed unless `--demo` or `--kind`; `run` says so, naming all three).
    #[arg(long)]
    pub params: Option<PathBuf>,
    /// Seed of the witness (default: the structure seed); any value proves with the same
    /// parameters.
    #[arg(long)]
    pub witness_seed: Option<u64>,
    /// Backend for NTT and MSMs.
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: BackendKind,
    /// Subgroup-check every parameter point on load (slow on large files).
    #[arg(long)]
    pub check_points: bool,
    /// Write the 192-byte proof (bellperson's `Proof::write` encoding) here.
    #[arg(long)]
    pub proof_out: Option<PathBuf>,
    /// Write the verifying key (bellperson's `VerifyingKey::write` layout) here.
    #[arg(long)]
    pub vk_out: Option<PathBuf>,
    /// Write the public inputs (without ONE), each 32 little-endian bytes, here.
    #[arg(long)]
    pub inputs_out: Option<PathBuf>,
    /// Prove a Filecoin kind instead (porep, window-post, winning-post, snap) from the
    /// payloads of a test sector made by `cuzk gen sector` (`--sector DIR`).
    #[arg(long, requires = "sector", conflicts_with_all = ["demo", "params", "log_n"])]
    pub kind: Option<String>,
    /// The `cuzk gen sector` folder whose payloads `--kind` proves.
    #[arg(long, requires = "kind")]
    pub sector: Option<PathBuf>,
    /// Parameter directory for `--kind` (default: $FIL_PROOFS_PARAMETER_CACHE or
    /// /var/tmp/filecoin-proof-parameters).
    #[arg(long, requires = "kind")]
    pub param_dir: Option<PathBuf>,
}

/// The demo's size: proves in about a second on two cores.
const DEMO_LOG_N: u32 = 12;

/// What `cuzk prove` says when it is given nothing to prove.
pub const NOTHING_TO_PROVE: &str = "cuzk prove needs something to prove: \
     --demo (a small synthetic circuit, parameters made on first use), \
     --kind porep|window-post|winning-post|snap --sector DIR (a Filecoin proof of a test sector), \
     or --log-n K --params FILE (the synthetic circuit with parameters from `cuzk gen params`)";

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !args.demo && args.kind.is_none() && args.params.is_none() {
        bail!(NOTHING_TO_PROVE);
    }
    // Open the device first: a missing GPU fails before any work is done.
    let backend: Box<dyn Backend> = match args.backend {
        BackendKind::Cpu => Box::new(CpuBackend::new()),
        BackendKind::Gpu => {
            let dev = super::devices::open_gpus().into_iter().next().context(
                "--backend gpu: no usable CUDA device (see the log above); use --backend cpu",
            )?;
            Box::new(cuzk_gpu::GpuBackend::new(dev))
        }
    };
    if let (Some(kind), Some(sector)) = (&args.kind, &args.sector) {
        let dir = args
            .param_dir
            .clone()
            .unwrap_or_else(cuzk_filecoin::default_param_dir);
        return super::prove_filecoin::run(kind, sector, &dir, backend.as_ref());
    }
    let mut stages: Vec<(String, Duration)> = Vec::new();
    let lg = if args.demo {
        DEMO_LOG_N
    } else {
        args.circuit.log_n()?
    };
    let circuit = args.circuit.synthetic(lg)?;
    let circuit = circuit.with_witness_seed(args.witness_seed.unwrap_or(circuit.seed));
    let params_path = match (&args.params, args.demo) {
        (Some(p), _) => p.clone(),
        (None, _) => demo_params(circuit, &mut stages)?,
    };

    let t = Instant::now();
    let opts = SrsOptions {
        check_points: args.check_points,
    };
    // The reader's errors name the file: the context does not repeat it.
    let srs = Srs::load(&params_path, opts).context("loading the parameters")?;
    stages.push(("srs_load".into(), t.elapsed()));

    let t = Instant::now();
    let asg = cuzk_groth16::synthesize(circuit).context("synthesizing the circuit")?;
    stages.push(("synthesis".into(), t.elapsed()));

    let (proof, report) =
        cuzk_groth16::prove_random(&asg, &srs, &*backend, &mut rand::thread_rng())
            .with_context(|| format!("proving with parameters {}", params_path.display()))?;
    stages.extend(report.stages.iter().map(|s| (s.stage.to_string(), s.wall)));

    let t = Instant::now();
    let inputs = &asg.input_assignment[1..];
    let verified = cuzk_groth16::verify(&srs.vk, &proof, inputs).context("verifying")?;
    stages.push(("verify".into(), t.elapsed()));

    print_table(&circuit, &asg, &report.backend, &stages);
    if !verified {
        bail!(
            "the proof did not verify against {}: wrong parameters for this circuit?",
            params_path.display()
        );
    }
    println!(
        "proof verified ({} public inputs, domain 2^{lg})",
        inputs.len()
    );
    if let Some(path) = &args.proof_out {
        let mut bytes = Vec::with_capacity(192);
        proof.write(&mut bytes).context("encoding the proof")?;
        write_file(path, &bytes, "proof")?;
    }
    if let Some(path) = &args.vk_out {
        let mut bytes = Vec::new();
        srs.vk
            .write(&mut bytes)
            .context("encoding the verifying key")?;
        write_file(path, &bytes, "verifying key")?;
    }
    if let Some(path) = &args.inputs_out {
        let bytes: Vec<u8> = inputs.iter().flat_map(|x| x.to_bytes_le()).collect();
        write_file(path, &bytes, "public inputs")?;
    }
    Ok(())
}

/// The demo's parameters: reused from the cache directory, or made and saved there.
fn demo_params(
    circuit: SyntheticCircuit,
    stages: &mut Vec<(String, Duration)>,
) -> anyhow::Result<PathBuf> {
    let dir = cache_dir()?;
    let path = dir.join(format!(
        "demo-synthetic-lg{DEMO_LOG_N}-seed{}.params",
        circuit.seed
    ));
    if path.exists() {
        println!("demo: reusing parameters {}", path.display());
        return Ok(path);
    }
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("creating cache directory {}", dir.display()))?;
    let t = Instant::now();
    let g = cuzk_groth16::paramgen::generate(
        circuit,
        &mut rand::thread_rng(),
        &cuzk_groth16::paramgen::CpuFixedBase::default(),
    )
    .context("generating demo parameters")?;
    g.srs
        .save(&path)
        .with_context(|| format!("saving demo parameters to {}", path.display()))?;
    stages.push(("gen_params".into(), t.elapsed()));
    println!(
        "demo: generated test-only parameters {} (local toxic waste, not for real use)",
        path.display()
    );
    Ok(path)
}

/// `$XDG_CACHE_HOME/cuzk`, else `~/.cache/cuzk`.
fn cache_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("cuzk"));
    }
    let home = std::env::var_os("HOME").filter(|d| !d.is_empty());
    let home =
        home.context("neither XDG_CACHE_HOME nor HOME is set: no cache directory for --demo")?;
    Ok(PathBuf::from(home).join(".cache").join("cuzk"))
}

fn write_file(path: &Path, bytes: &[u8], what: &str) -> anyhow::Result<()> {
    std::fs::write(path, bytes)
        .with_context(|| format!("writing the {what} to {}", path.display()))?;
    println!("wrote {what} ({} bytes) to {}", bytes.len(), path.display());
    Ok(())
}

fn print_table(
    c: &SyntheticCircuit,
    asg: &cuzk_groth16::Assignment,
    backend: &str,
    stages: &[(String, Duration)],
) {
    println!(
        "circuit synthetic seed={} witness_seed={}: {} constraints, {} inputs, {} aux, backend {backend}",
        c.seed,
        c.witness_seed,
        c.n_constraints,
        asg.input_assignment.len(),
        asg.aux_assignment.len()
    );
    println!("{:<14} {:>12}", "stage", "wall_ms");
    let mut total = Duration::ZERO;
    for (name, wall) in stages {
        println!("{name:<14} {:>12.3}", wall.as_secs_f64() * 1e3);
        total += *wall;
    }
    println!("{:<14} {:>12.3}", "total", total.as_secs_f64() * 1e3);
}
