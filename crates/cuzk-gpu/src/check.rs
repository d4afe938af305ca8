//! Device self-checks against the CPU, runnable from tests and from the binary
//! (`cuzk bench ntt --check`, `cuzk bench msm --check`) on a machine with no cargo. Each
//! check draws fresh inputs from a printed seed and compares the device result with blstrs
//! (MSM, batch addition) or a plain O(n log n) NTT written with ff's roots of unity.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::{Field, PrimeField};
use group::{prime::PrimeCurveAffine, Curve, Group as _};

use crate::arena::{DevRegion, Scratch, VramArena};
use crate::classify::{batch_add_g1, classify};
use crate::device::Device;
use crate::error::Result;
use crate::layout::{as_bytes, as_bytes_mut, FR_BYTES};
use crate::msm::{msm_g1, msm_g2, msm_streamed_g1, msm_streamed_g2};
use crate::ntt::{root_of_unity, Direction, NttOptions, NttPlan, Order};
use crate::sums::{msm_others, GroupOps, G1_OPS, G2_OPS};
use crate::testdata::{random_g1, random_g2, random_scalars};

/// The outcome of one check.
#[derive(Clone, Debug)]
pub struct CheckOutcome {
    /// What was checked, with its size, e.g. "ntt fwd nat->rev 2^11".
    pub name: String,
    /// Whether the device agreed with the CPU.
    pub ok: bool,
    /// Seed and, on failure, what differed.
    pub detail: String,
}

fn outcome(name: String, ok: bool, seed: u64, what: &str) -> CheckOutcome {
    CheckOutcome {
        name,
        ok,
        detail: if ok {
            format!("seed {seed}")
        } else {
            format!("seed {seed}: {what}")
        },
    }
}

/// The reference NTT: natural order in and out, x_j = Σ a_i ω^(ij).
pub fn cpu_ntt(a: &mut [Scalar], omega: Scalar) {
    let n = a.len();
    if n <= 1 {
        return;
    }
    let lg = n.trailing_zeros();
    for i in 0..n {
        let j = i.reverse_bits() >> (usize::BITS - lg);
        if i < j {
            a.swap(i, j);
        }
    }
    let mut len = 2;
    while len <= n {
        let w_len = omega.pow_vartime([(n / len) as u64]);
        for start in (0..n).step_by(len) {
            let mut w = Scalar::ONE;
            for k in 0..len / 2 {
                let u = a[start + k];
                let v = a[start + k + len / 2] * w;
                a[start + k] = u + v;
                a[start + k + len / 2] = u - v;
                w *= w_len;
            }
        }
        len *= 2;
    }
}

fn bitrev_perm(a: &[Scalar]) -> Vec<Scalar> {
    let n = a.len();
    if n <= 1 {
        return a.to_vec();
    }
    let lg = n.trailing_zeros();
    (0..n)
        .map(|i| a[i.reverse_bits() >> (usize::BITS - lg)])
        .collect()
}

/// The CPU result for `opts` on natural-order... input given in `opts.input` order.
fn ntt_reference(input: &[Scalar], opts: NttOptions) -> Vec<Scalar> {
    let n = input.len();
    let lg = n.trailing_zeros();
    let mut a = if opts.input == Order::BitReversed {
        bitrev_perm(input)
    } else {
        input.to_vec()
    };
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let w = root_of_unity(lg);
    match opts.direction {
        Direction::Forward => {
            if opts.coset {
                let mut gi = Scalar::ONE;
                for x in a.iter_mut() {
                    *x *= gi;
                    gi *= g;
                }
            }
            cpu_ntt(&mut a, w);
        }
        Direction::Inverse => {
            cpu_ntt(&mut a, w.invert().unwrap_or(Scalar::ONE));
            let n_inv = Scalar::from(n as u64).invert().unwrap_or(Scalar::ONE);
            let g_inv = g.invert().unwrap_or(Scalar::ONE);
            let mut gi = Scalar::ONE;
            for x in a.iter_mut() {
                *x *= n_inv;
                if opts.coset {
                    *x *= gi;
                    gi *= g_inv;
                }
            }
        }
    }
    if opts.output == Order::BitReversed {
        bitrev_perm(&a)
    } else {
        a
    }
}

