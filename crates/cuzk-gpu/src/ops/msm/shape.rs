//! The shape of an MSM: the window width the cost model picks for n points, the windows
//! and bucket sets, and how the buckets are spread over the accumulation and running-sum
//! threads. What `mod.rs` enqueues and sizes its scratch by.

use crate::tuning::tuning;

/// Window size in bits for n points: among the c in 8..=20 whose top window holds at least
/// 8 bits (8, 13, 16, 19, 20), the one that minimises the modelled cost
/// ceil(256 / c) · (n + 3 · 2^(c−1)) — per window, n bucket additions plus the running sums
/// over its 2^(c−1) buckets (about three mixed additions' worth per bucket). That is c = 16
/// from ~2^18.5 to ~2^22 points, 19 to ~2^23.2 and 20 for the dense 2^24+ H query (13
/// windows instead of 16). With ceil(256 / c) windows the top one holds only 256 − c ·
/// (windows − 1) bits of a 255-bit scalar (plus the signed digits' carry): 1 bit for c = 17,
/// 4 for c = 18, so a few buckets take most points. The load-balanced accumulation spreads
/// them over threads, but the fixup then adds one such bucket's thread partials serially:
/// on an H200 a 2^22 MSM took 200 ms with c = 17 and 106 ms with c = 18 against 52 ms with
/// c = 16 (docs/runs/2026-11-30.md, "Window widths"), so those widths are never chosen.
/// `GpuTuning::msm_window_bits` (8..=20) forces any c for every MSM, to benchmark window
/// sizes.
pub fn window_bits(n: usize) -> u32 {
    tuning().msm_window_bits.unwrap_or_else(|| {
        (8u32..=20)
            .filter(|&c| top_window_bits(c) >= 8)
            .min_by_key(|&c| modelled_additions(n, c, windows(c)))
            .unwrap_or(16)
    })
}

/// Windows of c bits in a 256-bit scalar.
pub fn windows(c: u32) -> u32 {
    256u32.div_ceil(c)
}

/// The cost model of [`window_bits`] and of the window tables: an MSM of n points with
/// c-bit windows and `sets` bucket sets makes one addition per point and window, plus about
/// three per bucket for the running sums.
pub(crate) fn modelled_additions(n: usize, c: u32, sets: u32) -> u64 {
    n as u64 * windows(c) as u64 + 3 * sets as u64 * (1u64 << (c - 1))
}

/// Bits of a 256-bit scalar left for the top window of c-bit windows.
fn top_window_bits(c: u32) -> u32 {
    256 - c * (windows(c) - 1)
}

/// Accumulation threads aimed for: a few waves of the ~50k G1 threads an H200 holds at once.
const ACC_THREADS: usize = 1 << 18;
/// Fewest sorted entries per accumulation thread, so that most buckets of a sparse MSM
/// still lie inside one thread's range and skip the fixup.
pub(super) const ACC_MIN_K: usize = 32;

/// Buckets of one window are summed in runs of `seg` by one thread: at least this many
/// (the weight j · seg of run j costs a double-and-add per run, amortized over the run)...
const SEG_MIN: u32 = 16;
/// ...and more when that would give more than this many running-sum threads (c = 20 has
/// 13 · 2^19 buckets).
const SEG_THREADS: usize = 1 << 17;

/// Accumulation threads launched for at most `total` sorted entries: the kernel spreads
/// the actual entries (known on the device) over ACC_THREADS threads, at least ACC_MIN_K
/// each, so it never uses more than this many.
fn acc_grid(total: usize) -> usize {
    total.div_ceil(ACC_MIN_K).clamp(1, ACC_THREADS)
}

/// The shape of one MSM: window width, windows and bucket sets.
pub(crate) struct Shape {
    pub(super) c: u32,
    /// Digit windows.
    pub(super) nwin: u32,
    pub(super) nb: u32,
    /// Bucket sets: nwin for a plain MSM, fewer over a window table (`table.rs`).
    pub(super) sets: u32,
    /// Points between rows of a window table (0: a plain MSM, every window reads row 0).
    pub(super) stride: usize,
}

