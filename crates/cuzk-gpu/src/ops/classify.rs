//! Bit-scalar handling on the device: [`classify`] splits a scalar vector into 0 / 1 /
//! other and compacts, in order, the indices of the ones and the (index, scalar) pairs of
//! the others (`kernels/classify.cu`), leaving the two counts on the device;
//! [`gather_enqueue`] packs the others' bases; [`batch_add_enqueue`] sums the bases an
//! index list selects (`kernels/batch_add.cu`), which is the MSM of the scalars equal to 1.
//! Every length here is a bound the buffers are sized for; the kernels read the actual
//! count from the device, so nothing waits for the host to learn it.

use blstrs::{G1Projective, G2Projective};

use crate::device::arena::{DevRegion, Scratch};
use crate::device::launch;
use crate::device::layout::{self, FR_BYTES};
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::ops::msm::{reduce_rows, scan_exclusive, scan_scratch_bytes, Group};

/// Threads per block of the classification kernels (CLASSIFY_THREADS in classify.cu).
const CLASSIFY_THREADS: u32 = 1024;
/// Points each batch-addition thread sums before the tree reduction.
const BATCH_K: u32 = 32;
/// Most threads of a gather whose count is on the device: the grid strides over the
/// points, so a bound far above the count costs few idle blocks (4 waves of an H200).
pub(crate) const STRIDE_THREADS: u64 = 1 << 20;

/// The result of [`classify`]: regions in the scratch it was given, and the counts in the
/// caller's region.
pub struct Classified<'s> {
    /// Scalars classified: the bound of both counts.
    pub n: usize,
    /// Two u32 on the device: the scalars equal to 1, then those neither 0 nor 1.
    pub counts: DevRegion<'s>,
    /// Indices of the ones, ascending (u32 each; `counts[0]` valid).
    pub one_idx: DevRegion<'s>,
    /// Indices of the others, ascending (u32 each; `counts[1]` valid).
    pub other_idx: DevRegion<'s>,
    /// The other scalars, in the same order (Montgomery Fr).
    pub other_scalars: DevRegion<'s>,
}

impl<'s> Classified<'s> {
    /// The count of ones (one u32 on the device).
    ///
    /// # Errors
    /// [`GpuError::Input`] if the counts region is short.
    pub fn ones(&self) -> Result<DevRegion<'s>> {
        self.counts.slice(0, 4)
    }
    /// The count of others (one u32 on the device).
    ///
    /// # Errors
    /// [`GpuError::Input`] if the counts region is short.
    pub fn others(&self) -> Result<DevRegion<'s>> {
        self.counts.slice(4, 4)
    }
    /// Downloads the two counts (waits for the compute stream: checks and tests only).
    ///
    /// # Errors
    /// Driver errors.
    pub fn download_counts(&self, dev: &Device) -> Result<(usize, usize)> {
        let mut b = [0u8; 8];
        dev.download(&mut b, &self.counts)?;
        let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]) as usize;
        Ok((word(0), word(4)))
    }
}

/// The scratch regions of a classification of n scalars.
struct ClassifyBufs<'s> {
    ones_c: DevRegion<'s>,
    others_c: DevRegion<'s>,
    ones_off: DevRegion<'s>,
    others_off: DevRegion<'s>,
    one_idx: DevRegion<'s>,
    other_idx: DevRegion<'s>,
    other_scalars: DevRegion<'s>,
    /// The scans' own scratch.
    scan: DevRegion<'s>,
}

fn classify_bufs<'s>(scratch: &'s Scratch<'_>, n: usize) -> Result<ClassifyBufs<'s>> {
    let nblocks = n.div_ceil(CLASSIFY_THREADS as usize).max(1);
    Ok(ClassifyBufs {
        ones_c: scratch.alloc(nblocks * 4)?,
        others_c: scratch.alloc(nblocks * 4)?,
        ones_off: scratch.alloc((nblocks + 1) * 4)?,
        others_off: scratch.alloc((nblocks + 1) * 4)?,
        one_idx: scratch.alloc(n.max(1) * 4)?,
        other_idx: scratch.alloc(n.max(1) * 4)?,
        other_scalars: scratch.alloc(n.max(1) * FR_BYTES)?,
        scan: scratch.alloc(scan_scratch_bytes(nblocks))?,
    })
}

/// Scratch bytes [`classify`] takes for n scalars.
pub fn classify_scratch_bytes(n: usize) -> usize {
    Scratch::measure(|s| classify_bufs(s, n).map(|_| ()))
}

