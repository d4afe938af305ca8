//! The five sums of a prove with the SRS streamed from host memory (`run.rs` calls them
//! after the quotient): through one ring of chunk slots (`ring.rs`) when the SRS's points
//! are registered with the driver and the L and A scalars go up once the quotient is
//! done, the copy-bound L, A and B chunks between the compute-bound H sum's; else one sum
//! after another through the plan's two chunk buffers and pinned bounce buffers.

use std::time::Instant;

use cuzk_groth16::{MsmOutputs, ProveReport, ProveStage};

use super::handover::hands_over;
use super::prove::Ready;
use super::residency::Query;
use super::ring::{interleave_order, ring_places, Ring, RingSum};
use super::run::{host_points, stage_of, Work};
use super::slots::WitnessAt;
use super::sums::{enqueue_streamed, HostPoints, StreamBufs};
use super::GpuBackend;
use crate::device::pinned::{HostRegistration, PinnedBuf};
use crate::device::StageTimer;
use crate::error::{GpuError, Result};

/// H chunks summed between the upload of a split slot's B scalars (over the head of the
/// quotient's coefficients) and the first B sum: by then the upload is done, and the
/// compute stream does not wait for it.
const B_LEAD: usize = 2;

/// H points summed before the first split chunk, in at most [`HEAD_MAX`] chunks: their
/// time covers the upload of the L and A scalars (4 chunks of 2^23 points, 2 of 2^24).
const HEAD_POINTS: usize = 1 << 25;
/// Most H chunks before the first split chunk.
const HEAD_MAX: usize = 4;

impl GpuBackend {
    /// The streamed SRS's five sums through one ring, the copy-bound L, A and B sums
    /// between the compute-bound H sum's chunks, the first round's copies under the
    /// quotient; then the download and each query's device time.
    pub(super) fn ring_prove(
        &self,
        work: &Work<'_>,
        reg: &HostRegistration,
        mut timer: StageTimer<'_>,
        report: &mut ProveReport,
        ready: Ready<'_>,
    ) -> Result<MsmOutputs> {
        let (dev, plan, call) = (&self.dev, work.plan, work.call);
        let (shape, srs) = (&call.shape, call.srs);
        // A prove staged ahead of the one slot of a split mode hands the next call's a, b,
        // c over at its end (`handover.rs`): a once this prove is done with a's place,
        // which it frees at its last L sum (the L scalars lie over a), so the L and A sums
        // are done once the H sum has done all but an eighth of its chunks. `a_free` is
        // recorded then.
        let hands =
            self.stages_ahead(self.fit(srs, shape)?.workers) && hands_over(work.vecs.witness_at());
        let a_free = hands.then(|| dev.timing_event()).transpose()?;
        let bufs = plan
            .ring_bufs()
            .into_iter()
            .map(|b| work.region(b))
            .collect::<Result<Vec<_>>>()?;
        let mut ring = Ring::new(dev, &bufs)?;
        self.ring_slots
            .store(ring.slots_len(), std::sync::atomic::Ordering::Relaxed);
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
            let until = match hands {
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
            let widths = group
                .iter()
                .map(|g| g.width(ring.slot_bytes()))
                .collect::<Result<Vec<_>>>()?;
            let places = ring_places(
                &order.iter().map(|&(g, _)| widths[g]).collect::<Vec<_>>(),
                ring.slots_len(),
            );
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
            self.host_mark("ring");
            let span = ring.span_begin(dev, "quotient")?;
            dev.yield_point()?;
            self.quotient(work, ready)?;
            if let (Some(ev), None) = (&a_free, last_l) {
                dev.record(ev)?;
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
                dev.yield_point()?;
                ring.sum(dev, &scratch, &group[g], j, places[i], &work.outputs)?;
                if let Some(ev) = a_free.as_ref().filter(|_| last_l == Some(i)) {
                    dev.record(ev)?;
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
            Ok(())
        })??;
        let group_wall = group_start.elapsed();
        // Every copy of this prove is done (the scope waited for them), its last sums
        // still run: the next call's a, b, c go up now behind them, or once that call has
        // filled them, until this prove's kernels are done. On the dev VM's unit test the
        // next call lent them before this prove had enqueued its copies; at 2^27 it fills
        // them for 1.4 s and lent them long after (no hand-over in 19 proves on an H100).
        if let Some(a_free) = &a_free {
            self.hand_over(call, work.vecs, a_free)?;
        }
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
        ring.write_trace(dev, shape.lg, &self.take_host_marks())?;
        out
    }

    /// The five sums with the SRS streamed from host memory, one after another on the
    /// compute stream, through the plan's chunk buffers (and the pinned bounce buffers,
    /// kept in the shared state between proves).
    pub(super) fn streamed_sums(
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
            dev.yield_point()?;
            enqueue_streamed(dev, sb, sum, host, reg, &sc, &work.outputs)?;
            timer.mark(call.stage())?;
        }
        Ok(())
    }
}