/// NTT checks: every direction / coset / order combination at sizes 2^0 … 2^max_lg.
///
/// # Errors
/// Device errors (a wrong result is a failed [`CheckOutcome`], not an error).
pub fn check_ntt(dev: &Arc<Device>, seed: u64, max_lg: u32) -> Result<Vec<CheckOutcome>> {
    let mut out = Vec::new();
    let n_max = 1usize << max_lg;
    let table_bytes: usize = (0..=max_lg).map(NttPlan::table_bytes).sum();
    let arena = VramArena::new(dev.clone(), n_max * FR_BYTES + table_bytes + (1 << 20))?;
    let data = arena.alloc(n_max * FR_BYTES)?;
    use Direction::*;
    use Order::*;
    let combos = [
        (Forward, false, Natural, BitReversed),
        (Forward, false, BitReversed, Natural),
        (Forward, false, Natural, Natural),
        (Inverse, false, Natural, Natural),
        (Inverse, false, BitReversed, BitReversed),
        (Forward, true, Natural, BitReversed),
        (Inverse, true, BitReversed, Natural),
        (Inverse, true, Natural, Natural),
    ];
    for lg in 0..=max_lg {
        let plan = NttPlan::new(dev, &arena, lg)?;
        for (ci, &(direction, coset, input, output)) in combos.iter().enumerate() {
            let s = seed.wrapping_add(lg as u64 * 97 + ci as u64);
            let n = 1usize << lg;
            let mut v = random_scalars(n, s);
            if n > 2 {
                v[1] = Scalar::ZERO;
                v[2] = -Scalar::ONE;
            }
            let opts = NttOptions {
                direction,
                coset,
                input,
                output,
            };
            let expect = ntt_reference(&v, opts);
            dev.upload(&data, as_bytes(&v))?;
            plan.run(dev, &data, opts)?;
            let mut got = vec![Scalar::ZERO; n];
            dev.download(as_bytes_mut(&mut got), &data)?;
            let bad = got.iter().zip(&expect).position(|(a, b)| a != b);
            let name = format!(
                "ntt {}{} {:?}->{:?} 2^{lg}",
                if direction == Forward { "fwd" } else { "inv" },
                if coset { " coset" } else { "" },
                input,
                output
            );
            out.push(outcome(
                name,
                bad.is_none(),
                s,
                &format!("first mismatch at index {bad:?}"),
            ));
        }
    }
    out.extend(check_quotient(dev, seed, max_lg)?);
    Ok(out)
}

