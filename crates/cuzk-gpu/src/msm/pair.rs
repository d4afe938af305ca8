//! Batch-affine pair rounds before the G1 bucket accumulation: the host sequence of
//! `kernels/pair.cu` ([`PairPlan`], [`pair_accumulate`]). The MSM's phases around them
//! (sort, accumulation of what the rounds leave, running sums) are `mod.rs`'s.

use super::{
    acc_split_total, accumulate_buckets, scan_exclusive, scan_scratch_bytes, AccPoints, Group,
    Shape,
};
use crate::arena::Scratch;
use crate::device::{launch, Device};
use crate::error::Result;
use crate::kernels::KernelId;
use crate::layout;

/// Output positions per thread of a pair round (`pair.cu`): one batch of that many
/// denominators per thread. Not tuned: 32 matches the accumulation's fewest entries per
/// thread.
const PAIR_G: u32 = 32;
/// Thread totals inverted per thread by `pair_invert` (one inversion each). 32 with the
/// binary-Euclid inversion; 64 with the Fermat one it replaced (~1.1 against ~0.8 ms per
/// launch, docs/benchmarks.md, "Batch-affine pair rounds").
const PAIR_G2: u32 = 32;
/// Sorted entries of one group of windows taken through the pair rounds together: bounds
/// their scratch at about 100 bytes per entry (the first two rounds' output points and the
/// prefix products), ~3.4 GB.
const PAIR_GROUP_ENTRIES: usize = 1 << 25;
/// Bytes of an Fp element (a pair round's denominators and their products).
const FP_BYTES: usize = layout::G1_AFFINE_BYTES / 2;

// Pair rounds are off unless CUZK_GPU_MSM_PAIR asks for them. With their products inlined
// (d415ac1) two rounds took a 2^24 MSM from 271 to 250 ms; once every Fp product of the
// point formulas went out of line (fewer instruction-cache misses, ec.cuh), the plain
// accumulation fell to 149 ms of a 190.5 ms MSM, and one or two rounds gave 191.5 and
// 191.9 ms: each round's inversion launch (~0.8 ms whatever its size) and its memory
// traffic eat the saving, and the rounds' ~3.4 GB of scratch would buy nothing
// (docs/benchmarks.md, "Fp products out of line").

/// `CUZK_GPU_MSM_PAIR=k`: exactly min(k, what the bucket sizes allow) pair rounds for every
/// G1 MSM, whatever its size (0: none), to benchmark round counts and to take small MSMs
/// through the rounds in the device checks. Unset: the default policy above.
fn pair_rounds_forced() -> Option<u32> {
    static FORCED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    *FORCED.get_or_init(|| {
        std::env::var("CUZK_GPU_MSM_PAIR")
            .ok()
            .and_then(|v| v.parse().ok())
    })
}

/// The batch-affine pair rounds of one G1 MSM (`pair.cu`): each round halves every bucket's
/// run of points with affine additions (about 6 products each against the XYZZ mixed
/// addition's 10), windows in groups of `wg`; the XYZZ accumulation then sums what is left.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct PairPlan {
    pub(super) rounds: u32,
    pub(super) wg: u32,
}

impl PairPlan {
    /// Output bounds of each round for a group of at most `entries` entries in m buckets: a
    /// run of s points becomes ceil(s / 2), so at most (entries + m) / 2, and never more
    /// than the input.
    fn bounds(&self, entries: usize, m: usize) -> Vec<usize> {
        let mut b = entries;
        (0..self.rounds)
            .map(|_| {
                b = b.min((b + m).div_ceil(2));
                b
            })
            .collect()
    }

    /// Scratch bytes of the rounds and of the groups' accumulation partials.
    pub(super) fn scratch_bytes(&self, s: &Shape, n: usize, group: Group) -> usize {
        let (entries, m) = (self.wg as usize * n, self.wg as usize * s.nb as usize);
        let b = self.bounds(entries, m);
        let out0 = b.first().copied().unwrap_or(1);
        let out1 = b.get(1).copied().unwrap_or(1);
        let threads0 = out0.div_ceil(PAIR_G as usize);
        let groups = s.nwin.div_ceil(self.wg) as usize;
        let acc_threads = acc_split_total(b.last().copied().unwrap_or(entries)).1;
        let a = crate::arena::ALIGN;
        (out0 + out1) * group.affine_bytes()
            + threads0 * PAIR_G as usize * FP_BYTES
            + threads0 * FP_BYTES
            + threads0.next_multiple_of(PAIR_G2 as usize) * FP_BYTES
            + m * 4
            + 2 * (m + 1) * 4
            + groups * self.rounds as usize * scan_scratch_bytes(m)
            + 2 * acc_threads * group.xyzz_bytes()
            + 10 * a
    }
}

