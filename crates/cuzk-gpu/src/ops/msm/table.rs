//! Window tables: fixed-base precomputation for a G1 MSM whose bases stay on the device
//! (the resident H query). Row k of a table over n bases holds 2^(c·sets·k)·P_i for every
//! base P_i, row 0 being the bases themselves. A scalar's digit in window w = k·sets + r
//! then multiplies row k's point and goes to bucket set r, so the MSM keeps `sets` bucket
//! sets instead of one per window: the running sums over the buckets shrink by nwin / sets,
//! and with few sets a wider window pays (fewer windows for the same running sums). At 2^24
//! points one set with c = 22 gives 12 windows of additions and 2^21 buckets, against 13
//! windows and 13 · 2^19 buckets for the plain MSM's c = 20. The price is memory: rows · n
//! affine points. `kernels/table.cu` builds the rows; the MSM is `msm.cu`'s, with the set
//! and row of each window given to its histogram and scatter.

use blstrs::G1Projective;

use super::{
    enqueue_shape, modelled_additions, shape_scratch_bytes, window_bits, windows, Group, MsmInput,
    MsmOut, Shape,
};
use crate::device::arena::{DevRegion, Scratch};
use crate::device::launch;
use crate::device::layout::{FR_BYTES, G1_AFFINE_BYTES, G1_JACOBIAN_BYTES};
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::tuning::tuning;

/// Widest window a table MSM uses: 2^22 buckets of 192 bytes in one set.
const TABLE_MAX_C: u32 = 23;
/// A table must cut the modelled additions by at least this fraction to be worth its memory.
const TABLE_MIN_GAIN: f64 = 0.05;
/// Points per thread of the row build (TABLE_G in table.cu).
const ROW_POINTS_PER_THREAD: u64 = 16;

/// The shape of a window table over n G1 bases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowTable {
    /// Window width in bits.
    pub c: u32,
    /// Bucket sets of the MSM (windows sharing a row's points: 1 = every window its own row).
    pub sets: u32,
    /// Bases per row.
    pub n: usize,
}

impl WindowTable {
    /// A table of c-bit windows and `sets` bucket sets over n bases.
    ///
    /// # Errors
    /// [`GpuError::Input`] for c outside 8..=23, sets outside 1..=windows, or a table whose
    /// entries overflow the MSM's 31-bit sort index.
    pub fn new(n: usize, c: u32, sets: u32) -> Result<WindowTable> {
        let t = WindowTable { c, sets, n };
        if !(8..=TABLE_MAX_C).contains(&c) || sets == 0 || sets > t.nwin() || n == 0 {
            return Err(GpuError::Input(format!(
                "window table of {n} points, c = {c}, {sets} sets"
            )));
        }
        if (t.rows() as u64) * (n as u64) > 1 << 31 {
            return Err(GpuError::Input(format!(
                "window table of {} rows of {n} points exceeds the 31-bit sort index",
                t.rows()
            )));
        }
        Ok(t)
    }

    /// Digit windows of a 256-bit scalar.
    pub fn nwin(&self) -> u32 {
        windows(self.c)
    }

    /// Rows of points, the first being the bases.
    pub fn rows(&self) -> u32 {
        self.nwin().div_ceil(self.sets)
    }

    /// Device bytes of the whole table (row 0 included).
    pub fn bytes(&self) -> usize {
        self.rows() as usize * self.n * G1_AFFINE_BYTES
    }

    /// Doublings from one row to the next.
    pub fn row_doublings(&self) -> u32 {
        self.c * self.sets
    }

    /// The MSM shape over the table.
    pub(crate) fn shape(&self) -> Shape {
        Shape::with(self.c, self.sets, self.n)
    }

    /// Modelled additions of an MSM over the table (the model of [`window_bits`]).
    fn cost(&self) -> u64 {
        modelled_additions(self.n, self.c, self.sets)
    }

    /// The table over n bases with the fewest modelled additions among those of at most
    /// `max_bytes` (row 0 included), if it saves at least 5% of the plain MSM's additions;
    /// A forced width of the plain MSM (`GpuTuning::msm_window_bits`) turns tables off.
    pub fn choose(n: usize, max_bytes: usize) -> Option<WindowTable> {
        if n == 0 || tuning().msm_window_bits.is_some() {
            return None;
        }
        let c0 = window_bits(n);
        let plain = modelled_additions(n, c0, windows(c0));
        let best = (8..=TABLE_MAX_C)
            .flat_map(|c| (1..=windows(c)).map(move |sets| (c, sets)))
            .filter_map(|(c, sets)| WindowTable::new(n, c, sets).ok())
            .filter(|t| t.rows() >= 2 && t.bytes() <= max_bytes)
            .min_by_key(|t| (t.cost(), t.rows()))?;
        (best.cost() as f64 <= plain as f64 * (1.0 - TABLE_MIN_GAIN)).then_some(best)
    }
}

