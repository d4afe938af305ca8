//! Multi-scalar multiplication on the CPU with the bit-scalar split: owns [`ScalarSplit`]
//! (a query's scalars sorted into zero / one / other) and [`msm_g1`], [`msm_g2`].
//! Which scalars and bases go to which query is decided in `cpu/mod.rs`.
//!
//! A Filecoin witness is mostly bits, so per query: scalars equal to 0 are skipped,
//! scalars equal to 1 are summed by plain addition (blst's `blst_p1s_add`, batched affine
//! additions sharing one inversion), and only the rest go to blst's Pippenger
//! (`MultiPoint::mult`, multi-threaded on blst's own pool). blstrs' `multi_exp` runs the
//! same Pippenger but takes projective points and converts them to affine first: on 2^16
//! random G1 points and scalars, 2 cores pinned, the two took 337 ms and 350 ms (medians
//! of 3, same result), so we call blst on the SRS's affine points directly and skip the
//! projective copy (twice the memory). The blst types are reached
//! through blstrs' `AsRef` (affine in) and raw coordinates (projective out), so no
//! `unsafe` is needed here.

use blst::{blst_p1, blst_p1_affine, blst_p2, blst_p2_affine, MultiPoint};
use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective};
use ff::Field;
use group::Group;
use rayon::prelude::*;

use crate::{Density, Scalar};

/// Scalars per rayon task while classifying.
const PAR_CHUNK: usize = 1 << 14;
/// Scalar width handed to blst: every canonical Fr value is below 2^255.
const SCALAR_BITS: usize = 255;

/// One query's scalars, classified. Indices count the query's bases: the k-th scalar
/// whose density bit is set (or every scalar, for a full part) pairs with base k.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScalarSplit {
    /// Bases whose scalar is one.
    pub ones: Vec<usize>,
    /// Bases whose scalar is neither zero nor one.
    pub others: Vec<usize>,
    /// The canonical little-endian bytes of the `others` scalars, 32 each, in order.
    pub other_bytes: Vec<u8>,
    /// Number of bases the query must have: the scalars that passed the densities.
    pub n_bases: usize,
}

impl ScalarSplit {
    /// Classifies the concatenation of `parts`; a part with a density keeps only the
    /// scalars whose bit is set (the density must be as long as the part's scalars).
    pub fn new(parts: &[(&[Scalar], Option<&Density>)]) -> ScalarSplit {
        let dense: Vec<&Scalar> = parts
            .iter()
            .flat_map(|(values, density)| {
                values
                    .iter()
                    .enumerate()
                    .filter_map(move |(i, v)| match density {
                        Some(d) if i >= d.len() || !d.get(i) => None,
                        _ => Some(v),
                    })
            })
            .collect();
        let chunks: Vec<ScalarSplit> = dense
            .par_chunks(PAR_CHUNK)
            .enumerate()
            .map(|(ci, chunk)| {
                let mut part = ScalarSplit::default();
                for (j, s) in chunk.iter().enumerate() {
                    let k = ci * PAR_CHUNK + j;
                    if **s == Scalar::ZERO {
                        continue;
                    } else if **s == Scalar::ONE {
                        part.ones.push(k);
                    } else {
                        part.others.push(k);
                        part.other_bytes.extend_from_slice(&s.to_bytes_le());
                    }
                }
                part
            })
            .collect();
        let mut out = ScalarSplit {
            ones: Vec::with_capacity(chunks.iter().map(|c| c.ones.len()).sum()),
            others: Vec::with_capacity(chunks.iter().map(|c| c.others.len()).sum()),
            other_bytes: Vec::with_capacity(chunks.iter().map(|c| c.other_bytes.len()).sum()),
            n_bases: dense.len(),
        };
        for c in chunks {
            out.ones.extend_from_slice(&c.ones);
            out.others.extend_from_slice(&c.others);
            out.other_bytes.extend_from_slice(&c.other_bytes);
        }
        out
    }
}

/// `Σ s_k · bases[k]` over G1 for the scalars of `split`. The caller checks
/// `bases.len() == split.n_bases`; indices past the end would panic (a bug).
pub fn msm_g1(bases: &[G1Affine], split: &ScalarSplit) -> G1Projective {
    let ones: Vec<blst_p1_affine> = split.ones.par_iter().map(|&k| *bases[k].as_ref()).collect();
    let others: Vec<blst_p1_affine> = split
        .others
        .par_iter()
        .map(|&k| *bases[k].as_ref())
        .collect();
    let mut acc = G1Projective::identity();
    // blst indexes element 0 of its inputs: never hand it an empty slice.
    if !ones.is_empty() {
        acc += g1_from_blst(&ones.add());
    }
    if !others.is_empty() {
        acc += g1_from_blst(&others.mult(&split.other_bytes, SCALAR_BITS));
    }
    acc
}

