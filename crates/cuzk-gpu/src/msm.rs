//! Pippenger MSM on the device for G1 and G2 ([`msm_g1`], [`msm_g2`]): the host sequence
//! of the phases in `kernels/msm.cu` (canonical scalars, bucket histogram, counting sort,
//! bucket accumulation, per-window running sums, reductions, Horner combine). Bases are
//! device-resident (an arena region holding blst affine points, optionally addressed through
//! an index list); [`msm_streamed_g1`] / [`msm_streamed_g2`] stream them from host memory
//! in chunks instead.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective};
use group::Group as _;

use crate::arena::{DevRegion, Scratch};
use crate::device::launch;
use crate::device::{Device, PhaseTimer};
use crate::error::{drv, GpuError, Result};
use crate::kernels::KernelId;
use crate::layout::{self, FR_BYTES};

/// Which group an MSM runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// G1 over Fp.
    G1,
    /// G2 over Fp2.
    G2,
}

impl Group {
    /// Bytes of an affine base.
    pub fn affine_bytes(self) -> usize {
        match self {
            Group::G1 => layout::G1_AFFINE_BYTES,
            Group::G2 => layout::G2_AFFINE_BYTES,
        }
    }
    /// Bytes of an XYZZ bucket.
    pub fn xyzz_bytes(self) -> usize {
        4 * self.affine_bytes() / 2
    }
    /// Bytes of a Jacobian result.
    pub fn jacobian_bytes(self) -> usize {
        match self {
            Group::G1 => layout::G1_JACOBIAN_BYTES,
            Group::G2 => layout::G2_JACOBIAN_BYTES,
        }
    }
    /// The `{op}_{group}` kernel name.
    pub(crate) fn kernel(self, op: &str) -> Result<&'static str> {
        Ok(match (op, self) {
            ("msm_accumulate", Group::G1) => "msm_accumulate_g1",
            ("msm_accumulate", Group::G2) => "msm_accumulate_g2",
            ("msm_segments", Group::G1) => "msm_segments_g1",
            ("msm_segments", Group::G2) => "msm_segments_g2",
            ("sum_groups", Group::G1) => "sum_groups_g1",
            ("sum_groups", Group::G2) => "sum_groups_g2",
            ("msm_combine", Group::G1) => "msm_combine_g1",
            ("msm_combine", Group::G2) => "msm_combine_g2",
            ("to_jacobian", Group::G1) => "to_jacobian_g1",
            ("to_jacobian", Group::G2) => "to_jacobian_g2",
            ("batch_add", Group::G1) => "batch_add_g1",
            ("batch_add", Group::G2) => "batch_add_g2",
            _ => return Err(GpuError::Input(format!("no kernel {op} for {self:?}"))),
        })
    }
    /// Threads per block for point kernels: G2 uses about twice the registers.
    pub(crate) fn block(self) -> u32 {
        match self {
            Group::G1 => 128,
            Group::G2 => 64,
        }
    }
}

/// Window size in bits for n points: 16 (or 8 below 2^12 points), the sizes that divide
/// 256. With ceil(256 / c) windows of c bits the top window of a 255-bit scalar holds only
/// 255 mod c random bits, so its few buckets collect n / 2^(255 mod c) points each and the
/// one thread per bucket serializes them: with c = 11 at 2^16 points the accumulation took
/// 670 ms instead of ~2 ms (docs/benchmarks.md, cuzk-gpu run 2). With c | 256 every window,
/// the top one included, spreads its digits over all 2^(c−1) buckets.
pub fn window_bits(n: usize) -> u32 {
    if n < (1 << 12) {
        8
    } else {
        16
    }
}

/// Buckets of one window are summed in runs of this many by one thread.
const SEG: u32 = 16;
/// Reduction factor of one `sum_groups` launch.
const REDUCE_K: u32 = 16;

struct Shape {
    c: u32,
    nwin: u32,
    nb: u32,
}

impl Shape {
    fn new(n: usize) -> Shape {
        let c = window_bits(n);
        Shape {
            c,
            nwin: 256u32.div_ceil(c),
            nb: 1 << (c - 1),
        }
    }
    fn buckets(&self) -> usize {
        self.nwin as usize * self.nb as usize
    }
    fn nseg(&self) -> u32 {
        self.nb / SEG.min(self.nb)
    }
}

