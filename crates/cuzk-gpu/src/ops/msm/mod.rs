//! Pippenger MSM on the device for G1 and G2 ([`msm_g1`], [`msm_g2`]): the host sequence
//! of the phases in `kernels/msm.cu` (canonical scalars, bucket histogram, counting sort,
//! bucket accumulation, per-window running sums, reductions; the Horner combination runs on
//! the host). Bases are resident (blst affine points, optionally through an index list),
//! streamed from host memory in chunks (`streamed.rs`) or read through a window table
//! (`table.rs`); the multi-block scan is `scan.rs`.

mod host;
mod scan;
mod streamed;
mod table;

pub use crate::device::layout::Group;
pub use host::{msm_enqueue, msm_g1, msm_g2, MsmOut};

pub(crate) use scan::{scan_exclusive, scan_scratch_bytes};
pub use streamed::{msm_streamed_g1, msm_streamed_g2};
pub use table::{build_table_g1, msm_table_g1, table_scratch_bytes, WindowTable};

use crate::device::arena::{DevRegion, Scratch};
use crate::device::layout::FR_BYTES;
use crate::device::{launch, Device, PhaseTimer};
use crate::error::{GpuError, Result};
use crate::ops::classify::STRIDE_THREADS;
use crate::tuning::tuning;

/// Window size in bits for n points: among the c in 8..=20 whose top window holds at least
/// 8 bits (8, 13, 16, 19, 20), the one that minimises the modelled cost
/// ceil(256 / c) · (n + 3 · 2^(c−1)) — per window, n bucket additions plus the running sums
/// over its 2^(c−1) buckets (about three mixed additions' worth per bucket). That is c = 16
/// from ~2^18.5 to ~2^22 points, 19 to ~2^23.2 and 20 for the dense 2^24+ H query (13
/// windows instead of 16). With ceil(256 / c) windows the top one holds only 256 − c ·
/// (windows − 1) bits of a 255-bit scalar (plus the signed digits' carry): 1 bit for c = 17,
/// 4 for c = 18, so a few buckets take most points. The load-balanced accumulation spreads
/// them over threads, but the fixup then adds one such bucket's thread partials serially:
/// on an H200 a 2^22 MSM took 200 ms with c = 17 and 106 ms with c = 18 against 52 ms with
/// c = 16 (docs/runs/2026-11-30.md, "Window widths"), so those widths are never chosen.
/// `GpuTuning::msm_window_bits` (8..=20) forces any c for every MSM, to benchmark window
/// sizes.
pub fn window_bits(n: usize) -> u32 {
    tuning().msm_window_bits.unwrap_or_else(|| {
        (8u32..=20)
            .filter(|&c| top_window_bits(c) >= 8)
            .min_by_key(|&c| modelled_additions(n, c, windows(c)))
            .unwrap_or(16)
    })
}

/// Windows of c bits in a 256-bit scalar.
pub fn windows(c: u32) -> u32 {
    256u32.div_ceil(c)
}

/// The cost model of [`window_bits`] and of the window tables: an MSM of n points with
/// c-bit windows and `sets` bucket sets makes one addition per point and window, plus about
/// three per bucket for the running sums.
pub(crate) fn modelled_additions(n: usize, c: u32, sets: u32) -> u64 {
    n as u64 * windows(c) as u64 + 3 * sets as u64 * (1u64 << (c - 1))
}

/// Bits of a 256-bit scalar left for the top window of c-bit windows.
fn top_window_bits(c: u32) -> u32 {
    256 - c * (windows(c) - 1)
}

/// Accumulation threads aimed for: a few waves of the ~50k G1 threads an H200 holds at once.
const ACC_THREADS: usize = 1 << 18;
/// Fewest sorted entries per accumulation thread, so that most buckets of a sparse MSM
/// still lie inside one thread's range and skip the fixup.
const ACC_MIN_K: usize = 32;

