//! The GPU microbenchmarks behind `cuzk bench msm` / `cuzk bench ntt`: one JSON line per case
//! with the GPU, the size, the median device time over the timed runs after a warm-up, and
//! the fraction of the H200's measured multiply-add ceiling the dominant kernels reach.
//! With `check` set, the device-vs-CPU self-checks of [`crate::diag::check`] run first and print
//! as JSON lines too.

use std::sync::Arc;

use group::Curve;

use crate::device::layout::{as_bytes, FR_BYTES};
use crate::diag::check::{check_msm, check_ntt, CheckOutcome};
use crate::diag::testdata::{random_g1, random_g2, random_scalars};
use crate::error::{GpuError, Result};
use crate::ops::msm::{self, Group};
use crate::ops::ntt::{plan_passes, Direction, NttOptions, NttPlan, Order};
use crate::{Device, VramArena, FP_MUL_MADS, FR_MUL_MADS, H200_MAD_PER_S};

/// What `bench msm` runs.
#[derive(Clone, Debug)]
pub struct MsmBench {
    /// G1 or G2.
    pub group: Group,
    /// log2 sizes.
    pub log_n: Vec<u32>,
    /// Bases resident in device memory (else streamed from host memory).
    pub resident: bool,
    /// log2 chunk size for streamed bases.
    pub chunk_log: u32,
    /// Timed runs per size.
    pub runs: usize,
    /// Run the MSM / classification / batch-addition checks first.
    pub check: bool,
    /// G1 resident only: after the plain MSM, build the window table that
    /// [`msm::WindowTable::choose`] picks with no memory limit and time the MSM over it.
    pub table: bool,
    /// RNG seed (None: from the clock).
    pub seed: Option<u64>,
    /// Device ordinal.
    pub device: usize,
}

/// What `bench ntt` runs.
#[derive(Clone, Debug)]
pub struct NttBench {
    /// log2 sizes.
    pub log_n: Vec<u32>,
    /// Coset transform.
    pub coset: bool,
    /// Also time the prover's quotient (three vectors: the seven transforms of H).
    pub quotient: bool,
    /// Timed runs per size.
    pub runs: usize,
    /// Run the NTT checks first.
    pub check: bool,
    /// Largest size of the checks.
    pub check_max_lg: u32,
    /// RNG seed (None: from the clock).
    pub seed: Option<u64>,
    /// Device ordinal.
    pub device: usize,
}

fn open(ordinal: usize) -> Result<Arc<Device>> {
    let dev = Device::open(ordinal)?;
    dev.load_all()?;
    Ok(dev)
}

fn seed_of(s: Option<u64>) -> u64 {
    s.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
    })
}

fn print_checks(results: &[CheckOutcome]) -> Result<()> {
    for r in results {
        println!(
            "{}",
            serde_json::json!({"check": r.name, "ok": r.ok, "detail": r.detail})
        );
    }
    let bad = results.iter().filter(|r| !r.ok).count();
    println!(
        "{}",
        serde_json::json!({"checks": results.len(), "failed": bad})
    );
    if bad > 0 {
        return Err(GpuError::CheckFailed {
            failed: bad,
            total: results.len(),
        });
    }
    Ok(())
}

/// The upper median of `v` (0 for none), as the GPU benchmarks report it.
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Times `f` (which enqueues work on the compute stream) with device events: one warm-up,
/// then `runs` timed runs; returns each run's milliseconds.
fn time_runs(dev: &Device, runs: usize, mut f: impl FnMut() -> Result<()>) -> Result<Vec<f64>> {
    f()?;
    dev.sync_compute()?;
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs.max(1) {
        let (a, b) = (dev.timing_event()?, dev.timing_event()?);
        dev.record(&a)?;
        f()?;
        dev.record(&b)?;
        dev.sync_compute()?;
        let ms = crate::error::drv(dev.ordinal(), || "event timing".into(), a.elapsed_ms(&b))?;
        out.push(ms as f64);
    }
    Ok(out)
}

