//! The device's fixed-base multiplication (`GpuFixedBase`, parameter generation) against
//! the CPU comb on random scalars and the edge cases 0, 1, 2, p − 1 (= −1), −2, powers of
//! two, for G1 and G2, at both comb widths (12 bits below 2^20 scalars, 16 from there) and
//! across several device passes. Without a CUDA device each test prints
//! `skipped: no CUDA device` and passes.

use blstrs::{G1Projective, G2Projective, Scalar};
use cuzk_gpu::GpuFixedBase;
use cuzk_groth16::paramgen::{CpuFixedBase, FixedBaseMul};
use ff::Field;
use group::Group;
use rand_chacha::rand_core::SeedableRng;

mod support;
use support::device;

/// `n` scalars: the edge cases first, then random ones.
fn scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![
        Scalar::ZERO,
        Scalar::ONE,
        Scalar::from(2u64),
        -Scalar::ONE,
        -Scalar::from(2u64),
        Scalar::from(1u64 << 63),
        Scalar::from(2u64).pow_vartime([254u64]),
        Scalar::from(2u64).pow_vartime([255u64]) - Scalar::ONE,
        Scalar::ZERO,
    ];
    v.truncate(n);
    while v.len() < n {
        v.push(Scalar::random(&mut rng));
    }
    v
}

fn check(fb: &GpuFixedBase, n: usize, seed: u64) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let (g1, g2) = (
        G1Projective::random(&mut rng),
        G2Projective::random(&mut rng),
    );
    let s = scalars(n, seed);
    let cpu = CpuFixedBase::default();
    let got = fb.mul_g1(g1, &s).expect("device g1");
    let want = cpu.mul_g1(g1, &s).expect("cpu g1");
    assert_eq!(got.len(), n);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "g1 point {i} of {n} (scalar {:?})", s[i]);
    }
    let s2 = &s[..n.min(1 << 16)];
    let got = fb.mul_g2(g2, s2).expect("device g2");
    let want = cpu.mul_g2(g2, s2).expect("cpu g2");
    assert_eq!(got.len(), s2.len());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert_eq!(g, w, "g2 point {i} of {} (scalar {:?})", s2.len(), s2[i]);
    }
}

#[test]
fn small_batches_match_cpu() {
    let Some(dev) = device() else { return };
    let fb = GpuFixedBase::new(dev);
    for (n, seed) in [(1usize, 1u64), (9, 2), (1000, 3), (5003, 4)] {
        check(&fb, n, seed);
    }
    assert!(fb
        .mul_g1(G1Projective::generator(), &[])
        .expect("empty")
        .is_empty());
    let stages = fb.take_stages();
    let kernel = stages
        .iter()
        .find(|(k, _)| *k == "kernel")
        .expect("kernel time");
    assert!(!kernel.1.is_zero(), "{stages:?}");
    assert!(fb.take_stages().is_empty(), "taken");
}

#[test]
fn chunked_passes_match_cpu() {
    let Some(dev) = device() else { return };
    // 7 passes of 1000 (not a multiple of a block's 1024 scalars), the last one short.
    check(&GpuFixedBase::new(dev).with_chunk_points(1000), 6500, 5);
}

#[test]
fn wide_comb_matches_cpu() {
    let Some(dev) = device() else { return };
    // 2^20 scalars take the 16-bit comb.
    check(&GpuFixedBase::new(dev), 1 << 20, 6);
}