/// Enqueues the classification of the n Montgomery scalars at `scalars`; the counts land
/// in `counts` (two u32: ones, others), where the follow-up kernels read them.
///
/// # Errors
/// [`GpuError::Input`] for short regions; arena or driver errors.
pub fn classify<'s>(
    dev: &Device,
    scratch: &'s Scratch<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
    counts: &DevRegion<'s>,
) -> Result<Classified<'s>> {
    if scalars.bytes() < n * FR_BYTES || counts.bytes() < 8 {
        return Err(GpuError::Input(format!(
            "{n} scalars need {} bytes and their counts 8",
            n * FR_BYTES
        )));
    }
    if n >= u32::MAX as usize {
        return Err(GpuError::Input(format!(
            "{n} scalars exceed the 32-bit index"
        )));
    }
    let b = classify_bufs(scratch, n)?;
    let out = Classified {
        n,
        counts: *counts,
        one_idx: b.one_idx,
        other_idx: b.other_idx,
        other_scalars: b.other_scalars,
    };
    if n == 0 {
        dev.memset_zero(counts)?;
        return Ok(out);
    }
    let nblocks = n.div_ceil(CLASSIFY_THREADS as usize);
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (nblocks as u32, 1, 1),
        block_dim: (CLASSIFY_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let n32 = n as u32;
    // One count per block of CLASSIFY_THREADS.
    launch::classify_count(dev, cfg, scalars, n32, &b.ones_c, &b.others_c)?;
    let mut scan = Scratch::within(&b.scan);
    for (c, offsets) in [(&b.ones_c, &b.ones_off), (&b.others_c, &b.others_off)] {
        // The second scan reuses the first's scratch: the stream orders them.
        scan.reset();
        scan_exclusive(dev, &scan, c, offsets, None, nblocks)?;
    }
    launch::classify_scatter(
        dev,
        cfg,
        scalars,
        n32,
        &b.ones_off,
        &b.others_off,
        &b.one_idx,
        &b.other_idx,
        &b.other_scalars,
    )?;
    // The scans' totals are the counts.
    dev.copy_on_compute(&out.ones()?, &b.ones_off.slice(nblocks * 4, 4)?, 4)?;
    dev.copy_on_compute(&out.others()?, &b.others_off.slice(nblocks * 4, 4)?, 4)?;
    Ok(out)
}

/// Enqueues the copy of `bases[idx[i]]` for i < count (on the device; all n without it)
/// into `out`, a dense region of n points.
///
/// # Errors
/// [`GpuError::Input`] for short regions; driver errors.
pub fn gather_enqueue(
    dev: &Device,
    group: Group,
    bases: &DevRegion<'_>,
    idx: &DevRegion<'_>,
    n: usize,
    count: Option<&DevRegion<'_>>,
    out: &DevRegion<'_>,
) -> Result<()> {
    if n == 0 {
        return Ok(());
    }
    let words = (group.affine_bytes() / 16) as u32;
    // idx holds count <= n entries below the bases' point count (classify's indices); the
    // grid strides over count * W words, capped at STRIDE_THREADS threads.
    let threads = (n as u64 * words as u64).min(STRIDE_THREADS);
    launch::gather_points(
        dev,
        Device::grid(threads, 256),
        bases,
        idx,
        n as u32,
        count,
        words,
        out,
    )
}

/// Scratch bytes [`batch_add_enqueue`] takes for a bound of n points in `group`.
pub fn batch_add_scratch_bytes(group: Group, n: usize) -> usize {
    Scratch::measure(|s| batch_add_bufs(s, group, n).map(|_| ()))
}

fn batch_add_bufs<'s>(
    scratch: &'s Scratch<'_>,
    group: Group,
    n: usize,
) -> Result<[DevRegion<'s>; 2]> {
    let nout = n.div_ceil(BATCH_K as usize).max(1);
    Ok([
        scratch.alloc(nout * group.xyzz_bytes())?,
        scratch.alloc(nout * group.xyzz_bytes())?,
    ])
}

/// Enqueues `Σ bases[idx[i]]` (or `Σ bases[i]` without an index list) for i < count (on
/// the device; all n without it); the Jacobian sum lands in `out`.
///
/// # Errors
/// [`GpuError::Input`] for short regions; arena or driver errors.
#[allow(clippy::too_many_arguments)]
pub fn batch_add_enqueue(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
    count: Option<&DevRegion<'_>>,
    out: &DevRegion<'_>,
) -> Result<()> {
    match idx {
        Some(r) if r.bytes() < n * 4 => {
            return Err(GpuError::Input(format!("{n} indices need {} bytes", n * 4)))
        }
        None if bases.bytes() < n * group.affine_bytes() => {
            return Err(GpuError::Input(format!(
                "{n} bases need {} bytes",
                n * group.affine_bytes()
            )))
        }
        _ => {}
    }
    let nout = n.div_ceil(BATCH_K as usize).max(1);
    let [part_a, part_b] = batch_add_bufs(scratch, group, n)?;
    // One thread per partial of the bound: those past the count write infinity, and with
    // n = 0 the one thread does.
    launch::batch_add(
        dev,
        group,
        Device::grid(nout as u64, group.block()),
        bases,
        idx,
        n as u32,
        count,
        BATCH_K,
        &part_a,
    )?;
    reduce_partials(dev, group, &part_a, nout, [&part_b, &part_a], out)
}

