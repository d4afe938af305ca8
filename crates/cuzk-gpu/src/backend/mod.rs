//! [`GpuBackend`]: cuzk-groth16's `Backend` on one device (issue #4). Per compute call:
//! host preparation (a, b, c and the density-compacted scalar vectors written straight into
//! the worker's pinned staging, batch by batch) and the upload into the worker's own device
//! slot (each batch copied on the copy stream while the next is written) run first,
//! outside the device's fair [`ComputeToken`]; the token is held
//! only from the first kernel to the one result download: seven NTTs and the quotient
//! kernel for H, then the five query sums (classification, batch addition of the ones,
//! Pippenger over the others; B in G2 too), all enqueued into the regions of one
//! [`plan::ProvePlan`] without waiting, the counts of the classification staying on the
//! device. With a resident SRS the four witness sums (L, A, B in G1 and G2) run on a second
//! stream of the device beside the quotient and the H sum, so that their short,
//! latency-bound phases fill the others' kernels ([`GpuBackendConfig::concurrent_sums`]). With two workers per device one worker's
//! preparation and upload overlap the other's kernels. The staging goes up as a, b, c, then
//! the witness vectors: when the token is free once a is on its way (a lone prove), it is
//! taken at once, and the rest is filled and uploaded while the quotient and the H sum run,
//! each kernel waiting only for the part it reads.
//!
//! Device memory is made once and reused: per-worker slots ([`crate::backend::slots`]), one
//! shared arena laid out by the prove plan (used only under the token), and the resident SRSs
//! ([`crate::backend::residency`]); each is re-made, logged, only when a larger shape arrives. An
//! SRS that does not fit the VRAM budget is streamed from host memory through pinned
//! staging instead ([`crate::backend::sums::enqueue_streamed`]).
//!
//! A second backend on the same card, built on a [`Device::critical`] handle with a budget
//! of its own, is a critical lane (#29): its token is its own, so it proves beside this
//! card's token holder, its kernels' blocks dispatched first by their stream priority.
//! That departs from one compute token per card on purpose: a WinningPoSt must not wait
//! for a PoRep partition's token. The two budgets are split by the caller so that they
//! never exceed the card's.

mod ahead;
pub mod budget;
pub mod combine;
mod fit;
mod handover;
mod host;
pub mod matrices;
mod params;
pub mod plan;
pub(crate) mod prepare;
mod prove;
pub mod residency;
pub mod ring;
mod run;
pub mod slots;
mod streamed;
pub mod sums;
mod uploads;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{
    Assignment, Backend, BackendError, ComputeToken, MsmOutputs, ProveReport, ProveStage, Srs,
};
use parking_lot::Mutex;

use crate::backend::budget::Fits;
use crate::backend::matrices::MatrixSet;
use crate::backend::plan::{Placement, ProvePlan};
use crate::backend::prepare::{shape_of_srs, validate};
use crate::backend::residency::{fingerprint, ResidentSet};
use crate::backend::slots::{SlotPool, SlotShape};
use crate::device::arena::VramArena;
use crate::device::pinned::{PinnedBuf, PinnedPool};
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::ops::msm::WindowTable;
use crate::tuning::tuning;

/// Where the SRS bases live during a compute.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Residency {
    /// Resident when it fits the VRAM budget (evicting idle SRSs), else streamed.
    #[default]
    Auto,
    /// Always resident (evicting idle SRSs; fails if the device runs out of memory).
    Resident,
    /// Always streamed from host memory.
    Streamed,
}

