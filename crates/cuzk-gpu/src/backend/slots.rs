//! [`SlotPool`]: the per-worker device buffers of the GPU backend. A [`Slot`] holds one
//! partition's a, b, c evaluations and its compacted scalar vectors on the device, and a
//! pinned host staging buffer with the same layout from the first vector the host fills
//! (a when the host computed a, b, c; the L scalars when the device computes them from the
//! recorded matrices, which saves 3 × 2^lg × 32 bytes of pinned memory per worker: 12.9 GB
//! at 2^27), so host preparation writes straight into pinned memory and asynchronous
//! copies move it. A compute call takes a
//! slot for its whole duration and gives it back on drop (RAII, also on errors). Slots are
//! made on demand up to the configured worker count and re-made, logged, only when a larger
//! shape arrives: nothing on the hot path allocates device memory. The shared scratch and
//! the SRS are not here (backend.rs and residency.rs).

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};

use crate::device::arena::{DevRegion, VramArena, ALIGN};
use crate::device::layout::FR_BYTES;
use crate::device::pinned::{PinnedBuf, PinnedPool};
use crate::device::Device;
use crate::error::Result;

/// The sizes of one partition: domain 2^lg and the lengths of the three compacted scalar
/// vectors (L: aux; A: inputs + aux in the A density; B: the B density).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotShape {
    /// log2 of the evaluation domain.
    pub lg: u32,
    /// Scalars of the L query.
    pub n_l: usize,
    /// Scalars of the A query.
    pub n_a: usize,
    /// Scalars of the B queries (G1 and G2).
    pub n_b: usize,
}

/// Which vector of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotVec {
    /// a evaluations (n scalars, zero-padded).
    A,
    /// b evaluations.
    B,
    /// c evaluations.
    C,
    /// Compacted L scalars.
    L,
    /// Compacted A scalars.
    ScalarsA,
    /// Compacted B scalars.
    ScalarsB,
}

/// Where a slot's witness vectors (the L, A and B scalars) lie on the device, and so
/// when they may be uploaded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WitnessAt {
    /// After a, b, c (a full slot): at any time.
    Own,
    /// Over a, b, c, one after another (a lean slot): once the H sum has read the
    /// quotient's coefficients.
    OverAbc,
    /// A lean slot whose witness vectors each fit one of a, b, c ([`SlotShape::splits`]):
    /// L over a and the A scalars over c, as soon as the quotient is done (so the L and A
    /// sums can run between the H sum's chunks), the B scalars over b once the H sum has
    /// read the quotient's coefficients there.
    Split,
}

impl WitnessAt {
    /// A full slot, or a lean one of `shape` (split when it can be).
    pub fn of(shape: &SlotShape, lean: bool) -> WitnessAt {
        match (lean, shape.splits()) {
            (false, _) => WitnessAt::Own,
            (true, true) => WitnessAt::Split,
            (true, false) => WitnessAt::OverAbc,
        }
    }

    /// Whether the L and A scalars may go up as soon as the quotient is done.
    pub fn early(self) -> bool {
        self != WitnessAt::OverAbc
    }
}

impl SlotShape {
    /// Points of the longest query sum: the domain (H) or one of L, A, B.
    pub fn max_query(&self) -> usize {
        (1usize << self.lg)
            .max(self.n_l)
            .max(self.n_a)
            .max(self.n_b)
    }

    /// Byte offset and length of each vector, in [`SlotVec`] order, and the total.
    pub fn layout(&self) -> ([(usize, usize); 6], usize) {
        let n = 1usize << self.lg;
        let lens = [n, n, n, self.n_l, self.n_a, self.n_b];
        let mut out = [(0, 0); 6];
        let mut at = 0usize;
        for (o, len) in out.iter_mut().zip(lens) {
            let bytes = len * FR_BYTES;
            *o = (at, bytes);
            at = (at + bytes).next_multiple_of(ALIGN);
        }
        (out, at.max(ALIGN))
    }