/// Scratch bytes an MSM of n points in `group` needs.
pub fn scratch_bytes(group: Group, n: usize) -> usize {
    let s = Shape::new(n);
    let m = s.buckets();
    let a = crate::arena::ALIGN;
    n * FR_BYTES
        + a
        + 3 * (m + 1) * 4
        + 3 * a
        + n * s.nwin as usize * 4
        + a
        + m * group.xyzz_bytes()
        + a
        + 2 * s.nwin as usize * s.nseg() as usize * group.xyzz_bytes()
        + 2 * a
        + 32 * group.jacobian_bytes()
        + a
}

/// An enqueued MSM: the per-window sums W_w (Jacobian, on the device) of Σ s_i·P_i =
/// Σ_w 2^(c·w)·W_w. The Horner combination runs on the CPU ([`MsmOut::finish_g1`]): 256
/// doublings are ~0.1 ms with blst but ~6 ms in one GPU thread.
#[derive(Clone, Copy, Debug)]
pub struct MsmOut<'s> {
    /// nwin Jacobian points.
    pub windows: DevRegion<'s>,
    /// Number of windows.
    pub nwin: u32,
    /// Window width in bits.
    pub c: u32,
}

impl MsmOut<'_> {
    /// Bytes to download: the window sums.
    pub fn bytes(&self, group: Group) -> usize {
        self.nwin as usize * group.jacobian_bytes()
    }

    /// Σ_w 2^(c·w)·W_w from the downloaded G1 window sums.
    pub fn finish_g1(c: u32, raw: &[u8]) -> G1Projective {
        let mut acc = G1Projective::identity();
        for w in raw.chunks_exact(layout::G1_JACOBIAN_BYTES).rev() {
            for _ in 0..c {
                acc = acc.double();
            }
            acc += layout::g1_from_jacobian(w);
        }
        acc
    }

    /// Σ_w 2^(c·w)·W_w from the downloaded G2 window sums.
    pub fn finish_g2(c: u32, raw: &[u8]) -> G2Projective {
        let mut acc = G2Projective::identity();
        for w in raw.chunks_exact(layout::G2_JACOBIAN_BYTES).rev() {
            for _ in 0..c {
                acc = acc.double();
            }
            acc += layout::g2_from_jacobian(w);
        }
        acc
    }

    /// Downloads the window sums (waits for the compute stream).
    ///
    /// # Errors
    /// Driver errors.
    pub fn download(&self, dev: &Device, group: Group) -> Result<Vec<u8>> {
        let mut b = vec![0u8; self.bytes(group)];
        dev.download(&mut b, &self.windows)?;
        Ok(b)
    }
}

/// `Σ scalars[i] · bases[idx(i)]` in G1 for i < n, with `idx(i) = base_idx[i]` when given,
/// else i. Scalars are blst Montgomery Fr, bases blst affine points, both on the device.
///
/// # Errors
/// [`GpuError::Input`] when a region is too small; arena or driver errors.
pub fn msm_g1(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &DevRegion<'_>,
    base_idx: Option<&DevRegion<'_>>,
    scalars: &DevRegion<'_>,
    n: usize,
) -> Result<G1Projective> {
    if n == 0 {
        return Ok(G1Projective::identity());
    }
    let out = msm_enqueue(dev, scratch, Group::G1, bases, base_idx, scalars, n)?;
    Ok(MsmOut::finish_g1(out.c, &out.download(dev, Group::G1)?))
}

/// As [`msm_g1`] in G2.
///
/// # Errors
/// As [`msm_g1`].
pub fn msm_g2(
    dev: &Device,
    scratch: &Scratch<'_>,
    bases: &DevRegion<'_>,
    base_idx: Option<&DevRegion<'_>>,
    scalars: &DevRegion<'_>,
    n: usize,
) -> Result<G2Projective> {
    if n == 0 {
        return Ok(G2Projective::identity());
    }
    let out = msm_enqueue(dev, scratch, Group::G2, bases, base_idx, scalars, n)?;
    Ok(MsmOut::finish_g2(out.c, &out.download(dev, Group::G2)?))
}

