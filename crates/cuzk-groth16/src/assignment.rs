//! The output of synthesis: everything the prover needs from a circuit, and nothing of the
//! circuit itself. Owns [`Assignment`] and the [`Density`] bitmap; the constraint system
//! that fills them lives in `synthesis.rs`.

use blstrs::Scalar;

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
///   evaluation is the input's value, B and C are zero).
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
}

impl Assignment {
    /// Number of rows of a/b/c: constraints plus one per public input.
    pub fn n_rows(&self) -> usize {
        self.a.len()
    }

    /// log2 of the evaluation domain: the smallest power of two ≥ `n_rows()`.
    pub fn lg_domain(&self) -> u32 {
        self.n_rows().max(1).next_power_of_two().trailing_zeros()
    }

    /// Host bytes held by this assignment (a/b/c and witness), for memory budgets.
    pub fn host_bytes(&self) -> usize {
        32 * (self.a.len() + self.b.len() + self.c.len())
            + 32 * (self.input_assignment.len() + self.aux_assignment.len())
            + 8 * (self.a_aux_density.words().len()
                + self.b_input_density.words().len()
                + self.b_aux_density.words().len())
    }
}
