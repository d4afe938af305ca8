//! [`GpuFixedBase`]: cuzk-groth16's `FixedBaseMul` (many scalars times one base point, the
//! bulk of parameter generation) on the device. The comb table T[k][j − 1] = j·2^(w·k)·B is
//! built on the CPU (w·2^(w−1)-ish additions, parallel by row), the per-scalar sums and
//! their conversion to affine form (one inversion per few scalars) run in
//! `kernels/fixed_base.cu`, and the host only copies bytes: the device writes blst's affine
//! encoding, so a result goes from the device to its final place in the output vector.
//!
//! The scalars go in chunks through two device lanes (streams) and two pairs of pinned
//! staging buffers: while chunk i's kernel runs on one lane, chunk i − 1 is downloaded
//! from the other at pinned-copy rate and copied into the output in parallel, and chunk
//! i + 1's scalars are staged. The stage times (kernel, download wait, host copies) are
//! logged at info level (`fixed-base multiplication done`) and summed for
//! `FixedBaseMul::take_stages`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_groth16::paramgen::{FixedBaseError, FixedBaseMul};
use group::prime::PrimeCurveAffine;
use group::Curve;
use parking_lot::Mutex;
use rayon::prelude::*;

use crate::device::arena::VramArena;
use crate::device::launch;
use crate::device::layout::{as_bytes, as_bytes_mut, zeroed_vec, Plain, FR_BYTES};
use crate::device::pinned::PinnedPool;
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::ops::msm::Group;

/// Scalars per thread in the kernel (`FB_G` in fixed_base.cu): the grid covers
/// ⌈n / FB_G⌉ threads.
const FB_G: u64 = 8;
/// Output bytes per device pass and lane: 2^23 G1 or 2^22 G2 points, so that the pinned
/// buffers of a G1 call serve the G2 call after it.
const CHUNK_BYTES: usize = 96 << 23;
/// Bytes per host copy task (parallel memcpy between the pinned and the final buffers).
const COPY_TASK: usize = 4 << 20;

/// Comb width for n scalars: 16 bits (16 windows, 32768 points a window) once the table's
/// 2^19 host additions are small against the work, 12 bits (22 windows of 2048) below.
fn window_bits(n: usize) -> u32 {
    match n >= 1 << 20 {
        true => 16,
        false => 12,
    }
}

/// Fixed-base multiplication on one GPU.
#[derive(Clone)]
pub struct GpuFixedBase {
    dev: Arc<Device>,
    pinned: Arc<PinnedPool>,
    /// Points per device pass and lane (default: [`CHUNK_BYTES`] of output).
    chunk_points: Option<usize>,
    stages: Arc<Mutex<Vec<(&'static str, Duration)>>>,
}

impl std::fmt::Debug for GpuFixedBase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuFixedBase")
            .field("gpu", &self.dev.ordinal())
            .finish()
    }
}

impl GpuFixedBase {
    /// Uses `dev`.
    pub fn new(dev: Arc<Device>) -> GpuFixedBase {
        GpuFixedBase {
            pinned: PinnedPool::new(dev.clone()),
            chunk_points: None,
            dev,
            stages: Arc::default(),
        }
    }

    /// The same with device passes of at most `points` points (at least one), for tests
    /// of the chunked pipeline at small sizes.
    pub fn with_chunk_points(self, points: usize) -> GpuFixedBase {
        GpuFixedBase {
            chunk_points: Some(points.max(1)),
            ..self
        }
    }

    fn err(&self, e: GpuError) -> FixedBaseError {
        FixedBaseError {
            backend: format!("gpu:{}", self.dev.ordinal()),
            message: e.to_string(),
        }
    }
}

/// The comb table for base B: row k holds j·2^(w·k)·B for j = 1..=2^(w−1).
fn table<P, A>(base: P, w: u32, nwin: u32, normalize: impl Fn(&[P], &mut [A]) + Sync) -> Vec<A>
where
    P: group::Group + Send + Sync,
    A: PrimeCurveAffine + Send,
{
    let half = 1usize << (w - 1);
    let mut rows_base = Vec::with_capacity(nwin as usize);
    let mut b = base;
    for _ in 0..nwin {
        rows_base.push(b);
        for _ in 0..w {
            b = b.double();
        }
    }
    let mut out = vec![A::identity(); nwin as usize * half];
    // One task per 4096 points of a row at most (the row's multiples from their own start
    // point), so that 16 rows keep 16 cores busy and a large row splits; a task never
    // crosses rows (half is a power of two).
    let part = half.min(4096);
    out.par_chunks_mut(part)
        .enumerate()
        .for_each(|(task, chunk)| {
            let (row, off) = ((task * part) / half, (task * part) % half);
            let rb = rows_base[row];
            let mut acc = rb * P::Scalar::from(off as u64 + 1);
            let mut proj = Vec::with_capacity(chunk.len());
            for _ in 0..chunk.len() {
                proj.push(acc);
                acc += rb;
            }
            normalize(&proj, chunk);
        });
    out
}

