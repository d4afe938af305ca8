//! Number-theoretic transforms over Fr on rayon: owns [`Domain`] (roots of unity, twiddle
//! tables, coset constants for one size) and [`NttError`]. The H polynomial built from
//! these transforms lives in `h.rs`.
//!
//! Two kernels do all the work and never bit-reverse:
//! - [`Domain::dif`] (Gentleman–Sande, decimation in frequency): natural order in,
//!   bit-reversed order out;
//! - [`Domain::dit`] (Cooley–Tukey, decimation in time): bit-reversed order in, natural
//!   order out.
//!
//! Chaining a DIF with a DIT keeps every element in place, so the H pipeline
//! (inverse, coset forward, pointwise, coset inverse) needs no permutation pass; the
//! natural-order wrappers ([`Domain::fft`], [`Domain::ifft`], ...) add one for callers who
//! want plain transforms. Both kernels fuse two radix-2 stages into one radix-4 pass over
//! memory while the butterflies span more than a cache block, then finish each block in
//! cache (a block of 2^12 scalars is 128 KiB).
//!
//! The domain matches bellperson 0.27's `EvaluationDomain` (`src/domain.rs`): ω is
//! `ROOT_OF_UNITY` squared down to order 2^lg_n, the coset is `MULTIPLICATIVE_GENERATOR · ⟨ω⟩`.

use ff::{Field, PrimeField};
use rayon::prelude::*;

use crate::Scalar;

/// log2 of the scalars a task transforms in cache after the radix-4 passes.
const LG_BLOCK: u32 = 12;
/// Butterflies per rayon task in the passes over the whole vector.
const PAR_CHUNK: usize = 1 << 10;

/// A size the transforms cannot handle.
#[derive(Debug, thiserror::Error)]
pub enum NttError {
    /// Fr has roots of unity only up to order 2^32.
    #[error("domain 2^{lg_n} too large: Fr has 2-adicity {max}")]
    TooLarge {
        /// Requested log2 size.
        lg_n: u32,
        /// Fr's two-adicity (32).
        max: u32,
    },
    /// The vector's length is not the domain's size.
    #[error("vector of length {got} for a domain of size {n}")]
    Length {
        /// Domain size.
        n: usize,
        /// Vector length.
        got: usize,
    },
}

/// Everything the transforms need for one size 2^lg_n, computed once.
#[derive(Debug, Clone)]
pub struct Domain {
    lg_n: u32,
    n: usize,
    /// ω^j for j < n/2 (forward twiddles).
    tw: Vec<Scalar>,
    /// ω^−j for j < n/2 (inverse twiddles).
    tw_inv: Vec<Scalar>,
    /// 1/n.
    n_inv: Scalar,
    /// The coset generator g.
    g: Scalar,
    /// 1/g.
    g_inv: Scalar,
}

impl Domain {
    /// The domain of size 2^lg_n.
    ///
    /// # Errors
    /// [`NttError::TooLarge`] when lg_n exceeds Fr's two-adicity.
    pub fn new(lg_n: u32) -> Result<Domain, NttError> {
        if lg_n > Scalar::S {
            return Err(NttError::TooLarge {
                lg_n,
                max: Scalar::S,
            });
        }
        let n = 1usize << lg_n;
        let mut omega = Scalar::ROOT_OF_UNITY;
        for _ in lg_n..Scalar::S {
            omega = omega.square();
        }
        // ω, 2 and g are nonzero field elements, so their inverses exist.
        let omega_inv = Option::<Scalar>::from(omega.invert()).unwrap_or(Scalar::ONE);
        let n_inv = Option::<Scalar>::from(Scalar::from(n as u64).invert()).unwrap_or(Scalar::ONE);
        let g = Scalar::MULTIPLICATIVE_GENERATOR;
        let g_inv = Option::<Scalar>::from(g.invert()).unwrap_or(Scalar::ONE);
        Ok(Domain {
            lg_n,
            n,
            tw: powers(omega, Scalar::ONE, n / 2),
            tw_inv: powers(omega_inv, Scalar::ONE, n / 2),
            n_inv,
            g,
            g_inv,
        })
    }

    /// log2 of the size.
    pub fn lg_n(&self) -> u32 {
        self.lg_n
    }

    /// The size n.
    pub fn n(&self) -> usize {
        self.n
    }

