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
            ("msm_fixup", Group::G1) => "msm_fixup_g1",
            ("msm_fixup", Group::G2) => "msm_fixup_g2",
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

/// Window size in bits for n points: the c in 8..=20 that minimises the modelled cost
/// ceil(256 / c) · (n + 3 · 2^(c−1)) — per window, n bucket additions plus the running sums
/// over its 2^(c−1) buckets (about three mixed additions' worth per bucket). That is c = 16
/// from ~2^12 to ~2^22 points and c = 20 for the dense 2^24+ H query (13 windows instead of
/// 16). Any c works: with ceil(256 / c) windows the top one holds only 256 mod c bits of a
/// 255-bit scalar, so its few buckets take many points each, which the load-balanced
/// accumulation spreads over threads (one thread per bucket serialized them: 670 ms instead
/// of ~2 ms at 2^16 points with c = 11, docs/benchmarks.md). `CUZK_GPU_MSM_C` (8..=20)
/// forces one c for every MSM, to benchmark window sizes.
pub fn window_bits(n: usize) -> u32 {
    static FORCED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    let forced = *FORCED.get_or_init(|| {
        std::env::var("CUZK_GPU_MSM_C")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|c| (8..=20).contains(c))
    });
    forced.unwrap_or_else(|| {
        (8u32..=20)
            .min_by_key(|&c| 256u64.div_ceil(c as u64) * (n as u64 + (3u64 << (c - 1))))
            .unwrap_or(16)
    })
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
/// Reduction factor of one `sum_groups` launch.
const REDUCE_K: u32 = 16;

/// Output positions per thread of a pair round (`pair.cu`): one batch of that many
/// denominators per thread.
const PAIR_G: u32 = 32;
/// Thread totals inverted per thread by `pair_invert` (one inversion each).
const PAIR_G2: u32 = 32;
/// Sorted entries of one group of windows taken through the pair rounds together: bounds
/// their scratch at about 100 bytes per entry (the first two rounds' output points and the
/// prefix products), ~3.4 GB.
const PAIR_GROUP_ENTRIES: usize = 1 << 25;
/// Bytes of an Fp element (a pair round's denominators and their products).
const FP_BYTES: usize = layout::G1_AFFINE_BYTES / 2;

/// Fewest points for which G1 MSMs run pair rounds by default, and the most rounds they
/// run: on an H200 two rounds took a 2^24 MSM from 271 to 253 ms and a 2^22 one from 76 to
/// 72 ms, while four rounds lost at 2^24 (275 ms) and at 2^20 (28 against 24 ms): each
/// round's inversion launch costs ~0.8 ms whatever its size, and an affine pair addition
/// there runs at ~0.67 ns against ~0.9 ns for a mixed XYZZ addition, so only the rounds
/// with many pairs pay (docs/benchmarks.md).
const PAIR_MIN_N: usize = 1 << 21;
const PAIR_MAX_ROUNDS: u32 = 2;

