//! `cuzk bench synth`: circuit synthesis, plain (`cuzk_groth16::synthesize`) against the
//! recorded constraint system (`cuzk_groth16::recorded`: record once, then witness plus
//! parallel sparse products), on the synthetic PoRep-shaped circuit; alternating runs with
//! fresh witnesses, medians, the assignments required equal. One JSON line per size. With
//! `--parts N` the circuit is a prefix plus N parts: the shape is also recorded from the
//! prefix and one part, and the witness also computed part by part on the rayon pool.
//! With `--kind K --sector DIR`: the same for partition 0 of a Filecoin test sector's
//! request (`cuzk gen sector`), through the kind's own synthesis; with `--kind K --request
//! FILE --fake`, of a fake request of the true shape at any size (`cuzk gen request`: its
//! proofs cannot verify, but its circuits are the real ones).

use std::time::Instant;

use anyhow::{bail, Context};
use cuzk_groth16::recorded::R1cs;
use cuzk_groth16::stats::median;

use super::{ratio, round1, threads};
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
    /// A Filecoin kind (porep, window-post, winning-post, snap) instead of the synthetic
    /// circuit, from `--sector DIR` or `--request FILE --fake`.
    #[arg(long)]
    pub kind: Option<String>,
    /// The `cuzk gen sector` folder for `--kind`.
    #[arg(long, requires = "kind", conflicts_with = "request")]
    pub sector: Option<std::path::PathBuf>,
    /// A FAKE request file for `--kind` (`cuzk gen request --fake`); needs --fake.
    #[arg(long, requires = "kind")]
    pub request: Option<std::path::PathBuf>,
    /// Accept the fake request of --request (random data: its proofs cannot verify; its
    /// circuits have the real shape, which is what synthesis measures).
    #[arg(long, requires = "request")]
    pub fake: bool,
    /// The synthetic circuit as a prefix plus this many parts (1: one sequential circuit).
    #[arg(long, default_value_t = 1, conflicts_with = "kind")]
    pub parts: usize,
}

/// Runs the comparison for each size.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.reps == 0 {
        bail!("bench synth: --reps must be at least 1");
    }
    if let Some(kind) = &args.kind {
        let kind = cuzk_filecoin::FilecoinKind::from_cli_name(kind).map_err(anyhow::Error::msg)?;
        let (request, fake) = match (&args.sector, &args.request) {
            (Some(dir), None) => (
                cuzk_filecoin::testgen::load_sector(dir)?.request(kind)?,
                false,
            ),
            (None, Some(file)) => {
                let fake = cuzk_filecoin::testgen::FakeRequest::read(file)?;
                if !args.fake {
                    bail!(
                        "{} is a FAKE request (its proofs cannot verify): pass --fake",
                        file.display()
                    );
                }
                if fake.kind != kind {
                    bail!("{} is a {} request, not {kind}", file.display(), fake.kind);
                }
                (fake.request, true)
            }
            _ => bail!("--kind {kind} needs --sector DIR or --request FILE --fake"),
        };
        return run_filecoin(kind, &request, fake, args.reps);
    }
    for &lg in &args.log_n {
        let shape = SyntheticShape {
            parts: args.parts,
            ..SyntheticShape::default()
        };
        let c = SyntheticCircuit::with_log_n(lg, 7, shape)?;
        let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
        let t = Instant::now();
        let r = R1cs::record(c).context("recording")?;
        let record_ms = ms(t);
        // From the prefix and one part, when the circuit comes in parts.
        let t = Instant::now();
        let from_parts = R1cs::record_parts(&c).context("recording from parts")?;
        let record_parts_ms = from_parts.as_ref().map(|_| ms(t));
        let (mut plain, mut recorded, mut parted) = (Vec::new(), Vec::new(), Vec::new());
        // One caller: the gate never holds it back.
        let gate = cuzk_groth16::pool_gate::PoolGate::new();
        for rep in 0..args.reps {
            let inst = c.with_witness_seed(1000 + rep as u64);
            let t = Instant::now();
            let a = cuzk_groth16::synthesize(inst)?;
            plain.push(ms(t));
            let t = Instant::now();
            let b = r.assign(inst)?;
            recorded.push(ms(t));
            if a != b {
                bail!("2^{lg} rep {rep}: the recorded assignment differs from synthesize's");
            }
            drop(b);
            if let Some((rp, layout)) = &from_parts {
                let t = Instant::now();
                let b = rp.assign_parts(layout, &inst, &gate)?;
                parted.push(ms(t));
                if a != b {
                    bail!("2^{lg} rep {rep}: the parts' assignment differs from synthesize's");
                }
            }
        }
        let (p, q) = (median(&plain), median(&recorded));
        let mut line = serde_json::json!({
            "op": "synth",
            "log_n": lg,
            "constraints": r.n_constraints(),
            "parts": c.shape.parts,
            "record_ms": round1(record_ms),
            "recorded_bytes": r.host_bytes(),
            "synthesize_ms_median": round1(p),
            "recorded_ms_median": round1(q),
            "speedup": ratio(p, q),
            "equal": true,
            "reps": args.reps,
            "threads": threads(),
        });
        if let Some(rp_ms) = record_parts_ms {
            line["record_from_parts_ms"] = round1(rp_ms);
            line["recorded_parts_ms_median"] = round1(median(&parted));
            line["speedup_parts"] = ratio(p, median(&parted));
        }
        println!("{line}");
    }
    Ok(())
}

