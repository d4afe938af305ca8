//! The five sums of a prove with the SRS streamed from registered host memory, through one
//! ring of device slots (issue #26): the order their chunks are summed in
//! ([`interleave_order`]: the copy-bound L, A and B sums between the compute-bound H sum's
//! chunks), where each chunk lies in the ring ([`ring_places`]), and the [`Ring`] that
//! enqueues the copies and sums with stream waits only. The sums themselves are
//! `sums.rs`'s; the sequence around them (quotient, uploads of the witness) is `run.rs`'s.

use std::time::Duration;

use cudarc::driver::CudaEvent;

use crate::backend::plan::SumPlan;
use crate::backend::residency::Query;
use crate::backend::sums::{enqueue_chunk, OutRegions, Outputs};
use crate::device::arena::DevRegion;
use crate::device::layout::FR_BYTES;
use crate::device::pinned::HostRegistration;
use crate::device::upload::UploadScope;
use crate::device::{Device, Trace};
use crate::error::{GpuError, Result};
use crate::ops::msm::Group;

/// Slots of one chunk buffer of a [`Ring`] (sized for a chunk of G2 points), each half a
/// chunk of G1 points. A ring has two buffers, more where the budget leaves room for them
/// (`ProvePlan::more_bufs`): eight slots or more. A chunk of the H sum takes two slots, as
/// do the split sums' (L, A, B) in G1 and B in G2's of half as many points; streamed in
/// small chunks, a split sum's chunk takes a whole buffer, four slots (`plan.rs`,
/// `WIDE_SPLIT_BELOW`); streamed in chunks above `SPLIT_CHUNK_MAX`, a split sum's chunk
/// takes one slot, so that the ring holds six of them beside an H chunk twice their size
/// and their copies run under its sums.
pub const PER_BUF: usize = 4;
/// Slots of a ring of the two buffers every streamed plan has.
pub const RING: usize = 2 * PER_BUF;

/// One sum streamed through a [`Ring`]: its plan, its host points (registered), and its
/// scalars on the device.
pub struct RingSum<'s, 'h> {
    /// The sum's plan.
    pub sum: &'s SumPlan,
    /// Its bases in host memory (blst affine points).
    pub host: &'h [u8],
    /// Its scalars on the device.
    pub scalars: DevRegion<'s>,
}

impl RingSum<'_, '_> {
    fn part(&self, j: usize) -> (usize, usize) {
        let c = self.sum.chunk;
        (j * c, ((j + 1) * c).min(self.sum.n))
    }

    /// Slots of `slot_bytes` a chunk of this sum takes: 1, 2 or 4 (a whole buffer).
    ///
    /// # Errors
    /// [`GpuError::Input`] for a chunk larger than a buffer.
    pub fn width(&self, slot_bytes: usize) -> Result<usize> {
        let bytes = self.sum.chunk * self.sum.group.affine_bytes();
        match bytes.div_ceil(slot_bytes.max(1)) {
            0 | 1 => Ok(1),
            2 => Ok(2),
            3 | 4 => Ok(PER_BUF),
            _ => Err(GpuError::Input(format!(
                "a chunk of {} points of {:?} does not fit a buffer of {PER_BUF} ring slots of \
                 {slot_bytes} bytes",
                self.sum.chunk, self.sum.query
            ))),
        }
    }
}

