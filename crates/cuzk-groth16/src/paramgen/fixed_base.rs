//! Fixed-base scalar multiplication: many scalars times one base point, the bulk of
//! parameter generation. [`FixedBaseMul`] is the seam for a device implementation;
//! [`CpuFixedBase`] is the CPU one.
//!
//! Technique (a signed-digit fixed-base comb; see Hankerson, Menezes, Vanstone, *Guide to
//! Elliptic Curve Cryptography*, §3.3.1, and Bernstein et al., "High-speed high-security
//! signatures", §4): with window width w, precompute for every window k the points
//! `j · 2^(w·k) · B` for j = 1..=2^(w−1), in affine form. A scalar is recoded into signed
//! digits d_k ∈ [−2^(w−1), 2^(w−1)], and `s · B = Σ_k sign(d_k) · T[k][|d_k|]`: one
//! addition per window and no doublings at all. The accumulators of a batch of scalars stay
//! affine, and each window's additions share one field inversion (Montgomery's trick).

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve};
use rayon::prelude::*;

/// A fixed-base multiplication failed (a device error, for device implementations).
#[derive(Debug, thiserror::Error)]
#[error("fixed-base multiplication on {backend}: {message}")]
pub struct FixedBaseError {
    /// Which implementation failed ("cpu", "gpu:0").
    pub backend: String,
    /// What went wrong.
    pub message: String,
}

/// Computes `scalars[i] · base` for every i, in affine form, in order. A zero scalar gives
/// the identity.
pub trait FixedBaseMul: Sync {
    /// Short name for logs ("cpu", "gpu:0").
    fn name(&self) -> String;

