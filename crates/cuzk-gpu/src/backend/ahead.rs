//! One device slot fed by two calls (issue #26). When the budget admits a single worker
//! slot (a streamed SRS on a 16 or 24 GiB card) but more than one worker calls, a call
//! stages ahead of the slot: it fills a, b, c (evaluated from the recording when the
//! matrices are not on the device: seconds at 2^27) and the witness vectors into two
//! pinned [`Staging`] buffers of the backend while the previous call's kernels run, and
//! takes the slot only to enqueue the copies and its kernels. Each staging goes back to
//! the next call with its copies still in flight: a, b, c as soon as they are enqueued,
//! the witness once it went up, and the next taker waits for those copies. A lean slot is
//! split when it can be ([`WitnessAt::Split`]): the L and A scalars go up as soon as the
//! quotient is done, so their sums run between the H sum's chunks (`streamed.rs`), and the B
//! scalars once the H sum has read the quotient; so the witness is staged in two buffers.
//! The stagings together are the size of the one a slot would hold, so staging ahead costs
//! no host memory. In a split slot the next call's a, b, c may go up before the slot is
//! free (`handover.rs`).

use std::time::{Duration, Instant};

use cudarc::driver::CudaEvent;
use cuzk_groth16::{MsmOutputs, ProveReport, ProveStage, TokenTimes};
use parking_lot::{Condvar, Mutex};

use super::handover::{hands_over, HandOver};
use super::prepare::{fill_batched, pieces_within, staging_pieces};
use super::prove::ProveCall;
use super::slots::{SlotShape, SlotVec, SlotVecs, WitnessAt};
use super::GpuBackend;
use crate::device::pinned::{PinnedBuf, PinnedPool};
use crate::device::upload::PinnedUpload;
use crate::device::Device;
use crate::error::Result;

/// A pinned staging buffer handed from one call to the next.
pub(super) struct Staging {
    /// `None` while a call holds it.
    state: Mutex<Option<Held>>,
    returned: Condvar,
}

impl Default for Staging {
    fn default() -> Staging {
        Staging {
            state: Mutex::new(Some(Held::Empty)),
            returned: Condvar::new(),
        }
    }
}

enum Held {
    /// Not made yet (or lost to a failed copy).
    Empty,
    Free(PinnedBuf),
    /// Given back with its copies in flight.
    InFlight(PinnedUpload),
}

/// A [`Staging`] held by one call; it goes back on drop, or with its copies in flight by
/// [`StagingGuard::send`].
pub(super) struct StagingGuard<'s> {
    staging: &'s Staging,
    buf: Option<PinnedBuf>,
    /// Set once [`StagingGuard::send`] put the staging back.
    sent: bool,
}

impl Staging {
    /// Holds the buffer, at least `bytes` long: waits while another call holds it, then
    /// for the copies it was given back with; makes it (from `pinned`) when there is none
    /// or it is too small.
    ///
    /// # Errors
    /// Allocation errors (pinned memory).
    pub(super) fn take(
        &self,
        pinned: &std::sync::Arc<PinnedPool>,
        bytes: usize,
    ) -> Result<StagingGuard<'_>> {
        let held = {
            let mut st = self.state.lock();
            loop {
                if let Some(h) = st.take() {
                    break h;
                }
                self.returned.wait(&mut st);
            }
        };
        // From here the guard puts the staging back on every path (also when making a
        // buffer fails: then as not made).
        let mut guard = StagingGuard {
            staging: self,
            buf: None,
            sent: false,
        };
        let buf = match held {
            Held::Free(b) => Some(b),
            // A failed wait leaks the buffer (a copy may still read it): make another.
            Held::InFlight(t) => t.wait().ok(),
            Held::Empty => None,
        };
        guard.buf = match buf {
            Some(b) if b.len() >= bytes => Some(b),
            _ => Some(pinned.take(bytes)?),
        };
        Ok(guard)
    }

    /// Makes the buffer now, `bytes` long, if it is not made (at preload).
    ///
    /// # Errors
    /// Allocation errors.
    pub(super) fn reserve(&self, pinned: &std::sync::Arc<PinnedPool>, bytes: usize) -> Result<()> {
        self.take(pinned, bytes).map(drop)
    }

    /// Puts `buf` back with the copies `upload` enqueues from it in flight: the next taker
    /// waits for them.
    ///
    /// # Errors
    /// `upload`'s errors (the buffer is then lost, and the next taker makes another).
    pub(super) fn send(
        &self,
        buf: PinnedBuf,
        upload: impl FnOnce(PinnedBuf) -> Result<PinnedUpload>,
    ) -> Result<()> {
        let (held, out) = match upload(buf) {
            Ok(ticket) => (Held::InFlight(ticket), Ok(())),
            Err(e) => (Held::Empty, Err(e)),
        };
        self.put(held);
        out
    }

    fn put(&self, h: Held) {
        *self.state.lock() = Some(h);
        self.returned.notify_one();
    }
}