/// The order in which the chunks of several streamed sums (`chunks[s]` each) are summed:
/// the first `head` chunks of sum 0, then always the next chunk of the sum least far
/// along, sum s > 0 taking none before sum 0 has done `after[s]` of its chunks (the lower
/// index on a tie). How far along a sum is is measured on sum 0's chunks: sum s spreads its
/// chunks evenly over those of sum 0 from its `after[s]`-th to its `until[s]`-th (all of
/// them when not given), so a sum held back does not run its chunks in a burst once it may
/// start, and a sum brought forward is done by then. With sum 0 the compute-bound H sum and
/// the others the copy-bound L, A and B sums, the copies of the others' points run while
/// H's chunks are summed; the head covers the upload of their scalars, `after` the B
/// scalars' wait for their place (the quotient's coefficients the H sum reads first), and
/// `until` frees the L scalars' place (over a) for the next partition's a before the end.
pub fn interleave_order(
    chunks: &[usize],
    head: usize,
    after: &[usize],
    until: &[usize],
) -> Vec<(usize, usize)> {
    let total: usize = chunks.iter().sum();
    let c0 = chunks.first().copied().unwrap_or(0);
    let after = |s: usize| match s {
        0 => 0,
        _ => after.get(s).copied().unwrap_or(0).min(c0),
    };
    let until = |s: usize| match s {
        0 => c0,
        _ => until.get(s).copied().unwrap_or(c0).clamp(after(s), c0),
    };
    let mut done = vec![0usize; chunks.len()];
    let mut order = Vec::with_capacity(total);
    for j in 0..head.min(c0) {
        order.push((0, j));
    }
    if !chunks.is_empty() {
        done[0] = head.min(c0);
    }
    // Sum s's progress on sum 0's chunks, as a fraction num / den: after(s) + its done
    // fraction of its span to until(s) (the plain done fraction when sum 0 has no chunks).
    let progress = |s: usize, done: &[usize]| -> (u128, u128) {
        let (d, n) = (done[s] as u128, chunks[s] as u128);
        match c0 {
            0 => (d, n),
            _ => {
                let (a, u, c) = (after(s) as u128, until(s) as u128, c0 as u128);
                (a * n + d * (u - a), c * n)
            }
        }
    };
    while order.len() < total {
        let next = (0..chunks.len())
            .filter(|&s| done[s] < chunks[s] && done[0] >= after(s))
            .min_by(|&x, &y| {
                let ((nx, dx), (ny, dy)) = (progress(x, &done), progress(y, &done));
                (nx * dy).cmp(&(ny * dx))
            })
            .expect("a sum with chunks left that may run");
        order.push((next, done[next]));
        done[next] += 1;
    }
    order
}

/// Where one chunk of a ring order lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingPlace {
    /// Its first slot (a multiple of its width).
    pub slot: usize,
    /// Slots it takes: 1, 2 or 4 (a whole buffer).
    pub width: usize,
    /// The position in the order of the last chunk before it in any of its slots: its
    /// copy is enqueued once that chunk's sum is (`None`: the slots are fresh).
    pub after: Option<usize>,
}

/// The places of chunks `widths[i]` slots wide (1, 2 or 4; others round up), summed in
/// that order, in a ring of `ring` slots (a multiple of [`PER_BUF`]): each takes the next
/// slots round the ring, skipping slots to start at a multiple of its width, so that it
/// lies inside one chunk buffer.
pub fn ring_places(widths: &[usize], ring: usize) -> Vec<RingPlace> {
    let ring = ring.next_multiple_of(PER_BUF).max(PER_BUF);
    let mut last: Vec<Option<usize>> = vec![None; ring];
    let mut at = 0usize;
    widths
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let width = w.clamp(1, PER_BUF).next_power_of_two();
            at = at.next_multiple_of(width);
            let slot = at % ring;
            let after = last[slot..slot + width].iter().flatten().copied().max();
            last[slot..slot + width].fill(Some(i));
            at += width;
            RingPlace { slot, width, after }
        })
        .collect()
}

/// [`PER_BUF`] slots cut from each of its chunk buffers (two or more), with the events that
/// say when a slot's copy is done and when its sum has read it. The copy into a slot waits (on the copy
/// stream) for the sum of the chunk last in it; the sum waits (on the compute stream) for
/// its copy. Nothing waits on the host. Each sum is timed on the device (two events), so
/// that a prove reports each query's device time although their chunks interleave; with a
/// [`Trace`] those sums and each copy are its spans.
pub struct Ring<'a> {
    bufs: Vec<DevRegion<'a>>,
    /// Bytes of a slot: a quarter of a chunk buffer, in whole G1 points.
    slot_bytes: usize,
    copied: Vec<CudaEvent>,
    consumed: Vec<CudaEvent>,
    used: Vec<bool>,
    /// Each sum's query, chunk, and start and end on the compute stream.
    timed: Vec<(Query, usize, CudaEvent, CudaEvent)>,
    /// The spans of the copies and the quotient (`CUZK_GPU_TRACE`).
    trace: Option<Trace>,
}

