//! `cuzk bench msm` and `cuzk bench ntt`: flags for the GPU microbenchmarks in
//! `cuzk_gpu::bench` (one JSON line per case; `--check` runs the device-vs-CPU self-checks
//! first). Without a GPU they fail with the reason (no driver, no device).

use anyhow::{bail, Context};
use cuzk_gpu::bench::{MsmBench, NttBench};
use cuzk_gpu::msm::Group;

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
    cuzk_gpu::bench::run_msm(&b).context("bench msm (needs a CUDA GPU)")
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
    cuzk_gpu::bench::run_ntt(&b).context("bench ntt (needs a CUDA GPU)")
}
