//! `cuzk bench msm`, `cuzk bench ntt` and `cuzk bench gpu …`: flags for the GPU
//! microbenchmarks and whole-prove benchmarks of `cuzk_gpu::diag` (one JSON line per case;
//! `--check` runs the device-vs-CPU self-checks first). Without a GPU they fail with the
//! reason (no driver, no device).

use anyhow::{bail, Context};
use cuzk_gpu::diag::backend_bench::{self, BackendBench, OverlapBench};
use cuzk_gpu::diag::bench::{MsmBench, NttBench};
use cuzk_gpu::ops::msm::Group;
use cuzk_gpu::{Device, Residency};
use cuzk_groth16::ProveStage;

/// Flags of `bench msm`.
#[derive(clap::Args)]
pub struct MsmArgs {
    /// Group: g1 or g2.
    #[arg(long, default_value = "g1")]
    group: String,
    /// log2 of the number of points; repeat for several sizes.
    #[arg(long = "log-n", required = true)]
    log_n: Vec<u32>,
    /// Bases resident in device memory (else streamed from host memory in chunks).
    #[arg(long)]
    resident: bool,
    /// Chunk size (log2 points) for streamed bases.
    #[arg(long, default_value_t = 22)]
    chunk_log: u32,
    /// Timed runs per size (median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Run the device-vs-CPU MSM, classification and batch-addition checks first.
    #[arg(long)]
    check: bool,
    /// With --resident in G1: also build a window table over the bases (fixed-base
    /// precomputation, as for the resident H query) and time the MSM over it.
    #[arg(long)]
    table: bool,
    /// RNG seed (printed; default from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Flags of `bench ntt`.
#[derive(clap::Args)]
pub struct NttArgs {
    /// log2 of the size; repeat for several sizes.
    #[arg(long = "log-n", required = true)]
    log_n: Vec<u32>,
    /// Coset transform (forward, on g·H).
    #[arg(long)]
    coset: bool,
    /// Also time the prover's quotient H = (A·B − C)/Z (seven transforms over three vectors).
    #[arg(long)]
    quotient: bool,
    /// Timed runs per size (median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Run the device-vs-CPU NTT checks (sizes up to 2^--check-max-lg) first.
    #[arg(long)]
    check: bool,
    /// Largest size of the checks.
    #[arg(long, default_value_t = 14)]
    check_max_lg: u32,
    /// RNG seed (printed; default from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Runs `bench msm`.
pub fn run_msm(args: MsmArgs) -> anyhow::Result<()> {
    let group = match args.group.as_str() {
        "g1" => Group::G1,
        "g2" => Group::G2,
        g => bail!("unknown group {g:?}: use g1 or g2"),
    };
    let b = MsmBench {
        group,
        log_n: args.log_n,
        resident: args.resident,
        chunk_log: args.chunk_log,
        runs: args.runs,
        check: args.check,
        table: args.table,
        seed: args.seed,
        device: args.device,
    };
    cuzk_gpu::diag::bench::run_msm(&b).context("bench msm (needs a CUDA GPU)")
}

/// Runs `bench ntt`.
pub fn run_ntt(args: NttArgs) -> anyhow::Result<()> {
    let b = NttBench {
        log_n: args.log_n,
        coset: args.coset,
        quotient: args.quotient,
        runs: args.runs,
        check: args.check,
        check_max_lg: args.check_max_lg,
        seed: args.seed,
        device: args.device,
    };
    cuzk_gpu::diag::bench::run_ntt(&b).context("bench ntt (needs a CUDA GPU)")
}

/// `bench gpu`: whole GPU proves on the synthetic circuit (what `bench/reproduce.sh`
/// measures), the backend against the CPU backend, fault injection, and the kernel cache.
#[derive(clap::Subcommand)]
pub enum GpuCommand {
    /// Resident and streamed GPU proves, timed and verified; `--overlap P`: then P
    /// partitions from `--workers` threads on one backend at the largest size.
    Prove(GpuProveArgs),
    /// P partitions from W threads on one backend: seconds per partition, busy fraction.
    Overlap(GpuOverlapArgs),
    /// The GPU backend's five sums against the CPU backend's, both placements.
    Check(GpuCheckArgs),
    /// An injected launch failure at one stage, then two proofs that must verify.
    Fault(GpuFaultArgs),
    /// Compile every kernel module with NVRTC into the disk cache (no GPU needed).
    Compile(GpuCompileArgs),
    /// The host side of a prove (no GPU needed): listing a synthetic partition's staging
    /// pieces and filling a staging of the slot layout from them.
    Staging(GpuStagingArgs),
}

/// Flags of `bench gpu staging`.
#[derive(clap::Args)]
pub struct GpuStagingArgs {
    /// log2 of the circuit size; repeat or comma-separate for several.
    #[arg(long = "log-n", value_delimiter = ',', required = true)]
    log_n: Vec<u32>,
    /// Timed stagings per size after one untimed (medians printed).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the witness.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Leave a, b, c to the staging, evaluated from the recorded matrices as it is filled
    /// (the host's a, b, c of a streamed SRS), instead of evaluated by synthesis.
    #[arg(long)]
    deferred: bool,
}

/// Flags of `bench gpu prove`.
#[derive(clap::Args)]
pub struct GpuProveArgs {
    /// log2 of the circuit size; repeat or comma-separate for several.
    #[arg(long = "log-n", value_delimiter = ',', required = true)]
    log_n: Vec<u32>,
    /// Timed proves per placement after one verified warm-up (median reported).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Seed of the parameters, the witness and r, s.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// Compare the sums with the CPU backend up to this size.
    #[arg(long, default_value_t = 16)]
    cpu_max_lg: u32,
    /// Bases per streamed chunk.
    #[arg(long, default_value_t = 1 << 22)]
    chunk: usize,
    /// After the largest size: this many partitions through one backend.
    #[arg(long)]
    overlap: Option<usize>,
    /// Threads (backend workers) of the overlap case.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Flags of `bench gpu overlap`.
#[derive(clap::Args)]
pub struct GpuOverlapArgs {
    /// log2 of the circuit size.
    #[arg(long = "log-n", default_value_t = 20)]
    log_n: u32,
    /// Partitions proved.
    #[arg(long, default_value_t = 20)]
    partitions: usize,
    /// Threads (backend workers).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Stream the parameters from host memory instead of keeping them resident.
    #[arg(long)]
    streamed: bool,
    /// Seed of the parameters, the witness and r, s.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Flags of `bench gpu check`.
#[derive(clap::Args)]
pub struct GpuCheckArgs {
    /// log2 of the circuit size; repeat or comma-separate for several.
    #[arg(long = "log-n", value_delimiter = ',', required = true)]
    log_n: Vec<u32>,
    /// Seed of the parameters, the witness and r, s.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Flags of `bench gpu fault`.
#[derive(clap::Args)]
pub struct GpuFaultArgs {
    /// Stage to fail: prepare, upload, ntt_h, msm_h, msm_l, msm_a, msm_b_g1, msm_b_g2.
    #[arg(long, default_value = "msm_l")]
    stage: String,
    /// log2 of the circuit size.
    #[arg(long = "log-n", default_value_t = 12)]
    log_n: u32,
    /// Seed of the parameters, the witness and r, s.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// Flags of `bench gpu compile`.
#[derive(clap::Args)]
pub struct GpuCompileArgs {
    /// Target architectures, e.g. sm_90; repeat or comma-separate for several.
    #[arg(long, value_delimiter = ',', required = true)]
    arch: Vec<String>,
}

/// Runs `bench gpu …`.
pub fn run_gpu(cmd: GpuCommand) -> anyhow::Result<()> {
    let failed = match cmd {
        GpuCommand::Prove(a) => backend_bench::run_backend(&BackendBench {
            log_n: a.log_n,
            runs: a.runs.max(1),
            seed: a.seed,
            cpu_max_lg: a.cpu_max_lg,
            chunk_points: a.chunk,
            device: a.device,
            overlap: a.overlap.map(|p| (p, a.workers)),
        })
        .context("bench gpu prove (needs a CUDA GPU)")?,
        GpuCommand::Overlap(a) => backend_bench::run_overlap(&OverlapBench {
            log_n: a.log_n,
            partitions: a.partitions,
            workers: a.workers,
            seed: a.seed,
            residency: if a.streamed {
                Residency::Streamed
            } else {
                Residency::Auto
            },
            device: a.device,
        })
        .context("bench gpu overlap (needs a CUDA GPU)")?,
        GpuCommand::Check(a) => {
            let dev = Device::open(a.device).context("bench gpu check (needs a CUDA GPU)")?;
            let mut failed = 0;
            for lg in a.log_n {
                for r in backend_bench::check_backend(&dev, lg, a.seed)
                    .with_context(|| format!("checking the backend at 2^{lg}"))?
                {
                    failed += usize::from(!r.ok);
                    println!(
                        "{}",
                        serde_json::json!({"check": r.name, "ok": r.ok, "detail": r.detail})
                    );
                }
            }
            failed
        }
        GpuCommand::Fault(a) => {
            let Some(stage) = ProveStage::from_name(&a.stage) else {
                bail!("unknown stage {:?}", a.stage);
            };
            backend_bench::run_fault(a.device, a.log_n, stage, a.seed)
                .context("bench gpu fault (needs a CUDA GPU)")?
        }
        GpuCommand::Staging(a) => {
            run_staging(&a)?;
            0
        }
        GpuCommand::Compile(a) => {
            for arch in a.arch {
                let t = std::time::Instant::now();
                cuzk_gpu::device::kernels::cubin_all(&arch)
                    .with_context(|| format!("compiling the kernels for {arch}"))?;
                println!(
                    "{}",
                    serde_json::json!({"op": "gpu_compile", "arch": arch, "ms": t.elapsed().as_millis() as u64})
                );
            }
            0
        }
    };
    if failed > 0 {
        bail!("{failed} checks failed");
    }
    Ok(())
}

/// `bench gpu staging`: one JSON line per size with the median times of listing the pieces
/// and of the fill. It compares nothing itself: run two builds on one machine to compare
/// them.
fn run_staging(a: &GpuStagingArgs) -> anyhow::Result<()> {
    use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
    let runs = a.runs.max(1);
    for &lg in &a.log_n {
        let c = SyntheticCircuit::with_log_n(lg, a.seed, SyntheticShape::default())?;
        let w = c.with_witness_seed(a.seed ^ 1);
        let asg = match a.deferred {
            true => cuzk_groth16::recorded::R1cs::record(c)
                .map(std::sync::Arc::new)
                .and_then(|r| r.assign_deferred(w))
                .context("recording and assigning the circuit")?,
            false => cuzk_groth16::synthesize(w).context("synthesis")?,
        };
        let mut buf = Vec::new();
        let mut times = Vec::with_capacity(runs);
        for run in 0..=runs {
            let t = cuzk_gpu::diag::staging::time_staging(&asg, &mut buf)?;
            if run > 0 {
                times.push(t);
            }
        }
        let ms = |f: &dyn Fn(&cuzk_gpu::diag::staging::StagingTimes) -> std::time::Duration| {
            let v: Vec<f64> = times.iter().map(|t| f(t).as_secs_f64() * 1e3).collect();
            super::round1(cuzk_groth16::stats::median(&v))
        };
        println!(
            "{}",
            serde_json::json!({
                "op": "gpu_staging",
                "log_n": lg,
                "abc": if a.deferred { "deferred" } else { "evaluated" },
                "bytes": times[0].bytes,
                "threads": super::threads(),
                "runs": runs,
                "pieces_ms": ms(&|t| t.pieces),
                "fill_ms": ms(&|t| t.fill),
            })
        );
    }
    Ok(())
}
