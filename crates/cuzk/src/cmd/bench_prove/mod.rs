//! `cuzk bench prove`: whole-partition proving, a cuzk backend against reference provers,
//! one JSON line per size. Two forms:
//! - `--backend cpu --compare bellperson` (the default): `cuzk_groth16::compare`, cuzk's
//!   CPU backend against bellperson 0.27's native `create_proof` in the same process.
//! - `--backend gpu|cpu --compare supraseal,cpu,...`: the head-to-head in [`head_to_head`]:
//!   one parameters file per size (made once, on the GPU when there is one), the same
//!   circuit and witness, the same r and s per repetition for every prover, provers
//!   alternating in rotating order, every proof verified with bellperson's verifier and
//!   the proofs of one repetition required to be byte-identical. SupraSeal C2 runs in its
//!   own process (`cuzk-supraseal-bench`, built apart by bench/supraseal/build.sh: its
//!   cargo feature changes bellperson's API under filecoin-proofs) over a line protocol.
//!   Its end-to-end time is bellperson's `create_proof_batch`; its prove time is SupraSeal's
//!   C2 alone on an assignment synthesized beforehand (e2e minus a separately timed
//!   synthesis was off by up to 2 s between runs), whose proof must equal the first.
//!
//! cuzk's synthesis in the head-to-head is the daemon's: the circuit shape is recorded once
//! per size (the first call of the shape cache, timed on its own as `record_ms`), and every
//! proof's synthesis is then the steady state of that cache: witness-only, part by part on
//! the rayon pool when the circuit comes in parts (`--parts 18` for a PoRep partition's
//! layout), then the sparse products. Plain synthesis (`cuzk_groth16::synthesize`) runs
//! too, each repetition, and must give the same assignment; its time and the end-to-end
//! figures with it are reported beside (`plain_synthesis_ms_median`,
//! `<name>_plain_ms_median`, `e2e_plain_speedup_vs_<name>`), so nothing is hidden.
//!
//! The head-to-head reports the end-to-end ratio (steady-state synthesis included: what a
//! user of the daemon sees) first and the prove-only ratio second: `e2e_speedup_vs_<name>`
//! then `prove_only_speedup_vs_<name>` in the JSON line, and one summary line per
//! reference on stderr in that order.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{bail, Context};
use cuzk_groth16::compare::{compare_with_bellperson, CompareOptions};
use cuzk_groth16::stats::median;
use cuzk_groth16::synthetic::SyntheticCircuit;
use cuzk_groth16::{Backend, CpuBackend, Srs, SrsOptions};
use ff::Field;
use rand::SeedableRng;

use super::prove::ShapeArgs;
use super::{ratio, round1, threads};
use supraseal::{supraseal_bin, Supraseal};
use synthesis::Synthesis;

mod supraseal;
mod synthesis;

/// Flags of `cuzk bench prove`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Backend under test: "cpu" or "gpu".
    #[arg(long, default_value = "cpu")]
    pub backend: String,
    /// log2 of the circuit size (rows of the domain); repeat or comma-separate for several.
    #[arg(long = "log-n", value_delimiter = ',', default_values_t = [16u32])]
    pub log_n: Vec<u32>,
    /// Timed proofs per prover and size, after one untimed warm-up each (medians printed).
    #[arg(long, default_value_t = 3)]
    pub reps: usize,
    /// Reference provers: "bellperson" (with --backend cpu only), or any of "supraseal",
    /// "cpu", "gpu".
    #[arg(long, value_delimiter = ',', default_values_t = ["bellperson".to_string()])]
    pub compare: Vec<String>,
    /// Seed of the synthetic circuit, its parameters and the proofs' r, s.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Head-to-head: where the per-size parameters files live (made when missing).
    #[arg(long, default_value = "bench-params")]
    pub params_dir: PathBuf,
    /// Head-to-head: the SupraSeal baseline binary (default: `cuzk-supraseal-bench` next
    /// to this binary, then on PATH).
    #[arg(long)]
    pub supraseal_bin: Option<PathBuf>,
    /// The synthetic circuit's shape (head-to-head only): the default is PoRep-like
    /// (90% bit values, B holding a quarter of aux); `--bit-fraction 0` makes every aux
    /// value a full field element.
    #[command(flatten)]
    pub shape: ShapeArgs,
    /// Head-to-head: also prove with a, b, c left to the backend, as the daemon does where
    /// the recorded matrices fit the card (`<backend>_deferred`): its synthesis ends at the
    /// witness and the backend evaluates a, b, c (the GPU from the matrices it loaded
    /// ahead). Two GPU backends then share the card, each with half its free memory.
    #[arg(long)]
    pub deferred: bool,
}

