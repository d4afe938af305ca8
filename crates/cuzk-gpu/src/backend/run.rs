//! The token-held part of a prove, a straight sequence of enqueues: the plan's arena, the
//! NTT tables, the quotient H = (A·B − C)/Z, the five query sums into the plan's results
//! (the four witness sums on a second stream where the plan says so; with the SRS
//! streamed, `streamed.rs`), then the one
//! download of the results and the Horner combination on the host. Nothing between the
//! first kernel and that download waits for the device, apart from a streamed SRS's
//! per-chunk waits for its uploads (its pinned staging is refilled once a copy is done).

use std::sync::Arc;
use std::time::Instant;

use cuzk_groth16::{MsmOutputs, ProveReport, ProveStage, Srs, SrsQuery};

use super::plan::{Placement, ProvePlan, Span, SumPlan};
use super::prove::{ProveCall, Ready};
use super::residency::{Query, ResidentSrs};
use super::slots::{SlotShape, SlotVec, SlotVecs, WitnessAt};
use super::sums::{enqueue_chunk, HostPoints, OutRegions, Outputs};
use super::{GpuBackend, Shared};
use crate::device::arena::{DevRegion, VramArena};
use crate::device::layout::{as_bytes, FR_BYTES};
use crate::device::{Device, StageTimer};
use crate::error::{GpuError, Result};
use crate::ops::msm::window_bits;
use crate::ops::ntt::NttPlan;
use crate::ops::sparse::products_enqueue;
use crate::tuning::tuning;

/// The stage each query's sum is timed and failed as.
pub(super) fn stage_of(q: Query) -> ProveStage {
    match q {
        Query::H => ProveStage::MsmH,
        Query::L => ProveStage::MsmL,
        Query::A => ProveStage::MsmA,
        Query::BG1 => ProveStage::MsmBG1,
        Query::BG2 => ProveStage::MsmBG2,
    }
}

/// The host points of query `q`: blst affine points in memory, or, for an SRS released
/// from host memory, its file.
pub(super) fn host_points(srs: &Srs, q: Query) -> HostPoints<'_> {
    if let (true, Some(f)) = (srs.is_released(), srs.file.as_deref()) {
        let sq = match q {
            Query::H => SrsQuery::H,
            Query::L => SrsQuery::L,
            Query::A => SrsQuery::A,
            Query::BG1 => SrsQuery::BG1,
            Query::BG2 => SrsQuery::BG2,
        };
        return HostPoints::File(f, sq);
    }
    HostPoints::Memory(match q {
        Query::H => as_bytes(&srs.h),
        Query::L => as_bytes(&srs.l),
        Query::A => as_bytes(&srs.a),
        Query::BG1 => as_bytes(&srs.b_g1),
        Query::BG2 => as_bytes(&srs.b_g2),
    })
}

/// What the sums read besides the bases: the witness vectors and the quotient's
/// coefficients (in the B slot), as regions of the slot.
pub(super) struct Scalars<'a> {
    vecs: &'a SlotVecs<'a>,
    h_coeffs: DevRegion<'a>,
}

impl Scalars<'_> {
    pub(super) fn of(&self, q: Query, n: usize) -> Result<DevRegion<'_>> {
        let r = match q {
            Query::H => self.h_coeffs,
            Query::L => self.vecs.get(SlotVec::L),
            Query::A => self.vecs.get(SlotVec::ScalarsA),
            Query::BG1 | Query::BG2 => self.vecs.get(SlotVec::ScalarsB),
        };
        r.slice(0, n * FR_BYTES)
    }
}

