//! What the job-tracker tests share: the engine on the CPU backend over one parameter
//! directory, synthetic requests, and [`TestKind`], a proof kind that is the synthetic
//! kind (real synthesis, real proofs, real verification) under its own circuit id, with
//! hooks a test holds: gates that keep its synthesis or its SRS load waiting (a partition
//! or a cold load that takes as long as the test needs), injected failures, and a count of
//! its parsed requests still alive.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_engine::synthetic::{params_file, SyntheticProof, SyntheticSpec};
use cuzk_engine::{
    AwaitOutcome, Engine, EngineConfig, JobOutcome, JobSpec, KindRegistry, ParamsProvider,
    ProofKindId, ProofRequest,
};
use cuzk_groth16::{
    Assignment, KindError, PartitionedProof, Proof, Scalar, Synthesizer, VerifyingKey,
};
use parking_lot::{Condvar, Mutex};

/// One parameter directory for every test of this binary (the files are generated once).
pub fn param_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cuzk-engine-params")
}

/// An engine on the CPU backend serving the synthetic kind.
pub fn engine(cfg: EngineConfig) -> Engine {
    engine_with(cfg, KindRegistry::with_synthetic())
}

/// An engine on the CPU backend serving `registry`'s kinds.
pub fn engine_with(cfg: EngineConfig, registry: KindRegistry) -> Engine {
    let cfg = EngineConfig {
        param_dir: param_dir(),
        ..cfg
    };
    Engine::start(cfg, registry, Vec::new()).expect("engine starts")
}

/// A synthetic-payload request of `kind`.
pub fn spec_of(
    kind: ProofKindId,
    request_id: &str,
    log_n: u32,
    n_partitions: u32,
    seed: u64,
) -> JobSpec {
    JobSpec {
        request_id: request_id.into(),
        kind,
        priority: None,
        request: ProofRequest {
            vanilla_proof: SyntheticSpec {
                log_n,
                n_partitions,
                seed,
            }
            .encode(),
            ..ProofRequest::default()
        },
    }
}

/// A request of the synthetic kind.
pub fn spec(request_id: &str, log_n: u32, n_partitions: u32, seed: u64) -> JobSpec {
    spec_of(
        ProofKindId::Synthetic,
        request_id,
        log_n,
        n_partitions,
        seed,
    )
}

/// A runtime to await jobs on.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Awaits `job_id` for at most `limit`; panics naming the job if it does not finish.
pub fn finish(engine: &Engine, job_id: &str, limit: Duration) -> Arc<JobOutcome> {
    match runtime()
        .block_on(engine.await_job(job_id, Some(limit)))
        .expect("known job")
    {
        AwaitOutcome::Finished(o) => o,
        AwaitOutcome::Timeout => panic!("job {job_id} did not finish within {limit:?}"),
    }
}