/// [`NttPlan::quotient`] (the prover's fused H = (A·B − C)/Z) against the CPU: the inverse
/// transform, the coset evaluation, the division by Z and the inverse coset transform, each
/// by [`ntt_reference`], at sizes 2^0 … 2^max_lg.
///
/// # Errors
/// Device errors.
fn check_quotient(dev: &Arc<Device>, seed: u64, max_lg: u32) -> Result<Vec<CheckOutcome>> {
    use Direction::*;
    let n_max = 1usize << max_lg;
    let table_bytes: usize = (0..=max_lg).map(NttPlan::table_bytes).sum();
    let arena = VramArena::new(dev.clone(), 3 * n_max * FR_BYTES + table_bytes + (1 << 20))?;
    let regions = [
        arena.alloc(n_max * FR_BYTES)?,
        arena.alloc(n_max * FR_BYTES)?,
        arena.alloc(n_max * FR_BYTES)?,
    ];
    let g = Scalar::MULTIPLICATIVE_GENERATOR;
    let mut out = Vec::new();
    for lg in 0..=max_lg {
        let plan = NttPlan::new(dev, &arena, lg)?;
        let n = 1usize << lg;
        let s = seed.wrapping_add(0x9e37 + lg as u64);
        let abc: Vec<Vec<Scalar>> = (0..3u64)
            .map(|j| edge_scalars(n, s.wrapping_add(j * 7919)))
            .collect();
        let on_coset: Vec<Vec<Scalar>> = abc
            .iter()
            .map(|v| {
                let coeffs = ntt_reference(v, NttOptions::natural(Inverse, false));
                ntt_reference(&coeffs, NttOptions::natural(Forward, true))
            })
            .collect();
        let z_inv = (g.pow_vartime([n as u64]) - Scalar::ONE)
            .invert()
            .unwrap_or(Scalar::ZERO);
        let q: Vec<Scalar> = (0..n)
            .map(|i| (on_coset[0][i] * on_coset[1][i] - on_coset[2][i]) * z_inv)
            .collect();
        let expect = ntt_reference(&q, NttOptions::natural(Inverse, true));
        for (r, v) in regions.iter().zip(&abc) {
            dev.upload(r, as_bytes(v))?;
        }
        plan.quotient(dev, [&regions[0], &regions[1], &regions[2]])?;
        let mut got = vec![Scalar::ZERO; n];
        dev.download(as_bytes_mut(&mut got), &regions[1])?;
        let bad = got.iter().zip(&expect).position(|(a, b)| a != b);
        out.push(outcome(
            format!("ntt quotient (a b - c) / z 2^{lg}"),
            bad.is_none(),
            s,
            &format!("first mismatch at index {bad:?}"),
        ));
    }
    Ok(out)
}

/// Scalars with the edge cases mixed in: zeros, ones, r − 1, and random values.
fn edge_scalars(n: usize, seed: u64) -> Vec<Scalar> {
    let mut v = random_scalars(n, seed);
    for (i, s) in v.iter_mut().enumerate() {
        match i % 11 {
            0 => *s = Scalar::ZERO,
            3 => *s = Scalar::ONE,
            7 => *s = -Scalar::ONE,
            _ => {}
        }
    }
    v
}

/// The split path of one group: classify, batch-add the ones, MSM the others through the
/// index list (must give `expect` together) and over their packed bases (must equal the
/// indexed MSM).
#[allow(clippy::too_many_arguments)]
fn check_split<P: group::Group>(
    dev: &Device,
    scratch: &Scratch<'_>,
    ops: &GroupOps<P>,
    bases: &DevRegion<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
    expect: P,
    seed: u64,
    out: &mut Vec<CheckOutcome>,
) -> Result<()> {
    let g = match ops.group {
        crate::msm::Group::G1 => "g1",
        crate::msm::Group::G2 => "g2",
    };
    let cls = classify(dev, scratch, scalars, n)?;
    let ones = (ops.batch_add)(dev, scratch, bases, Some(&cls.one_idx), cls.n_ones)?;
    let others = msm_others(dev, scratch, ops, bases, &cls, false)?;
    out.push(outcome(
        format!("split {g} n={n}"),
        ones + others == expect,
        seed,
        "batch_add(ones) + msm(others) differs",
    ));
    let packed = msm_others(dev, scratch, ops, bases, &cls, true)?;
    out.push(outcome(
        format!("split packed {g} n={n}"),
        packed == others,
        seed,
        "msm(packed others) differs from msm(others through the index list)",
    ));
    Ok(())
}

/// The MSM sizes checked: 0, 1, 2^k, 2^k ± 1 and non-powers of two.
pub const MSM_SIZES: [usize; 11] = [0, 1, 2, 3, 255, 256, 257, 1000, 4095, 4096, 4097];