    /// 1/n.
    pub fn n_inv(&self) -> Scalar {
        self.n_inv
    }

    /// The coset generator g (`MULTIPLICATIVE_GENERATOR`).
    pub fn g(&self) -> Scalar {
        self.g
    }

    /// 1/g.
    pub fn g_inv(&self) -> Scalar {
        self.g_inv
    }

    /// 1 / Z(g) where Z(x) = xⁿ − 1 vanishes on the domain: dividing by Z on the coset.
    pub fn z_inv_on_coset(&self) -> Scalar {
        let z = self.g.pow_vartime([self.n as u64]) - Scalar::ONE;
        // g generates Fr*, so gⁿ ≠ 1 for n < r − 1 and z is nonzero.
        Option::<Scalar>::from(z.invert()).unwrap_or(Scalar::ZERO)
    }

    /// DIF transform in place: natural order in, bit-reversed out. `inverse` uses ω⁻¹
    /// (without the 1/n factor).
    ///
    /// # Errors
    /// [`NttError::Length`] when `x.len() != n`.
    pub fn dif(&self, x: &mut [Scalar], inverse: bool) -> Result<(), NttError> {
        self.check(x)?;
        dif(x, if inverse { &self.tw_inv } else { &self.tw });
        Ok(())
    }

    /// DIT transform in place: bit-reversed order in, natural out. `inverse` uses ω⁻¹
    /// (without the 1/n factor).
    ///
    /// # Errors
    /// [`NttError::Length`] when `x.len() != n`.
    pub fn dit(&self, x: &mut [Scalar], inverse: bool) -> Result<(), NttError> {
        self.check(x)?;
        dit(x, if inverse { &self.tw_inv } else { &self.tw });
        Ok(())
    }

    /// Evaluations from coefficients: `x[k] ← Σ_i x[i]·ω^{ik}`, natural order.
    ///
    /// # Errors
    /// [`NttError::Length`] when `x.len() != n`.
    pub fn fft(&self, x: &mut [Scalar]) -> Result<(), NttError> {
        self.dif(x, false)?;
        bit_reverse(x);
        Ok(())
    }

    /// Coefficients from evaluations (inverse of [`Self::fft`]).
    ///
    /// # Errors
    /// [`NttError::Length`] when `x.len() != n`.
    pub fn ifft(&self, x: &mut [Scalar]) -> Result<(), NttError> {
        self.dif(x, true)?;
        bit_reverse(x);
        scale(x, self.n_inv);
        Ok(())
    }

    /// Evaluations on the coset g·⟨ω⟩ from coefficients: `x[k] ← Σ_i x[i]·(g·ω^k)^i`.
    ///
    /// # Errors
    /// [`NttError::Length`] when `x.len() != n`.
    pub fn coset_fft(&self, x: &mut [Scalar]) -> Result<(), NttError> {
        self.check(x)?;
        distribute_powers(x, self.g, Scalar::ONE);
        self.fft(x)
    }

    /// Coefficients from evaluations on the coset (inverse of [`Self::coset_fft`]).
    ///
    /// # Errors
    /// [`NttError::Length`] when `x.len() != n`.
    pub fn icoset_fft(&self, x: &mut [Scalar]) -> Result<(), NttError> {
        self.ifft(x)?;
        distribute_powers(x, self.g_inv, Scalar::ONE);
        Ok(())
    }

    fn check(&self, x: &[Scalar]) -> Result<(), NttError> {
        if x.len() != self.n {
            return Err(NttError::Length {
                n: self.n,
                got: x.len(),
            });
        }
        Ok(())
    }
}

/// `[c·base^0, c·base^1, …, c·base^(len−1)]`, computed in parallel chunks.
pub fn powers(base: Scalar, c: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; len];
    distribute_powers_from(&mut out, base, c, true);
    out
}

/// `x[i] ← x[i]·c·base^i`, in parallel chunks.
pub fn distribute_powers(x: &mut [Scalar], base: Scalar, c: Scalar) {
    distribute_powers_from(x, base, c, false);
}

/// `x[i] ← (overwrite ? 1 : x[i])·c·base^i`.
fn distribute_powers_from(x: &mut [Scalar], base: Scalar, c: Scalar, overwrite: bool) {
    x.par_chunks_mut(PAR_CHUNK)
        .enumerate()
        .for_each(|(ci, chunk)| {
            let mut p = c * base.pow_vartime([(ci * PAR_CHUNK) as u64]);
            for v in chunk.iter_mut() {
                if overwrite {
                    *v = p;
                } else {
                    *v *= p;
                }
                p *= base;
            }
        });
}