    /// Total device bytes of one slot of this shape.
    pub fn bytes(&self) -> usize {
        self.layout().1
    }

    /// How far before their layout offset the witness vectors lie on the device: 0, or in
    /// a lean slot the whole of a, b, c (the witness goes up over them once the H sum has
    /// read the quotient).
    pub fn witness_at(&self, lean: bool) -> usize {
        match lean {
            true => self.layout().0[SlotVec::L as usize].0,
            false => 0,
        }
    }

    /// Whether each witness vector fits one of a, b, c (a lean slot can then be
    /// [`WitnessAt::Split`]): true of every Filecoin circuit, whose aux count is below
    /// its domain.
    pub fn splits(&self) -> bool {
        let n = 1usize << self.lg;
        self.n_l <= n && self.n_a <= n && self.n_b <= n
    }

    /// Device offsets of the L, A and B scalars.
    pub fn witness_offsets(&self, at: WitnessAt) -> [usize; 3] {
        let (lay, _) = self.layout();
        let [l, a, b] =
            [SlotVec::L, SlotVec::ScalarsA, SlotVec::ScalarsB].map(|v| lay[v as usize].0);
        match at {
            WitnessAt::Own => [l, a, b],
            WitnessAt::OverAbc => [0, a - l, b - l],
            WitnessAt::Split => [SlotVec::A, SlotVec::C, SlotVec::B].map(|v| lay[v as usize].0),
        }
    }

    /// Device bytes of one slot: the whole layout, or in a lean slot the larger of a, b, c
    /// and the witness vectors.
    pub fn device_bytes(&self, lean: bool) -> usize {
        let (_, total) = self.layout();
        match lean {
            true => {
                let abc = self.witness_at(true);
                abc.max(total - abc)
            }
            false => total,
        }
    }

    /// Where the host staging starts in the layout: 0 when the host fills a, b, c too,
    /// the L scalars' offset when the device computes a, b, c (`device_abc`).
    pub fn staged_from(&self, device_abc: bool) -> usize {
        match device_abc {
            true => self.layout().0[SlotVec::L as usize].0,
            false => 0,
        }
    }
}

/// One worker's buffers: its device memory and, unless the backend stages ahead of the
/// slot (`ahead.rs`), its pinned staging.
pub struct Slot {
    arena: VramArena,
    staging: Option<PinnedBuf>,
}

impl Slot {
    fn new(
        dev: &Arc<Device>,
        pinned: &Arc<PinnedPool>,
        bytes: usize,
        host_bytes: usize,
    ) -> Result<Slot> {
        let arena = VramArena::new(dev.clone(), bytes)?;
        let staging = match host_bytes {
            0 => None,
            n => Some(pinned.take(n)?),
        };
        Ok(Slot { arena, staging })
    }

    fn staging_len(&self) -> usize {
        self.staging.as_ref().map_or(0, PinnedBuf::len)
    }

    fn fits(&self, bytes: usize, host_bytes: usize) -> bool {
        self.arena.size() >= bytes && self.staging_len() >= host_bytes
    }

    /// The whole device range `shape` uses (lean or not: [`SlotShape::device_bytes`]).
    ///
    /// # Errors
    /// As [`VramArena::region`].
    pub fn device_range(&self, shape: &SlotShape, lean: bool) -> Result<DevRegion<'_>> {
        self.arena.region(0, shape.device_bytes(lean))
    }

    /// The whole device range `shape` uses (lean or not: [`SlotShape::device_bytes`]) and
    /// the pinned staging of its layout from byte `staged_from` ([`SlotShape::staged_from`])
    /// on, together (the staging is filled
    /// while earlier parts of it are copied into that range).
    ///
    /// # Errors
    /// [`crate::GpuError::Internal`] when the staging is smaller than that; as
    /// `Slot::region`; driver errors.
    pub fn upload_parts(
        &mut self,
        shape: &SlotShape,
        staged_from: usize,
        lean: bool,
    ) -> Result<(DevRegion<'_>, &mut [u8])> {
        let region = self.arena.region(0, shape.device_bytes(lean))?;
        let host = shape.bytes().saturating_sub(staged_from);
        let staging = match self.staging.as_mut() {
            Some(s) => s.as_mut_slice()?,
            None => &mut [],
        };
        let staging = staging.get_mut(..host).ok_or_else(|| {
            crate::GpuError::Internal("slot staging smaller than its layout".into())
        })?;
        Ok((region, staging))
    }
}

