//! The NTT over Fr on the device: [`NttPlan`] holds the twiddle tables of one size (built
//! on the device by `ntt_powers`, kept in the arena) and the pass plan; [`NttPlan::run`]
//! enqueues forward / inverse, optionally coset, transforms with natural or bit-reversed
//! input and output. Kernels are in `kernels/ntt.cu`; the CPU NTT is the oracle.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use cudarc::driver::PushKernelArg;

use crate::arena::{DevRegion, VramArena};
use crate::device::Device;
use crate::error::{drv, GpuError, Result};
use crate::kernels::KernelId;
use crate::layout::{scalar_words, FR_BYTES};

/// Largest supported transform: 2^28 points (Fr's two-adicity is 32; 2^28 × 32 bytes is
/// 8 GiB, the largest domain a Filecoin partition needs with room to spare).
pub const MAX_LG_N: u32 = 28;
/// Levels per shared-memory pass (matches NTT_MAX_LG in ntt.cu).
const MAX_PASS_LG: u32 = 10;

/// Which way the transform goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Coefficients -> evaluations: x_j = Σ a_i ω^(ij).
    Forward,
    /// Evaluations -> coefficients, including the 1/n factor.
    Inverse,
}

/// Element order of a vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Index i holds element i.
    Natural,
    /// Index i holds element bitrev(i).
    BitReversed,
}

/// What [`NttPlan::run`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NttOptions {
    /// Forward or inverse.
    pub direction: Direction,
    /// On the coset g·H, g = `Scalar::MULTIPLICATIVE_GENERATOR`: forward evaluates at g ω^j,
    /// inverse returns the coefficients of the polynomial with those evaluations.
    pub coset: bool,
    /// Order of the input.
    pub input: Order,
    /// Order of the output.
    pub output: Order,
}

impl NttOptions {
    /// Natural order in and out.
    pub fn natural(direction: Direction, coset: bool) -> Self {
        NttOptions {
            direction,
            coset,
            input: Order::Natural,
            output: Order::Natural,
        }
    }
}

struct Table<'a> {
    lo: DevRegion<'a>,
    hi: DevRegion<'a>,
}

/// Twiddle tables and pass plan for 2^lg_n points.
pub struct NttPlan<'a> {
    lg_n: u32,
    h: u32,
    passes: Vec<(u32, u32)>,
    omega: Table<'a>,
    omega_inv: Table<'a>,
    g: Table<'a>,
    g_inv: Table<'a>,
    inner: Vec<(u32, DevRegion<'a>, DevRegion<'a>)>,
    n_inv: Scalar,
}

/// The primitive 2^k-th root of unity ff/bellperson use: ROOT_OF_UNITY^(2^(S - k)).
pub fn root_of_unity(lg_n: u32) -> Scalar {
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in lg_n..Scalar::S {
        w = w.square();
    }
    w
}

/// The passes (R, L) of a 2^k transform in natural -> bit-reversed order: as few passes
/// as MAX_PASS_LG allows, with their level counts balanced.
pub fn plan_passes(lg_n: u32) -> Vec<(u32, u32)> {
    if lg_n == 0 {
        return Vec::new();
    }
    let p = lg_n.div_ceil(MAX_PASS_LG);
    let mut out = Vec::new();
    let mut r = lg_n;
    for i in 0..p {
        let l = lg_n / p + u32::from(i < lg_n % p);
        out.push((r, l));
        r -= l;
    }
    out
}

impl<'a> NttPlan<'a> {
    /// Device bytes the tables of a 2^lg_n plan take.
    pub fn table_bytes(lg_n: u32) -> usize {
        let h = lg_n.div_ceil(2);
        let two_level =
            ((1usize << h) + (1usize << (lg_n - h))) * FR_BYTES + 2 * crate::arena::ALIGN;
        let inner: usize = (1usize << MAX_PASS_LG) * FR_BYTES + 4 * crate::arena::ALIGN;
        4 * two_level + 2 * inner
    }