/// Settings of a [`GpuBackend`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuBackendConfig {
    /// Workers that call compute at once on this device: one device slot each.
    pub workers: usize,
    /// Device bytes the backend may hold in all (resident SRSs and their window tables,
    /// recorded matrices, the workers' slots, the shared prove arena: `budget.rs`);
    /// `None`: what is free when the backend first needs it, less `vram_reserve_bytes`.
    pub vram_budget_bytes: Option<u64>,
    /// Device bytes left to others (the driver, other processes' growth) by the default
    /// budget.
    pub vram_reserve_bytes: u64,
    /// SRS placement.
    pub residency: Residency,
    /// Bases per chunk when streaming: the largest tried; when no mode fits the budget
    /// with it, halves of it down to [`MIN_STREAM_CHUNK`] are tried (`fit`). Default 2^24:
    /// the H sum in 13 windows instead of 14 where the budget has room (a 24 GiB card
    /// since the split sums' chunks stop at `plan::SPLIT_CHUNK_MAX`; with 2^23, 2.304 s per
    /// 2^27 partition on an H100 with 24 GiB free, docs/runs). The SRS's placement and the
    /// workers do not change with it (`budget::choose_among`).
    pub stream_chunk_points: usize,
    /// Device bytes the window table of a resident SRS's H query (`msm/table.rs`) may take
    /// beyond the query itself; `None`: up to half of the budget left once the SRS is in
    /// (the other half stays for other SRSs); `Some(0)`: no table. The default is the
    /// process's `GpuTuning::h_table_max_bytes`.
    pub h_table_max_bytes: Option<u64>,
    /// Whether a resident prove runs the four witness sums (L, A, B in G1 and G2) on a
    /// second stream beside the quotient and the H sum, the H sum then taking scratch of
    /// its own. `None`: when that scratch is at most 1/32 of the device's memory (up to
    /// 2^25 on an H200: 4.4 GB, against 7.2 GB at 2^26 and 12.8 GB at 2^27, where the
    /// memory is worth more as window table rows). The default is the process's
    /// `GpuTuning::concurrent_sums`.
    pub concurrent_sums: Option<bool>,
    /// Whether a streamed SRS's chunks are copied straight from its host points, which
    /// the first streamed prove (or preload) registers with the driver, instead of through
    /// pinned bounce buffers filled by host threads. The default is the process's
    /// `!GpuTuning::no_host_registration`.
    pub register_streamed_srs: bool,
    /// Whether the sums of a streamed SRS keep accumulators across their chunks (the
    /// buckets and the ones' partial sums, reduced once after the last chunk): `None`
    /// where they take no more device bytes than one chunk of the sum's bases (the large
    /// sums, whose per-chunk reductions cost), `Some(true)` wherever a sum has several
    /// chunks (tests run the path on small circuits), `Some(false)` never.
    pub stream_accumulators: Option<bool>,
    /// Threads of each of the backend's own host pools (one per worker, each taken by one
    /// call: `host.rs`), in which a compute call's host work runs (the staging's fill,
    /// a, b, c evaluated on the host, the filler beside the kernels); `None`: the caller's
    /// pool (the process-wide one for a thread outside any pool). A critical lane has its
    /// own: its fill queued behind the process-wide pool's PoRep synthesis for 0.8 s
    /// (docs/runs/2026-12-06.md, seventh session).
    pub host_threads: Option<usize>,
}

impl Default for GpuBackendConfig {
    fn default() -> Self {
        GpuBackendConfig {
            workers: 2,
            vram_budget_bytes: None,
            vram_reserve_bytes: BUDGET_MARGIN,
            residency: Residency::Auto,
            stream_chunk_points: 1 << 24,
            h_table_max_bytes: tuning().h_table_max_bytes,
            concurrent_sums: tuning().concurrent_sums,
            register_streamed_srs: !tuning().no_host_registration,
            stream_accumulators: None,
            host_threads: None,
        }
    }
}

