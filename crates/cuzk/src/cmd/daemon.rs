//! `cuzk daemon`: loads `cuzk.toml` (every key optional; Curio's `cuzk.toml` is read too),
//! applies CLI overrides, starts the engine behind the gRPC and HTTP listeners, and on
//! SIGINT/SIGTERM drains accepted jobs (bounded by `drain_timeout_secs`) before exiting,
//! the listeners still answering reads; a second SIGINT/SIGTERM ends the drain early
//! (with a journal, the jobs left are proved again at the next start).
//! `--print-config` prints the effective config as TOML and exits.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use cuzk_engine::KindRegistry;
use cuzk_server::{Daemon, DaemonConfig};
use tracing::info;

/// Flags of this subcommand; each overrides the config file's key of the same name.
#[derive(clap::Args)]
pub struct Args {
    /// Config file (TOML); see cuzk.example.toml for every key and its default.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// gRPC listen address: unix:///path.sock or HOST:PORT.
    #[arg(long)]
    pub listen: Option<String>,
    /// HTTP /metrics and /status address HOST:PORT ("" disables it).
    #[arg(long)]
    pub http: Option<String>,
    /// Parameter files directory.
    #[arg(long)]
    pub param_dir: Option<PathBuf>,
    /// Partitions synthesized at once.
    #[arg(long)]
    pub synthesis_workers: Option<usize>,
    /// Prove workers per GPU.
    #[arg(long)]
    pub gpu_workers_per_device: Option<usize>,
    /// Prove workers on the CPU backend when there is no GPU.
    #[arg(long)]
    pub cpu_workers: Option<usize>,
    /// Host memory budget for partitions in flight, bytes.
    #[arg(long)]
    pub host_memory_budget_bytes: Option<u64>,
    /// Seconds accepted jobs get to finish on SIGINT/SIGTERM.
    #[arg(long)]
    pub drain_timeout_secs: Option<u64>,
    /// File holding the bearer token every gRPC call must carry.
    #[arg(long)]
    pub auth_token_file: Option<PathBuf>,
    /// This daemon's name, the first part of its job ids ("" : the host name).
    #[arg(long)]
    pub name: Option<String>,
    /// Job journal directory ("" disables it; a String, since clap refuses an empty path).
    #[arg(long)]
    pub journal_dir: Option<String>,
    /// Serve the test-only SYNTHETIC kind (generates its parameters on first use).
    #[arg(long)]
    pub allow_synthetic: bool,
    /// Print the effective config as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Prove on the CPU backend even when GPUs are present.
    #[arg(long)]
    pub no_gpu: bool,
}

impl Args {
    /// The config file (or the defaults) with the flags applied.
    fn effective_config(&self) -> anyhow::Result<DaemonConfig> {
        let mut cfg = match &self.config {
            Some(path) => DaemonConfig::load(path)?,
            None => DaemonConfig::default(),
        };
        if let Some(v) = &self.listen {
            cfg.listen = v.clone();
        }
        if let Some(v) = &self.http {
            cfg.http_listen = v.clone();
        }
        if let Some(v) = &self.param_dir {
            cfg.engine.param_dir = v.clone();
        }
        if let Some(v) = self.synthesis_workers {
            cfg.engine.synthesis_workers = v;
        }
        if let Some(v) = self.gpu_workers_per_device {
            cfg.engine.gpu_workers_per_device = v;
        }
        if let Some(v) = self.cpu_workers {
            cfg.engine.cpu_workers = v;
        }
        if let Some(v) = self.host_memory_budget_bytes {
            cfg.engine.host_memory_budget_bytes = v;
        }
        if let Some(v) = self.drain_timeout_secs {
            cfg.drain_timeout_secs = v;
        }
        if let Some(v) = &self.auth_token_file {
            cfg.auth_token_file = v.clone();
        }
        if self.allow_synthetic {
            cfg.allow_synthetic = true;
        }
        if let Some(v) = &self.journal_dir {
            cfg.journal_dir = PathBuf::from(v);
        }
        if let Some(v) = &self.name {
            cfg.name = v.clone();
        }
        Ok(cfg)
    }
}

/// The proof kinds this binary serves: the four Filecoin kinds (their other files, such
/// as NI-PoRep's SnarkPack key, in `param_dir`) and the synthetic one (whose missing
/// parameters are generated on the first of `gpus`, else on the CPU).
pub fn registry(gpus: &[Arc<cuzk_gpu::Device>], param_dir: &std::path::Path) -> KindRegistry {
    let mut registry = KindRegistry::with_synthetic_on(super::devices::fixed_base_on(gpus, None));
    cuzk_filecoin::engine::register_in(&mut registry, param_dir.to_path_buf());
    registry
}