/// Buckets of one window are summed in runs of `seg` by one thread: at least this many
/// (the weight j · seg of run j costs a double-and-add per run, amortized over the run)...
const SEG_MIN: u32 = 16;
/// ...and more when that would give more than this many running-sum threads (c = 20 has
/// 13 · 2^19 buckets).
const SEG_THREADS: usize = 1 << 17;
/// Reduction factor of one `sum_groups` launch (here and for the batch addition's
/// partials). After the first launch these reductions are latency chains: few threads, each
/// adding K points one after another. On an H200, 4 instead of 16 took the reduce phase of
/// a 2^19-point MSM from 0.68 to 0.35 ms in G1 and from 1.97 to 0.93 ms in G2.
pub(crate) const REDUCE_K: u32 = 4;

/// Accumulation threads launched for at most `total` sorted entries: the kernel spreads
/// the actual entries (known on the device) over ACC_THREADS threads, at least ACC_MIN_K
/// each, so it never uses more than this many.
fn acc_grid(total: usize) -> usize {
    total.div_ceil(ACC_MIN_K).clamp(1, ACC_THREADS)
}

/// The shape of one MSM: window width, windows and bucket sets.
pub(crate) struct Shape {
    c: u32,
    /// Digit windows.
    nwin: u32,
    nb: u32,
    /// Bucket sets: nwin for a plain MSM, fewer over a window table (`table.rs`).
    sets: u32,
    /// Points between rows of a window table (0: a plain MSM, every window reads row 0).
    stride: usize,
}

impl Shape {
    /// The plain MSM of n points.
    pub(crate) fn new(n: usize) -> Shape {
        let c = window_bits(n);
        Shape::with(c, windows(c), 0)
    }

    /// c-bit windows in `sets` bucket sets, table rows `stride` points apart.
    fn with(c: u32, sets: u32, stride: usize) -> Shape {
        Shape {
            c,
            nwin: windows(c),
            nb: 1 << (c - 1),
            sets,
            stride,
        }
    }
    fn buckets(&self) -> usize {
        self.sets as usize * self.nb as usize
    }
    /// Buckets per running-sum thread: a power of two dividing nb.
    fn seg(&self) -> u32 {
        let want = self.buckets().div_ceil(SEG_THREADS).next_power_of_two() as u32;
        want.max(SEG_MIN).min(self.nb)
    }
    fn nseg(&self) -> u32 {
        self.nb / self.seg()
    }
    /// Accumulation threads launched for at most n · nwin entries (zero digits and a
    /// count below n make the real number smaller; surplus threads exit).
    fn acc_grid(&self, n: usize) -> usize {
        acc_grid(n * self.nwin as usize)
    }

    /// The plain MSM with c-bit windows (a width chosen elsewhere, e.g. for a count known
    /// only on the device).
    pub(crate) fn plain(c: u32) -> Shape {
        Shape::with(c, windows(c), 0)
    }

    /// Window width.
    pub(crate) fn c(&self) -> u32 {
        self.c
    }

    /// Window sums the MSM leaves (one per bucket set).
    pub(crate) fn sums(&self) -> u32 {
        self.sets
    }
}

/// Scratch bytes an MSM of n points in `group` needs.
pub fn scratch_bytes(group: Group, n: usize) -> usize {
    shape_scratch_bytes(&Shape::new(n), group, n)
}

/// Scratch bytes of an MSM of (at most) n points of shape `s`, its window sums included.
pub(crate) fn shape_scratch_bytes(s: &Shape, group: Group, n: usize) -> usize {
    Scratch::measure(|sc| {
        sort_bufs(sc, s, group, n)?;
        sc.alloc(buckets_bytes(s, group))?;
        reduce_bufs(sc, s, group)?;
        sc.alloc(s.sets as usize * group.jacobian_bytes())
            .map(|_| ())
    })
}

/// Bytes of the buckets of shape `s` (XYZZ points; all zero bytes is every bucket empty).
pub(crate) fn buckets_bytes(s: &Shape, group: Group) -> usize {
    s.buckets() * group.xyzz_bytes()
}

/// Scratch bytes [`msm_accumulate_enqueue`] takes for (at most) n points of shape `s`:
/// the sort's and the chunk's own buckets.
pub(crate) fn accumulate_scratch_bytes(s: &Shape, group: Group, n: usize) -> usize {
    Scratch::measure(|sc| {
        sort_bufs(sc, s, group, n)?;
        sc.alloc(buckets_bytes(s, group)).map(|_| ())
    })
}

