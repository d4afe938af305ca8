//! MSMs on one device region waited for on the host: [`msm_g1`] and [`msm_g2`] (checks,
//! benchmarks, streamed diagnostics) and [`MsmOut`], the window sums of an enqueued MSM
//! with their Horner combination, which the prove's results use too.

use blstrs::{G1Projective, G2Projective};
use group::Group as _;

use super::{enqueue_shape, Group, MsmInput, Shape};
use crate::device::arena::{DevRegion, Scratch};
use crate::device::layout;
use crate::device::Device;
use crate::error::Result;

/// An enqueued MSM: the per-window sums W_w (Jacobian, on the device) of Σ s_i·P_i =
/// Σ_w 2^(c·w)·W_w (over a window table, one sum per bucket set: the same formula with
/// `nwin` = sets). The Horner combination runs on the CPU ([`MsmOut::finish_g1`]): 256
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
/// [`GpuError::Input`](crate::error::GpuError::Input) when a region is too small; arena
/// or driver errors.
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
    let input = MsmInput {
        bases,
        base_idx,
        scalars,
        n,
        count: None,
    };
    let s = Shape::new(n);
    input.check(group)?;
    let out = scratch.alloc(s.sets as usize * group.jacobian_bytes())?;
    enqueue_shape(dev, scratch, group, &s, &input, &out)?;
    Ok(MsmOut {
        windows: out,
        nwin: s.sets,
        c: s.c,
    })
}
