//! A recorded constraint system as plain data ([`R1cs`]): the counts, the table of
//! distinct coefficients, the A, B, C matrices in compressed-row form ([`CsrView`]) and
//! the density bitmaps, with their checks and their evaluation a, b, c = A·z, B·z, C·z on
//! the CPU (the oracle of every other evaluator). What reads them (the GPU backend's
//! upload, `recorded.rs`'s assignment) and what makes them (`recorded.rs`'s recording, or
//! [`R1cs::from_csr`]) sit above this module; it knows nothing of circuits.

use std::sync::atomic::{AtomicU64, Ordering};

use ff::Field;
use rayon::prelude::*;

use crate::synthesis::SynthesisError;
use crate::witness::Counts;
use crate::{Density, Scalar};

// A row's sum without a reduction per term.
mod lazy_sum;
use lazy_sum::LazySum;
// The witness with each aux value's kind, which rows are evaluated from.
mod row_witness;
pub use row_witness::RowWitness;

/// One matrix in compressed-row form. A column is aux `k` as `k`, input `j` as
/// `j | INPUT` (inputs are allocated late, so a split by count would move); each entry's
/// coefficient is an index into [`R1cs`]'s table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Csr {
    pub(crate) row_start: Vec<u32>,
    pub(crate) col: Vec<u32>,
    pub(crate) coeff: Vec<u32>,
}

/// Marks an input column.
pub(crate) const INPUT: u32 = 1 << 31;

/// The bit that marks an input column in [`CsrView::col`]: input `j` is `j | INPUT_COLUMN`,
/// aux `k` is `k`.
pub const INPUT_COLUMN: u32 = INPUT;

/// One of the three recorded matrices.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matrix {
    /// A: a = A·z.
    A,
    /// B: b = B·z.
    B,
    /// C: c = C·z.
    C,
}

impl Matrix {
    /// A, B, C in order.
    pub const ALL: [Matrix; 3] = [Matrix::A, Matrix::B, Matrix::C];
}

/// A recorded matrix in compressed-row form, borrowed: row i's entries are
/// `row_start[i]..row_start[i + 1]` of `col` and `coeff`. A column is aux `k` as `k` and
/// input `j` as `j | INPUT_COLUMN`; a coefficient is an index into [`R1cs::coeffs`], where
/// index 0 is ONE. Rows are the constraints only (not the `input_i · 0 = 0` rows).
#[derive(Clone, Copy, Debug)]
pub struct CsrView<'a> {
    /// Entry offsets, one more than the rows; starts at 0, never decreases.
    pub row_start: &'a [u32],
    /// Column of each entry.
    pub col: &'a [u32],
    /// Coefficient index of each entry.
    pub coeff: &'a [u32],
}

impl Csr {
    pub(crate) fn new() -> Csr {
        Csr {
            row_start: vec![0],
            ..Csr::default()
        }
    }

    pub(crate) fn entries(&self) -> usize {
        self.col.len()
    }

    /// Row i's value against z, its terms added unreduced ([`LazySum`]). Most witness
    /// values are bits (PoRep's SHA-256): an aux zero adds nothing and an aux one adds the
    /// coefficient itself, both known from the value's kind without reading the value.
    fn eval_row(&self, i: usize, coeffs: &[Scalar], z: &RowWitness<'_>) -> Scalar {
        let (b, e) = (self.row_start[i] as usize, self.row_start[i + 1] as usize);
        let mut acc = LazySum::default();
        for k in b..e {
            let (c, j) = (self.col[k], self.coeff[k] as usize);
            let v = if c & INPUT != 0 {
                &z.inputs[(c & !INPUT) as usize]
            } else {
                match z.kinds[c as usize] {
                    row_witness::ZERO => continue,
                    row_witness::ONE => {
                        acc.add(&coeffs[j]);
                        continue;
                    }
                    _ => &z.aux[c as usize],
                }
            };
            match j {
                0 => acc.add(v),
                j => acc.add(&(*v * coeffs[j])),
            }
        }
        acc.finish()
    }
}

/// A circuit shape's constraint system, recorded once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct R1cs {
    /// This recording's identity in the process (a clone keeps it: same matrices).
    pub(crate) id: u64,
    pub(crate) n_inputs: usize,
    pub(crate) n_aux: usize,
    /// Distinct coefficients; index 0 is ONE.
    pub(crate) coeffs: Vec<Scalar>,
    pub(crate) a: Csr,
    pub(crate) b: Csr,
    pub(crate) c: Csr,
    pub(crate) a_aux_density: Density,
    pub(crate) b_input_density: Density,
    pub(crate) b_aux_density: Density,
}