/// The Filecoin kinds only (their other files in `param_dir`): what a production daemon
/// serves.
fn filecoin_registry(param_dir: &std::path::Path) -> KindRegistry {
    let mut registry = KindRegistry::new();
    cuzk_filecoin::engine::register_in(&mut registry, param_dir.to_path_buf());
    registry
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = args.effective_config()?;
    if args.print_config {
        let (machine, memory_from) = cuzk_engine::sizing::Machine::detect_with_origin();
        println!(
            "# synthesis_workers and the three memory budgets, unless set by the config file or a flag, are derived from this machine: {} cores, {:.1} GiB ({memory_from}) (see cuzk.example.toml)",
            machine.cores,
            machine.mem_total_bytes as f64 / (1u64 << 30) as f64
        );
        print!("{}", cfg.to_toml());
        return Ok(());
    }
    // The [gpu] table, with the environment's overrides, before any GPU work reads it.
    let tuning = cuzk_gpu::GpuTuning {
        h_table_max_bytes: cfg.gpu.h_table_max_bytes,
        concurrent_sums: cfg.gpu.concurrent_sums,
        msm_window_bits: cfg.gpu.msm_window_bits,
        profile: cfg.gpu.profile,
        nvrtc_options: cfg.gpu.nvrtc_options.clone(),
        // Only `CUZK_GPU_REGISTER=0` turns it off, for measuring it.
        no_host_registration: false,
        // Only `CUZK_GPU_TRACE=FILE` turns it on, for diagnosis.
        trace: None,
        // Only `CUZK_GPU_WIDE_SPLIT` sets it, for measuring the ring.
        wide_split: None,
        // Only `CUZK_GPU_H_ACC` sets it, for measuring the H sum's accumulators.
        h_acc: None,
        // Only `CUZK_GPU_NTT_TWIST=two-level` sets it, for measuring the NTT's twists.
        ntt_two_level_twists: false,
        // Only `CUZK_GPU_HOST_ABC=1` sets it, for measuring the device's a, b, c products.
        host_abc: false,
        // Only `CUZK_GPU_CRITICAL_YIELD=1` sets it: measured slower than the lane alone (#29).
        critical_yield: false,
        // Only `CUZK_GPU_HOST_THREADS` sets it, for measuring a backend's own host pool.
        host_threads: None,
    };
    if !tuning.with_env().install() {
        tracing::warn!("gpu tuning was fixed before the config was read: [gpu] not applied");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("cuzk-rt")
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(cfg, args.no_gpu))
}

async fn serve(cfg: DaemonConfig, no_gpu: bool) -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let (machine, memory_from) = cuzk_engine::sizing::Machine::detect_with_origin();
    info!(
        cores = machine.cores,
        memory_bytes = machine.mem_total_bytes,
        memory_from,
        host_memory_budget_bytes = cfg.engine.host_memory_budget_bytes,
        srs_budget_bytes = cfg.engine.srs_budget_bytes,
        recorded_r1cs_budget_bytes = cfg.engine.recorded_r1cs_budget_bytes,
        "host memory: the budgets (derived from this memory unless set)"
    );
    let mut gpus = super::devices::gpus(no_gpu);
    if !cfg.gpu_ordinals.is_empty() {
        gpus.retain(|dev| {
            cfg.gpu_ordinals
                .iter()
                .any(|&o| usize::try_from(o) == Ok(dev.ordinal()))
        });
        info!(ordinals = ?cfg.gpu_ordinals, used = gpus.len(), "gpu_ordinals selects the GPUs");
    }
    let devices = super::devices::gpu_specs(&gpus, cfg.engine.gpu_workers_per_device, &cfg.gpu);
    let kinds = if cfg.allow_synthetic {
        registry(&gpus, &cfg.engine.param_dir)
    } else {
        filecoin_registry(&cfg.engine.param_dir)
    };
    let daemon = Daemon::start(&cfg, kinds, devices)
        .await
        .context("starting the daemon")?;
    let stop = daemon.stop_token();
    let early = daemon.end_drain_token();
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::spawn(async move {
        // The first signal drains (the listeners keep answering reads), the second ends
        // the drain early.
        tokio::select! {
            _ = sigint.recv() => info!("SIGINT: draining (another signal ends the drain)"),
            _ = sigterm.recv() => info!("SIGTERM: draining (another signal ends the drain)"),
        }
        stop.cancel();
        tokio::select! {
            _ = sigint.recv() => {}
            _ = sigterm.recv() => {}
        }
        info!("second signal: ending the drain");
        early.cancel();
    });
    let report = daemon.run_until_stopped().await.context("serving")?;
    info!(drained = report.drained, failed = report.failed, "exiting");
    Ok(())
}
