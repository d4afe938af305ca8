//! The NTT over Fr on the device: [`NttPlan`] holds the twiddle tables of one size (built
//! on the device by `ntt_powers`, kept in the arena) and the pass plan; [`NttPlan::run`]
//! enqueues forward / inverse, optionally coset, transforms with natural or bit-reversed
//! input and output; [`NttPlan::quotient`] is the prover's H = (A·B − C)/Z with the coset
//! shifts and the 1/n factors fused into the passes. Kernels are in `kernels/ntt.cu`; the
//! CPU NTT is the oracle.

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::device::arena::{DevRegion, VramArena};
use crate::device::launch;
use crate::device::layout::{scalar_words, FR_BYTES};
use crate::device::Device;
use crate::error::{GpuError, Result};

/// Largest supported transform: 2^28 points (Fr's two-adicity is 32; 2^28 × 32 bytes is
/// 8 GiB, the largest domain a Filecoin partition needs with room to spare).
pub const MAX_LG_N: u32 = 28;
/// Levels per shared-memory pass (matches NTT_MAX_LG in ntt.cu).
const MAX_PASS_LG: u32 = 10;
/// Largest R of a pass whose twists w_R^j come from a table of their own (2^R entries a
/// direction, 8 MiB at 18) instead of the two-level table of w: one product per element
/// instead of two. The middle pass of a 2^27 transform (R = 18), the outer one below 2^19.
const DIRECT_TWIST_MAX_LG: u32 = 18;
/// Most threads per pass block (ntt.cu's passes loop over their butterflies): a 2^10 pass
/// runs 256 threads of two butterflies each.
const PASS_THREADS: u32 = 256;

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

/// w^e = lo[e mod 2^h] · hi[e >> h] for the plan's h.
struct Table<'a> {
    lo: DevRegion<'a>,
    hi: DevRegion<'a>,
}

/// Which pass kernel: `ntt_dif_pass`, whose last pass may write its outputs out of place in
/// natural order, or `ntt_dit_pass`.
#[derive(Clone, Copy)]
enum PassKind<'o> {
    Dif(Option<&'o DevRegion<'o>>),
    Dit,
}

/// How the last pass of a transform scales its outputs (`mode` in ntt.cu).
#[derive(Clone, Copy)]
enum Scale<'t, 'a> {
    None,
    /// Every output times the constant.
    By(Scalar),
    /// Output of coefficient index i times the table's value at i.
    Table(&'t Table<'a>),
}

/// Twiddle tables and pass plan for 2^lg_n points.
pub struct NttPlan<'a> {
    lg_n: u32,
    h: u32,
    passes: Vec<(u32, u32)>,
    omega: Table<'a>,
    omega_inv: Table<'a>,
    /// g^i: the forward coset transform's input shift.
    g: Table<'a>,
    /// g^i / n: the inverse transform's 1/n with the shift a following forward coset
    /// transform needs.
    g_n_inv: Table<'a>,
    /// g^-i / n: the inverse coset transform's output scaling.
    g_inv_n_inv: Table<'a>,
    inner: Vec<(u32, DevRegion<'a>, DevRegion<'a>)>,
    /// Per pass R of [`direct_twists`]: w_R^j and w_R^-j for j < 2^R.
    direct: Vec<(u32, DevRegion<'a>, DevRegion<'a>)>,
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