/// Runs the comparison for each size and prints one JSON line per size on stdout.
pub fn run(args: Args) -> anyhow::Result<()> {
    if !matches!(args.backend.as_str(), "cpu" | "gpu") {
        bail!(
            "bench prove: unknown backend {:?} (expected cpu or gpu)",
            args.backend
        );
    }
    if args.reps == 0 {
        bail!("bench prove: --reps must be at least 1");
    }
    if args.compare.iter().any(|c| c != "bellperson") {
        if let Some(c) = args
            .compare
            .iter()
            .find(|c| !matches!(c.as_str(), "supraseal" | "cpu" | "gpu"))
        {
            bail!("bench prove: cannot compare against {c:?} here (supported: supraseal, cpu, gpu; bellperson alone with --backend cpu)");
        }
        return head_to_head(&args);
    }
    if args.shape.is_set() || args.deferred {
        bail!("bench prove: the shape flags (--a-density, --b-density, --bit-fraction, --inputs, --parts) and --deferred apply to the head-to-head (--compare supraseal,cpu,gpu)");
    }
    if args.backend != "cpu" {
        bail!("bench prove: --compare bellperson runs with --backend cpu (bellperson has no GPU path in this build); use --compare supraseal,cpu for the GPU");
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
            "threads": threads(),
            "cuzk_stages_ms": cmp.cuzk_stage_ms.iter().map(|(k, v)| (k.clone(), round1(*v))).collect::<serde_json::Map<_, _>>(),
            "paramgen_ms": round1(cmp.paramgen_ms),
        });
        println!("{line}");
    }
    Ok(())
}

/// One prover of the head-to-head.
enum Prover {
    /// A cuzk backend, given the deferred assignment (a, b, c left to it) when `deferred`.
    Cuzk {
        backend: Box<dyn Backend>,
        deferred: bool,
    },
    Supraseal(Supraseal),
}

/// One proof's outcome: the proof, end-to-end ms (synthesis included), and the prover's
/// own breakdown.
struct Run {
    proof: bellperson::groth16::Proof<blstrs::Bls12>,
    ms: f64,
    synth_ms: f64,
    /// The prover's time after synthesis when it measures it directly (SupraSeal's C2 on
    /// a synthesized assignment); otherwise `ms − synth_ms`.
    prove_ms: Option<f64>,
    /// Whether a second proof the prover made from the same r, s (SupraSeal's direct C2)
    /// equals this one.
    consistent: bool,
    stages: Vec<(String, f64)>,
}

/// The per-size parameters file, generated (GPU when present) when missing.
fn bench_params(
    args: &Args,
    lg: u32,
    circuit: SyntheticCircuit,
    gpus: &[std::sync::Arc<cuzk_gpu::Device>],
) -> anyhow::Result<(PathBuf, f64)> {
    // Parameters belong to one structure: a non-default shape gets its own file.
    let tag: String = args
        .shape
        .to_args()
        .chunks(2)
        .map(|kv| format!("-{}{}", kv[0].trim_start_matches("--"), kv[1]))
        .collect();
    let path = args
        .params_dir
        .join(format!("cuzk-synthetic-{:x}-{lg}{tag}.params", args.seed));
    if path.is_file() {
        return Ok((path, 0.0));
    }
    std::fs::create_dir_all(&args.params_dir)
        .with_context(|| format!("creating {}", args.params_dir.display()))?;
    let fbm = super::devices::fixed_base_on(gpus, None);
    let t = Instant::now();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed);
    let tmp = path.with_extension("params.tmp");
    cuzk_groth16::paramgen::generate_to_file(circuit, &mut rng, &tmp, fbm.as_ref())
        .with_context(|| format!("generating 2^{lg} parameters on {}", fbm.name()))?;
    std::fs::rename(&tmp, &path)?;
    let ms = t.elapsed().as_secs_f64() * 1e3;
    eprintln!(
        "generated {} on {} in {:.1} s",
        path.display(),
        fbm.name(),
        ms / 1e3
    );
    Ok((path, ms))
}

