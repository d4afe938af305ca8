//! MSMs whose bases stream from host memory in double-buffered chunks
//! ([`msm_streamed_g1`], [`msm_streamed_g2`]), for SRSs that do not fit in VRAM. Each chunk
//! is one resident MSM (`mod.rs`).

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};

use super::{msm_enqueue, scratch_bytes, Group, MsmOut};
use crate::device::arena::{DevRegion, Scratch};
use crate::device::layout::{self, FR_BYTES};
use crate::device::Device;
use crate::error::{drv, GpuError, Result};

/// `Σ scalars[i] · bases[i]` in G1 with the bases streamed from host memory in chunks of
/// `chunk` points through two device buffers (upload of chunk j+1 on the copy stream
/// overlaps the MSM of chunk j on the compute stream). Scalars are device-resident.
///
/// # Errors
/// As [`msm_g1`](super::msm_g1).
pub fn msm_streamed_g1(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &[G1Affine],
    scalars: &DevRegion<'_>,
    chunk: usize,
) -> Result<G1Projective> {
    let raw = msm_streamed(
        dev,
        scratch,
        Group::G1,
        layout::as_bytes(bases),
        bases.len(),
        scalars,
        chunk,
    )?;
    Ok(raw.iter().map(|(c, w)| MsmOut::finish_g1(*c, w)).sum())
}

/// As [`msm_streamed_g1`] in G2.
///
/// # Errors
/// As [`msm_g1`](super::msm_g1).
pub fn msm_streamed_g2(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &[G2Affine],
    scalars: &DevRegion<'_>,
    chunk: usize,
) -> Result<G2Projective> {
    let raw = msm_streamed(
        dev,
        scratch,
        Group::G2,
        layout::as_bytes(bases),
        bases.len(),
        scalars,
        chunk,
    )?;
    Ok(raw.iter().map(|(c, w)| MsmOut::finish_g2(*c, w)).sum())
}

fn msm_streamed(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    host: &[u8],
    n: usize,
    scalars: &DevRegion<'_>,
    chunk: usize,
) -> Result<Vec<(u32, Vec<u8>)>> {
    if chunk == 0 {
        return Err(GpuError::Input("streaming chunk of 0 points".into()));
    }
    let nchunks = n.div_ceil(chunk);
    if nchunks == 0 {
        return Ok(Vec::new());
    }
    let ab = group.affine_bytes();
    let buf = [scratch.alloc(chunk * ab)?, scratch.alloc(chunk * ab)?];
    // Per chunk up to 32 window sums (c = 8 is the narrowest window).
    let slot_bytes = 32 * group.jacobian_bytes();
    let results = scratch.alloc(nchunks * slot_bytes)?;
    let mut shapes = Vec::with_capacity(nchunks);
    // One sub-scratch per chunk would need a reset; the MSM's own buffers for the largest
    // chunk are carved once and reused by every chunk.
    let msm_scratch = scratch.alloc(scratch_bytes(group, chunk))?;
    let ord = dev.ordinal();
    let uploaded = [dev.timing_event()?, dev.timing_event()?];
    let consumed = [dev.timing_event()?, dev.timing_event()?];
    dev.upload_scope(|up| -> Result<()> {
        for j in 0..nchunks {
            let (b, e) = (j * chunk, ((j + 1) * chunk).min(n));
            let slot = j % 2;
            if j >= 2 {
                // The MSM that last read this buffer must be done before overwriting it.
                drv(
                    ord,
                    || "wait consumed".into(),
                    dev.copy_stream().wait(&consumed[slot]),
                )?;
            }
            up.upload(&buf[slot], &host[b * ab..e * ab])?;
            up.record(&uploaded[slot])?;
            dev.wait_on(&uploaded[slot])?;
            let sub = Scratch::within(&msm_scratch);
            let sc = scalars.slice(b * FR_BYTES, (e - b) * FR_BYTES)?;
            let out = msm_enqueue(dev, &sub, group, &buf[slot], None, &sc, e - b)?;
            let wb = out.bytes(group);
            let dst = results.slice(j * slot_bytes, wb)?;
            shapes.push((out.c, wb));
            dev.copy_on_compute(&dst, &out.windows, wb)?;
            dev.record(&consumed[slot])?;
        }
        Ok(())
    })??;
    let mut raw = vec![0u8; nchunks * slot_bytes];
    dev.download(&mut raw, &results)?;
    Ok(shapes
        .iter()
        .enumerate()
        .map(|(j, &(c, wb))| (c, raw[j * slot_bytes..j * slot_bytes + wb].to_vec()))
        .collect())
}
