//! The prove itself, one compute call on one backend: validation and the staging fill,
//! the upload on the copy stream, the compute token, then the kernel section (`run.rs`).
//! `mod.rs` owns the backend's state; this file only runs it.

use std::cell::Cell;
use std::time::{Duration, Instant};

use cudarc::driver::CudaEvent;
use cuzk_groth16::{Assignment, MsmOutputs, ProveReport, ProveStage, Srs, TokenGuard, TokenTimes};

use super::matrices::ResidentMatrices;
use super::prepare::{fill_batched, pieces_within, staging_pieces, Piece, UPLOAD_BATCH};
use super::slots::{SlotGuard, SlotShape, SlotVecs, WitnessAt};
use super::GpuBackend;
use crate::device::arena::DevRegion;
use crate::device::upload::UploadScope;
use crate::device::Device;
use crate::error::{GpuError, Result};

/// Fills part k of the staging (`part`, the layout's bytes `bounds[k]..bounds[k + 1]`),
/// enqueues each batch's copy into `used` as it is written, and records `done` after them.
#[allow(clippy::too_many_arguments)]
fn fill_part<'env>(
    up: &UploadScope<'_, 'env>,
    part: &'env mut [u8],
    k: usize,
    bounds: &[usize; 5],
    pieces: &[Piece<'_>],
    used: &DevRegion<'_>,
    done: &CudaEvent,
) -> Result<()> {
    let range = bounds[k]..bounds[k + 1];
    let mine = pieces_within(pieces, &range);
    fill_batched(part, range, mine, UPLOAD_BATCH, |bytes, off| {
        up.upload(&used.slice(off, bytes.len())?, bytes)
    })?;
    up.record(done)
}

/// Fills part k of the staging like [`fill_part`] but enqueues no copy: the batches are
/// kept in `later` for the lean slot's witness upload, which waits for the H sum.
fn fill_later<'env>(
    part: &'env mut [u8],
    k: usize,
    bounds: &[usize; 5],
    pieces: &[Piece<'_>],
    later: &parking_lot::Mutex<Vec<(&'env [u8], usize)>>,
) -> Result<()> {
    let range = bounds[k]..bounds[k + 1];
    let mine = pieces_within(pieces, &range);
    fill_batched(part, range, mine, UPLOAD_BATCH, |bytes, off| {
        later.lock().push((bytes, off));
        Ok(())
    })
}

/// `staging` cut at `bounds` into the four upload parts (a, b, c, the witness vectors).
/// A staging from the witness vectors on (`staged_from == bounds[3]`: the device computes
/// a, b, c) gives three empty parts and the witness.
fn cut_parts<'s>(
    staging: &'s mut [u8],
    bounds: &[usize; 5],
    staged_from: usize,
) -> Result<[&'s mut [u8]; 4]> {
    let short = || GpuError::Internal("slot staging smaller than its layout".into());
    if staged_from == bounds[3] {
        let witness = staging.get_mut(..bounds[4] - bounds[3]).ok_or_else(short)?;
        return Ok([&mut [], &mut [], &mut [], witness]);
    }
    if staged_from != 0 || staging.len() < bounds[4] {
        return Err(short());
    }
    let (rest, _) = staging.split_at_mut(bounds[4]);
    let (rest, p3) = rest.split_at_mut(bounds[3]);
    let (rest, p2) = rest.split_at_mut(bounds[2]);
    let (p0, p1) = rest.split_at_mut(bounds[1]);
    Ok([p0, p1, p2, p3])
}

