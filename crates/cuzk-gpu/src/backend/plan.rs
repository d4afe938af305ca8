//! [`ProvePlan`]: the device memory layout of one prove, a pure function of the slot shape
//! and where the SRS lives, and the only source of its byte counts and offsets. The
//! backend's shared arena holds, in this order: the NTT tables, the scratch of the compute
//! stream (the quotient's passes need none; the H sum's MSM, and the four witness sums
//! when they run on the same stream), the witness sums' scratch when they run on a second
//! stream, the two chunk buffers of a streamed SRS, and the results: per sum (and per
//! chunk when streamed) the window sums of its MSM, the batch addition of the ones and the
//! two classification counts. Each operation's scratch is measured by carving its own
//! regions from a sizing scratch (`Scratch::measure`), so the plan and the operations
//! cannot disagree. The results come back in one download at the end of the prove.
//!
//! The window width of the MSM of the "other" scalars (neither 0 nor 1) of a split sum is
//! chosen before their count is known (it is on the device): from the count the last prove
//! of the same shape downloaded (`hints`), the whole length the first time. Any width is
//! correct for any count, and every buffer is sized for the whole length.
//!
//! A sum streamed in several chunks keeps its sums across them in the plan's accumulators
//! (`accs`, zeroed before the first sum) where they take no more bytes than one chunk of
//! its bases: a split sum's ones' partial sums and others' buckets, the H sum's buckets.
//! Each chunk only adds to them, and they are reduced to the window sums and the ones' sum
//! once, after the last chunk. At 2^27 on an H200 that took the split sums from 461 to
//! 410 ms a partition (docs/runs/2026-12-06.md). The results are read back by
//! `combine.rs`.

use crate::backend::residency::Query;
use crate::backend::slots::SlotShape;
use crate::device::arena::{DevRegion, VramArena, ALIGN};
use crate::device::layout::G2_AFFINE_BYTES;
use crate::error::Result;
use crate::ops::classify::{
    batch_add_scratch_bytes, batch_parts, batch_reduce_scratch_bytes, classify_scratch_bytes,
};
use crate::ops::msm::{
    accumulate_scratch_bytes, buckets_bytes, shape_scratch_bytes, window_bits,
    window_sums_scratch_bytes, Group, Shape, WindowTable,
};
use crate::ops::ntt::NttPlan;
use crate::tuning::tuning;

/// Most window sums one MSM leaves (c = 8: 32 windows; a table has fewer sets).
const MAX_WINDOWS: usize = 32;
/// The others' window width is at least that of this fraction of the whole length: a
/// narrower one would multiply the sort's entries (sized for the whole length) by more
/// windows than it saves in buckets.
const OTHERS_MIN_FRACTION: usize = 64;
/// Streamed in chunks of fewer points than this, the split sums (L, A, B) take chunks of a
/// whole chunk buffer, twice the H sum's in G1; from this on, the H sum's (B in G2: half,
/// the same bytes). A split sum's chunk costs about 4 ms whatever its size, but a chunk of a
/// whole buffer leaves the ring (`ring.rs`) too shallow to copy ahead of the H sum:
/// on an H100 at 2^27 (docs/benchmarks.md, 2026-12-05), 2^21-point chunks went from 2.971
/// to 2.738 s per partition with wide split chunks (their compute 815 -> 462 ms, the ring
/// stalling 247 ms), 2^22-point ones from 2.467 to 2.576 (130 ms saved, 298 ms stalled).
const WIDE_SPLIT_BELOW: usize = 1 << 22;

/// Most points in a chunk of a streamed split sum (L, A, B in G1; B in G2 half as many).
/// Its cost per chunk hardly depends on its size (about 4 ms at 2^23 points on an H100,
/// docs/runs/2026-12-06.md), but its scratch does: the sort of its others is sized for the
/// whole chunk at 20 windows, 2.6 GB at 2^23 points and 5.1 GB at 2^24 in a 32 GiB PoRep
/// prove. Capped here, the H sum alone takes chunks of 2^24 points (13 windows of 20 bits
/// instead of 14 of 19, half the chunks) where the budget has room for them: 22.4 GB
/// planned for the 32 GiB PoRep instead of 24.5, which fits a 24 GiB card.
pub const SPLIT_CHUNK_MAX: usize = 1 << 23;

