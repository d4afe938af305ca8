//! The query sums of a prove, Σ s_i·P_i, enqueued into the regions a [`ProvePlan`] gives
//! and never waited for: the bases resident on the device ([`enqueue_chunk`]) or streamed
//! from host memory in chunks ([`enqueue_streamed`]). A split sum (L, A, B: scalars mostly
//! bits) is classified on the device into 0 / 1 / other, the counts staying on the device
//! in the plan's results; the ones are batch-added and the others go through Pippenger,
//! both kernels bounding their work by those counts. H is one MSM. Each chunk leaves its
//! window sums (and for a split sum the ones' sum and the counts) in the results region,
//! which the prove downloads once at its end; a split sum streamed in several chunks adds
//! each chunk to its accumulators instead and leaves the sums once, after its last chunk.
//!
//! [`ProvePlan`]: crate::backend::plan::ProvePlan

use cudarc::driver::CudaEvent;
use cuzk_groth16::{SrsFile, SrsQuery};

use crate::backend::plan::{ChunkOut, SumPlan};
use crate::backend::residency::copy_parallel;
use crate::device::arena::{DevRegion, Scratch};
use crate::device::layout::FR_BYTES;
use crate::device::pinned::{HostRegistration, PinnedBuf};
use crate::device::upload::PinnedUpload;
use crate::device::Device;
use crate::error::{drv, GpuError, Result};
use crate::ops::classify::{
    batch_add_acc_enqueue, batch_add_enqueue, batch_parts, batch_reduce_enqueue, classify,
    gather_enqueue, Classified,
};
use crate::ops::msm::{
    msm_accumulate_enqueue, msm_enqueue_into, msm_window_sums_enqueue, Group, MsmInput, Shape,
};

/// [`enqueue_streamed`] from registered host memory: chunk j is copied into device buffer
/// j % 2 once the sum of chunk j − 2 has read it (a stream wait, not a host one), and its
/// sum waits for that copy. The upload scope returns once the last copies are done.
#[allow(clippy::too_many_arguments)]
fn enqueue_registered<'h>(
    dev: &Device,
    sb: &mut StreamBufs<'_>,
    sum: &SumPlan,
    reg: &HostRegistration,
    part: &dyn Fn(usize) -> (usize, usize),
    bytes: &dyn Fn(usize) -> &'h [u8],
    scalars: &DevRegion<'_>,
    results: &Outputs<'_>,
) -> Result<()> {
    let copied = [dev.timing_event()?, dev.timing_event()?];
    dev.upload_scope(|up| -> Result<()> {
        for j in 0..sum.chunks {
            let k = j % 2;
            if sb.used[k] {
                dev.copy_wait(&sb.consumed[k])?;
            }
            let src = bytes(j);
            for (off, piece) in reg.split(src) {
                up.upload(&sb.device[k].slice(off, piece.len())?, piece)?;
            }
            up.record(&copied[k])?;
            dev.wait_on(&copied[k])?;
            let (b, e) = part(j);
            let sc = scalars.slice(b * FR_BYTES, (e - b) * FR_BYTES)?;
            let out = OutRegions::of(results, sum, j)?;
            enqueue_chunk(dev, &sb.scratch, sum, &sb.device[k], &sc, e - b, &out)?;
            dev.record(&sb.consumed[k])?;
            sb.used[k] = true;
        }
        Ok(())
    })?
}

/// Where a prove's sums leave their results: the results region the prove downloads, and
/// the accumulators of the split sums streamed in several chunks (`None` without any).
#[derive(Clone, Copy)]
pub struct Outputs<'a> {
    /// The results region.
    pub results: DevRegion<'a>,
    /// The plan's accumulators.
    pub accs: Option<DevRegion<'a>>,
}

/// The device regions of one chunk's results (see [`ChunkOut`]).
pub struct OutRegions<'a> {
    /// Window sums of the MSM.
    pub windows: DevRegion<'a>,
    /// The batch addition of the ones (split sums).
    pub ones: DevRegion<'a>,
    /// The two classification counts (split sums).
    pub counts: DevRegion<'a>,
    /// A sum's accumulators when streamed in several chunks with them (the window sums and
    /// a split sum's ones' sum are then its chunk 0's, written after its last chunk).
    pub acc: Option<AccRegions<'a>>,
}

/// The accumulators of a sum streamed in several chunks.
pub struct AccRegions<'a> {
    /// A split sum's ones' partial sums ([`batch_parts`] XYZZ points; empty for H).
    pub parts: DevRegion<'a>,
    /// The buckets of the MSM (a split sum's others').
    pub buckets: DevRegion<'a>,
    /// Whether this chunk is the last: then the accumulators are reduced into the windows
    /// and the ones' sum.
    pub last: bool,
}

