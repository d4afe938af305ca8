//! The prove itself, one compute call on one backend: validation, the staging's upload
//! (`uploads.rs`), the compute token, then the kernel section (`run.rs`). `mod.rs` owns
//! the backend's state; this file only runs it.

use std::cell::Cell;
use std::time::{Duration, Instant};

use cuzk_groth16::matrices::RowWitness;
use cuzk_groth16::{Assignment, MsmOutputs, ProveReport, ProveStage, Srs, TokenGuard, TokenTimes};

use super::matrices::ResidentMatrices;
use super::prepare::staging_pieces;
use super::slots::{SlotGuard, SlotShape, SlotVecs, WitnessAt};
use super::uploads::{cut_parts, fill_rest, upload_bounds, LateParts, Rest, Uploads};
use super::GpuBackend;
use crate::device::Device;
use crate::error::Result;

/// What a prove's staging and token do, from its mode and assignment.
pub(super) struct CallPlan {
    /// A lean slot (`budget.rs`): the witness goes over a, b, c once the H sum has read
    /// the quotient.
    pub(super) lean: bool,
    /// Whether the token is tried for once a is on its way (else the whole staging is
    /// filled first).
    pub(super) take_early: bool,
    /// Staging bytes before the first staged (with the matrices resident, only the
    /// witness vectors are staged).
    pub(super) staged_from: usize,
    /// The matrices are resident: the device computes a, b, c from the witness.
    pub(super) device_abc: bool,
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
    /// A deferred assignment's witness made ready for the host's a, b, c (when the device
    /// does not compute them).
    pub(super) rows: Option<&'c RowWitness<'c>>,
    /// The backend's host pool this call runs in (`host.rs`); the filler beside its
    /// kernels runs there too. None: the caller's pool.
    host_pool: Option<&'c rayon::ThreadPool>,
    stage: Cell<ProveStage>,
}

impl<'c> ProveCall<'c> {
    pub(super) fn new(
        asg: &'c Assignment,
        shape: SlotShape,
        srs: &'c Srs,
        matrices: Option<&'c ResidentMatrices>,
        rows: Option<&'c RowWitness<'c>>,
        host_pool: Option<&'c rayon::ThreadPool>,
    ) -> ProveCall<'c> {
        ProveCall {
            asg,
            shape,
            srs,
            matrices,
            rows,
            host_pool,
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
        let pieces = staging_pieces(&shape, asg, call.rows);
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
                let pool = call.host_pool;
                let filler = rest.map(|parts| {
                    scope.spawn(move || match pool {
                        Some(pool) => pool.install(|| fill_rest(parts, u, tx)),
                        None => fill_rest(parts, u, tx),
                    })
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
