//! Whole-proof checks and benchmarks of the [`GpuBackend`] on synthetic PoRep-shaped
//! circuits (parameters made on the device with [`crate::GpuFixedBase`]), behind
//! `cuzk bench gpu prove|overlap|fault`: one JSON line per case. [`check_backend`] compares
//! the five sums with the CPU backend for both SRS placements and verifies a proof;
//! [`run_backend`] times resident and streamed proves; [`run_overlap`] proves many
//! partitions from several threads on one backend and reports the device's busy fraction
//! (Σ token held ÷ wall); [`run_fault`] injects a launch failure and proves again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{
    paramgen, prove, synthesize, verify, Assignment, Backend, BackendError, CpuBackend, MsmOutputs,
    ProveReport, ProveStage, Scalar, Srs,
};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;
use serde_json::{json, Map, Value};

use crate::diag::bench::median;
use crate::diag::check::CheckOutcome;
use crate::error::{GpuError, Result};
use crate::{Device, GpuBackend, GpuBackendConfig, Residency};

fn bad(e: impl std::fmt::Display) -> GpuError {
    GpuError::Input(e.to_string())
}

/// Parameters and one witness for the synthetic circuit of 2^lg rows, with the time each
/// took.
fn setup(dev: &Arc<Device>, lg: u32, seed: u64) -> Result<(Srs, Assignment, f64, f64)> {
    let circuit = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).map_err(bad)?;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let fb = crate::GpuFixedBase::new(dev.clone());
    let t = Instant::now();
    let srs = paramgen::generate(circuit, &mut rng, &fb).map_err(bad)?.srs;
    let gen_ms = ms(t.elapsed());
    let t = Instant::now();
    let asg = synthesize(circuit.with_witness_seed(seed ^ 1)).map_err(bad)?;
    Ok((srs, asg, gen_ms, ms(t.elapsed())))
}

fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e4).round() / 10.0
}

/// A proof through `b` with r, s from `seed`, checked by bellperson's verifier.
fn prove_verified(b: &dyn Backend, srs: &Srs, asg: &Assignment, seed: u64) -> Result<bool> {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let (proof, _) = prove(asg, srs, r, s, b).map_err(bad)?;
    verify(&srs.vk, &proof, &asg.input_assignment[1..]).map_err(bad)
}

fn backend(dev: &Arc<Device>, residency: Residency, chunk: usize, workers: usize) -> GpuBackend {
    GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            workers,
            residency,
            stream_chunk_points: chunk,
            ..GpuBackendConfig::default()
        },
    )
}

/// The GPU backend against the CPU backend at 2^lg_n rows, resident and streamed (chunks
/// of a fifth of the largest query, so several): the five sums must be equal and a GPU
/// proof must verify.
///
/// # Errors
/// Device errors; circuit, parameter or proof errors as [`GpuError::Input`].
pub fn check_backend(dev: &Arc<Device>, lg_n: u32, seed: u64) -> Result<Vec<CheckOutcome>> {
    let (srs, asg, _, _) = setup(dev, lg_n, seed)?;
    let cpu = CpuBackend::new()
        .compute(&asg, &srs, &mut ProveReport::default())
        .map_err(bad)?;
    let chunk = (srs.h.len() / 5).max(1);
    let mut out = Vec::new();
    for residency in [Residency::Resident, Residency::Streamed] {
        let b = backend(dev, residency, chunk, 1);
        let gpu = b
            .compute(&asg, &srs, &mut ProveReport::default())
            .map_err(bad)?;
        for (name, ok) in sums_equal(&gpu, &cpu) {
            out.push(outcome(
                format!("backend {residency:?} {name} 2^{lg_n}"),
                ok,
                seed,
                "gpu sum differs from the cpu backend",
            ));
        }
        out.push(outcome(
            format!("backend {residency:?} proof verifies 2^{lg_n}"),
            prove_verified(&b, &srs, &asg, seed)?,
            seed,
            "gpu proof rejected by bellperson's verifier",
        ));
    }
    Ok(out)
}

fn outcome(name: String, ok: bool, seed: u64, what: &str) -> CheckOutcome {
    CheckOutcome {
        name,
        ok,
        detail: if ok {
            format!("seed {seed}")
        } else {
            format!("seed {seed}: {what}")
        },
    }
}