/// Scratch bytes of an MSM over `t`.
pub fn table_scratch_bytes(t: &WindowTable) -> usize {
    shape_scratch_bytes(&t.shape(), Group::G1, t.n)
}

/// Enqueues on the compute stream the build of rows 1.. of `t` in `table`, whose row 0 (the
/// bases) is already there: row k from row k − 1 by `t.row_doublings()` doublings, in
/// affine coordinates.
///
/// # Errors
/// [`GpuError::Input`] if `table` is smaller than `t.bytes()`; driver errors.
pub fn build_table_g1(dev: &Device, table: &DevRegion<'_>, t: &WindowTable) -> Result<()> {
    if table.bytes() < t.bytes() {
        return Err(GpuError::Input(format!(
            "window table of {} bytes in a region of {}",
            t.bytes(),
            table.bytes()
        )));
    }
    let row = t.n * G1_AFFINE_BYTES;
    let (n32, dbls) = (t.n as u32, t.row_doublings());
    for k in 1..t.rows() as usize {
        let (src, dst) = (table.slice((k - 1) * row, row)?, table.slice(k * row, row)?);
        // src and dst are disjoint rows of n points each; the grid covers ceil(n / 16)
        // threads and the kernel checks each thread's range against n.
        launch::table_row_g1(
            dev,
            Device::grid((t.n as u64).div_ceil(ROW_POINTS_PER_THREAD), 128),
            &src,
            &dst,
            n32,
            dbls,
        )?;
    }
    Ok(())
}

/// `Σ scalars[i] · bases[i]` for the n = `t.n` bases whose window table `t` is in `table`.
///
/// # Errors
/// [`GpuError::Input`] when a region is too small or n differs from the table's; arena or
/// driver errors.
pub fn msm_table_g1(
    dev: &Device,
    scratch: &Scratch<'_>,
    table: &DevRegion<'_>,
    t: &WindowTable,
    scalars: &DevRegion<'_>,
    n: usize,
) -> Result<G1Projective> {
    if n != t.n || table.bytes() < t.bytes() || scalars.bytes() < n * FR_BYTES {
        return Err(GpuError::Input(format!(
            "msm of {n} points over a window table of {} points ({} bytes, region {}; \
             scalars region {})",
            t.n,
            t.bytes(),
            table.bytes(),
            scalars.bytes()
        )));
    }
    let s = t.shape();
    let input = MsmInput {
        bases: table,
        base_idx: None,
        scalars,
        n,
        count: None,
    };
    let windows = scratch.alloc(s.sums() as usize * G1_JACOBIAN_BYTES)?;
    enqueue_shape(dev, scratch, Group::G1, &s, &input, &windows)?;
    let out = MsmOut {
        windows,
        nwin: s.sums(),
        c: s.c(),
    };
    Ok(MsmOut::finish_g1(out.c, &out.download(dev, Group::G1)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_fit_their_budget_and_the_sort_index() {
        if tuning().msm_window_bits.is_some() {
            eprintln!("skipped: a window width is forced");
            return;
        }
        // The 2^24 H query with room for everything: one set of 22-bit windows, 12 rows.
        let n = (1 << 24) - 1;
        let t = WindowTable::choose(n, usize::MAX).unwrap();
        assert_eq!((t.c, t.sets, t.rows()), (22, 1, 12));
        // Less room: more sets, fewer rows, never over the budget.
        for rows in [2usize, 3, 4, 6] {
            let budget = rows * n * G1_AFFINE_BYTES;
            match WindowTable::choose(n, budget) {
                Some(t) => {
                    assert!(t.bytes() <= budget && t.rows() as usize <= rows, "{t:?}");
                    assert!(t.rows() * t.sets >= t.nwin());
                }
                // Two rows need 6 or 7 sets: too little saved.
                None => assert!(rows < 4, "{rows} rows"),
            }
        }
        // No room for a second row: no table.
        assert_eq!(WindowTable::choose(n, 2 * n * G1_AFFINE_BYTES - 1), None);
        // 2^27 points: at most 16 rows fit the 31-bit index.
        let t = WindowTable::choose(1 << 27, usize::MAX).unwrap();
        assert!((t.rows() as u64) << 27 <= 1 << 31, "{t:?}");
        // Bad shapes are errors.
        assert!(WindowTable::new(100, 7, 1).is_err());
        assert!(WindowTable::new(100, 16, 0).is_err());
        assert!(WindowTable::new(100, 16, 17).is_err());
        assert!(WindowTable::new(1 << 30, 8, 1).is_err());
    }
}