impl StagingGuard<'_> {
    /// The buffer's bytes.
    ///
    /// # Errors
    /// Driver errors.
    pub(super) fn bytes(&mut self) -> Result<&mut [u8]> {
        match self.buf.as_mut() {
            Some(b) => b.as_mut_slice(),
            None => Ok(&mut []),
        }
    }

    /// Gives the buffer back with the copies `upload` enqueues from it in flight: the next
    /// taker waits for them.
    ///
    /// # Errors
    /// `upload`'s errors (the buffer is then lost, and the next taker makes another).
    pub(super) fn send(
        mut self,
        upload: impl FnOnce(PinnedBuf) -> Result<PinnedUpload>,
    ) -> Result<()> {
        let Some(buf) = self.buf.take() else {
            return Ok(());
        };
        self.sent = true;
        self.staging.send(buf, upload)
    }
}

impl StagingGuard<'_> {
    /// Lends the buffer out (to the slot's holder, `GpuBackend::hand_over`), who puts
    /// the staging back with its copies in flight; [`StagingGuard::restore`] takes it
    /// back when that did not happen.
    pub(super) fn lend(&mut self) -> Option<PinnedBuf> {
        let buf = self.buf.take()?;
        self.sent = true;
        Some(buf)
    }

    /// The buffer [`StagingGuard::lend`] lent, back.
    pub(super) fn restore(&mut self, buf: PinnedBuf) {
        self.buf = Some(buf);
        self.sent = false;
    }
}

impl Drop for StagingGuard<'_> {
    fn drop(&mut self) {
        // `send` put the staging back itself.
        if !self.sent {
            self.staging
                .put(self.buf.take().map_or(Held::Empty, Held::Free));
        }
    }
}

/// The stagings of a backend that stages ahead of its one slot.
#[derive(Default)]
pub(super) struct Ahead {
    /// a, b, c (the layout's bytes up to the L scalars).
    pub(super) abc: Staging,
    /// The L and A scalars (from the L scalars to the B scalars).
    pub(super) witness: Staging,
    /// The B scalars (from them to the end).
    pub(super) witness_b: Staging,
    /// The next call's a, b, c on their way to the slot's holder (`handover.rs`).
    pub(super) hand: HandOver,
}

/// How a call's a, b, c go up.
pub(super) enum AbcUp<'s> {
    /// From its staging, once it has the slot.
    Staged(StagingGuard<'s>),
    /// Already enqueued by the previous holder of the slot (`hand_over`).
    Handed,
    /// Not at all: the device computes them from the matrices.
    Device,
}

/// The layout's part boundaries: a, b, c, the L and A scalars, the B scalars, the end.
pub(super) fn bounds(shape: &SlotShape) -> [usize; 6] {
    let (lay, total) = shape.layout();
    [
        0,
        lay[SlotVec::B as usize].0,
        lay[SlotVec::C as usize].0,
        lay[SlotVec::L as usize].0,
        lay[SlotVec::ScalarsB as usize].0,
        total,
    ]
}

impl GpuBackend {
    /// Whether compute calls of this mode stage ahead of the slot: one slot, and more
    /// than one worker to feed it.
    pub(super) fn stages_ahead(&self, workers_fitted: usize) -> bool {
        workers_fitted == 1 && self.cfg.workers > 1
    }