/// Enqueues an MSM on the compute stream; the Jacobian window sums land in the returned
/// region (nothing waits). n must be at least 1.
///
/// # Errors
/// As [`msm_g1`].
pub fn msm_enqueue<'s>(
    dev: &Device,
    scratch: &'s Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    base_idx: Option<&DevRegion<'_>>,
    scalars: &DevRegion<'_>,
    n: usize,
) -> Result<MsmOut<'s>> {
    if n == 0 || n > (1usize << 31) - 1 {
        return Err(GpuError::Input(format!("msm of {n} points")));
    }
    if scalars.bytes() < n * FR_BYTES {
        return Err(GpuError::Input(format!(
            "{n} scalars need {} bytes, region has {}",
            n * FR_BYTES,
            scalars.bytes()
        )));
    }
    match base_idx {
        Some(ix) if ix.bytes() < n * 4 => {
            return Err(GpuError::Input(format!(
                "{n} base indices need {} bytes, region has {}",
                n * 4,
                ix.bytes()
            )));
        }
        None if bases.bytes() < n * group.affine_bytes() => {
            return Err(GpuError::Input(format!(
                "{n} bases need {} bytes, region has {}",
                n * group.affine_bytes(),
                bases.bytes()
            )));
        }
        _ => {}
    }
    let s = Shape::new(n);
    let m = s.buckets();
    if (n as u64) * (s.nwin as u64) >= u32::MAX as u64 {
        return Err(GpuError::Input(format!(
            "msm of {n} points exceeds the 32-bit sort index"
        )));
    }
    let n32 = n as u32;
    let m32 = m as u32;

    let canon = scratch.alloc(n * FR_BYTES)?;
    let counts = scratch.alloc(m * 4)?;
    let starts = scratch.alloc((m + 1) * 4)?;
    let cursor = scratch.alloc(m * 4)?;
    let sorted = scratch.alloc(n * s.nwin as usize * 4)?;
    let buckets = scratch.alloc(m * group.xyzz_bytes())?;
    let nseg = s.nseg();
    let part_len = s.nwin as usize * nseg as usize * group.xyzz_bytes();
    let part_a = scratch.alloc(part_len)?;
    let part_b = scratch.alloc(part_len)?;
    let out = scratch.alloc(s.nwin as usize * group.jacobian_bytes())?;
    let mut prof = PhaseTimer::start(dev, || format!("msm {group:?} n={n} c={}", s.c))?;
    let mut mark = |name: &'static str| -> Result<()> {
        match prof.as_mut() {
            Some(p) => p.mark(name),
            None => Ok(()),
        }
    };
    dev.memset_zero(&counts)?;

    // SAFETY (every launch! below): the arguments follow each kernel's parameter list in
    // msm.cu; canon holds n scalars, counts/cursor m and starts m + 1 words, sorted
    // n * nwin entries, buckets m points, part_a/part_b nwin * nseg points; grids cover n,
    // m or nwin * nseg threads and every kernel checks its index against those bounds.
    let (sc, cn) = (scalars.ptr(), canon.ptr());
    launch!(
        dev,
        KernelId::Msm,
        "msm_scalars_canonical",
        Device::grid(n as u64, 256),
        &sc,
        &cn,
        &n32
    )?;
    mark("canonical")?;
    let (c, nwin, cnt) = (s.c, s.nwin, counts.ptr());
    launch!(
        dev,
        KernelId::Msm,
        "msm_histogram",
        Device::grid(n as u64, 256),
        &cn,
        &n32,
        &c,
        &nwin,
        &cnt
    )?;
    mark("histogram")?;
    let (st, cu) = (starts.ptr(), cursor.ptr());
    let one_block = cudarc::driver::LaunchConfig {
        grid_dim: (1, 1, 1),
        block_dim: (1024, 1, 1),
        shared_mem_bytes: 0,
    };
    launch!(
        dev,
        KernelId::Msm,
        "scan_exclusive_u32",
        one_block,
        &cnt,
        &st,
        &cu,
        &m32
    )?;
    mark("scan")?;
    let so = sorted.ptr();
    launch!(
        dev,
        KernelId::Msm,
        "msm_scatter",
        Device::grid(n as u64, 256),
        &cn,
        &n32,
        &c,
        &nwin,
        &cu,
        &so
    )?;
    mark("scatter")?;
    let (bp, ip, bk) = (
        bases.ptr(),
        base_idx.map_or(0u64, |r| r.ptr()),
        buckets.ptr(),
    );
    launch!(
        dev,
        KernelId::Msm,
        group.kernel("msm_accumulate")?,
        Device::grid(m as u64, group.block()),
        &bp,
        &ip,
        &so,
        &st,
        &m32,
        &bk
    )?;
    mark("accumulate")?;
    let (nb, seg, pa) = (s.nb, SEG.min(s.nb), part_a.ptr());
    launch!(
        dev,
        KernelId::Msm,
        group.kernel("msm_segments")?,
        Device::grid(nwin as u64 * nseg as u64, group.block()),
        &bk,
        &nb,
        &nwin,
        &seg,
        &pa
    )?;
    mark("segments")?;
    let (mut src, mut dst) = (part_a.ptr(), part_b.ptr());
    let mut len = nseg;
    while len > 1 {
        let k = REDUCE_K.min(len);
        let out_len = len.div_ceil(k);
        let (i, o) = (src, dst);
        launch!(
            dev,
            KernelId::Msm,
            group.kernel("sum_groups")?,
            Device::grid(nwin as u64 * out_len as u64, group.block()),
            &i,
            &nwin,
            &len,
            &k,
            &o
        )?;
        std::mem::swap(&mut src, &mut dst);
        len = out_len;
    }
    mark("reduce")?;
    let op = out.ptr();
    launch!(
        dev,
        KernelId::Msm,
        group.kernel("to_jacobian")?,
        Device::grid(nwin as u64, 32),
        &src,
        &op,
        &nwin
    )?;
    mark("to_jacobian")?;
    if let Some(p) = prof {
        p.report()?;
    }
    Ok(MsmOut {
        windows: out,
        nwin,
        c,
    })
}