/// MSM, classification and batch-addition checks for G1 and G2; `big` adds one larger
/// random non-power-of-two size.
///
/// # Errors
/// Device errors.
pub fn check_msm(dev: &Arc<Device>, seed: u64, big: usize) -> Result<Vec<CheckOutcome>> {
    let mut out = Vec::new();
    let mut sizes: Vec<usize> = MSM_SIZES.to_vec();
    if big > 0 {
        sizes.push(big);
    }
    let n_max = sizes.iter().copied().max().unwrap_or(1).max(1);
    let scratch_bytes = crate::msm::scratch_bytes_any(n_max) * 3 + n_max * 512 + (64 << 20);
    let arena = VramArena::new(dev.clone(), n_max * (192 + 32 + 8) + scratch_bytes)?;
    let bases_r = arena.alloc(n_max * 192)?;
    let scal_r = arena.alloc(n_max * FR_BYTES)?;
    let mut scratch = arena.scratch(scratch_bytes)?;

    let g1_all = random_g1(n_max, seed);
    let g2_all = random_g2(n_max, seed);
    for (si, &n) in sizes.iter().enumerate() {
        let s = seed.wrapping_add(1000 + si as u64);
        let scalars = edge_scalars(n, s);
        let mut g1: Vec<G1Affine> = g1_all[..n].to_vec();
        let mut g2: Vec<G2Affine> = g2_all[..n].to_vec();
        // Points at infinity and repeated points (equal to, and the negation of, a neighbour).
        for i in (0..n).step_by(13) {
            g1[i] = G1Affine::identity();
            g2[i] = G2Affine::identity();
        }
        for i in (5..n).step_by(17) {
            g1[i] = g1[i - 1];
            g2[i] = g2[i - 1];
        }
        for i in (9..n).step_by(19) {
            g1[i] = -g1[i - 1];
        }
        dev.upload(&scal_r, as_bytes(&scalars))?;

        let g1p: Vec<G1Projective> = g1.iter().map(|p| p.to_curve()).collect();
        let g2p: Vec<G2Projective> = g2.iter().map(|p| p.to_curve()).collect();
        let e1 = if n == 0 {
            G1Projective::identity()
        } else {
            G1Projective::multi_exp(&g1p, &scalars)
        };
        let e2 = if n == 0 {
            G2Projective::identity()
        } else {
            G2Projective::multi_exp(&g2p, &scalars)
        };

        scratch.reset();
        dev.upload(&bases_r, as_bytes(&g1))?;
        let got = msm_g1(dev, &scratch, &bases_r, None, &scal_r, n)?;
        out.push(outcome(
            format!("msm g1 n={n}"),
            got == e1,
            s,
            "sum differs from blstrs multi_exp",
        ));

        // Skewed digits: two values repeated over most points put most of every window's
        // entries into two buckets that cross many accumulation ranges (the fixup path);
        // small integers leave the upper windows nearly empty.
        if n > 0 {
            let ab = random_scalars(2, s ^ 0x5ca1);
            let (a, b) = (ab[0], ab[1]);
            let skew: Vec<Scalar> = (0..n)
                .map(|i| match i % 4 {
                    0 | 3 => a,
                    1 => b,
                    _ => Scalar::from(i as u64 + 2),
                })
                .collect();
            dev.upload(&scal_r, as_bytes(&skew))?;
            scratch.reset();
            let got1 = msm_g1(dev, &scratch, &bases_r, None, &scal_r, n)?;
            out.push(outcome(
                format!("msm g1 skewed n={n}"),
                got1 == G1Projective::multi_exp(&g1p, &skew),
                s,
                "sum differs from blstrs multi_exp",
            ));
            dev.upload(&bases_r, as_bytes(&g2))?;
            scratch.reset();
            let got2 = msm_g2(dev, &scratch, &bases_r, None, &scal_r, n)?;
            out.push(outcome(
                format!("msm g2 skewed n={n}"),
                got2 == G2Projective::multi_exp(&g2p, &skew),
                s,
                "sum differs from blstrs multi_exp",
            ));
            dev.upload(&bases_r, as_bytes(&g1))?;
            dev.upload(&scal_r, as_bytes(&scalars))?;
        }

        // One base everywhere, one scalar everywhere: every bucket entry equals its
        // neighbours, so the pair rounds double (pair.cu's DOUBLE_P); then the base and its
        // negation alternating: pairs that cancel to infinity, and infinities carried on.
        if n > 1 {
            let a = random_scalars(1, s ^ 0xd0b1)[0];
            let p = g1_all[0];
            for (name, bases, want) in [
                (
                    "equal",
                    vec![p; n],
                    G1Projective::from(p) * (a * Scalar::from(n as u64)),
                ),
                (
                    "opposite",
                    (0..n).map(|i| if i % 2 == 0 { p } else { -p }).collect(),
                    G1Projective::from(p) * (a * Scalar::from((n % 2) as u64)),
                ),
            ] {
                dev.upload(&bases_r, as_bytes(&bases))?;
                dev.upload(&scal_r, as_bytes(&vec![a; n]))?;
                scratch.reset();
                let got = msm_g1(dev, &scratch, &bases_r, None, &scal_r, n)?;
                out.push(outcome(
                    format!("msm g1 {name} bases n={n}"),
                    got == want,
                    s,
                    "sum differs from n * a * P",
                ));
            }
            dev.upload(&bases_r, as_bytes(&g1))?;
            dev.upload(&scal_r, as_bytes(&scalars))?;
        }

        // Split path: batch-add the ones, MSM the others through the index list.
        scratch.reset();
        let cls = classify(dev, &scratch, &scal_r, n)?;
        let ones = scalars.iter().filter(|x| **x == Scalar::ONE).count();
        let others = scalars
            .iter()
            .filter(|x| **x != Scalar::ONE && !bool::from(x.is_zero()))
            .count();
        let counts_ok = cls.n_ones == ones && cls.n_others == others;
        out.push(outcome(
            format!("classify n={n}"),
            counts_ok,
            s,
            &format!(
                "counts ones {} others {} vs cpu {ones} {others}",
                cls.n_ones, cls.n_others
            ),
        ));
        check_split(
            dev, &scratch, &G1_OPS, &bases_r, &scal_r, n, e1, s, &mut out,
        )?;

        scratch.reset();
        dev.upload(&bases_r, as_bytes(&g2))?;
        let got2 = msm_g2(dev, &scratch, &bases_r, None, &scal_r, n)?;
        out.push(outcome(
            format!("msm g2 n={n}"),
            got2 == e2,
            s,
            "sum differs from blstrs multi_exp",
        ));
        check_split(
            dev, &scratch, &G2_OPS, &bases_r, &scal_r, n, e2, s, &mut out,
        )?;

        if n == 4097 {
            scratch.reset();
            let st1 = msm_streamed_g1(dev, &scratch, &g1, &scal_r, 1000)?;
            out.push(outcome(
                format!("streamed g1 n={n} chunk=1000"),
                st1 == e1,
                s,
                "streamed sum differs",
            ));
            scratch.reset();
            let st2 = msm_streamed_g2(dev, &scratch, &g2, &scal_r, 1500)?;
            out.push(outcome(
                format!("streamed g2 n={n} chunk=1500"),
                st2 == e2,
                s,
                "streamed sum differs",
            ));
        }
    }

    // All-ones bit vector: the batch addition alone must give the sum of the bases.
    let n = 4097.min(n_max);
    let ones = vec![Scalar::ONE; n];
    let g1 = &g1_all[..n];
    dev.upload(&scal_r, as_bytes(&ones))?;
    dev.upload(&bases_r, as_bytes(g1))?;
    scratch.reset();
    let cls = classify(dev, &scratch, &scal_r, n)?;
    let sum = batch_add_g1(dev, &scratch, &bases_r, Some(&cls.one_idx), cls.n_ones)?;
    let expect: G1Projective = g1.iter().map(|p| p.to_curve()).sum();
    out.push(outcome(
        format!("all-ones g1 n={n}"),
        cls.n_ones == n && cls.n_others == 0 && sum == expect,
        seed,
        "all-ones batch addition differs",
    ));
    let plain = msm_g1(dev, &scratch, &bases_r, None, &scal_r, n)?;
    out.push(outcome(
        format!("all-ones msm g1 n={n}"),
        plain == expect,
        seed,
        "msm of ones differs",
    ));
    out.extend(check_fixed_base(dev, seed)?);
    out.extend(check_msm_table(dev, seed, big)?);
    Ok(out)
}

