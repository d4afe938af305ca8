//! Pippenger MSM on the device for G1 and G2 ([`msm_g1`], [`msm_g2`]): the host sequence
//! of the phases in `kernels/msm.cu` (canonical scalars, bucket histogram, counting sort,
//! bucket accumulation, per-window running sums, reductions; the Horner combination runs on
//! the host). Bases are resident (blst affine points, optionally through an index list),
//! streamed from host memory in chunks (`streamed.rs`) or read through a window table
//! (`table.rs`); the multi-block scan is `scan.rs`.

mod host;
mod scan;
mod shape;
mod streamed;
mod table;

pub use crate::device::layout::Group;
pub use host::{msm_enqueue, msm_g1, msm_g2, MsmOut};

pub(crate) use scan::{scan_exclusive, scan_scratch_bytes};
use shape::ACC_MIN_K;
pub(crate) use shape::{modelled_additions, Shape};
pub use shape::{window_bits, windows};
pub use streamed::{msm_streamed_g1, msm_streamed_g2};
pub use table::{build_table_g1, msm_table_g1, table_scratch_bytes, WindowTable};

use crate::device::arena::{DevRegion, Scratch};
use crate::device::layout::FR_BYTES;
use crate::device::{launch, Device, PhaseTimer};
use crate::error::{GpuError, Result};
use crate::ops::classify::STRIDE_THREADS;

/// Reduction factor of one `sum_groups` launch (here and for the batch addition's
/// partials). After the first launch these reductions are latency chains: few threads, each
/// adding K points one after another. On an H200, 4 instead of 16 took the reduce phase of
/// a 2^19-point MSM from 0.68 to 0.35 ms in G1 and from 1.97 to 0.93 ms in G2.
pub(crate) const REDUCE_K: u32 = 4;

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

/// What an MSM reads: Σ scalars\[i\] · bases\[idx(i)\] for i < count, with idx(i) =
/// base_idx\[i\] when given, else i.
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