/// Runs the MSM benchmark, printing one JSON line per case to stdout.
///
/// # Errors
/// Device errors, [`GpuError::CheckFailed`], [`GpuError::Input`] for sizes above 2^28 or
/// results that differ between runs.
pub fn run_msm(args: &MsmBench) -> Result<()> {
    let group = args.group;
    let gname = match group {
        Group::G1 => "g1",
        Group::G2 => "g2",
    };
    let dev = open(args.device)?;
    let seed = seed_of(args.seed);
    if args.check {
        print_checks(&check_msm(&dev, seed, 100_003)?)?;
    }
    for &lg in &args.log_n {
        if lg > 28 {
            return Err(GpuError::Input(format!("log-n {lg} above 28")));
        }
        let n = 1usize << lg;
        let t = std::time::Instant::now();
        let scalars = random_scalars(n, seed ^ lg as u64);
        let (g1v, g2v) = match group {
            Group::G1 => (random_g1(n, seed), Vec::new()),
            Group::G2 => (Vec::new(), random_g2(n, seed)),
        };
        let bases: &[u8] = match group {
            Group::G1 => as_bytes(&g1v),
            Group::G2 => as_bytes(&g2v),
        };
        let gen_s = t.elapsed().as_secs_f64();
        let chunk = (1usize << args.chunk_log).min(n);
        let scratch_n = if args.resident { n } else { chunk };
        let scratch_bytes =
            msm::scratch_bytes(group, scratch_n) + 2 * chunk * group.affine_bytes() + (16 << 20);
        let base_bytes = if args.resident { bases.len() } else { 0 };
        let arena = VramArena::new(
            dev.clone(),
            base_bytes + n * FR_BYTES + scratch_bytes + (1 << 20),
        )?;
        let scal_r = arena.alloc(n * FR_BYTES)?;
        dev.upload(&scal_r, as_bytes(&scalars))?;
        let mut scratch = arena.scratch(scratch_bytes)?;
        let mut results: Vec<Vec<u8>> = Vec::new();
        let ms = if args.resident {
            let bases_r = arena.alloc(base_bytes)?;
            dev.upload(&bases_r, bases)?;
            time_runs(&dev, args.runs, || {
                scratch.reset();
                let out = msm::msm_enqueue(&dev, &scratch, group, &bases_r, None, &scal_r, n)?;
                let raw = out.download(&dev, group)?;
                // Jacobian coordinates differ between runs (bucket order is not fixed):
                // compare the affine points.
                let p = match group {
                    Group::G1 => format!("{:?}", msm::MsmOut::finish_g1(out.c, &raw).to_affine()),
                    Group::G2 => format!("{:?}", msm::MsmOut::finish_g2(out.c, &raw).to_affine()),
                };
                results.push(p.into_bytes());
                Ok(())
            })?
        } else {
            let mut runs = Vec::new();
            for i in 0..=args.runs.max(1) {
                scratch.reset();
                let t = std::time::Instant::now();
                let r = match group {
                    Group::G1 => {
                        let p = msm::msm_streamed_g1(&dev, &scratch, &g1v, &scal_r, chunk)?;
                        format!("{:?}", p.to_affine())
                    }
                    Group::G2 => {
                        let p = msm::msm_streamed_g2(&dev, &scratch, &g2v, &scal_r, chunk)?;
                        format!("{:?}", p.to_affine())
                    }
                };
                results.push(r.into_bytes());
                if i > 0 {
                    runs.push(t.elapsed().as_secs_f64() * 1e3);
                }
            }
            runs
        };
        let consistent = results.windows(2).all(|w| w[0] == w[1]);
        let med = median(ms.clone());
        drop(arena);
        if args.table && args.resident && group == Group::G1 {
            let plain = results.last().cloned().unwrap_or_default();
            run_msm_table(&dev, args.runs, &g1v, &scalars, &plain, med, seed)?;
        }
        let c = msm::window_bits(n);
        let nwin = msm::windows(c) as f64;
        // Bucket accumulation: one mixed XYZZ addition per point and window, 10 Fp products
        // in G1 (8M + 2S), 28 in G2 (8 Fp2 M at 3 + 2 Fp2 S at 2).
        let fp_muls = match group {
            Group::G1 => 10.0,
            Group::G2 => 28.0,
        };
        let mads = n as f64 * nwin * fp_muls * FP_MUL_MADS as f64;
        println!(
            "{}",
            serde_json::json!({
                "op": format!("msm_{gname}"), "n": n, "lg_n": lg, "gpu": dev.name(),
                "resident": args.resident, "ms": med, "runs_ms": ms, "window_bits": c,
                "mad_fraction": mads / (med * 1e-3) / H200_MAD_PER_S,
                "results_consistent": consistent, "inputs_s": gen_s, "seed": seed,
            })
        );
        if !consistent {
            return Err(GpuError::Input(format!(
                "msm results differ between runs at 2^{lg}: a race"
            )));
        }
    }
    Ok(())
}

