//! [`GpuBackend`]: cuzk-groth16's `Backend` on one device (issue #4). Per compute call:
//! host preparation (a, b, c and the density-compacted scalar vectors written straight into
//! the worker's pinned staging, batch by batch) and the upload into the worker's own device
//! slot (each batch copied on the copy stream while the next is written) run first,
//! outside the device's fair [`ComputeToken`]; the token is held
//! only from the first kernel to the last result download: seven NTTs and the quotient
//! kernel for H, then the five query sums (classification, batch addition of the ones,
//! Pippenger over the others; B in G2 too). With a resident SRS the four witness sums (L,
//! A, B in G1 and G2) run on a second stream of the device beside the quotient and the H
//! sum, so that their short, latency-bound phases fill the others' kernels
//! ([`GpuBackendConfig::concurrent_sums`]). With two workers per device one worker's
//! preparation and upload overlap the other's kernels. The staging goes up as a, b, c, then
//! the witness vectors: when the token is free once a is on its way (a lone prove), it is
//! taken at once, and the rest is filled and uploaded while the quotient and the H sum run,
//! each kernel waiting only for the part it reads.
//!
//! Device memory is made once and reused: per-worker slots ([`crate::slots`]), one shared
//! scratch with the NTT tables (used only under the token), and the resident SRSs
//! ([`crate::residency`]); each is re-made, logged, only when a larger shape arrives. An
//! SRS that does not fit the VRAM budget is streamed from host memory through pinned
//! staging instead ([`crate::sums::sum_streamed`]).

use std::sync::Arc;
use std::time::Instant;

use cuzk_groth16::{Assignment, Backend, BackendError, ComputeToken, MsmOutputs, ProveReport, Srs};
use parking_lot::Mutex;

use crate::arena::{DevRegion, Scratch, VramArena, ALIGN};
use crate::device::{Device, StageTimer};
use crate::error::{GpuError, Result};
use crate::layout::{as_bytes, FR_BYTES, G2_AFFINE_BYTES};
use crate::msm::{build_table_g1, msm_table_g1, scratch_bytes, table_scratch_bytes};
use crate::msm::{Group, WindowTable};
use crate::ntt::NttPlan;
use crate::pinned::{PinnedBuf, PinnedPool};
use crate::prepare::{
    fill_batched, pieces_within, shape_of_srs, staging_pieces, validate, UPLOAD_BATCH,
};
use crate::residency::{fingerprint, resident_size, Admit, Query, ResidentSet, ResidentSrs};
use crate::slots::{SlotPool, SlotShape, SlotVec, SlotVecs};
use crate::sums::{sum_resident, sum_scratch_bytes, sum_streamed, GroupOps, StreamBufs};
use crate::sums::{G1_OPS, G2_OPS};

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
    /// Device bytes resident SRSs may take; `None`: what is free when an SRS is loaded,
    /// less the slots and scratch still to be made and a 1 GiB margin.
    pub vram_budget_bytes: Option<u64>,
    /// SRS placement.
    pub residency: Residency,
    /// Bases per chunk when streaming.
    pub stream_chunk_points: usize,
    /// Device bytes the window table of a resident SRS's H query (`msm/table.rs`) may take
    /// beyond the query itself; `None`: up to half of the budget left once the SRS is in
    /// (the other half stays for other SRSs); `Some(0)`: no table. The default is `None`,
    /// or `Some(0)` when the environment has `CUZK_GPU_H_TABLE=0`.
    pub h_table_max_bytes: Option<u64>,
    /// Whether a resident prove runs the four witness sums (L, A, B in G1 and G2) on a
    /// second stream beside the quotient and the H sum, the H sum then taking scratch of
    /// its own. `None`: when that scratch is at most 1/32 of the device's memory (up to
    /// 2^25 on an H200: 4.4 GB, against 7.2 GB at 2^26 and 12.8 GB at 2^27, where the
    /// memory is worth more as window table rows). The default is `None`, or `Some(false)`
    /// when the environment has `CUZK_GPU_LANES=1`.
    pub concurrent_sums: Option<bool>,
}

/// `Some(0)` (no window tables) when `CUZK_GPU_H_TABLE` is `0` or `off`.
fn h_table_from_env() -> Option<u64> {
    matches!(
        std::env::var("CUZK_GPU_H_TABLE").as_deref(),
        Ok("0") | Ok("off")
    )
    .then_some(0)
}