/// One prove's staging upload (the uploads handle): the four parts (a, b, c, the witness
/// vectors; a, b, c first, in the order the quotient reads them) at `bounds` in the
/// layout, each filled batch by batch with every batch's copy into `used` enqueued as
/// soon as it is written and an event recorded after the part's copies; with the matrices
/// resident a, b, c upload nothing (the device computes them), and a lean slot's witness
/// is kept in `later` until the H sum has read the quotient. If the token is free once a
/// is on its way, the kernels start on it while b, c and the witness are filled on
/// another thread; else the whole staging is filled first, under the other worker's
/// kernels. "fill" is the host time of filling, "upload" the host wait for the last copy
/// after it, with the device time from the first copy's start to the last one's end.
struct Uploads<'a, 's, 'env> {
    dev: &'a Device,
    up: &'s UploadScope<'s, 'env>,
    bounds: [usize; 5],
    pieces: &'a [Piece<'a>],
    used: &'a DevRegion<'a>,
    device_abc: bool,
    lean: bool,
    /// Where a lean slot's witness goes (over a, b, c).
    witness_at: usize,
    /// Recorded on the copy stream before the first copy.
    start: &'a CudaEvent,
    end: CudaEvent,
    parts_done: [CudaEvent; 4],
    later: parking_lot::Mutex<Vec<(&'env [u8], usize)>>,
}