/// Scratch bytes [`msm_window_sums_enqueue`] takes for shape `s`.
pub(crate) fn window_sums_scratch_bytes(s: &Shape, group: Group) -> usize {
    Scratch::measure(|sc| reduce_bufs(sc, s, group).map(|_| ()))
}

/// The scratch regions of the sort and the bucket accumulation of (at most) n points of
/// shape `s`.
struct SortBufs<'s> {
    canon: DevRegion<'s>,
    counts: DevRegion<'s>,
    starts: DevRegion<'s>,
    cursor: DevRegion<'s>,
    sorted: DevRegion<'s>,
    first: DevRegion<'s>,
    last: DevRegion<'s>,
    scan: DevRegion<'s>,
}

fn sort_bufs<'s>(
    scratch: &'s Scratch<'_>,
    s: &Shape,
    group: Group,
    n: usize,
) -> Result<SortBufs<'s>> {
    let m = s.buckets();
    let acc = s.acc_grid(n) * group.xyzz_bytes();
    Ok(SortBufs {
        canon: scratch.alloc(n * FR_BYTES)?,
        counts: scratch.alloc(m * 4)?,
        starts: scratch.alloc((m + 1) * 4)?,
        cursor: scratch.alloc(m * 4)?,
        sorted: scratch.alloc(n * s.nwin as usize * 4)?,
        first: scratch.alloc(acc)?,
        last: scratch.alloc(acc)?,
        scan: scratch.alloc(scan_scratch_bytes(m))?,
    })
}

/// The scratch regions of the running sums and their reduction (shape `s`).
fn reduce_bufs<'s>(
    scratch: &'s Scratch<'_>,
    s: &Shape,
    group: Group,
) -> Result<[DevRegion<'s>; 2]> {
    let part_len = s.sets as usize * s.nseg() as usize * group.xyzz_bytes();
    Ok([scratch.alloc(part_len)?, scratch.alloc(part_len)?])
}

/// Scratch bytes an MSM of n points needs in whichever group needs more.
pub fn scratch_bytes_any(n: usize) -> usize {
    scratch_bytes(Group::G1, n).max(scratch_bytes(Group::G2, n))
}

/// What an MSM reads: Σ scalars[i] · bases[idx(i)] for i < count, with idx(i) =
/// base_idx[i] when given, else i.
pub struct MsmInput<'r> {
    /// blst affine points.
    pub bases: &'r DevRegion<'r>,
    /// Indices into `bases`, one u32 per scalar.
    pub base_idx: Option<&'r DevRegion<'r>>,
    /// Montgomery Fr scalars.
    pub scalars: &'r DevRegion<'r>,
    /// The bound of the count: every buffer is sized for n points.
    pub n: usize,
    /// The count, one u32 on the device at most n (the classification's); `None`: n.
    pub count: Option<&'r DevRegion<'r>>,
}

impl MsmInput<'_> {
    /// [`GpuError::Input`] unless n is in 1..2^31 and every region holds n entries.
    fn check(&self, group: Group) -> Result<()> {
        let n = self.n;
        if n == 0 || n > (1usize << 31) - 1 {
            return Err(GpuError::Input(format!("msm of {n} points")));
        }
        if self.scalars.bytes() < n * FR_BYTES || self.count.is_some_and(|c| c.bytes() < 4) {
            return Err(GpuError::Input(format!(
                "{n} scalars need {} bytes, region has {}",
                n * FR_BYTES,
                self.scalars.bytes()
            )));
        }
        match self.base_idx {
            Some(ix) if ix.bytes() < n * 4 => Err(GpuError::Input(format!(
                "{n} base indices need {} bytes, region has {}",
                n * 4,
                ix.bytes()
            ))),
            None if self.bases.bytes() < n * group.affine_bytes() => Err(GpuError::Input(format!(
                "{n} bases need {} bytes, region has {}",
                n * group.affine_bytes(),
                self.bases.bytes()
            ))),
            _ => Ok(()),
        }
    }
}