    /// Builds the tables for 2^lg_n points in `arena` (kernels enqueued on the compute
    /// stream; later launches on that stream see them).
    ///
    /// # Errors
    /// [`GpuError::Input`] for lg_n > [`MAX_LG_N`]; arena or driver errors.
    pub fn new(dev: &Device, arena: &'a VramArena, lg_n: u32) -> Result<NttPlan<'a>> {
        if lg_n > MAX_LG_N {
            return Err(GpuError::Input(format!(
                "ntt size 2^{lg_n} above 2^{MAX_LG_N}"
            )));
        }
        let h = lg_n.div_ceil(2);
        let w = root_of_unity(lg_n);
        let w_inv = w.invert().unwrap_or(Scalar::ONE); // a root of unity is never zero
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let g_inv = g.invert().unwrap_or(Scalar::ONE); // g = 7 is nonzero
        let two_level = |base: Scalar| -> Result<Table<'a>> {
            let lo = arena.alloc((1usize << h) * FR_BYTES)?;
            let hi = arena.alloc((1usize << (lg_n - h)) * FR_BYTES)?;
            powers(dev, &lo, base, 1u32 << h)?;
            powers(dev, &hi, base.pow_vartime([1u64 << h]), 1u32 << (lg_n - h))?;
            Ok(Table { lo, hi })
        };
        let omega = two_level(w)?;
        let omega_inv = two_level(w_inv)?;
        let gt = two_level(g)?;
        let g_inv_t = two_level(g_inv)?;
        let passes = plan_passes(lg_n);
        let mut inner: Vec<(u32, DevRegion<'a>, DevRegion<'a>)> = Vec::new();
        for &(_, l) in &passes {
            if inner.iter().any(|(x, _, _)| *x == l) {
                continue;
            }
            let count = 1u32 << (l - 1);
            let wl = w.pow_vartime([1u64 << (lg_n - l)]);
            let f = arena.alloc(count as usize * FR_BYTES)?;
            let i = arena.alloc(count as usize * FR_BYTES)?;
            powers(dev, &f, wl, count)?;
            powers(dev, &i, wl.invert().unwrap_or(Scalar::ONE), count)?;
            inner.push((l, f, i));
        }
        let n_inv = Scalar::from(1u64 << lg_n).invert().unwrap_or(Scalar::ONE); // n < r
        Ok(NttPlan {
            lg_n,
            h,
            passes,
            omega,
            omega_inv,
            g: gt,
            g_inv: g_inv_t,
            inner,
            n_inv,
        })
    }

    /// log2 of the size.
    pub fn lg_n(&self) -> u32 {
        self.lg_n
    }

    /// Enqueues the transform of the 2^lg_n scalars at `data` (in place) on the compute
    /// stream.
    ///
    /// # Errors
    /// [`GpuError::Input`] if `data` is too small; driver errors.
    pub fn run(&self, dev: &Device, data: &DevRegion<'_>, opts: NttOptions) -> Result<()> {
        let n = 1usize << self.lg_n;
        if data.bytes() < n * FR_BYTES {
            return Err(GpuError::Input(format!(
                "ntt of 2^{} points needs {} bytes, region has {}",
                self.lg_n,
                n * FR_BYTES,
                data.bytes()
            )));
        }
        if self.lg_n == 0 {
            return Ok(()); // one point: the transform and the coset shift (g^0) are identity
        }
        let inverse = opts.direction == Direction::Inverse;
        if opts.coset && !inverse {
            self.coset_scale(dev, data, opts.input == Order::BitReversed, &self.g)?;
        }
        let scale = inverse.then_some(self.n_inv);
        match (opts.input, opts.output) {
            (Order::Natural, Order::BitReversed) => self.dif(dev, data, inverse, scale)?,
            (Order::BitReversed, Order::Natural) => self.dit(dev, data, inverse, scale)?,
            (Order::Natural, Order::Natural) => {
                self.dif(dev, data, inverse, scale)?;
                self.bitrev(dev, data)?;
            }
            (Order::BitReversed, Order::BitReversed) => {
                self.dit(dev, data, inverse, scale)?;
                self.bitrev(dev, data)?;
            }
        }
        if opts.coset && inverse {
            self.coset_scale(dev, data, opts.output == Order::BitReversed, &self.g_inv)?;
        }
        Ok(())
    }