/// `CUZK_GPU_MSM_PAIR=k`: exactly min(k, what the bucket sizes allow) pair rounds for every
/// G1 MSM, whatever its size (0: none), to benchmark round counts and to take small MSMs
/// through the rounds in the device checks. Unset: the default policy above.
fn pair_rounds_forced() -> Option<u32> {
    static FORCED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| {
        std::env::var("CUZK_GPU_MSM_PAIR")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// The batch-affine pair rounds of one G1 MSM (`pair.cu`): each round halves every bucket's
/// run of points with affine additions (about 6 products each against the XYZZ mixed
/// addition's 10), windows in groups of `wg`; the XYZZ accumulation then sums what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PairPlan {
    rounds: u32,
    wg: u32,
}

impl PairPlan {
    /// Output bounds of each round for a group of at most `entries` entries in m buckets: a
    /// run of s points becomes ceil(s / 2), so at most (entries + m) / 2, and never more
    /// than the input.
    fn bounds(&self, entries: usize, m: usize) -> Vec<usize> {
        let mut b = entries;
        (0..self.rounds)
            .map(|_| {
                b = b.min((b + m).div_ceil(2));
                b
            })
            .collect()
    }

    /// Scratch bytes of the rounds and of the groups' accumulation partials.
    fn scratch_bytes(&self, s: &Shape, n: usize, group: Group) -> usize {
        let (entries, m) = (self.wg as usize * n, self.wg as usize * s.nb as usize);
        let b = self.bounds(entries, m);
        let out0 = b.first().copied().unwrap_or(1);
        let out1 = b.get(1).copied().unwrap_or(1);
        let threads0 = out0.div_ceil(PAIR_G as usize);
        let groups = s.nwin.div_ceil(self.wg) as usize;
        let acc_threads = acc_split_total(b.last().copied().unwrap_or(entries)).1;
        let a = crate::arena::ALIGN;
        (out0 + out1) * group.affine_bytes()
            + threads0 * PAIR_G as usize * FP_BYTES
            + threads0 * FP_BYTES
            + threads0.next_multiple_of(PAIR_G2 as usize) * FP_BYTES
            + m * 4
            + 2 * (m + 1) * 4
            + groups * self.rounds as usize * scan_scratch_bytes(m)
            + 2 * acc_threads * group.xyzz_bytes()
            + 10 * a
    }
}

/// Sorted entries per accumulation thread and the thread count for `total` entries.
fn acc_split_total(total: usize) -> (u32, usize) {
    let k = total.div_ceil(ACC_THREADS).max(ACC_MIN_K);
    (k as u32, total.div_ceil(k).max(1))
}

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
    /// Buckets per running-sum thread: a power of two dividing nb.
    fn seg(&self) -> u32 {
        let want = self.buckets().div_ceil(SEG_THREADS).next_power_of_two() as u32;
        want.max(SEG_MIN).min(self.nb)
    }
    fn nseg(&self) -> u32 {
        self.nb / self.seg()
    }
    /// Sorted entries per accumulation thread and the thread count, for at most n · nwin
    /// entries (zero digits make the real count smaller; surplus threads exit).
    fn acc_split(&self, n: usize) -> (u32, usize) {
        acc_split_total(n * self.nwin as usize)
    }
    /// The pair rounds for n points in `group`: G1 only, when the mean bucket holds at least
    /// four points; by default from PAIR_MIN_N points and at most PAIR_MAX_ROUNDS rounds,
    /// never more than would leave about two points per bucket.
    fn pair_plan(&self, group: Group, n: usize) -> Option<PairPlan> {
        let forced = pair_rounds_forced();
        if group != Group::G1 || (forced.is_none() && n < PAIR_MIN_N) {
            return None;
        }
        let mean = n / self.nb as usize;
        if mean < 4 {
            return None;
        }
        let rounds = (mean.ilog2() - 1).min(forced.unwrap_or(PAIR_MAX_ROUNDS));
        (rounds > 0).then(|| PairPlan {
            rounds,
            wg: (PAIR_GROUP_ENTRIES / n).clamp(1, self.nwin as usize) as u32,
        })
    }
}

/// Words per tile of the multi-block scan (its block size).
const SCAN_TILE: usize = 1024;

/// Scratch bytes [`scan_exclusive`] takes for m words.
pub(crate) fn scan_scratch_bytes(m: usize) -> usize {
    2 * (m.div_ceil(SCAN_TILE) + 1) * 4 + 2 * crate::arena::ALIGN
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
    let sums = scratch.alloc(tiles * 4)?;
    let offs = scratch.alloc((tiles + 1) * 4)?;
    let (ip, op, cp, sp, fp) = (
        input.ptr(),
        out.ptr(),
        copy.map_or(0u64, |c| c.ptr()),
        sums.ptr(),
        offs.ptr(),
    );
    let (m32, t32, null) = (m as u32, tiles as u32, 0u64);
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
    // SAFETY (the three launches): scan_tile_sums(const u32* in, u32 m, u32* tile_sums)
    // with `tiles` blocks of 1024 threads (reads below m only); scan_exclusive_u32(in, out,
    // copy, m) over the `tiles` sums into `tiles + 1` offsets, copy null;
    // scan_tile_apply(in, m, tile_offs, out, copy) with `tiles` blocks writes out[0..=m]
    // and copy[0..m) (null copy skipped).
    launch!(
        dev,
        KernelId::Msm,
        "scan_tile_sums",
        tile_grid,
        &ip,
        &m32,
        &sp
    )?;
    launch!(
        dev,
        KernelId::Msm,
        "scan_exclusive_u32",
        one_block,
        &sp,
        &fp,
        &null,
        &t32
    )?;
    launch!(
        dev,
        KernelId::Msm,
        "scan_tile_apply",
        tile_grid,
        &ip,
        &m32,
        &fp,
        &op,
        &cp
    )?;
    Ok(())
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
        + scan_scratch_bytes(m)
        + n * s.nwin as usize * 4
        + a
        + m * group.xyzz_bytes()
        + a
        + 2 * s.acc_split(n).1 * group.xyzz_bytes()
        + 2 * a
        + 2 * s.nwin as usize * s.nseg() as usize * group.xyzz_bytes()
        + 2 * a
        + 32 * group.jacobian_bytes()
        + a
        + s.pair_plan(group, n)
            .map_or(0, |p| p.scratch_bytes(&s, n, group))
}