/// The R of the passes of a 2^k transform whose twists get a table of their own: those
/// with twists (R > L) and R <= [`DIRECT_TWIST_MAX_LG`].
fn direct_twists(lg_n: u32) -> Vec<u32> {
    plan_passes(lg_n)
        .into_iter()
        .filter(|&(r, l)| r > l && r <= DIRECT_TWIST_MAX_LG)
        .map(|(r, _)| r)
        .collect()
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
            ((1usize << h) + (1usize << (lg_n - h))) * FR_BYTES + 2 * crate::device::arena::ALIGN;
        let inner: usize = (1usize << MAX_PASS_LG) * FR_BYTES + 4 * crate::device::arena::ALIGN;
        5 * two_level + 2 * inner + Self::direct_twist_bytes(lg_n)
    }

    /// Arena bytes of the direct twist tables of a 2^lg_n transform (w_R^±j of each pass
    /// of `direct_twists`; 2 × 8 MiB at 2^27), part of [`NttPlan::table_bytes`].
    pub fn direct_twist_bytes(lg_n: u32) -> usize {
        direct_twists(lg_n)
            .iter()
            .map(|&r| 2 * ((FR_BYTES << r) + crate::device::arena::ALIGN))
            .sum()
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
        // g = 7 and n < r are nonzero.
        let g_inv = g.invert().unwrap_or(Scalar::ONE);
        let n_inv = Scalar::from(1u64 << lg_n).invert().unwrap_or(Scalar::ONE);
        // hi[j] = factor · base^(j 2^h), so lo[e mod 2^h] · hi[e >> h] = factor · base^e.
        let two_level = |base: Scalar, factor: Scalar| -> Result<Table<'a>> {
            let lo = arena.alloc((1usize << h) * FR_BYTES)?;
            let hi = arena.alloc((1usize << (lg_n - h)) * FR_BYTES)?;
            powers(dev, &lo, base, Scalar::ONE, 1u32 << h)?;
            powers(
                dev,
                &hi,
                base.pow_vartime([1u64 << h]),
                factor,
                1u32 << (lg_n - h),
            )?;
            Ok(Table { lo, hi })
        };
        let omega = two_level(w, Scalar::ONE)?;
        let omega_inv = two_level(w_inv, Scalar::ONE)?;
        let gt = two_level(g, Scalar::ONE)?;
        let g_n_inv = two_level(g, n_inv)?;
        let g_inv_n_inv = two_level(g_inv, n_inv)?;
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
            powers(dev, &f, wl, Scalar::ONE, count)?;
            powers(
                dev,
                &i,
                wl.invert().unwrap_or(Scalar::ONE),
                Scalar::ONE,
                count,
            )?;
            inner.push((l, f, i));
        }
        let mut direct = Vec::new();
        if !crate::tuning::tuning().ntt_two_level_twists {
            for r in direct_twists(lg_n) {
                let wr = root_of_unity(r);
                let f = arena.alloc(FR_BYTES << r)?;
                let i = arena.alloc(FR_BYTES << r)?;
                powers(dev, &f, wr, Scalar::ONE, 1u32 << r)?;
                powers(
                    dev,
                    &i,
                    wr.invert().unwrap_or(Scalar::ONE),
                    Scalar::ONE,
                    1u32 << r,
                )?;
                direct.push((r, f, i));
            }
        }
        Ok(NttPlan {
            lg_n,
            h,
            passes,
            omega,
            omega_inv,
            g: gt,
            g_n_inv,
            g_inv_n_inv,
            inner,
            direct,
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
        self.check_len(data)?;
        if self.lg_n == 0 {
            return Ok(()); // one point: the transform and the coset shift (g^0) are identity
        }
        let inverse = opts.direction == Direction::Inverse;
        if opts.coset && !inverse {
            self.coset_scale(dev, data, opts.input == Order::BitReversed, &self.g)?;
        }
        let scale = match (inverse, opts.coset) {
            (false, _) => Scale::None,
            (true, false) => Scale::By(self.n_inv),
            (true, true) => Scale::Table(&self.g_inv_n_inv),
        };
        match (opts.input, opts.output) {
            (Order::Natural, Order::BitReversed) => self.dif(dev, data, inverse, scale, None),
            (Order::BitReversed, Order::Natural) => self.dit(dev, data, inverse, scale),
            (Order::Natural, Order::Natural) => {
                self.dif(dev, data, inverse, scale, None)?;
                self.bitrev(dev, data)
            }
            (Order::BitReversed, Order::BitReversed) => {
                self.dit(dev, data, inverse, scale)?;
                self.bitrev(dev, data)
            }
        }
    }

    /// The prover's quotient: `abc` hold the evaluations of A, B and C on the domain
    /// (natural order); the coefficients of H = (A·B − C)/Z, computed on the coset g·H,
    /// land in natural order in `abc[1]` (all three are overwritten). Per vector an inverse
    /// transform (natural → bit-reversed) whose last pass also applies the shift g^i, and a
    /// forward one back to natural order; then a·b − c over Z(g·H) = g^n − 1; then an inverse
    /// transform whose last pass applies g^-i/n and writes out of place in natural order.
    /// Against `run`'s separate shift and bit-reversal launches this saves five passes over
    /// memory.
    ///
    /// # Errors
    /// [`GpuError::Input`] if a region is too small; driver errors.
    pub fn quotient(&self, dev: &Device, abc: [&DevRegion<'_>; 3]) -> Result<()> {
        self.quotient_staged(dev, abc, &mut |_| Ok(()))
    }

    /// [`NttPlan::quotient`], calling `ready(k)` before the first kernel that reads
    /// `abc[k]` is enqueued (k = 0, 1, 2 in order): the backend makes the compute stream
    /// wait there for that vector's upload, so a's transforms run while b and c are copied.
    /// Before b's and c's transforms and before a·b − c the compute stream also takes a
    /// yield point ([`Device::yield_point`]; the callers take one before a's).
    ///
    /// # Errors
    /// As [`NttPlan::quotient`], and `ready`'s.
    pub fn quotient_staged(
        &self,
        dev: &Device,
        abc: [&DevRegion<'_>; 3],
        ready: &mut dyn FnMut(usize) -> Result<()>,
    ) -> Result<()> {
        for r in abc {
            self.check_len(r)?;
        }
        let n = 1u64 << self.lg_n;
        for (k, r) in abc.into_iter().enumerate() {
            ready(k)?;
            // A card's critical lane may take the card between the transforms too, not
            // only before and after all seven (`device/gate.rs`): at 2^27 they take ~0.5 s.
            if k > 0 {
                dev.yield_point()?;
            }
            if self.lg_n > 0 {
                self.dif(dev, r, true, Scale::Table(&self.g_n_inv), None)?;
                self.dit(dev, r, false, Scale::None)?;
            }
        }
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        // g^n ≠ 1: g is not in the domain.
        let z_inv = (g.pow_vartime([n]) - Scalar::ONE)
            .invert()
            .unwrap_or(Scalar::ZERO);
        // With one point there are no passes: the quotient goes straight to abc[1].
        let out = if self.lg_n == 0 { abc[1] } else { abc[0] };
        dev.yield_point()?;
        launch::fr_ab_minus_c(
            dev,
            Device::grid(n, 256),
            out,
            abc[0],
            abc[1],
            abc[2],
            n,
            scalar_words(&z_inv),
        )?;
        if self.lg_n > 0 {
            self.dif(
                dev,
                abc[0],
                true,
                Scale::Table(&self.g_inv_n_inv),
                Some(abc[1]),
            )?;
        }
        Ok(())
    }

    fn check_len(&self, data: &DevRegion<'_>) -> Result<()> {
        let n = 1usize << self.lg_n;
        if data.bytes() < n * FR_BYTES {
            return Err(GpuError::Input(format!(
                "ntt of 2^{} points needs {} bytes, region has {}",
                self.lg_n,
                n * FR_BYTES,
                data.bytes()
            )));
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

    /// One pass (a DIF pass's `out` only on the last one).
    fn pass(
        &self,
        dev: &Device,
        kind: PassKind<'_>,
        data: &DevRegion<'_>,
        (r, l): (u32, u32),
        inverse: bool,
        scale: Scale<'_, 'a>,
    ) -> Result<()> {
        let t = if inverse {
            &self.omega_inv
        } else {
            &self.omega
        };
        let inner = self.inner_table(l, inverse)?;
        let tw = self
            .direct
            .iter()
            .find(|(x, _, _)| *x == r)
            .map(|(_, f, i)| if inverse { i } else { f });
        let (k, h) = (self.lg_n, self.h);
        let (mode, sc, s_tab) = match scale {
            Scale::None => (0u32, Scalar::ONE, None),
            Scale::By(c) => (1, c, None),
            Scale::Table(tb) => (2, Scalar::ONE, Some(tb)),
        };
        let (s_lo, s_hi) = (s_tab.map(|tb| &tb.lo), s_tab.map(|tb| &tb.hi));
        let sc = scalar_words(&sc);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: ((1u32 << (k - l)), 1, 1),
            block_dim: ((1u32 << (l - 1)).min(PASS_THREADS), 1, 1),
            shared_mem_bytes: 0,
        };
        // The grid covers the 2^(k-L) groups and each block loops over its 2^(L-1)
        // butterflies; mode 2 alone reads s_lo and s_hi.
        match kind {
            PassKind::Dif(out) => launch::ntt_dif_pass(
                dev, cfg, data, k, r, l, inner, &t.lo, &t.hi, h, tw, mode, sc, s_lo, s_hi, out,
            ),
            PassKind::Dit => launch::ntt_dit_pass(
                dev, cfg, data, k, r, l, inner, &t.lo, &t.hi, h, tw, mode, sc, s_lo, s_hi,
            ),
        }
    }

    fn dif(
        &self,
        dev: &Device,
        data: &DevRegion<'_>,
        inverse: bool,
        scale: Scale<'_, 'a>,
        out: Option<&DevRegion<'_>>,
    ) -> Result<()> {
        let last = self.passes.len() - 1;
        for (i, &(r, l)) in self.passes.iter().enumerate() {
            let (s, o) = if i == last {
                (scale, out)
            } else {
                (Scale::None, None)
            };
            self.pass(dev, PassKind::Dif(o), data, (r, l), inverse, s)?;
        }
        Ok(())
    }

    fn dit(
        &self,
        dev: &Device,
        data: &DevRegion<'_>,
        inverse: bool,
        scale: Scale<'_, 'a>,
    ) -> Result<()> {
        for (i, &(r, l)) in self.passes.iter().enumerate().rev() {
            let s = if i == 0 { scale } else { Scale::None };
            self.pass(dev, PassKind::Dit, data, (r, l), inverse, s)?;
        }
        Ok(())
    }

    fn bitrev(&self, dev: &Device, data: &DevRegion<'_>) -> Result<()> {
        let k = self.lg_n;
        launch::ntt_bitrev(dev, Device::grid(1u64 << k, 256), data, k)
    }

    fn coset_scale(
        &self,
        dev: &Device,
        data: &DevRegion<'_>,
        bitreversed: bool,
        t: &Table<'a>,
    ) -> Result<()> {
        let k = self.lg_n;
        launch::ntt_coset_scale(
            dev,
            Device::grid(1u64 << k, 256),
            data,
            k,
            u32::from(bitreversed),
            &t.lo,
            &t.hi,
            self.h,
        )
    }
}

/// out[i] = factor · base^i for i < count.
fn powers(
    dev: &Device,
    out: &DevRegion<'_>,
    base: Scalar,
    factor: Scalar,
    count: u32,
) -> Result<()> {
    launch::ntt_powers(
        dev,
        Device::grid(count as u64, 256),
        out,
        scalar_words(&base),
        scalar_words(&factor),
        count,
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
    fn direct_twists_are_the_passes_with_twists_up_to_2_18() {
        assert_eq!(direct_twists(10), Vec::<u32>::new(), "one pass, no twists");
        assert_eq!(direct_twists(16), vec![16]);
        assert_eq!(direct_twists(18), vec![18]);
        assert_eq!(direct_twists(20), Vec::<u32>::new(), "(20, 10), (10, 10)");
        assert_eq!(direct_twists(24), vec![16]);
        assert_eq!(direct_twists(27), vec![18]);
        // Counted in the plan's bytes: 2 × 8 MiB at 2^27.
        let without = NttPlan::table_bytes(20);
        assert!(NttPlan::table_bytes(27) > without + (16 << 20));
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