/// The GPU prover backend for one device.
pub struct GpuBackend {
    dev: Arc<Device>,
    cfg: GpuBackendConfig,
    token: ComputeToken,
    pinned: Arc<PinnedPool>,
    slots: SlotPool,
    // Used only under the token; the lock is uncontended.
    shared: Mutex<Option<Shared>>,
    shared_bytes: std::sync::atomic::AtomicU64,
    srs: ResidentSet,
    /// Recorded matrices of deferred assignments' shapes, in the same VRAM budget.
    matrices: MatrixSet,
    fault: Mutex<Option<ProveStage>>,
    /// The second stream of concurrent sums, made on first use.
    lane: std::sync::OnceLock<Arc<Device>>,
    /// The device's memory in bytes (0 if the query failed), read on first use.
    device_bytes: std::sync::OnceLock<u64>,
    /// Per slot shape, the others' counts of its last prove (L, A, B in G1, B in G2): the
    /// next plan's window widths for their MSMs (`plan.rs`).
    others_seen: Mutex<Vec<(SlotShape, [usize; 4])>>,
    /// The device budget in bytes, fixed on first use (`budget.rs`).
    budget: std::sync::OnceLock<u64>,
    /// The mode of each shape proved here (`budget.rs`), chosen on its first use.
    fit: Mutex<Fits>,
    /// Whether a prove has said that it evaluates a, b, c on the host (said once: every
    /// prove of the mode does).
    host_products_logged: AtomicBool,
    /// The stagings of a mode with one slot and more workers (`ahead.rs`).
    ahead: ahead::Ahead,
    /// Deferred assignments whose a, b, c the host evaluated (the others' the device).
    host_abc_calls: AtomicU64,
    /// Slots of the last streamed prove's ring (0 before any; `streamed.rs`).
    ring_slots: AtomicUsize,
    /// Traced only (`CUZK_GPU_TRACE`): events recorded on the compute stream at the host's
    /// steps between one traced prove's kernels and the next one's, written with the next
    /// trace line ([`GpuBackend::host_mark`]).
    host_marks: Mutex<Vec<(&'static str, cudarc::driver::CudaEvent)>>,
    /// The host pools of [`GpuBackendConfig::host_threads`], one per worker.
    host_pools: Option<host::HostPools>,
}

/// Host marks kept for the next trace line ([`GpuBackend::host_mark`]): one call's and the
/// previous one's return, with room to spare.
const HOST_MARKS_KEPT: usize = 16;

/// The arena of the prove plans (NTT tables, scratch, results) all workers share under the
/// token, and the pinned staging of streamed chunks.
struct Shared {
    arena: VramArena,
    stream_pins: [Option<PinnedBuf>; 2],
}

/// Margin left free on the device by the default VRAM budget.
const BUDGET_MARGIN: u64 = 1 << 30;

/// The smallest streamed chunk `fit` tries (points): below it the MSM launches per chunk
/// are too short to keep the device busy.
pub const MIN_STREAM_CHUNK: usize = 1 << 19;

impl GpuBackend {
    /// A backend on `dev` with the default configuration (kernels load on first use).
    pub fn new(dev: Arc<Device>) -> GpuBackend {
        GpuBackend::with_config(dev, GpuBackendConfig::default())
    }

    /// A backend on `dev` with `cfg`. Nothing is allocated until the first compute or
    /// [`GpuBackend::preload`].
    pub fn with_config(dev: Arc<Device>, cfg: GpuBackendConfig) -> GpuBackend {
        let host_pools = cfg
            .host_threads
            .and_then(|n| host::HostPools::new(dev.ordinal(), cfg.workers, n));
        GpuBackend {
            host_pools,
            pinned: PinnedPool::new(dev.clone()),
            slots: SlotPool::new(cfg.workers),
            dev,
            cfg,
            token: ComputeToken::new(),
            shared: Mutex::new(None),
            shared_bytes: Default::default(),
            srs: ResidentSet::default(),
            matrices: MatrixSet::default(),
            fault: Mutex::new(None),
            lane: std::sync::OnceLock::new(),
            device_bytes: std::sync::OnceLock::new(),
            others_seen: Mutex::new(Vec::new()),
            budget: std::sync::OnceLock::new(),
            fit: Mutex::new(Fits::default()),
            host_products_logged: AtomicBool::new(false),
            ahead: ahead::Ahead::default(),
            host_abc_calls: AtomicU64::new(0),
            host_marks: Mutex::new(Vec::new()),
            ring_slots: AtomicUsize::new(0),
        }
    }

