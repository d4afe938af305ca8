//! Bit-scalar handling on the device: [`classify`] splits a scalar vector into 0 / 1 /
//! other and compacts, in order, the indices of the ones and the (index, scalar) pairs of
//! the others (`kernels/classify.cu`); [`batch_add_enqueue`] sums the bases an index list selects
//! (`kernels/batch_add.cu`), which is the MSM of the scalars equal to 1.

use blstrs::{G1Projective, G2Projective};

use crate::device::arena::{DevRegion, Scratch};
use crate::device::launch;
use crate::device::layout::{self, FR_BYTES};
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::ops::msm::{scan_exclusive, Group};

/// Threads per block of the classification kernels (CLASSIFY_THREADS in classify.cu).
const CLASSIFY_THREADS: u32 = 1024;
/// Points each batch-addition thread sums before the tree reduction.
const BATCH_K: u32 = 32;

/// The result of [`classify`]: regions in the scratch it was given.
pub struct Classified<'s> {
    /// Scalars equal to 1.
    pub n_ones: usize,
    /// Scalars neither 0 nor 1.
    pub n_others: usize,
    /// Indices of the ones, ascending (u32 each; `n_ones` valid).
    pub one_idx: DevRegion<'s>,
    /// Indices of the others, ascending (u32 each; `n_others` valid).
    pub other_idx: DevRegion<'s>,
    /// The other scalars, in the same order (Montgomery Fr).
    pub other_scalars: DevRegion<'s>,
}

/// Classifies the n Montgomery scalars at `scalars`. Reads back the two counts (one small
/// synchronizing copy) so the caller can size the follow-up launches.
///
/// # Errors
/// [`GpuError::Input`] for a short region; arena or driver errors.
pub fn classify<'s>(
    dev: &Device,
    scratch: &'s Scratch<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
) -> Result<Classified<'s>> {
    if scalars.bytes() < n * FR_BYTES {
        return Err(GpuError::Input(format!(
            "{n} scalars need {} bytes",
            n * FR_BYTES
        )));
    }
    if n >= u32::MAX as usize {
        return Err(GpuError::Input(format!(
            "{n} scalars exceed the 32-bit index"
        )));
    }
    let nblocks = n.div_ceil(CLASSIFY_THREADS as usize).max(1);
    let ones_c = scratch.alloc(nblocks * 4)?;
    let others_c = scratch.alloc(nblocks * 4)?;
    let ones_off = scratch.alloc((nblocks + 1) * 4)?;
    let others_off = scratch.alloc((nblocks + 1) * 4)?;
    let one_idx = scratch.alloc(n.max(1) * 4)?;
    let other_idx = scratch.alloc(n.max(1) * 4)?;
    let other_scalars = scratch.alloc(n.max(1) * FR_BYTES)?;
    if n == 0 {
        return Ok(Classified {
            n_ones: 0,
            n_others: 0,
            one_idx,
            other_idx,
            other_scalars,
        });
    }
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: (nblocks as u32, 1, 1),
        block_dim: (CLASSIFY_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    let n32 = n as u32;
    // One count per block of CLASSIFY_THREADS.
    launch::classify_count(dev, cfg, scalars, n32, &ones_c, &others_c)?;
    for (counts, offsets) in [(&ones_c, &ones_off), (&others_c, &others_off)] {
        scan_exclusive(dev, scratch, counts, offsets, None, nblocks)?;
    }
    launch::classify_scatter(
        dev,
        cfg,
        scalars,
        n32,
        &ones_off,
        &others_off,
        &one_idx,
        &other_idx,
        &other_scalars,
    )?;
    let mut t = [0u8; 4];
    dev.download(&mut t, &ones_off.slice(nblocks * 4, 4)?)?;
    let n_ones = u32::from_le_bytes(t) as usize;
    dev.download(&mut t, &others_off.slice(nblocks * 4, 4)?)?;
    let n_others = u32::from_le_bytes(t) as usize;
    Ok(Classified {
        n_ones,
        n_others,
        one_idx,
        other_idx,
        other_scalars,
    })
}

/// Enqueues the copy of `bases[idx[i]]` for i < n into a dense region of n points taken
/// from `scratch`, and returns it.
///
/// # Errors
/// [`GpuError::Input`] for short regions; arena or driver errors.
pub fn gather_enqueue<'s>(
    dev: &Device,
    scratch: &'s Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    idx: &DevRegion<'_>,
    n: usize,
) -> Result<DevRegion<'s>> {
    if idx.bytes() < n * 4 {
        return Err(GpuError::Input(format!("{n} indices need {} bytes", n * 4)));
    }
    let pb = group.affine_bytes();
    let out = scratch.alloc(n.max(1) * pb)?;
    if n == 0 {
        return Ok(out);
    }
    let words = (pb / 16) as u32;
    // idx holds n entries below the bases' point count (classify's indices); the grid
    // covers n * W threads and the kernel checks i < n.
    launch::gather_points(
        dev,
        Device::grid(n as u64 * words as u64, 256),
        bases,
        idx,
        n as u32,
        words,
        &out,
    )?;
    Ok(out)
}

/// Enqueues `Σ bases[idx[i]]` (or `Σ bases[i]` without an index list) for i < n; the Jacobian
/// sum lands in the returned region.
///
/// # Errors
/// [`GpuError::Input`] for short regions; arena or driver errors.
pub fn batch_add_enqueue<'s>(
    dev: &Device,
    scratch: &'s Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
) -> Result<DevRegion<'s>> {
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
    let part_a = scratch.alloc(nout * group.xyzz_bytes())?;
    let part_b = scratch.alloc(nout * group.xyzz_bytes())?;
    let out = scratch.alloc(group.jacobian_bytes())?;
    // With n = 0 the one thread writes infinity.
    launch::batch_add(
        dev,
        group,
        Device::grid(nout as u64, group.block()),
        bases,
        idx,
        n as u32,
        BATCH_K,
        &part_a,
    )?;
    let (mut src, mut dst) = (&part_a, &part_b);
    let mut len = nout as u32;
    while len > 1 {
        let k = crate::ops::msm::REDUCE_K.min(len);
        let out_len = len.div_ceil(k);
        launch::sum_groups(
            dev,
            group,
            Device::grid(out_len as u64, group.block()),
            src,
            1,
            len,
            k,
            dst,
        )?;
        std::mem::swap(&mut src, &mut dst);
        len = out_len;
    }
    launch::to_jacobian(dev, group, Device::grid(1, 32), src, &out, 1)?;
    Ok(out)
}

/// [`batch_add_enqueue`] in G1, waiting for the result.
///
/// # Errors
/// As [`batch_add_enqueue`].
pub fn batch_add_g1(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
) -> Result<G1Projective> {
    let out = batch_add_enqueue(dev, scratch, Group::G1, bases, idx, n)?;
    let mut b = vec![0u8; layout::G1_JACOBIAN_BYTES];
    dev.download(&mut b, &out)?;
    Ok(layout::g1_from_jacobian(&b))
}

/// [`batch_add_enqueue`] in G2, waiting for the result.
///
/// # Errors
/// As [`batch_add_enqueue`].
pub fn batch_add_g2(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &DevRegion<'_>,
    idx: Option<&DevRegion<'_>>,
    n: usize,
) -> Result<G2Projective> {
    let out = batch_add_enqueue(dev, scratch, Group::G2, bases, idx, n)?;
    let mut b = vec![0u8; layout::G2_JACOBIAN_BYTES];
    dev.download(&mut b, &out)?;
    Ok(layout::g2_from_jacobian(&b))
}
