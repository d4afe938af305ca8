//! The output of synthesis: everything the prover needs from a circuit, and nothing of the
//! circuit itself. Owns [`Assignment`] and the [`Density`] bitmap; the constraint system
//! that fills them lives in `synthesis.rs`. An assignment may leave a, b, c to its
//! backend and carry the recorded matrices instead ([`Assignment::deferred`]); the
//! recordings live in `recorded.rs`.

use std::borrow::Cow;
use std::sync::Arc;

use blstrs::Scalar;

use crate::recorded::R1cs;
use crate::synthesis::SynthesisError;

/// A fixed-length bitmap recording which variables of a query are used (bellperson's
/// `DensityTracker`): bit i set means variable i has a base point in that query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Density {
    words: Vec<u64>,
    len: usize,
}

impl Density {
    /// An all-clear bitmap of `len` bits.
    pub fn new(len: usize) -> Self {
        Density {
            words: vec![0; len.div_ceil(64)],
            len,
        }
    }

    /// Appends one clear bit.
    pub fn push(&mut self, bit: bool) {
        if self.len.is_multiple_of(64) {
            self.words.push(0);
        }
        self.len += 1;
        if bit {
            self.set(self.len - 1);
        }
    }

    /// Sets bit `i`. Panics if `i >= len` (a bug in the caller's indexing).
    pub fn set(&mut self, i: usize) {
        assert!(i < self.len, "density bit {i} out of range {}", self.len);
        self.words[i / 64] |= 1u64 << (i % 64);
    }

    /// Whether bit `i` is set. Panics if `i >= len`.
    pub fn get(&self, i: usize) -> bool {
        assert!(i < self.len, "density bit {i} out of range {}", self.len);
        self.words[i / 64] >> (i % 64) & 1 == 1
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the bitmap has no bits.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of set bits: the number of base points this query holds for these variables.
    pub fn count_ones(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// The backing words, bit i at `words[i / 64] >> (i % 64)`; bits past `len` are zero.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

/// A synthesized circuit: the evaluations of the A, B, C linear combinations at every
/// constraint, the witness, and which variables appear in the A and B queries.
///
/// Invariants (established by `synthesize`):
/// - `a.len() == b.len() == c.len() == n_constraints + input_assignment.len()`: bellperson
///   appends one `input_i · 0 = 0` constraint per public input, and so do we (their A
///   evaluation is the input's value, B and C are zero). A *deferred* assignment
///   (`deferred` set, made by `R1cs::assign_deferred`) has a, b, c empty instead: they are
///   A·z, B·z, C·z of its recording, for the backend to evaluate ([`Assignment::abc`] on
///   the CPU); [`Assignment::n_rows`] counts the rows all the same.
/// - `input_assignment[0] == Scalar::ONE`.
/// - `a_aux_density.len() == b_aux_density.len() == aux_assignment.len()` and
///   `b_input_density.len() == input_assignment.len()`; every input is in the A query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assignment {
    /// ⟨A_j, z⟩ for every constraint j (paper: u_j(τ) evaluated on the witness z).
    pub a: Vec<Scalar>,
    /// ⟨B_j, z⟩ for every constraint j.
    pub b: Vec<Scalar>,
    /// ⟨C_j, z⟩ for every constraint j.
    pub c: Vec<Scalar>,
    /// Public inputs, `ONE` first.
    pub input_assignment: Vec<Scalar>,
    /// Private (auxiliary) witness.
    pub aux_assignment: Vec<Scalar>,
    /// Aux variables that appear in some A linear combination.
    pub a_aux_density: Density,
    /// Inputs that appear in some B linear combination.
    pub b_input_density: Density,
    /// Aux variables that appear in some B linear combination.
    pub b_aux_density: Density,
    /// When set, a, b, c are empty and are this recording's products with the witness
    /// (z = inputs ‖ aux), left to the backend: the GPU evaluates them where the witness
    /// is uploaded, so the host neither computes nor holds them.
    pub deferred: Option<Arc<R1cs>>,
}

/// The a, b, c of an assignment: borrowed when it holds them, evaluated when deferred.
#[derive(Clone, Debug, PartialEq)]
pub struct Abc<'a> {
    /// ⟨A_j, z⟩ for every row j.
    pub a: Cow<'a, [Scalar]>,
    /// ⟨B_j, z⟩ for every row j.
    pub b: Cow<'a, [Scalar]>,
    /// ⟨C_j, z⟩ for every row j.
    pub c: Cow<'a, [Scalar]>,
}

impl Assignment {
    /// Number of rows of a/b/c: constraints plus one per public input (for a deferred
    /// assignment, its recording's).
    pub fn n_rows(&self) -> usize {
        match &self.deferred {
            Some(r1cs) => r1cs.n_rows(),
            None => self.a.len(),
        }
    }

    /// Whether a, b, c are left to the backend ([`Assignment::deferred`]).
    pub fn is_deferred(&self) -> bool {
        self.deferred.is_some()
    }

    /// a, b, c: borrowed, or for a deferred assignment evaluated on the CPU (the parallel
    /// sparse products of its recording, `R1cs::evaluate`).
    ///
    /// # Errors
    /// [`SynthesisError::ShapeMismatch`] when a deferred assignment's witness does not
    /// have its recording's counts.
    pub fn abc(&self) -> Result<Abc<'_>, SynthesisError> {
        match &self.deferred {
            None => Ok(Abc {
                a: Cow::Borrowed(&self.a),
                b: Cow::Borrowed(&self.b),
                c: Cow::Borrowed(&self.c),
            }),
            Some(r1cs) => {
                let [a, b, c] = r1cs.evaluate(&self.input_assignment, &self.aux_assignment)?;
                Ok(Abc {
                    a: Cow::Owned(a),
                    b: Cow::Owned(b),
                    c: Cow::Owned(c),
                })
            }
        }
    }

    /// Evaluates a deferred assignment's a, b, c in place and drops its recording; an
    /// evaluated assignment is left as it is.
    ///
    /// # Errors
    /// As [`Assignment::abc`].
    pub fn evaluate(&mut self) -> Result<(), SynthesisError> {
        if let Some(r1cs) = &self.deferred {
            let [a, b, c] = r1cs.evaluate(&self.input_assignment, &self.aux_assignment)?;
            (self.a, self.b, self.c) = (a, b, c);
            self.deferred = None;
        }
        Ok(())
    }

    /// This assignment with a, b, c evaluated: itself when it holds them, else an
    /// evaluated copy (the witness is cloned).
    ///
    /// # Errors
    /// As [`Assignment::abc`].
    pub fn evaluated(&self) -> Result<Cow<'_, Assignment>, SynthesisError> {
        if !self.is_deferred() {
            return Ok(Cow::Borrowed(self));
        }
        let mut owned = self.clone();
        owned.evaluate()?;
        Ok(Cow::Owned(owned))
    }

    /// log2 of the evaluation domain: the smallest power of two ≥ `n_rows()`.
    pub fn lg_domain(&self) -> u32 {
        self.n_rows().max(1).next_power_of_two().trailing_zeros()
    }

    /// Host bytes held by this assignment (a/b/c and witness), for memory budgets. A
    /// deferred assignment's a, b, c are empty and its recording is shared (the shape
    /// cache counts it, `recorded::recorded_bytes`), so neither is counted here.
    pub fn host_bytes(&self) -> usize {
        32 * (self.a.len() + self.b.len() + self.c.len())
            + 32 * (self.input_assignment.len() + self.aux_assignment.len())
            + 8 * (self.a_aux_density.words().len()
                + self.b_input_density.words().len()
                + self.b_aux_density.words().len())
    }
}