/// Window tables (`msm/table.rs`): every row of the built table against repeated doubling
/// on the CPU, and the table MSM against blstrs, for several widths and set counts (one set,
/// a few, one per window) and the table [`WindowTable::choose`] picks; bases with points at
/// infinity and repeats, scalars with zeros, ones and r − 1, and all-zero scalars.
///
/// # Errors
/// Device errors.
pub fn check_msm_table(dev: &Arc<Device>, seed: u64, big: usize) -> Result<Vec<CheckOutcome>> {
    use crate::msm::{build_table_g1, msm_table_g1, table_scratch_bytes, WindowTable};
    const G1_BYTES: usize = crate::layout::G1_AFFINE_BYTES;
    let mut out = Vec::new();
    let mut sizes = vec![1usize, 2, 3, 257, 1000, 4097];
    if big > 0 {
        sizes.push(big);
    }
    for (si, &n) in sizes.iter().enumerate() {
        let s = seed.wrapping_add(7000 + si as u64);
        let mut shapes = vec![(8, 1), (13, 2), (16, 3), (11, 24)];
        if let Some(t) = WindowTable::choose(n, usize::MAX) {
            shapes.push((t.c, t.sets));
        }
        let mut bases = random_g1(n, s);
        for i in (0..n).step_by(13) {
            bases[i] = G1Affine::identity();
        }
        for i in (5..n).step_by(17) {
            bases[i] = bases[i - 1];
        }
        let proj: Vec<G1Projective> = bases.iter().map(|p| p.to_curve()).collect();
        let scalars = edge_scalars(n, s);
        let expect = G1Projective::multi_exp(&proj, &scalars);
        for (c, sets) in shapes {
            let t = WindowTable::new(n, c, sets)?;
            let scratch_bytes = table_scratch_bytes(&t) + (16 << 20);
            // Each allocation starts aligned: room for the padding of three.
            let arena = VramArena::new(
                dev.clone(),
                t.bytes() + n * FR_BYTES + scratch_bytes + 3 * crate::arena::ALIGN,
            )?;
            let table = arena.alloc(t.bytes())?;
            let scal_r = arena.alloc(n * FR_BYTES)?;
            let mut scratch = arena.scratch(scratch_bytes)?;
            dev.upload(&table.slice(0, n * G1_BYTES)?, as_bytes(&bases))?;
            build_table_g1(dev, &table, &t)?;
            let name = format!("table g1 c={c} sets={sets} rows={} n={n}", t.rows());
            // Rows, for the smaller sizes (the CPU doubles every point rows · c · sets times).
            if n <= 4097 {
                let mut got = vec![0u8; t.bytes()];
                dev.download(&mut got, &table)?;
                let mut row = proj.clone();
                let mut first_bad = None;
                for k in 0..t.rows() as usize {
                    if k > 0 {
                        for p in row.iter_mut() {
                            for _ in 0..t.row_doublings() {
                                *p = p.double();
                            }
                        }
                    }
                    let mut aff = vec![G1Affine::identity(); n];
                    G1Projective::batch_normalize(&row, &mut aff);
                    let want = as_bytes(&aff);
                    if got[k * n * G1_BYTES..(k + 1) * n * G1_BYTES] != *want {
                        first_bad = Some(k);
                        break;
                    }
                }
                out.push(outcome(
                    format!("{name} rows"),
                    first_bad.is_none(),
                    s,
                    &format!("row {first_bad:?} differs from 2^(c·sets·k) · base"),
                ));
            }
            dev.upload(&scal_r, as_bytes(&scalars))?;
            let got = msm_table_g1(dev, &scratch, &table, &t, &scal_r, n)?;
            out.push(outcome(
                format!("{name} msm"),
                got == expect,
                s,
                "sum differs from blstrs multi_exp",
            ));
            scratch.reset();
            dev.upload(&scal_r, as_bytes(&vec![Scalar::ZERO; n]))?;
            let zero = msm_table_g1(dev, &scratch, &table, &t, &scal_r, n)?;
            out.push(outcome(
                format!("{name} zero scalars"),
                bool::from(zero.is_identity()),
                s,
                "sum of zero scalars is not infinity",
            ));
        }
    }
    Ok(out)
}