impl Shape {
    /// The plain MSM of n points.
    pub(crate) fn new(n: usize) -> Shape {
        Shape::plain(window_bits(n))
    }

    /// c-bit windows in `sets` bucket sets, table rows `stride` points apart.
    pub(super) fn with(c: u32, sets: u32, stride: usize) -> Shape {
        Shape {
            c,
            nwin: windows(c),
            nb: 1 << (c - 1),
            sets,
            stride,
        }
    }
    pub(super) fn buckets(&self) -> usize {
        self.sets as usize * self.nb as usize
    }
    /// Buckets per running-sum thread: a power of two dividing nb.
    pub(super) fn seg(&self) -> u32 {
        let want = self.buckets().div_ceil(SEG_THREADS).next_power_of_two() as u32;
        want.max(SEG_MIN).min(self.nb)
    }
    pub(super) fn nseg(&self) -> u32 {
        self.nb / self.seg()
    }
    /// Accumulation threads launched for at most n · nwin entries (zero digits and a
    /// count below n make the real number smaller; surplus threads exit).
    pub(super) fn acc_grid(&self, n: usize) -> usize {
        acc_grid(n * self.nwin as usize)
    }

    /// The plain MSM with c-bit windows (a width chosen elsewhere, e.g. for a count known
    /// only on the device).
    pub(crate) fn plain(c: u32) -> Shape {
        Shape::with(c, windows(c), 0)
    }

    /// Window width.
    pub(crate) fn c(&self) -> u32 {
        self.c
    }

    /// Window sums the MSM leaves (one per bucket set).
    pub(crate) fn sums(&self) -> u32 {
        self.sets
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_sizes_follow_the_cost_model() {
        // Unless the tuning forces one (never set in tests).
        if tuning().msm_window_bits.is_some() {
            eprintln!("skipped: CUZK_GPU_MSM_C is set");
            return;
        }
        assert_eq!(window_bits(1), 8);
        assert_eq!(window_bits(1000), 8);
        assert_eq!(window_bits(1 << 20), 16);
        assert_eq!(window_bits(419_915), 16);
        assert_eq!(window_bits(1 << 24), 20);
        assert!((8..=20).contains(&window_bits(usize::MAX >> 8)));
        // Never a width whose top window is a few bits (c = 17: one bit), at any size.
        assert_eq!(top_window_bits(17), 1);
        assert_eq!(top_window_bits(16), 16);
        for lg in 0..40 {
            for n in [1usize << lg, (1usize << lg) * 3 / 2] {
                let c = window_bits(n);
                assert!([8, 13, 16, 19, 20].contains(&c), "n={n}: c={c}");
            }
        }
        // Where c = 18 used to win the model (~2^22.1 points): 16 now; 19 above ~2^22.3.
        assert_eq!(window_bits(4_500_000), 16);
        assert_eq!(window_bits(7_000_000), 19);
    }

    #[test]
    fn shapes_cover_every_entry_and_bucket() {
        for n in [
            1usize,
            3,
            257,
            4095,
            100_003,
            419_915,
            1 << 22,
            (1 << 24) + 5,
            1 << 27,
        ] {
            let s = Shape::new(n);
            assert!(s.nwin * s.c >= 256, "n={n}");
            let seg = s.seg();
            assert!(
                seg.is_power_of_two() && seg <= s.nb && s.nseg() * seg == s.nb,
                "n={n}"
            );
            // Whatever the count below n, K = max(ceil(T / ACC_THREADS), ACC_MIN_K)
            // entries per thread over the launched threads cover all T entries.
            let threads = s.acc_grid(n);
            assert!((1..=ACC_THREADS).contains(&threads), "n={n}");
            for t in [0, 1, n, n * s.nwin as usize / 3, n * s.nwin as usize] {
                let k = t.div_ceil(ACC_THREADS).max(ACC_MIN_K);
                assert!(k * threads >= t, "n={n} entries={t}");
            }
        }
    }
}