/// Per-call stage times.
#[derive(Default)]
struct Stages {
    kernel: Duration,
    wait_download: Duration,
    copy_in: Duration,
    copy_out: Duration,
}

/// Copies `src` into `dst` on all cores.
fn par_copy(dst: &mut [u8], src: &[u8]) {
    dst.par_chunks_mut(COPY_TASK)
        .zip(src.par_chunks(COPY_TASK))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

fn run<A: Plain + Send + Sync>(
    fb: &GpuFixedBase,
    group: Group,
    w: u32,
    table: &[A],
    scalars: &[Scalar],
) -> Result<(Vec<A>, Stages)> {
    let mut st = Stages::default();
    let dev = &fb.dev;
    let nwin = 256u32.div_ceil(w);
    let n = scalars.len();
    let ab = group.affine_bytes();
    let chunk = n.clamp(1, fb.chunk_points.unwrap_or(CHUNK_BYTES / ab));
    let tb = as_bytes(table);
    let lanes = [dev.clone(), dev.lane()?];
    let arena = VramArena::new(
        dev.clone(),
        tb.len() + 2 * chunk * (FR_BYTES + ab) + 8 * crate::device::arena::ALIGN,
    )?;
    let t = arena.alloc(tb.len())?;
    let s = [
        arena.alloc(chunk * FR_BYTES)?,
        arena.alloc(chunk * FR_BYTES)?,
    ];
    let o = [arena.alloc(chunk * ab)?, arena.alloc(chunk * ab)?];
    let pool = &fb.pinned;
    let mut pin_in = [pool.take(chunk * FR_BYTES)?, pool.take(chunk * FR_BYTES)?];
    let mut pin_out = [pool.take(chunk * ab)?, pool.take(chunk * ab)?];
    dev.upload(&t, tb)?;

    let mut out: Vec<A> = zeroed_vec(n);
    let ranges: Vec<std::ops::Range<usize>> = (0..n)
        .step_by(chunk)
        .map(|b| b..(b + chunk).min(n))
        .collect();
    let mut events = Vec::with_capacity(ranges.len());
    // Chunk i − 1's download and copy-out, while chunk i's kernel runs on the other lane.
    let finish = |i: usize,
                  out: &mut Vec<A>,
                  pin_out: &mut [crate::device::pinned::PinnedBuf; 2],
                  st: &mut Stages|
     -> Result<()> {
        let (l, r) = (i % 2, ranges[i].clone());
        let bytes = r.len() * ab;
        let clock = Instant::now();
        lanes[l].download(&mut pin_out[l].as_mut_slice()?[..bytes], &o[l])?;
        st.wait_download += clock.elapsed();
        let clock = Instant::now();
        par_copy(as_bytes_mut(&mut out[r]), &pin_out[l].as_slice()?[..bytes]);
        st.copy_out += clock.elapsed();
        Ok(())
    };
    for (i, r) in ranges.iter().enumerate() {
        let l = i % 2;
        let sc = &scalars[r.clone()];
        let clock = Instant::now();
        par_copy(
            &mut pin_in[l].as_mut_slice()?[..sc.len() * FR_BYTES],
            as_bytes(sc),
        );
        st.copy_in += clock.elapsed();
        // Waits for chunk i − 2's kernel on this lane, long since downloaded.
        lanes[l].upload(&s[l], &pin_in[l].as_slice()?[..sc.len() * FR_BYTES])?;
        let (start, end) = (lanes[l].timing_event()?, lanes[l].timing_event()?);
        lanes[l].record(&start)?;
        // The table holds nwin · 2^(w−1) points, s and o n entries; the grid covers
        // ⌈n / FB_G⌉ threads and each checks its indices against n.
        launch::fixed_base(
            &lanes[l],
            group,
            Device::grid((sc.len() as u64).div_ceil(FB_G), group.block()),
            &t,
            w,
            nwin,
            &s[l],
            sc.len() as u32,
            &o[l],
        )?;
        lanes[l].record(&end)?;
        events.push((start, end));
        if i > 0 {
            finish(i - 1, &mut out, &mut pin_out, &mut st)?;
        }
    }
    if !ranges.is_empty() {
        finish(ranges.len() - 1, &mut out, &mut pin_out, &mut st)?;
    }
    for (start, end) in &events {
        st.kernel += dev.elapsed(start, end)?;
    }
    Ok((out, st))
}

impl GpuFixedBase {
    fn mul<P, A>(
        &self,
        group: Group,
        base: P,
        scalars: &[Scalar],
        normalize: impl Fn(&[P], &mut [A]) + Sync,
    ) -> Result<Vec<A>, FixedBaseError>
    where
        P: group::Group + Send + Sync,
        A: PrimeCurveAffine + Plain + Send + Sync,
    {
        if scalars.is_empty() {
            return Ok(Vec::new());
        }
        let clock = Instant::now();
        let w = window_bits(scalars.len());
        let t = table(base, w, 256u32.div_ceil(w), normalize);
        let table_time = clock.elapsed();
        let (out, st) = run(self, group, w, &t, scalars).map_err(|e| self.err(e))?;
        let stages = vec![
            ("table", table_time),
            ("kernel", st.kernel),
            ("wait_download", st.wait_download),
            ("copy_in", st.copy_in),
            ("copy_out", st.copy_out),
            ("total", clock.elapsed()),
        ];
        tracing::info!(
            gpu = self.dev.ordinal(),
            group = ?group,
            n = scalars.len(),
            window_bits = w,
            stages_ms = ?stages.iter().map(|(k, d)| (*k, d.as_secs_f64() * 1e3)).collect::<Vec<_>>(),
            "fixed-base multiplication done"
        );
        let mut sum = self.stages.lock();
        if sum.is_empty() {
            *sum = stages;
        } else {
            for ((_, total), (_, d)) in sum.iter_mut().zip(stages) {
                *total += d;
            }
        }
        Ok(out)
    }
}

impl FixedBaseMul for GpuFixedBase {
    fn name(&self) -> String {
        format!("gpu:{}", self.dev.ordinal())
    }

    fn mul_g1(
        &self,
        base: G1Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G1Affine>, FixedBaseError> {
        self.mul(Group::G1, base, scalars, |p: &[G1Projective], o| {
            G1Projective::batch_normalize(p, o)
        })
    }

    fn mul_g2(
        &self,
        base: G2Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G2Affine>, FixedBaseError> {
        self.mul(Group::G2, base, scalars, |p: &[G2Projective], o| {
            G2Projective::batch_normalize(p, o)
        })
    }

    /// "table" (host build), "kernel" (device time of the kernels), "wait_download"
    /// (host blocked on a kernel and its pinned download), "copy_in" and "copy_out" (host
    /// copies through the pinned buffers), "total" (the calls' wall time).
    fn take_stages(&self) -> Vec<(&'static str, Duration)> {
        std::mem::take(&mut *self.stages.lock())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ff::Field;
    use group::Group;
    use rand_chacha::rand_core::SeedableRng;

    /// Every entry of the comb table is j·2^(w·k)·B, at both widths, across the tasks the
    /// build splits a row into.
    #[test]
    fn table_holds_the_windows_multiples() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let b = G1Projective::random(&mut rng);
        for w in [12u32, 16] {
            let nwin = 256u32.div_ceil(w);
            let half = 1usize << (w - 1);
            let t = table(b, w, nwin, |p: &[G1Projective], o: &mut [G1Affine]| {
                G1Projective::batch_normalize(p, o)
            });
            assert_eq!(t.len(), nwin as usize * half);
            for k in [0usize, 1, nwin as usize - 1] {
                let row = b * Scalar::from(2u64).pow_vartime([(w as usize * k) as u64]);
                for j in [1usize, 2, 4095, 4096, 4097, half - 1, half] {
                    if j > half {
                        continue;
                    }
                    let want = (row * Scalar::from(j as u64)).to_affine();
                    assert_eq!(t[k * half + j - 1], want, "w={w} row {k} multiple {j}");
                }
            }
        }
    }
}