impl Shape {
    /// The pair rounds for n points in `group`: none unless `CUZK_GPU_MSM_PAIR` forces them.
    pub(super) fn pair_plan(&self, group: Group, n: usize) -> Option<PairPlan> {
        self.pair_plan_with(group, n, pair_rounds_forced()?)
    }

    /// At most `max_rounds` pair rounds for n points in `group`: G1 only, when the mean
    /// bucket holds at least four points, never more than would leave about two points per
    /// bucket.
    fn pair_plan_with(&self, group: Group, n: usize, max_rounds: u32) -> Option<PairPlan> {
        // The rounds pair points within one window's buckets: plain MSMs only.
        if group != Group::G1 || self.sets != self.nwin {
            return None;
        }
        let mean = n / self.nb as usize;
        if mean < 4 {
            return None;
        }
        let rounds = (mean.ilog2() - 1).min(max_rounds);
        (rounds > 0).then(|| PairPlan {
            rounds,
            wg: (PAIR_GROUP_ENTRIES / n).clamp(1, self.nwin as usize) as u32,
        })
    }
}

/// Round 0's input of the pair rounds: the MSM's bases, optional index list, sorted
/// entries and bucket starts (device pointers).
pub(super) struct PairInput {
    pub(super) bases: u64,
    pub(super) base_idx: u64,
    pub(super) sorted: u64,
    pub(super) starts: u64,
}