impl<'a, 's, 'env> Uploads<'a, 's, 'env> {
    /// The upload of `shape`'s staging into `used` for a call planned as `plan`, its
    /// first copy after `start` (recorded on the copy stream).
    fn new(
        dev: &'a Device,
        up: &'s UploadScope<'s, 'env>,
        shape: &SlotShape,
        plan: &CallPlan,
        pieces: &'a [Piece<'a>],
        used: &'a DevRegion<'a>,
        start: &'a CudaEvent,
    ) -> Result<Self> {
        Ok(Uploads {
            dev,
            up,
            bounds: upload_bounds(shape),
            pieces,
            used,
            device_abc: plan.device_abc,
            lean: plan.lean,
            witness_at: shape.witness_at(plan.lean),
            start,
            end: dev.timing_event()?,
            parts_done: part_events(dev)?,
            later: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// Fills part k (`part`) and enqueues its copies, or keeps them for later (a lean
    /// slot's witness), or records only its event (a, b, c computed on the device).
    fn fill(&self, part: &'env mut [u8], k: usize) -> Result<()> {
        match self.device_abc {
            true if k < 3 => self.up.record(&self.parts_done[k]),
            _ if self.lean && k == 3 => fill_later(part, k, &self.bounds, self.pieces, &self.later),
            _ => fill_part(
                self.up,
                part,
                k,
                &self.bounds,
                self.pieces,
                self.used,
                &self.parts_done[k],
            ),
        }
    }

    /// Parts 1, 2, 3 filled now (`filled`: the host time of part 0), then the host wait
    /// for their copies, both reported.
    fn fill_rest_now(
        &self,
        rest: Rest<'env>,
        filled: Duration,
        report: &mut ProveReport,
    ) -> Result<()> {
        let t = Instant::now();
        let r = rest
            .into_iter()
            .zip(1..4)
            .try_for_each(|(p, k)| self.fill(p, k));
        report.push(ProveStage::Fill, filled + t.elapsed());
        let t = Instant::now();
        let waited = self.up.drain(&self.end);
        r?;
        waited?;
        let device = self.dev.elapsed(self.start, &self.end)?;
        report.push_device(ProveStage::Upload, t.elapsed(), device);
        Ok(())
    }

    /// After kernels that overlapped the fill: the copies are done (the sums waited for
    /// them) unless the fill failed midway; the witness part's event stays where the
    /// filler recorded it. Reports the fill's host time `filled`.
    fn settle<T>(&self, out: Result<T>, filled: Duration, report: &mut ProveReport) -> Result<T> {
        let waited = self.up.drain(&self.end);
        report.push(ProveStage::Fill, filled);
        let o = out?;
        waited?;
        let device = self.dev.elapsed(self.start, &self.parts_done[3])?;
        if self.dev.is_critical() && device > Duration::from_millis(20) {
            // The copies' own span on the device, beside the host's waits for the filler
            // ("waits for the filler"): which of the two a slow critical call waited for.
            tracing::info!(
                gpu = self.dev.ordinal(),
                ms = device.as_secs_f64() * 1e3,
                "slow upload on the device"
            );
        }
        report.push_device(ProveStage::Upload, Duration::ZERO, device);
        Ok(o)
    }
}

/// The upload parts a prove's kernels wait for after the token was taken
/// ([`LateParts::wait`] is their `ready`): those a filler thread fills and copies while
/// the kernels run (it says when each part's copies are enqueued), and a lean slot's
/// witness, copied over a, b, c once the H sum has read the quotient.
struct LateParts<'u, 'a, 's, 'scope, 'env> {
    uploads: &'u Uploads<'a, 's, 'env>,
    /// The token was taken before b, c and the witness were filled.
    overlapped: bool,
    /// The parts the filler has enqueued, in order.
    filled: std::sync::mpsc::Receiver<usize>,
    filler: Option<std::thread::ScopedJoinHandle<'scope, (Result<()>, Duration)>>,
    /// Parts known to be enqueued (0 < recorded: a always is).
    recorded: usize,
    witness_up: bool,
    /// The filler's host time, once joined.
    fill_time: Duration,
    /// How long the kernels' thread waited on the host for the filler, per part (a, b,
    /// c, the witness): told apart from a wait of the device's streams for the copies.
    host_waits: [Duration; 4],
}

impl<'u, 'a, 's, 'scope, 'env> LateParts<'u, 'a, 's, 'scope, 'env> {
    /// The late parts of `uploads`; `filler` fills them while the kernels run, announcing
    /// each on the channel of `filled`, when the token was taken early (`overlapped`).
    fn new(
        uploads: &'u Uploads<'a, 's, 'env>,
        overlapped: bool,
        filled: std::sync::mpsc::Receiver<usize>,
        filler: Option<std::thread::ScopedJoinHandle<'scope, (Result<()>, Duration)>>,
    ) -> Self {
        LateParts {
            uploads,
            overlapped,
            filled,
            filler,
            recorded: 1,
            witness_up: false,
            fill_time: Duration::ZERO,
            host_waits: [Duration::ZERO; 4],
        }
    }

    /// `ready(k, d)` (see [`Ready`]): makes `d`'s stream wait for part k's copies, after
    /// the filler has enqueued them (joining it for the witness) or, for a lean slot's
    /// witness, after enqueueing them behind the H sum.
    fn wait(&mut self, k: usize, d: Option<&Device>) -> Result<()> {
        // Every part here is sent by the filler or (a lean slot's witness) at the wait
        // for it.
        let Some(d) = d else { return Ok(()) };
        let u = self.uploads;
        // The B scalars (4) go up with the other witness vectors (3).
        let k = k.min(3);
        let t = Instant::now();
        if self.overlapped {
            if k < 3 {
                while self.recorded <= k {
                    match self.filled.recv() {
                        Ok(j) => self.recorded = j + 1,
                        // The filler stopped early: its error comes from the join.
                        Err(_) => break,
                    }
                }
            }
            if self.recorded <= k {
                let Some(f) = self.filler.take() else {
                    return Err(GpuError::Internal("the staging fill stopped".into()));
                };
                let (r, took) = f
                    .join()
                    .map_err(|_| GpuError::Internal("the staging fill panicked".into()))?;
                self.fill_time += took;
                r?;
                self.recorded = 4;
            }
        }
        self.host_waits[k] += t.elapsed();
        if u.lean && k == 3 && !self.witness_up {
            self.witness_up = true;
            // The witness goes over a, b, c: after the H sum (on the compute stream) has
            // read the quotient.
            let h_read = u.dev.timing_event()?;
            u.dev.record(&h_read)?;
            u.dev.copy_wait(&h_read)?;
            for (bytes, off) in u.later.lock().drain(..) {
                let dst = u.used.slice(off - u.witness_at, bytes.len())?;
                u.up.upload(&dst, bytes)?;
            }
            u.up.record(&u.parts_done[3])?;
        }
        match self.overlapped || (u.lean && k == 3) {
            true => d.wait_on(&u.parts_done[k]),
            false => Ok(()),
        }
    }
}

/// What a prove's staging and token do, from its mode and assignment.
struct CallPlan {
    /// A lean slot (`budget.rs`): the witness goes over a, b, c once the H sum has read
    /// the quotient.
    lean: bool,
    /// Whether the token is tried for once a is on its way (else the whole staging is
    /// filled first).
    take_early: bool,
    /// Staging bytes before the first staged (with the matrices resident, only the
    /// witness vectors are staged).
    staged_from: usize,
    /// The matrices are resident: the device computes a, b, c from the witness.
    device_abc: bool,
}

/// Parts 1, 2, 3 of the staging (b, c, the witness vectors), filled after part a.
type Rest<'env> = [&'env mut [u8]; 3];