impl<'a> Ring<'a> {
    /// The ring over the chunk buffers `bufs` (at least one).
    ///
    /// # Errors
    /// [`GpuError::Internal`] without buffers; driver errors (events).
    pub fn new(dev: &Device, bufs: &[DevRegion<'a>]) -> Result<Ring<'a>> {
        let pb = Group::G1.affine_bytes();
        let smallest = bufs
            .iter()
            .map(|b| b.bytes())
            .min()
            .ok_or_else(|| GpuError::Internal("a ring without buffers".into()))?;
        let slots = bufs.len() * PER_BUF;
        let events = || {
            (0..slots)
                .map(|_| dev.timing_event())
                .collect::<Result<Vec<_>>>()
        };
        Ok(Ring {
            bufs: bufs.to_vec(),
            slot_bytes: smallest / PER_BUF / pb * pb,
            copied: events()?,
            consumed: events()?,
            used: vec![false; slots],
            timed: Vec::new(),
            trace: Trace::start(dev)?,
        })
    }

    /// Bytes of one slot.
    pub fn slot_bytes(&self) -> usize {
        self.slot_bytes
    }

    /// Slots of the ring: [`PER_BUF`] a buffer.
    pub fn slots_len(&self) -> usize {
        self.used.len()
    }

    /// The device region of `place`.
    fn region(&self, place: RingPlace) -> Result<DevRegion<'a>> {
        let buf = &self.bufs[place.slot / PER_BUF];
        buf.slice(
            (place.slot % PER_BUF) * self.slot_bytes,
            place.width * self.slot_bytes,
        )
    }

    /// The slots of `place`.
    fn slots(&self, place: RingPlace) -> std::ops::Range<usize> {
        place.slot..(place.slot + place.width).min(self.slots_len())
    }

    /// Enqueues the copy of chunk `j` of `s` into `place`, after the sums that last read
    /// its slots.
    ///
    /// # Errors
    /// [`GpuError::Input`] for a chunk larger than its place; driver errors.
    pub fn copy<'e>(
        &mut self,
        dev: &Device,
        up: &UploadScope<'_, 'e>,
        reg: &HostRegistration,
        s: &RingSum<'_, 'e>,
        j: usize,
        place: RingPlace,
    ) -> Result<()> {
        let pb = s.sum.group.affine_bytes();
        let (b, e) = s.part(j);
        let dst = self.region(place)?;
        if (e - b) * pb > dst.bytes() || s.host.len() < e * pb {
            return Err(GpuError::Input(format!(
                "chunk {j} of {} points does not fit {} ring slots of {} bytes",
                e - b,
                place.width,
                self.slot_bytes
            )));
        }
        for k in self.slots(place) {
            if self.used[k] {
                dev.copy_wait(&self.consumed[k])?;
            }
        }
        let span = self.begin(dev, s.sum.query.name(), j, true)?;
        for (off, piece) in reg.split(&s.host[b * pb..e * pb]) {
            up.upload(&dst.slice(off, piece.len())?, piece)?;
        }
        self.span_end(dev, span)?;
        up.record(&self.copied[place.slot])
    }

    /// The start of a traced span `what` on the compute stream (none untraced): its id
    /// for [`Ring::span_end`].
    ///
    /// # Errors
    /// Driver errors.
    pub fn span_begin(&mut self, dev: &Device, what: &'static str) -> Result<usize> {
        self.begin(dev, what, 0, false)
    }

    fn begin(&mut self, dev: &Device, what: &'static str, j: usize, copy: bool) -> Result<usize> {
        match &mut self.trace {
            Some(t) => t.begin(dev, what, j, copy),
            None => Ok(0),
        }
    }