impl R1cs {
    /// A recording from its parts: `n_inputs` (ONE included) and `n_aux` variables, the
    /// coefficient table (index 0 must be ONE) and A, B, C as (row_start, col, coeff) in
    /// the layout of [`CsrView`]. The densities are those of the matrices: an aux variable
    /// is in the A (B) query when a row of A (B) names it, an input in the B query when a
    /// row of B names it. For recordings kept elsewhere and for tests of other evaluators.
    ///
    /// # Errors
    /// [`SynthesisError::ShapeMismatch`] naming the first inconsistency: matrices of
    /// different row counts, offsets that do not start at 0, decrease or end past the
    /// entries, a column or coefficient index out of range, a table without ONE first.
    pub fn from_csr(
        n_inputs: usize,
        n_aux: usize,
        coeffs: Vec<Scalar>,
        matrices: [(Vec<u32>, Vec<u32>, Vec<u32>); 3],
    ) -> Result<R1cs, SynthesisError> {
        let bad = |what: String| Err(SynthesisError::ShapeMismatch { what });
        if n_inputs == 0 || n_inputs >= INPUT as usize || n_aux >= INPUT as usize {
            return bad(format!(
                "{n_inputs} inputs, {n_aux} aux: need 1 to 2^31 − 1 inputs, below 2^31 aux"
            ));
        }
        if coeffs.first() != Some(&Scalar::ONE) {
            return bad("the coefficient table must start with ONE".into());
        }
        let [a, b, c] = matrices.map(|(row_start, col, coeff)| Csr {
            row_start,
            col,
            coeff,
        });
        let rows = a.row_start.len();
        for (m, name) in [(&a, "A"), (&b, "B"), (&c, "C")] {
            let (rs, n) = (&m.row_start, m.col.len());
            if rs.len() != rows || rows == 0 {
                return bad(format!(
                    "{name} has {} row offsets, A {rows} (at least 1)",
                    rs.len()
                ));
            }
            if rs[0] != 0 || rs.windows(2).any(|w| w[0] > w[1]) || rs[rows - 1] as usize != n {
                return bad(format!(
                    "{name}'s row offsets do not run from 0 up to its {n} entries"
                ));
            }
            if m.coeff.len() != n {
                return bad(format!(
                    "{name} has {n} columns and {} coefficients",
                    m.coeff.len()
                ));
            }
            if let Some(&k) = m.coeff.iter().find(|&&k| k as usize >= coeffs.len()) {
                return bad(format!("{name} names coefficient {k} of {}", coeffs.len()));
            }
            let out_of_range = |&&c: &&u32| {
                let (i, limit) = if c & INPUT != 0 {
                    (c & !INPUT, n_inputs)
                } else {
                    (c, n_aux)
                };
                i as usize >= limit
            };
            if let Some(&c) = m.col.iter().find(out_of_range) {
                return bad(format!(
                    "{name} names column {c:#x}: {n_inputs} inputs, {n_aux} aux"
                ));
            }
        }
        let mut a_aux_density = Density::new(n_aux);
        let mut b_input_density = Density::new(n_inputs);
        let mut b_aux_density = Density::new(n_aux);
        for &c in &a.col {
            if c & INPUT == 0 {
                a_aux_density.set(c as usize);
            }
        }
        for &c in &b.col {
            if c & INPUT != 0 {
                b_input_density.set((c & !INPUT) as usize);
            } else {
                b_aux_density.set(c as usize);
            }
        }
        Ok(R1cs {
            id: next_id(),
            n_inputs,
            n_aux,
            coeffs,
            a,
            b,
            c,
            a_aux_density,
            b_input_density,
            b_aux_density,
        })
    }

    /// This recording's identity in the process: two recordings (of the same circuit or
    /// not) have different ids; a clone has its original's.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Constraints recorded (without the input rows).
    pub fn n_constraints(&self) -> usize {
        self.a.row_start.len() - 1
    }

    /// Rows of a, b, c: the constraints plus one `input_i · 0 = 0` row per input.
    pub fn n_rows(&self) -> usize {
        self.n_constraints() + self.n_inputs
    }

    /// The distinct coefficients the matrices index; index 0 is ONE.
    pub fn coeffs(&self) -> &[Scalar] {
        &self.coeffs
    }