/// Fixed-base multiplication (parameter generation) against blstrs scalar multiplication.
///
/// # Errors
/// Device errors.
pub fn check_fixed_base(dev: &Arc<Device>, seed: u64) -> Result<Vec<CheckOutcome>> {
    use cuzk_groth16::paramgen::FixedBaseMul;
    let fb = crate::GpuFixedBase::new(dev.clone());
    let mut out = Vec::new();
    for n in [1usize, 2, 1000, 4097] {
        let s = seed.wrapping_add(5000 + n as u64);
        let scalars = edge_scalars(n, s);
        let b1 = G1Projective::generator() * random_scalars(1, s)[0];
        let b2 = G2Projective::generator() * random_scalars(1, s ^ 1)[0];
        let r = |e: cuzk_groth16::paramgen::FixedBaseError| crate::GpuError::Input(e.to_string());
        let g1 = fb.mul_g1(b1, &scalars).map_err(r)?;
        let g2 = fb.mul_g2(b2, &scalars).map_err(r)?;
        let ok1 = g1.len() == n
            && g1
                .iter()
                .zip(&scalars)
                .all(|(p, k)| *p == (b1 * k).to_affine());
        let ok2 = g2.len() == n
            && g2
                .iter()
                .zip(&scalars)
                .all(|(p, k)| *p == (b2 * k).to_affine());
        out.push(outcome(
            format!("fixed-base g1 n={n}"),
            ok1,
            s,
            "differs from blstrs base * scalar",
        ));
        out.push(outcome(
            format!("fixed-base g2 n={n}"),
            ok2,
            s,
            "differs from blstrs base * scalar",
        ));
    }
    Ok(out)
}

