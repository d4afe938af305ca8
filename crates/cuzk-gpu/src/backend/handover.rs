//! The next call's a, b, c sent by the holder of a slot staged ahead of (`ahead.rs`;
//! issue #26). In a split slot ([`hands_over`]), a call whose a, b, c are staged lends them
//! to the hand-over while it waits for the slot. The slot's holder, once every copy of its ring (`streamed.rs`) is
//! done, sends them, or waits for them until its own kernels are done (the next call fills
//! them for ~1.4 s at 2^27, longer than the holder takes to enqueue its ring): a as soon as
//! its kernels are done with a's place (after its last L sum; the ring runs the L and A
//! sums in the first seven eighths of the H sum's chunks), b and c after its last sum. In a
//! full slot that made the next quotient wait ~340 ms for b and c at 2^27, where the next
//! call enqueues them itself once it has the slot; with the witness over a, b, c the L
//! scalars hold a's place until the last L sum: neither hands over. The copy stream then
//! waits only on events of kernels that wait on copies ahead of these, never behind them
//! (`../shared/lessons.md`'s pre-staging deadlock), and the next quotient finds a on the
//! device instead of waiting ~77 ms for it at 2^27. A call that finds its a, b, c still in
//! the hand-over when it gets the slot (a previous call of another shape, a resident SRS,
//! bounce buffers) takes them back and sends them itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cudarc::driver::CudaEvent;
use parking_lot::{Condvar, Mutex};

use super::ahead::{AbcUp, StagingGuard};
use super::prove::ProveCall;
use super::slots::{SlotShape, SlotVec, SlotVecs, WitnessAt};
use super::GpuBackend;
use crate::device::pinned::PinnedBuf;
use crate::error::{GpuError, Result};

/// How often a prove waiting to hand the next call's a, b, c over checks whether its
/// own kernels are done (a lend wakes it at once).
const LENDER_POLL: Duration = Duration::from_millis(2);

/// Whether proves staged ahead of a slot whose witness lies `at` hand the next call's
/// a, b, c over: split slots only. A full slot's b and c would go up only once the
/// holder's last sum is done, ~340 ms of copies at 2^27 that the next quotient then waits
/// for, where the call that takes the slot enqueues them itself once the holder gives it
/// back (an H100 with 80 GB: a cycle of 2,430 ms with the hand-over, 2,285 without;
/// docs/runs/2026-12-06.md, sixth session); and a slot whose witness goes over a, b, c
/// has the L scalars in a's place until its last L sum.
pub(super) fn hands_over(at: WitnessAt) -> bool {
    at == WitnessAt::Split
}

/// The hand-over's state in a backend's [`super::ahead::Ahead`].
#[derive(Default)]
pub(super) struct HandOver {
    /// The next call's a, b, c, lent to the slot's holder ([`GpuBackend::hand_over`]).
    next: Mutex<Waiting>,
    /// Signalled when a call lends its a, b, c (the holder may be waiting for them).
    lent: Condvar,
    /// Numbers the calls that lend their a, b, c.
    lends: AtomicU64,
    /// a, b, c sent by the slot's previous holder so far.
    pub(super) handed: AtomicU64,
}

/// A call's a, b, c waiting for the slot, and the copies the slot's holder enqueued.
#[derive(Default)]
struct Waiting {
    waiting: Option<Lent>,
    /// The events the copies of call `.0` record (or why they failed).
    sent: Option<(u64, std::result::Result<[CudaEvent; 3], String>)>,
}

/// A call's staged a, b, c and the events their copies are to record.
struct Lent {
    id: u64,
    shape: SlotShape,
    at: WitnessAt,
    buf: PinnedBuf,
    events: [CudaEvent; 3],
}

impl GpuBackend {
    /// Puts `g`'s a, b, c (of `shape`, witness at `at`) in the hand-over for the slot's
    /// holder to send, with the events their copies are to record; returns the lend's
    /// number, or `None` when another call's wait there (then `g` keeps them).
    pub(super) fn lend_abc(
        &self,
        g: &mut StagingGuard<'_>,
        shape: &SlotShape,
        at: WitnessAt,
        events: [CudaEvent; 3],
    ) -> Option<u64> {
        let mut next = self.ahead.hand.next.lock();
        if next.waiting.is_some() {
            return None;
        }
        let buf = g.lend()?;
        let id = self.ahead.hand.lends.fetch_add(1, Ordering::Relaxed);
        next.waiting = Some(Lent {
            id,
            shape: *shape,
            at,
            buf,
            events,
        });
        self.ahead.hand.lent.notify_all();
        Some(id)
    }