/// The table part of `bench msm --table`: builds the window table over `bases` (timed),
/// then times the MSM over it; one JSON line, with whether its result equals `plain` (the
/// plain MSM's affine point, printed) and its ratio to the plain median `plain_ms`.
fn run_msm_table(
    dev: &Arc<Device>,
    runs: usize,
    bases: &[blstrs::G1Affine],
    scalars: &[blstrs::Scalar],
    plain: &[u8],
    plain_ms: f64,
    seed: u64,
) -> Result<()> {
    let n = bases.len();
    let t = msm::WindowTable::choose(n, usize::MAX)
        .ok_or_else(|| GpuError::Input(format!("no window table pays at {n} points")))?;
    let scratch_bytes = msm::table_scratch_bytes(&t) + (16 << 20);
    let arena = VramArena::new(
        dev.clone(),
        t.bytes() + n * FR_BYTES + scratch_bytes + (1 << 20),
    )?;
    let table = arena.alloc(t.bytes())?;
    let scal_r = arena.alloc(n * FR_BYTES)?;
    dev.upload(&scal_r, as_bytes(scalars))?;
    dev.upload(
        &table.slice(0, std::mem::size_of_val(bases))?,
        as_bytes(bases),
    )?;
    let mut scratch = arena.scratch(scratch_bytes)?;
    let start = std::time::Instant::now();
    msm::build_table_g1(dev, &table, &t)?;
    dev.sync_compute()?;
    let build_ms = start.elapsed().as_secs_f64() * 1e3;
    let mut results: Vec<Vec<u8>> = Vec::new();
    let ms = time_runs(dev, runs, || {
        scratch.reset();
        let p = msm::msm_table_g1(dev, &scratch, &table, &t, &scal_r, n)?;
        results.push(format!("{:?}", p.to_affine()).into_bytes());
        Ok(())
    })?;
    let consistent = results.windows(2).all(|w| w[0] == w[1]);
    let matches = results.last().is_some_and(|r| r.as_slice() == plain);
    let med = median(ms.clone());
    println!(
        "{}",
        serde_json::json!({
            "op": "msm_g1_table", "n": n, "gpu": dev.name(), "ms": med, "runs_ms": ms,
            "plain_ms": plain_ms, "speedup": plain_ms / med,
            "c": t.c, "sets": t.sets, "rows": t.rows(), "table_bytes": t.bytes(),
            "build_ms": build_ms, "matches_plain": matches,
            "results_consistent": consistent, "seed": seed,
        })
    );
    if !consistent || !matches {
        return Err(GpuError::Input(format!(
            "window-table msm at {n} points: consistent {consistent}, equals plain {matches}"
        )));
    }
    Ok(())
}