/// `x[i] ← x[i]·c`.
pub fn scale(x: &mut [Scalar], c: Scalar) {
    x.par_chunks_mut(PAR_CHUNK)
        .for_each(|chunk| chunk.iter_mut().for_each(|v| *v *= c));
}

/// `i` with its low `lg_n` bits reversed.
#[inline]
pub fn bitrev(i: usize, lg_n: u32) -> usize {
    if lg_n == 0 {
        0
    } else {
        i.reverse_bits() >> (usize::BITS - lg_n)
    }
}

/// Permutes `x` (of power-of-two length) into bit-reversed index order.
pub fn bit_reverse(x: &mut [Scalar]) {
    let n = x.len();
    if n <= 2 {
        return;
    }
    let lg_n = n.trailing_zeros();
    for i in 0..n {
        let j = bitrev(i, lg_n);
        if i < j {
            x.swap(i, j);
        }
    }
}

/// Gentleman–Sande butterflies, natural → bit-reversed; `tw[j] = ω^j`, `tw.len() == n/2`.
fn dif(x: &mut [Scalar], tw: &[Scalar]) {
    let n = x.len();
    let block = n.min(1 << LG_BLOCK);
    let mut half = n / 2;
    // A stage of span `half` works on groups of 2·half elements: it must go over the
    // whole vector while 2·half > block. Two such stages at a time, then maybe one more.
    while half / 2 >= block {
        dif_radix4_pass(x, half, tw);
        half /= 4;
    }
    if half >= block {
        dif_radix2_pass(x, half, tw);
        half /= 2;
    }
    // What remains fits in a block: finish each block in cache.
    if half >= 1 {
        x.par_chunks_mut(2 * half)
            .for_each(|b| dif_serial(b, half, n, tw));
    }
}

/// Cooley–Tukey butterflies, bit-reversed → natural; `tw[j] = ω^j`, `tw.len() == n/2`.
fn dit(x: &mut [Scalar], tw: &[Scalar]) {
    let n = x.len();
    if n <= 1 {
        return;
    }
    let block = n.min(1 << LG_BLOCK);
    x.par_chunks_mut(block)
        .for_each(|b| dit_serial(b, block / 2, n, tw));
    let mut half = block;
    if half < n && (n / half).trailing_zeros() % 2 == 1 {
        dit_radix2_pass(x, half, tw);
        half *= 2;
    }
    while half < n {
        dit_radix4_pass(x, half, tw);
        half *= 4;
    }
}

/// DIF stages with spans `top_half` down to 1 on one block, serially.
fn dif_serial(x: &mut [Scalar], top_half: usize, n: usize, tw: &[Scalar]) {
    let mut half = top_half;
    while half >= 1 {
        let stride = n / (2 * half);
        for blk in x.chunks_exact_mut(2 * half) {
            let (lo, hi) = blk.split_at_mut(half);
            for (j, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let t = *u - *v;
                *u += *v;
                *v = if j == 0 { t } else { t * tw[j * stride] };
            }
        }
        half /= 2;
    }
}

/// DIT stages with spans 1 up to `top_half` on one block, serially.
fn dit_serial(x: &mut [Scalar], top_half: usize, n: usize, tw: &[Scalar]) {
    let mut half = 1;
    while half <= top_half {
        let stride = n / (2 * half);
        for blk in x.chunks_exact_mut(2 * half) {
            let (lo, hi) = blk.split_at_mut(half);
            for (j, (u, v)) in lo.iter_mut().zip(hi.iter_mut()).enumerate() {
                let t = if j == 0 { *v } else { *v * tw[j * stride] };
                *v = *u - t;
                *u += t;
            }
        }
        half *= 2;
    }
}

/// One DIF stage of span `half` over the whole vector.
fn dif_radix2_pass(x: &mut [Scalar], half: usize, tw: &[Scalar]) {
    let stride = x.len() / (2 * half);
    x.par_chunks_mut(2 * half).for_each(|blk| {
        let (lo, hi) = blk.split_at_mut(half);
        lo.par_chunks_mut(PAR_CHUNK)
            .zip(hi.par_chunks_mut(PAR_CHUNK))
            .enumerate()
            .for_each(|(ci, (l, h))| {
                let j0 = ci * PAR_CHUNK;
                for (j, (u, v)) in l.iter_mut().zip(h.iter_mut()).enumerate() {
                    let t = *u - *v;
                    *u += *v;
                    *v = t * tw[(j0 + j) * stride];
                }
            });
    });
}