/// Where the SRS lives for a prove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Resident; `lanes`: the witness sums on a second stream; `table`: the H query's
    /// window table, when built.
    Resident {
        /// The four witness sums on a second stream.
        lanes: bool,
        /// The H window table.
        table: Option<WindowTable>,
    },
    /// Streamed from host memory in chunks of this many points.
    Streamed {
        /// Points per chunk.
        chunk: usize,
        /// The H sum's bucket width when its buckets are kept across its chunks (in the
        /// accumulators, reduced once after the last; wider windows then cost no reduction
        /// per chunk), `None`: its window sums are reduced per chunk.
        h_acc: Option<u32>,
        /// Whether sums streamed in several chunks keep accumulators: `None` where they
        /// take no more device bytes than one chunk of the sum's bases (the large sums,
        /// whose per-chunk reductions cost; at 2^10 they would outweigh the SRS),
        /// `Some(true)` wherever (tests run the path on small circuits), `Some(false)`
        /// never.
        acc: Option<bool>,
    },
}

/// One of the five query sums.
#[derive(Clone, Copy, Debug)]
pub struct SumPlan {
    /// Which query.
    pub query: Query,
    /// Its group.
    pub group: Group,
    /// Points summed (the bound of the classification's counts).
    pub n: usize,
    /// Classified into 0 / 1 / other, the ones batch-added (every query but H).
    pub split: bool,
    /// Window width of its MSM (of the others when split).
    pub c: u32,
    /// Over the H window table (then `c` is the table's).
    pub table: Option<WindowTable>,
    /// The others' bases packed densely before their MSM (else read through the indices).
    pub packed: bool,
    /// Chunks of `chunk` points (1 when resident).
    pub chunks: usize,
    /// Points per chunk (n when resident).
    pub chunk: usize,
    /// Offset of its first chunk's results in the results region.
    pub out_at: usize,
    /// Streamed in several chunks (split sums only): the offset of its accumulators in
    /// the plan's `accs` region; its window sums and ones' sum land in chunk 0's results.
    pub acc: Option<usize>,
}

/// A byte range the plan hands out: of the shared arena (the plan's regions) or of the
/// results region (a chunk's results).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Span {
    /// Its first byte.
    pub off: usize,
    /// Its length.
    pub bytes: usize,
}

impl Span {
    /// One past its last byte.
    pub fn end(self) -> usize {
        self.off + self.bytes
    }

    /// Its region of `arena`.
    ///
    /// # Errors
    /// [`GpuError::Input`](crate::error::GpuError::Input) if it lies outside the arena.
    pub fn of(self, arena: &VramArena) -> Result<DevRegion<'_>> {
        arena.region(self.off, self.bytes)
    }

    /// Its part of `within` (offsets relative to it).
    ///
    /// # Errors
    /// [`GpuError::Input`](crate::error::GpuError::Input) if it lies outside `within`.
    pub fn within<'a>(self, within: &DevRegion<'a>) -> Result<DevRegion<'a>> {
        within.slice(self.off, self.bytes)
    }
}

/// The results of one chunk of a sum, inside its stride of the results region.
#[derive(Clone, Copy, Debug)]
pub struct ChunkOut {
    /// Window sums: up to `MAX_WINDOWS` Jacobian points.
    pub windows: Span,
    /// The batch addition of the ones: one Jacobian point.
    pub ones: Span,
    /// Two u32: ones, others.
    pub counts: Span,
}

impl SumPlan {
    /// The MSM shape of one chunk of `len` points.
    pub(crate) fn shape(&self) -> Shape {
        match self.table {
            Some(t) => t.shape(),
            None => Shape::plain(self.c),
        }
    }

    /// Bytes of one chunk's results.
    fn stride(&self) -> usize {
        let jac = self.group.jacobian_bytes();
        ((MAX_WINDOWS + 1) * jac + 8).next_multiple_of(ALIGN)
    }

    /// Where chunk j's results lie in the results region.
    pub fn chunk_out(&self, j: usize) -> ChunkOut {
        let jac = self.group.jacobian_bytes();
        let at = self.out_at + j * self.stride();
        let span = |off, bytes| Span { off, bytes };
        ChunkOut {
            windows: span(at, MAX_WINDOWS * jac),
            ones: span(at + MAX_WINDOWS * jac, jac),
            counts: span(at + (MAX_WINDOWS + 1) * jac, 8),
        }
    }