/// One slot's device vectors for a shape, cut from the range [`Slot::upload_parts`] gives
/// (so they can be used while the staging is still being filled), and where its witness
/// vectors lie.
#[derive(Clone, Copy)]
pub struct SlotVecs<'a>([DevRegion<'a>; 6], WitnessAt);

impl<'a> SlotVecs<'a> {
    /// The vectors of `shape` inside `used`, the witness vectors at `at`
    /// ([`SlotShape::witness_offsets`]).
    ///
    /// # Errors
    /// [`crate::GpuError::Input`] if the layout does not fit `used`.
    pub fn new(used: &DevRegion<'a>, shape: &SlotShape, at: WitnessAt) -> Result<SlotVecs<'a>> {
        let (lay, _) = shape.layout();
        let witness = shape.witness_offsets(at);
        let mut out = [*used; 6];
        for (i, (o, (off, bytes))) in out.iter_mut().zip(lay).enumerate() {
            let off = match i.checked_sub(SlotVec::L as usize) {
                Some(w) => witness[w],
                None => off,
            };
            *o = used.slice(off, bytes)?;
        }
        Ok(SlotVecs(out, at))
    }

    /// Where the witness vectors lie.
    pub fn witness_at(&self) -> WitnessAt {
        self.1
    }

    /// The region of vector `v`.
    pub fn get(&self, v: SlotVec) -> DevRegion<'a> {
        self.0[v as usize]
    }
}

/// Up to `max` slots, handed out one per compute call.
pub struct SlotPool {
    state: Mutex<PoolState>,
    returned: Condvar,
}

struct PoolState {
    free: Vec<Slot>,
    made: usize,
    /// Slots that may exist (the workers the device's budget admits).
    max: usize,
    /// Device bytes of the slots made.
    device_bytes: u64,
}

/// A slot taken from the pool; it goes back on drop.
pub struct SlotGuard<'p> {
    pool: &'p SlotPool,
    slot: Option<Slot>,
}

impl SlotPool {
    /// A pool that makes at most `max` slots (at least one).
    pub fn new(max: usize) -> SlotPool {
        SlotPool {
            state: Mutex::new(PoolState {
                free: Vec::new(),
                made: 0,
                max: max.max(1),
                device_bytes: 0,
            }),
            returned: Condvar::new(),
        }
    }

    /// Lets at most `max` slots exist (at least one); free slots beyond it are dropped.
    pub fn set_max(&self, max: usize) {
        let mut st = self.state.lock();
        st.max = max.max(1);
        while st.made > st.max {
            let Some(slot) = st.free.pop() else { break };
            st.device_bytes -= slot.arena.size() as u64;
            st.made -= 1;
        }
    }

    /// Device bytes of the slots made.
    pub fn device_bytes(&self) -> u64 {
        self.state.lock().device_bytes
    }

    /// Slots made so far.
    pub fn made(&self) -> usize {
        self.state.lock().made
    }

    /// Slots not yet made.
    pub fn unmade(&self) -> usize {
        let st = self.state.lock();
        st.max.saturating_sub(st.made)
    }

    /// Forgets a slot whose making failed, so that a later call makes it again.
    fn unmake(&self) {
        self.state.lock().made -= 1;
        self.returned.notify_one();
    }