/// Enqueues the MSM of `input` with shape `s` (its window sums, `s.sums()` Jacobian points,
/// into `out`); nothing waits, and a count on the device bounds the work.
///
/// # Errors
/// [`GpuError::Input`] for a bad input or a short `out`; arena or driver errors.
pub(crate) fn msm_enqueue_into(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    s: &Shape,
    input: &MsmInput<'_>,
    out: &DevRegion<'_>,
) -> Result<()> {
    input.check(group)?;
    if out.bytes() < s.sets as usize * group.jacobian_bytes() {
        return Err(GpuError::Input(format!(
            "{} window sums in a {}-byte region",
            s.sets,
            out.bytes()
        )));
    }
    enqueue_shape(dev, scratch, group, s, input, out)
}

/// The MSM of `input` with a given shape (a plain one, or a window table's), its window
/// sums into `out`; arguments checked by the callers.
fn enqueue_shape(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    s: &Shape,
    input: &MsmInput<'_>,
    out: &DevRegion<'_>,
) -> Result<()> {
    let n = input.n;
    let b = sort_bufs(scratch, s, group, n)?;
    let buckets = scratch.alloc(buckets_bytes(s, group))?;
    let parts = reduce_bufs(scratch, s, group)?;
    let mut prof = PhaseTimer::start(dev, || {
        format!("msm {group:?} n<={n} c={} sets={}", s.c, s.sets)
    })?;
    let mut mark = |name: &'static str| -> Result<()> {
        match prof.as_mut() {
            Some(p) => p.mark(name),
            None => Ok(()),
        }
    };
    sort_accumulate(dev, &b, group, s, input, &buckets, &mut mark)?;
    window_sums(dev, &parts, group, s, &buckets, out, &mut mark)?;
    if let Some(p) = prof {
        p.report()?;
    }
    Ok(())
}

/// Enqueues the sort and accumulation of `input` (shape `s`, a plain MSM) added into
/// `buckets`, which hold earlier sums (all zero bytes before the first): one chunk of a
/// sum streamed in chunks, whose buckets are summed once, after its last chunk
/// ([`msm_window_sums_enqueue`]). Nothing waits; a count on the device bounds the work.
///
/// # Errors
/// [`GpuError::Input`] for a bad input or short buckets; arena or driver errors.
pub(crate) fn msm_accumulate_enqueue(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    s: &Shape,
    input: &MsmInput<'_>,
    buckets: &DevRegion<'_>,
) -> Result<()> {
    input.check(group)?;
    if buckets.bytes() < buckets_bytes(s, group) {
        return Err(GpuError::Input(format!(
            "{} buckets in a {}-byte region",
            s.buckets(),
            buckets.bytes()
        )));
    }
    let b = sort_bufs(scratch, s, group, input.n)?;
    let chunk = scratch.alloc(buckets_bytes(s, group))?;
    sort_accumulate(dev, &b, group, s, input, &chunk, &mut |_| Ok(()))?;
    let m = s.buckets();
    launch::msm_bucket_add(
        dev,
        group,
        Device::grid(m as u64, group.block()),
        &chunk,
        m as u32,
        buckets,
    )
}

/// Enqueues the window sums of `buckets` (shape `s`) into `out`.
///
/// # Errors
/// [`GpuError::Input`] for short regions; arena or driver errors.
pub(crate) fn msm_window_sums_enqueue(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    s: &Shape,
    buckets: &DevRegion<'_>,
    out: &DevRegion<'_>,
) -> Result<()> {
    if out.bytes() < s.sets as usize * group.jacobian_bytes() {
        return Err(GpuError::Input(format!(
            "{} window sums in a {}-byte region",
            s.sets,
            out.bytes()
        )));
    }
    let parts = reduce_bufs(scratch, s, group)?;
    window_sums(dev, &parts, group, s, buckets, out, &mut |_| Ok(()))
}

