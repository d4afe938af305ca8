//! Device self-checks against the CPU, runnable from tests and from the binary
//! (`cuzk bench ntt --check`, `cuzk bench msm --check`) on a machine with no cargo. Each
//! check draws fresh inputs from a printed seed and compares the device result with blstrs
//! (MSM, batch addition: `msm.rs`) or a plain O(n log n) NTT written with ff's roots of
//! unity (here).

mod msm;

pub use crate::diag::backend_bench::check_backend;
pub use msm::{check_fixed_base, check_msm, check_msm_table};

use std::sync::Arc;

use blstrs::Scalar;
use ff::{Field, PrimeField};

use crate::device::arena::VramArena;
use crate::device::layout::{as_bytes, as_bytes_mut, FR_BYTES};
use crate::device::Device;
use crate::diag::testdata::random_scalars;
use crate::error::Result;
use crate::ops::ntt::{root_of_unity, Direction, NttOptions, NttPlan, Order};
use msm::edge_scalars;

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