fn sums_equal(g: &MsmOutputs, c: &MsmOutputs) -> [(&'static str, bool); 5] {
    [
        ("h", g.h == c.h),
        ("l", g.l == c.l),
        ("a", g.a == c.a),
        ("b_g1", g.b_g1 == c.b_g1),
        ("b_g2", g.b_g2 == c.b_g2),
    ]
}

/// What `cuzk bench gpu prove` runs.
#[derive(Clone, Debug)]
pub struct BackendBench {
    /// log2 sizes.
    pub log_n: Vec<u32>,
    /// Timed computes per placement after one verified warm-up prove.
    pub runs: usize,
    /// Seed of parameters, witness and r, s.
    pub seed: u64,
    /// Compare the sums with the CPU backend up to this size.
    pub cpu_max_lg: u32,
    /// Bases per streamed chunk.
    pub chunk_points: usize,
    /// Device ordinal.
    pub device: usize,
    /// After the largest size, also run the overlap case on its parameters and witness:
    /// (partitions, workers).
    pub overlap: Option<(usize, usize)>,
}

/// Per-stage medians of host wall and device time over `reports`.
fn stage_medians(reports: &[ProveReport]) -> (Map<String, Value>, Map<String, Value>) {
    let mut names: Vec<ProveStage> = Vec::new();
    for r in reports {
        for s in &r.stages {
            if !names.contains(&s.stage) {
                names.push(s.stage);
            }
        }
    }
    let (mut wall, mut device) = (Map::new(), Map::new());
    for n in names {
        let pick = |f: &dyn Fn(&cuzk_groth16::StageTime) -> Option<f64>| {
            let v: Vec<f64> = reports
                .iter()
                .filter_map(|r| r.stage(n).and_then(f))
                .collect();
            (!v.is_empty()).then(|| median(v))
        };
        if let Some(w) = pick(&|s| Some(ms(s.wall))) {
            wall.insert(n.to_string(), json!(w));
        }
        if let Some(d) = pick(&|s| s.device.map(ms)) {
            device.insert(n.to_string(), json!(d));
        }
    }
    (wall, device)
}

/// Times resident and streamed proves at each size; prints one JSON line per size and
/// placement. Returns the number of failed checks (proof rejected or sums differing from
/// the CPU backend).
///
/// # Errors
/// Device, parameter or synthesis errors.
pub fn run_backend(b: &BackendBench) -> Result<usize> {
    let dev = Device::open(b.device)?;
    let mut failed = 0;
    let largest = b.log_n.iter().copied().max();
    for &lg in &b.log_n {
        let (srs, asg, gen_ms, synth_ms) = setup(&dev, lg, b.seed)?;
        println!(
            "{}",
            json!({"op":"gpu_prove_setup","log_n":lg,"paramgen_ms":gen_ms,"synthesis_ms":synth_ms,
                   "gpu":dev.name()})
        );
        let cpu = if lg <= b.cpu_max_lg {
            Some(
                CpuBackend::new()
                    .compute(&asg, &srs, &mut ProveReport::default())
                    .map_err(bad)?,
            )
        } else {
            None
        };
        for residency in [Residency::Resident, Residency::Streamed] {
            let gb = backend(&dev, residency, b.chunk_points, 1);
            let t = Instant::now();
            let verified = prove_verified(&gb, &srs, &asg, b.seed)?;
            let first_ms = ms(t.elapsed());
            let mut walls = Vec::new();
            let mut reports = Vec::new();
            let mut sums_ok = true;
            for _ in 0..b.runs.max(1) {
                let mut rep = ProveReport::default();
                let t = Instant::now();
                let got = gb.compute(&asg, &srs, &mut rep).map_err(bad)?;
                walls.push(ms(t.elapsed()));
                if let Some(c) = &cpu {
                    sums_ok &= sums_equal(&got, c).iter().all(|x| x.1);
                }
                reports.push(rep);
            }
            let held = median(
                reports
                    .iter()
                    .filter_map(|r| r.token.map(|t| ms(t.held)))
                    .collect(),
            );
            let (wall, device) = stage_medians(&reports);
            failed += usize::from(!verified) + usize::from(!sums_ok);
            println!(
                "{}",
                json!({
                    "op":"gpu_prove","log_n":lg,"residency":format!("{residency:?}").to_lowercase(),
                    "ms_median":median(walls.clone()),"ms":walls,"first_prove_ms":first_ms,
                    "token_held_ms_median":held,"verified":verified,
                    "sums_match_cpu": cpu.as_ref().map(|_| sums_ok),
                    "srs_uploads":gb.srs_uploads(),"resident_bytes":gb.resident_bytes(),
                    "stages_ms":wall,"device_ms":device,"gpu":dev.name(),
                })
            );
        }
        if let (Some((partitions, workers)), true) = (b.overlap, Some(lg) == largest) {
            let o = OverlapBench {
                log_n: lg,
                partitions,
                workers,
                seed: b.seed,
                residency: Residency::Auto,
                device: b.device,
            };
            // The same witness for every worker: parameter generation and synthesis at the
            // largest size are the slow part of this run, and compute does not modify it.
            failed += overlap_on(&dev, &o, &srs, std::slice::from_ref(&asg))?;
        }
    }
    Ok(failed)
}

/// One partition proved by a worker: its index, sums and report.
type Proved = (usize, MsmOutputs, ProveReport);

/// What `cuzk bench gpu overlap` runs.
#[derive(Clone, Debug)]
pub struct OverlapBench {
    /// log2 size of each partition.
    pub log_n: u32,
    /// Partitions proved.
    pub partitions: usize,
    /// Threads calling compute at once on the one backend.
    pub workers: usize,
    /// Seed.
    pub seed: u64,
    /// SRS placement.
    pub residency: Residency,
    /// Device ordinal.
    pub device: usize,
}

/// Proves `partitions` partitions of one circuit from `workers` threads on one backend
/// (the witnesses synthesized beforehand, one per worker, so only compute is timed) and
/// prints the busy fraction Σ token_held ÷ wall and the seconds per partition. Returns the
/// number of failed checks (a rejected proof or a sum that differs between repeats).
///
/// # Errors
/// Device, parameter or synthesis errors; a failed compute.
pub fn run_overlap(o: &OverlapBench) -> Result<usize> {
    let dev = Device::open(o.device)?;
    let workers = o.workers.max(1);
    let circuit =
        SyntheticCircuit::with_log_n(o.log_n, o.seed, SyntheticShape::default()).map_err(bad)?;
    let (srs, first, _, _) = setup(&dev, o.log_n, o.seed)?;
    let mut asgs = vec![first];
    for w in 1..workers {
        asgs.push(synthesize(circuit.with_witness_seed(o.seed ^ (w as u64 + 1))).map_err(bad)?);
    }
    overlap_on(&dev, o, &srs, &asgs)
}

/// The overlap case on given parameters and witnesses (partition i uses witness
/// i mod len).
fn overlap_on(
    dev: &Arc<Device>,
    o: &OverlapBench,
    srs: &Srs,
    asgs: &[Assignment],
) -> Result<usize> {
    let workers = o.workers.max(1);
    let gb = GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            workers,
            residency: o.residency,
            ..GpuBackendConfig::default()
        },
    );
    if o.residency != Residency::Streamed {
        gb.preload(srs)?;
    }
    // Warm-up: one verified proof per witness, then one compute from every worker at once,
    // which makes every slot before the timed part.
    let mut failed = 0;
    let warm: Vec<bool> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..workers)
            .map(|w| {
                let (gb, a) = (&gb, &asgs[w % asgs.len()]);
                s.spawn(move || gb.compute(a, srs, &mut ProveReport::default()).is_ok())
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(false)).collect()
    });
    failed += warm.iter().filter(|ok| !**ok).count();
    let mut reference = Vec::new();
    for (i, a) in asgs.iter().enumerate() {
        failed += usize::from(!prove_verified(&gb, srs, a, o.seed + i as u64)?);
        reference.push(
            gb.compute(a, srs, &mut ProveReport::default())
                .map_err(bad)?,
        );
    }
    let next = AtomicUsize::new(0);
    let t = Instant::now();
    let results: Vec<Result<Vec<Proved>, BackendError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        if i >= o.partitions {
                            return Ok(mine);
                        }
                        let mut rep = ProveReport::default();
                        let out = gb.compute(&asgs[i % asgs.len()], srs, &mut rep)?;
                        mine.push((i, out, rep));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Err(BackendError::Cancelled)))
            .collect()
    });
    let wall = t.elapsed();
    let mut reports = Vec::new();
    for r in results {
        for (i, out, rep) in r.map_err(bad)? {
            failed += usize::from(out != reference[i % reference.len()]);
            reports.push(rep);
        }
    }
    let held: Duration = reports.iter().filter_map(|r| r.token.map(|t| t.held)).sum();
    let (stages, device) = stage_medians(&reports);
    println!(
        "{}",
        json!({
            "op":"gpu_overlap","log_n":o.log_n,"partitions":o.partitions,"workers":workers,
            "residency":format!("{:?}", o.residency).to_lowercase(),
            "wall_ms":ms(wall),"s_per_partition":wall.as_secs_f64() / o.partitions.max(1) as f64,
            "busy_fraction":held.as_secs_f64() / wall.as_secs_f64(),
            "token_held_ms_median":median(reports.iter().filter_map(|r| r.token.map(|t| ms(t.held))).collect()),
            "stages_ms":stages,"device_ms":device,"checks_failed":failed,"gpu":dev.name(),
        })
    );
    Ok(failed)
}