    /// Scratch bytes of one chunk's sum. A split sum's are those of its others' MSM at the
    /// widest-needing window width it can be given (whatever the counts of the last prove),
    /// so that the arena sized by a first prove holds every later one. With accumulators,
    /// a chunk's sort and, after the last chunk, the reductions.
    fn scratch_bytes(&self) -> usize {
        let (n, g) = (self.chunk, self.group);
        if !self.split {
            return match self.acc {
                Some(_) => {
                    accumulate_scratch_bytes(&self.shape(), g, n)
                        + window_sums_scratch_bytes(&self.shape(), g)
                }
                None => shape_scratch_bytes(&self.shape(), g, n),
            };
        }
        let packed = if self.packed {
            n * g.affine_bytes() + ALIGN
        } else {
            0
        };
        if self.acc.is_some() {
            let sort = accumulate_scratch_bytes(&acc_shape(), g, n);
            let sums = window_sums_scratch_bytes(&acc_shape(), g);
            let ones = batch_reduce_scratch_bytes(g, batch_parts(g));
            return classify_scratch_bytes(n) + packed + sort + sums + ones;
        }
        let msm = (others_bits(n, 0)..=others_bits(n, n))
            .map(|c| shape_scratch_bytes(&Shape::plain(c), g, n))
            .max()
            .unwrap_or(0);
        classify_scratch_bytes(n) + batch_add_scratch_bytes(g, n) + packed + msm
    }

    /// Bytes of its accumulators: a split sum's ones' partial sums, then the buckets (a
    /// split sum's of [`ACC_WIDTH`]).
    fn acc_bytes(&self) -> usize {
        let g = self.group;
        if !self.split {
            return buckets_bytes(&self.shape(), g);
        }
        split_acc_bytes(g)
    }

    /// Bytes of a split sum's ones' partial sums in its accumulators (0 for H).
    fn parts_bytes(&self) -> usize {
        match self.split {
            true => parts_bytes(self.group),
            false => 0,
        }
    }

    /// Its accumulators inside the plan's `accs` region: the ones' partials and the
    /// buckets (`None` for a sum without).
    ///
    /// # Errors
    /// [`GpuError::Input`](crate::error::GpuError::Input) if they do not fit.
    pub fn acc_regions<'a>(
        &self,
        accs: &DevRegion<'a>,
    ) -> Result<Option<(DevRegion<'a>, DevRegion<'a>)>> {
        let Some(at) = self.acc else {
            return Ok(None);
        };
        let parts = self.parts_bytes();
        Ok(Some((
            accs.slice(at, parts)?,
            accs.slice(at + parts, self.acc_bytes() - parts)?,
        )))
    }
}

/// The layout of one prove in the shared arena.
#[derive(Clone, Debug)]
pub struct ProvePlan {
    /// The slot shape.
    pub shape: SlotShape,
    /// Where the SRS lives.
    pub placement: Placement,
    /// H, L, A, B in G1, B in G2 (in [`Query`] order).
    pub sums: [SumPlan; 5],
    /// NTT tables: offset 0, this many bytes (carved by `NttPlan::new` from the arena).
    pub ntt_bytes: usize,
    /// Scratch of the compute stream and, with lanes, of the second stream.
    pub scratch: [Span; 2],
    /// The two chunk buffers of a streamed SRS.
    pub chunk_bufs: Option<[Span; 2]>,
    /// More chunk buffers of the same size for the ring of a streamed SRS's sums, where
    /// the budget has room ([`ProvePlan::with_more_bufs`]; none from [`ProvePlan::new`]).
    pub more_bufs: Vec<Span>,
    /// The results region, downloaded once.
    pub results: Span,
    /// The accumulators of the split sums streamed in several chunks (zeroed before the
    /// sums; 0 bytes without any).
    pub accs: Span,
    /// Bytes of the whole arena.
    pub total: usize,
}