/// `Σ s_k · bases[k]` over G2, as [`msm_g1`].
pub fn msm_g2(bases: &[G2Affine], split: &ScalarSplit) -> G2Projective {
    let ones: Vec<blst_p2_affine> = split.ones.par_iter().map(|&k| *bases[k].as_ref()).collect();
    let others: Vec<blst_p2_affine> = split
        .others
        .par_iter()
        .map(|&k| *bases[k].as_ref())
        .collect();
    let mut acc = G2Projective::identity();
    if !ones.is_empty() {
        acc += g2_from_blst(&ones.add());
    }
    if !others.is_empty() {
        acc += g2_from_blst(&others.mult(&split.other_bytes, SCALAR_BITS));
    }
    acc
}

/// blst's Jacobian point as blstrs' (the same coordinates).
fn g1_from_blst(p: &blst_p1) -> G1Projective {
    G1Projective::from_raw_unchecked(Fp::from(p.x), Fp::from(p.y), Fp::from(p.z))
}

/// blst's Jacobian G2 point as blstrs'.
fn g2_from_blst(p: &blst_p2) -> G2Projective {
    G2Projective::from_raw_unchecked(Fp2::from(p.x), Fp2::from(p.y), Fp2::from(p.z))
}

#[cfg(test)]
mod tests {
    use super::*;
    use group::Curve;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn naive_g1(bases: &[G1Affine], scalars: &[Scalar]) -> G1Projective {
        bases
            .iter()
            .zip(scalars)
            .map(|(b, s)| G1Projective::from(b) * s)
            .sum()
    }

    fn mixed_scalars(n: usize, rng: &mut ChaCha8Rng) -> Vec<Scalar> {
        (0..n)
            .map(|i| match i % 4 {
                0 => Scalar::ZERO,
                1 => Scalar::ONE,
                _ => Scalar::random(&mut *rng),
            })
            .collect()
    }

    #[test]
    fn split_msm_matches_naive_sum() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for n in [0usize, 1, 2, 3, 31, 33, 64, 257, 1000] {
            let bases: Vec<G1Affine> = (0..n)
                .map(|_| G1Projective::random(&mut rng).to_affine())
                .collect();
            let scalars = mixed_scalars(n, &mut rng);
            let split = ScalarSplit::new(&[(&scalars, None)]);
            assert_eq!(split.n_bases, n);
            assert_eq!(msm_g1(&bases, &split), naive_g1(&bases, &scalars), "n {n}");
        }
    }

    #[test]
    fn split_follows_density_across_parts() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let first = mixed_scalars(5, &mut rng);
        let second = mixed_scalars(70, &mut rng);
        let mut density = Density::new(70);
        for i in (0..70).filter(|i| i % 3 != 0) {
            density.set(i);
        }
        let split = ScalarSplit::new(&[(&first, None), (&second, Some(&density))]);
        let kept: Vec<Scalar> = first
            .iter()
            .chain(
                second
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| i % 3 != 0)
                    .map(|(_, s)| s),
            )
            .copied()
            .collect();
        assert_eq!(split.n_bases, kept.len());
        let bases: Vec<G1Affine> = (0..kept.len())
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        assert_eq!(msm_g1(&bases, &split), naive_g1(&bases, &kept));
        let bases2: Vec<G2Affine> = (0..kept.len())
            .map(|_| G2Projective::random(&mut rng).to_affine())
            .collect();
        let want: G2Projective = bases2
            .iter()
            .zip(&kept)
            .map(|(b, s)| G2Projective::from(b) * s)
            .sum();
        assert_eq!(msm_g2(&bases2, &split), want);
    }

    #[test]
    fn all_zero_and_all_one_scalars() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let bases: Vec<G1Affine> = (0..500)
            .map(|_| G1Projective::random(&mut rng).to_affine())
            .collect();
        let zeros = vec![Scalar::ZERO; 500];
        assert_eq!(
            msm_g1(&bases, &ScalarSplit::new(&[(&zeros, None)])),
            G1Projective::identity()
        );
        let ones = vec![Scalar::ONE; 500];
        assert_eq!(
            msm_g1(&bases, &ScalarSplit::new(&[(&ones, None)])),
            naive_g1(&bases, &ones)
        );
    }
}