    fn inner_table(&self, l: u32, inverse: bool) -> Result<&DevRegion<'a>> {
        self.inner
            .iter()
            .find(|(x, _, _)| *x == l)
            .map(|(_, f, i)| if inverse { i } else { f })
            .ok_or_else(|| GpuError::Input(format!("ntt plan has no 2^{l} table")))
    }

    fn pass(
        &self,
        dev: &Device,
        name: &'static str,
        data: &DevRegion<'_>,
        (r, l): (u32, u32),
        inverse: bool,
        scale: Option<Scalar>,
    ) -> Result<()> {
        let f = dev.function(KernelId::Ntt, name)?;
        let t = if inverse {
            &self.omega_inv
        } else {
            &self.omega
        };
        let inner = self.inner_table(l, inverse)?.ptr();
        let (p, k, lo, hi, h) = (data.ptr(), self.lg_n, t.lo.ptr(), t.hi.ptr(), self.h);
        let scale_last = u32::from(scale.is_some());
        let sc = scalar_words(&scale.unwrap_or(Scalar::ONE));
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: ((1u32 << (k - l)), 1, 1),
            block_dim: (1u32 << (l - 1), 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = dev.compute_stream().launch_builder(&f);
        b.arg(&p)
            .arg(&k)
            .arg(&r)
            .arg(&l)
            .arg(&inner)
            .arg(&lo)
            .arg(&hi)
            .arg(&h)
            .arg(&scale_last)
            .arg(&sc);
        // SAFETY: args match ntt_{dif,dit}_pass(fr_t*, u32 k, u32 R, u32 L, const fr_t* inner,
        // const fr_t* lo, const fr_t* hi, u32 h, u32 scale_last, fr_t scale) in ntt.cu; data
        // holds 2^k elements (checked in run), inner 2^(L-1), lo 2^h, hi 2^(k-h); the grid
        // covers the 2^(k-L) groups with 2^(L-1) threads each.
        drv(
            dev.ordinal(),
            || format!("launch {name}"),
            unsafe { b.launch(cfg) }.map(|_| ()),
        )
    }

    fn dif(
        &self,
        dev: &Device,
        data: &DevRegion<'_>,
        inverse: bool,
        scale: Option<Scalar>,
    ) -> Result<()> {
        let last = self.passes.len() - 1;
        for (i, &(r, l)) in self.passes.iter().enumerate() {
            self.pass(
                dev,
                "ntt_dif_pass",
                data,
                (r, l),
                inverse,
                if i == last { scale } else { None },
            )?;
        }
        Ok(())
    }

    fn dit(
        &self,
        dev: &Device,
        data: &DevRegion<'_>,
        inverse: bool,
        scale: Option<Scalar>,
    ) -> Result<()> {
        for (i, &(r, l)) in self.passes.iter().enumerate().rev() {
            self.pass(
                dev,
                "ntt_dit_pass",
                data,
                (r, l),
                inverse,
                if i == 0 { scale } else { None },
            )?;
        }
        Ok(())
    }

    fn bitrev(&self, dev: &Device, data: &DevRegion<'_>) -> Result<()> {
        let f = dev.function(KernelId::Ntt, "ntt_bitrev")?;
        let (p, k) = (data.ptr(), self.lg_n);
        let mut b = dev.compute_stream().launch_builder(&f);
        b.arg(&p).arg(&k);
        // SAFETY: ntt_bitrev(fr_t* data, u32 k); data holds 2^k elements; the grid covers
        // 2^k threads and each checks its index.
        drv(
            dev.ordinal(),
            || "launch ntt_bitrev".into(),
            unsafe { b.launch(Device::grid(1u64 << k, 256)) }.map(|_| ()),
        )
    }

    fn coset_scale(
        &self,
        dev: &Device,
        data: &DevRegion<'_>,
        bitreversed: bool,
        t: &Table<'a>,
    ) -> Result<()> {
        let f = dev.function(KernelId::Ntt, "ntt_coset_scale")?;
        let (p, k, br, lo, hi, h) = (
            data.ptr(),
            self.lg_n,
            u32::from(bitreversed),
            t.lo.ptr(),
            t.hi.ptr(),
            self.h,
        );
        let mut b = dev.compute_stream().launch_builder(&f);
        b.arg(&p).arg(&k).arg(&br).arg(&lo).arg(&hi).arg(&h);
        // SAFETY: ntt_coset_scale(fr_t*, u32 k, u32 bitreversed, const fr_t* lo,
        // const fr_t* hi, u32 h); data holds 2^k elements, lo 2^h and hi 2^(k-h).
        drv(
            dev.ordinal(),
            || "launch ntt_coset_scale".into(),
            unsafe { b.launch(Device::grid(1u64 << k, 256)) }.map(|_| ()),
        )
    }
}

fn powers(dev: &Device, out: &DevRegion<'_>, base: Scalar, count: u32) -> Result<()> {
    if out.bytes() < count as usize * FR_BYTES {
        return Err(GpuError::Input("powers table too small".into()));
    }
    let f = dev.function(KernelId::Ntt, "ntt_powers")?;
    let (p, b0) = (out.ptr(), scalar_words(&base));
    let mut b = dev.compute_stream().launch_builder(&f);
    b.arg(&p).arg(&b0).arg(&count);
    // SAFETY: ntt_powers(fr_t* out, fr_t base, u32 count); out holds count elements.
    drv(
        dev.ordinal(),
        || "launch ntt_powers".into(),
        unsafe { b.launch(Device::grid(count as u64, 256)) }.map(|_| ()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_cover_every_level() {
        for k in 1..=MAX_LG_N {
            let p = plan_passes(k);
            assert_eq!(p.iter().map(|x| x.1).sum::<u32>(), k);
            assert!(p.iter().all(|&(_, l)| (1..=MAX_PASS_LG).contains(&l)));
            assert_eq!(p[0].0, k);
            for w in p.windows(2) {
                assert_eq!(w[1].0, w[0].0 - w[0].1);
            }
        }
    }

    #[test]
    fn root_has_exact_order() {
        for k in [1u32, 5, 20, 28] {
            let w = root_of_unity(k);
            assert_eq!(w.pow_vartime([1u64 << k]), Scalar::ONE);
            assert_ne!(w.pow_vartime([1u64 << (k - 1)]), Scalar::ONE);
        }
    }
}