/// Partial sums a batch addition streamed in chunks keeps ([`batch_add_acc_enqueue`]): a
/// chunk's ones spread over this many threads, each adding its share to its own partial.
/// Enough threads to fill the device (as many as the plain batch addition launches for a
/// 2^21-point chunk in G1), few enough that their reduction after the last chunk is short.
pub fn batch_parts(group: Group) -> usize {
    match group {
        Group::G1 => 1 << 16,
        Group::G2 => 1 << 15,
    }
}

/// Enqueues one chunk of a batch addition streamed in chunks: `Σ bases[idx[i]]` (or
/// `Σ bases[i]`) for i < count (on the device; all n without it), spread over the
/// `nparts` partials in `parts` and added to them; `parts` holds the earlier chunks' (all
/// zero bytes before the first). [`batch_reduce_enqueue`] sums them after the last chunk.
///
/// # Errors
/// [`GpuError::Input`] for short regions; driver errors.
#[allow(clippy::too_many_arguments)]
pub fn batch_add_acc_enqueue(
    dev: &Device,
    group: Group,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
    count: Option<&DevRegion<'_>>,
    parts: &DevRegion<'_>,
    nparts: usize,
) -> Result<()> {
    if nparts == 0 || nparts > u32::MAX as usize {
        return Err(GpuError::Input(format!("{nparts} batch partials")));
    }
    launch::batch_add_acc(
        dev,
        group,
        Device::grid(nparts as u64, group.block()),
        bases,
        idx,
        n as u32,
        count,
        nparts as u32,
        parts,
    )
}

/// Scratch bytes [`batch_reduce_enqueue`] takes for `nparts` partials.
pub fn batch_reduce_scratch_bytes(group: Group, nparts: usize) -> usize {
    Scratch::measure(|s| reduce_bufs(s, group, nparts).map(|_| ()))
}

fn reduce_bufs<'s>(
    scratch: &'s Scratch<'_>,
    group: Group,
    nparts: usize,
) -> Result<[DevRegion<'s>; 2]> {
    let len = nparts.div_ceil(crate::ops::msm::REDUCE_K as usize).max(1) * group.xyzz_bytes();
    Ok([scratch.alloc(len)?, scratch.alloc(len)?])
}

/// Enqueues the sum of the `nparts` XYZZ partials in `parts` (left unchanged) into `out`
/// (Jacobian).
///
/// # Errors
/// Arena or driver errors.
pub fn batch_reduce_enqueue(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    parts: &DevRegion<'_>,
    nparts: usize,
    out: &DevRegion<'_>,
) -> Result<()> {
    let [a, b] = reduce_bufs(scratch, group, nparts)?;
    reduce_partials(dev, group, parts, nparts, [&a, &b], out)
}

/// Sums the `len` XYZZ points at `src` ([`reduce_rows`] through `bufs`) and converts the
/// sum to Jacobian into `out`.
fn reduce_partials(
    dev: &Device,
    group: Group,
    src: &DevRegion<'_>,
    len: usize,
    bufs: [&DevRegion<'_>; 2],
    out: &DevRegion<'_>,
) -> Result<()> {
    let sum = reduce_rows(dev, group, src, 1, len as u32, bufs)?;
    launch::to_jacobian(dev, group, Device::grid(1, 32), sum, out, 1)
}

/// [`batch_add_enqueue`] in G1 over all n points, waiting for the result (checks).
///
/// # Errors
/// As [`batch_add_enqueue`].
pub fn batch_add_g1(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
    count: Option<&DevRegion<'_>>,
) -> Result<G1Projective> {
    let out = scratch.alloc(layout::G1_JACOBIAN_BYTES)?;
    batch_add_enqueue(dev, scratch, Group::G1, bases, idx, n, count, &out)?;
    let mut b = vec![0u8; layout::G1_JACOBIAN_BYTES];
    dev.download(&mut b, &out)?;
    Ok(layout::g1_from_jacobian(&b))
}

/// As [`batch_add_g1`] in G2.
///
/// # Errors
/// As [`batch_add_enqueue`].
pub fn batch_add_g2(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
    count: Option<&DevRegion<'_>>,
) -> Result<G2Projective> {
    let out = scratch.alloc(layout::G2_JACOBIAN_BYTES)?;
    batch_add_enqueue(dev, scratch, Group::G2, bases, idx, n, count, &out)?;
    let mut b = vec![0u8; layout::G2_JACOBIAN_BYTES];
    dev.download(&mut b, &out)?;
    Ok(layout::g2_from_jacobian(&b))
}