/// The events recorded after each upload part's copies.
fn part_events(dev: &Device) -> Result<[CudaEvent; 4]> {
    let e = || dev.timing_event();
    Ok([e()?, e()?, e()?, e()?])
}

/// The staging's upload parts: a, b, c, the witness vectors, as bounds in its layout.
fn upload_bounds(shape: &SlotShape) -> [usize; 5] {
    let [a, b, c, witness, _, end] = super::ahead::bounds(shape);
    [a, b, c, witness, end]
}

/// The filler thread's work: parts 1, 2, 3 (b, c, the witness) filled and copied in
/// order, each announced on `tx` once its copies are enqueued; its result and host time.
fn fill_rest<'env>(
    parts: Rest<'env>,
    uploads: &Uploads<'_, '_, 'env>,
    tx: std::sync::mpsc::Sender<usize>,
) -> (Result<()>, Duration) {
    let t = Instant::now();
    let r = parts.into_iter().zip(1..4).try_for_each(|(p, k)| {
        uploads.fill(p, k)?;
        // The receiver is gone only when the kernels failed.
        let _ = tx.send(k);
        Ok(())
    });
    (r, t.elapsed())
}

/// One compute call: what it proves, and the stage a failure from here on is reported
/// as, moved on by the step runner ([`GpuBackend::enter`], where a fault may be injected)
/// or by [`ProveCall::reached`].
pub(super) struct ProveCall<'c> {
    pub(super) asg: &'c Assignment,
    pub(super) shape: SlotShape,
    pub(super) srs: &'c Srs,
    /// The recorded matrices on the device: it computes a, b, c from the witness.
    pub(super) matrices: Option<&'c ResidentMatrices>,
    stage: Cell<ProveStage>,
}

impl<'c> ProveCall<'c> {
    pub(super) fn new(
        asg: &'c Assignment,
        shape: SlotShape,
        srs: &'c Srs,
        matrices: Option<&'c ResidentMatrices>,
    ) -> ProveCall<'c> {
        ProveCall {
            asg,
            shape,
            srs,
            matrices,
            stage: Cell::new(ProveStage::Prepare),
        }
    }

    /// The stage a failure now is reported as.
    pub(super) fn stage(&self) -> ProveStage {
        self.stage.get()
    }

    /// The call is now in `next`, a stage no fault is injected at.
    pub(super) fn reached(&self, next: ProveStage) {
        self.stage.set(next);
    }
}

impl GpuBackend {
    /// The staging and token choices of a prove of `shape` in the chosen mode.
    fn call_plan(
        &self,
        asg: &Assignment,
        shape: &SlotShape,
        srs: &Srs,
        matrices: Option<&ResidentMatrices>,
    ) -> Result<CallPlan> {
        let fit = self.fit(srs, shape)?;
        // The host evaluates a deferred assignment's a, b, c into the staging (`prepare.rs`):
        // seconds at 2^27, which a second worker's kernels must not wait for under the token.
        let host_products = asg.is_deferred() && matrices.is_none();
        Ok(CallPlan {
            lean: fit.lean && matrices.is_none(),
            take_early: !(host_products && fit.workers > 1),
            staged_from: shape.staged_from(matrices.is_some()),
            device_abc: matrices.is_some(),
        })
    }