/// One DIT stage of span `half` over the whole vector.
fn dit_radix2_pass(x: &mut [Scalar], half: usize, tw: &[Scalar]) {
    let stride = x.len() / (2 * half);
    x.par_chunks_mut(2 * half).for_each(|blk| {
        let (lo, hi) = blk.split_at_mut(half);
        lo.par_chunks_mut(PAR_CHUNK)
            .zip(hi.par_chunks_mut(PAR_CHUNK))
            .enumerate()
            .for_each(|(ci, (l, h))| {
                let j0 = ci * PAR_CHUNK;
                for (j, (u, v)) in l.iter_mut().zip(h.iter_mut()).enumerate() {
                    let t = *v * tw[(j0 + j) * stride];
                    *v = *u - t;
                    *u += t;
                }
            });
    });
}

/// Two DIF stages (spans `half` then `half/2`) in one pass: each group of four elements
/// `x[j], x[j+q], x[j+2q], x[j+3q]` (q = half/2) goes through both stages in registers.
fn dif_radix4_pass(x: &mut [Scalar], half: usize, tw: &[Scalar]) {
    let n = x.len();
    let q = half / 2;
    let s1 = n / (2 * half); // twiddle stride of the first stage
    let s2 = 2 * s1; // and of the second
    x.par_chunks_mut(2 * half).for_each(|blk| {
        let (lo, hi) = blk.split_at_mut(half);
        let (x0, x1) = lo.split_at_mut(q);
        let (x2, x3) = hi.split_at_mut(q);
        x0.par_chunks_mut(PAR_CHUNK)
            .zip(x1.par_chunks_mut(PAR_CHUNK))
            .zip(
                x2.par_chunks_mut(PAR_CHUNK)
                    .zip(x3.par_chunks_mut(PAR_CHUNK)),
            )
            .enumerate()
            .for_each(|(ci, ((c0, c1), (c2, c3)))| {
                let j0 = ci * PAR_CHUNK;
                for j in 0..c0.len() {
                    let jj = j0 + j;
                    // Stage 1 (span half): pairs (0,2) and (1,3).
                    let (a0, a2) = (c0[j] + c2[j], (c0[j] - c2[j]) * tw[jj * s1]);
                    let (a1, a3) = (c1[j] + c3[j], (c1[j] - c3[j]) * tw[(jj + q) * s1]);
                    // Stage 2 (span q): pairs (0,1) and (2,3), same twiddle.
                    let w = &tw[jj * s2];
                    c0[j] = a0 + a1;
                    c1[j] = (a0 - a1) * w;
                    c2[j] = a2 + a3;
                    c3[j] = (a2 - a3) * w;
                }
            });
    });
}

