//! `cuzk bench batch`: many whole proofs through the engine, either in-process or against a
//! running daemon (`--connect`), sustained. The proofs are synthetic ones generated here,
//! or one Filecoin request proved `--count` times: a real one from a test sector
//! (`--sector DIR`, `cuzk gen sector`) or a **fake** one of the true shape (`--request FILE
//! --fake`, `cuzk gen request`: its proofs cannot verify, so the in-process engine parses
//! with `ParseOptions::fake_ok` and skips the vanilla-proof checks and the final
//! verification; the daemon refuses fakes). Submits `--count` requests from
//! `--concurrency` clients, then prints seconds per proof, latency p50/p95/max, mean time
//! per partition of synthesis and of the prove under the compute token (the GPU time on a
//! GPU), each device's busy fraction (time under its compute token ÷ wall time), the peak
//! host memory of this process (VmHWM) and the published figure it compares against, as
//! one JSON line on stdout and a table on stderr; `--timeline` writes the SVG picture.
//! In-process, `--critical-request FILE` sends CRITICAL requests one at a time beside the
//! load and reports their latencies on a line of their own (`critical.rs`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use cuzk_engine::{
    AwaitOutcome, Engine, JobSpec, JobState, KindRegistry, Priority, ProofKindId, ProofRequest,
    Stage, TimelineEvent,
};
use cuzk_filecoin::ParseOptions;
use cuzk_server::{pb, Client, DaemonConfig, ListenAddr};

mod critical;
mod report;
mod timeline;
pub(crate) use report::peak_rss_bytes;
mod workload;

use report::{report, Run};
use workload::Workload;

/// Flags of this subcommand.
#[derive(clap::Args)]
pub struct Args {
    /// A running daemon to drive (unix:///path.sock or HOST:PORT); in-process when absent.
    #[arg(long)]
    pub connect: Option<String>,
    /// Proofs to make.
    #[arg(long, default_value_t = 10)]
    pub count: usize,
    /// Clients submitting at once (each waits for its proof before the next).
    #[arg(long, default_value_t = 2)]
    pub concurrency: usize,
    /// Proof kind: "synthetic" (generated here), or porep, window-post, winning-post, snap
    /// (with --sector or --request).
    #[arg(long, default_value = "synthetic")]
    pub kind: String,
    /// Filecoin kinds: a test sector folder (`cuzk gen sector`) whose real request is
    /// proved --count times.
    #[arg(long, conflicts_with = "request")]
    pub sector: Option<PathBuf>,
    /// Filecoin kinds: a FAKE request file (`cuzk gen request --fake`) proved --count
    /// times; needs --fake.
    #[arg(long)]
    pub request: Option<PathBuf>,
    /// Accept the fake request of --request: random data of the true shape whose proofs
    /// CANNOT VERIFY. The in-process engine skips the vanilla-proof checks and the final
    /// verification for it; figures are for benchmarking only.
    #[arg(long, requires = "request")]
    pub fake: bool,
    /// Priority of every request (low, normal, high, critical).
    #[arg(long, default_value = "normal")]
    pub priority: String,
    /// log2 of each synthetic partition's domain.
    #[arg(long, default_value_t = 12)]
    pub log_n: u32,
    /// Partitions per synthetic proof.
    #[arg(long, default_value_t = 2)]
    pub partitions: u32,
    /// Write the timeline picture here (SVG).
    #[arg(long)]
    pub timeline: Option<PathBuf>,
    /// In-process: config file for the engine (as `cuzk daemon --config`).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// In-process: parameter directory.
    #[arg(long)]
    pub param_dir: Option<PathBuf>,
    /// In-process: partitions synthesized at once.
    #[arg(long)]
    pub synthesis_workers: Option<usize>,
    /// In-process: prove workers on the CPU backend.
    #[arg(long)]
    pub cpu_workers: Option<usize>,
    /// In-process: prove workers per GPU.
    #[arg(long)]
    pub gpu_workers: Option<usize>,
    /// In-process: prove on the CPU backend even when GPUs are present.
    #[arg(long)]
    pub no_gpu: bool,
    /// In-process, with --fake: a FAKE request file (`cuzk gen request --fake`, e.g. a
    /// 32 GiB winning-post) sent at CRITICAL priority beside the main load, one at a time,
    /// from when the main load's first partition is proving; its latencies are reported on
    /// a line of their own ("op":"batch_critical") and left out of the main report.
    #[arg(long, requires = "fake")]
    pub critical_request: Option<PathBuf>,
    /// CRITICAL requests to send (with --critical-request).
    #[arg(long, default_value_t = 5, requires = "critical_request")]
    pub critical_count: usize,
    /// Milliseconds between one CRITICAL request's completion and the next's submission.
    #[arg(long, default_value_t = 1000, requires = "critical_request")]
    pub critical_gap_ms: u64,
}