    /// Makes the two stagings for partitions of `shape`; `abc`: the host fills a, b, c
    /// too.
    ///
    /// # Errors
    /// Allocation errors.
    pub(super) fn reserve_ahead(&self, shape: &SlotShape, abc: bool) -> Result<()> {
        let b = bounds(shape);
        if abc {
            self.ahead.abc.reserve(&self.pinned, b[3])?;
        }
        self.ahead.witness.reserve(&self.pinned, b[4] - b[3])?;
        self.ahead.witness_b.reserve(&self.pinned, b[5] - b[4])
    }

    /// One compute call staged ahead of the slot (module docs).
    pub(super) fn compute_ahead(
        &self,
        call: &ProveCall<'_>,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs> {
        let dev = &self.dev;
        let (asg, shape, srs, matrices) = (call.asg, call.shape, call.srs, call.matrices);
        let call_start = Instant::now();
        let t = Instant::now();
        self.enter(call, ProveStage::Prepare)?;
        let lean = self.fit(srs, &shape)?.lean && matrices.is_none();
        let b = bounds(&shape);
        let pieces = staging_pieces(&shape, asg, call.rows);
        report.push(ProveStage::Prepare, t.elapsed());

        call.reached(ProveStage::Srs);
        let t = Instant::now();
        let resident = self.resident_for(srs, &shape)?;
        report.push(ProveStage::Srs, t.elapsed());

        // Filled while the slot's previous call runs: a, b, c (unless the device computes
        // them from the matrices), then the witness vectors. Each part in one parallel
        // pass; nothing is copied yet.
        self.enter(call, ProveStage::Upload)?;
        let t = Instant::now();
        let fill = |g: &mut StagingGuard<'_>, range: std::ops::Range<usize>| -> Result<()> {
            let mine = pieces_within(&pieces, &range);
            let len = range.len();
            fill_batched(&mut g.bytes()?[..len], range, mine, usize::MAX, |_, _| {
                Ok(())
            })
        };
        let mut abc = match matrices {
            None => {
                let mut g = self.ahead.abc.take(&self.pinned, b[3])?;
                fill(&mut g, 0..b[3])?;
                AbcUp::Staged(g)
            }
            Some(_) => AbcUp::Device,
        };
        let mut witness = self.ahead.witness.take(&self.pinned, b[4] - b[3])?;
        fill(&mut witness, b[3]..b[4])?;
        let mut witness_b = self.ahead.witness_b.take(&self.pinned, b[5] - b[4])?;
        fill(&mut witness_b, b[4]..b[5])?;
        report.push(ProveStage::Fill, t.elapsed());

