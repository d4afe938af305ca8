//! The query sums of the GPU backend, Σ s_i·P_i, with the bases either resident on the
//! device ([`sum_resident`]) or streamed from host memory in chunks ([`sum_streamed`]).
//! With `split` the scalars are first classified on the device into 0 / 1 / other; the ones
//! are batch-added and only the others go through Pippenger (the L, A and B queries, whose
//! scalars are mostly bits); without it the whole vector is one MSM (H). Streaming does the
//! same per chunk and adds the chunk sums, so both paths give the same point.

use std::sync::Arc;

use crate::backend::residency::copy_parallel;
use crate::device::arena::{DevRegion, Scratch};
use crate::device::layout::{FR_BYTES, G1_AFFINE_BYTES, G2_AFFINE_BYTES};
use crate::device::pinned::PinnedBuf;
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::ops::classify::{batch_add_g1, batch_add_g2, classify, gather_enqueue, Classified};
use crate::ops::msm::{msm_g1, msm_g2, scratch_bytes, scratch_bytes_any, Group};

type BatchAddFn<P> =
    fn(&Device, &Scratch<'_>, &DevRegion<'_>, Option<&DevRegion<'_>>, usize) -> Result<P>;
type MsmFn<P> = fn(
    &Device,
    &Scratch<'_>,
    &DevRegion<'_>,
    Option<&DevRegion<'_>>,
    &DevRegion<'_>,
    usize,
) -> Result<P>;

/// The kernels of one group.
pub struct GroupOps<P> {
    pub(crate) batch_add: BatchAddFn<P>,
    pub(crate) msm: MsmFn<P>,
    /// Bytes of one affine base.
    pub point_bytes: usize,
    /// The group.
    pub group: Group,
}

/// G1's batch addition and MSM.
pub const G1_OPS: GroupOps<blstrs::G1Projective> = GroupOps {
    batch_add: batch_add_g1,
    msm: msm_g1,
    point_bytes: G1_AFFINE_BYTES,
    group: Group::G1,
};

/// G2's batch addition and MSM.
pub const G2_OPS: GroupOps<blstrs::G2Projective> = GroupOps {
    batch_add: batch_add_g2,
    msm: msm_g2,
    point_bytes: G2_AFFINE_BYTES,
    group: Group::G2,
};

/// Scratch bytes one sum of n points needs (classification plus a G2-sized MSM).
pub fn sum_scratch_bytes(n: usize) -> usize {
    let n = n.max(1);
    // classify: 2 index vectors (4 B), other scalars (32 B), block counts; then the MSM's
    // own buffers and the batch addition's partials. The others' packed bases fit in what
    // an MSM of n_others < n points leaves free while n_others is below about n / 3.
    n * (4 + 4 + FR_BYTES)
        + scratch_bytes_any(n)
        + 2 * n.div_ceil(32) * Group::G2.xyzz_bytes()
        + (16 << 20)
}

/// Σ s_i·P_i for the n bases and scalars on the device.
///
/// # Errors
/// Arena (scratch too small) or driver errors.
pub fn sum_resident<P: group::Group>(
    dev: &Device,
    scratch: &DevRegion<'_>,
    ops: &GroupOps<P>,
    bases: &DevRegion<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
    split: bool,
) -> Result<P> {
    if n == 0 {
        return Ok(P::identity());
    }
    let scratch = Scratch::within(scratch);
    if !split {
        return (ops.msm)(dev, &scratch, bases, None, scalars, n);
    }
    let mut prof = crate::device::PhaseTimer::start(dev, || format!("split n={n}"))?;
    let cls = classify(dev, &scratch, scalars, n)?;
    if let Some(p) = prof.as_mut() {
        p.mark("classify")?;
    }
    let ones = (ops.batch_add)(dev, &scratch, bases, Some(&cls.one_idx), cls.n_ones)?;
    if let Some(p) = prof.as_mut() {
        p.mark("batch_add")?;
    }
    let others = msm_others(
        dev,
        &scratch,
        ops,
        bases,
        &cls,
        packed_fits(&scratch, ops, &cls),
    )?;
    if let Some(mut p) = prof {
        p.mark("msm_others")?;
        tracing::info!(n, ones = cls.n_ones, others = cls.n_others, "split sum");
        p.report()?;
    }
    Ok(ones + others)
}

/// Whether the others' bases and their MSM's buffers fit in what is left of `scratch`.
pub(crate) fn packed_fits<P>(
    scratch: &Scratch<'_>,
    ops: &GroupOps<P>,
    cls: &Classified<'_>,
) -> bool {
    let need = cls.n_others * ops.point_bytes
        + scratch_bytes(ops.group, cls.n_others)
        + 2 * crate::device::arena::ALIGN;
    need <= scratch.free()
}

/// The MSM of the classified others: over their bases packed into a dense array first
/// (`packed`; the MSM then gathers from n_others points instead of from the whole query
/// through the index list, ~6x faster per addition at 2^22) or through the index list.
///
/// # Errors
/// Arena or driver errors.
pub(crate) fn msm_others<P>(
    dev: &Device,
    scratch: &Scratch<'_>,
    ops: &GroupOps<P>,
    bases: &DevRegion<'_>,
    cls: &Classified<'_>,
    packed: bool,
) -> Result<P> {
    let (sc, n) = (&cls.other_scalars, cls.n_others);
    if packed {
        let dense = gather_enqueue(dev, scratch, ops.group, bases, &cls.other_idx, n)?;
        (ops.msm)(dev, scratch, &dense, None, sc, n)
    } else {
        (ops.msm)(dev, scratch, bases, Some(&cls.other_idx), sc, n)
    }
}

/// What streaming needs: two device chunk buffers, two pinned staging buffers of the same
/// size, and the scratch for one chunk's sum.
pub struct StreamBufs<'a> {
    /// Device buffers chunks land in.
    pub device: [DevRegion<'a>; 2],
    /// Pinned staging the host copies chunks into.
    pub pinned: &'a mut [PinnedBuf; 2],
    /// Scratch for one chunk's sum.
    pub scratch: DevRegion<'a>,
    /// Points per chunk.
    pub chunk: usize,
}

/// Σ s_i·P_i with the n bases in host memory (`host`, blst affine points) and the scalars on
/// the device. Chunk j+1 is uploaded on the copy stream and chunk j+2 copied into pinned
/// staging on the host while chunk j is summed on the compute stream.
///
/// # Errors
/// [`GpuError::Input`] for buffers too small; arena or driver errors.
pub fn sum_streamed<P: group::Group>(
    dev: &Arc<Device>,
    sb: &mut StreamBufs<'_>,
    ops: &GroupOps<P>,
    host: &[u8],
    scalars: &DevRegion<'_>,
    n: usize,
    split: bool,
) -> Result<P> {
    let pb = ops.point_bytes;
    let chunk = sb.chunk;
    if host.len() < n * pb || scalars.bytes() < n * FR_BYTES {
        return Err(GpuError::Input(format!(
            "{n} streamed points: {} host bytes, {} scalar bytes",
            host.len(),
            scalars.bytes()
        )));
    }
    if chunk == 0 || sb.device.iter().any(|d| d.bytes() < chunk * pb) {
        return Err(GpuError::Input(format!(
            "streaming chunk of {chunk} points does not fit its buffers"
        )));
    }
    if n == 0 {
        return Ok(P::identity());
    }
    let nchunks = n.div_ceil(chunk);
    let part = |j: usize| (j * chunk, ((j + 1) * chunk).min(n));
    let bytes = |j: usize| {
        let (b, e) = part(j);
        &host[b * pb..e * pb]
    };
    let uploaded = [dev.timing_event()?, dev.timing_event()?];
    let [p0, p1] = &mut *sb.pinned;
    let pins: [&mut PinnedBuf; 2] = [p0, p1];
    let fill = |pin: &mut PinnedBuf, src: &[u8]| -> Result<()> {
        let dst = pin.as_mut_slice()?;
        if dst.len() < src.len() {
            return Err(GpuError::Input(
                "pinned staging smaller than a chunk".into(),
            ));
        }
        copy_parallel(&mut dst[..src.len()], src);
        Ok(())
    };
    let enqueue = |pin: &PinnedBuf, dst: &DevRegion<'_>, len: usize, ev| -> Result<()> {
        let src = &pin.as_slice()?[..len];
        // SAFETY: the staging buffer is not written again before `ev` is waited on (the
        // loop below waits on it before refilling the buffer, and before returning).
        unsafe { dev.upload_on_copy(dst, src)? };
        dev.record_on_copy(ev)
    };
    fill(pins[0], bytes(0))?;
    enqueue(pins[0], &sb.device[0], bytes(0).len(), &uploaded[0])?;
    if nchunks > 1 {
        fill(pins[1], bytes(1))?;
    }
    let mut acc = P::identity();
    let mut result = Ok(());
    for j in 0..nchunks {
        let s = j % 2;
        if j + 1 < nchunks {
            // The device buffer 1 − s was last read by chunk j − 1, whose sum has been
            // downloaded; its pinned twin holds chunk j + 1 since the last iteration.
            if let Err(e) = enqueue(
                &*pins[1 - s],
                &sb.device[1 - s],
                bytes(j + 1).len(),
                &uploaded[1 - s],
            ) {
                result = Err(e);
                break;
            }
        }
        // Chunk j is on the device once this returns; pinned s is free for chunk j + 2.
        if let Err(e) = dev.wait_event(&uploaded[s]) {
            result = Err(e);
            break;
        }
        let (b, e) = part(j);
        let dev_buf = sb.device[s];
        let scratch = sb.scratch;
        let sc = scalars.slice(b * FR_BYTES, (e - b) * FR_BYTES)?;
        let pin = &mut *pins[s];
        let next = (j + 2 < nchunks).then(|| bytes(j + 2));
        let (filled, sum) = std::thread::scope(|scope| {
            let h = next.map(|src| scope.spawn(move || fill(pin, src)));
            let sum = sum_resident(dev, &scratch, ops, &dev_buf, &sc, e - b, split);
            let filled = h.map_or(Ok(()), |h| {
                h.join()
                    .unwrap_or_else(|_| Err(GpuError::Internal("staging thread panicked".into())))
            });
            (filled, sum)
        });
        match (filled, sum) {
            (Ok(()), Ok(p)) => acc += p,
            (Err(e), _) | (_, Err(e)) => {
                result = Err(e);
                break;
            }
        }
    }
    if result.is_err() {
        // Uploads may still read the staging buffers: let them finish before the caller
        // reuses them (errors here are secondary to the first one).
        let _ = dev.wait_event(&uploaded[0]);
        let _ = dev.wait_event(&uploaded[1]);
    }
    result.map(|()| acc)
}
