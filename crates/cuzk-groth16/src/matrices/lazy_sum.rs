//! A sum of field elements without a reduction per term: a row of a, b, c adds a handful of
//! witness values (most of PoRep's are bits, so most terms are a value or a coefficient
//! added as it is), and each `Scalar` addition is a call into blst with its own reduction.
//! Here the terms' Montgomery limbs are added as 320-bit integers and reduced once.
//!
//! Why it is exact: a scalar `x` is held as limbs `L(x) = x·R mod p`, linear in `x`, so
//! `Σ L(xᵢ) ≡ L(Σ xᵢ) (mod p)`. The integer sum is `hi·2²⁵⁶ + lo`; `2²⁵⁶ mod p` is
//! `L(1)`, so its `hi·2²⁵⁶` part is `L(hi)`: the sum is `Scalar::from(hi)` plus the
//! scalar whose limbs are `lo mod p` (`lo < 2²⁵⁶ < 3p`: at most two subtractions).

use blst::blst_fr;

use crate::Scalar;

/// The scalar field's modulus, little-endian limbs.
const MODULUS: [u64; 4] = [
    0xffff_ffff_0000_0001,
    0x53bd_a402_fffe_5bfe,
    0x3339_d808_09a1_d805,
    0x73ed_a753_299d_7d48,
];

/// Σ of the scalars added, kept as an unreduced 320-bit integer of their limbs (2⁶⁴ terms
/// before its top limb could wrap: far past any row).
#[derive(Clone, Copy, Default)]
pub(super) struct LazySum {
    lo: [u64; 4],
    hi: u64,
}

impl LazySum {
    #[inline]
    pub(super) fn add(&mut self, x: &Scalar) {
        let l = blst_fr::from(*x).l;
        let mut carry = false;
        for (acc, &v) in self.lo.iter_mut().zip(&l) {
            let (s, c1) = acc.overflowing_add(v);
            let (s, c2) = s.overflowing_add(u64::from(carry));
            *acc = s;
            carry = c1 | c2;
        }
        self.hi += u64::from(carry);
    }

    /// The sum as a scalar.
    #[inline]
    pub(super) fn finish(self) -> Scalar {
        // A carry out of 256 bits is rare in a short row; it costs a conversion.
        let lo = Scalar::from(blst_fr {
            l: reduced(self.lo),
        });
        match self.hi {
            0 => lo,
            hi => lo + Scalar::from(hi),
        }
    }
}

fn reduced(mut lo: [u64; 4]) -> [u64; 4] {
    // Compared first: a row's sum is most often below p already, decided at the top limb.
    while !below_modulus(&lo) {
        sub_modulus(&mut lo);
    }
    lo
}

#[inline]
fn below_modulus(x: &[u64; 4]) -> bool {
    for (a, m) in x.iter().zip(&MODULUS).rev() {
        if a != m {
            return a < m;
        }
    }
    false
}

fn sub_modulus(x: &mut [u64; 4]) {
    let mut borrow = false;
    for (a, &m) in x.iter_mut().zip(&MODULUS) {
        let (d, b1) = a.overflowing_sub(m);
        let (d, b2) = d.overflowing_sub(u64::from(borrow));
        *a = d;
        borrow = b1 | b2;
    }
}

#[cfg(test)]
mod tests {
    use ff::{Field, PrimeField};
    use rand::{rngs::StdRng, Rng, SeedableRng};

    use super::*;

    fn reference(terms: &[Scalar]) -> Scalar {
        terms.iter().fold(Scalar::ZERO, |acc, t| acc + t)
    }

    fn lazy(terms: &[Scalar]) -> Scalar {
        let mut s = LazySum::default();
        for t in terms {
            s.add(t);
        }
        s.finish()
    }

    #[test]
    fn the_modulus_is_the_fields() {
        let hex = <Scalar as PrimeField>::MODULUS.trim_start_matches("0x");
        let p: Vec<u64> = (0..4)
            .rev()
            .map(|i| u64::from_str_radix(&hex[i * 16..(i + 1) * 16], 16).unwrap())
            .collect();
        assert_eq!(p, MODULUS);
    }

    #[test]
    fn equals_the_fields_sum_on_random_and_edge_terms() {
        let mut rng = StdRng::seed_from_u64(rand::random());
        let edges = [
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            -Scalar::ONE.double(),
        ];
        for len in [0, 1, 2, 3, 7, 64, 1000] {
            for round in 0..20 {
                let terms: Vec<Scalar> = (0..len)
                    .map(|_| match round % 3 {
                        0 => Scalar::random(&mut rng),
                        1 => edges[rng.gen_range(0..edges.len())],
                        _ if rng.gen_bool(0.9) => edges[rng.gen_range(0..2)],
                        _ => Scalar::random(&mut rng),
                    })
                    .collect();
                assert_eq!(
                    lazy(&terms),
                    reference(&terms),
                    "{len} terms, round {round}"
                );
            }
        }
    }

    #[test]
    fn many_largest_terms_carry_into_the_top_limb() {
        let terms = vec![-Scalar::ONE; 100_000];
        assert_eq!(lazy(&terms), reference(&terms));
    }
}