        // The slot, once the previous call is done with it, then the copies into it, each
        // part's event recorded after it, then the token.
        let wait_start = call_start.elapsed();
        let t = Instant::now();
        let slot_bytes = shape.device_bytes(lean);
        if self.slots.unmade() > 0 {
            self.check_budget("a worker slot", slot_bytes as u64)?;
        }
        let at = WitnessAt::of(&shape, lean);
        // Staged a, b, c wait for the slot in the hand-over, so that its holder may send
        // them before it is done with the slot (`hand_over`).
        let events = || -> Result<[CudaEvent; 3]> {
            Ok([
                dev.timing_event()?,
                dev.timing_event()?,
                dev.timing_event()?,
            ])
        };
        // Lent to the slot's holder where it hands them over (`handover.rs`).
        let lent = match &mut abc {
            AbcUp::Staged(g) if hands_over(at) => self.lend_abc(g, &shape, at, events()?),
            _ => None,
        };
        // The slot, unless the holder has sent another call's a, b, c into it: then that
        // call's (a call that got it first gives it back and waits).
        let slot = loop {
            self.wait_for_handed_call(lent);
            let slot = self
                .slots
                .take(dev, &self.pinned, &shape, shape.bytes(), slot_bytes);
            if slot.is_ok() && self.handed_to_another(lent) {
                drop(slot);
                continue;
            }
            break slot;
        };
        let abc_done = match lent {
            Some(id) => self.reclaim_abc(id, &mut abc)?,
            None => events()?,
        };
        let slot = slot?;
        self.host_mark("slot");
        let used = slot.device_range(&shape, lean)?;
        let vecs = SlotVecs::new(&used, &shape, at)?;
        let [a_done, b_done, c_done] = abc_done;
        let parts_done: [_; 5] = [
            a_done,
            b_done,
            c_done,
            dev.timing_event()?,
            dev.timing_event()?,
        ];
        let e0 = dev.timing_event()?;
        dev.record_on_copy(&e0)?;
        match std::mem::replace(&mut abc, AbcUp::Device) {
            AbcUp::Staged(g) => {
                let copies = (0..3)
                    .map(|k| {
                        let dst = used.slice(b[k], b[k + 1] - b[k])?;
                        Ok((dst, b[k]..b[k + 1], Some(&parts_done[k])))
                    })
                    .collect::<Result<Vec<_>>>()?;
                g.send(|buf| dev.upload_pinned_ranges(buf, &copies))?;
            }
            AbcUp::Handed => {}
            AbcUp::Device => parts_done[..3]
                .iter()
                .try_for_each(|e| dev.record_on_copy(e))?,
        }
        // Each witness vector from its place in the staging (which starts at `from` in
        // the layout) to its place on the device; the last copy records `done`.
        let (lay, _) = shape.layout();
        let offsets = shape.witness_offsets(at);
        let send = |g: StagingGuard<'_>, vs: &[usize], from: usize, done: &CudaEvent| {
            let copies = vs
                .iter()
                .enumerate()
                .map(|(i, &w)| {
                    let (off, len) = lay[SlotVec::L as usize + w];
                    let dst = used.slice(offsets[w], len)?;
                    let last = i + 1 == vs.len();
                    Ok((dst, off - from..off - from + len, last.then_some(done)))
                })
                .collect::<Result<Vec<_>>>()?;
            g.send(|buf| dev.upload_pinned_ranges(buf, &copies))
        };
        let send_la = |g| send(g, &[0, 1], b[3], &parts_done[3]);
        let send_b = |g| send(g, &[2], b[4], &parts_done[4]);
        let (mut witness, mut witness_b) = (Some(witness), Some(witness_b));
        if !lean {
            if let Some(g) = witness.take() {
                send_la(g)?;
            }
            if let Some(g) = witness_b.take() {
                send_b(g)?;
            }
        }
        self.host_mark("sent");
        let token = self.token.acquire();
        let wait = t.elapsed();
        report.push(ProveStage::TokenWait, wait);
        self.host_mark("token");

        let held = Instant::now();
        let mut shared = self.shared.lock();
        // A lean slot's witness goes up when the sums first need it or (`None`) its place
        // is free: split, the L and A scalars once the quotient is done (3) and the B
        // scalars once the H sum has read the quotient's coefficients at the head of b
        // (4); over a, b, c, all of it after the H sum (3). Each copy waits for what the
        // compute stream has enqueued so far.
        let after_compute = || -> Result<()> {
            let ev = dev.timing_event()?;
            dev.record(&ev)?;
            dev.copy_wait(&ev)
        };
        let mut ready = |k: usize, d: Option<&Device>| -> Result<()> {
            let both = at == WitnessAt::OverAbc;
            if k >= 3 {
                let la = witness.take();
                let b = (k == 4 || both).then(|| witness_b.take()).flatten();
                if la.is_some() || b.is_some() {
                    after_compute()?;
                }
                if let Some(g) = la {
                    send_la(g)?;
                }
                if let Some(g) = b {
                    send_b(g)?;
                }
            }
            match d {
                Some(d) => d.wait_on(&parts_done[k]),
                None => Ok(()),
            }
        };
        let out = self.kernels(
            call,
            &mut shared,
            &vecs,
            resident.as_deref(),
            report,
            &mut ready,
        );
        let out = match out {
            Ok(o) => dev.elapsed(&e0, &parts_done[4]).map(|device| {
                report.push_device(ProveStage::Upload, Duration::ZERO, device);
                o
            }),
            Err(e) => {
                self.drain_streams();
                Err(e)
            }
        };
        report.token = Some(TokenTimes {
            wait_start,
            wait,
            held: held.elapsed(),
        });
        drop(shared);
        drop(token);
        drop(slot);
        self.host_mark("returned");
        out
    }
}