impl Args {
    /// `--param-dir`, or the parameter directory filecoin-proofs uses by default.
    fn param_dir_or_default(&self) -> PathBuf {
        self.param_dir
            .clone()
            .unwrap_or_else(cuzk_filecoin::default_param_dir)
    }
}

/// What one client saw of one proof.
struct Sample {
    latency: Duration,
    ok: bool,
    error: String,
    /// The proof bytes (empty unless completed).
    proof: Vec<u8>,
}

/// Where the proofs go.
enum Target {
    Local(Arc<Engine>),
    Remote(ListenAddr),
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let priority = Priority::from_name(&args.priority).with_context(|| {
        format!(
            "--priority {}: expected low, normal, high or critical",
            args.priority
        )
    })?;
    if args.count == 0 || args.concurrency == 0 {
        bail!("--count and --concurrency must be positive");
    }
    let workload = Workload::from_args(&args)?;
    if workload.filecoin_check().is_some() {
        // filecoin-proofs' verifier finds its .vk files through this variable; set before
        // any thread of the run starts.
        std::env::set_var("FIL_PROOFS_PARAMETER_CACHE", args.param_dir_or_default());
    }
    if args.critical_request.is_some() && args.critical_count == 0 {
        bail!("--critical-count must be positive");
    }
    if workload.is_fake() {
        if args.connect.is_some() {
            bail!("--fake runs in-process only: a daemon refuses fake requests");
        }
        tracing::warn!(
            case = %workload.label(),
            "benchmarking a FAKE request: its proofs cannot verify and are not verified"
        );
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(bench(args, priority, workload))
}

/// The in-process engine's proof kinds: the daemon's, or with `fake_ok` for fakes.
fn registry(
    gpus: &[Arc<cuzk_gpu::Device>],
    param_dir: &std::path::Path,
    fake: bool,
) -> KindRegistry {
    if !fake {
        return super::daemon::registry(gpus, param_dir);
    }
    let mut registry = KindRegistry::with_synthetic_on(super::devices::fixed_base_on(gpus, None));
    cuzk_filecoin::engine::register_with(
        &mut registry,
        param_dir.to_path_buf(),
        ParseOptions { fake_ok: true },
    );
    registry
}

async fn bench(args: Args, priority: Priority, workload: Workload) -> anyhow::Result<()> {
    let target = match &args.connect {
        Some(addr) => Target::Remote(ListenAddr::parse(addr)?),
        None => {
            let mut cfg = match &args.config {
                Some(path) => DaemonConfig::load(path)?,
                None => DaemonConfig::default(),
            };
            if let Some(dir) = &args.param_dir {
                cfg.engine.param_dir = dir.clone();
            }
            if let Some(n) = args.synthesis_workers {
                cfg.engine.synthesis_workers = n;
            }
            if let Some(n) = args.cpu_workers {
                cfg.engine.cpu_workers = n;
            }
            let gpus = super::devices::gpus(args.no_gpu);
            if let Some(n) = args.gpu_workers {
                cfg.engine.gpu_workers_per_device = n;
            }
            let devices =
                super::devices::gpu_specs(&gpus, cfg.engine.gpu_workers_per_device, &cfg.gpu);
            let engine_cfg = cfg.engine_config();
            let registry = registry(&gpus, &engine_cfg.param_dir, workload.is_fake());
            let engine = Engine::start(engine_cfg, registry, devices)?;
            Target::Local(Arc::new(engine))
        }
    };
    let circuit_id = workload.circuit_id();
    let critical = match &args.critical_request {
        Some(file) => Some(Workload::fake_file(file, &args.param_dir_or_default())?),
        None => None,
    };
    // Load (or generate) the parameters first: the figures are for proving, not set-up.
    let t = Instant::now();
    match &target {
        Target::Local(engine) => {
            let ids = std::iter::once(circuit_id.clone())
                .chain(critical.as_ref().map(Workload::circuit_id))
                .collect::<Vec<_>>();
            for id in ids {
                let engine = engine.clone();
                tokio::task::spawn_blocking(move || engine.preload_srs(&id)).await??;
            }
        }
        Target::Remote(addr) => {
            let mut client = cuzk_server::connect(addr)
                .await
                .with_context(|| format!("connecting to {addr}"))?;
            client
                .preload_srs(pb::PreloadSrsRequest {
                    circuit_id: circuit_id.clone(),
                })
                .await?;
        }
    }
    eprintln!(
        "srs {circuit_id} ready in {:.2} s",
        t.elapsed().as_secs_f64()
    );

    let (_, since_us) = timeline(&target, 0).await?;
    let started = Instant::now();
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for _ in 0..args.concurrency {
        let (target, next, workload) = (target.clone_handle(), next.clone(), workload.clone());
        let count = args.count;
        clients.push(tokio::spawn(async move {
            let mut client = match &target {
                Target::Remote(addr) => Some(cuzk_server::connect(addr).await?),
                Target::Local(_) => None,
            };
            let mut samples = Vec::new();
            loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= count {
                    break;
                }
                let (kind, request) = workload.job(i);
                samples.push(prove_one(&target, client.as_mut(), kind, request, priority).await?);
            }
            anyhow::Ok(samples)
        }));
    }
    let main_done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let critical_task = match (&target, &critical) {
        (Target::Local(engine), Some(w)) => Some(tokio::spawn(critical::run(
            engine.clone(),
            w.clone(),
            args.critical_count,
            Duration::from_millis(args.critical_gap_ms),
            main_done.clone(),
        ))),
        _ => None,
    };
    let mut samples = Vec::new();
    for c in clients {
        samples.extend(c.await??);
    }
    let wall = started.elapsed();
    main_done.store(true, std::sync::atomic::Ordering::Relaxed);
    let critical_samples = match critical_task {
        Some(task) => task.await??,
        None => Vec::new(),
    };
    let filecoin_checked = filecoin_check(&workload, &samples).await?;
    let (events, now_us) = timeline(&target, since_us).await?;
    let events: Vec<TimelineEvent> = events
        .into_iter()
        .filter(|e| e.start_us >= since_us)
        .collect();
    if let Some(w) = &critical {
        let gap = Duration::from_millis(args.critical_gap_ms);
        critical::report(w, gap, &critical_samples, &events);
    }
    // The main load's report is the load's alone.
    let events: Vec<TimelineEvent> = events
        .into_iter()
        .filter(|e| !critical_samples.iter().any(|c| c.job_id == e.job_id))
        .collect();
    let run = Run {
        args: &args,
        priority,
        workload: &workload,
        samples: &samples,
        wall,
        events: &events,
        from_us: since_us,
        to_us: now_us,
        // The daemon's memory is not ours to read.
        peak_rss_bytes: matches!(target, Target::Local(_))
            .then(peak_rss_bytes)
            .flatten(),
        filecoin_checked,
    };
    report(&run)?;
    if let Target::Local(engine) = target {
        for s in engine.srs_status() {
            eprintln!(
                "srs {}: tier {:?}, {} host bytes, loaded in {:.2} s",
                s.circuit_id,
                s.tier,
                s.size_bytes,
                s.load_time.as_secs_f64()
            );
        }
        // What the GPUs hold once the run is over: the recorded matrices (a, b, c computed
        // on the device) beside the resident SRSs.
        for d in engine.status().devices.iter().filter(|d| d.is_gpu) {
            let counters: String = d
                .counters
                .iter()
                .map(|(name, n)| format!(", {name} {n}"))
                .collect();
            eprintln!(
                "device {}: recorded matrices {} bytes in vram, busy {:.2} s, {} faults{counters}",
                d.name,
                d.matrices_vram_bytes,
                d.busy.as_secs_f64(),
                d.faults_total
            );
        }
        engine.shutdown(Duration::from_secs(10)).await;
    }
    if let Some(c) = filecoin_checked {
        if c.verified < c.completed {
            bail!(
                "filecoin-proofs rejected {} of {} completed proofs",
                c.completed - c.verified,
                c.completed
            );
        }
    }
    Ok(())
}