/// Times [`NttPlan::quotient`] at 2^lg: one JSON line.
fn run_quotient(dev: &Arc<Device>, args: &NttBench, lg: u32, seed: u64) -> Result<()> {
    let n = 1usize << lg;
    let arena = VramArena::new(
        dev.clone(),
        3 * n * FR_BYTES + NttPlan::table_bytes(lg) + (1 << 20),
    )?;
    let abc = [
        arena.alloc(n * FR_BYTES)?,
        arena.alloc(n * FR_BYTES)?,
        arena.alloc(n * FR_BYTES)?,
    ];
    let plan = NttPlan::new(dev, &arena, lg)?;
    for (j, r) in abc.iter().enumerate() {
        dev.upload(
            r,
            as_bytes(&random_scalars(n, seed ^ (lg as u64) << 8 ^ j as u64)),
        )?;
    }
    // Each run overwrites its inputs with transforms of them: fine for timing.
    let ms = time_runs(dev, args.runs, || {
        plan.quotient(dev, [&abc[0], &abc[1], &abc[2]])
    })?;
    println!(
        "{}",
        serde_json::json!({
            "op": "ntt_quotient", "n": n, "lg_n": lg, "gpu": dev.name(),
            "transforms": 7, "ms": median(ms.clone()), "runs_ms": ms, "seed": seed,
        })
    );
    Ok(())
}

/// Runs the NTT benchmark, printing one JSON line per case to stdout.
///
/// # Errors
/// Device errors, [`GpuError::CheckFailed`], [`GpuError::Input`] for sizes above 2^28.
pub fn run_ntt(args: &NttBench) -> Result<()> {
    let dev = open(args.device)?;
    let seed = seed_of(args.seed);
    if args.check {
        print_checks(&check_ntt(&dev, seed, args.check_max_lg)?)?;
    }
    for &lg in &args.log_n {
        if lg > crate::ops::ntt::MAX_LG_N {
            return Err(GpuError::Input(format!(
                "log-n {lg} above {}",
                crate::ops::ntt::MAX_LG_N
            )));
        }
        let n = 1usize << lg;
        let v = random_scalars(n, seed ^ lg as u64);
        let arena = VramArena::new(
            dev.clone(),
            n * FR_BYTES + NttPlan::table_bytes(lg) + (1 << 20),
        )?;
        let data = arena.alloc(n * FR_BYTES)?;
        let plan = NttPlan::new(&dev, &arena, lg)?;
        dev.upload(&data, as_bytes(&v))?;
        let opts = NttOptions {
            direction: Direction::Forward,
            coset: args.coset,
            input: Order::Natural,
            output: Order::BitReversed,
        };
        let ms = time_runs(&dev, args.runs, || plan.run(&dev, &data, opts))?;
        let med = median(ms.clone());
        let passes = plan_passes(lg).len() as f64;
        // Butterflies: n/2 products per level but each pass's level of twiddle 1; twists: 2
        // products per element per pass but the last; coset: 2 per element.
        let muls = n as f64 / 2.0 * (lg as f64 - passes)
            + 2.0 * n as f64 * (passes - 1.0).max(0.0)
            + if args.coset { 2.0 * n as f64 } else { 0.0 };
        let mads = muls * FR_MUL_MADS as f64;
        println!(
            "{}",
            serde_json::json!({
                "op": if args.coset { "ntt_coset" } else { "ntt" }, "n": n, "lg_n": lg, "gpu": dev.name(),
                "order": "natural->bitreversed", "ms": med, "runs_ms": ms,
                "mad_fraction": mads / (med * 1e-3) / H200_MAD_PER_S,
                "bytes_moved_gb_s": (2.0 * passes * (n * FR_BYTES) as f64) / (med * 1e-3) / 1e9,
                "seed": seed,
            })
        );
        if args.quotient {
            run_quotient(&dev, args, lg, seed)?;
        }
    }
    Ok(())
}
