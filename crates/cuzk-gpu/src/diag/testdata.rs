//! Random inputs for the device checks and benchmarks: scalars and points drawn from a
//! seeded ChaCha stream (so a failing seed can be replayed), never zeros unless asked.
//! Points are the generator times random scalars, batch-normalized to affine.

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha20Rng;
use rayon::prelude::*;

const CHUNK: usize = 4096;

fn rng(seed: u64, stream: u64) -> ChaCha20Rng {
    let mut r = ChaCha20Rng::seed_from_u64(seed);
    r.set_stream(stream);
    r
}

/// n uniformly random scalars.
pub fn random_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut out = vec![Scalar::ZERO; n];
    out.par_chunks_mut(CHUNK).enumerate().for_each(|(c, ch)| {
        let mut r = rng(seed, c as u64);
        for s in ch {
            *s = Scalar::random(&mut r);
        }
    });
    out
}

/// n random G1 points: each chunk starts at a random multiple of the generator and walks
/// by random steps (one projective addition per point), then all are normalized at once.
pub fn random_g1(n: usize, seed: u64) -> Vec<G1Affine> {
    let mut proj = vec![G1Projective::identity(); n];
    proj.par_chunks_mut(CHUNK).enumerate().for_each(|(c, ch)| {
        let mut r = rng(seed ^ 0x9e37_79b9, c as u64);
        let steps: Vec<G1Projective> = (0..8)
            .map(|_| G1Projective::generator() * Scalar::random(&mut r))
            .collect();
        let mut p = G1Projective::generator() * Scalar::random(&mut r);
        for (i, q) in ch.iter_mut().enumerate() {
            p += steps[(i * 5 + c) % 8];
            *q = p;
        }
    });
    let mut out = vec![G1Affine::identity(); n];
    out.par_chunks_mut(CHUNK)
        .zip(proj.par_chunks(CHUNK))
        .for_each(|(o, p)| G1Projective::batch_normalize(p, o));
    out
}

/// n random G2 points, as [`random_g1`].
pub fn random_g2(n: usize, seed: u64) -> Vec<G2Affine> {
    let mut proj = vec![G2Projective::identity(); n];
    proj.par_chunks_mut(CHUNK).enumerate().for_each(|(c, ch)| {
        let mut r = rng(seed ^ 0x7f4a_7c15, c as u64);
        let steps: Vec<G2Projective> = (0..8)
            .map(|_| G2Projective::generator() * Scalar::random(&mut r))
            .collect();
        let mut p = G2Projective::generator() * Scalar::random(&mut r);
        for (i, q) in ch.iter_mut().enumerate() {
            p += steps[(i * 5 + c) % 8];
            *q = p;
        }
    });
    let mut out = vec![G2Affine::identity(); n];
    out.par_chunks_mut(CHUNK)
        .zip(proj.par_chunks(CHUNK))
        .for_each(|(o, p)| G2Projective::batch_normalize(p, o));
    out
}