impl ProvePlan {
    /// The plan of a prove of `shape` whose H query has `n_h` points (2^lg − 1 in
    /// bellperson's parameters), with the SRS at `placement`; `hints` are the others' counts
    /// of the last prove of this shape (L, A, B in G1, B in G2), `packed_max` the most bytes
    /// the others' packed bases may take.
    pub fn new(
        shape: &SlotShape,
        n_h: usize,
        placement: Placement,
        hints: Option<[usize; 4]>,
        packed_max: usize,
    ) -> ProvePlan {
        let lens = [n_h, shape.n_l, shape.n_a, shape.n_b, shape.n_b];
        let queries = [Query::H, Query::L, Query::A, Query::BG1, Query::BG2];
        let (chunk_len, table, force_acc) = match placement {
            Placement::Resident { table, .. } => (usize::MAX, table, Some(false)),
            Placement::Streamed { chunk, acc, .. } => (chunk.max(1), None, acc),
        };
        let mut out_at = 0;
        let mut acc_at = 0;
        let sums = std::array::from_fn(|i| {
            let (query, n) = (queries[i], lens[i]);
            let group = if query == Query::BG2 {
                Group::G2
            } else {
                Group::G1
            };
            // Streamed, a split sum's chunk fills a whole chunk buffer (sized for
            // `chunk_len` G2 points) below WIDE_SPLIT_BELOW: twice the H sum's in G1; else
            // one ring slot, half a buffer: the H sum's in G1, half as many G2 points, up to
            // SPLIT_CHUNK_MAX.
            let wide = tuning().wide_split.unwrap_or(true) && chunk_len < WIDE_SPLIT_BELOW;
            let split_len = chunk_len.min(SPLIT_CHUNK_MAX);
            let per_chunk = match (query, placement) {
                (Query::L | Query::A | Query::BG1, Placement::Streamed { .. }) if wide => {
                    chunk_len.saturating_mul(2)
                }
                (Query::L | Query::A | Query::BG1, Placement::Streamed { .. }) => split_len,
                (Query::BG2, Placement::Streamed { .. }) if !wide => (split_len / 2).max(1),
                _ => chunk_len,
            };
            let chunk = n.min(per_chunk).max(1);
            let chunks = if n == 0 { 0 } else { n.div_ceil(chunk) };
            let split = query != Query::H;
            let pays = |bytes: usize| {
                chunks > 1 && force_acc.unwrap_or(bytes <= chunk * group.affine_bytes())
            };
            let h_acc = match placement {
                Placement::Streamed { h_acc: Some(c), .. } if !split => {
                    Some(c).filter(|&c| pays(buckets_bytes(&Shape::plain(c), group)))
                }
                _ => None,
            };
            let accumulated = match split {
                true => pays(split_acc_bytes(group)),
                false => h_acc.is_some(),
            };
            let table = table.filter(|t| query == Query::H && t.n == n);
            let c = match (table, split) {
                (Some(t), _) => t.c,
                (None, false) => h_acc.unwrap_or_else(|| window_bits(chunk)),
                (None, true) => {
                    let hint = hints.map_or(n, |h| h[i - 1].min(n));
                    match accumulated {
                        true => ACC_WIDTH,
                        false => others_bits(chunk, hint.saturating_mul(chunk).div_ceil(n.max(1))),
                    }
                }
            };
            let mut sum = SumPlan {
                query,
                group,
                n,
                split,
                c,
                table,
                packed: split && chunk * group.affine_bytes() <= packed_max,
                chunks,
                chunk,
                out_at,
                acc: None,
            };
            out_at += sum.chunks * sum.stride();
            if accumulated {
                sum.acc = Some(acc_at);
                acc_at += sum.acc_bytes().next_multiple_of(ALIGN);
            }
            sum
        });
        let scratch_of = |qs: &[usize]| {
            qs.iter()
                .map(|&i| sums[i].scratch_bytes())
                .max()
                .unwrap_or(0)
        };
        let lanes = matches!(placement, Placement::Resident { lanes: true, .. });
        let (first, second) = if lanes {
            (scratch_of(&[0]), scratch_of(&[1, 2, 3, 4]))
        } else {
            (scratch_of(&[0, 1, 2, 3, 4]), 0)
        };
        let ntt_bytes = NttPlan::table_bytes(shape.lg);
        let mut at = ntt_bytes.next_multiple_of(ALIGN);
        let mut take = |bytes: usize| {
            let r = Span { off: at, bytes };
            at = (at + bytes).next_multiple_of(ALIGN);
            r
        };
        let scratch = [take(first), take(second)];
        let chunk_bufs = match placement {
            Placement::Streamed { chunk, .. } => {
                // An even count: a quarter buffer (a ring slot) is then whole G1 points,
                // half a chunk's.
                let b = chunk.clamp(1, shape.max_query()).next_multiple_of(2) * G2_AFFINE_BYTES;
                Some([take(b), take(b)])
            }
            Placement::Resident { .. } => None,
        };
        let results = take(out_at.max(ALIGN));
        let accs = take(acc_at);
        ProvePlan {
            shape: *shape,
            placement,
            sums,
            ntt_bytes,
            scratch,
            chunk_bufs,
            more_bufs: Vec::new(),
            results,
            accs,
            total: at,
        }
    }

    /// This plan with `extra` more chunk buffers after its other regions (a streamed SRS
    /// only; a resident one's plan is returned as it is). The ring of the five sums then
    /// has 4 more slots a buffer, and its copies run that much further ahead of the sums:
    /// at 16 GiB (2^21-point chunks, the split sums' a whole buffer) `bench/ring_sim.py`
    /// models the compute stream's waits at 189 ms a partition with two buffers, 14 with
    /// three and none with four.
    pub fn with_more_bufs(mut self, extra: usize) -> ProvePlan {
        let Some([Span { bytes, .. }, _]) = self.chunk_bufs else {
            return self;
        };
        for _ in 0..extra {
            let off = self.total.next_multiple_of(ALIGN);
            self.more_bufs.push(Span { off, bytes });
            self.total = (off + bytes).next_multiple_of(ALIGN);
        }
        self
    }