    /// Once the call has the slot: its a, b, c back from the hand-over when the previous
    /// holder did not send them (`abc` stays staged), else the events of the copies it
    /// enqueued (`abc` becomes handed).
    ///
    /// # Errors
    /// [`GpuError::Internal`] when those copies failed, or the lend was lost.
    pub(super) fn reclaim_abc(&self, id: u64, abc: &mut AbcUp<'_>) -> Result<[CudaEvent; 3]> {
        let mut next = self.ahead.hand.next.lock();
        if let Some(w) = next.waiting.take_if(|w| w.id == id) {
            if let AbcUp::Staged(g) = abc {
                g.restore(w.buf);
            }
            return Ok(w.events);
        }
        match next.sent.take_if(|(sent, _)| *sent == id) {
            Some((_, sent)) => {
                // The slot is this call's: the calls held back for it may go on.
                self.ahead.hand.lent.notify_all();
                *abc = AbcUp::Handed;
                sent.map_err(GpuError::Internal)
            }
            None => Err(GpuError::Internal(format!(
                "a, b, c of call {id} lent to the slot's holder and lost"
            ))),
        }
    }

    /// Waits while the slot's holder has sent another call's a, b, c into the slot and that
    /// call has not taken it yet (`mine`: this call's lend, if any). The slot is that
    /// call's next: a call taking it first would copy its own a, b, c over them, and the
    /// handed call would then prove with those. The worker that just gave the slot back
    /// may come round with a call filled in microseconds (a small shape) before the handed
    /// call wakes, and a third worker may be waiting for the slot already. The handed call
    /// takes the slot once the holder gives it back and then lets the others on
    /// (`reclaim_abc`).
    pub(super) fn wait_for_handed_call(&self, mine: Option<u64>) {
        let mut next = self.ahead.hand.next.lock();
        while next.sent.as_ref().is_some_and(|(id, _)| Some(*id) != mine) {
            self.ahead.hand.lent.wait(&mut next);
        }
    }

    /// Whether the slot is another call's, its a, b, c sent into it (checked after taking
    /// the slot: the holder sends them before it gives the slot back, so a call that got
    /// the slot afterwards sees them).
    pub(super) fn handed_to_another(&self, mine: Option<u64>) -> bool {
        let next = self.ahead.hand.next.lock();
        next.sent.as_ref().is_some_and(|(id, _)| Some(*id) != mine)
    }

    /// Called by a prove staged ahead once every copy of its own is done and every kernel
    /// enqueued: the next call's a, b, c, when they wait in the hand-over for this slot
    /// (same shape and layout) or come there before this prove's kernels are done, go up
    /// then, a once this prove's kernels are done with a's place (`a_free`, recorded on the
    /// compute stream), b and c once all its kernels are. So the next quotient need not
    /// wait for a's copy (4.3 GB at 2^27, ~77 ms). The wait costs this thread nothing: it
    /// waits for the same kernels to download its results next. A failed copy fails the
    /// next call, not this one.
    ///
    /// # Errors
    /// Driver errors recording or querying the end of this prove's kernels (nothing is
    /// sent then).
    pub(super) fn hand_over(
        &self,
        call: &ProveCall<'_>,
        vecs: &SlotVecs<'_>,
        a_free: &CudaEvent,
    ) -> Result<()> {
        let dev = &self.dev;
        let end = dev.timing_event()?;
        dev.record(&end)?;
        let mut next = self.ahead.hand.next.lock();
        let w = loop {
            let mine = |w: &mut Lent| w.shape == call.shape && w.at == vecs.witness_at();
            if let Some(w) = next.waiting.take_if(mine) {
                break w;
            }
            if dev.event_done(&end)? {
                return Ok(());
            }
            self.ahead.hand.lent.wait_for(&mut next, LENDER_POLL);
        };
        let (lay, _) = w.shape.layout();
        let [ea, eb, ec] = &w.events;
        let part = |v: SlotVec| lay[v as usize].0..lay[v as usize].0 + lay[v as usize].1;
        let copies = [
            (
                vecs.get(SlotVec::A),
                part(SlotVec::A),
                Some(a_free),
                Some(ea),
            ),
            (vecs.get(SlotVec::B), part(SlotVec::B), Some(&end), Some(eb)),
            (vecs.get(SlotVec::C), part(SlotVec::C), None, Some(ec)),
        ];
        let sent = match self
            .ahead
            .abc
            .send(w.buf, |buf| dev.upload_pinned_ranges_after(buf, &copies))
        {
            Ok(()) => {
                self.ahead.hand.handed.fetch_add(1, Ordering::Relaxed);
                Ok(w.events)
            }
            Err(e) => {
                tracing::warn!(gpu = dev.ordinal(), "the next call's a, b, c: {e}");
                Err(format!(
                    "the copies of a, b, c the previous prove enqueued: {e}"
                ))
            }
        };
        next.sent = Some((w.id, sent));
        Ok(())
    }
}
