//! The token-held part of a prove, a straight sequence of enqueues: the plan's arena, the
//! NTT tables, the quotient H = (A·B − C)/Z, the five query sums into the plan's results
//! (the four witness sums on a second stream where the plan says so), then the one
//! download of the results and the Horner combination on the host. Nothing between the
//! first kernel and that download waits for the device, apart from a streamed SRS's
//! per-chunk waits for its uploads (its pinned staging is refilled once a copy is done).

use std::sync::Arc;
use std::time::Instant;

use cuzk_groth16::{MsmOutputs, ProveReport, ProveStage, Srs, SrsQuery};

use super::plan::{Placement, ProvePlan, Span, SumPlan};
use super::prove::{ProveCall, Ready};
use super::residency::{Query, ResidentSrs};
use super::ring::{interleave_order, ring_places, Ring, RingSum};
use super::slots::{SlotShape, SlotVec, SlotVecs, WitnessAt};
use super::sums::{enqueue_chunk, enqueue_streamed, HostPoints, OutRegions, Outputs, StreamBufs};
use super::{GpuBackend, Shared};
use crate::device::arena::{DevRegion, VramArena};
use crate::device::layout::{as_bytes, FR_BYTES};
use crate::device::pinned::{HostRegistration, PinnedBuf};
use crate::device::{Device, StageTimer};
use crate::error::{GpuError, Result};
use crate::ops::msm::window_bits;
use crate::ops::ntt::NttPlan;
use crate::ops::sparse::products_enqueue;
use crate::tuning::tuning;

/// H chunks summed between the upload of a split slot's B scalars (over the head of the
/// quotient's coefficients) and the first B sum: by then the upload is done, and the
/// compute stream does not wait for it.
const B_LEAD: usize = 2;

/// H points summed before the first split chunk, in at most [`HEAD_MAX`] chunks: their
/// time covers the upload of the L and A scalars (4 chunks of 2^23 points, 2 of 2^24).
const HEAD_POINTS: usize = 1 << 25;
/// Most H chunks before the first split chunk.
const HEAD_MAX: usize = 4;

/// The stage each query's sum is timed and failed as.
fn stage_of(q: Query) -> ProveStage {
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
fn host_points(srs: &Srs, q: Query) -> HostPoints<'_> {
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
struct Scalars<'a> {
    vecs: &'a SlotVecs<'a>,
    h_coeffs: DevRegion<'a>,
}