/// The sort of `input`'s digits by bucket and the accumulation into `buckets` (every
/// one written: infinity where empty).
fn sort_accumulate(
    dev: &Device,
    b: &SortBufs<'_>,
    group: Group,
    s: &Shape,
    input: &MsmInput<'_>,
    buckets: &DevRegion<'_>,
    mark: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<()> {
    let (n, count) = (input.n, input.count);
    let m = s.buckets();
    if (n as u64) * (s.nwin as u64) >= u32::MAX as u64 {
        return Err(GpuError::Input(format!(
            "msm of {n} points exceeds the 32-bit sort index"
        )));
    }
    let n32 = n as u32;
    dev.memset_zero(&b.counts)?;

    // Region sizes: canon holds n scalars, counts/cursor m and starts m + 1 words, sorted
    // n * nwin entries, buckets m points, part_a/part_b sets * nseg points. With a window
    // table the bases hold rows * stride points, every sorted entry (row * stride + i)
    // below that (table.rs). With a count on the device the scalar phases stride over it
    // from a grid of at most STRIDE_THREADS; without, one thread per scalar.
    let scalar_grid = match count {
        Some(_) => Device::grid((n as u64).min(STRIDE_THREADS), 256),
        None => Device::grid(n as u64, 256),
    };
    launch::msm_scalars_canonical(dev, scalar_grid, input.scalars, &b.canon, n32, count)?;
    mark("canonical")?;
    let (c, nwin, sets) = (s.c, s.nwin, s.sets);
    let stride = s.stride as u32;
    launch::msm_histogram(
        dev,
        scalar_grid,
        &b.canon,
        n32,
        count,
        c,
        nwin,
        sets,
        &b.counts,
    )?;
    mark("histogram")?;
    scan_exclusive(
        dev,
        &Scratch::within(&b.scan),
        &b.counts,
        &b.starts,
        Some(&b.cursor),
        m,
    )?;
    mark("scan")?;
    launch::msm_scatter(
        dev,
        scalar_grid,
        &b.canon,
        n32,
        count,
        c,
        nwin,
        sets,
        stride,
        &b.cursor,
        &b.sorted,
    )?;
    mark("scatter")?;
    let points = AccPoints {
        bases: input.bases,
        base_idx: input.base_idx,
        sorted: Some(&b.sorted),
    };
    accumulate_buckets(
        dev,
        group,
        &points,
        &b.starts,
        m,
        s.acc_grid(n),
        buckets,
        (&b.first, &b.last),
        mark,
    )
}

/// The running sums of each bucket set's buckets, their reduction to one sum per set and
/// its conversion to Jacobian into `out`.
fn window_sums(
    dev: &Device,
    parts: &[DevRegion<'_>; 2],
    group: Group,
    s: &Shape,
    buckets: &DevRegion<'_>,
    out: &DevRegion<'_>,
    mark: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<()> {
    let (nb, seg, nseg, sets) = (s.nb, s.seg(), s.nseg(), s.sets);
    launch::msm_segments(
        dev,
        group,
        Device::grid(sets as u64 * nseg as u64, group.block()),
        buckets,
        nb,
        sets,
        seg,
        &parts[0],
    )?;
    mark("segments")?;
    let src = reduce_rows(dev, group, &parts[0], sets, nseg, [&parts[1], &parts[0]])?;
    mark("reduce")?;
    launch::to_jacobian(dev, group, Device::grid(sets as u64, 32), src, out, sets)?;
    mark("to_jacobian")
}

/// Reduces `rows` rows of `len` XYZZ points at `src` to one point per row by factors of
/// REDUCE_K, alternating between `bufs` (the second may be `src`: it is written only once
/// the first level has read it); returns the region holding the sums (`src` when `len`
/// is at most 1).
pub(crate) fn reduce_rows<'r>(
    dev: &Device,
    group: Group,
    src: &'r DevRegion<'r>,
    rows: u32,
    len: u32,
    bufs: [&'r DevRegion<'r>; 2],
) -> Result<&'r DevRegion<'r>> {
    let (mut src, mut len, mut next) = (src, len.max(1), 0);
    while len > 1 {
        let k = REDUCE_K.min(len);
        let out_len = len.div_ceil(k);
        launch::sum_groups(
            dev,
            group,
            Device::grid(rows as u64 * out_len as u64, group.block()),
            src,
            rows,
            len,
            k,
            bufs[next],
        )?;
        src = bufs[next];
        next ^= 1;
        len = out_len;
    }
    Ok(src)
}

/// The points a bucket accumulation reads: `bases[base_idx[j]]` (or `bases[j]`) for the
/// sorted entries j (sign in bit 31), or without `sorted` the points at `bases` in order.
struct AccPoints<'r> {
    bases: &'r DevRegion<'r>,
    base_idx: Option<&'r DevRegion<'r>>,
    sorted: Option<&'r DevRegion<'r>>,
}

/// Enqueues the load-balanced accumulation of the m buckets whose m + 1 starts are at
/// `starts` into `buckets` by `threads` threads (the entries per thread follow on the
/// device from the total, `starts[m]`), and the fixup of the buckets that cross threads
/// through the `partials` (first, last; `threads` points each).
#[allow(clippy::too_many_arguments)]
fn accumulate_buckets(
    dev: &Device,
    group: Group,
    points: &AccPoints<'_>,
    starts: &DevRegion<'_>,
    m: usize,
    threads: usize,
    buckets: &DevRegion<'_>,
    partials: (&DevRegion<'_>, &DevRegion<'_>),
    mark: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<()> {
    let (m32, t32, (first, last)) = (m as u32, threads as u32, partials);
    let min_k = ACC_MIN_K as u32;
    // The kernels spread starts[m] entries over at most `threads` threads (K >= the
    // entries / threads): first/last hold `threads` points each.
    launch::msm_accumulate(
        dev,
        group,
        Device::grid(threads as u64, group.block()),
        points.bases,
        points.base_idx,
        points.sorted,
        starts,
        m32,
        t32,
        min_k,
        buckets,
        first,
        last,
    )?;
    mark("accumulate")?;
    launch::msm_fixup(
        dev,
        group,
        Device::grid(m as u64, group.block()),
        starts,
        m32,
        t32,
        min_k,
        first,
        last,
        buckets,
    )?;
    mark("fixup")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_follow_the_cost_model() {
        // Unless the tuning forces one (never set in tests).
        if tuning().msm_window_bits.is_some() {
            eprintln!("skipped: CUZK_GPU_MSM_C is set");
            return;
        }
        assert_eq!(window_bits(1), 8);
        assert_eq!(window_bits(1000), 8);
        assert_eq!(window_bits(1 << 20), 16);
        assert_eq!(window_bits(419_915), 16);
        assert_eq!(window_bits(1 << 24), 20);
        assert!((8..=20).contains(&window_bits(usize::MAX >> 8)));
        // Never a width whose top window is a few bits (c = 17: one bit), at any size.
        assert_eq!(top_window_bits(17), 1);
        assert_eq!(top_window_bits(16), 16);
        for lg in 0..40 {
            for n in [1usize << lg, (1usize << lg) * 3 / 2] {
                let c = window_bits(n);
                assert!([8, 13, 16, 19, 20].contains(&c), "n={n}: c={c}");
            }
        }
        // Where c = 18 used to win the model (~2^22.1 points): 16 now; 19 above ~2^22.3.
        assert_eq!(window_bits(4_500_000), 16);
        assert_eq!(window_bits(7_000_000), 19);
    }

    #[test]
    fn shapes_cover_every_entry_and_bucket() {
        for n in [
            1usize,
            3,
            257,
            4095,
            100_003,
            419_915,
            1 << 22,
            (1 << 24) + 5,
            1 << 27,
        ] {
            let s = Shape::new(n);
            assert!(s.nwin * s.c >= 256, "n={n}");
            let seg = s.seg();
            assert!(
                seg.is_power_of_two() && seg <= s.nb && s.nseg() * seg == s.nb,
                "n={n}"
            );
            // Whatever the count below n, K = max(ceil(T / ACC_THREADS), ACC_MIN_K)
            // entries per thread over the launched threads cover all T entries.
            let threads = s.acc_grid(n);
            assert!((1..=ACC_THREADS).contains(&threads), "n={n}");
            for t in [0, 1, n, n * s.nwin as usize / 3, n * s.nwin as usize] {
                let k = t.div_ceil(ACC_THREADS).max(ACC_MIN_K);
                assert!(k * threads >= t, "n={n} entries={t}");
            }
        }
    }
}
