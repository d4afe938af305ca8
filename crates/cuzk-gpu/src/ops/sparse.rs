//! a, b, c on the device: a recorded shape's A, B, C matrices ([`R1cs`], cuzk-groth16's
//! `recorded.rs`) uploaded once into a region of VRAM ([`MatricesLayout::upload`]), then
//! a = A·z, b = B·z, c = C·z for each witness z = inputs ‖ aux already on the device
//! ([`products_enqueue`], `kernels/sparse.cu`). The result is exactly the CPU products'
//! (`Assignment::abc`): the constraint rows, then one row per input (a gets the input, b
//! and c zero), which the upload appends to the matrices as rows of their own. Where the
//! region lives and how long is the backend's business (`backend/matrices.rs`).

use cuzk_groth16::recorded::{CsrView, Matrix, R1cs, INPUT_COLUMN};

use crate::device::arena::DevRegion;
use crate::device::launch;
use crate::device::layout::{as_bytes, FR_BYTES};
use crate::device::Device;
use crate::error::{GpuError, Result};

/// Rows of more entries than this are summed by a warp each, shorter ones by a thread each:
/// a thread-per-row warp then waits at most 32 entries for its longest row. Not yet
/// measured against other values (PoRep's rows are mostly 1 to 3 entries, its MultiEq rows
/// hundreds).
pub const LONG_ROW: u32 = 32;

/// Threads per block of both kernels (a multiple of the warp, as the long-row kernel needs).
const BLOCK: u32 = 256;

/// u32 values per host-side upload buffer (16 MiB).
const UPLOAD_WORDS: usize = 1 << 22;

/// Where one matrix lies in the region, in bytes from its start, and its counts on the
/// device (input rows included).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct MatrixLayout {
    n_rows: u32,
    nnz: u32,
    n_long: u32,
    row_start_at: usize,
    col_at: usize,
    coeff_at: usize,
    long_at: usize,
}

/// The device image of a recording: where each array lies in its region and the counts
/// the kernels take. Made from the recording ([`MatricesLayout::of`]), filled by
/// [`MatricesLayout::upload`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MatricesLayout {
    /// The recording's id (`R1cs::id`).
    pub r1cs_id: u64,
    n_inputs: u32,
    n_aux: u32,
    n_coeffs: u32,
    coeffs_at: usize,
    matrices: [MatrixLayout; 3],
    bytes: usize,
}

impl MatricesLayout {
    /// The layout of `r1cs`'s device image.
    ///
    /// # Errors
    /// [`GpuError::Input`] when a count does not fit the kernels' 32-bit indices.
    pub fn of(r1cs: &R1cs) -> Result<MatricesLayout> {
        let n_in = r1cs.n_inputs();
        let u32_of = |what: &str, n: usize| {
            u32::try_from(n)
                .ok()
                .filter(|&n| n < u32::MAX)
                .ok_or_else(|| GpuError::Input(format!("{what}: {n} exceeds 32-bit indices")))
        };
        let mut at = 0usize;
        let mut take = |bytes: usize| {
            let start = at.next_multiple_of(256);
            at = start + bytes;
            start
        };
        let coeffs_at = take(r1cs.coeffs().len() * FR_BYTES);
        let mut matrices = [None; 3];
        for (slot, m) in matrices.iter_mut().zip(Matrix::ALL) {
            let v = r1cs.matrix(m);
            // A gets one entry per input row (the input itself), B and C none.
            let nnz = v.col.len() + if m == Matrix::A { n_in } else { 0 };
            let n_rows = u32_of("rows", r1cs.n_rows())?;
            let nnz = u32_of("entries", nnz)?;
            let n_long = long_rows(&v).count() as u32;
            *slot = Some(MatrixLayout {
                n_rows,
                nnz,
                n_long,
                row_start_at: take((n_rows as usize + 1) * 4),
                col_at: take(nnz as usize * 4),
                coeff_at: take(nnz as usize * 4),
                long_at: take(n_long as usize * 4),
            });
        }
        Ok(MatricesLayout {
            r1cs_id: r1cs.id(),
            n_inputs: u32_of("inputs", n_in)?,
            n_aux: u32_of("aux", r1cs.n_aux())?,
            n_coeffs: u32_of("coefficients", r1cs.coeffs().len())?,
            coeffs_at,
            // Each slot was filled in the loop above.
            matrices: matrices.map(|m| m.expect("every matrix laid out")),
            bytes: at,
        })
    }

    /// Device bytes of the image.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Rows of a, b, c (constraints plus inputs).
    pub fn n_rows(&self) -> usize {
        self.matrices[0].n_rows as usize
    }

    /// Public inputs (ONE included) of the witness the products take.
    pub fn n_inputs(&self) -> usize {
        self.n_inputs as usize
    }

    /// Aux variables of the witness the products take.
    pub fn n_aux(&self) -> usize {
        self.n_aux as usize
    }