/// What one prove's kernels work on: the call, its plan, the regions carved for it from
/// the shared arena (NTT tables, results and accumulators, the streamed chunk buffers), and
/// the slot's vectors with a, b, c and the sums' scalars.
pub(super) struct Work<'a> {
    pub(super) call: &'a ProveCall<'a>,
    pub(super) plan: &'a ProvePlan,
    arena: &'a VramArena,
    pub(super) vecs: &'a SlotVecs<'a>,
    ntt: NttPlan<'a>,
    abc: [DevRegion<'a>; 3],
    pub(super) scalars: Scalars<'a>,
    pub(super) outputs: Outputs<'a>,
    pub(super) bufs: Option<[DevRegion<'a>; 2]>,
}

impl<'a> Work<'a> {
    /// Carves the plan's regions from `arena` (reset): the NTT tables first, then the
    /// results and the accumulators, zeroed (every point at infinity).
    fn carve(
        dev: &Device,
        call: &'a ProveCall<'a>,
        arena: &'a VramArena,
        plan: &'a ProvePlan,
        vecs: &'a SlotVecs<'a>,
    ) -> Result<Work<'a>> {
        let ntt = NttPlan::new(dev, arena, plan.shape.lg)?;
        if arena.used() > plan.ntt_bytes {
            return Err(GpuError::Internal(format!(
                "ntt tables took {} bytes, the plan has {}",
                arena.used(),
                plan.ntt_bytes
            )));
        }
        let outputs = Outputs {
            results: plan.results.of(arena)?,
            accs: match plan.accs.bytes {
                0 => None,
                _ => Some(plan.accs.of(arena)?),
            },
        };
        if let Some(accs) = &outputs.accs {
            dev.memset_zero(accs)?;
        }
        let abc = [
            vecs.get(SlotVec::A),
            vecs.get(SlotVec::B),
            vecs.get(SlotVec::C),
        ];
        let bufs = match plan.chunk_bufs {
            Some([d0, d1]) => Some([d0.of(arena)?, d1.of(arena)?]),
            None => None,
        };
        Ok(Work {
            call,
            plan,
            arena,
            vecs,
            ntt,
            scalars: Scalars {
                vecs,
                h_coeffs: abc[1],
            },
            abc,
            outputs,
            bufs,
        })
    }

    /// The arena region of `span`.
    pub(super) fn region(&self, span: Span) -> Result<DevRegion<'a>> {
        span.of(self.arena)
    }
}

/// Most chunk buffers a streamed SRS's ring takes beyond its two (`GpuBackend::plan`).
/// Four buffers leave the 16 GiB ring no wait in `bench/ring_sim.py`.
const MORE_RING_BUFS: usize = 2;

impl GpuBackend {
    /// The placement of a prove of `shape` with `resident` (or a streamed SRS).
    fn placement(
        &self,
        shape: &SlotShape,
        n_h: usize,
        resident: Option<&ResidentSrs>,
    ) -> Placement {
        match resident {
            Some(r) => Placement::Resident {
                lanes: self.lanes(shape, n_h, r.table()),
                table: r.table(),
            },
            None => Placement::Streamed {
                chunk: self.stream_chunk(shape),
                h_acc: None,
                acc: self.cfg.stream_accumulators,
            },
        }
    }

    /// The plan of a prove. With the SRS streamed, the H sum keeps its buckets across its
    /// chunks, at the width of one chunk (the tuning may force another or none), when the
    /// plan then fits what the budget leaves the shared arena now (the slots the mode still
    /// has to make kept free); else it reduces them per chunk, as the mode's byte counts
    /// assume. Wider buckets are not worth it: at c = 20 (13 windows of 2^19 buckets) a
    /// 2^22-point chunk's sum took 86 ms on an H200 against 40.5 ms at c = 16.
    fn plan(&self, shape: &SlotShape, n_h: usize, resident: Option<&ResidentSrs>) -> ProvePlan {
        let (hints, packed) = (self.hints(shape), self.packed_max());
        let placement = self.placement(shape, n_h, resident);
        let mut plan = None;
        if let Placement::Streamed { chunk, acc, .. } = placement {
            let c = tuning()
                .h_acc
                .unwrap_or_else(|| window_bits(chunk.clamp(1, n_h.max(1))));
            if c > 0 {
                let h_acc = Some(c);
                plan = Some(ProvePlan::new(
                    shape,
                    n_h,
                    Placement::Streamed { chunk, h_acc, acc },
                    hints,
                    packed,
                ))
                .filter(|p| p.total as u64 <= self.arena_room());
            }
        }
        let plan = plan.unwrap_or_else(|| ProvePlan::new(shape, n_h, placement, hints, packed));
        self.deeper_ring(plan)
    }