/// `Σ scalars[i] · bases[i]` in G1 with the bases streamed from host memory in chunks of
/// `chunk` points through two device buffers (upload of chunk j+1 on the copy stream
/// overlaps the MSM of chunk j on the compute stream). Scalars are device-resident.
///
/// # Errors
/// As [`msm_g1`].
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
/// As [`msm_g1`].
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
    let ctx = dev.context();
    drv(ord, || "bind context".into(), ctx.bind_to_thread())?;
    let uploaded = [dev.timing_event()?, dev.timing_event()?];
    let consumed = [dev.timing_event()?, dev.timing_event()?];
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
        let src = &host[b * ab..e * ab];
        // SAFETY: buf[slot] holds chunk * ab >= src.len() bytes; `host` outlives this
        // function, which synchronizes the compute stream (after the copy stream's events)
        // before returning.
        let r = unsafe {
            cudarc::driver::result::memcpy_htod_async(
                buf[slot].ptr(),
                src,
                dev.copy_stream().cu_stream(),
            )
        };
        drv(ord, || format!("upload chunk {j}"), r)?;
        drv(
            ord,
            || "record uploaded".into(),
            uploaded[slot].record(dev.copy_stream()),
        )?;
        drv(
            ord,
            || "wait uploaded".into(),
            dev.compute_stream().wait(&uploaded[slot]),
        )?;
        let sub = Scratch::within(&msm_scratch);
        let sc = scalars.slice(b * FR_BYTES, (e - b) * FR_BYTES)?;
        let out = msm_enqueue(dev, &sub, group, &buf[slot], None, &sc, e - b)?;
        let wb = out.bytes(group);
        let dst = results.slice(j * slot_bytes, wb)?;
        shapes.push((out.c, wb));
        // SAFETY: both regions are live device memory of at least wb bytes.
        let r = unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst.ptr(),
                out.windows.ptr(),
                wb,
                dev.compute_stream().cu_stream(),
            )
        };
        drv(ord, || "copy chunk result".into(), r)?;
        dev.record(&consumed[slot])?;
    }
    let mut raw = vec![0u8; nchunks * slot_bytes];
    dev.download(&mut raw, &results)?;
    Ok(shapes
        .iter()
        .enumerate()
        .map(|(j, &(c, wb))| (c, raw[j * slot_bytes..j * slot_bytes + wb].to_vec()))
        .collect())
}