    /// The device's memory in bytes (0 if the query failed).
    fn device_bytes(&self) -> u64 {
        *self
            .device_bytes
            .get_or_init(|| self.dev.mem_info().map_or(0, |(_, total)| total))
    }

    /// Most bytes the others' packed bases may take in a prove's scratch: 1/16 of the
    /// device (2^26 G1 points on an H200); a longer query's others are read through their
    /// indices instead, the memory being worth more as window-table rows.
    fn packed_max(&self) -> usize {
        usize::try_from(self.device_bytes() / 16).unwrap_or(usize::MAX)
    }

    /// The others' counts of the last prove of `shape`.
    fn hints(&self, shape: &SlotShape) -> Option<[usize; 4]> {
        let seen = self.others_seen.lock();
        seen.iter().find(|(s, _)| s == shape).map(|&(_, h)| h)
    }

    /// Keeps `others` as the counts of the last prove of `shape` (a few shapes at most).
    fn remember(&self, shape: &SlotShape, others: [usize; 4]) {
        let mut seen = self.others_seen.lock();
        seen.retain(|(s, _)| s != shape);
        if seen.len() >= 16 {
            seen.remove(0);
        }
        seen.push((*shape, others));
    }

    /// Whether resident proves of `shape` run the witness sums on a second stream
    /// ([`GpuBackendConfig::concurrent_sums`]): by default while the H sum's own scratch is
    /// at most 1/32 of the device.
    fn lanes(&self, shape: &SlotShape, n_h: usize, table: Option<WindowTable>) -> bool {
        self.cfg.concurrent_sums.unwrap_or_else(|| {
            let lanes = Placement::Resident { lanes: true, table };
            let plan = ProvePlan::new(shape, n_h, lanes, self.hints(shape), self.packed_max());
            plan.scratch[0].bytes as u64 <= self.device_bytes() / 32
        })
    }

    /// The second stream's handle, made on first use.
    fn lane(&self) -> Result<&Arc<Device>> {
        if let Some(l) = self.lane.get() {
            return Ok(l);
        }
        // Two racing callers would each make a stream; the loser's is dropped.
        let l = self.dev.lane()?;
        Ok(self.lane.get_or_init(|| l))
    }

    /// The configuration.
    pub fn config(&self) -> &GpuBackendConfig {
        &self.cfg
    }

    /// The device.
    pub fn device(&self) -> &Arc<Device> {
        &self.dev
    }

    /// The device's compute token (held by compute calls around their kernels).
    pub fn compute_token(&self) -> &ComputeToken {
        &self.token
    }

    /// Frees the resident SRSs and recorded matrices not in use; returns the bytes released.
    pub fn evict_all(&self) -> u64 {
        self.srs.evict_idle(&self.dev) + self.matrices.evict_idle(&self.dev)
    }

    /// Device bytes held by recorded matrices (`backend/matrices.rs`).
    pub fn matrices_bytes(&self) -> u64 {
        self.matrices.bytes()
    }

    /// Recorded-matrix uploads made so far (a second prove of a shape makes none).
    pub fn matrices_uploads(&self) -> u64 {
        self.matrices.uploads()
    }

    /// Deferred assignments proved here whose a, b, c the host evaluated.
    pub fn host_abc_calls(&self) -> u64 {
        self.host_abc_calls.load(Ordering::Relaxed)
    }

    /// Traced only: records an event named `what` on the compute stream for the next trace
    /// line. Between two proves' kernels the stream is idle, so the event completes when
    /// the host gets here and the line shows the host's steps on the device's clock (the
    /// slot, the copies enqueued, the token, the set-up; the previous prove's return).
    /// Never fails a prove: a driver error drops the mark.
    pub(crate) fn host_mark(&self, what: &'static str) {
        if tuning().trace.is_none() {
            return;
        }
        let Ok(ev) = self.dev.timing_event() else {
            return;
        };
        if self.dev.record(&ev).is_ok() {
            let mut marks = self.host_marks.lock();
            // Proves that write no trace line (resident ones) leave theirs: keep the last.
            if marks.len() >= HOST_MARKS_KEPT {
                marks.remove(0);
            }
            marks.push((what, ev));
        }
    }