    /// `plan` with up to [`MORE_RING_BUFS`] more chunk buffers for the ring of a streamed
    /// SRS, as many as the budget leaves room for now (none when the points are not
    /// registered: the sums then go one after another through the two). The room is what
    /// the mode's byte counts left over: with 16 GiB free a 32 GiB PoRep's plan takes 15.19
    /// of 15.55 GB with two buffers of 0.40 GB each (2026-12-06), and a third fits once the
    /// split sums' sort is sized for the one accumulator width (`plan.rs`).
    fn deeper_ring(&self, plan: ProvePlan) -> ProvePlan {
        if plan.chunk_bufs.is_none() || !self.cfg.register_streamed_srs {
            return plan;
        }
        let room = self.arena_room();
        (1..=MORE_RING_BUFS)
            .rev()
            .map(|extra| plan.clone().with_more_bufs(extra))
            .find(|p| p.total as u64 <= room)
            .unwrap_or(plan)
    }

    /// The token-held part: the quotient and the five sums; `ready(k, Some(d))` is called
    /// before the first kernel that reads upload part k (0, 1, 2: a, b, c; 3: the L and A
    /// scalars; 4: the B scalars) and makes `d`'s compute stream wait for that part's
    /// copies, `ready(k, None)` once the place of a part uploaded late is free (every
    /// kernel enqueued so far done with it).
    pub(super) fn kernels(
        &self,
        call: &ProveCall<'_>,
        shared: &mut Option<Shared>,
        vecs: &SlotVecs<'_>,
        resident: Option<&ResidentSrs>,
        report: &mut ProveReport,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let (shape, srs) = (&call.shape, call.srs);
        // A call that raises the card's yield gate (below) has its copies done first: with
        // the gate up the main streams stop at their yield points, and a copy or a fill
        // that waits behind them would hold the gate until its watchdog (2,000 ms stalls
        // in 4 of 10 WinningPoSt beside a 32 GiB PoRep, docs/runs/2026-12-07.md). Only a
        // slot whose witness has a place of its own: a lean slot's goes up over a, b, c
        // after the H sum. A host wait, only with the gate on, for ~1 ms of copies.
        if dev.raises_gate() && vecs.witness_at() == WitnessAt::Own {
            ready(3, Some(dev))?;
            dev.sync_copy()?;
        }
        call.reached(ProveStage::GpuSetup);
        let t = Instant::now();
        let plan = self.plan(shape, srs.lens().h, resident);
        let lane = plan.lanes().then(|| self.lane()).transpose()?;
        // The streamed SRS's host points registered with the driver, or None: then the
        // chunks go through pinned bounce buffers.
        let registered = self.registered(srs);
        let reg = registered.as_ref().and_then(|r| r.0.as_ref());
        let Shared { arena, stream_pins } = self.shared_for(shared, &plan, reg.is_none())?;
        let work = Work::carve(dev, call, arena, &plan, vecs)?;
        let mut timer = StageTimer::start(dev)?;
        report.push(ProveStage::GpuSetup, t.elapsed());
        self.host_mark("setup");
        // On a card's critical lane: the card's other streams wait at their yield points
        // from here until this prove's kernels are done (`device/gate.rs`). The arena and
        // the lane's stream are made above: nothing below synchronizes the device, which
        // would wait for those streams while they wait for this thread (the gate's
        // watchdog ends such a wait after `HOLD_LIMIT`).
        let gate = dev.hold_gate();

        // A streamed SRS from registered memory, with the L and A scalars on the device as
        // soon as the quotient is done: all five sums run through one ring.
        if let (None, Some(_), Some(reg), true) =
            (resident, work.bufs, reg, vecs.witness_at().early())
        {
            return self.ring_prove(&work, reg, timer, report, ready);
        }
        // H = (A·B − C)/Z on the coset g·H; its coefficients land in the B slot.
        dev.yield_point()?;
        self.quotient(&work, ready)?;
        timer.mark(ProveStage::NttH)?;
        let lane_timer = match resident {
            Some(r) => self.resident_sums(&work, r, lane, &mut timer, ready)?,
            None => {
                self.streamed_sums(&work, stream_pins, reg, &mut timer, ready)?;
                None
            }
        };
        if let Some(g) = &gate {
            dev.lower_gate_after(g)?;
        }
        self.finish(
            &plan,
            shape,
            &work.outputs.results,
            timer,
            lane_timer,
            report,
        )
    }

