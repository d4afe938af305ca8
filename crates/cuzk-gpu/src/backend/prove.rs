//! The prove itself, one compute call on one backend: validation and the staging fill,
//! the upload on the copy stream, the compute token, then the kernel section (the
//! quotient and the five query sums, the witness sums on a second stream where that pays)
//! with each stage timed. `mod.rs` owns the backend's state; this file only runs it.

use std::sync::Arc;
use std::time::Instant;

use cuzk_groth16::{Assignment, MsmOutputs, ProveReport, ProveStage, Srs, TokenTimes};

use super::prepare::{fill_batched, pieces_within, staging_pieces, UPLOAD_BATCH};
use super::residency::{Query, ResidentSrs};
use super::slots::{SlotShape, SlotVec, SlotVecs};
use super::sums::{sum_resident, sum_streamed, GroupOps, StreamBufs, G1_OPS, G2_OPS};
use super::{h_scratch_bytes, shared_need, GpuBackend, Shared};
use crate::device::arena::{DevRegion, Scratch, VramArena, ALIGN};
use crate::device::layout::{as_bytes, FR_BYTES, G2_AFFINE_BYTES};
use crate::device::{Device, StageTimer};
use crate::error::{GpuError, Result};
use crate::ops::msm::{msm_table_g1, table_scratch_bytes, WindowTable};
use crate::ops::ntt::NttPlan;

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
    pub(super) fn compute_inner(
        &self,
        asg: &Assignment,
        shape: &SlotShape,
        srs: &Srs,
        report: &mut ProveReport,
        stage: &mut ProveStage,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let shape = *shape;
        let call_start = Instant::now();
        *stage = ProveStage::Prepare;
        let t = Instant::now();
        self.fault_at(ProveStage::Prepare)?;
        let mut slot = self.slots.take(dev, &self.pinned, &shape)?;
        let pieces = staging_pieces(&shape, asg);
        report.push(ProveStage::Prepare, t.elapsed());

        *stage = ProveStage::Srs;
        let t = Instant::now();
        let resident = self.resident_for(srs, &shape)?;
        report.push(ProveStage::Srs, t.elapsed());

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
        *stage = ProveStage::Upload;
        self.fault_at(ProveStage::Upload)?;
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
        let mut wait_start = call_start.elapsed();
        let mut wait = std::time::Duration::ZERO;
        let early = self.token.try_acquire();
        let overlapped = early.is_some();
        let token = match early {
            Some(token) => {
                report.push(ProveStage::TokenWait, wait);
                token
            }
            None => {
                let t = Instant::now();
                let rest = (1..4).try_for_each(|k| fill_part(staging, k));
                report.push(ProveStage::Fill, fill + t.elapsed());
                let t = Instant::now();
                let waited = drain(&e_end);
                rest?;
                waited?;
                report.push_device(ProveStage::Upload, t.elapsed(), dev.elapsed(&e0, &e_end)?);
                *stage = ProveStage::TokenWait;
                let t = Instant::now();
                wait_start = call_start.elapsed();
                let token = self.token.acquire();
                wait = t.elapsed();
                report.push(ProveStage::TokenWait, wait);
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
                        return Err(GpuError::Internal("the staging fill stopped".into()));
                    };
                    let (r, took) = f
                        .join()
                        .map_err(|_| GpuError::Internal("the staging fill panicked".into()))?;
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
            report.push(ProveStage::Fill, fill);
            out.and_then(|o| {
                waited?;
                let device = dev.elapsed(&e0, &parts_done[3])?;
                report.push_device(ProveStage::Upload, std::time::Duration::ZERO, device);
                Ok(o)
            })
        } else {
            out
        };
        report.token = Some(TokenTimes {
            wait_start,
            wait,
            held: held.elapsed(),
        });
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
        stage: &mut ProveStage,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        *stage = ProveStage::GpuSetup;
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
            .ok_or_else(|| GpuError::Internal("shared scratch missing".into()))?;
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
        report.push(ProveStage::GpuSetup, t.elapsed());

        // H = (A·B − C)/Z on the coset g·H; its coefficients land in the B slot.
        *stage = ProveStage::NttH;
        self.fault_at(ProveStage::NttH)?;
        let abc = [
            vecs.get(SlotVec::A),
            vecs.get(SlotVec::B),
            vecs.get(SlotVec::C),
        ];
        plan.quotient_staged(dev, [&abc[0], &abc[1], &abc[2]], &mut |k| ready(k, dev))?;
        timer.mark(ProveStage::NttH)?;

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
                    .ok_or_else(|| GpuError::Internal("stream staging missing".into()))?;
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
        stage: &mut ProveStage,
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
        stage: &mut ProveStage,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let [mut h_bases, mut w_bases] = bases;
        // The lane's stages are timed from here: its first (msm_l) includes any wait for
        // the witness upload.
        let mut lane_timer = StageTimer::start(lane)?;
        let (h, w, lane_stage) = std::thread::scope(|scope| {
            let job = scope.spawn(|| {
                let mut lane_stage = ProveStage::MsmL;
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
                let e = GpuError::Internal("the witness sums' thread panicked".into());
                (Err(e), ProveStage::MsmL)
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
        stage: &mut ProveStage,
    ) -> Result<blstrs::G1Projective> {
        *stage = ProveStage::MsmH;
        self.fault_at(ProveStage::MsmH)?;
        let h = bases.sum_h(dev, &s.h_coeffs, s.srs.h.len())?;
        timer.mark(ProveStage::MsmH)?;
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
        stage: &mut ProveStage,
        ready: Ready<'_>,
    ) -> Result<WitnessSums> {
        let shape = s.shape;
        *stage = ProveStage::MsmL;
        self.fault_at(ProveStage::MsmL)?;
        ready(3, dev)?;
        let ls = s.vecs.get(SlotVec::L);
        let l = bases.sum(dev, &G1_OPS, Query::L, &ls, shape.n_l, true)?;
        timer.mark(ProveStage::MsmL)?;
        *stage = ProveStage::MsmA;
        self.fault_at(ProveStage::MsmA)?;
        let as_ = s.vecs.get(SlotVec::ScalarsA);
        let a = bases.sum(dev, &G1_OPS, Query::A, &as_, shape.n_a, true)?;
        timer.mark(ProveStage::MsmA)?;
        let bs = s.vecs.get(SlotVec::ScalarsB);
        *stage = ProveStage::MsmBG1;
        self.fault_at(ProveStage::MsmBG1)?;
        let b_g1 = bases.sum(dev, &G1_OPS, Query::BG1, &bs, shape.n_b, true)?;
        timer.mark(ProveStage::MsmBG1)?;
        *stage = ProveStage::MsmBG2;
        self.fault_at(ProveStage::MsmBG2)?;
        let b_g2 = bases.sum(dev, &G2_OPS, Query::BG2, &bs, shape.n_b, true)?;
        timer.mark(ProveStage::MsmBG2)?;
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
