//! [`GpuBackend`]: cuzk-groth16's `Backend` on one device (the start of issue #4). The H
//! polynomial runs as seven NTTs plus the quotient kernel on the device; every MSM uses the
//! device's 0 / 1 / other classification, batch addition of the ones and Pippenger over the
//! others, B in G2 included; only window sums come back. Bellperson's density bitmaps
//! decide which scalars meet which bases, as on the CPU path (the compaction by density is
//! still a host pass).
//!
//! Not yet the design's hot path: the arena is made per prove and the SRS is uploaded per
//! prove (no residency across proofs), uploads are synchronous, and there is no compute
//! token beyond a per-backend lock. Checked against the CPU backend by
//! `check::check_backend` (run with `gpu_bench backend LOG_N`).

use std::sync::Arc;
use std::time::Instant;

use blstrs::Scalar;
use cuzk_groth16::{Assignment, Backend, BackendError, Density, MsmOutputs, ProveReport, Srs};
use ff::{Field, PrimeField};
use parking_lot::Mutex;

use crate::arena::{DevRegion, Scratch, VramArena};
use crate::classify::{batch_add_g1, batch_add_g2, classify};
use crate::device::{launch, Device};
use crate::error::{GpuError, Result};
use crate::kernels::KernelId;
use crate::layout::{as_bytes, scalar_words, FR_BYTES, G1_AFFINE_BYTES, G2_AFFINE_BYTES};
use crate::msm::{msm_g1, msm_g2, scratch_bytes, Group};
use crate::ntt::{Direction, NttOptions, NttPlan, Order};

/// The GPU prover backend for one device.
pub struct GpuBackend {
    dev: Arc<Device>,
    // One prove at a time per backend until the engine's compute token exists.
    busy: Mutex<()>,
}

impl GpuBackend {
    /// A backend on `dev` (kernels load on first use).
    pub fn new(dev: Arc<Device>) -> GpuBackend {
        GpuBackend {
            dev,
            busy: Mutex::new(()),
        }
    }
}

/// The scalars of a query in base order: `parts` concatenated, each filtered by its
/// density bitmap when given (bit i set: variable i has a base).
fn compact(parts: &[(&[Scalar], Option<&Density>)]) -> Vec<Scalar> {
    let mut out = Vec::new();
    for (v, d) in parts {
        match d {
            None => out.extend_from_slice(v),
            Some(d) => out.extend(
                v.iter()
                    .enumerate()
                    .filter(|(i, _)| d.get(*i))
                    .map(|(_, s)| *s),
            ),
        }
    }
    out
}

impl Backend for GpuBackend {
    fn name(&self) -> String {
        format!("gpu:{}", self.dev.ordinal())
    }

    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError> {
        let _busy = self.busy.lock();
        let mut stage = "prepare";
        let r = compute(&self.dev, asg, srs, report, &mut stage);
        r.map_err(|e| match e {
            GpuError::Input(what) => BackendError::Mismatch { what },
            other => BackendError::Device {
                device: format!("gpu:{}", self.dev.ordinal()),
                stage: stage.to_string(),
                message: other.to_string(),
            },
        })
    }
}