    /// Copies `r1cs`'s matrices (with the input rows appended) into `region` and waits.
    ///
    /// # Errors
    /// [`GpuError::Input`] when `r1cs` is not the recording this layout was made of or the
    /// region is too small; driver errors.
    pub fn upload(&self, dev: &Device, r1cs: &R1cs, region: &DevRegion<'_>) -> Result<()> {
        if r1cs.id() != self.r1cs_id {
            return Err(GpuError::Input(format!(
                "matrices of recording {} into the layout of {}",
                r1cs.id(),
                self.r1cs_id
            )));
        }
        if region.bytes() < self.bytes {
            return Err(GpuError::Input(format!(
                "matrices of {} bytes into a {}-byte region",
                self.bytes,
                region.bytes()
            )));
        }
        let n_in = r1cs.n_inputs() as u32;
        dev.upload(
            &region.slice(self.coeffs_at, r1cs.coeffs().len() * FR_BYTES)?,
            as_bytes(r1cs.coeffs()),
        )?;
        for (lay, m) in self.matrices.iter().zip(Matrix::ALL) {
            let v = r1cs.matrix(m);
            let end = *v.row_start.last().unwrap_or(&0);
            let input_rows = (1..=n_in).map(|j| if m == Matrix::A { end + j } else { end });
            let words = v.row_start.iter().copied().chain(input_rows);
            upload_u32s(
                dev,
                region,
                lay.row_start_at,
                lay.n_rows as usize + 1,
                words,
            )?;
            // A's input row j holds input j with coefficient ONE (index 0).
            let n_extra = if m == Matrix::A { n_in } else { 0 };
            let col = (0..n_extra).map(|j| j | INPUT_COLUMN);
            let coeff = (0..n_extra).map(|_| 0);
            let n = lay.nnz as usize;
            upload_u32s(dev, region, lay.col_at, n, v.col.iter().copied().chain(col))?;
            upload_u32s(
                dev,
                region,
                lay.coeff_at,
                n,
                v.coeff.iter().copied().chain(coeff),
            )?;
            upload_u32s(dev, region, lay.long_at, lay.n_long as usize, long_rows(&v))?;
        }
        Ok(())
    }
}

/// Enqueues a = A·z, b = B·z, c = C·z on the compute stream: the matrices of `layout` in
/// `matrices` (uploaded by [`MatricesLayout::upload`]), z = `inputs` ‖ `aux` (Montgomery Fr,
/// the recording's counts), the rows into `out` (at least `layout.n_rows()` scalars each;
/// rows past them are left as they are).
///
/// # Errors
/// [`GpuError::Input`] or [`GpuError::Launch`] for short regions; driver errors.
pub fn products_enqueue(
    dev: &Device,
    layout: &MatricesLayout,
    matrices: &DevRegion<'_>,
    inputs: &DevRegion<'_>,
    aux: &DevRegion<'_>,
    out: [&DevRegion<'_>; 3],
) -> Result<()> {
    if matrices.bytes() < layout.bytes {
        return Err(GpuError::Input(format!(
            "matrices of {} bytes in a {}-byte region",
            layout.bytes,
            matrices.bytes()
        )));
    }
    let coeffs = matrices.slice(layout.coeffs_at, layout.n_coeffs as usize * FR_BYTES)?;
    let (n_in, n_aux, n_coeffs) = (layout.n_inputs, layout.n_aux, layout.n_coeffs);
    for (m, out) in layout.matrices.iter().zip(out) {
        let (rows, nnz) = (m.n_rows as usize, m.nnz as usize);
        let row_start = matrices.slice(m.row_start_at, (rows + 1) * 4)?;
        let col = matrices.slice(m.col_at, nnz * 4)?;
        let coeff = matrices.slice(m.coeff_at, nnz * 4)?;
        // The wrappers check every region against these counts; the kernels check every
        // index they read against them.
        launch::sparse_rows_fr(
            dev,
            Device::grid(rows as u64, BLOCK),
            &row_start,
            &col,
            &coeff,
            &coeffs,
            inputs,
            aux,
            m.n_rows,
            m.nnz,
            n_coeffs,
            n_in,
            n_aux,
            LONG_ROW,
            out,
        )?;
        if m.n_long > 0 {
            let long = matrices.slice(m.long_at, m.n_long as usize * 4)?;
            launch::sparse_long_rows_fr(
                dev,
                Device::grid(m.n_long as u64 * 32, BLOCK),
                &row_start,
                &col,
                &coeff,
                &coeffs,
                inputs,
                aux,
                m.n_rows,
                m.nnz,
                n_coeffs,
                n_in,
                n_aux,
                &long,
                m.n_long,
                out,
            )?;
        }
    }
    Ok(())
}

/// The rows of `m` with more than [`LONG_ROW`] entries, ascending.
fn long_rows<'a>(m: &'a CsrView<'a>) -> impl Iterator<Item = u32> + 'a {
    m.row_start
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1] - w[0] > LONG_ROW)
        .map(|(i, _)| i as u32)
}

/// Uploads the first `n` of `words` as little-endian u32s at `at` of `region`, through a
/// bounded host buffer.
fn upload_u32s(
    dev: &Device,
    region: &DevRegion<'_>,
    at: usize,
    n: usize,
    words: impl Iterator<Item = u32>,
) -> Result<()> {
    let mut buf = Vec::with_capacity(UPLOAD_WORDS.min(n) * 4);
    let mut done = 0usize;
    for w in words.take(n) {
        buf.extend_from_slice(&w.to_le_bytes());
        if buf.len() == UPLOAD_WORDS * 4 {
            dev.upload(&region.slice(at + done * 4, buf.len())?, &buf)?;
            done += UPLOAD_WORDS;
            buf.clear();
        }
    }
    if !buf.is_empty() {
        dev.upload(&region.slice(at + done * 4, buf.len())?, &buf)?;
        done += buf.len() / 4;
    }
    if done != n {
        return Err(GpuError::Internal(format!("{done} of {n} words uploaded")));
    }
    Ok(())
}