/// Two DIT stages (spans `half` then `2·half`) in one pass, the mirror of
/// [`dif_radix4_pass`].
fn dit_radix4_pass(x: &mut [Scalar], half: usize, tw: &[Scalar]) {
    let n = x.len();
    let s1 = n / (2 * half); // twiddle stride of the first stage (span half)
    let s2 = s1 / 2; // and of the second (span 2·half)
    x.par_chunks_mut(4 * half).for_each(|blk| {
        let (lo, hi) = blk.split_at_mut(2 * half);
        let (x0, x1) = lo.split_at_mut(half);
        let (x2, x3) = hi.split_at_mut(half);
        x0.par_chunks_mut(PAR_CHUNK)
            .zip(x1.par_chunks_mut(PAR_CHUNK))
            .zip(
                x2.par_chunks_mut(PAR_CHUNK)
                    .zip(x3.par_chunks_mut(PAR_CHUNK)),
            )
            .enumerate()
            .for_each(|(ci, ((c0, c1), (c2, c3)))| {
                let j0 = ci * PAR_CHUNK;
                for j in 0..c0.len() {
                    let jj = j0 + j;
                    // Stage 1 (span half): pairs (0,1) and (2,3), same twiddle.
                    let w = &tw[jj * s1];
                    let t1 = c1[j] * w;
                    let t3 = c3[j] * w;
                    let (a0, a1) = (c0[j] + t1, c0[j] - t1);
                    let (a2, a3) = (c2[j] + t3, c2[j] - t3);
                    // Stage 2 (span 2·half): pairs (0,2) and (1,3).
                    let t2 = a2 * tw[jj * s2];
                    let t3 = a3 * tw[(jj + half) * s2];
                    c0[j] = a0 + t2;
                    c2[j] = a0 - t2;
                    c1[j] = a1 + t3;
                    c3[j] = a1 - t3;
                }
            });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// O(n²) reference: `Σ_i x[i]·w^{ik}`.
    fn naive(x: &[Scalar], w: Scalar) -> Vec<Scalar> {
        (0..x.len())
            .map(|k| {
                let wk = w.pow_vartime([k as u64]);
                let mut acc = Scalar::ZERO;
                let mut p = Scalar::ONE;
                for v in x {
                    acc += *v * p;
                    p *= wk;
                }
                acc
            })
            .collect()
    }

    fn omega_of(lg_n: u32) -> Scalar {
        let mut w = Scalar::ROOT_OF_UNITY;
        for _ in lg_n..Scalar::S {
            w = w.square();
        }
        w
    }

    fn random(n: usize, seed: u64) -> Vec<Scalar> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n).map(|_| Scalar::random(&mut rng)).collect()
    }

    #[test]
    fn fft_matches_naive_dft() {
        for lg_n in 0..=7 {
            let d = Domain::new(lg_n).unwrap();
            let x = random(d.n(), lg_n as u64);
            let mut y = x.clone();
            d.fft(&mut y).unwrap();
            let omega = omega_of(lg_n);
            assert_eq!(y, naive(&x, omega), "lg_n {lg_n}");
        }
    }

    #[test]
    fn round_trips_cover_radix4_and_block_paths() {
        // 2^13 and 2^14: one radix-2 / one radix-4 pass above the 2^12 block; 2^15 both.
        for lg_n in [1, 2, 12, 13, 14, 15] {
            let d = Domain::new(lg_n).unwrap();
            let x = random(d.n(), 100 + lg_n as u64);
            let mut y = x.clone();
            d.fft(&mut y).unwrap();
            // Check a few outputs against the definition.
            let omega = omega_of(lg_n);
            for k in [0usize, 1, d.n() / 2, d.n() - 1] {
                let wk = omega.pow_vartime([k as u64]);
                let mut acc = Scalar::ZERO;
                let mut p = Scalar::ONE;
                for v in &x {
                    acc += *v * p;
                    p *= wk;
                }
                assert_eq!(y[k], acc, "lg_n {lg_n} k {k}");
            }
            d.ifft(&mut y).unwrap();
            assert_eq!(y, x, "ifft∘fft lg_n {lg_n}");
            d.coset_fft(&mut y).unwrap();
            d.icoset_fft(&mut y).unwrap();
            assert_eq!(y, x, "icoset∘coset lg_n {lg_n}");
            // dif then dit with the inverse twiddles and 1/n is the identity too.
            d.dif(&mut y, false).unwrap();
            d.dit(&mut y, true).unwrap();
            scale(&mut y, d.n_inv());
            assert_eq!(y, x, "dit∘dif lg_n {lg_n}");
        }
    }

    #[test]
    fn coset_fft_evaluates_on_the_coset() {
        let d = Domain::new(5).unwrap();
        let x = random(d.n(), 7);
        let mut y = x.clone();
        d.coset_fft(&mut y).unwrap();
        let omega = omega_of(5);
        for k in [0usize, 3, 31] {
            let pt = d.g() * omega.pow_vartime([k as u64]);
            let mut acc = Scalar::ZERO;
            for v in x.iter().rev() {
                acc = acc * pt + v;
            }
            assert_eq!(y[k], acc);
        }
    }

    #[test]
    fn bad_sizes_are_errors() {
        assert!(matches!(
            Domain::new(33),
            Err(NttError::TooLarge { lg_n: 33, max: 32 })
        ));
        let d = Domain::new(3).unwrap();
        let mut x = vec![Scalar::ZERO; 7];
        assert!(matches!(
            d.fft(&mut x),
            Err(NttError::Length { n: 8, got: 7 })
        ));
    }
}