    /// G1: `scalars[i] · base`.
    ///
    /// # Errors
    /// [`FixedBaseError`] when the implementation fails (never, on the CPU).
    fn mul_g1(
        &self,
        base: G1Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G1Affine>, FixedBaseError>;

    /// G2: `scalars[i] · base`.
    ///
    /// # Errors
    /// [`FixedBaseError`] when the implementation fails (never, on the CPU).
    fn mul_g2(
        &self,
        base: G2Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G2Affine>, FixedBaseError>;

    /// The implementation's stage times summed over the calls since the last take (for
    /// a device: table build, kernels, transfers), in its own order; empty by default.
    fn take_stages(&self) -> Vec<(&'static str, std::time::Duration)> {
        Vec::new()
    }
}

/// The CPU implementation, parallel on the current rayon pool.
#[derive(Clone, Copy, Debug, Default)]
pub struct CpuFixedBase {
    /// Window width in bits; `None` picks one from the number of scalars.
    pub window_bits: Option<u32>,
}

impl FixedBaseMul for CpuFixedBase {
    fn name(&self) -> String {
        "cpu".into()
    }

    fn mul_g1(
        &self,
        base: G1Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G1Affine>, FixedBaseError> {
        Ok(mul_fixed(base, scalars, self.window_for(scalars.len())))
    }

    fn mul_g2(
        &self,
        base: G2Projective,
        scalars: &[Scalar],
    ) -> Result<Vec<G2Affine>, FixedBaseError> {
        Ok(mul_fixed(base, scalars, self.window_for(scalars.len())))
    }
}

impl CpuFixedBase {
    fn window_for(&self, n: usize) -> u32 {
        self.window_bits
            .map_or_else(|| best_window(n), |w| w.clamp(MIN_WINDOW, MAX_WINDOW))
    }
}

/// Scalars have at most 255 bits (r < 2^255).
const SCALAR_BITS: u32 = 255;
const MIN_WINDOW: u32 = 2;
/// A 16-bit G1 table is 16 windows × 32768 points × 96 B = 48 MiB; beyond that the
/// table outgrows the caches faster than it saves additions.
const MAX_WINDOW: u32 = 16;
/// Results normalized to affine per batch (one inversion each).
const BATCH: usize = 1024;

/// Windows needed for width w: ⌊255/w⌋ + 1 leaves room for the final carry of the signed
/// recoding (the top window holds at most 2^(255 mod w) ≤ 2^(w−1)).
fn n_windows(w: u32) -> usize {
    (SCALAR_BITS / w + 1) as usize
}

/// Minimizes additions: n·windows for the scalars plus about two per table entry
/// (its addition and its share of the normalization).
fn best_window(n: usize) -> u32 {
    (MIN_WINDOW..=MAX_WINDOW)
        .min_by_key(|&w| {
            let nw = n_windows(w) as u64;
            n as u64 * nw + 2 * nw * (1u64 << (w - 1))
        })
        .unwrap_or(MIN_WINDOW)
}

/// The signed digits of `s` for width w, least significant window first.
fn recode(s: &Scalar, w: u32, digits: &mut [i32]) {
    let bytes = s.to_repr();
    let mut limbs = [0u64; 4];
    for (limb, chunk) in limbs.iter_mut().zip(bytes.as_ref().chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *limb = u64::from_le_bytes(b);
    }
    let bit_window = |offset: u32| -> u32 {
        // w ≤ 16 bits starting at `offset`, possibly straddling two limbs; bits past 255
        // are zero.
        let (limb, shift) = ((offset / 64) as usize, offset % 64);
        let lo = limbs.get(limb).copied().unwrap_or(0) >> shift;
        let hi = match shift {
            0 => 0,
            _ => limbs.get(limb + 1).copied().unwrap_or(0) << (64 - shift),
        };
        ((lo | hi) & ((1u64 << w) - 1)) as u32
    };
    let half = 1i32 << (w - 1);
    let mut carry = 0i32;
    let last = digits.len() - 1;
    for (k, d) in digits.iter_mut().enumerate() {
        let raw = bit_window(k as u32 * w) as i32 + carry;
        if k < last && raw > half {
            *d = raw - (1i32 << w);
            carry = 1;
        } else {
            *d = raw;
            carry = 0;
        }
    }
}

/// What the comb needs from a group beyond `group::Curve`: Jacobian batch normalization
/// and the affine coordinates.
trait CombGroup: Curve + Send + Sync
where
    Self::AffineRepr: PrimeCurveAffine<Curve = Self> + Send + Sync,
{
    /// The coordinate field.
    type F: Field;
    fn normalize_batch(p: &[Self], out: &mut [Self::AffineRepr]);
    /// (x, y) of a non-identity point.
    fn coords(a: &Self::AffineRepr) -> (Self::F, Self::F);
    /// The point (x, y), which must be on the curve.
    fn from_coords(x: Self::F, y: Self::F) -> Self::AffineRepr;
}

/// `scalars[i] · base` for every i with the signed-digit comb, the accumulators kept in
/// affine form: per window, the additions of a whole batch share one field inversion
/// (Montgomery's trick), so an addition costs about 5 products and a square instead of a
/// mixed Jacobian addition's 11, and no normalization is left at the end. On a 2-core VM
/// like CI's, `cuzk gen params --kind porep --sector-size 2KiB --cpu` (10.2M G1 and 0.7M
/// G2 points) went from 135 s to 81 s; the test suite generates that file and SnapDeals'.
fn mul_fixed<G>(base: G, scalars: &[Scalar], w: u32) -> Vec<G::AffineRepr>
where
    G: CombGroup,
    G::AffineRepr: PrimeCurveAffine<Curve = G> + Send + Sync,
{
    let mut out = vec![G::AffineRepr::identity(); scalars.len()];
    if scalars.is_empty() {
        return out;
    }
    let nw = n_windows(w);
    let half = 1usize << (w - 1);
    let table = build_table(base, w, nw);
    out.par_chunks_mut(BATCH)
        .zip(scalars.par_chunks(BATCH))
        .for_each(|(out, scalars)| {
            let n = scalars.len();
            let mut digits = vec![0i32; n * nw];
            for (d, s) in digits.chunks_exact_mut(nw).zip(scalars) {
                recode(s, w, d);
            }
            // Accumulator i is (x[i], y[i]) unless it is still the identity.
            let (mut x, mut y) = (vec![G::F::ZERO; n], vec![G::F::ZERO; n]);
            let mut identity = vec![true; n];
            let mut pending: Vec<(usize, G::F, G::F)> = Vec::with_capacity(n);
            let (mut dx, mut scratch) = (Vec::with_capacity(n), Vec::with_capacity(n));
            for k in 0..nw {
                pending.clear();
                dx.clear();
                for i in 0..n {
                    let d = digits[i * nw + k];
                    if d == 0 {
                        continue;
                    }
                    let (qx, qy) = G::coords(&table[k * half + d.unsigned_abs() as usize - 1]);
                    let qy = if d < 0 { -qy } else { qy };
                    if identity[i] {
                        (x[i], y[i], identity[i]) = (qx, qy, false);
                        continue;
                    }
                    let t = qx - x[i];
                    if bool::from(t.is_zero()) {
                        // The same x: the accumulator is ±Q. Not reachable with recoded
                        // digits (the accumulator's multiple of the base is smaller than
                        // Q's), handled anyway.
                        if qy == y[i] {
                            let p = G::from_coords(x[i], y[i]).to_curve().double().to_affine();
                            (x[i], y[i]) = G::coords(&p);
                        } else {
                            identity[i] = true;
                        }
                        continue;
                    }
                    pending.push((i, qx, qy));
                    dx.push(t);
                }
                batch_invert(&mut dx, &mut scratch);
                for (&(i, qx, qy), inv) in pending.iter().zip(&dx) {
                    let lambda = (qy - y[i]) * inv;
                    let x3 = lambda.square() - x[i] - qx;
                    y[i] = lambda * (x[i] - x3) - y[i];
                    x[i] = x3;
                }
            }
            for (i, o) in out.iter_mut().enumerate() {
                if !identity[i] {
                    *o = G::from_coords(x[i], y[i]);
                }
            }
        });
    out
}

/// `table[k·half + j − 1] = j · 2^(w·k) · base` for j = 1..=half, in affine form.
fn build_table<G>(base: G, w: u32, nw: usize) -> Vec<G::AffineRepr>
where
    G: CombGroup,
    G::AffineRepr: PrimeCurveAffine<Curve = G> + Send + Sync,
{
    let half = 1usize << (w - 1);
    let mut window_bases = Vec::with_capacity(nw);
    let mut b = base;
    for _ in 0..nw {
        window_bases.push(b);
        for _ in 0..w {
            b = b.double();
        }
    }
    let mut table = vec![G::AffineRepr::identity(); nw * half];
    table
        .par_chunks_mut(half)
        .zip(window_bases)
        .for_each(|(row, b)| {
            let mut multiples = Vec::with_capacity(half);
            let mut acc = b;
            for _ in 0..half {
                multiples.push(acc);
                acc += b;
            }
            for (out, chunk) in row.chunks_mut(BATCH).zip(multiples.chunks(BATCH)) {
                G::normalize_batch(chunk, out);
            }
        });
    table
}

/// Montgomery's trick over any field: replaces each nonzero `z` by its inverse with one
/// inversion; zeros stay zero.
fn batch_invert<F: Field>(z: &mut [F], scratch: &mut Vec<F>) {
    scratch.clear();
    let mut acc = F::ONE;
    for x in z.iter() {
        scratch.push(acc);
        if !bool::from(x.is_zero()) {
            acc *= x;
        }
    }
    // acc is a product of nonzero elements, so it is invertible.
    let mut inv = Option::<F>::from(acc.invert()).unwrap_or(F::ZERO);
    for (x, prefix) in z.iter_mut().zip(scratch.iter()).rev() {
        if !bool::from(x.is_zero()) {
            let x_inv = inv * prefix;
            inv *= *x;
            *x = x_inv;
        }
    }
}

impl CombGroup for G1Projective {
    type F = Fp;
    fn coords(a: &G1Affine) -> (Fp, Fp) {
        (a.x(), a.y())
    }
    fn from_coords(x: Fp, y: Fp) -> G1Affine {
        G1Affine::from_raw_unchecked(x, y, false)
    }
    /// blst keeps points in Jacobian coordinates: x = X/Z², y = Y/Z³.
    fn normalize_batch(p: &[Self], out: &mut [G1Affine]) {
        let mut z: Vec<Fp> = p.iter().map(|p| p.z()).collect();
        batch_invert(&mut z, &mut Vec::with_capacity(p.len()));
        for ((p, z_inv), out) in p.iter().zip(z).zip(out.iter_mut()) {
            *out = match bool::from(z_inv.is_zero()) {
                true => G1Affine::identity(),
                false => {
                    let z_inv2 = z_inv.square();
                    G1Affine::from_raw_unchecked(p.x() * z_inv2, p.y() * z_inv2 * z_inv, false)
                }
            };
        }
    }
}

impl CombGroup for G2Projective {
    type F = Fp2;
    fn coords(a: &G2Affine) -> (Fp2, Fp2) {
        (a.x(), a.y())
    }
    fn from_coords(x: Fp2, y: Fp2) -> G2Affine {
        G2Affine::from_raw_unchecked(x, y, false)
    }
    /// Jacobian over Fp2, as for G1.
    fn normalize_batch(p: &[Self], out: &mut [G2Affine]) {
        let mut z: Vec<Fp2> = p.iter().map(|p| p.z()).collect();
        batch_invert(&mut z, &mut Vec::with_capacity(p.len()));
        for ((p, z_inv), out) in p.iter().zip(z).zip(out.iter_mut()) {
            *out = match bool::from(z_inv.is_zero()) {
                true => G2Affine::identity(),
                false => {
                    let z_inv2 = z_inv.square();
                    G2Affine::from_raw_unchecked(p.x() * z_inv2, p.y() * z_inv2 * z_inv, false)
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Group;
    use rand_chacha::rand_core::SeedableRng;

    #[test]
    fn recode_reconstructs_the_scalar() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut cases = vec![Scalar::ZERO, Scalar::ONE, -Scalar::ONE];
        cases.extend((0..50).map(|_| Scalar::random(&mut rng)));
        for w in MIN_WINDOW..=MAX_WINDOW {
            let mut digits = vec![0i32; n_windows(w)];
            let radix = Scalar::from(1u64 << w);
            for s in &cases {
                recode(s, w, &mut digits);
                let half = 1i32 << (w - 1);
                assert!(
                    digits.iter().all(|d| d.abs() <= half),
                    "w={w} digits {digits:?}"
                );
                let mut back = Scalar::ZERO;
                for &d in digits.iter().rev() {
                    let d_abs = Scalar::from(d.unsigned_abs() as u64);
                    back = back * radix + if d < 0 { -d_abs } else { d_abs };
                }
                assert_eq!(back, *s, "w={w}");
            }
        }
    }

    #[test]
    fn matches_plain_multiplication() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let g1 = G1Projective::random(&mut rng);
        let g2 = G2Projective::random(&mut rng);
        let mut scalars: Vec<Scalar> = (0..37).map(|_| Scalar::random(&mut rng)).collect();
        // Zero, ±1, small values, and powers of two whose low windows are all zero (the
        // accumulator stays the identity for several windows).
        scalars.extend([Scalar::ZERO, Scalar::ONE, -Scalar::ONE, Scalar::from(2u64)]);
        scalars.extend([Scalar::from(1u64 << 40), -Scalar::from(1u64 << 63)]);
        scalars.push(Scalar::from(3u64).pow_vartime([150u64]));
        for w in [2, 5, 8, 15, 16] {
            let fb = CpuFixedBase {
                window_bits: Some(w),
            };
            let got1 = fb.mul_g1(g1, &scalars).expect("cpu never fails");
            let got2 = fb.mul_g2(g2, &scalars).expect("cpu never fails");
            for (i, s) in scalars.iter().enumerate() {
                assert_eq!(got1[i], (g1 * s).to_affine(), "g1 w={w} i={i}");
                assert_eq!(got2[i], (g2 * s).to_affine(), "g2 w={w} i={i}");
            }
        }
    }
}