/// Injects a launch failure at `stage`, then proves twice on the same backend; prints one
/// JSON line. Returns 1 when the fault did not surface as a device error naming the stage
/// or the following proofs did not verify, else 0.
///
/// # Errors
/// Device, parameter or synthesis errors outside the injected fault.
pub fn run_fault(device: usize, lg: u32, stage: ProveStage, seed: u64) -> Result<usize> {
    let dev = Device::open(device)?;
    let (srs, asg, _, _) = setup(&dev, lg, seed)?;
    let gb = GpuBackend::new(dev.clone());
    gb.inject_fault(stage);
    let err = gb.compute(&asg, &srs, &mut ProveReport::default());
    let (as_expected, message) = match &err {
        Err(BackendError::Device {
            stage: s, message, ..
        }) => (*s == stage, message.clone()),
        Err(e) => (false, e.to_string()),
        Ok(_) => (false, "no error".into()),
    };
    let after = [
        prove_verified(&gb, &srs, &asg, seed)?,
        prove_verified(&gb, &srs, &asg, seed + 1)?,
    ];
    let ok = as_expected && after.iter().all(|x| *x);
    println!(
        "{}",
        json!({"op":"gpu_fault","log_n":lg,"stage":stage.as_str(),"device_error":as_expected,
               "message":message,"proofs_after_verify":after,"ok":ok})
    );
    Ok(usize::from(!ok))
}