    /// The end of traced span `id` on its stream (nothing untraced).
    ///
    /// # Errors
    /// Driver errors.
    pub fn span_end(&mut self, dev: &Device, id: usize) -> Result<()> {
        match &mut self.trace {
            Some(t) => t.end(dev, id),
            None => Ok(()),
        }
    }

    /// Enqueues the sum of chunk `j` of `s` from `place` (once its copy is done) in
    /// `scratch`, its results into `results` at the plan's offsets.
    ///
    /// # Errors
    /// Arena, input or driver errors.
    pub fn sum(
        &mut self,
        dev: &Device,
        scratch: &DevRegion<'_>,
        s: &RingSum<'_, '_>,
        j: usize,
        place: RingPlace,
        results: &Outputs<'_>,
    ) -> Result<()> {
        dev.wait_on(&self.copied[place.slot])?;
        let (b, e) = s.part(j);
        let sc = s.scalars.slice(b * FR_BYTES, (e - b) * FR_BYTES)?;
        let out = OutRegions::of(results, s.sum, j)?;
        let bases = self.region(place)?;
        let (start, end) = (dev.timing_event()?, dev.timing_event()?);
        dev.record(&start)?;
        enqueue_chunk(dev, scratch, s.sum, &bases, &sc, e - b, &out)?;
        dev.record(&end)?;
        self.timed.push((s.sum.query, j, start, end));
        for k in self.slots(place) {
            dev.record(&self.consumed[k])?;
            self.used[k] = true;
        }
        Ok(())
    }

    /// Once the compute stream is done: each query's device time, the sum of its chunks'
    /// (in [`Query`] order).
    ///
    /// # Errors
    /// Driver errors (an event not yet complete).
    pub fn query_times(&self, dev: &Device) -> Result<[Duration; 5]> {
        let mut out = [Duration::ZERO; 5];
        for (q, _, start, end) in &self.timed {
            out[*q as usize] += dev.elapsed(start, end)?;
        }
        Ok(out)
    }