/// Enqueues the pair rounds (`pair.cu`) and the XYZZ accumulation of what they leave, one
/// group of `plan.wg` windows at a time, writing every bucket at `buckets` (then as the
/// plain accumulation and fixup leave them: empty buckets infinity).
#[allow(clippy::too_many_arguments)]
pub(super) fn pair_accumulate(
    dev: &Device,
    scratch: &Scratch<'_>,
    s: &Shape,
    plan: &PairPlan,
    n: usize,
    input: &PairInput,
    buckets: u64,
    mark: &mut dyn FnMut(&'static str) -> Result<()>,
) -> Result<()> {
    let group = Group::G1;
    let (ab, xb) = (group.affine_bytes(), group.xyzz_bytes());
    let nb = s.nb as usize;
    let m_max = plan.wg as usize * nb;
    let bounds_max = plan.bounds(plan.wg as usize * n, m_max);
    let out0 = bounds_max.first().copied().unwrap_or(1);
    let out1 = bounds_max.get(1).copied().unwrap_or(1);
    let threads0 = out0.div_ceil(PAIR_G as usize);
    let pts = [scratch.alloc(out0 * ab)?, scratch.alloc(out1 * ab)?];
    let pre = scratch.alloc(threads0 * PAIR_G as usize * FP_BYTES)?;
    let tot = scratch.alloc(threads0 * FP_BYTES)?;
    let pre2 = scratch.alloc(threads0.next_multiple_of(PAIR_G2 as usize) * FP_BYTES)?;
    let counts = scratch.alloc(m_max * 4)?;
    let starts = [
        scratch.alloc((m_max + 1) * 4)?,
        scratch.alloc((m_max + 1) * 4)?,
    ];
    let acc_threads_max = acc_split_total(bounds_max.last().copied().unwrap_or(1)).1;
    let first = scratch.alloc(acc_threads_max * xb)?;
    let last = scratch.alloc(acc_threads_max * xb)?;
    let (pre_p, tot_p, pre2_p, cnt_p, fp, lp) = (
        pre.ptr(),
        tot.ptr(),
        pre2.ptr(),
        counts.ptr(),
        first.ptr(),
        last.ptr(),
    );
    let (g, g2, null) = (PAIR_G, PAIR_G2, 0u64);
    let mut w0 = 0u32;
    while w0 < s.nwin {
        let w1 = (w0 + plan.wg).min(s.nwin);
        let m = (w1 - w0) as usize * nb;
        let m32 = m as u32;
        let b0 = w0 as u64 * nb as u64;
        let bounds = plan.bounds((w1 - w0) as usize * n, m);
        // Round 0 reads the sorted entries at the MSM's bucket starts; round r writes
        // pts[r % 2] and starts[r % 2], which round r + 1 reads.
        let mut in_starts = input.starts + 4 * b0;
        let (mut sorted, mut src_pts) = (input.sorted, null);
        for (r, &bound) in bounds.iter().enumerate() {
            let (out_st, out_pts) = (&starts[r % 2], &pts[r % 2]);
            let (os, op) = (out_st.ptr(), out_pts.ptr());
            let threads = bound.div_ceil(PAIR_G as usize);
            let t32 = threads as u32;
            // SAFETY (the four launches and the scan): pair_halve_counts(in_starts, m,
            // counts) reads m + 1 starts of this group and writes m counts (counts holds
            // m_max >= m); out_st receives m + 1 offsets; pair_forward_g1 / pair_backward_g1
            // take (bases, base_idx, sorted, pts, in_starts, out_starts, m, G, threads, ...)
            // with `threads` >= out_starts[m] / G threads (bound >= the real output), pre
            // holding G * threads0 >= G * threads, tot threads0 >= threads values and
            // out_pts `bound` points; pair_invert(tot, threads, G2, pre2) with pre2 holding
            // threads rounded up to G2 values.
            launch!(
                dev,
                KernelId::Pair,
                "pair_halve_counts",
                Device::grid(m as u64, 256),
                &in_starts,
                &m32,
                &cnt_p
            )?;
            scan_exclusive(dev, scratch, &counts, out_st, None, m)?;
            mark("pair_counts")?;
            launch!(
                dev,
                KernelId::Pair,
                "pair_forward_g1",
                Device::grid(threads as u64, 128),
                &input.bases,
                &input.base_idx,
                &sorted,
                &src_pts,
                &in_starts,
                &os,
                &m32,
                &g,
                &t32,
                &pre_p,
                &tot_p
            )?;
            mark("pair_forward")?;
            launch!(
                dev,
                KernelId::Pair,
                "pair_invert",
                Device::grid(threads.div_ceil(PAIR_G2 as usize) as u64, 64),
                &tot_p,
                &t32,
                &g2,
                &pre2_p
            )?;
            mark("pair_invert")?;
            launch!(
                dev,
                KernelId::Pair,
                "pair_backward_g1",
                Device::grid(threads as u64, 128),
                &input.bases,
                &input.base_idx,
                &sorted,
                &src_pts,
                &in_starts,
                &os,
                &m32,
                &g,
                &t32,
                &pre_p,
                &tot_p,
                &op
            )?;
            mark("pair_backward")?;
            in_starts = os;
            sorted = null;
            src_pts = op;
        }
        // The last round's points in order; first/last hold acc_threads_max >= acc_threads
        // points; buckets from b0 on hold this group's m buckets.
        let points = AccPoints {
            bases: src_pts,
            base_idx: null,
            sorted: null,
        };
        accumulate_buckets(
            dev,
            group,
            &points,
            in_starts,
            m,
            acc_split_total(bounds.last().copied().unwrap_or(1)),
            buckets + b0 * xb as u64,
            (fp, lp),
            mark,
        )?;
        w0 = w1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_plans_bound_every_round() {
        if std::env::var_os("CUZK_GPU_MSM_PAIR").is_some()
            || std::env::var_os("CUZK_GPU_MSM_C").is_some()
        {
            eprintln!("skipped: CUZK_GPU_MSM_PAIR or CUZK_GPU_MSM_C is set");
            return;
        }
        // Off by default at every size.
        for n in [300usize, 1 << 20, 1 << 24] {
            assert_eq!(Shape::new(n).pair_plan(Group::G1, n), None);
        }
        // When asked for: never for G2 or sparse MSMs.
        let s = Shape::new(1 << 24);
        assert_eq!(s.pair_plan_with(Group::G2, 1 << 24, 2), None);
        assert_eq!(Shape::new(300).pair_plan_with(Group::G1, 300, 2), None);
        // Dense 2^24 H (c = 20, 32 points per bucket): 2 rounds, windows two at a time.
        assert_eq!(
            s.pair_plan_with(Group::G1, 1 << 24, 2),
            Some(PairPlan { rounds: 2, wg: 2 })
        );
        // Each round's bound holds the real halved length of any bucket split: bucket
        // sizes from a fixed pseudo-random sequence, some empty, one huge.
        let plan = PairPlan { rounds: 6, wg: 1 };
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut sizes: Vec<usize> = (0..1000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x % 9) as usize
            })
            .collect();
        sizes[17] = 5000;
        let total: usize = sizes.iter().sum();
        for (r, bound) in plan.bounds(total, sizes.len()).into_iter().enumerate() {
            sizes.iter_mut().for_each(|s| *s = s.div_ceil(2));
            let real: usize = sizes.iter().sum();
            assert!(real <= bound, "round {r}: {real} > {bound}");
        }
        for n in [1usize << 21, 1 << 22, 1 << 24, 1 << 27] {
            let s = Shape::new(n);
            let plan = s
                .pair_plan_with(Group::G1, n, 2)
                .expect("dense enough for pairs");
            assert!(
                plan.rounds >= 1 && plan.wg >= 1 && plan.wg <= s.nwin,
                "n={n}"
            );
            // Scratch stays within ~110 bytes per entry of a window group.
            let per = plan.scratch_bytes(&s, n, Group::G1) / (plan.wg as usize * n);
            assert!(per <= 110, "n={n}: {per} bytes per entry");
        }
    }
}