pub use crate::backend_bench::check_backend;

#[cfg(test)]
mod tests {
    use super::*;
    use cuzk_groth16::cpu::ntt::Domain;

    /// The device checks' NTT oracle equals cuzk-groth16's CPU NTT (fft, ifft, coset_fft,
    /// icoset_fft), so device results that match the oracle match the CPU backend.
    #[test]
    fn reference_matches_cpu_backend_ntt() {
        for lg in 1..=10u32 {
            let d = Domain::new(lg).expect("domain");
            let x = random_scalars(1 << lg, 42 + lg as u64);
            for (direction, coset) in [
                (Direction::Forward, false),
                (Direction::Inverse, false),
                (Direction::Forward, true),
                (Direction::Inverse, true),
            ] {
                let ours = ntt_reference(&x, NttOptions::natural(direction, coset));
                let mut theirs = x.clone();
                match (direction, coset) {
                    (Direction::Forward, false) => d.fft(&mut theirs),
                    (Direction::Inverse, false) => d.ifft(&mut theirs),
                    (Direction::Forward, true) => d.coset_fft(&mut theirs),
                    (Direction::Inverse, true) => d.icoset_fft(&mut theirs),
                }
                .expect("cpu ntt");
                assert_eq!(ours, theirs, "2^{lg} {direction:?} coset={coset}");
            }
        }
    }
}
