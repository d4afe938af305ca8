//! The MSM, classification, batch-addition, window-table and fixed-base checks: device
//! results against blstrs on edge-case and random inputs.

use std::sync::Arc;

use blstrs::{G1Affine, G1Projective, G2Affine, G2Projective, Scalar};
use ff::Field;
use group::{prime::PrimeCurveAffine, Curve, Group as _};

use super::{outcome, CheckOutcome};
use crate::backend::sums::{AccRegions, OutRegions, Split};
use crate::device::arena::{DevRegion, Scratch, VramArena};
use crate::device::layout::{self, as_bytes, FR_BYTES};
use crate::device::Device;
use crate::diag::testdata::{random_g1, random_g2, random_scalars};
use crate::error::Result;
use crate::ops::classify::{batch_add_g1, batch_parts, classify};
use crate::ops::msm::{
    buckets_bytes, msm_g1, msm_g2, msm_streamed_g1, msm_streamed_g2, window_bits, windows, Group,
    MsmOut, Shape,
};

/// Scalars with the edge cases mixed in: zeros, ones, r − 1, and random values.
pub(super) fn edge_scalars(n: usize, seed: u64) -> Vec<Scalar> {
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

/// The split sum of one group on the device (classification, batch addition of the ones,
/// MSM of the others, `packed` or through the index list) as the prove enqueues it, then
/// downloaded: the counts (ones, others) and the sum.
#[allow(clippy::too_many_arguments)]
fn split_sum<P>(
    dev: &Device,
    scratch: &Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
    packed: bool,
    finish: fn(u32, &[u8], &[u8]) -> P,
) -> Result<((usize, usize), P)> {
    let jac = group.jacobian_bytes();
    let out = OutRegions {
        windows: scratch.alloc(32 * jac)?,
        ones: scratch.alloc(jac)?,
        counts: scratch.alloc(8)?,
        acc: None,
    };
    let c = window_bits(n.max(1));
    let split = Split { group, c, packed };
    split.enqueue(dev, scratch, bases, scalars, n, &out)?;
    let mut w = vec![0u8; windows(c) as usize * jac];
    dev.download(&mut w, &out.windows)?;
    let mut o = vec![0u8; jac];
    dev.download(&mut o, &out.ones)?;
    let mut cnt = [0u8; 8];
    dev.download(&mut cnt, &out.counts)?;
    let word = |i: usize| u32::from_le_bytes([cnt[i], cnt[i + 1], cnt[i + 2], cnt[i + 3]]) as usize;
    Ok(((word(0), word(4)), finish(c, &w, &o)))
}

fn finish_g1(c: u32, windows: &[u8], ones: &[u8]) -> G1Projective {
    MsmOut::finish_g1(c, windows) + layout::g1_from_jacobian(ones)
}

fn finish_g2(c: u32, windows: &[u8], ones: &[u8]) -> G2Projective {
    MsmOut::finish_g2(c, windows) + layout::g2_from_jacobian(ones)
}

/// The split path of one group, with the counts on the device: through the index list
/// and over the packed bases, each must give `expect`.
#[allow(clippy::too_many_arguments)]
fn check_split<P: PartialEq>(
    dev: &Device,
    scratch: &mut Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
    expect: P,
    finish: fn(u32, &[u8], &[u8]) -> P,
    seed: u64,
    out: &mut Vec<CheckOutcome>,
) -> Result<()> {
    for packed in [false, true] {
        scratch.reset();
        let (_, got) = split_sum(dev, scratch, group, bases, scalars, n, packed, finish)?;
        out.push(outcome(
            format!("split {group:?} packed {packed} n={n}"),
            got == expect,
            seed,
            "batch_add(ones) + msm(others) differs",
        ));
    }
    Ok(())
}

/// The split path of one group streamed in chunks of `chunk` points with accumulators
/// (`Split::enqueue_acc`, as a split sum streamed in several chunks runs), with each
/// accumulator width, must give `expect`: the ones' partials and the buckets carried from
/// chunk to chunk, reduced once after the last.
#[allow(clippy::too_many_arguments)]
fn check_split_chunked<P: PartialEq>(
    dev: &Device,
    scratch: &mut Scratch<'_>,
    group: Group,
    bases: &DevRegion<'_>,
    scalars: &DevRegion<'_>,
    n: usize,
    chunk: usize,
    expect: P,
    finish: fn(u32, &[u8], &[u8]) -> P,
    seed: u64,
    out: &mut Vec<CheckOutcome>,
) -> Result<()> {
    let (pb, jac) = (group.affine_bytes(), group.jacobian_bytes());
    for (c, packed) in [(8u32, true), (13, false), (13, true)] {
        scratch.reset();
        let shape = Shape::plain(c);
        let parts = scratch.alloc(batch_parts(group) * group.xyzz_bytes())?;
        let buckets = scratch.alloc(buckets_bytes(&shape, group))?;
        let windows_r = scratch.alloc(32 * jac)?;
        let ones_r = scratch.alloc(jac)?;
        let counts = scratch.alloc(8)?;
        dev.memset_zero(&parts)?;
        dev.memset_zero(&buckets)?;
        let work = scratch.alloc(scratch.free().saturating_sub(1 << 16) & !0xffff)?;
        let split = Split { group, c, packed };
        let chunks = n.div_ceil(chunk).max(1);
        for j in 0..chunks {
            let (b, e) = (j * chunk, ((j + 1) * chunk).min(n));
            let regions = OutRegions {
                windows: windows_r,
                ones: ones_r,
                counts,
                acc: Some(AccRegions {
                    parts,
                    buckets,
                    last: j + 1 == chunks,
                }),
            };
            let acc = regions.acc.as_ref().expect("accumulators");
            let bs = bases.slice(b * pb, (e - b).max(1) * pb)?;
            let sc = scalars.slice(b * FR_BYTES, (e - b).max(1) * FR_BYTES)?;
            let ws = Scratch::within(&work);
            split.enqueue_acc(dev, &ws, &bs, &sc, e - b, &regions, acc)?;
        }
        let mut w = vec![0u8; windows(c) as usize * jac];
        dev.download(&mut w, &windows_r)?;
        let mut o = vec![0u8; jac];
        dev.download(&mut o, &ones_r)?;
        out.push(outcome(
            format!("split {group:?} chunked n={n} chunk={chunk} c={c} packed {packed}"),
            finish(c, &w, &o) == expect,
            seed,
            "chunks accumulated (ones' partials, others' buckets) differ",
        ));
    }
    Ok(())
}

/// Chunk sizes of the chunked split checks at n points: several chunks, the last one
/// short, and one chunk of a single point at the end (none below 3 points).
fn chunk_sizes(n: usize) -> Vec<usize> {
    match n {
        0..=2 => vec![],
        _ => vec![n.div_ceil(3), n - 1],
    }
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
    let scratch_bytes = crate::ops::msm::scratch_bytes_any(n_max) * 3 + n_max * 512 + (64 << 20);
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
        // neighbours, so the additions double; then the base and its negation alternating:
        // sums that cancel to infinity, and infinities carried on.
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

        // Split path: batch-add the ones, MSM the others, the counts on the device.
        scratch.reset();
        let counts = scratch.alloc(8)?;
        let cls = classify(dev, &scratch, &scal_r, n, &counts)?;
        let (n_ones, n_others) = cls.download_counts(dev)?;
        let ones = scalars.iter().filter(|x| **x == Scalar::ONE).count();
        let others = scalars
            .iter()
            .filter(|x| **x != Scalar::ONE && !bool::from(x.is_zero()))
            .count();
        out.push(outcome(
            format!("classify n={n}"),
            n_ones == ones && n_others == others,
            s,
            &format!("counts ones {n_ones} others {n_others} vs cpu {ones} {others}"),
        ));
        let g = Group::G1;
        check_split(
            dev,
            &mut scratch,
            g,
            &bases_r,
            &scal_r,
            n,
            e1,
            finish_g1,
            s,
            &mut out,
        )?;
        for chunk in chunk_sizes(n) {
            check_split_chunked(
                dev,
                &mut scratch,
                g,
                &bases_r,
                &scal_r,
                n,
                chunk,
                e1,
                finish_g1,
                s,
                &mut out,
            )?;
        }

        scratch.reset();
        dev.upload(&bases_r, as_bytes(&g2))?;
        let got2 = msm_g2(dev, &scratch, &bases_r, None, &scal_r, n)?;
        out.push(outcome(
            format!("msm g2 n={n}"),
            got2 == e2,
            s,
            "sum differs from blstrs multi_exp",
        ));
        let g = Group::G2;
        check_split(
            dev,
            &mut scratch,
            g,
            &bases_r,
            &scal_r,
            n,
            e2,
            finish_g2,
            s,
            &mut out,
        )?;
        for chunk in chunk_sizes(n) {
            check_split_chunked(
                dev,
                &mut scratch,
                g,
                &bases_r,
                &scal_r,
                n,
                chunk,
                e2,
                finish_g2,
                s,
                &mut out,
            )?;
        }

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
    let counts = scratch.alloc(8)?;
    let cls = classify(dev, &scratch, &scal_r, n, &counts)?;
    let ones = cls.ones()?;
    let sum = batch_add_g1(dev, &scratch, &bases_r, Some(&cls.one_idx), n, Some(&ones))?;
    let (n_ones, n_others) = cls.download_counts(dev)?;
    let expect: G1Projective = g1.iter().map(|p| p.to_curve()).sum();
    out.push(outcome(
        format!("all-ones g1 n={n}"),
        n_ones == n && n_others == 0 && sum == expect,
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
/// a few, one per window) and the table
/// [`WindowTable::choose`](crate::ops::msm::WindowTable::choose) picks; bases with points
/// at infinity and repeats, scalars with zeros, ones and r − 1, and all-zero scalars.
///
/// # Errors
/// Device errors.
pub fn check_msm_table(dev: &Arc<Device>, seed: u64, big: usize) -> Result<Vec<CheckOutcome>> {
    use crate::ops::msm::{build_table_g1, msm_table_g1, table_scratch_bytes, WindowTable};
    const G1_BYTES: usize = crate::device::layout::G1_AFFINE_BYTES;
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
                t.bytes() + n * FR_BYTES + scratch_bytes + 3 * crate::device::arena::ALIGN,
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