    /// A worker slot for the call (made within the budget if none is free).
    fn take_slot(&self, shape: &SlotShape, plan: &CallPlan) -> Result<SlotGuard<'_>> {
        let slot_bytes = shape.device_bytes(plan.lean);
        if self.slots.unmade() > 0 {
            self.check_budget("a worker slot", slot_bytes as u64)?;
        }
        self.slots
            .take(&self.dev, &self.pinned, shape, plan.staged_from, slot_bytes)
    }

    /// The compute token once part a is on its way (its fill took `filled`): taken at once
    /// when free and `plan` allows it, the `rest` of the staging then returned for a
    /// filler beside the kernels; else after the rest is filled and its copies waited for.
    /// The times of the wait (`held` left zero), measured from `since`.
    #[allow(clippy::too_many_arguments)]
    fn token_after_a<'env>(
        &self,
        uploads: &Uploads<'_, '_, 'env>,
        rest: Rest<'env>,
        plan: &CallPlan,
        since: Instant,
        filled: Duration,
        report: &mut ProveReport,
        call: &ProveCall<'_>,
    ) -> Result<(TokenGuard<'_>, Option<Rest<'env>>, TokenTimes)> {
        let times = |wait_start, wait| TokenTimes {
            wait_start,
            wait,
            held: Duration::ZERO,
        };
        let early = plan.take_early.then(|| self.token.try_acquire()).flatten();
        let (token, rest, times) = match early {
            Some(token) => (token, Some(rest), times(since.elapsed(), Duration::ZERO)),
            None => {
                uploads.fill_rest_now(rest, filled, report)?;
                call.reached(ProveStage::TokenWait);
                let (wait_start, t) = (since.elapsed(), Instant::now());
                (self.token.acquire(), None, times(wait_start, t.elapsed()))
            }
        };
        report.push(ProveStage::TokenWait, times.wait);
        Ok((token, rest, times))
    }

    /// After a failed prove: queued kernels (and copies) may still use the slot and the
    /// scratch, so they drain before the slot goes back and the token passes on (errors
    /// here are secondary).
    pub(super) fn drain_streams(&self) {
        let _ = self.dev.sync_compute();
        if let Some(lane) = self.lane.get() {
            let _ = lane.sync_compute();
        }
    }

    /// One compute call with a slot of its own (or, when the mode has one slot and more
    /// workers, staged ahead of it: `ahead.rs`).
    pub(super) fn compute_inner(
        &self,
        call: &ProveCall<'_>,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs> {
        let (asg, shape, srs) = (call.asg, call.shape, call.srs);
        if self.stages_ahead(self.fit(srs, &shape)?.workers) {
            return self.compute_ahead(call, report);
        }
        let dev = &self.dev;
        let call_start = Instant::now();
        let t = Instant::now();
        self.enter(call, ProveStage::Prepare)?;
        let plan = self.call_plan(asg, &shape, srs, call.matrices)?;
        let planned = t.elapsed();
        let (lean, staged_from) = (plan.lean, plan.staged_from);
        let mut slot = self.take_slot(&shape, &plan)?;
        let slotted = t.elapsed();
        let pieces = staging_pieces(&shape, asg);
        let prepared = t.elapsed();
        report.push(ProveStage::Prepare, prepared);
        self.note_slow_steps(
            "prepare",
            &[
                ("plan", planned),
                ("slot", slotted - planned),
                ("pieces", prepared - slotted),
            ],
        );

        call.reached(ProveStage::Srs);
        let t = Instant::now();
        let resident = self.resident_for(srs, &shape)?;
        report.push(ProveStage::Srs, t.elapsed());

        // The staging's upload (`Uploads`): a first, then the token if it is free (b, c and
        // the witness then filled beside the kernels, `LateParts`), else the rest and the
        // token's wait. The upload scope keeps the staging borrowed until every copy is done.
        self.enter(call, ProveStage::Upload)?;
        let t = Instant::now();
        let start = dev.timing_event()?;
        dev.record_on_copy(&start)?;
        let (used, staging) = slot.upload_parts(&shape, staged_from, lean)?;
        // A lean slot here takes its witness over a, b, c after the H sum; only the calls
        // staged ahead (`ahead.rs`) split it.
        let at = [WitnessAt::Own, WitnessAt::OverAbc][usize::from(lean)];
        let vecs = SlotVecs::new(&used, &shape, at)?;
        let [p0, p1, p2, p3] = cut_parts(staging, &upload_bounds(&shape), staged_from)?;
        dev.upload_scope(|up| {
            let uploads = Uploads::new(dev, up, &shape, &plan, &pieces, &used, &start)?;
            uploads.fill(p0, 0)?;
            let fill_time = t.elapsed();
            let (token, rest, times) = self.token_after_a(
                &uploads,
                [p1, p2, p3],
                &plan,
                call_start,
                fill_time,
                report,
                call,
            )?;
            let overlapped = rest.is_some();
            let held = Instant::now();
            let mut shared = self.shared.lock();
            let (out, filler_time) = std::thread::scope(|scope| {
                // With the token taken early, b, c and the witness vectors are filled and
                // copied on another thread; `ready(k)`, called before the first kernel
                // that reads part k, waits for its copies (`LateParts`).
                let (tx, rx) = std::sync::mpsc::channel::<usize>();
                let u = &uploads;
                let filler = rest.map(|parts| {
                    scope.spawn(move || self.on_host_pool(|| fill_rest(parts, u, tx)))
                });
                let mut late = LateParts::new(u, overlapped, rx, filler);
                let mut ready = |k: usize, d: Option<&Device>| late.wait(k, d);
                let out = self.kernels(
                    call,
                    &mut shared,
                    &vecs,
                    resident.as_deref(),
                    report,
                    &mut ready,
                );
                // A failure before the sums reached the witness: still join the filler.
                let joined = ready(3, Some(dev));
                let w = late.host_waits;
                self.note_slow_steps(
                    "waits for the filler",
                    &[("a", w[0]), ("b", w[1]), ("c", w[2]), ("witness", w[3])],
                );
                (out.and_then(|o| joined.map(|()| o)), late.fill_time)
            });
            if out.is_err() {
                self.drain_streams();
            }
            let out = match overlapped {
                true => uploads.settle(out, fill_time + filler_time, report),
                false => out,
            };
            report.token = Some(TokenTimes {
                held: held.elapsed(),
                ..times
            });
            drop(shared);
            drop(token);
            out
        })?
    }
}