    /// Makes the slots not yet made, each big enough for `shape` with a host staging from
    /// layout byte `staged_from` on, and keeps them free; returns how many it made. Done
    /// when parameters are preloaded, so that a daemon's first proves do not wait for
    /// their buffers (at 2^27 each worker's first prove made 22 GB of device memory and
    /// 9.4 GB of pinned host memory before its kernels: seconds).
    ///
    /// # Errors
    /// Allocation errors (device or pinned memory); the slots made before stay.
    pub fn reserve(
        &self,
        dev: &Arc<Device>,
        pinned: &Arc<PinnedPool>,
        shape: &SlotShape,
        staged_from: usize,
        bytes: usize,
    ) -> Result<usize> {
        let host_bytes = shape.bytes().saturating_sub(staged_from);
        let mut made = 0;
        loop {
            {
                let mut st = self.state.lock();
                if st.made >= st.max {
                    return Ok(made);
                }
                st.made += 1;
            }
            match Slot::new(dev, pinned, bytes, host_bytes) {
                Ok(slot) => {
                    let mut st = self.state.lock();
                    st.device_bytes += slot.arena.size() as u64;
                    st.free.push(slot);
                    drop(st);
                    self.returned.notify_one();
                    made += 1;
                }
                Err(e) => {
                    self.unmake();
                    return Err(e);
                }
            }
        }
    }

    /// A slot big enough for `shape` with a host staging from layout byte `staged_from`
    /// on ([`SlotShape::staged_from`]): a free one that fits, else the largest free one,
    /// else a new one while fewer than `max` exist, else waits for one to come back. A
    /// free slot too small is re-made at the new size (logged).
    ///
    /// # Errors
    /// Allocation errors (device or pinned memory).
    pub fn take(
        &self,
        dev: &Arc<Device>,
        pinned: &Arc<PinnedPool>,
        shape: &SlotShape,
        staged_from: usize,
        bytes: usize,
    ) -> Result<SlotGuard<'_>> {
        let host_bytes = shape.bytes().saturating_sub(staged_from);
        let mut st = self.state.lock();
        let found = loop {
            let fitting = (0..st.free.len()).find(|&i| st.free[i].fits(bytes, host_bytes));
            let largest = || (0..st.free.len()).max_by_key(|&i| st.free[i].arena.size());
            if let Some(i) = fitting.or_else(largest) {
                break Some(st.free.swap_remove(i));
            }
            if st.made < st.max {
                st.made += 1;
                break None;
            }
            self.returned.wait(&mut st);
        };
        drop(st);
        let (slot, fresh) = match found {
            Some(s) if s.fits(bytes, host_bytes) => (Ok(s), false),
            Some(s) => {
                tracing::info!(
                    gpu = dev.ordinal(),
                    old_bytes = s.arena.size(),
                    old_host_bytes = s.staging_len(),
                    bytes,
                    host_bytes,
                    "slot re-made for a larger shape"
                );
                self.state.lock().device_bytes -= s.arena.size() as u64;
                drop(s);
                (Slot::new(dev, pinned, bytes, host_bytes), true)
            }
            None => {
                tracing::info!(
                    gpu = dev.ordinal(),
                    bytes,
                    host_bytes,
                    lg = shape.lg,
                    "slot made"
                );
                (Slot::new(dev, pinned, bytes, host_bytes), true)
            }
        };
        match slot {
            Ok(s) => {
                if fresh {
                    self.state.lock().device_bytes += s.arena.size() as u64;
                }
                Ok(SlotGuard {
                    pool: self,
                    slot: Some(s),
                })
            }
            Err(e) => {
                self.unmake();
                Err(e)
            }
        }
    }
}