    /// Every chunk buffer of a streamed SRS's ring: the two, then the more.
    pub fn ring_bufs(&self) -> Vec<Span> {
        let two = self.chunk_bufs.into_iter().flatten();
        two.chain(self.more_bufs.iter().copied()).collect()
    }

    /// Whether the witness sums run on a second stream.
    pub fn lanes(&self) -> bool {
        matches!(self.placement, Placement::Resident { lanes: true, .. })
    }
}

/// Window widths of the others' MSM with accumulators: its buckets live through the whole
/// sum, so the plan keeps them small (13: 20 windows of 2^12 buckets, 15.7 MB in G1).
/// Only 13: with 8 for a few others (32 windows) the sort of a chunk's others had to be
/// sized for 32 windows of every point, 185 MB more at 2^22 points (the split chunks with
/// 16 GiB free), which a third chunk buffer of the ring now takes (`run.rs`,
/// `deeper_ring`). The buckets are reduced once a sum, so 13 costs a few hundred
/// bucket additions more a chunk than 8 where the others are few.
const ACC_WIDTH: u32 = 13;

/// The plain shape of [`ACC_WIDTH`]: what a split sum's accumulators and scratch are
/// sized for.
fn acc_shape() -> Shape {
    Shape::plain(ACC_WIDTH)
}

/// Bytes of a split sum's ones' partial sums.
fn parts_bytes(g: Group) -> usize {
    (batch_parts(g) * g.xyzz_bytes()).next_multiple_of(ALIGN)
}

/// Bytes of a split sum's accumulators in `g`: its ones' partial sums, then the buckets
/// of [`ACC_WIDTH`].
fn split_acc_bytes(g: Group) -> usize {
    parts_bytes(g) + buckets_bytes(&acc_shape(), g)
}