/// How many completed proofs filecoin-proofs' own verifier accepted.
#[derive(Clone, Copy, Debug)]
pub(super) struct FilecoinChecked {
    pub(super) completed: usize,
    pub(super) verified: usize,
}

/// Checks every completed proof of a real test sector with filecoin-proofs' verifier
/// against the sector's manifest (after the timed run: not part of the figures). `None`
/// for synthetic and fake workloads.
async fn filecoin_check(
    workload: &Workload,
    samples: &[Sample],
) -> anyhow::Result<Option<FilecoinChecked>> {
    let Some((kind, manifest)) = workload.filecoin_check() else {
        return Ok(None);
    };
    let (manifest, proofs) = (
        manifest.clone(),
        samples
            .iter()
            .filter(|s| s.ok)
            .map(|s| s.proof.clone())
            .collect::<Vec<_>>(),
    );
    tokio::task::spawn_blocking(move || {
        let mut verified = 0;
        for (i, proof) in proofs.iter().enumerate() {
            match cuzk_filecoin::testgen::verify_with_filecoin_proofs(kind, &manifest, proof) {
                Ok(true) => verified += 1,
                Ok(false) => eprintln!("proof {i}: filecoin-proofs says it does not verify"),
                Err(e) => eprintln!("proof {i}: filecoin-proofs could not check it: {e}"),
            }
        }
        Ok(Some(FilecoinChecked {
            completed: proofs.len(),
            verified,
        }))
    })
    .await?
}

