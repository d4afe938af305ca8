//! The multi-block exclusive prefix sum of u32 words on the device ([`scan_exclusive`]):
//! bucket offsets for the MSM's counting sort, and the classification's
//! compaction offsets. The kernels are `scan_*` in `kernels/msm.cu`.

use crate::device::arena::{DevRegion, Scratch};
use crate::device::launch;
use crate::device::Device;
use crate::error::{GpuError, Result};

/// Words per tile of the multi-block scan (its block size).
const SCAN_TILE: usize = 1024;

/// Scratch bytes [`scan_exclusive`] takes for m words.
pub(crate) fn scan_scratch_bytes(m: usize) -> usize {
    Scratch::measure(|s| carve(s, m).map(|_| ()))
}

/// The tile sums and their offsets of a scan of m words.
fn carve<'s>(scratch: &'s Scratch<'_>, m: usize) -> Result<(DevRegion<'s>, DevRegion<'s>)> {
    let tiles = m.div_ceil(SCAN_TILE);
    Ok((scratch.alloc(tiles * 4)?, scratch.alloc((tiles + 1) * 4)?))
}

/// Enqueues the exclusive prefix sum of the m words at `input` into `out` (m + 1 words, the
/// total last) and, when given, into `copy` (m words): tile sums, one-block scan of those,
/// then each tile scanned with its offset.
///
/// # Errors
/// [`GpuError::Input`] for short regions; arena or driver errors.
pub(crate) fn scan_exclusive(
    dev: &Device,
    scratch: &Scratch<'_>,
    input: &DevRegion<'_>,
    out: &DevRegion<'_>,
    copy: Option<&DevRegion<'_>>,
    m: usize,
) -> Result<()> {
    if m == 0
        || m >= u32::MAX as usize
        || input.bytes() < m * 4
        || out.bytes() < (m + 1) * 4
        || copy.is_some_and(|c| c.bytes() < m * 4)
    {
        return Err(GpuError::Input(format!(
            "scan of {m} words: regions too small"
        )));
    }
    let tiles = m.div_ceil(SCAN_TILE);
    let (sums, offs) = carve(scratch, m)?;
    let (m32, t32) = (m as u32, tiles as u32);
    let tile_grid = cudarc::driver::LaunchConfig {
        grid_dim: (t32, 1, 1),
        block_dim: (SCAN_TILE as u32, 1, 1),
        shared_mem_bytes: 0,
    };
    let one_block = cudarc::driver::LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    launch::scan_tile_sums(dev, tile_grid, input, m32, &sums)?;
    launch::scan_exclusive_u32(dev, one_block, &sums, &offs, None, t32)?;
    launch::scan_tile_apply(dev, tile_grid, input, m32, &offs, out, copy)?;
    Ok(())
}