    /// The marks recorded since the last trace line.
    pub(crate) fn take_host_marks(&self) -> Vec<(&'static str, cudarc::driver::CudaEvent)> {
        std::mem::take(&mut *self.host_marks.lock())
    }

    /// Slots of the ring of the last prove that streamed its sums through one (four a
    /// chunk buffer: 8 with the plan's two, up to 16 where the budget has room); 0 before.
    pub fn last_ring_slots(&self) -> usize {
        self.ring_slots.load(Ordering::Relaxed)
    }

    /// Worker slots made so far (at preload, or by the first proves).
    pub fn slots_made(&self) -> usize {
        self.slots.made()
    }

    /// Device bytes held by resident SRSs.
    pub fn resident_bytes(&self) -> u64 {
        self.srs.bytes()
    }

    /// Calls whose a, b, c the slot's previous holder sent before it was done with the
    /// slot (`handover.rs`) so far.
    pub fn abc_handovers(&self) -> u64 {
        self.ahead.hand.handed.load(Ordering::Relaxed)
    }

    /// SRS uploads made so far (a second prove with the same SRS makes none).
    pub fn srs_uploads(&self) -> u64 {
        self.srs.uploads()
    }

    /// Test hook: the next compute that reaches `stage` (prepare, upload, ntt_h, msm_h,
    /// msm_l, msm_a, msm_b_g1, msm_b_g2) issues a launch the driver rejects there and fails
    /// with `BackendError::Device` naming that stage. One-shot. [`ProveStage::HTable`]
    /// fails the H window table's build instead, which the prove outlives.
    pub fn inject_fault(&self, stage: ProveStage) {
        *self.fault.lock() = Some(stage);
    }

    /// The one step runner of a prove: `call` enters `next` (a failure from here on is
    /// reported as that stage's) and the fault injected there, if any, fails it.
    fn enter(&self, call: &prove::ProveCall<'_>, next: ProveStage) -> Result<()> {
        call.reached(next);
        self.fault_at(next)
    }

    /// A preload's failure, as the engine reports it.
    fn preload_error(&self, e: crate::error::GpuError) -> BackendError {
        BackendError::Device {
            device: format!("gpu:{}", self.dev.ordinal()),
            stage: ProveStage::PreloadSrs,
            message: e.to_string(),
        }
    }

    /// [`Backend::compute`] in the host pool `pool` (none: the caller's), which it entered
    /// `entered` after the call.
    fn compute_here(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
        entered: Duration,
        pool: Option<&rayon::ThreadPool>,
    ) -> Result<MsmOutputs, BackendError> {
        let t = Instant::now();
        // Only the assignment's own faults are the caller's; everything after is ours.
        let shape = validate(asg, srs).map_err(|e| BackendError::Mismatch {
            what: e.to_string(),
        })?;
        let validated = t.elapsed();
        let device_err = |stage, e: GpuError| match e {
            GpuError::SrsReleased => BackendError::SrsReleased,
            GpuError::SrsFile(e) => {
                tracing::warn!(
                    gpu = self.dev.ordinal(),
                    "{e}: the points are read back into host memory"
                );
                BackendError::SrsReleased
            }
            e @ GpuError::OverBudget { .. } => BackendError::TooLarge {
                what: e.to_string(),
            },
            e => BackendError::Device {
                device: format!("gpu:{}", self.dev.ordinal()),
                stage,
                message: e.to_string(),
            },
        };
        // A deferred assignment's a, b, c come from its recorded matrices on the device,
        // or, when they do not fit or the mode leaves them to the host (`AbcBy`), from the
        // CPU products, evaluated row by row straight into the pinned staging
        // (`prepare.rs`) from the witness with its values' kinds (`rows`).
        let mut rows = None;
        let matrices = match asg.deferred() {
            None => None,
            Some(r1cs) => match self.matrices_for(r1cs, &shape, srs) {
                Ok(Some(m)) => Some(m),
                Ok(None) => {
                    self.host_abc_calls.fetch_add(1, Ordering::Relaxed);
                    let z = r1cs
                        .row_witness(&asg.input_assignment, &asg.aux_assignment)
                        .map_err(|e| BackendError::Mismatch {
                            what: e.to_string(),
                        })?;
                    rows = Some(z);
                    if !self.host_products_logged.swap(true, Ordering::Relaxed) {
                        tracing::info!(
                            gpu = self.dev.ordinal(),
                            rows = r1cs.n_rows(),
                            "a, b, c evaluated on the cpu into the staging (the recorded matrices not in vram, or left to the host by the mode)"
                        );
                    }
                    None
                }
                Err(e) => return Err(device_err(ProveStage::Srs, e)),
            },
        };
        let looked_up = t.elapsed();
        self.note_slow_steps(
            "call setup",
            &[
                ("host pool", entered),
                ("validate", validated),
                ("matrices, or the host's row witness", looked_up - validated),
            ],
        );
        let matrices = matrices.as_deref();
        let call = prove::ProveCall::new(asg, shape, srs, matrices, rows.as_ref(), pool);
        let r = self.compute_inner(&call, report);
        r.map_err(|e| device_err(call.stage(), e))
    }