impl<'a> OutRegions<'a> {
    /// Chunk `o`'s regions inside the results region `results`.
    ///
    /// # Errors
    /// [`GpuError::Input`] if they do not fit.
    pub fn at(results: &DevRegion<'a>, o: ChunkOut) -> Result<OutRegions<'a>> {
        Ok(OutRegions {
            windows: o.windows.within(results)?,
            ones: o.ones.within(results)?,
            counts: o.counts.within(results)?,
            acc: None,
        })
    }

    /// The regions of chunk `j` of `sum`: its own, or with accumulators chunk 0's window
    /// sums and ones' sum, its own counts, and the accumulators.
    ///
    /// # Errors
    /// [`GpuError::Input`] if they do not fit, or the plan has accumulators and `out` none.
    pub fn of(out: &Outputs<'a>, sum: &SumPlan, j: usize) -> Result<OutRegions<'a>> {
        let own = OutRegions::at(&out.results, sum.chunk_out(j))?;
        if sum.acc.is_none() {
            return Ok(own);
        }
        let accs = out
            .accs
            .ok_or_else(|| GpuError::Internal("a plan with accumulators and none given".into()))?;
        let (parts, buckets) = sum
            .acc_regions(&accs)?
            .ok_or_else(|| GpuError::Internal("accumulators missing".into()))?;
        let first = OutRegions::at(&out.results, sum.chunk_out(0))?;
        Ok(OutRegions {
            windows: first.windows,
            ones: first.ones,
            counts: own.counts,
            acc: Some(AccRegions {
                parts,
                buckets,
                last: j + 1 == sum.chunks,
            }),
        })
    }
}

/// Enqueues one chunk of `sum`: the `len` bases at `bases` against the scalars at
/// `scalars`, in `scratch`, its results into `out`.
///
/// # Errors
/// Arena (a scratch smaller than the plan's), input or driver errors.
pub fn enqueue_chunk(
    dev: &Device,
    scratch: &DevRegion<'_>,
    sum: &SumPlan,
    bases: &DevRegion<'_>,
    scalars: &DevRegion<'_>,
    len: usize,
    out: &OutRegions<'_>,
) -> Result<()> {
    let scratch = Scratch::within(scratch);
    if !sum.split {
        let input = MsmInput {
            bases,
            base_idx: None,
            scalars,
            n: len,
            count: None,
        };
        let (g, shape) = (sum.group, sum.shape());
        let Some(acc) = &out.acc else {
            return msm_enqueue_into(dev, &scratch, g, &shape, &input, &out.windows);
        };
        // Streamed H with its buckets kept across chunks: summed after the last.
        msm_accumulate_enqueue(dev, &scratch, g, &shape, &input, &acc.buckets)?;
        if acc.last {
            msm_window_sums_enqueue(dev, &scratch, g, &shape, &acc.buckets, &out.windows)?;
        }
        return Ok(());
    }
    let split = Split {
        group: sum.group,
        c: sum.c,
        packed: sum.packed,
    };
    match &out.acc {
        None => split.enqueue(dev, &scratch, bases, scalars, len, out),
        Some(acc) => split.enqueue_acc(dev, &scratch, bases, scalars, len, out, acc),
    }
}

/// A split sum's parameters: group, the others' window width, packed or indexed others.
pub struct Split {
    /// The group.
    pub group: Group,
    /// The others' window width.
    pub c: u32,
    /// Whether the others' bases are packed densely first (the MSM then gathers from
    /// n_others points instead of from the whole query through the index list, ~6x faster
    /// per addition at 2^22).
    pub packed: bool,
}

impl Split {
    /// Enqueues classification, the ones' batch addition and the others' MSM over the n
    /// bases and scalars, in the order and sizes the plan measured (`plan.rs`).
    ///
    /// # Errors
    /// Arena, input or driver errors.
    pub fn enqueue(
        &self,
        dev: &Device,
        scratch: &Scratch<'_>,
        bases: &DevRegion<'_>,
        scalars: &DevRegion<'_>,
        n: usize,
        out: &OutRegions<'_>,
    ) -> Result<()> {
        let g = self.group;
        let cls = classify(dev, scratch, scalars, n, &out.counts)?;
        let ones = cls.ones()?;
        let one_idx = cls.one_idx;
        batch_add_enqueue(
            dev,
            scratch,
            g,
            bases,
            Some(&one_idx),
            n,
            Some(&ones),
            &out.ones,
        )?;
        if n == 0 {
            // No others: every window sum is the point at infinity (Z = 0).
            return dev.memset_zero(&out.windows);
        }
        self.others(dev, scratch, bases, &cls, |input| {
            msm_enqueue_into(dev, scratch, g, &Shape::plain(self.c), input, &out.windows)
        })
    }

    /// [`Split::enqueue`] for one chunk of a sum streamed in several: the ones and the
    /// others' bucket sums are added to the accumulators `acc`, and after the last chunk
    /// reduced into the window sums and the ones' sum of `out`.
    ///
    /// # Errors
    /// Arena, input or driver errors.
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_acc(
        &self,
        dev: &Device,
        scratch: &Scratch<'_>,
        bases: &DevRegion<'_>,
        scalars: &DevRegion<'_>,
        n: usize,
        out: &OutRegions<'_>,
        acc: &AccRegions<'_>,
    ) -> Result<()> {
        let g = self.group;
        let shape = Shape::plain(self.c);
        let cls = classify(dev, scratch, scalars, n, &out.counts)?;
        let (ones, parts) = (cls.ones()?, batch_parts(g));
        let one_idx = Some(&cls.one_idx);
        batch_add_acc_enqueue(dev, g, bases, one_idx, n, Some(&ones), &acc.parts, parts)?;
        if n > 0 {
            self.others(dev, scratch, bases, &cls, |input| {
                msm_accumulate_enqueue(dev, scratch, g, &shape, input, &acc.buckets)
            })?;
        }
        if acc.last {
            batch_reduce_enqueue(dev, scratch, g, &acc.parts, parts, &out.ones)?;
            msm_window_sums_enqueue(dev, scratch, g, &shape, &acc.buckets, &out.windows)?;
        }
        Ok(())
    }

    /// Calls `msm` with the MSM input of the others of `cls` (at most its n): over their
    /// packed bases, or through their indices into `bases`.
    fn others(
        &self,
        dev: &Device,
        scratch: &Scratch<'_>,
        bases: &DevRegion<'_>,
        cls: &Classified<'_>,
        msm: impl FnOnce(&MsmInput<'_>) -> Result<()>,
    ) -> Result<()> {
        let (g, n) = (self.group, cls.n);
        let others = cls.others()?;
        let dense;
        let (bases, base_idx) = if self.packed {
            dense = scratch.alloc(n.max(1) * g.affine_bytes())?;
            gather_enqueue(dev, g, bases, &cls.other_idx, n, Some(&others), &dense)?;
            (&dense, None)
        } else {
            (bases, Some(&cls.other_idx))
        };
        let input = MsmInput {
            bases,
            base_idx,
            scalars: &cls.other_scalars,
            n,
            count: Some(&others),
        };
        msm(&input)
    }
}

/// What streaming needs: two device chunk buffers, two pinned staging buffers of the same
/// size (taken while a sum runs, put back after), the events that say when the sum of the
/// chunk last in a device buffer has read it, and the scratch for one chunk's sum.
pub struct StreamBufs<'a> {
    /// Device buffers chunks land in.
    pub device: [DevRegion<'a>; 2],
    /// Pinned staging the host copies chunks into.
    pub pinned: [Option<PinnedBuf>; 2],
    /// Recorded on the compute stream after each chunk's sum (`used`: ever recorded).
    pub consumed: [CudaEvent; 2],
    /// Whether `consumed[k]` has been recorded.
    pub used: [bool; 2],
    /// Scratch for one chunk's sum.
    pub scratch: DevRegion<'a>,
}

/// Where a streamed sum's bases are on the host: blst affine points in memory (copied
/// straight from it when registered, else through pinned bounce buffers), or in the
/// parameters file (read and decoded into the bounce buffers chunk by chunk).
#[derive(Clone, Copy)]
pub enum HostPoints<'a> {
    /// Points in host memory, as bytes.
    Memory(&'a [u8]),
    /// Query `.1` of the parameters file `.0`.
    File(&'a SrsFile, SrsQuery),
}

impl HostPoints<'_> {
    /// Points there, of `pb` bytes each.
    fn points(&self, pb: usize) -> usize {
        match self {
            HostPoints::Memory(m) => m.len() / pb,
            HostPoints::File(f, q) => f.len(*q),
        }
    }

    /// Points `first..` into `dst` (a whole number of `pb`-byte points), in memory layout.
    fn read(&self, first: usize, dst: &mut [u8], pb: usize) -> Result<()> {
        match self {
            HostPoints::Memory(m) => {
                copy_parallel(dst, &m[first * pb..first * pb + dst.len()]);
                Ok(())
            }
            HostPoints::File(f, q) => f
                .read_into(*q, first, dst)
                .map_err(|e| GpuError::SrsFile(e.to_string())),
        }
    }
}

/// Enqueues `sum` with its bases in host memory (`host`, blst affine points) and the
/// scalars on the device, its chunks' results into `results` at the plan's offsets. With
/// `host` registered (`reg`), each chunk is copied straight from it on the copy stream,
/// after the sum that last read its device buffer, and everything is enqueued without a
/// host wait until the last copies. Otherwise chunk j + 1 is uploaded on the copy stream,
/// and chunk j + 2 copied into pinned staging on the host, while chunk j is summed on the
/// compute stream; the host waits only for uploads (a pinned buffer is refilled once its
/// copy is done), never for a sum.
///
/// # Errors
/// [`GpuError::Input`] for buffers too small; arena or driver errors. Every upload is done
/// when this returns, also on errors.
pub fn enqueue_streamed(
    dev: &Device,
    sb: &mut StreamBufs<'_>,
    sum: &SumPlan,
    host: HostPoints<'_>,
    reg: Option<&HostRegistration>,
    scalars: &DevRegion<'_>,
    results: &Outputs<'_>,
) -> Result<()> {
    let (pb, chunk, n) = (sum.group.affine_bytes(), sum.chunk, sum.n);
    if host.points(pb) < n || scalars.bytes() < n * FR_BYTES {
        return Err(GpuError::Input(format!(
            "{n} streamed points: {} host points, {} scalar bytes",
            host.points(pb),
            scalars.bytes()
        )));
    }
    if sb.device.iter().any(|d| d.bytes() < chunk * pb) {
        return Err(GpuError::Input(format!(
            "streaming chunk of {chunk} points does not fit its buffers"
        )));
    }
    if sum.chunks == 0 {
        return Ok(());
    }
    let part = |j: usize| (j * chunk, ((j + 1) * chunk).min(n));
    let len = |j: usize| {
        let (b, e) = part(j);
        (e - b) * pb
    };
    if let (Some(reg), HostPoints::Memory(mem)) = (reg, host) {
        let bytes = |j: usize| {
            let (b, e) = part(j);
            &mem[b * pb..e * pb]
        };
        return enqueue_registered(dev, sb, sum, reg, &part, &bytes, scalars, results);
    }
    let mut pins = [sb.pinned[0].take(), sb.pinned[1].take()];
    let mut flight: [Option<PinnedUpload>; 2] = [None, None];
    let r = (|| -> Result<()> {
        let fill = |pin: &mut Option<PinnedBuf>, j: usize| -> Result<()> {
            let buf = pin
                .as_mut()
                .ok_or_else(|| GpuError::Internal("stream staging missing".into()))?;
            let dst = buf.as_mut_slice()?;
            if dst.len() < len(j) {
                return Err(GpuError::Input(
                    "pinned staging smaller than a chunk".into(),
                ));
            }
            host.read(part(j).0, &mut dst[..len(j)], pb)
        };
        // Chunk j into device buffer j % 2, after the sum that last read that buffer.
        let send = |j: usize,
                    pins: &mut [Option<PinnedBuf>; 2],
                    flight: &mut [Option<PinnedUpload>; 2],
                    used: &[bool; 2]|
         -> Result<()> {
            let k = j % 2;
            if used[k] {
                drv(
                    dev.ordinal(),
                    || "copy waits for the chunk's reader".into(),
                    dev.copy_stream().wait(&sb.consumed[k]),
                )?;
            }
            let buf = pins[k]
                .take()
                .ok_or_else(|| GpuError::Internal("stream staging missing".into()))?;
            flight[k] = Some(dev.upload_pinned(&sb.device[k], buf, len(j))?);
            Ok(())
        };
        fill(&mut pins[0], 0)?;
        send(0, &mut pins, &mut flight, &sb.used)?;
        if sum.chunks > 1 {
            fill(&mut pins[1], 1)?;
        }
        for j in 0..sum.chunks {
            let k = j % 2;
            if j + 1 < sum.chunks {
                send(j + 1, &mut pins, &mut flight, &sb.used)?;
            }
            let up = flight[k]
                .as_ref()
                .ok_or_else(|| GpuError::Internal("chunk upload missing".into()))?;
            dev.wait_on(up.event())?;
            let (b, e) = part(j);
            let sc = scalars.slice(b * FR_BYTES, (e - b) * FR_BYTES)?;
            let out = OutRegions::of(results, sum, j)?;
            enqueue_chunk(dev, &sb.scratch, sum, &sb.device[k], &sc, e - b, &out)?;
            dev.record(&sb.consumed[k])?;
            sb.used[k] = true;
            // Chunk j's copy is done once this returns; its staging takes chunk j + 2
            // while the device sums chunk j.
            if let Some(up) = flight[k].take() {
                pins[k] = Some(up.wait()?);
            }
            if j + 2 < sum.chunks {
                fill(&mut pins[k], j + 2)?;
            }
        }
        Ok(())
    })();
    // Uploads still in flight (after an error) are waited for here, and their buffers
    // come back; a buffer lost to a failed wait is re-made by the next prove.
    for (k, f) in flight.iter_mut().enumerate() {
        if let Some(up) = f.take() {
            pins[k] = up.wait().ok();
        }
    }
    sb.pinned = pins;
    r
}
