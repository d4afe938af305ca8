//! [`GpuFixedBase`]: cuzk-groth16's `FixedBaseMul` (many scalars times one base point, the
//! bulk of parameter generation) on the device. The comb table T[k][j − 1] = j·2^(w·k)·B is
//! built on the CPU (a few thousand additions), the per-scalar sums run in
//! `kernels/fixed_base.cu`, and the Jacobian results are normalized to affine on the CPU in
//! parallel batches (one inversion per batch).

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use cuzk_groth16::paramgen::{FixedBaseError, FixedBaseMul};
use group::prime::PrimeCurveAffine;
use group::Curve;
use rayon::prelude::*;

use crate::device::arena::VramArena;
use crate::device::launch;
use crate::device::layout::{self, as_bytes, Plain, FR_BYTES};
use crate::device::Device;
use crate::error::Result;
use crate::ops::msm::Group;

/// Window width of the comb: 22 windows of 2048 points (4.3 MB for G1, 8.6 MB for G2,
/// L2-resident on an H200).
const W: u32 = 12;
/// Scalars per device pass (bounds the device and host buffers).
const CHUNK: usize = 1 << 22;

/// Fixed-base multiplication on one GPU.
#[derive(Clone, Debug)]
pub struct GpuFixedBase {
    dev: Arc<Device>,
}

impl GpuFixedBase {
    /// Uses `dev`.
    pub fn new(dev: Arc<Device>) -> GpuFixedBase {
        GpuFixedBase { dev }
    }

    fn err(&self, e: crate::GpuError) -> FixedBaseError {
        FixedBaseError {
            backend: format!("gpu:{}", self.dev.ordinal()),
            message: e.to_string(),
        }
    }
}

/// The comb table for base B: row k holds j·2^(w·k)·B for j = 1..=2^(w−1).
fn table<P, A>(base: P, nwin: u32, normalize: impl Fn(&[P], &mut [A]) + Sync) -> Vec<A>
where
    P: group::Group + Send + Sync,
    A: PrimeCurveAffine + Send,
{
    let half = 1usize << (W - 1);
    let mut rows_base = Vec::with_capacity(nwin as usize);
    let mut b = base;
    for _ in 0..nwin {
        rows_base.push(b);
        for _ in 0..W {
            b = b.double();
        }
    }
    let mut out = vec![A::identity(); nwin as usize * half];
    out.par_chunks_mut(half)
        .zip(rows_base.par_iter())
        .for_each(|(row, rb)| {
            let mut proj = Vec::with_capacity(half);
            let mut acc = *rb;
            for _ in 0..half {
                proj.push(acc);
                acc += rb;
            }
            normalize(&proj, row);
        });
    out
}

fn run<A: Plain, J: Send>(
    fb: &GpuFixedBase,
    group: Group,
    table: &[A],
    scalars: &[Scalar],
    from_jac: impl Fn(&[u8]) -> J + Sync,
) -> Result<Vec<J>> {
    let dev = &fb.dev;
    let nwin = 256u32.div_ceil(W);
    let chunk = scalars.len().clamp(1, CHUNK);
    let tb = as_bytes(table);
    let jb = group.jacobian_bytes();
    let arena = VramArena::new(
        dev.clone(),
        tb.len() + chunk * (FR_BYTES + jb) + 4 * crate::device::arena::ALIGN,
    )?;
    let t = arena.alloc(tb.len())?;
    let s = arena.alloc(chunk * FR_BYTES)?;
    let o = arena.alloc(chunk * jb)?;
    dev.upload(&t, tb)?;
    let mut out = Vec::with_capacity(scalars.len());
    let mut raw = vec![0u8; chunk * jb];
    for sc in scalars.chunks(chunk) {
        dev.upload(&s, as_bytes(sc))?;
        // The table holds nwin · 2^(w−1) points, s and o n entries; the grid covers n
        // threads and each checks i < n.
        launch::fixed_base(
            dev,
            group,
            Device::grid(sc.len() as u64, group.block()),
            &t,
            W,
            nwin,
            &s,
            sc.len() as u32,
            &o,
        )?;
        let r = &mut raw[..sc.len() * jb];
        dev.download(r, &o)?;
        out.par_extend(r.par_chunks_exact(jb).map(&from_jac));
    }
    Ok(out)
}

fn to_affine_g1(p: Vec<G1Projective>) -> Vec<G1Affine> {
    let mut out = vec![G1Affine::identity(); p.len()];
    out.par_chunks_mut(4096)
        .zip(p.par_chunks(4096))
        .for_each(|(o, p)| G1Projective::batch_normalize(p, o));
    out
}

fn to_affine_g2(p: Vec<G2Projective>) -> Vec<G2Affine> {
    let mut out = vec![G2Affine::identity(); p.len()];
    out.par_chunks_mut(4096)
        .zip(p.par_chunks(4096))
        .for_each(|(o, p)| G2Projective::batch_normalize(p, o));
    out
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
        if scalars.is_empty() {
            return Ok(Vec::new());
        }
        let t = table(
            base,
            256u32.div_ceil(W),
            |p: &[G1Projective], o: &mut [G1Affine]| G1Projective::batch_normalize(p, o),
        );
        let j =
            run(self, Group::G1, &t, scalars, layout::g1_from_jacobian).map_err(|e| self.err(e))?;
        Ok(to_affine_g1(j))
    }

    fn mul_g2(
        &self,
        base: G2Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G2Affine>, FixedBaseError> {
        if scalars.is_empty() {
            return Ok(Vec::new());
        }
        let t = table(
            base,
            256u32.div_ceil(W),
            |p: &[G2Projective], o: &mut [G2Affine]| G2Projective::batch_normalize(p, o),
        );
        let j =
            run(self, Group::G2, &t, scalars, layout::g2_from_jacobian).map_err(|e| self.err(e))?;
        Ok(to_affine_g2(j))
    }
}