    /// Once the compute stream is done, with `CUZK_GPU_TRACE`: appends the prove's spans,
    /// its copies and the quotient with every sum, to the trace file (nothing untraced).
    ///
    /// # Errors
    /// Driver errors reading the events.
    pub fn write_trace(
        &mut self,
        dev: &Device,
        lg: u32,
        host: &[(&'static str, CudaEvent)],
    ) -> Result<()> {
        let Some(t) = self.trace.take() else {
            return Ok(());
        };
        let sums = self.timed.iter().map(|(q, j, s, e)| (q.name(), *j, s, e));
        t.write(dev, lg, sums, host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interleave_takes_every_chunk_once_in_order_per_sum() {
        for (chunks, head, after) in [
            (vec![32, 32, 31], 4, vec![]),
            (vec![64, 63, 63], 4, vec![]),
            (vec![2, 5, 0], 4, vec![]),
            (vec![1], 4, vec![]),
            (vec![0, 3, 3], 4, vec![0, 2, 5]),
            (vec![7, 1, 9], 0, vec![]),
            (vec![32, 16, 16, 4, 8], 4, vec![0, 0, 0, 10, 10]),
            (vec![3, 2, 2, 4, 4], 4, vec![0, 0, 0, 9, 9]),
            (vec![64, 32, 32, 8, 16], 4, vec![0, 0, 0, 18, 18]),
            (vec![8, 16, 16, 4, 8], 2, vec![0, 0, 0, 6, 6]),
        ] {
            let order = interleave_order(&chunks, head, &after, &[]);
            assert_eq!(order.len(), chunks.iter().sum::<usize>());
            for (s, &n) in chunks.iter().enumerate() {
                let mine: Vec<usize> = order.iter().filter(|o| o.0 == s).map(|o| o.1).collect();
                assert_eq!(mine, (0..n).collect::<Vec<_>>(), "{chunks:?}");
            }
            let lead = head.min(chunks.first().copied().unwrap_or(0));
            assert!(order[..lead].iter().all(|o| o.0 == 0));
            // No chunk of sum s before sum 0 has done after[s] chunks (or all it has).
            for (i, &(s, _)) in order.iter().enumerate() {
                let gate = after.get(s).copied().unwrap_or(0).min(chunks[0]);
                let h_done = order[..i].iter().filter(|o| o.0 == 0).count();
                assert!(s == 0 || h_done >= gate, "{chunks:?} {after:?}: {order:?}");
            }
        }
    }

    #[test]
    fn a_held_back_sum_spreads_its_chunks_over_what_is_left_of_sum_0() {
        // 2^27 in 2^22-point H chunks, the split sums' twice as large, B held back until H
        // has done 10: B in G1 (4 chunks) and B in G2 (8) between H's last 22, never more
        // than three of theirs in a row.
        let order = interleave_order(&[32, 16, 16, 4, 8], 4, &[0, 0, 0, 10, 10], &[]);
        let first_b = order.iter().position(|o| o.0 >= 3).expect("a B chunk");
        let h_before = order[..first_b].iter().filter(|o| o.0 == 0).count();
        // Held back for 10; on the tie at 10 (both a third along) H goes first.
        assert_eq!(h_before, 11);
        let mut run = 0;
        for o in &order[first_b..] {
            run = if o.0 >= 3 { run + 1 } else { 0 };
            assert!(run <= 3, "{order:?}");
        }
        let last_h = order.iter().rposition(|o| o.0 == 0).expect("an H chunk");
        assert!(order.len() - last_h <= 6, "{order:?}");
    }

    #[test]
    fn sums_brought_forward_are_done_by_their_until() {
        // 2^27 in 2^24-point H chunks (8), L and A (16 each) done once H has done 7, B held
        // back until H has done 4: the last L and A chunks come before H's 8th, B's after.
        let (chunks, after, until) = ([8, 16, 16, 4, 8], [0, 0, 0, 4, 4], [8, 7, 7, 8, 8]);
        let order = interleave_order(&chunks, 2, &after, &until);
        assert_eq!(order.len(), 52);
        let at = |o: &[(usize, usize)], h| o.iter().position(|&x| x == (0, h)).expect("H");
        let last = |o: &[(usize, usize)], s| o.iter().rposition(|x| x.0 == s).expect("chunk");
        let h8 = at(&order, 7);
        assert!(last(&order, 1) < h8 && last(&order, 2) < h8, "{order:?}");
        assert!(last(&order, 1) > at(&order, 6), "{order:?}");
        assert!(last(&order, 3) > h8 && last(&order, 4) > h8, "{order:?}");
        // Without until, L runs to the end as before.
        let plain = interleave_order(&chunks, 2, &after, &[]);
        assert!(last(&plain, 1) > at(&plain, 7), "{plain:?}");
        // An until below the gate runs the sum in a burst once its gate is passed (after
        // H's chunk on the tie).
        let burst = interleave_order(&[4, 2, 2], 1, &[0, 3, 0], &[4, 1, 4]);
        let first_l = burst.iter().position(|o| o.0 == 1).expect("L");
        assert_eq!(burst[first_l + 1].0, 1, "{burst:?}");
        assert!(burst[..first_l].iter().filter(|o| o.0 == 0).count() >= 3);
    }

    #[test]
    fn the_interleave_spreads_the_h_chunks_evenly() {
        // 2^27 in 2^22-point chunks: H, L, A.
        let order = interleave_order(&[32, 32, 31], 4, &[], &[]);
        // After the head, no two H chunks are more than three others apart, and the last
        // H chunk is among the last few.
        let h_at: Vec<usize> = order
            .iter()
            .enumerate()
            .filter(|(_, o)| o.0 == 0)
            .map(|(i, _)| i)
            .collect();
        for w in h_at[4..].windows(2) {
            assert!(w[1] - w[0] <= 4, "{h_at:?}");
        }
        assert!(order.len() - h_at[31] <= 4);
    }

    /// The first slot and the `after` of each chunk [`ring_places`] places.
    fn placed(widths: &[usize]) -> (Vec<usize>, Vec<Option<usize>>) {
        ring_places(widths, RING)
            .iter()
            .map(|p| (p.slot, p.after))
            .unzip()
    }

    #[test]
    fn ring_places_put_wide_chunks_on_whole_buffers_after_their_slots_last_reader() {
        // Small chunks: H, H (two slots), L (a whole buffer), H, A (a whole buffer), H, H,
        // B2 (a whole buffer): the four-slot ring of halves as it was, in quarters.
        let (slots, after) = placed(&[2, 2, 4, 2, 4, 2, 2, 4]);
        // L starts at slot 4; H at 0 (round two); A skips slots 2, 3 for slots 4..8; H at
        // 0, 2; B2 on slots 4..8.
        assert_eq!(slots, [0, 2, 4, 0, 4, 0, 2, 4]);
        assert_eq!(
            after,
            [
                None,
                None,
                None,
                Some(0),
                Some(2),
                Some(3),
                Some(1),
                Some(4)
            ]
        );
    }

    #[test]
    fn capped_split_chunks_take_one_slot_six_beside_an_h_chunk() {
        // 2^24-point H chunks (two slots) and 2^23-point split chunks (one): H, H, then
        // six split chunks, then H. The first eight slots are fresh (copied under the
        // quotient); the third H waits for the first's sum, the split chunk after it for
        // the second's.
        let (slots, after) = placed(&[2, 2, 1, 1, 1, 1, 2, 1, 1]);
        assert_eq!(slots, [0, 2, 4, 5, 6, 7, 0, 2, 3]);
        assert_eq!(
            after,
            [
                None,
                None,
                None,
                None,
                None,
                None,
                Some(0),
                Some(1),
                Some(1)
            ]
        );
    }

    #[test]
    fn ring_places_never_share_a_slot_between_chunks_in_flight() {
        // Any mix: a chunk's slots are its own from its copy until its sum, and its copy
        // comes after the sums of every earlier chunk in those slots.
        let mut seed = 0x9e37_79b9_u32;
        for len in [0usize, 1, 2, 5, 17, 64, 101] {
            let widths: Vec<usize> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 17;
                    seed ^= seed << 5;
                    1 << (seed % 3)
                })
                .collect();
            for ring in [RING, 3 * PER_BUF, 4 * PER_BUF] {
                let p = ring_places(&widths, ring);
                for (i, pi) in p.iter().enumerate() {
                    assert_eq!(pi.width, widths[i]);
                    assert!(pi.slot + pi.width <= ring, "{widths:?}");
                    assert_eq!(pi.slot % pi.width, 0, "{widths:?}");
                    assert_eq!(pi.slot / PER_BUF, (pi.slot + pi.width - 1) / PER_BUF);
                    // The last earlier chunk in each of its slots is `after` or before it.
                    for k in pi.slot..pi.slot + pi.width {
                        let prev = (0..i)
                            .rev()
                            .find(|&m| (p[m].slot..p[m].slot + p[m].width).contains(&k));
                        assert!(prev <= pi.after, "{widths:?}: {i}");
                        if let Some(m) = prev {
                            assert!(m < i);
                        }
                    }
                    assert!(pi.after.is_none_or(|a| a < i));
                }
            }
        }
    }

    #[test]
    fn a_third_buffer_lets_copies_run_a_buffer_further_ahead() {
        // 16 GiB: H chunks two slots wide, split chunks a whole buffer. With two buffers
        // the second split chunk after H, H waits for the first's sum; with three it goes
        // into the third buffer, fresh.
        let widths = [2, 2, 4, 4, 2, 2, 4];
        let two = ring_places(&widths, RING);
        let three = ring_places(&widths, 3 * PER_BUF);
        assert_eq!(
            two.iter().map(|p| p.slot).collect::<Vec<_>>(),
            [0, 2, 4, 0, 4, 6, 0]
        );
        assert_eq!(
            three.iter().map(|p| p.slot).collect::<Vec<_>>(),
            [0, 2, 4, 8, 0, 2, 4]
        );
        assert_eq!(two[3].after, Some(1));
        assert_eq!(three[3].after, None);
        assert!(three.iter().filter(|p| p.after.is_none()).count() > 3);
    }
}