/// `ready(k, Some(d))`: makes `d`'s stream wait for upload part k (see `run.rs`): 0, 1,
/// 2: a, b, c; 3: the L and A scalars; 4: the B scalars (3 is always asked for before 4).
/// `ready(k, None)`: part k's place is free once the kernels enqueued so far are done
/// with it, so a part uploaded late may be sent now.
pub(super) type Ready<'r> = &'r mut (dyn FnMut(usize, Option<&Device>) -> Result<()> + Send);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_parts_gives_all_four_parts_or_only_the_witness() {
        let bounds = [0, 64, 128, 192, 320];
        let mut full = vec![0u8; 320];
        let parts = cut_parts(&mut full, &bounds, 0).expect("full staging");
        assert_eq!(parts.map(|p| p.len()), [64, 64, 64, 128]);
        let mut witness = vec![0u8; 128];
        let parts = cut_parts(&mut witness, &bounds, 192).expect("witness staging");
        assert_eq!(parts.map(|p| p.len()), [0, 0, 0, 128]);
        assert!(cut_parts(&mut [0u8; 127], &bounds, 192).is_err());
        assert!(cut_parts(&mut [0u8; 319], &bounds, 0).is_err());
        assert!(cut_parts(&mut [0u8; 320], &bounds, 64).is_err());
    }
}