/// Polls `cond` every 5 ms until it holds; panics with `what` after `limit`.
pub fn wait_until(what: &str, limit: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A door threads wait at while it is closed.
#[derive(Default)]
pub struct Gate {
    closed: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    /// Makes later arrivals wait.
    pub fn close(&self) {
        *self.closed.lock() = true;
    }

    /// Lets every waiter through.
    pub fn open(&self) {
        *self.closed.lock() = false;
        self.cv.notify_all();
    }

    /// Waits while the gate is closed.
    pub fn pass(&self) {
        let mut closed = self.closed.lock();
        while *closed {
            self.cv.wait(&mut closed);
        }
    }
}

/// What a test holds on the jobs of one [`TestKind`].
#[derive(Default)]
pub struct Hooks {
    /// Partition syntheses wait here.
    pub synthesis_gate: Gate,
    /// SRS loads (the parameters provider's `ensure`) wait here.
    pub load_gate: Gate,
    /// Syntheses that fail before later ones succeed.
    pub failures_left: AtomicUsize,
    /// When set, SRS loads fail.
    pub load_fails: AtomicBool,
    /// Syntheses started.
    pub syntheses_started: AtomicUsize,
    /// SRS loads started.
    pub loads_started: AtomicUsize,
    /// Parsed requests alive.
    pub live: AtomicUsize,
    /// The name of the thread each synthesis ran on.
    pub synthesis_threads: parking_lot::Mutex<Vec<String>>,
}

/// Registers `kinds` as a test kind with circuit ids `<name>-<log_n>` (parameters: the
/// synthetic ones of that size), on top of the synthetic kind.
pub fn register_test_kind(
    registry: &mut KindRegistry,
    name: &'static str,
    kinds: &[ProofKindId],
    hooks: Arc<Hooks>,
) {
    for &kind in kinds {
        let hooks = hooks.clone();
        registry.register(kind, move |req: &ProofRequest| {
            let inner = SyntheticProof::parse(req)?;
            hooks.live.fetch_add(1, Ordering::SeqCst);
            Ok(Arc::new(TestKind {
                name,
                inner,
                hooks: hooks.clone(),
            }) as Arc<dyn PartitionedProof>)
        });
    }
    registry.add_params(Arc::new(TestParams { name, hooks }));
}

/// The synthetic kind under circuit id `<name>-<log_n>`, with [`Hooks`].
pub struct TestKind {
    name: &'static str,
    inner: SyntheticProof,
    hooks: Arc<Hooks>,
}

impl Drop for TestKind {
    fn drop(&mut self) {
        self.hooks.live.fetch_sub(1, Ordering::SeqCst);
    }
}

impl PartitionedProof for TestKind {
    fn circuit_id(&self) -> String {
        format!("{}-{}", self.name, self.inner.spec().log_n)
    }

    fn params_path(&self, param_dir: &Path) -> PathBuf {
        params_file(param_dir, self.inner.spec().log_n)
    }

    fn num_partitions(&self) -> usize {
        self.inner.num_partitions()
    }

    fn partition_host_bytes(&self, synth: &Synthesizer) -> usize {
        self.inner.partition_host_bytes(synth)
    }

    fn synthesize(
        &self,
        synth: &Synthesizer,
        partition_idx: usize,
    ) -> Result<Assignment, KindError> {
        self.hooks.syntheses_started.fetch_add(1, Ordering::SeqCst);
        let thread = std::thread::current().name().unwrap_or("").to_string();
        self.hooks.synthesis_threads.lock().push(thread);
        self.hooks.synthesis_gate.pass();
        let failed = self
            .hooks
            .failures_left
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if failed {
            return Err(KindError::Synthesis {
                partition_idx,
                reason: "injected failure".into(),
            });
        }
        self.inner.synthesize(synth, partition_idx)
    }

    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError> {
        self.inner.public_inputs(partition_idx)
    }

    fn assemble_and_verify(
        &self,
        proofs: &[Proof],
        vk: &VerifyingKey,
    ) -> Result<Vec<u8>, KindError> {
        self.inner.assemble_and_verify(proofs, vk)
    }
}

/// `<name>-<log_n>` → the synthetic parameters of `log_n`, through the load gate.
struct TestParams {
    name: &'static str,
    hooks: Arc<Hooks>,
}

impl TestParams {
    fn log_n(&self, circuit_id: &str) -> Option<u32> {
        circuit_id
            .strip_prefix(self.name)?
            .strip_prefix('-')?
            .parse()
            .ok()
    }
}

impl ParamsProvider for TestParams {
    fn params_path(&self, circuit_id: &str, param_dir: &Path) -> Option<PathBuf> {
        self.log_n(circuit_id)
            .map(|log_n| params_file(param_dir, log_n))
    }

    fn ensure(&self, circuit_id: &str, path: &Path) -> Result<(), KindError> {
        self.hooks.loads_started.fetch_add(1, Ordering::SeqCst);
        self.hooks.load_gate.pass();
        if self.hooks.load_fails.load(Ordering::SeqCst) {
            return Err(KindError::Other(format!(
                "parameters for {circuit_id} cannot be read (injected)"
            )));
        }
        // The synthetic provider makes the file on first use.
        let log_n = self
            .log_n(circuit_id)
            .ok_or_else(|| KindError::Other(format!("{circuit_id} is not a test circuit id")))?;
        let synthetic_id = format!("synthetic-{log_n}");
        let dir = path.parent().unwrap_or(Path::new("."));
        let (provider, synthetic_path) = KindRegistry::with_synthetic()
            .resolve_params(&synthetic_id, dir)
            .ok_or_else(|| KindError::Other(format!("no provider for {synthetic_id}")))?;
        provider.ensure(&synthetic_id, &synthetic_path)
    }

    fn can_generate(&self, _circuit_id: &str) -> bool {
        true
    }
}