fn compute(
    dev: &Arc<Device>,
    asg: &Assignment,
    srs: &Srs,
    report: &mut ProveReport,
    stage: &mut &'static str,
) -> Result<MsmOutputs> {
    let lg = asg.lg_domain();
    let n = 1usize << lg;
    let rows = asg.n_rows();
    if asg.b.len() != rows || asg.c.len() != rows {
        return Err(GpuError::Input(format!(
            "a, b, c have {}, {}, {} rows",
            rows,
            asg.b.len(),
            asg.c.len()
        )));
    }
    if srs.h.len() > n {
        return Err(GpuError::Input(format!(
            "h query has {} points for a domain of {n}",
            srs.h.len()
        )));
    }
    let l_s = compact(&[(&asg.aux_assignment, None)]);
    let a_s = compact(&[
        (&asg.input_assignment, None),
        (&asg.aux_assignment, Some(&asg.a_aux_density)),
    ]);
    let b_s = compact(&[
        (&asg.input_assignment, Some(&asg.b_input_density)),
        (&asg.aux_assignment, Some(&asg.b_aux_density)),
    ]);
    for (name, got, want) in [
        ("l", l_s.len(), srs.l.len()),
        ("a", a_s.len(), srs.a.len()),
        ("b_g1", b_s.len(), srs.b_g1.len()),
        ("b_g2", b_s.len(), srs.b_g2.len()),
    ] {
        if got != want {
            return Err(GpuError::Input(format!(
                "{name} query: assignment uses {got} bases, parameters have {want}"
            )));
        }
    }

    let t = Instant::now();
    let max_q = [l_s.len(), a_s.len(), b_s.len(), srs.h.len()]
        .into_iter()
        .max()
        .unwrap_or(0)
        .max(1);
    let base_bytes = (srs
        .h
        .len()
        .max(srs.l.len())
        .max(srs.a.len())
        .max(srs.b_g1.len())
        * G1_AFFINE_BYTES)
        .max(srs.b_g2.len() * G2_AFFINE_BYTES)
        .max(G1_AFFINE_BYTES);
    let scratch_len = 2 * scratch_bytes(Group::G2, max_q) + max_q * 48 + (64 << 20);
    let arena_bytes = 3 * n * FR_BYTES
        + NttPlan::table_bytes(lg)
        + base_bytes
        + max_q * FR_BYTES
        + scratch_len
        + (8 << 20);
    let arena = VramArena::new(dev.clone(), arena_bytes)?;
    let abc = [
        arena.alloc(n * FR_BYTES)?,
        arena.alloc(n * FR_BYTES)?,
        arena.alloc(n * FR_BYTES)?,
    ];
    let bases = arena.alloc(base_bytes)?;
    let scal = arena.alloc(max_q * FR_BYTES)?;
    let mut scratch = arena.scratch(scratch_len)?;
    let plan = NttPlan::new(dev, &arena, lg)?;
    report.push("gpu_setup", t.elapsed());

    // H = (A·B − C)/Z: per vector iNTT (natural → bit-reversed), coset NTT back to natural
    // order on g·H, then a·b − c times 1/(g^n − 1), then the inverse coset NTT.
    *stage = "ntt_h";
    let t = Instant::now();
    for (r, v) in abc.iter().zip([&asg.a, &asg.b, &asg.c]) {
        dev.memset_zero(r)?;
        dev.upload(r, as_bytes(v))?;
        plan.run(
            dev,
            r,
            NttOptions {
                direction: Direction::Inverse,
                coset: false,
                input: Order::Natural,
                output: Order::BitReversed,
            },
        )?;
        plan.run(
            dev,
            r,
            NttOptions {
                direction: Direction::Forward,
                coset: true,
                input: Order::BitReversed,
                output: Order::Natural,
            },
        )?;
    }
    let g_n = Scalar::MULTIPLICATIVE_GENERATOR.pow_vartime([n as u64]);
    let z_inv = (g_n - Scalar::ONE).invert().unwrap_or(Scalar::ZERO); // g^n ≠ 1: g is not in the domain
    let (pa, pb, pc, nn, zw) = (
        abc[0].ptr(),
        abc[1].ptr(),
        abc[2].ptr(),
        n as u64,
        scalar_words(&z_inv),
    );
    // SAFETY: fr_ab_minus_c(fr_t* a, const fr_t* b, const fr_t* c, u64 n, fr_t zinv); the
    // three regions hold n elements each; the grid covers n threads, each checks i < n.
    launch!(
        dev,
        KernelId::Ntt,
        "fr_ab_minus_c",
        Device::grid(nn, 256),
        &pa,
        &pb,
        &pc,
        &nn,
        &zw
    )?;
    plan.run(dev, &abc[0], NttOptions::natural(Direction::Inverse, true))?;
    dev.sync_compute()?;
    report.push("ntt_h", t.elapsed());

    *stage = "msm_h";
    let t = Instant::now();
    dev.upload(&bases, as_bytes(&srs.h))?;
    scratch.reset();
    let h = msm_g1(dev, &scratch, &bases, None, &abc[0], srs.h.len())?;
    report.push("msm_h", t.elapsed());

    *stage = "msm_l";
    let t = Instant::now();
    let l = split(
        dev,
        &mut scratch,
        &bases,
        &scal,
        &srs.l,
        &l_s,
        batch_add_g1,
        msm_g1,
    )?;
    report.push("msm_l", t.elapsed());
    *stage = "msm_a";
    let t = Instant::now();
    let a = split(
        dev,
        &mut scratch,
        &bases,
        &scal,
        &srs.a,
        &a_s,
        batch_add_g1,
        msm_g1,
    )?;
    report.push("msm_a", t.elapsed());
    *stage = "msm_b_g1";
    let t = Instant::now();
    let b_g1 = split(
        dev,
        &mut scratch,
        &bases,
        &scal,
        &srs.b_g1,
        &b_s,
        batch_add_g1,
        msm_g1,
    )?;
    report.push("msm_b_g1", t.elapsed());
    *stage = "msm_b_g2";
    let t = Instant::now();
    let b_g2 = split(
        dev,
        &mut scratch,
        &bases,
        &scal,
        &srs.b_g2,
        &b_s,
        batch_add_g2,
        msm_g2,
    )?;
    report.push("msm_b_g2", t.elapsed());
    Ok(MsmOutputs {
        h,
        l,
        a,
        b_g1,
        b_g2,
    })
}

/// Σ s_i·P_i as batch_add(bases with s = 1) + MSM(others through their indices), in the
/// group whose `batch_add` and `msm` are given (G1: `batch_add_g1`/`msm_g1`, G2: `_g2`).
#[allow(clippy::too_many_arguments)]
fn split<P: group::Group, A: crate::layout::Plain>(
    dev: &Device,
    scratch: &mut Scratch<'_>,
    bases: &DevRegion<'_>,
    scal: &DevRegion<'_>,
    points: &[A],
    s: &[Scalar],
    batch_add: impl Fn(
        &Device,
        &Scratch<'_>,
        &DevRegion<'_>,
        Option<&DevRegion<'_>>,
        usize,
    ) -> Result<P>,
    msm: impl Fn(
        &Device,
        &Scratch<'_>,
        &DevRegion<'_>,
        Option<&DevRegion<'_>>,
        &DevRegion<'_>,
        usize,
    ) -> Result<P>,
) -> Result<P> {
    if s.is_empty() {
        return Ok(P::identity());
    }
    dev.upload(bases, as_bytes(points))?;
    dev.upload(scal, as_bytes(s))?;
    scratch.reset();
    let cls = classify(dev, scratch, scal, s.len())?;
    let ones = batch_add(dev, scratch, bases, Some(&cls.one_idx), cls.n_ones)?;
    let others = msm(
        dev,
        scratch,
        bases,
        Some(&cls.other_idx),
        &cls.other_scalars,
        cls.n_others,
    )?;
    Ok(ones + others)
}