/// `--compare supraseal,cpu,...`: see the module docs.
fn head_to_head(args: &Args) -> anyhow::Result<()> {
    let gpus = super::devices::open_gpus();
    let mut names: Vec<String> = vec![args.backend.clone()];
    let deferred_name = format!("{}_deferred", args.backend);
    let two_gpus = args.deferred && args.backend == "gpu";
    if args.deferred {
        names.push(deferred_name.clone());
    }
    for c in &args.compare {
        if !names.contains(c) {
            names.push(c.clone());
        }
    }
    for &lg in &args.log_n {
        let circuit = SyntheticCircuit::with_log_n(lg, args.seed, args.shape.shape())?;
        let (params, paramgen_ms) = bench_params(args, lg, circuit, &gpus)?;
        let t = Instant::now();
        let srs = Srs::load(&params, SrsOptions::default())
            .with_context(|| format!("loading {}", params.display()))?;
        let srs_load_ms = t.elapsed().as_secs_f64() * 1e3;
        let mut provers: Vec<(String, Prover)> = Vec::new();
        for name in &names {
            let p = match name.as_str() {
                "cpu" | "cpu_deferred" => Prover::Cuzk {
                    backend: Box::new(CpuBackend::new()),
                    deferred: name != "cpu",
                },
                "gpu" | "gpu_deferred" => {
                    let dev = gpus
                        .first()
                        .context("--backend/--compare gpu: no usable CUDA device")?;
                    Prover::Cuzk {
                        backend: Box::new(gpu_backend(dev, two_gpus)?),
                        deferred: name != "gpu",
                    }
                }
                "supraseal" => Prover::Supraseal(Supraseal::start(
                    &supraseal_bin(args),
                    &params,
                    lg,
                    &circuit,
                    &args.shape,
                )?),
                other => bail!("unknown prover {other}"),
            };
            provers.push((name.clone(), p));
        }
        // The daemon's path: record the shape once (timed apart), then steady state.
        let synth = Synthesis::record(args, lg, circuit)?;
        eprintln!(
            "2^{lg}: shape recorded once in {:.1} ms ({} bytes, {} parts)",
            synth.record_ms, synth.recorded_bytes, synth.parts
        );
        // As the engine's preload: what a deferred prover's backend loads from the recorded
        // shape (the GPU's matrices) is loaded before the first prove.
        let mut matrices_bytes = 0;
        if args.deferred {
            let r1cs = synth
                .synth
                .recorded(&synth.id)
                .context("the shape was not kept")?;
            for (_, p) in &provers {
                if let Prover::Cuzk {
                    backend,
                    deferred: true,
                } = p
                {
                    matrices_bytes += backend.preload_matrices(&srs, &r1cs)?;
                }
            }
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(args.seed ^ 0x5eed);
        // Per prover: end to end, prove only, end to end with plain synthesis.
        let mut times: BTreeMap<String, Vec<[f64; 3]>> = BTreeMap::new();
        let (mut steady_ms, mut plain_ms) = (Vec::new(), Vec::new());
        let (mut witness_ms, mut products_ms) = (Vec::new(), Vec::new());
        let mut stages: BTreeMap<String, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
        let mut identical = true;
        // Repetition 0 is the warm-up (kernel loads, SRS upload, page cache): not timed.
        for rep in 0..=args.reps {
            let r = blstrs::Scalar::random(&mut rng);
            let s = blstrs::Scalar::random(&mut rng);
            let mut first: Option<bellperson::groth16::Proof<blstrs::Bls12>> = None;
            // One synthesis per repetition serves every cuzk prover (same circuit and
            // witness); each one's end-to-end time includes it.
            // Plain synthesis only in the timed repetitions (seconds at 2^24).
            let inst = synth.run(circuit, rep > 0, args.deferred)?;
            let (asg, synth_ms, plain) = (&inst.evaluated, inst.synth_ms, inst.plain_ms);
            if rep > 0 {
                steady_ms.push(synth_ms);
                plain_ms.push(plain);
                if let Some(d) = &inst.deferred {
                    witness_ms.push(d.witness_ms);
                    products_ms.push(d.products_ms);
                }
            }
            let inputs = &asg.input_assignment[1..];
            let n = provers.len();
            for k in 0..n {
                let (name, prover) = &mut provers[(k + rep) % n];
                // The CPU backend (either prover of it) has nothing to warm up: it skips
                // repetition 0.
                if rep == 0 && name.starts_with("cpu") {
                    continue;
                }
                let run = match prover {
                    Prover::Cuzk { backend, deferred } => match (&inst.deferred, *deferred) {
                        (Some(d), true) => {
                            cuzk_run(&d.asg, d.witness_ms, &srs, r, s, backend.as_ref())?
                        }
                        _ => cuzk_run(asg, synth_ms, &srs, r, s, backend.as_ref())?,
                    },
                    Prover::Supraseal(sp) => sp.prove(r, s)?,
                };
                if !cuzk_groth16::verify(&srs.vk, &run.proof, inputs)? {
                    bail!("2^{lg} rep {rep}: the {name} proof does not verify");
                }
                match &first {
                    None => first = Some(run.proof.clone()),
                    Some(f) => identical &= *f == run.proof,
                }
                identical &= run.consistent;
                if rep > 0 {
                    let prove_ms = run.prove_ms.unwrap_or(run.ms - run.synth_ms);
                    // SupraSeal has one synthesis (bellperson's); a cuzk prover's plain
                    // end to end swaps the steady synthesis for the plain one.
                    let plain_e2e = match prover {
                        Prover::Cuzk { .. } => run.ms - run.synth_ms + plain,
                        Prover::Supraseal(_) => run.ms,
                    };
                    times
                        .entry(name.clone())
                        .or_default()
                        .push([run.ms, prove_ms, plain_e2e]);
                    let st = stages.entry(name.clone()).or_default();
                    st.entry("synthesis".into()).or_default().push(run.synth_ms);
                    for (k, v) in run.stages {
                        st.entry(k).or_default().push(v);
                    }
                }
            }
        }
        let med = |name: &str, i: usize| {
            let v: Vec<f64> = times
                .get(name)
                .map(|v| v.iter().map(|t| t[i]).collect())
                .unwrap_or_default();
            median(&v)
        };
        let mut line = serde_json::json!({
            "op": "prove_head_to_head",
            "log_n": lg,
            "n_constraints": circuit.n_constraints,
            "shape": {
                "a_density": circuit.shape.a_aux_fraction,
                "b_density": circuit.shape.b_aux_fraction,
                "bit_fraction": circuit.shape.bit_fraction,
                "n_inputs": circuit.n_inputs,
            },
            "backend": args.backend,
            "reps": args.reps,
            "verified": true,
            "identical_proofs": identical,
            "threads": threads(),
            "gpu": gpus.first().map(|d| d.name().to_string()),
            "paramgen_ms": round1(paramgen_ms),
            "srs_load_ms": round1(srs_load_ms),
            "parts": synth.parts,
            "synthesis_path": "recorded+parts",
            "record_ms": round1(synth.record_ms),
            "recorded_bytes": synth.recorded_bytes,
            "synthesis_ms_median": round1(median(&steady_ms)),
            "deferred": args.deferred,
            "plain_synthesis_ms_median": round1(median(&plain_ms)),
            "equal_assignments": true,
        });
        for (name, prover) in &provers {
            line[format!("{name}_ms_median")] = round1(med(name, 0));
            line[format!("{name}_prove_ms_median")] = round1(med(name, 1));
            match prover {
                Prover::Supraseal(sp) => line["supraseal_load_ms"] = round1(sp.load_ms),
                Prover::Cuzk { backend, .. } => {
                    line[format!("{name}_plain_ms_median")] = round1(med(name, 2));
                    line[format!("{name}_mode")] = backend.proving_mode().into();
                }
            }
            if let Some(st) = stages.get(name) {
                line[format!("{name}_stages_ms")] = st
                    .iter()
                    .map(|(k, v)| (k.clone(), round1(median(v))))
                    .collect::<serde_json::Map<_, _>>()
                    .into();
            }
        }
        let me = &args.backend;
        let synth_of = |name: &str| {
            stages
                .get(name)
                .and_then(|st| st.get("synthesis"))
                .map_or(0.0, |v| median(v))
        };
        let refs = provers.iter().skip(1).filter(|(n, _)| *n != deferred_name);
        for (name, _) in refs.clone() {
            line[format!("e2e_speedup_vs_{name}")] = ratio(med(name, 0), med(me, 0));
            line[format!("prove_only_speedup_vs_{name}")] = ratio(med(name, 1), med(me, 1));
            line[format!("e2e_plain_speedup_vs_{name}")] = ratio(med(name, 2), med(me, 2));
            // End to end first: it is what a user sees; prove-only second.
            eprintln!(
                "2^{lg} {me} vs {name}: end to end (synthesis included, recorded shape{}) \
                 {:.1} vs {:.1} ms = {}x (synthesis {:.1} vs {:.1} ms); prove only {:.1} vs \
                 {:.1} ms = {}x; end to end with plain synthesis ({:.1} ms) {:.1} vs {:.1} ms = \
                 {}x; one-time recording {:.1} ms",
                if synth.parts > 1 {
                    ", parts in parallel"
                } else {
                    ""
                },
                med(me, 0),
                med(name, 0),
                ratio(med(name, 0), med(me, 0)),
                synth_of(me),
                synth_of(name),
                med(me, 1),
                med(name, 1),
                ratio(med(name, 1), med(me, 1)),
                median(&plain_ms),
                med(me, 2),
                med(name, 2),
                ratio(med(name, 2), med(me, 2)),
                synth.record_ms,
            );
        }
        if args.deferred {
            let d = &deferred_name;
            line["witness_ms_median"] = round1(median(&witness_ms));
            line["products_ms_median"] = round1(median(&products_ms));
            line["matrices_device_bytes"] = matrices_bytes.into();
            for (name, _) in refs {
                line[format!("deferred_e2e_speedup_vs_{name}")] = ratio(med(name, 0), med(d, 0));
                line[format!("deferred_prove_only_speedup_vs_{name}")] =
                    ratio(med(name, 1), med(d, 1));
                eprintln!(
                    "2^{lg} {d} vs {name}: end to end (the witness only on the host, a, b, c \
                     by the backend) {:.1} vs {:.1} ms = {}x (witness {:.1} ms, host products \
                     {:.1} ms left out); prove with a, b, c {:.1} vs {:.1} ms = {}x",
                    med(d, 0),
                    med(name, 0),
                    ratio(med(name, 0), med(d, 0)),
                    median(&witness_ms),
                    median(&products_ms),
                    med(d, 1),
                    med(name, 1),
                    ratio(med(name, 1), med(d, 1)),
                );
            }
        }
        println!("{line}");
    }
    Ok(())
}

/// A GPU backend on `dev`; with `half`, its VRAM budget is half the card's free memory (two
/// backends share the card in the head-to-head's `--deferred`).
fn gpu_backend(
    dev: &std::sync::Arc<cuzk_gpu::Device>,
    half: bool,
) -> anyhow::Result<cuzk_gpu::GpuBackend> {
    let mut cfg = cuzk_gpu::GpuBackendConfig::default();
    if half {
        let (free, _) = dev.mem_info()?;
        cfg.vram_budget_bytes = Some(free.saturating_sub(cfg.vram_reserve_bytes) / 2);
    }
    Ok(cuzk_gpu::GpuBackend::with_config(dev.clone(), cfg))
}

/// One cuzk prove of `asg` with the given r, s; its time plus the synthesis time.
fn cuzk_run(
    asg: &cuzk_groth16::Assignment,
    synth_ms: f64,
    srs: &Srs,
    r: blstrs::Scalar,
    s: blstrs::Scalar,
    backend: &dyn Backend,
) -> anyhow::Result<Run> {
    let t = Instant::now();
    let (proof, report) = cuzk_groth16::prove(asg, srs, r, s, backend)?;
    let ms = synth_ms + t.elapsed().as_secs_f64() * 1e3;
    Ok(Run {
        proof,
        ms,
        synth_ms,
        prove_ms: None,
        consistent: true,
        stages: report
            .stages
            .iter()
            .map(|s| (s.stage.to_string(), s.wall.as_secs_f64() * 1e3))
            .collect(),
    })
}