impl std::ops::Deref for SlotGuard<'_> {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        // The slot is only taken out in Drop.
        self.slot.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl std::ops::DerefMut for SlotGuard<'_> {
    fn deref_mut(&mut self) -> &mut Slot {
        self.slot.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.slot.take() {
            self.pool.state.lock().free.push(s);
            self.pool.returned.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_aligned_and_disjoint() {
        let s = SlotShape {
            lg: 4,
            n_l: 5,
            n_a: 0,
            n_b: 7,
        };
        let (l, total) = s.layout();
        assert_eq!(l[0], (0, 16 * FR_BYTES));
        for w in l.windows(2) {
            assert!(w[1].0 >= w[0].0 + w[0].1);
            assert_eq!(w[1].0 % ALIGN, 0);
        }
        assert!(total >= l[5].0 + l[5].1);
    }

    #[test]
    fn the_staging_skips_a_b_c_when_the_device_computes_them() {
        // A 32 GiB PoRep partition: 2^27 domain, ~130M aux.
        let s = SlotShape {
            lg: 27,
            n_l: 130_278_000,
            n_a: 130_000_000,
            n_b: 33_000_000,
        };
        let (l, total) = s.layout();
        assert_eq!(s.staged_from(false), 0);
        assert_eq!(s.staged_from(true), l[SlotVec::L as usize].0);
        // The host stages the witness vectors only: 3 × 2^27 scalars less.
        assert!(s.staged_from(true) >= 3 * (1 << 27) * FR_BYTES);
        assert!(total - s.staged_from(true) < total / 2);
    }

    /// The witness vectors' device ranges at `at` inside a slot of `shape`.
    fn witness_ranges(s: &SlotShape, at: WitnessAt) -> [(usize, usize); 3] {
        let (lay, _) = s.layout();
        let offs = s.witness_offsets(at);
        std::array::from_fn(|i| (offs[i], offs[i] + lay[SlotVec::L as usize + i].1))
    }

    #[test]
    fn a_split_lean_slot_puts_l_over_a_the_a_scalars_over_c_and_b_over_b() {
        let s = SlotShape {
            lg: 27,
            n_l: 130_169_893,
            n_a: 129_700_000,
            n_b: 33_000_000,
        };
        assert!(s.splits());
        assert_eq!(WitnessAt::of(&s, true), WitnessAt::Split);
        assert_eq!(WitnessAt::of(&s, false), WitnessAt::Own);
        let (lay, _) = s.layout();
        let region = |v: SlotVec| (lay[v as usize].0, lay[v as usize].0 + lay[v as usize].1);
        let [l, a, b] = witness_ranges(&s, WitnessAt::Split);
        let inside = |(x, y): (usize, usize), (rb, re): (usize, usize)| rb <= x && y <= re;
        assert!(inside(l, region(SlotVec::A)));
        assert!(inside(a, region(SlotVec::C)));
        assert!(inside(b, region(SlotVec::B)));
        // Inside the lean slot, and the full slot's offsets are the layout's.
        assert!(b.1 <= s.device_bytes(true) && a.1 <= s.device_bytes(true));
        assert_eq!(
            witness_ranges(&s, WitnessAt::Own).map(|r| r.0),
            [SlotVec::L, SlotVec::ScalarsA, SlotVec::ScalarsB].map(|v| lay[v as usize].0)
        );
        // One over a, b, c: one after another from byte 0, as before.
        let over = witness_ranges(&s, WitnessAt::OverAbc);
        assert_eq!(over[0].0, 0);
        assert!(over[1].0 >= over[0].1 && over[2].0 >= over[1].1);
        assert!(over[2].1 <= s.device_bytes(true));
    }

    #[test]
    fn a_witness_longer_than_the_domain_stays_over_a_b_c() {
        let s = SlotShape {
            lg: 4,
            n_l: 17,
            n_a: 3,
            n_b: 3,
        };
        assert!(!s.splits());
        assert_eq!(WitnessAt::of(&s, true), WitnessAt::OverAbc);
        assert!(!WitnessAt::OverAbc.early());
        assert!(WitnessAt::Split.early() && WitnessAt::Own.early());
    }
}
