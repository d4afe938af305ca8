//! The H polynomial on the CPU: owns [`HPlan`] (a [`Domain`] plus the coset table, built
//! once per size) and [`HPlan::compute_h`]. The transforms themselves live in `ntt.rs`,
//! the MSM over the result in `msm.rs`.
//!
//! Same arithmetic as bellperson 0.27's `execute_fft` (`src/groth16/prover/native.rs`):
//! iNTT a, b, c → coset NTT → h = (a·b − c)/Z on the coset → coset iNTT, keeping the first
//! n − 1 coefficients. Ours runs 7 transforms with no bit-reversal pass and folds every
//! scaling into another pass:
//! 1. a, b, c (natural evaluations) → DIF with ω⁻¹ → coefficients·n in bit-reversed
//!    order; multiply position p by g^bitrev(p)/n (the 1/n of the inverse and the coset
//!    shift in one pass) → DIT with ω → natural evaluations on the coset g·⟨ω⟩;
//! 2. a ← a·b − c pointwise;
//! 3. DIF with ω⁻¹ → bit-reversed; `h[i] = a[bitrev(i)] · g^−i · 1/n · 1/Z(g)` (the
//!    inverse's 1/n, the coset unshift and the division by Z = xⁿ − 1, constant on the
//!    coset, in one gather).

use ff::Field;
use rayon::prelude::*;

use super::ntt::{bitrev, Domain, NttError};
use crate::Scalar;

/// Elements per rayon task in the elementwise passes.
const PAR_CHUNK: usize = 1 << 12;

/// What computing H at one domain size needs, built once and reused across proofs.
#[derive(Debug, Clone)]
pub struct HPlan {
    domain: Domain,
    /// `g^bitrev(p) / n` at position p.
    coset_bitrev: Vec<Scalar>,
    /// `1 / (n · Z(g))`.
    unscale: Scalar,
}

impl HPlan {
    /// The plan for domain size 2^lg_n.
    ///
    /// # Errors
    /// [`NttError::TooLarge`] for sizes Fr cannot transform.
    pub fn new(lg_n: u32) -> Result<HPlan, NttError> {
        let domain = Domain::new(lg_n)?;
        let natural = super::ntt::powers(domain.g(), domain.n_inv(), domain.n());
        let coset_bitrev = (0..domain.n())
            .into_par_iter()
            .map(|p| natural[bitrev(p, lg_n)])
            .collect();
        let unscale = domain.n_inv() * domain.z_inv_on_coset();
        Ok(HPlan {
            domain,
            coset_bitrev,
            unscale,
        })
    }

    /// The underlying domain.
    pub fn domain(&self) -> &Domain {
        &self.domain
    }

    /// The coefficients h_0 … h_{n−2} of h = (A·B − C)/Z, where A, B, C interpolate the
    /// evaluations `a`, `b`, `c` (zero-padded to n) over the domain.
    ///
    /// # Errors
    /// [`NttError::Length`] when an input is longer than the domain.
    pub fn compute_h(
        &self,
        a: &[Scalar],
        b: &[Scalar],
        c: &[Scalar],
    ) -> Result<Vec<Scalar>, NttError> {
        let n = self.domain.n();
        for v in [a, b, c] {
            if v.len() > n {
                return Err(NttError::Length { n, got: v.len() });
            }
        }
        let to_coset = |v: &[Scalar]| -> Result<Vec<Scalar>, NttError> {
            let mut x = padded(v, n);
            self.domain.dif(&mut x, true)?;
            x.par_chunks_mut(PAR_CHUNK)
                .zip(self.coset_bitrev.par_chunks(PAR_CHUNK))
                .for_each(|(xs, ts)| xs.iter_mut().zip(ts).for_each(|(x, t)| *x *= t));
            self.domain.dit(&mut x, false)?;
            Ok(x)
        };
        let (ra, (rb, rc)) = rayon::join(
            || to_coset(a),
            || rayon::join(|| to_coset(b), || to_coset(c)),
        );
        let (mut a, b, c) = (ra?, rb?, rc?);

        // a·b − c on the coset.
        a.par_chunks_mut(PAR_CHUNK)
            .zip(b.par_chunks(PAR_CHUNK).zip(c.par_chunks(PAR_CHUNK)))
            .for_each(|(xa, (xb, xc))| {
                for ((va, vb), vc) in xa.iter_mut().zip(xb).zip(xc) {
                    *va = *va * vb - vc;
                }
            });
        drop((b, c));

        self.domain.dif(&mut a, true)?;
        let lg_n = self.domain.lg_n();
        let g_inv = self.domain.g_inv();
        let mut h = vec![Scalar::ZERO; n.saturating_sub(1)];
        h.par_chunks_mut(PAR_CHUNK)
            .enumerate()
            .for_each(|(ci, hs)| {
                let i0 = ci * PAR_CHUNK;
                let mut p = self.unscale * g_inv.pow_vartime([i0 as u64]);
                for (k, out) in hs.iter_mut().enumerate() {
                    *out = a[bitrev(i0 + k, lg_n)] * p;
                    p *= g_inv;
                }
            });
        Ok(h)
    }
}

/// `v` followed by zeros up to length n.
fn padded(v: &[Scalar], n: usize) -> Vec<Scalar> {
    let mut x = Vec::with_capacity(n);
    x.extend_from_slice(v);
    x.resize(n, Scalar::ZERO);
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    /// h from the natural-order transforms, step by step as bellperson does it.
    fn reference_h(d: &Domain, a: &[Scalar], b: &[Scalar], c: &[Scalar]) -> Vec<Scalar> {
        let n = d.n();
        let mut v: Vec<Vec<Scalar>> = [a, b, c].iter().map(|x| padded(x, n)).collect();
        for x in v.iter_mut() {
            d.ifft(x).unwrap();
            d.coset_fft(x).unwrap();
        }
        let z_inv = d.z_inv_on_coset();
        let mut h: Vec<Scalar> = (0..n)
            .map(|k| (v[0][k] * v[1][k] - v[2][k]) * z_inv)
            .collect();
        d.icoset_fft(&mut h).unwrap();
        h.truncate(n - 1);
        h
    }

    #[test]
    fn h_matches_the_step_by_step_pipeline() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // Row counts that are and are not powers of two, around the 2^12 block size.
        for rows in [1usize, 2, 3, 5, 64, 100, 4095, 4096, 4097, 9000] {
            let lg = rows.next_power_of_two().trailing_zeros();
            let plan = HPlan::new(lg).unwrap();
            let a: Vec<Scalar> = (0..rows).map(|_| Scalar::random(&mut rng)).collect();
            let b: Vec<Scalar> = (0..rows).map(|_| Scalar::random(&mut rng)).collect();
            // Satisfied rows (c = a·b) make h a polynomial; the last row is left
            // unsatisfied so that the coset choice matters too.
            let mut c: Vec<Scalar> = a.iter().zip(&b).map(|(x, y)| *x * y).collect();
            c[rows - 1] += Scalar::ONE;
            let h = plan.compute_h(&a, &b, &c).unwrap();
            assert_eq!(h, reference_h(plan.domain(), &a, &b, &c), "rows {rows}");
        }
    }

    #[test]
    fn too_long_input_is_an_error() {
        let plan = HPlan::new(2).unwrap();
        let v = vec![Scalar::ZERO; 5];
        let err = plan.compute_h(&v, &v[..4], &v[..4]).unwrap_err();
        assert!(matches!(err, NttError::Length { n: 4, got: 5 }));
    }
}