    /// One recorded matrix.
    pub fn matrix(&self, m: Matrix) -> CsrView<'_> {
        let csr = match m {
            Matrix::A => &self.a,
            Matrix::B => &self.b,
            Matrix::C => &self.c,
        };
        CsrView {
            row_start: &csr.row_start,
            col: &csr.col,
            coeff: &csr.coeff,
        }
    }

    /// Nonzero entries of the three matrices.
    pub fn entries(&self) -> usize {
        self.a.entries() + self.b.entries() + self.c.entries()
    }

    /// Public inputs including `ONE`.
    pub fn n_inputs(&self) -> usize {
        self.n_inputs
    }

    /// Private variables.
    pub fn n_aux(&self) -> usize {
        self.n_aux
    }

    /// Host bytes the recording holds.
    pub fn host_bytes(&self) -> usize {
        let csr = |m: &Csr| (m.row_start.len() + 2 * m.entries()) * 4;
        csr(&self.a) + csr(&self.b) + csr(&self.c) + self.coeffs.len() * 32
    }

    /// The recorded counts.
    pub fn counts(&self) -> Counts {
        Counts {
            inputs: self.n_inputs,
            aux: self.n_aux,
            constraints: self.n_constraints(),
        }
    }

    /// a = A·z, b = B·z, c = C·z for z = (inputs ‖ aux), each with the `input_i · 0 = 0`
    /// rows appended (a gets the inputs, b and c zeros): the a, b, c of the assignment of
    /// this witness, evaluated row-parallel on the current rayon pool.
    ///
    /// # Errors
    /// As [`Self::with_witness`].
    pub fn evaluate(
        &self,
        inputs: &[Scalar],
        aux: &[Scalar],
    ) -> Result<[Vec<Scalar>; 3], SynthesisError> {
        self.check_witness(inputs, aux)?;
        Ok(self.abc(inputs, aux))
    }

    /// z = (inputs ‖ aux) made ready for [`Self::eval_row`]: checked against the recorded
    /// counts, each aux value classified on the current rayon pool (a pass over the
    /// witness; ~1/32 of its bytes held beside it).
    ///
    /// # Errors
    /// As [`Self::check_witness`].
    pub fn row_witness<'a>(
        &self,
        inputs: &'a [Scalar],
        aux: &'a [Scalar],
    ) -> Result<RowWitness<'a>, SynthesisError> {
        self.check_witness(inputs, aux)?;
        Ok(RowWitness::new(self.id, inputs, aux))
    }

    /// Row `row` of a, b or c (`m`) for z ([`Self::row_witness`]), over the whole index space
    /// of the evaluated vector: the constraints' rows, then the `input_i · 0 = 0` rows (a
    /// gets the inputs, b and c zeros), then zeros (the padding to the domain). Row by row,
    /// for a backend that writes a, b, c straight into buffers of its own (a GPU's pinned
    /// staging) instead of the vectors [`Self::evaluate`] allocates.
    ///
    /// # Panics
    /// In debug builds, when `z` was made by another recording (one of other counts
    /// would index out of bounds).
    pub fn eval_row(&self, m: Matrix, row: usize, z: &RowWitness<'_>) -> Scalar {
        debug_assert_eq!(z.recording, self.id, "a row witness of another recording");
        let rows = self.n_constraints();
        if row < rows {
            let csr = match m {
                Matrix::A => &self.a,
                Matrix::B => &self.b,
                Matrix::C => &self.c,
            };
            return csr.eval_row(row, &self.coeffs, z);
        }
        match (m, z.inputs.get(row - rows)) {
            (Matrix::A, Some(v)) => *v,
            _ => Scalar::ZERO,
        }
    }

    /// Checks that `inputs` and `aux` are a witness of this recording's counts whose first
    /// input is ONE.
    ///
    /// # Errors
    /// [`SynthesisError::ShapeMismatch`] saying which.
    pub fn check_witness(&self, inputs: &[Scalar], aux: &[Scalar]) -> Result<(), SynthesisError> {
        if inputs.len() != self.n_inputs || aux.len() != self.n_aux {
            return Err(SynthesisError::ShapeMismatch {
                what: format!(
                    "a witness of {} inputs and {} aux against {}",
                    inputs.len(),
                    aux.len(),
                    self.counts()
                ),
            });
        }
        if inputs[0] != Scalar::ONE {
            return Err(SynthesisError::ShapeMismatch {
                what: "the first input is not ONE".into(),
            });
        }
        Ok(())
    }

    /// a = A·z, b = B·z, c = C·z (rows in parallel) plus the `input_i · 0 = 0` rows, for a
    /// witness of the recorded counts.
    pub(crate) fn abc(&self, inputs: &[Scalar], aux: &[Scalar]) -> [Vec<Scalar>; 3] {
        let rows = self.n_constraints();
        let n_in = self.n_inputs;
        let z = RowWitness::new(self.id, inputs, aux);
        let eval = |m: &Csr| -> Vec<Scalar> {
            let mut v = Vec::with_capacity(rows + n_in);
            (0..rows)
                .into_par_iter()
                .map(|i| m.eval_row(i, &self.coeffs, &z))
                .collect_into_vec(&mut v);
            v
        };
        let (mut a, (mut b, mut c)) = rayon::join(
            || eval(&self.a),
            || rayon::join(|| eval(&self.b), || eval(&self.c)),
        );
        // The `input_i · 0 = 0` rows, as `SynthesisCs::finish` appends them.
        a.extend_from_slice(inputs);
        b.resize(rows + n_in, Scalar::ZERO);
        c.resize(rows + n_in, Scalar::ZERO);
        [a, b, c]
    }
}

/// A fresh recording id. Only an id generator, not synthesis state: ids are unique in the
/// process, whichever `Synthesizer` made the recording, so a backend that keeps matrices
/// by id (the GPU's) never mistakes one engine's recording for another's.
pub(crate) fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