    fn fault_at(&self, stage: ProveStage) -> Result<()> {
        let hit = {
            let mut f = self.fault.lock();
            if *f == Some(stage) {
                f.take()
            } else {
                None
            }
        };
        match hit {
            Some(_) => {
                tracing::warn!(gpu = self.dev.ordinal(), %stage, "injected fault");
                self.dev.invalid_launch()
            }
            None => Ok(()),
        }
    }
}

impl Backend for GpuBackend {
    fn name(&self) -> String {
        format!("gpu:{}", self.dev.ordinal())
    }

    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError> {
        let queued = Instant::now();
        self.on_host_pool(|pool| self.compute_here(asg, srs, report, queued.elapsed(), pool))
    }

    fn owns_compute_token(&self) -> bool {
        true
    }

    fn srs_device_bytes(&self, srs: &Srs) -> u64 {
        self.srs.peek(&fingerprint(srs)).map_or(0, |r| r.bytes())
    }

    fn matrices_device_bytes(&self) -> u64 {
        self.matrices.bytes()
    }

    fn host_pinned_bytes(&self) -> u64 {
        self.pinned.made_bytes()
    }

    fn vram_budget_bytes(&self) -> u64 {
        GpuBackend::vram_budget_bytes(self)
    }

    fn vram_used_bytes(&self) -> u64 {
        GpuBackend::vram_used_bytes(self)
    }

    fn proving_mode(&self) -> String {
        self.chosen_fit().map(|f| f.to_string()).unwrap_or_default()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("abc handed over", self.abc_handovers()),
            ("abc by the host", self.host_abc_calls()),
            ("ring slots", self.last_ring_slots() as u64),
        ]
    }

    fn preload_srs(&self, srs: &Srs) -> Result<u64, BackendError> {
        self.preload(srs).map_err(|e| self.preload_error(e))
    }

    fn preload_matrices(
        &self,
        srs: &Srs,
        r1cs: &cuzk_groth16::recorded::R1cs,
    ) -> Result<u64, BackendError> {
        self.matrices_for(r1cs, &shape_of_srs(srs), srs)
            .map(|m| m.map_or(0, |m| m.bytes()))
            .map_err(|e| self.preload_error(e))
    }

    fn evict_srs(&self, srs: &Srs) -> u64 {
        self.srs.evict_idle_one(&self.dev, &fingerprint(srs))
    }

    fn streams_srs_from_file(&self, srs: &Srs) -> bool {
        let shape = shape_of_srs(srs);
        matches!(self.fit(srs, &shape), Ok(f) if !f.srs_resident) && self.srs_device_bytes(srs) == 0
    }
}