/// `Some(false)` (the sums one after another on one stream) when `CUZK_GPU_LANES` is `1`.
fn lanes_from_env() -> Option<bool> {
    matches!(std::env::var("CUZK_GPU_LANES").as_deref(), Ok("1")).then_some(false)
}

impl Default for GpuBackendConfig {
    fn default() -> Self {
        GpuBackendConfig {
            workers: 2,
            vram_budget_bytes: None,
            residency: Residency::Auto,
            stream_chunk_points: 1 << 22,
            h_table_max_bytes: h_table_from_env(),
            concurrent_sums: lanes_from_env(),
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
    fault: Mutex<Option<String>>,
    /// The second stream of concurrent sums, made on first use.
    lane: std::sync::OnceLock<Arc<Device>>,
    /// The device's memory in bytes (0 if the query failed), read on first use.
    device_bytes: std::sync::OnceLock<u64>,
}

/// The scratch and NTT tables all workers share under the token, and the pinned staging
/// of streamed chunks.
struct Shared {
    arena: VramArena,
    stream_pins: Option<[PinnedBuf; 2]>,
}

/// Margin left free on the device by the default VRAM budget.
const BUDGET_MARGIN: u64 = 1 << 30;

impl GpuBackend {
    /// A backend on `dev` with the default configuration (kernels load on first use).
    pub fn new(dev: Arc<Device>) -> GpuBackend {
        GpuBackend::with_config(dev, GpuBackendConfig::default())
    }

    /// A backend on `dev` with `cfg`. Nothing is allocated until the first compute or
    /// [`GpuBackend::preload`].
    pub fn with_config(dev: Arc<Device>, cfg: GpuBackendConfig) -> GpuBackend {
        GpuBackend {
            pinned: PinnedPool::new(dev.clone()),
            slots: SlotPool::new(cfg.workers),
            dev,
            cfg,
            token: ComputeToken::new(),
            shared: Mutex::new(None),
            shared_bytes: Default::default(),
            srs: ResidentSet::default(),
            fault: Mutex::new(None),
            lane: std::sync::OnceLock::new(),
            device_bytes: std::sync::OnceLock::new(),
        }
    }

    /// Whether resident proves of `shape` run the witness sums on a second stream
    /// ([`GpuBackendConfig::concurrent_sums`]).
    fn lanes(&self, shape: &SlotShape) -> bool {
        self.cfg.concurrent_sums.unwrap_or_else(|| {
            let total = *self
                .device_bytes
                .get_or_init(|| self.dev.mem_info().map_or(0, |(_, total)| total));
            h_scratch_bytes(shape) as u64 <= total / 32
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

    /// Makes `srs` resident now; returns its device bytes, 0 under [`Residency::Streamed`].
    ///
    /// # Errors
    /// [`GpuError::Input`] when it does not fit the budget (under [`Residency::Auto`]);
    /// allocation or upload errors.
    pub fn preload(&self, srs: &Srs) -> Result<u64> {
        if self.cfg.residency == Residency::Streamed {
            return Ok(0);
        }
        let shape = shape_of_srs(srs);
        match self.resident_for(srs, &shape)? {
            Some(r) => Ok(r.bytes()),
            None => Err(GpuError::Input(format!(
                "srs of {} bytes does not fit the vram budget",
                resident_size(srs)
            ))),
        }
    }

    /// Frees the resident SRSs not in use; returns the bytes released.
    pub fn evict_all(&self) -> u64 {
        self.srs.evict_idle(&self.dev)
    }

    /// Device bytes held by resident SRSs.
    pub fn resident_bytes(&self) -> u64 {
        self.srs.bytes()
    }

    /// SRS uploads made so far (a second prove with the same SRS makes none).
    pub fn srs_uploads(&self) -> u64 {
        self.srs.uploads()
    }

    /// Test hook: the next compute that reaches `stage` ("prepare", "upload", "ntt_h",
    /// "msm_h", "msm_l", "msm_a", "msm_b_g1", "msm_b_g2") issues a launch the driver
    /// rejects there and fails with `BackendError::Device` naming that stage. One-shot.
    /// "h_table" fails the H window table's build instead, which the prove outlives.
    pub fn inject_fault(&self, stage: &str) {
        *self.fault.lock() = Some(stage.to_string());
    }

    fn fault_at(&self, stage: &'static str) -> Result<()> {
        let hit = {
            let mut f = self.fault.lock();
            if f.as_deref() == Some(stage) {
                f.take()
            } else {
                None
            }
        };
        match hit {
            Some(_) => {
                tracing::warn!(gpu = self.dev.ordinal(), stage, "injected fault");
                self.dev.invalid_launch()
            }
            None => Ok(()),
        }
    }

    /// The resident copy of `srs`, loading it if the residency policy and budget allow.
    fn resident_for(&self, srs: &Srs, shape: &SlotShape) -> Result<Option<Arc<ResidentSrs>>> {
        if self.cfg.residency == Residency::Streamed {
            return Ok(None);
        }
        let fp = fingerprint(srs);
        let resident = self
            .srs
            .get_or_load(&self.dev, &self.pinned, srs, &fp, |need| {
                let budget = match self.cfg.vram_budget_bytes {
                    Some(b) => b,
                    None => {
                        let (free, _) = self.dev.mem_info()?;
                        let need = shared_need(shape, true, 0, self.lanes(shape));
                        let grow = (need as u64).saturating_sub(
                            self.shared_bytes.load(std::sync::atomic::Ordering::Relaxed),
                        );
                        let reserve = self.slots.unmade() as u64 * shape.bytes() as u64
                            + grow
                            + BUDGET_MARGIN;
                        self.srs.bytes() + free.saturating_sub(reserve)
                    }
                };
                let fits = self.srs.make_room(&self.dev, need, budget);
                if !fits {
                    tracing::info!(
                        gpu = self.dev.ordinal(),
                        need,
                        budget,
                        "srs does not fit the vram budget"
                    );
                }
                if !fits && self.cfg.residency != Residency::Resident {
                    return Ok(Admit::No);
                }
                let left = budget.saturating_sub(self.srs.bytes() + need);
                let table_bytes = match self.cfg.h_table_max_bytes {
                    _ if !fits => 0,
                    Some(max) => max.min(left),
                    None => left / 2,
                };
                Ok(Admit::Yes { table_bytes })
            })?;
        if let Some(r) = &resident {
            self.build_table(r);
        }
        Ok(resident)
    }

    /// Builds the H window table of `r` if it has one still unbuilt, under the compute
    /// token (its kernels must not run inside another prove's kernels' time). A failed
    /// build is logged and the table given up: the sums then use the plain MSM, and a
    /// device left unusable fails the prove at its next kernel, with that stage.
    fn build_table(&self, r: &ResidentSrs) {
        let Some(t) = r.table_pending() else {
            return;
        };
        let _token = self.token.acquire();
        let start = Instant::now();
        let built = r.build_table(|h, t| {
            self.fault_at("h_table")?;
            build_table_g1(&self.dev, h, t)?;
            self.dev.sync_compute()
        });
        match built {
            Ok(true) => tracing::info!(
                gpu = self.dev.ordinal(),
                c = t.c,
                sets = t.sets,
                rows = t.rows(),
                bytes = t.bytes(),
                ms = start.elapsed().as_millis() as u64,
                "h window table built"
            ),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                gpu = self.dev.ordinal(),
                "h window table not built, proving without it: {e}"
            ),
        }
    }

    /// The window table of the H query of `srs`, when it is resident with one built.
    pub fn h_table(&self, srs: &Srs) -> Option<WindowTable> {
        self.srs.peek(&fingerprint(srs)).and_then(|r| r.table())
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
        let mut stage = "prepare";
        let r = self.compute_inner(asg, srs, report, &mut stage);
        r.map_err(|e| match e {
            GpuError::Input(what) if stage == "prepare" => BackendError::Mismatch { what },
            other => BackendError::Device {
                device: format!("gpu:{}", self.dev.ordinal()),
                stage: stage.to_string(),
                message: other.to_string(),
            },
        })
    }

    fn owns_compute_token(&self) -> bool {
        true
    }

    fn srs_device_bytes(&self, srs: &Srs) -> u64 {
        self.srs.peek(&fingerprint(srs)).map_or(0, |r| r.bytes())
    }

    fn preload_srs(&self, srs: &Srs) -> Result<u64, BackendError> {
        self.preload(srs).map_err(|e| BackendError::Device {
            device: format!("gpu:{}", self.dev.ordinal()),
            stage: "preload_srs".into(),
            message: e.to_string(),
        })
    }

    fn evict_srs(&self, srs: &Srs) -> u64 {
        self.srs.evict_idle_one(&self.dev, &fingerprint(srs))
    }
}

/// Bytes of the shared arena: NTT tables plus the sums' scratch (resident; with `lanes`,
/// the H sum's and the witness sums' apart) or the two chunk buffers and one chunk's
/// scratch (streamed).
fn shared_need(shape: &SlotShape, resident: bool, chunk: usize, lanes: bool) -> usize {
    let sums = if resident && lanes {
        h_scratch_bytes(shape) + ALIGN + sum_scratch_bytes(shape.n_l.max(shape.n_a).max(shape.n_b))
    } else if resident {
        sum_scratch_bytes(shape.max_query())
    } else {
        2 * chunk * G2_AFFINE_BYTES + sum_scratch_bytes(chunk) + 2 * ALIGN
    };
    NttPlan::table_bytes(shape.lg) + sums + (8 << 20)
}

/// Scratch of the H sum alone (2^lg − 1 points in bellperson's parameters): its plain
/// MSM, which holds the MSM over a window table of the same points too (a unit test in
/// `msm/table.rs`).
fn h_scratch_bytes(shape: &SlotShape) -> usize {
    let n = 1usize << shape.lg;
    scratch_bytes(Group::G1, n - 1).max(scratch_bytes(Group::G1, n))
}

/// Where the bases come from in the kernel section: resident (the five query regions, the
/// H window table if built, the scratch) or streamed.
enum Bases<'a> {
    Resident([DevRegion<'a>; 5], Option<WindowTable>, DevRegion<'a>),
    Streamed(StreamBufs<'a>, &'a Srs),
}

impl Bases<'_> {
    /// The H sum: over the window table when there is one (and the scratch holds its MSM),
    /// else as every other sum.
    fn sum_h(
        &mut self,
        dev: &Arc<Device>,
        scalars: &DevRegion<'_>,
        n: usize,
    ) -> Result<blstrs::G1Projective> {
        if let Bases::Resident(r, Some(t), scratch) = self {
            if t.n == n && table_scratch_bytes(t) <= scratch.bytes() {
                let scratch = Scratch::within(scratch);
                let scalars = scalars.slice(0, n * FR_BYTES)?;
                return msm_table_g1(dev, &scratch, &r[Query::H as usize], t, &scalars, n);
            }
            // The shared scratch is sized for the plain sums, which need more at every
            // size the tables are chosen for: this would be a sizing mistake.
            tracing::warn!(
                gpu = dev.ordinal(),
                need = table_scratch_bytes(t),
                have = scratch.bytes(),
                n,
                table_n = t.n,
                "h window table not used: scratch too small or another length"
            );
        }
        self.sum(dev, &G1_OPS, Query::H, scalars, n, false)
    }

    #[allow(clippy::too_many_arguments)]
    fn sum<P: group::Group>(
        &mut self,
        dev: &Arc<Device>,
        ops: &GroupOps<P>,
        q: Query,
        scalars: &DevRegion<'_>,
        n: usize,
        split: bool,
    ) -> Result<P> {
        let scalars = scalars.slice(0, n * FR_BYTES)?;
        match self {
            Bases::Resident(r, _, scratch) => {
                sum_resident(dev, scratch, ops, &r[q as usize], &scalars, n, split)
            }
            Bases::Streamed(sb, srs) => {
                let host = match q {
                    Query::H => as_bytes(&srs.h),
                    Query::L => as_bytes(&srs.l),
                    Query::A => as_bytes(&srs.a),
                    Query::BG1 => as_bytes(&srs.b_g1),
                    Query::BG2 => as_bytes(&srs.b_g2),
                };
                sum_streamed(dev, sb, ops, host, &scalars, n, split)
            }
        }
    }
}

impl GpuBackend {
    fn compute_inner(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
        stage: &mut &'static str,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        *stage = "prepare";
        let t = Instant::now();
        let shape = validate(asg, srs)?;
        self.fault_at("prepare")?;
        let mut slot = self.slots.take(dev, &self.pinned, &shape)?;
        let pieces = staging_pieces(&shape, asg);
        report.push("prepare", t.elapsed());

        *stage = "srs";
        let t = Instant::now();
        let resident = self.resident_for(srs, &shape)?;
        report.push("srs", t.elapsed());

        // The staging is filled batch by batch, each batch's copy enqueued on the copy
        // stream as soon as it is written, in four parts: a, b, c (the quotient's inputs, in
        // the order it reads them), then the witness vectors; an event is recorded after
        // each part's copies. If the token is free once a is on its way, the kernels start
        // on it: b, c and the witness are filled and copied on another thread, and the
        // compute stream waits for each part's event just before its first reader
        // (`ready`). Otherwise the whole staging is filled first, under the other worker's
        // kernels, and then the token is waited for. "fill" is the host time of filling,
        // "upload" the host wait for the last copy after it, with the device time from the
        // first copy's start to the last one's end.
        *stage = "upload";
        self.fault_at("upload")?;
        let t = Instant::now();
        let (e0, e_end) = (dev.timing_event()?, dev.timing_event()?);
        let parts_done = [
            dev.timing_event()?,
            dev.timing_event()?,
            dev.timing_event()?,
            dev.timing_event()?,
        ];
        dev.record_on_copy(&e0)?;
        let (lay, total) = shape.layout();
        let bounds = [
            0,
            lay[SlotVec::B as usize].0,
            lay[SlotVec::C as usize].0,
            lay[SlotVec::L as usize].0,
            total,
        ];
        let (used, staging) = slot.upload_parts(&shape)?;
        let vecs = SlotVecs::new(&used, &shape)?;
        let upload = |bytes: &[u8], off: usize| -> Result<()> {
            let dst = used.slice(off, bytes.len())?;
            // SAFETY: the batch's staging bytes are not written again before the copy stream
            // is drained (`drain` below, on every path, also when a later batch fails); the
            // slot's device buffers are ours alone (no queued kernel uses them: the last
            // user's final download, or its error path, synchronized the compute stream).
            unsafe { dev.upload_on_copy(&dst, bytes) }
        };
        // Records `ev` after every copy enqueued so far and waits for it: the staging may
        // then be reused.
        let drain = |ev: &cudarc::driver::CudaEvent| {
            dev.record_on_copy(ev).and_then(|()| dev.wait_event(ev))
        };
        // Part k (0..4: a, b, c, the witness vectors): filled, its copies enqueued, its
        // event recorded.
        let fill_part = |staging: &mut [u8], k: usize| {
            let range = bounds[k]..bounds[k + 1];
            let mine = pieces_within(&pieces, &range);
            fill_batched(staging, range, mine, UPLOAD_BATCH, upload)
                .and_then(|()| dev.record_on_copy(&parts_done[k]))
        };
        if let Err(e) = fill_part(staging, 0) {
            let _ = drain(&e_end);
            return Err(e);
        }
        let mut fill = t.elapsed();
        let early = self.token.try_acquire();
        let overlapped = early.is_some();
        let token = match early {
            Some(token) => {
                report.push("token_wait", std::time::Duration::ZERO);
                token
            }
            None => {
                let t = Instant::now();
                let rest = (1..4).try_for_each(|k| fill_part(staging, k));
                report.push("fill", fill + t.elapsed());
                let t = Instant::now();
                let waited = drain(&e_end);
                rest?;
                waited?;
                report.push_device("upload", t.elapsed(), dev.elapsed(&e0, &e_end)?);
                *stage = "token_wait";
                let t = Instant::now();
                let token = self.token.acquire();
                report.push("token_wait", t.elapsed());
                token
            }
        };
        let held = Instant::now();
        let mut shared = self.shared.lock();
        let out = std::thread::scope(|scope| {
            // With the token taken early, b, c and the witness vectors are filled and copied
            // on another thread, which says when each part's event is recorded; `ready(k)`,
            // called before the first kernel that reads part k, waits for that and makes the
            // compute stream wait for the event. For the witness (k = 3), called by the sums
            // before the first sum over witness scalars, it joins the thread.
            let (tx, rx) = std::sync::mpsc::channel::<usize>();
            let mut filler = overlapped.then(|| {
                let fill_part = &fill_part;
                scope.spawn(move || {
                    let t = Instant::now();
                    let r = (1..4).try_for_each(|k| {
                        fill_part(staging, k)?;
                        // The receiver is gone only when the kernels failed: nothing waits.
                        let _ = tx.send(k);
                        Ok(())
                    });
                    (r, t.elapsed())
                })
            });
            let mut recorded = 1usize;
            let fill = &mut fill;
            let parts_done = &parts_done;
            // Moved into the closure: it may run on the witness sums' thread.
            let mut ready = move |k: usize, d: &Device| -> Result<()> {
                if !overlapped {
                    return Ok(());
                }
                if k < 3 {
                    while recorded <= k {
                        match rx.recv() {
                            Ok(j) => recorded = j + 1,
                            // The filler stopped early: its error comes from the join below.
                            Err(_) => break,
                        }
                    }
                }
                if recorded <= k {
                    let Some(f) = filler.take() else {
                        return Err(GpuError::Input("the staging fill stopped".into()));
                    };
                    let (r, took) = f
                        .join()
                        .map_err(|_| GpuError::Input("the staging fill panicked".into()))?;
                    *fill += took;
                    r?;
                    recorded = 4;
                }
                d.wait_on(&parts_done[k])
            };
            let out = self.kernels(
                &mut shared,
                &vecs,
                &shape,
                srs,
                resident.as_deref(),
                report,
                stage,
                &mut ready,
            );
            // A failure before the sums reached the witness: still join the filler.
            let joined = ready(3, dev);
            out.and_then(|o| joined.map(|()| o))
        });
        if out.is_err() {
            // Queued kernels may still use the slot and the scratch: let them drain before
            // the slot goes back and the token passes on (errors here are secondary).
            let _ = dev.sync_compute();
        }
        let out = if overlapped {
            // The copies are done (the sums waited for them) unless the fill failed midway;
            // the witness part's event stays where the filler recorded it, after the last
            // copy.
            let waited = drain(&e_end);
            report.push("fill", fill);
            out.and_then(|o| {
                waited?;
                let device = dev.elapsed(&e0, &parts_done[3])?;
                report.push_device("upload", std::time::Duration::ZERO, device);
                Ok(o)
            })
        } else {
            out
        };
        report.token_held = Some(held.elapsed());
        drop(shared);
        drop(token);
        out
    }

    /// The token-held part: the quotient and the five sums; `ready(k, d)` is called before
    /// the first kernel that reads upload part k (0, 1, 2: a, b, c; 3: the witness vectors)
    /// and makes `d`'s compute stream wait for that part's copies.
    #[allow(clippy::too_many_arguments)]
    fn kernels(
        &self,
        shared: &mut Option<Shared>,
        vecs: &SlotVecs<'_>,
        shape: &SlotShape,
        srs: &Srs,
        resident: Option<&ResidentSrs>,
        report: &mut ProveReport,
        stage: &mut &'static str,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        *stage = "gpu_setup";
        let t = Instant::now();
        let chunk = self.cfg.stream_chunk_points.clamp(1, shape.max_query());
        let lane = if resident.is_some() && self.lanes(shape) {
            Some(self.lane()?)
        } else {
            None
        };
        let need = shared_need(shape, resident.is_some(), chunk, lane.is_some());
        if shared.as_ref().is_none_or(|s| s.arena.size() < need) {
            // Free the old one first: both may not fit.
            let old = shared.take().map(|s| s.arena.size());
            tracing::info!(gpu = dev.ordinal(), bytes = need, old_bytes = ?old, "shared scratch made");
            *shared = Some(Shared {
                arena: VramArena::new(dev.clone(), need)?,
                stream_pins: None,
            });
            self.shared_bytes
                .store(need as u64, std::sync::atomic::Ordering::Relaxed);
        }
        let sh = shared
            .as_mut()
            .ok_or_else(|| GpuError::Input("shared scratch missing".into()))?;
        if resident.is_none() {
            let pin_bytes = chunk * G2_AFFINE_BYTES;
            if sh
                .stream_pins
                .as_ref()
                .is_none_or(|p| p.iter().any(|b| b.len() < pin_bytes))
            {
                sh.stream_pins = None;
                sh.stream_pins = Some([self.pinned.take(pin_bytes)?, self.pinned.take(pin_bytes)?]);
            }
        }
        sh.arena.reset();
        let arena = &sh.arena;
        let plan = NttPlan::new(dev, arena, shape.lg)?;
        let mut timer = StageTimer::start(dev)?;
        report.push("gpu_setup", t.elapsed());

        // H = (A·B − C)/Z on the coset g·H; its coefficients land in the B slot.
        *stage = "ntt_h";
        self.fault_at("ntt_h")?;
        let abc = [
            vecs.get(SlotVec::A),
            vecs.get(SlotVec::B),
            vecs.get(SlotVec::C),
        ];
        plan.quotient_staged(dev, [&abc[0], &abc[1], &abc[2]], &mut |k| ready(k, dev))?;
        timer.mark("ntt_h")?;

        let sums = Sums {
            vecs,
            shape,
            srs,
            h_coeffs: abc[1],
        };
        let used = arena.used().next_multiple_of(ALIGN);
        // The arena from `at` to its end.
        let rest = |at: usize| arena.region(at, arena.size().saturating_sub(at));
        let mut bases = match resident {
            Some(r) => {
                return r.with_regions(|q| match lane {
                    None => {
                        let mut b = Bases::Resident(q, r.table(), rest(used)?);
                        self.sums(&mut b, &sums, timer, report, stage, ready)
                    }
                    Some(lane) => {
                        let h_bytes = h_scratch_bytes(shape);
                        let bases = [
                            Bases::Resident(q, r.table(), arena.region(used, h_bytes)?),
                            Bases::Resident(
                                q,
                                None,
                                rest((used + h_bytes).next_multiple_of(ALIGN))?,
                            ),
                        ];
                        self.sums_beside(lane, bases, &sums, timer, report, stage, ready)
                    }
                });
            }
            None => {
                let bufb = chunk * G2_AFFINE_BYTES;
                let d1_at = (used + bufb).next_multiple_of(ALIGN);
                let s_at = (d1_at + bufb).next_multiple_of(ALIGN);
                let d0 = arena.region(used, bufb)?;
                let d1 = arena.region(d1_at, bufb)?;
                let scratch = rest(s_at)?;
                let pins = sh
                    .stream_pins
                    .as_mut()
                    .ok_or_else(|| GpuError::Input("stream staging missing".into()))?;
                Bases::Streamed(
                    StreamBufs {
                        device: [d0, d1],
                        pinned: pins,
                        scratch,
                        chunk,
                    },
                    srs,
                )
            }
        };
        self.sums(&mut bases, &sums, timer, report, stage, ready)
    }

    /// The five query sums one after another on the device's stream, each a timed stage;
    /// then waits for the device and reports the timer's stages.
    fn sums(
        &self,
        bases: &mut Bases<'_>,
        s: &Sums<'_>,
        mut timer: StageTimer<'_>,
        report: &mut ProveReport,
        stage: &mut &'static str,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let h = self.sum_h(dev, bases, s, &mut timer, stage)?;
        let w = self.witness_sums(dev, bases, s, &mut timer, stage, ready)?;
        dev.sync_compute()?;
        timer.finish(report)?;
        Ok(w.with_h(h))
    }

    /// The five query sums with the four witness sums on `lane`'s stream, beside the H sum
    /// (and the quotient still running before it) on the device's: in a 2^24 prove the
    /// witness sums' short, latency-bound phases (running sums, fixups, reductions,
    /// classification, host round trips) then overlap the quotient's and the H sum's
    /// throughput-bound kernels. `bases[0]` (the H sum's) and `bases[1]` (the witness
    /// sums') have scratch regions apart. Both streams are idle when this returns, on
    /// every path; a failure of either fails the prove, the H sum's stage named first.
    #[allow(clippy::too_many_arguments)]
    fn sums_beside(
        &self,
        lane: &Arc<Device>,
        bases: [Bases<'_>; 2],
        s: &Sums<'_>,
        mut timer: StageTimer<'_>,
        report: &mut ProveReport,
        stage: &mut &'static str,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let [mut h_bases, mut w_bases] = bases;
        // The lane's stages are timed from here: its first (msm_l) includes any wait for
        // the witness upload.
        let mut lane_timer = StageTimer::start(lane)?;
        let (h, w, lane_stage) = std::thread::scope(|scope| {
            let job = scope.spawn(|| {
                let mut lane_stage = "msm_l";
                let w = self
                    .witness_sums(
                        lane,
                        &mut w_bases,
                        s,
                        &mut lane_timer,
                        &mut lane_stage,
                        ready,
                    )
                    .and_then(|w| lane.sync_compute().map(|()| w));
                if w.is_err() {
                    let _ = lane.sync_compute();
                }
                (w, lane_stage)
            });
            let h = self
                .sum_h(dev, &mut h_bases, s, &mut timer, stage)
                .and_then(|h| dev.sync_compute().map(|()| h));
            let (w, lane_stage) = job.join().unwrap_or_else(|_| {
                let e = GpuError::Input("the witness sums' thread panicked".into());
                (Err(e), "msm_l")
            });
            (h, w, lane_stage)
        });
        let h = h?;
        let w = w.inspect_err(|_| *stage = lane_stage)?;
        timer.finish(report)?;
        lane_timer.finish(report)?;
        Ok(w.with_h(h))
    }

    /// The H sum on `dev`'s stream, a timed stage.
    fn sum_h(
        &self,
        dev: &Arc<Device>,
        bases: &mut Bases<'_>,
        s: &Sums<'_>,
        timer: &mut StageTimer<'_>,
        stage: &mut &'static str,
    ) -> Result<blstrs::G1Projective> {
        *stage = "msm_h";
        self.fault_at("msm_h")?;
        let h = bases.sum_h(dev, &s.h_coeffs, s.srs.h.len())?;
        timer.mark("msm_h")?;
        Ok(h)
    }

    /// The four sums over witness scalars (L, A, B in G1 and G2) on `dev`'s stream, each a
    /// timed stage, after `dev` has been made to wait for the witness upload.
    fn witness_sums(
        &self,
        dev: &Arc<Device>,
        bases: &mut Bases<'_>,
        s: &Sums<'_>,
        timer: &mut StageTimer<'_>,
        stage: &mut &'static str,
        ready: Ready<'_>,
    ) -> Result<WitnessSums> {
        let shape = s.shape;
        *stage = "msm_l";
        self.fault_at("msm_l")?;
        ready(3, dev)?;
        let ls = s.vecs.get(SlotVec::L);
        let l = bases.sum(dev, &G1_OPS, Query::L, &ls, shape.n_l, true)?;
        timer.mark("msm_l")?;
        *stage = "msm_a";
        self.fault_at("msm_a")?;
        let as_ = s.vecs.get(SlotVec::ScalarsA);
        let a = bases.sum(dev, &G1_OPS, Query::A, &as_, shape.n_a, true)?;
        timer.mark("msm_a")?;
        let bs = s.vecs.get(SlotVec::ScalarsB);
        *stage = "msm_b_g1";
        self.fault_at("msm_b_g1")?;
        let b_g1 = bases.sum(dev, &G1_OPS, Query::BG1, &bs, shape.n_b, true)?;
        timer.mark("msm_b_g1")?;
        *stage = "msm_b_g2";
        self.fault_at("msm_b_g2")?;
        let b_g2 = bases.sum(dev, &G2_OPS, Query::BG2, &bs, shape.n_b, true)?;
        timer.mark("msm_b_g2")?;
        Ok(WitnessSums { l, a, b_g1, b_g2 })
    }
}

/// `ready(k, d)`: makes `d`'s stream wait for upload part k (see [`GpuBackend::kernels`]).
type Ready<'r> = &'r mut (dyn FnMut(usize, &Device) -> Result<()> + Send);

/// The L, A, B_G1 and B_G2 sums.
struct WitnessSums {
    l: blstrs::G1Projective,
    a: blstrs::G1Projective,
    b_g1: blstrs::G1Projective,
    b_g2: blstrs::G2Projective,
}

impl WitnessSums {
    fn with_h(self, h: blstrs::G1Projective) -> MsmOutputs {
        let WitnessSums { l, a, b_g1, b_g2 } = self;
        MsmOutputs {
            h,
            l,
            a,
            b_g1,
            b_g2,
        }
    }
}

/// What the sums read besides the bases.
struct Sums<'a> {
    vecs: &'a SlotVecs<'a>,
    shape: &'a SlotShape,
    srs: &'a Srs,
    /// The quotient's coefficients (in the B slot).
    h_coeffs: DevRegion<'a>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(lg: u32) -> SlotShape {
        let n = 1usize << lg;
        SlotShape {
            lg,
            n_l: n,
            n_a: n,
            n_b: n / 4,
        }
    }

    #[test]
    fn concurrent_sums_by_default_up_to_2_25_on_an_h200() {
        // The H sum's own scratch: 2.9 GB at 2^24, 4.4 GB at 2^25, 7.2 GB at 2^26.
        let h200 = 143_771u64 << 20;
        assert!(h_scratch_bytes(&shape(25)) as u64 <= h200 / 32);
        assert!(h_scratch_bytes(&shape(26)) as u64 > h200 / 32);
        // Beside the witness sums the H sum has scratch of its own: the arena grows by
        // about that much, no more.
        for lg in [10u32, 16, 20, 24] {
            let s = shape(lg);
            let one = shared_need(&s, true, 0, false);
            let two = shared_need(&s, true, 0, true);
            assert!(
                two > one && two <= one + h_scratch_bytes(&s) + ALIGN,
                "2^{lg}"
            );
        }
    }
}