    /// The shared prove arena, made (or remade larger) for `plan`, reset, with pinned
    /// bounce buffers for a streamed SRS when `bounce` (its points are not registered).
    fn shared_for<'s>(
        &self,
        shared: &'s mut Option<Shared>,
        plan: &ProvePlan,
        bounce: bool,
    ) -> Result<&'s mut Shared> {
        let dev = &self.dev;
        if shared.as_ref().is_none_or(|s| s.arena.size() < plan.total) {
            // Free the old one first: both may not fit.
            let old = shared.take().map(|s| s.arena.size());
            self.shared_bytes
                .store(0, std::sync::atomic::Ordering::Relaxed);
            self.check_budget("the shared prove arena", plan.total as u64)?;
            tracing::info!(gpu = dev.ordinal(), bytes = plan.total, old_bytes = ?old, "shared scratch made");
            *shared = Some(Shared {
                arena: VramArena::new(dev.clone(), plan.total)?,
                stream_pins: [None, None],
            });
            self.shared_bytes
                .store(plan.total as u64, std::sync::atomic::Ordering::Relaxed);
        }
        let sh = shared
            .as_mut()
            .ok_or_else(|| GpuError::Internal("shared scratch missing".into()))?;
        if let Some([Span { bytes, .. }, _]) = plan.chunk_bufs.filter(|_| bounce) {
            for pin in &mut sh.stream_pins {
                if pin.as_ref().is_none_or(|p| p.len() < bytes) {
                    *pin = None;
                    *pin = Some(self.pinned.take(bytes)?);
                }
            }
        }
        sh.arena.reset();
        Ok(sh)
    }

    /// The resident SRS's sums: H on the compute stream, then the witness sums on the
    /// lane (in scratch of their own) or after it on the same stream; returns the lane's
    /// timer.
    fn resident_sums<'l>(
        &self,
        work: &Work<'_>,
        r: &ResidentSrs,
        lane: Option<&'l Arc<Device>>,
        timer: &mut StageTimer<'l>,
        ready: Ready<'_>,
    ) -> Result<Option<StageTimer<'l>>> {
        let (dev, plan) = (&self.dev, work.plan);
        let mut lane_timer = None;
        r.with_regions(|q| {
            let scratch = [work.region(plan.scratch[0])?, work.region(plan.scratch[1])?];
            let h = &plan.sums[Query::H as usize];
            dev.yield_point()?;
            self.enqueue_resident(dev, h, &q, &scratch[0], work)?;
            timer.mark(ProveStage::MsmH)?;
            let (wdev, wscratch, wtimer) = match lane {
                Some(lane) => {
                    let lt = lane_timer.insert(StageTimer::start(lane)?);
                    (lane, &scratch[1], lt)
                }
                None => (dev, &scratch[0], &mut *timer),
            };
            ready(3, Some(wdev))?;
            ready(4, Some(wdev))?;
            for sum in &plan.sums[1..] {
                wdev.yield_point()?;
                self.enqueue_resident(wdev, sum, &q, wscratch, work)?;
                wtimer.mark(stage_of(sum.query))?;
            }
            if let Some(lane) = lane {
                // The results are read after the lane's sums.
                let done = lane.timing_event()?;
                lane.record(&done)?;
                dev.wait_on(&done)?;
            }
            Ok(())
        })?;
        Ok(lane_timer)
    }

    /// a, b, c from the uploaded witness when the matrices are resident, then the quotient
    /// H = (A·B − C)/Z on the coset g·H, its coefficients into `abc[1]`.
    pub(super) fn quotient(&self, work: &Work<'_>, ready: Ready<'_>) -> Result<()> {
        let (vecs, abc) = (work.vecs, &work.abc);
        let dev = &self.dev;
        self.enter(work.call, ProveStage::NttH)?;
        if let Some(m) = work.call.matrices {
            // a = A·z, b = B·z, c = C·z from the uploaded witness: the inputs lead the A
            // scalars, the aux are the L scalars; the rows past them are zero.
            ready(3, Some(dev))?;
            m.with_region(|mats, layout| {
                let rows = layout.n_rows();
                let z_in = vecs
                    .get(SlotVec::ScalarsA)
                    .slice(0, layout.n_inputs() * FR_BYTES)?;
                let z_aux = vecs.get(SlotVec::L).slice(0, layout.n_aux() * FR_BYTES)?;
                for v in abc {
                    let tail = v.bytes().saturating_sub(rows * FR_BYTES);
                    if tail > 0 {
                        dev.memset_zero(&v.slice(rows * FR_BYTES, tail)?)?;
                    }
                }
                products_enqueue(
                    dev,
                    layout,
                    mats,
                    &z_in,
                    &z_aux,
                    [&abc[0], &abc[1], &abc[2]],
                )
            })?;
        }
        work.ntt
            .quotient_staged(dev, [&abc[0], &abc[1], &abc[2]], &mut |k| {
                ready(k, Some(dev))
            })
    }

    /// The one download of the results (it waits for the compute stream, which waited
    /// for the lane), the stage times, and the Horner combination.
    pub(super) fn finish(
        &self,
        plan: &ProvePlan,
        shape: &SlotShape,
        results: &DevRegion<'_>,
        timer: StageTimer<'_>,
        lane_timer: Option<StageTimer<'_>>,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let mut raw = vec![0u8; plan.results.bytes];
        dev.download(&mut raw, results)?;
        timer.finish(report)?;
        if let Some(lt) = lane_timer {
            lt.finish(report)?;
        }
        let (sums, others) = plan.combine(&raw)?;
        self.remember(shape, others);
        tracing::debug!(
            gpu = dev.ordinal(),
            l = others[0],
            a = others[1],
            b = others[2],
            "others per split sum"
        );
        Ok(MsmOutputs {
            h: sums.h,
            l: sums.l,
            a: sums.a,
            b_g1: sums.b_g1,
            b_g2: sums.b_g2,
        })
    }

    /// Enqueues one resident sum on `dev`'s stream (a failed stage is named first).
    fn enqueue_resident(
        &self,
        dev: &Arc<Device>,
        sum: &SumPlan,
        queries: &[DevRegion<'_>; 5],
        scratch: &DevRegion<'_>,
        work: &Work<'_>,
    ) -> Result<()> {
        self.enter(work.call, stage_of(sum.query))?;
        if sum.chunks == 0 {
            return Ok(());
        }
        let sc = work.scalars.of(sum.query, sum.n)?;
        let out = OutRegions::of(&work.outputs, sum, 0)?;
        enqueue_chunk(
            dev,
            scratch,
            sum,
            &queries[sum.query as usize],
            &sc,
            sum.n,
            &out,
        )
    }
}