/// The window width of the others' MSM over a bound of n points, expected to hold about
/// `expect`: the cost model's width for `expect`, but at least that of n /
/// [`OTHERS_MIN_FRACTION`], and wide enough that n entries per window fit the sort's
/// 32-bit index.
fn others_bits(n: usize, expect: usize) -> u32 {
    let floor = window_bits((n / OTHERS_MIN_FRACTION).max(1));
    let mut c = window_bits(expect.max(1)).max(floor);
    while c < 20 && (n as u64) * (crate::ops::msm::windows(c) as u64) >= u32::MAX as u64 {
        c += 1;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 32 GiB PoRep partition's slot shape.
    fn porep_32g() -> SlotShape {
        SlotShape {
            lg: 27,
            n_l: 130_278_541,
            n_a: 130_278_541,
            n_b: 32_800_000,
        }
    }

    /// The NTT's direct twist tables at 2^27 (w_18^±j), in every 2^27 plan.
    fn twists_27() -> u64 {
        NttPlan::direct_twist_bytes(27) as u64
    }

    fn shape(lg: u32) -> SlotShape {
        let n = 1usize << lg;
        SlotShape {
            lg,
            n_l: n,
            n_a: n.saturating_sub(3),
            n_b: n / 4,
        }
    }

    #[test]
    fn regions_are_aligned_disjoint_and_inside_the_arena() {
        for lg in [1u32, 10, 16, 22, 24] {
            for placement in [
                Placement::Resident {
                    lanes: false,
                    table: None,
                },
                Placement::Resident {
                    lanes: true,
                    table: None,
                },
                Placement::Streamed {
                    chunk: 1000,
                    h_acc: None,
                    acc: None,
                },
            ] {
                let p = ProvePlan::new(&shape(lg), (1 << lg) - 1, placement, None, usize::MAX);
                let mut regions = vec![
                    Span {
                        off: 0,
                        bytes: p.ntt_bytes,
                    },
                    p.scratch[0],
                    p.scratch[1],
                    p.results,
                    p.accs,
                ];
                regions.extend(p.chunk_bufs.into_iter().flatten());
                regions.sort();
                for w in regions.windows(2) {
                    assert!(w[0].end() <= w[1].off, "2^{lg} {placement:?}: overlap");
                }
                for r in &regions {
                    assert_eq!(r.off % ALIGN, 0);
                    assert!(r.end() <= p.total);
                }
                // Every chunk's results inside the results region, apart from the others'.
                let mut outs: Vec<Span> = Vec::new();
                for s in &p.sums {
                    for j in 0..s.chunks {
                        let o = s.chunk_out(j);
                        for r in [o.windows, o.ones, o.counts] {
                            assert!(r.end() <= p.results.bytes);
                            outs.push(r);
                        }
                    }
                    assert!(s.shape().sums() as usize <= MAX_WINDOWS);
                }
                outs.sort();
                for w in outs.windows(2) {
                    assert!(w[0].end() <= w[1].off);
                }
            }
        }
    }

    #[test]
    fn each_stream_scratch_holds_its_sums() {
        for lanes in [false, true] {
            let placement = Placement::Resident { lanes, table: None };
            let p = ProvePlan::new(&shape(16), (1 << 16) - 1, placement, None, usize::MAX);
            for (i, s) in p.sums.iter().enumerate() {
                let stream = usize::from(lanes && i > 0);
                assert!(
                    p.scratch[stream].bytes >= s.scratch_bytes(),
                    "{:?}",
                    s.query
                );
                assert!(s.packed == s.split && s.chunks == 1);
            }
        }
        // No room for packing: the others are read through their indices.
        let p = ProvePlan::new(
            &shape(16),
            (1 << 16) - 1,
            Placement::Streamed {
                chunk: 5000,
                h_acc: None,
                acc: None,
            },
            None,
            0,
        );
        let s = p.sums[Query::BG2 as usize];
        assert!(!s.packed);
        // Below 2^22-point chunks a B in G2 chunk fills a whole buffer: 5000 points.
        assert_eq!(s.chunks, (1usize << 14).div_ceil(5000));
        assert!(p.scratch[0].bytes >= s.scratch_bytes());
    }

    #[test]
    fn streamed_split_sums_take_a_whole_chunk_buffer_below_2_22_points() {
        // See: #26. H in chunks of the configured points (one ring slot). Below
        // WIDE_SPLIT_BELOW, L, A and B in G1 in twice that and B in G2 in as many, each a
        // whole buffer of `chunk` G2 points; from it on, all in one slot.
        for (lg, chunk, wide) in [(16u32, 1usize << 12, true), (24, 1 << 22, false)] {
            let p = ProvePlan::new(
                &shape(lg),
                (1 << lg) - 1,
                Placement::Streamed {
                    chunk,
                    h_acc: None,
                    acc: None,
                },
                None,
                0,
            );
            let [Span { bytes: buf, .. }, _] = p.chunk_bufs.expect("streamed buffers");
            for s in &p.sums {
                let want = match (s.query, wide) {
                    (Query::H, _) | (Query::BG2, true) => chunk,
                    (Query::BG2, false) => chunk / 2,
                    (_, true) => 2 * chunk,
                    (_, false) => chunk,
                };
                assert_eq!(s.chunk, want.min(s.n), "2^{lg} {:?}", s.query);
                let bytes = s.chunk * s.group.affine_bytes();
                assert!(bytes <= if wide { buf } else { buf / 2 }, "{:?}", s.query);
                assert!(p.scratch[0].bytes >= s.scratch_bytes(), "{:?}", s.query);
            }
            assert_eq!(chunk * Group::G1.affine_bytes() * 2, buf);
        }
    }

    #[test]
    fn split_sums_in_several_chunks_keep_accumulators_sized_whatever_the_counts() {
        // See: #26. Streamed in several chunks of 2^19 points (2^20 for L, A, B in G1: 100
        // MB of bases, more than their accumulators' 28 MB), L, A and B get accumulators,
        // disjoint and inside `accs`; H and sums of one chunk (resident) have none.
        let s = shape(23);
        let plan = |placement, hints| ProvePlan::new(&s, (1 << 23) - 1, placement, hints, 0);
        let streamed = Placement::Streamed {
            chunk: 1 << 19,
            h_acc: None,
            acc: None,
        };
        let cold = plan(streamed, None);
        let mut spans = Vec::new();
        for sum in &cold.sums {
            assert_eq!(
                sum.acc.is_some(),
                sum.split && sum.chunks > 1,
                "{:?}",
                sum.query
            );
            if let Some(at) = sum.acc {
                assert_eq!(at % ALIGN, 0);
                assert!(at + sum.acc_bytes() <= cold.accs.bytes, "{:?}", sum.query);
                spans.push((at, sum.acc_bytes()));
                // Its chunk's scratch holds the sort and the reductions after the last.
                assert!(cold.scratch[0].bytes >= sum.scratch_bytes());
            }
        }
        assert_eq!(spans.len(), 4);
        spans.sort();
        for w in spans.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0);
        }
        // Whole length unknown or a handful of others: 13 bits, the one width the sort
        // is sized for. The arena is the same.
        assert_eq!(cold.sums[Query::L as usize].c, 13);
        let few = plan(streamed, Some([100, 100, 100, 100]));
        assert_eq!(few.sums[Query::L as usize].c, 13);
        assert_eq!(cold.total, few.total);
        let resident = Placement::Resident {
            lanes: false,
            table: None,
        };
        let r = plan(resident, None);
        assert!(r.sums.iter().all(|x| x.acc.is_none()));
        assert_eq!(r.accs.bytes, 0);
        // Chunks of 2^12 points (393 KB): accumulators only where forced.
        for (acc, want) in [(None, 0), (Some(false), 0), (Some(true), 4)] {
            let small = Placement::Streamed {
                chunk: 1 << 12,
                h_acc: Some(13),
                acc,
            };
            let p = plan(small, None);
            let with: Vec<_> = p.sums.iter().filter(|x| x.acc.is_some()).collect();
            assert_eq!(with.len(), want + usize::from(want > 0), "{acc:?}");
            assert_eq!(p.accs.bytes > 0, want > 0, "{acc:?}");
        }
        // The H sum keeps its buckets when the placement says so, at that width: 13
        // windows of 2^19 buckets in G1 at c = 20 (forced: 1.3 GB is more than a chunk).
        let h_acc = plan(
            Placement::Streamed {
                chunk: 1 << 16,
                h_acc: Some(20),
                acc: Some(true),
            },
            None,
        );
        let h = h_acc.sums[Query::H as usize];
        assert_eq!((h.c, h.acc.is_some()), (20, true));
        assert_eq!(h.acc_bytes(), 13 * (1 << 19) * Group::G1.xyzz_bytes());
        assert!(h.acc.unwrap_or(0) + h.acc_bytes() <= h_acc.accs.bytes);
        assert!(h_acc.scratch[0].bytes >= h.scratch_bytes());
        assert_eq!(h_acc.total, h_acc.accs.off + h_acc.accs.bytes);
    }

    #[test]
    fn others_width_follows_the_last_count() {
        let s = shape(24);
        let cold = ProvePlan::new(
            &s,
            (1 << 24) - 1,
            Placement::Resident {
                lanes: false,
                table: None,
            },
            None,
            0,
        );
        // Without a count the whole length: c = 20 at 2^24.
        assert_eq!(cold.sums[Query::L as usize].c, 20);
        // 1.68M others of 2^24 (the synthetic circuit): c = 16.
        let hints = Some([1_680_000, 1_670_000, 419_000, 419_000]);
        let warm = ProvePlan::new(
            &s,
            (1 << 24) - 1,
            Placement::Resident {
                lanes: false,
                table: None,
            },
            hints,
            0,
        );
        assert_eq!(warm.sums[Query::L as usize].c, 16);
        // No others at all: never narrower than 2^24 / 64's width.
        let none = ProvePlan::new(
            &s,
            (1 << 24) - 1,
            Placement::Resident {
                lanes: false,
                table: None,
            },
            Some([0; 4]),
            0,
        );
        assert_eq!(none.sums[Query::L as usize].c, window_bits(1 << 18));
        // The arena a first prove makes holds the later ones.
        assert_eq!(cold.total, warm.total);
        assert_eq!(cold.total, none.total);
        // The H sum keeps the plain width, or the table's.
        assert_eq!(warm.sums[Query::H as usize].c, window_bits((1 << 24) - 1));
    }

    #[test]
    fn split_chunks_are_capped_so_2_24_h_chunks_fit_a_24_gib_card() {
        // The 32 GiB PoRep's shape; a lean slot (a, b, c) beside the plan.
        let s = porep_32g();
        let streamed = |chunk: usize| {
            let placement = Placement::Streamed {
                chunk,
                h_acc: None,
                acc: None,
            };
            ProvePlan::new(&s, (1 << 27) - 1, placement, None, usize::MAX)
        };
        let p = streamed(1 << 24);
        let h = p.sums[Query::H as usize];
        assert_eq!((h.chunk, h.chunks, h.c), (1 << 24, 8, 20));
        for q in [Query::L, Query::A, Query::BG1] {
            assert_eq!(p.sums[q as usize].chunk, SPLIT_CHUNK_MAX, "{q:?}");
        }
        assert_eq!(p.sums[Query::BG2 as usize].chunk, SPLIT_CHUNK_MAX / 2);
        // Every split chunk fits one ring slot (half a chunk buffer).
        let slot = p.chunk_bufs.map(|b| b[0].bytes / 2).unwrap_or(0);
        assert!(p
            .sums
            .iter()
            .all(|x| x.chunk * x.group.affine_bytes() <= slot));
        // Their scratch is that of 2^23-point chunks, so the whole fits 24 GiB less the
        // 1 GiB reserve, as 2^23-point chunks did (18.83 GB measured, the NTT's direct
        // twist tables at 2^27 (w_18^±j, 2 × 8 MiB) since; 386.8 MB less since the split
        // sums' sort is sized for one accumulator width).
        let lean = s.device_bytes(true) as u64;
        assert_eq!(
            lean + streamed(1 << 23).total as u64,
            18_832_354_304 + twists_27() - 386_776_576
        );
        assert!(p.scratch[0].bytes <= streamed(1 << 23).scratch[0].bytes.max(h.scratch_bytes()));
        assert!(lean + (p.total as u64) < (23u64 << 30));
        // Below the cap nothing changes: the split sums take the H sum's chunks.
        let q = streamed(1 << 23);
        assert!(q.sums.iter().take(4).all(|x| x.chunk == 1 << 23));
    }

    #[test]
    fn the_budget_streams_2_24_chunks_with_24_gib_free_and_2_21_with_16() {
        use crate::backend::budget::{choose_among, chunk_sizes, Costs};
        let s = porep_32g();
        let options: Vec<(usize, Costs)> = chunk_sizes(1 << 24, 1 << 16)
            .map(|chunk| {
                let placement = Placement::Streamed {
                    chunk,
                    h_acc: None,
                    acc: None,
                };
                let plan = ProvePlan::new(&s, (1 << 27) - 1, placement, None, usize::MAX);
                let costs = Costs {
                    srs: 47_373_864_960, // the 32 GiB PoRep SRS: never resident here
                    slot_full: s.device_bytes(false) as u64,
                    slot_lean: s.device_bytes(true) as u64,
                    plan_resident: u64::MAX / 4,
                    plan_streamed: plan.total as u64,
                };
                (chunk, costs)
            })
            .collect();
        // The budgets measured with 24 and 16 GiB free less the 1 GiB reserve.
        let (fit24, _) = choose_among(&options, 24_143_069_184, 2).expect("fits 24 GiB");
        assert_eq!(
            (fit24.srs_resident, fit24.workers, fit24.chunk),
            (false, 1, 1 << 24)
        );
        let (fit16, _) = choose_among(&options, 15_550_000_000, 2).expect("fits 16 GiB");
        assert_eq!((fit16.workers, fit16.chunk), (1, 1 << 21));
        // 15.19 GB measured with the split sums' sort sized for two widths; 185.4 MB less
        // with one, so a third chunk buffer of the ring (0.40 GB) fits beside the mode,
        // not a fourth (`GpuBackend::deeper_ring`).
        assert_eq!(fit16.bytes, 15_175_342_080 + twists_27() - 185_449_984);
        let buf = (1u64 << 21) * G2_AFFINE_BYTES as u64;
        assert!(fit16.bytes + buf <= 15_550_000_000);
        assert!(fit16.bytes + 2 * buf > 15_553_134_592);
        // A 48 GB card and a whole 80 GB H100 (its budget measured less the reserve): one
        // full slot with the largest chunk, never a second streamed worker (`budget.rs`).
        for budget in [47_000_000_000, 83_943_751_680] {
            let (fit, _) = choose_among(&options, budget, 2).expect("fits");
            assert_eq!(
                (fit.srs_resident, fit.workers, fit.lean, fit.chunk),
                (false, 1, false, 1 << 24),
                "{budget}"
            );
        }
    }

    #[test]
    fn two_streams_by_default_up_to_2_25_on_an_h200() {
        // The backend's default: the H sum's own scratch at most 1/32 of the device.
        let h200 = 143_771u64 << 20;
        let h_scratch = |lg: u32| {
            let lanes = Placement::Resident {
                lanes: true,
                table: None,
            };
            let p = ProvePlan::new(&shape(lg), (1 << lg) - 1, lanes, None, usize::MAX);
            p.scratch[0].bytes as u64
        };
        assert!(h_scratch(25) <= h200 / 32);
        assert!(h_scratch(26) > h200 / 32);
    }

    #[test]
    fn sort_index_fits_at_every_size() {
        for lg in 1..=31u32 {
            let n = (1usize << lg) - 1;
            let c = others_bits(n, 0);
            assert!(
                (n as u64) * (crate::ops::msm::windows(c) as u64) < u32::MAX as u64 || c == 20,
                "2^{lg}"
            );
        }
    }
}