impl Target {
    fn clone_handle(&self) -> Target {
        match self {
            Target::Local(e) => Target::Local(e.clone()),
            Target::Remote(a) => Target::Remote(a.clone()),
        }
    }
}

async fn prove_one(
    target: &Target,
    client: Option<&mut Client>,
    kind: ProofKindId,
    request: ProofRequest,
    priority: Priority,
) -> anyhow::Result<Sample> {
    let t = Instant::now();
    match (target, client) {
        (Target::Local(engine), _) => {
            let engine2 = engine.clone();
            let job = JobSpec {
                request_id: String::new(),
                kind,
                priority: Some(priority),
                request,
            };
            let out = tokio::task::spawn_blocking(move || engine2.submit(job)).await??;
            let AwaitOutcome::Finished(o) = engine.await_job(&out.job_id, None).await? else {
                bail!("await without a timeout timed out");
            };
            Ok(Sample {
                latency: t.elapsed(),
                ok: o.state == JobState::Completed,
                error: o.error.clone(),
                proof: o.proof.clone(),
            })
        }
        (Target::Remote(_), Some(client)) => {
            let submit = pb::SubmitProofRequest {
                proof_kind: cuzk_server::convert::proof_kind(kind) as i32,
                priority: match priority {
                    Priority::Low => pb::Priority::Low,
                    Priority::Normal => pb::Priority::Normal,
                    Priority::High => pb::Priority::High,
                    Priority::Critical => pb::Priority::Critical,
                } as i32,
                sector_size: request.sector_size,
                registered_proof: request.registered_proof,
                vanilla_proof: request.vanilla_proof,
                vanilla_proofs: request.vanilla_proofs,
                sector_number: request.sector_number,
                miner_id: request.miner_id,
                randomness: request.randomness,
                partition_index: request.partition_index,
                comm_r_old: request.comm_r_old,
                comm_r_new: request.comm_r_new,
                comm_d_new: request.comm_d_new,
                ..Default::default()
            };
            let r = client
                .prove(pb::ProveRequest {
                    submit: Some(submit),
                })
                .await?
                .into_inner();
            let r = r.result.context("ProveResponse without a result")?;
            let ok = r.status == pb::await_proof_response::Status::Completed as i32;
            Ok(Sample {
                latency: t.elapsed(),
                ok,
                error: r.error_message,
                proof: r.proof,
            })
        }
        (Target::Remote(_), None) => bail!("remote target without a client"),
    }
}

async fn timeline(target: &Target, since_us: u64) -> anyhow::Result<(Vec<TimelineEvent>, u64)> {
    match target {
        Target::Local(engine) => Ok(engine.timeline(since_us)),
        Target::Remote(addr) => {
            let mut client = cuzk_server::connect(addr).await?;
            let r = client
                .get_timeline(pb::GetTimelineRequest { since_us })
                .await?
                .into_inner();
            let events = r
                .events
                .into_iter()
                .filter_map(|e| {
                    Some(TimelineEvent {
                        stage: Stage::from_name(&e.stage)?,
                        job_id: e.job_id,
                        partition_idx: e.partition_idx,
                        detail: e.detail,
                        worker: e.worker,
                        device: e.device,
                        start_us: e.start_us,
                        end_us: e.end_us,
                    })
                })
                .collect();
            Ok((events, r.now_us))
        }
    }
}