/// Scratch bytes an MSM of n points needs in whichever group needs more.
pub fn scratch_bytes_any(n: usize) -> usize {
    scratch_bytes(Group::G1, n).max(scratch_bytes(Group::G2, n))
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
    let (acc_k, acc_threads) = s.acc_split(n);
    let first = scratch.alloc(acc_threads * group.xyzz_bytes())?;
    let last = scratch.alloc(acc_threads * group.xyzz_bytes())?;
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
    // n * nwin entries, buckets m points, first/last acc_threads points (acc_threads *
    // acc_k >= n * nwin >= starts[m]), part_a/part_b nwin * nseg points; grids cover n, m,
    // acc_threads or nwin * nseg threads and every kernel checks its index against those
    // bounds.
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
    scan_exclusive(dev, scratch, &counts, &starts, Some(&cursor), m)?;
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
    let (bp, ip, bk, fp, lp) = (
        bases.ptr(),
        base_idx.map_or(0u64, |r| r.ptr()),
        buckets.ptr(),
        first.ptr(),
        last.ptr(),
    );
    if let Some(plan) = s.pair_plan(group, n) {
        let input = PairInput {
            bases: bp,
            base_idx: ip,
            sorted: so,
            starts: st,
        };
        pair_accumulate(dev, scratch, &s, &plan, n, &input, bk, &mut mark)?;
    } else {
        launch!(
            dev,
            KernelId::Msm,
            group.kernel("msm_accumulate")?,
            Device::grid(acc_threads as u64, group.block()),
            &bp,
            &ip,
            &so,
            &st,
            &m32,
            &acc_k,
            &bk,
            &fp,
            &lp
        )?;
        mark("accumulate")?;
        launch!(
            dev,
            KernelId::Msm,
            group.kernel("msm_fixup")?,
            Device::grid(m as u64, group.block()),
            &st,
            &m32,
            &acc_k,
            &fp,
            &lp,
            &bk
        )?;
        mark("fixup")?;
    }
    let (nb, seg, pa) = (s.nb, s.seg(), part_a.ptr());
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

/// Round 0's input of the pair rounds: the MSM's bases, optional index list, sorted
/// entries and bucket starts (device pointers).
struct PairInput {
    bases: u64,
    base_idx: u64,
    sorted: u64,
    starts: u64,
}

/// Enqueues the pair rounds (`pair.cu`) and the XYZZ accumulation of what they leave, one
/// group of `plan.wg` windows at a time, writing every bucket at `buckets` (then as the
/// plain accumulation and fixup leave them: empty buckets infinity).
#[allow(clippy::too_many_arguments)]
fn pair_accumulate(
    dev: &Device,
    scratch: &Scratch<'_>,
    s: &Shape,
    plan: &PairPlan,
    n: usize,
    input: &PairInput,
    buckets: u64,
    mark: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<()> {
    let group = Group::G1;
    let (ab, xb) = (group.affine_bytes(), group.xyzz_bytes());
    let nb = s.nb as usize;
    let m_max = plan.wg as usize * nb;
    let bounds_max = plan.bounds(plan.wg as usize * n, m_max);
    let out0 = bounds_max.first().copied().unwrap_or(1);
    let out1 = bounds_max.get(1).copied().unwrap_or(1);
    let threads0 = out0.div_ceil(PAIR_G as usize);
    let pts = [scratch.alloc(out0 * ab)?, scratch.alloc(out1 * ab)?];
    let pre = scratch.alloc(threads0 * PAIR_G as usize * FP_BYTES)?;
    let tot = scratch.alloc(threads0 * FP_BYTES)?;
    let pre2 = scratch.alloc(threads0.next_multiple_of(PAIR_G2 as usize) * FP_BYTES)?;
    let counts = scratch.alloc(m_max * 4)?;
    let starts = [
        scratch.alloc((m_max + 1) * 4)?,
        scratch.alloc((m_max + 1) * 4)?,
    ];
    let acc_threads_max = acc_split_total(bounds_max.last().copied().unwrap_or(1)).1;
    let first = scratch.alloc(acc_threads_max * xb)?;
    let last = scratch.alloc(acc_threads_max * xb)?;
    let (pre_p, tot_p, pre2_p, cnt_p, fp, lp) = (
        pre.ptr(),
        tot.ptr(),
        pre2.ptr(),
        counts.ptr(),
        first.ptr(),
        last.ptr(),
    );
    let (g, g2, null) = (PAIR_G, PAIR_G2, 0u64);
    let mut w0 = 0u32;
    while w0 < s.nwin {
        let w1 = (w0 + plan.wg).min(s.nwin);
        let m = (w1 - w0) as usize * nb;
        let m32 = m as u32;
        let b0 = w0 as u64 * nb as u64;
        let bounds = plan.bounds((w1 - w0) as usize * n, m);
        // Round 0 reads the sorted entries at the MSM's bucket starts; round r writes
        // pts[r % 2] and starts[r % 2], which round r + 1 reads.
        let mut in_starts = input.starts + 4 * b0;
        let (mut sorted, mut src_pts) = (input.sorted, null);
        for (r, &bound) in bounds.iter().enumerate() {
            let (out_st, out_pts) = (&starts[r % 2], &pts[r % 2]);
            let (os, op) = (out_st.ptr(), out_pts.ptr());
            let threads = bound.div_ceil(PAIR_G as usize);
            let t32 = threads as u32;
            // SAFETY (the four launches and the scan): pair_halve_counts(in_starts, m,
            // counts) reads m + 1 starts of this group and writes m counts (counts holds
            // m_max >= m); out_st receives m + 1 offsets; pair_forward_g1 / pair_backward_g1
            // take (bases, base_idx, sorted, pts, in_starts, out_starts, m, G, threads, ...)
            // with `threads` >= out_starts[m] / G threads (bound >= the real output), pre
            // holding G * threads0 >= G * threads, tot threads0 >= threads values and
            // out_pts `bound` points; pair_invert(tot, threads, G2, pre2) with pre2 holding
            // threads rounded up to G2 values.
            launch!(
                dev,
                KernelId::Pair,
                "pair_halve_counts",
                Device::grid(m as u64, 256),
                &in_starts,
                &m32,
                &cnt_p
            )?;
            scan_exclusive(dev, scratch, &counts, out_st, None, m)?;
            mark("pair_counts")?;
            launch!(
                dev,
                KernelId::Pair,
                "pair_forward_g1",
                Device::grid(threads as u64, 128),
                &input.bases,
                &input.base_idx,
                &sorted,
                &src_pts,
                &in_starts,
                &os,
                &m32,
                &g,
                &t32,
                &pre_p,
                &tot_p
            )?;
            mark("pair_forward")?;
            launch!(
                dev,
                KernelId::Pair,
                "pair_invert",
                Device::grid(threads.div_ceil(PAIR_G2 as usize) as u64, 64),
                &tot_p,
                &t32,
                &g2,
                &pre2_p
            )?;
            mark("pair_invert")?;
            launch!(
                dev,
                KernelId::Pair,
                "pair_backward_g1",
                Device::grid(threads as u64, 128),
                &input.bases,
                &input.base_idx,
                &sorted,
                &src_pts,
                &in_starts,
                &os,
                &m32,
                &g,
                &t32,
                &pre_p,
                &tot_p,
                &op
            )?;
            mark("pair_backward")?;
            in_starts = os;
            sorted = null;
            src_pts = op;
        }
        let (acc_k, acc_threads) = acc_split_total(bounds.last().copied().unwrap_or(1));
        let bk = buckets + b0 * xb as u64;
        // SAFETY: msm_accumulate_g1 over the last round's points in order (base_idx and
        // sorted null), its m + 1 starts, acc_threads * acc_k >= the bound >= starts[m];
        // first/last hold acc_threads_max >= acc_threads points; buckets from b0 on hold
        // this group's m buckets. msm_fixup_g1 likewise over m buckets.
        launch!(
            dev,
            KernelId::Msm,
            "msm_accumulate_g1",
            Device::grid(acc_threads as u64, group.block()),
            &src_pts,
            &null,
            &null,
            &in_starts,
            &m32,
            &acc_k,
            &bk,
            &fp,
            &lp
        )?;
        launch!(
            dev,
            KernelId::Msm,
            "msm_fixup_g1",
            Device::grid(m as u64, group.block()),
            &in_starts,
            &m32,
            &acc_k,
            &fp,
            &lp,
            &bk
        )?;
        mark("accumulate")?;
        w0 = w1;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_follow_the_cost_model() {
        // Unless CUZK_GPU_MSM_C forces one (never set in tests).
        if std::env::var_os("CUZK_GPU_MSM_C").is_some() {
            eprintln!("skipped: CUZK_GPU_MSM_C is set");
            return;
        }
        assert_eq!(window_bits(1), 8);
        assert_eq!(window_bits(1000), 8);
        assert_eq!(window_bits(1 << 20), 16);
        assert_eq!(window_bits(419_915), 16);
        assert_eq!(window_bits(1 << 24), 20);
        assert!((8..=20).contains(&window_bits(usize::MAX >> 8)));
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
            let (k, threads) = s.acc_split(n);
            assert!(k as usize * threads >= n * s.nwin as usize, "n={n}");
            assert!(
                k as usize >= ACC_MIN_K && threads <= ACC_THREADS + 1,
                "n={n}"
            );
        }
    }

    #[test]
    fn pair_plans_bound_every_round() {
        if std::env::var_os("CUZK_GPU_MSM_PAIR").is_some()
            || std::env::var_os("CUZK_GPU_MSM_C").is_some()
        {
            eprintln!("skipped: CUZK_GPU_MSM_PAIR or CUZK_GPU_MSM_C is set");
            return;
        }
        // G2 and sparse MSMs keep the plain accumulation.
        assert_eq!(Shape::new(1 << 24).pair_plan(Group::G2, 1 << 24), None);
        assert_eq!(Shape::new(300).pair_plan(Group::G1, 300), None);
        assert_eq!(Shape::new(1 << 20).pair_plan(Group::G1, 1 << 20), None);
        // Dense 2^24 H (c = 20, 32 points per bucket): 2 rounds, windows two at a time.
        let s = Shape::new(1 << 24);
        assert_eq!(
            s.pair_plan(Group::G1, 1 << 24),
            Some(PairPlan { rounds: 2, wg: 2 })
        );
        // Each round's bound holds the real halved length of any bucket split: bucket
        // sizes from a fixed pseudo-random sequence, some empty, one huge.
        let plan = PairPlan { rounds: 6, wg: 1 };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut sizes: Vec<usize> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 9) as usize
            })
            .collect();
        sizes[17] = 5000;
        let total: usize = sizes.iter().sum();
        for (r, bound) in plan.bounds(total, sizes.len()).into_iter().enumerate() {
            sizes.iter_mut().for_each(|s| *s = s.div_ceil(2));
            let real: usize = sizes.iter().sum();
            assert!(real <= bound, "round {r}: {real} > {bound}");
        }
        for n in [1usize << 21, 1 << 22, 1 << 24, 1 << 27] {
            let s = Shape::new(n);
            let plan = s.pair_plan(Group::G1, n).expect("dense enough for pairs");
            assert!(
                plan.rounds >= 1 && plan.wg >= 1 && plan.wg <= s.nwin,
                "n={n}"
            );
            // Scratch stays within ~110 bytes per entry of a window group.
            let per = plan.scratch_bytes(&s, n, Group::G1) / (plan.wg as usize * n);
            assert!(per <= 110, "n={n}: {per} bytes per entry");
        }
    }
}
