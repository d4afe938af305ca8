//! The evaluation domain's polynomials at the secret point τ: the Lagrange basis
//! L_j(τ) and the powers τ^i, both in parallel.
//!
//! bellperson's generator gets L_j(τ) from an inverse FFT of the powers of τ; we use the
//! closed form instead, `L_j(τ) = ω^j · (τ^n − 1) / (n · (τ − ω^j))`, which is the same
//! vector (ifft of τ^i is (1/n) Σ_i (τ ω^−j)^i, a geometric sum) in O(n) with one
//! inversion per chunk, and leaves this module independent of the prover's NTT.
//! ω is the same root of unity bellperson's `EvaluationDomain` uses: `ROOT_OF_UNITY`
//! squared (32 − lg n) times.

use ff::{Field, PrimeField};
use rayon::prelude::*;

use super::ParamgenError;
use crate::Scalar;

/// Elements per parallel chunk (each chunk pays one exponentiation and one inversion).
const CHUNK: usize = 1 << 12;

/// The primitive 2^lg-th root of unity of the domain.
///
/// # Errors
/// [`ParamgenError::TooLarge`] when lg exceeds the field's two-adicity (32).
pub fn omega(lg: u32) -> Result<Scalar, ParamgenError> {
    if lg > Scalar::S {
        return Err(ParamgenError::TooLarge {
            what: "domain (log2)",
            count: u64::from(lg),
        });
    }
    let mut w = Scalar::ROOT_OF_UNITY;
    for _ in lg..Scalar::S {
        w = w.square();
    }
    Ok(w)
}

/// `[L_0(τ), …, L_{n−1}(τ)]` for the domain of size n = 2^lg.
///
/// # Errors
/// [`ParamgenError::DegenerateTau`] when τ is itself in the domain (τ^n = 1), which a
/// random τ is with probability n/r; [`ParamgenError::TooLarge`] as for [`omega`].
pub fn lagrange_at(tau: Scalar, lg: u32) -> Result<Vec<Scalar>, ParamgenError> {
    let n = 1usize << lg;
    let w = omega(lg)?;
    let z = tau.pow_vartime([n as u64]) - Scalar::ONE;
    if bool::from(z.is_zero()) {
        return Err(ParamgenError::DegenerateTau);
    }
    // Scalar::from(n) is nonzero for n ≤ 2^32 < r.
    let n_inv = Option::<Scalar>::from(Scalar::from(n as u64).invert()).unwrap_or(Scalar::ZERO);
    let scale = z * n_inv;
    let mut out = super::assembly::zeros(n);
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(c, chunk)| {
            let start = c * CHUNK;
            let mut w_j = w.pow_vartime([start as u64]);
            let mut omegas = Vec::with_capacity(chunk.len());
            // chunk[j] = τ − ω^j, then its inverse by Montgomery's trick.
            for d in chunk.iter_mut() {
                omegas.push(w_j);
                *d = tau - w_j;
                w_j *= w;
            }
            let mut prefix = Vec::with_capacity(chunk.len());
            let mut acc = Scalar::ONE;
            for d in chunk.iter() {
                prefix.push(acc);
                acc *= d;
            }
            // Every τ − ω^j is nonzero because τ^n ≠ 1, so acc is invertible.
            let mut inv = Option::<Scalar>::from(acc.invert()).unwrap_or(Scalar::ZERO);
            for ((d, p), w_j) in chunk.iter_mut().zip(prefix).zip(omegas).rev() {
                let d_inv = inv * p;
                inv *= *d;
                *d = w_j * d_inv * scale;
            }
        });
    Ok(out)
}

/// `[c, c·τ, c·τ², …]`, `len` elements.
pub fn scaled_powers(tau: Scalar, c: Scalar, len: usize) -> Vec<Scalar> {
    let mut out = super::assembly::zeros(len);
    out.par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(k, chunk)| {
            let mut p = c * tau.pow_vartime([(k * CHUNK) as u64]);
            for x in chunk {
                *x = p;
                p *= tau;
            }
        });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::rand_core::SeedableRng;

    /// Σ_j L_j(τ) · f(ω^j) = f(τ) for any f of degree < n: check f = 1, x, x^(n−1).
    #[test]
    fn lagrange_interpolates_low_degree_polynomials() {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for lg in [0u32, 1, 3, 13] {
            let tau = Scalar::random(&mut rng);
            let l = lagrange_at(tau, lg).expect("random tau is not in the domain");
            let w = omega(lg).expect("small domain");
            let n = 1u64 << lg;
            for deg in [0, 1, n - 1].into_iter().filter(|&d| d < n) {
                let mut sum = Scalar::ZERO;
                for (j, l_j) in l.iter().enumerate() {
                    sum += l_j * w.pow_vartime([j as u64 * deg]);
                }
                assert_eq!(sum, tau.pow_vartime([deg]), "lg={lg} deg={deg}");
            }
        }
    }

    #[test]
    fn tau_in_the_domain_is_rejected() {
        let w = omega(4).expect("small domain");
        assert!(matches!(
            lagrange_at(w.square(), 4),
            Err(ParamgenError::DegenerateTau)
        ));
        assert!(matches!(omega(33), Err(ParamgenError::TooLarge { .. })));
    }

    #[test]
    fn powers_are_consecutive() {
        let tau = Scalar::from(3u64);
        let p = scaled_powers(tau, Scalar::from(2u64), CHUNK + 5);
        assert_eq!(p[0], Scalar::from(2u64));
        for i in 1..p.len() {
            assert_eq!(p[i], p[i - 1] * tau, "i={i}");
        }
    }
}