/// Partition 0 of a Filecoin request: plain, then the first recorded call (records the
/// shape), then `reps` recorded calls against `reps` plain ones, and `reps` evaluations of
/// a, b, c from the recording (a deferred assignment's products, the host's part of a
/// prove on a GPU that does not hold the matrices).
fn run_filecoin(
    kind: cuzk_filecoin::FilecoinKind,
    request: &cuzk_groth16::ProofRequest,
    fake: bool,
    reps: usize,
) -> anyhow::Result<()> {
    use cuzk_groth16::{CachedPath, Synthesizer};
    let opts = cuzk_filecoin::ParseOptions { fake_ok: fake };
    let proof =
        cuzk_filecoin::parse_with(kind, request, &cuzk_filecoin::default_param_dir(), opts)?;
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    // One synthesizer with the default budget, a, b, c evaluated on the host; its views
    // take the plain way and the whole-circuit witness on the same recording.
    let synth = Synthesizer::default();
    let (plain_way, whole_way) = (
        synth.with_path(CachedPath::Plain),
        synth.with_path(CachedPath::Whole),
    );
    let t = Instant::now();
    let plain_asg = proof.synthesize(&plain_way, 0)?;
    let mut plain = vec![ms(t)];
    eprintln!("{kind} partition 0: plain synthesis {:.1} ms", plain[0]);
    let t = Instant::now();
    let first = proof.synthesize(&synth, 0)?;
    let first_ms = ms(t);
    eprintln!("{kind} partition 0: first recorded call (records the shape) {first_ms:.1} ms");
    if first != plain_asg {
        bail!("{kind}: the recorded assignment differs from synthesize's");
    }
    let rows = plain_asg.n_rows();
    // At 32 GiB each assignment is ~17 GB: hold no more of them than the next step needs.
    drop((first, plain_asg));
    let (mut recorded, mut whole, mut products) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..reps {
        let t = Instant::now();
        let r = proof.synthesize(&synth, 0)?;
        recorded.push(ms(t));
        eprintln!("{kind} partition 0: recorded call {:.1} ms", ms(t));
        // What the host does for a GPU without the matrices (a small card): a, b, c of a
        // deferred assignment from its recording, in parallel.
        let d = proof.synthesize(&synth.with_defer(true), 0)?;
        let t = Instant::now();
        let abc = d.abc_values()?;
        products.push(ms(t));
        eprintln!(
            "{kind} partition 0: a, b, c from the recording {:.1} ms",
            ms(t)
        );
        if (&*abc.a, &*abc.b, &*abc.c) != (r.a(), r.b(), r.c()) {
            bail!("{kind}: a, b, c from the recording differ from synthesize's");
        }
        drop(abc);
        drop(d);
        // The recording with the whole circuit's witness on this thread (the default path
        // computes it part by part in parallel where the kind gives parts).
        let t = Instant::now();
        let w = proof.synthesize(&whole_way, 0)?;
        whole.push(ms(t));
        eprintln!(
            "{kind} partition 0: recorded, whole-circuit witness {:.1} ms",
            ms(t)
        );
        if w != r {
            bail!("{kind}: the whole-circuit witness differs from the parts'");
        }
        let t = Instant::now();
        let p = proof.synthesize(&plain_way, 0)?;
        plain.push(ms(t));
        if r != p {
            bail!("{kind}: the recorded assignment differs from synthesize's");
        }
    }
    let (p, q) = (median(&plain), median(&recorded));
    println!(
        "{}",
        serde_json::json!({
            "op": "synth",
            "kind": kind.to_string(),
            "circuit_id": proof.circuit_id(),
            "fake": fake,
            "rows": rows,
            "first_recorded_ms": round1(first_ms),
            "recorded_bytes": synth.recorded_bytes(),
            "synthesize_ms_median": round1(p),
            "recorded_ms_median": round1(q),
            "recorded_whole_ms_median": round1(median(&whole)),
            "products_ms_median": round1(median(&products)),
            "speedup": ratio(p, q),
            "equal": true,
            "reps": reps,
            "threads": threads(),
            "peak_rss_bytes": super::bench_batch::peak_rss_bytes(),
        })
    );
    Ok(())
}