impl Scalars<'_> {
    fn of(&self, q: Query, n: usize) -> Result<DevRegion<'_>> {
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
struct Work<'a> {
    call: &'a ProveCall<'a>,
    plan: &'a ProvePlan,
    arena: &'a VramArena,
    vecs: &'a SlotVecs<'a>,
    ntt: NttPlan<'a>,
    abc: [DevRegion<'a>; 3],
    scalars: Scalars<'a>,
    outputs: Outputs<'a>,
    bufs: Option<[DevRegion<'a>; 2]>,
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
    fn region(&self, span: Span) -> Result<DevRegion<'a>> {
        span.of(self.arena)
    }
}

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
        if let Placement::Streamed { chunk, acc, .. } = placement {
            let c = tuning()
                .h_acc
                .unwrap_or_else(|| window_bits(chunk.clamp(1, n_h.max(1))));
            if c > 0 {
                let h_acc = Some(c);
                let plan = ProvePlan::new(
                    shape,
                    n_h,
                    Placement::Streamed { chunk, h_acc, acc },
                    hints,
                    packed,
                );
                if plan.total as u64 <= self.arena_room() {
                    return plan;
                }
            }
        }
        ProvePlan::new(shape, n_h, placement, hints, packed)
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

        // A streamed SRS from registered memory, with the L and A scalars on the device as
        // soon as the quotient is done: all five sums run through one ring.
        if let (None, Some(bufs), Some(reg), true) =
            (resident, work.bufs, reg, vecs.witness_at().early())
        {
            return self.ring_prove(&work, reg, bufs, timer, report, ready);
        }
        // H = (A·B − C)/Z on the coset g·H; its coefficients land in the B slot.
        self.quotient(&work, ready)?;
        timer.mark(ProveStage::NttH)?;
        let lane_timer = match resident {
            Some(r) => self.resident_sums(&work, r, lane, &mut timer, ready)?,
            None => {
                self.streamed_sums(&work, stream_pins, reg, &mut timer, ready)?;
                None
            }
        };
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

    /// The streamed SRS's five sums through one ring, the copy-bound L, A and B sums
    /// between the compute-bound H sum's chunks, the first round's copies under the
    /// quotient; then the download and each query's device time.
    fn ring_prove(
        &self,
        work: &Work<'_>,
        reg: &HostRegistration,
        bufs: [DevRegion<'_>; 2],
        mut timer: StageTimer<'_>,
        report: &mut ProveReport,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let (dev, plan, call) = (&self.dev, work.plan, work.call);
        let (shape, srs) = (&call.shape, call.srs);
        // A prove staged ahead of the one slot hands the next call's a, b, c over at its
        // end (`ahead.rs`): a once this prove is done with a's place, which a split slot
        // frees at its last L sum (the L scalars lie over a), so the L and A sums are done
        // once the H sum has done all but an eighth of its chunks.
        let ahead = self.stages_ahead(self.fit(srs, shape)?.workers);
        let split = work.vecs.witness_at() == WitnessAt::Split;
        let mut ring = Ring::new(dev, &bufs)?;
        let scratch = work.region(plan.scratch[0])?;
        let group_start = Instant::now();
        let ring_ref = &mut ring;
        let timer_ref = &mut timer;
        dev.upload_scope(|up| -> Result<()> {
            let (timer, ring) = (&mut *timer_ref, &mut *ring_ref);
            let mut group = Vec::with_capacity(Query::ALL.len());
            for q in Query::ALL {
                let sum = &plan.sums[q as usize];
                let scalars = work.scalars.of(q, sum.n)?;
                let HostPoints::Memory(host) = host_points(srs, q) else {
                    return Err(GpuError::Internal("registered points not in memory".into()));
                };
                group.push(RingSum { sum, host, scalars });
            }
            // A split slot's B scalars go over the head of the quotient's coefficients
            // once the H sum has read them there (its first `b_read` chunks); the B
            // sums start B_LEAD H chunks later, by when they are up.
            let h = &plan.sums[Query::H as usize];
            let b_read = match work.vecs.witness_at() {
                WitnessAt::Split => plan.sums[Query::BG1 as usize]
                    .n
                    .div_ceil(h.chunk)
                    .min(h.chunks),
                _ => 0,
            };
            let b_after = (b_read + B_LEAD).min(h.chunks);
            let chunks: Vec<usize> = group.iter().map(|g| g.sum.chunks).collect();
            let head = (HEAD_POINTS / h.chunk.max(1)).clamp(1, HEAD_MAX);
            let c0 = h.chunks;
            let until = match ahead && split {
                true => c0 - c0 / 8,
                false => c0,
            };
            let order = interleave_order(
                &chunks,
                head,
                &[0, 0, 0, b_after, b_after],
                &[c0, until, until, c0, c0],
            );
            let last_l = order.iter().rposition(|&(g, _)| g == Query::L as usize);
            let a_free = dev.timing_event()?;
            let widths = group
                .iter()
                .map(|g| g.width(ring.slot_bytes()))
                .collect::<Result<Vec<_>>>()?;
            let places = ring_places(&order.iter().map(|&(g, _)| widths[g]).collect::<Vec<_>>());
            // Each chunk's copy is enqueued once the sum of the chunk last in its slots
            // is (`summed`: how many sums are enqueued); the first round's copies go
            // first, under the quotient.
            let copy_ready =
                |ring: &mut Ring<'_>, copies: &mut usize, summed: usize| -> Result<()> {
                    while let Some(&(g, j)) = order.get(*copies) {
                        if places[*copies].after.is_some_and(|a| a >= summed) {
                            break;
                        }
                        ring.copy(dev, up, reg, &group[g], j, places[*copies])?;
                        *copies += 1;
                    }
                    Ok(())
                };
            let mut copies = 0;
            copy_ready(ring, &mut copies, 0)?;
            let span = ring.span_begin(dev, "quotient")?;
            self.quotient(work, ready)?;
            if !split || last_l.is_none() {
                dev.record(&a_free)?;
            }
            ring.span_end(dev, span)?;
            timer.mark(ProveStage::NttH)?;
            for q in Query::ALL {
                self.enter(call, stage_of(q))?;
            }
            call.reached(ProveStage::MsmH);
            // The L and A scalars go up now (over a and c, which the quotient has
            // read); the compute stream waits for them only at the first L or A sum,
            // after the head's H chunks.
            ready(3, None)?;
            if b_read == 0 {
                ready(4, None)?;
            }
            let (mut la_up, mut b_up) = (false, false);
            for (i, &(g, j)) in order.iter().enumerate() {
                if (g == Query::L as usize || g == Query::A as usize) && !la_up {
                    ready(3, Some(dev))?;
                    la_up = true;
                }
                if g >= Query::BG1 as usize && !b_up {
                    ready(4, Some(dev))?;
                    b_up = true;
                }
                // A sum waits on its copy's event: that copy must be enqueued first
                // (every copy's `after` is an earlier chunk, so it is).
                if copies <= i {
                    return Err(GpuError::Internal(format!(
                        "ring chunk {i} summed before its copy was enqueued"
                    )));
                }
                ring.sum(dev, &scratch, &group[g], j, places[i], &work.outputs)?;
                if split && last_l == Some(i) {
                    dev.record(&a_free)?;
                }
                copy_ready(ring, &mut copies, i + 1)?;
                if g == Query::H as usize && j + 1 == b_read {
                    ready(4, None)?;
                }
            }
            if !la_up {
                ready(3, Some(dev))?;
            }
            if !b_up {
                ready(4, Some(dev))?;
            }
            // Every copy of this prove is enqueued: the next call's wait behind them.
            if ahead {
                self.hand_over(call, work.vecs, &a_free)?;
            }
            Ok(())
        })??;
        let group_wall = group_start.elapsed();
        let out = self.finish(plan, shape, &work.outputs.results, timer, None, report);
        // The five sums interleave: each query's device time is its chunks' sum, and
        // the host's wall of enqueueing them all is the H stage's.
        if out.is_ok() {
            let times = ring.query_times(dev)?;
            for q in Query::ALL {
                let wall = match q {
                    Query::H => group_wall,
                    _ => std::time::Duration::ZERO,
                };
                report.push_device(stage_of(q), wall, times[q as usize]);
            }
        }
        ring.write_trace(dev, shape.lg)?;
        out
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
    fn quotient(&self, work: &Work<'_>, ready: Ready<'_>) -> Result<()> {
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
    fn finish(
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

    /// The five sums with the SRS streamed from host memory, one after another on the
    /// compute stream, through the plan's chunk buffers (and the pinned bounce buffers,
    /// kept in the shared state between proves).
    fn streamed_sums(
        &self,
        work: &Work<'_>,
        stream_pins: &mut [Option<PinnedBuf>; 2],
        reg: Option<&HostRegistration>,
        timer: &mut StageTimer<'_>,
        ready: Ready<'_>,
    ) -> Result<()> {
        let dev = &self.dev;
        let bufs = work
            .bufs
            .ok_or_else(|| GpuError::Internal("streamed plan without buffers".into()))?;
        let mut sb = StreamBufs {
            device: bufs,
            pinned: [stream_pins[0].take(), stream_pins[1].take()],
            consumed: [dev.timing_event()?, dev.timing_event()?],
            used: [false; 2],
            scratch: work.region(work.plan.scratch[0])?,
        };
        let r = self.enqueue_streamed_sums(work, &mut sb, reg, timer, ready);
        *stream_pins = sb.pinned;
        r
    }

    /// [`GpuBackend::streamed_sums`] through `sb`.
    fn enqueue_streamed_sums(
        &self,
        work: &Work<'_>,
        sb: &mut StreamBufs<'_>,
        reg: Option<&HostRegistration>,
        timer: &mut StageTimer<'_>,
        ready: Ready<'_>,
    ) -> Result<()> {
        let (dev, call) = (&self.dev, work.call);
        for sum in &work.plan.sums {
            self.enter(call, stage_of(sum.query))?;
            match sum.query {
                Query::L => ready(3, Some(dev))?,
                Query::BG1 => ready(4, Some(dev))?,
                _ => {}
            }
            let host = host_points(call.srs, sum.query);
            let sc = work.scalars.of(sum.query, sum.n)?;
            enqueue_streamed(dev, sb, sum, host, reg, &sc, &work.outputs)?;
            timer.mark(call.stage())?;
        }
        Ok(())
    }
}
