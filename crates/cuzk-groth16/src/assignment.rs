//! The output of synthesis: everything the prover needs from a circuit, and nothing of the
//! circuit itself. Owns [`Assignment`] and the [`Density`] bitmap; the constraint system
//! that fills them lives in `synthesis.rs`. An assignment may leave a, b, c to its
//! backend and carry the recorded matrices instead ([`Abc::Deferred`]); the recordings
//! live in `recorded.rs`.

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

    /// Number of set bits among bits `range`; bits past `len` count as unset.
    pub fn count_ones_in(&self, range: std::ops::Range<usize>) -> usize {
        self.masked_words(range)
            .map(|(_, w)| w.count_ones() as usize)
            .sum()
    }

    /// The indices of the set bits among bits `range`, in order; bits past `len` count as
    /// unset. A word at a time: a sparse range costs its words, not its bits.
    pub fn ones_in(&self, range: std::ops::Range<usize>) -> impl Iterator<Item = usize> + '_ {
        self.masked_words(range).flat_map(|(base, mut w)| {
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let bit = w.trailing_zeros() as usize;
                    w &= w - 1;
                    base + bit
                })
            })
        })
    }

    /// The words holding bits `range` (clamped to `len`), each with the bits outside the
    /// range cleared, and the index of its bit 0.
    fn masked_words(
        &self,
        range: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (usize, u64)> + '_ {
        let end = range.end.min(self.len);
        let start = range.start.min(end);
        (start / 64..end.div_ceil(64)).map(move |w| {
            let base = w * 64;
            let mut word = self.words[w];
            if start > base {
                word &= !0u64 << (start - base);
            }
            // end > base here: the last word index is (end - 1) / 64.
            if end - base < 64 {
                word &= (1u64 << (end - base)) - 1;
            }
            (base, word)
        })
    }

    /// The backing words, bit i at `words[i / 64] >> (i % 64)`; bits past `len` are zero.
    pub fn words(&self) -> &[u64] {
        &self.words
    }
}

/// A synthesized circuit: the evaluations of the A, B, C linear combinations at every
/// constraint (or the recording to evaluate them from), the witness, and which variables
/// appear in the A and B queries.
///
/// Invariants (established by `synthesize`):
/// - Evaluated ([`Abc::Evaluated`]): `a.len() == b.len() == c.len() == n_constraints +
///   input_assignment.len()`: bellperson appends one `input_i · 0 = 0` constraint per
///   public input, and so do we (their A evaluation is the input's value, B and C are
///   zero). Deferred ([`Abc::Deferred`], made by `R1cs::assign_deferred`): a, b, c are
///   A·z, B·z, C·z of the recording, for the backend to evaluate
///   ([`Assignment::abc_values`] on the CPU); [`Assignment::n_rows`] counts the rows all
///   the same.
/// - `input_assignment[0] == Scalar::ONE`.
/// - `a_aux_density.len() == b_aux_density.len() == aux_assignment.len()` and
///   `b_input_density.len() == input_assignment.len()`; every input is in the A query.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Assignment {
    /// a, b, c: evaluated, or left to the backend with the recording they come from.
    pub abc: Abc,
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

/// An assignment's a, b, c: the vectors, or the recorded matrices they are the products of.
#[derive(Clone, Debug, PartialEq)]
pub enum Abc {
    /// Evaluated on the host, one entry per row.
    Evaluated {
        /// ⟨A_j, z⟩ for every constraint j (paper: u_j(τ) evaluated on the witness z).
        a: Vec<Scalar>,
        /// ⟨B_j, z⟩ for every constraint j.
        b: Vec<Scalar>,
        /// ⟨C_j, z⟩ for every constraint j.
        c: Vec<Scalar>,
    },
    /// Left to the backend: a = A·z, b = B·z, c = C·z of this recording with the witness
    /// z = inputs ‖ aux. The GPU evaluates them where the witness is uploaded, so the host
    /// neither computes nor holds them.
    Deferred(Arc<R1cs>),
}

impl Default for Abc {
    /// Evaluated, no rows.
    fn default() -> Self {
        Abc::Evaluated {
            a: Vec::new(),
            b: Vec::new(),
            c: Vec::new(),
        }
    }
}

/// The a, b, c of an assignment as values: borrowed when it holds them, evaluated when
/// deferred.
#[derive(Clone, Debug, PartialEq)]
pub struct AbcValues<'a> {
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
        match &self.abc {
            Abc::Deferred(r1cs) => r1cs.n_rows(),
            Abc::Evaluated { a, .. } => a.len(),
        }
    }

    /// Whether a, b, c are left to the backend ([`Abc::Deferred`]).
    pub fn is_deferred(&self) -> bool {
        matches!(self.abc, Abc::Deferred(_))
    }

    /// The recording a deferred assignment's a, b, c come from; `None` when evaluated.
    pub fn deferred(&self) -> Option<&Arc<R1cs>> {
        match &self.abc {
            Abc::Deferred(r1cs) => Some(r1cs),
            Abc::Evaluated { .. } => None,
        }
    }

    /// The evaluated a; empty when deferred (check [`Assignment::deferred`] first, or take
    /// [`Assignment::abc_values`]).
    pub fn a(&self) -> &[Scalar] {
        self.evaluated_vectors()[0]
    }

    /// The evaluated b; empty when deferred.
    pub fn b(&self) -> &[Scalar] {
        self.evaluated_vectors()[1]
    }

    /// The evaluated c; empty when deferred.
    pub fn c(&self) -> &[Scalar] {
        self.evaluated_vectors()[2]
    }

    fn evaluated_vectors(&self) -> [&[Scalar]; 3] {
        match &self.abc {
            Abc::Evaluated { a, b, c } => [a, b, c],
            Abc::Deferred(_) => [&[]; 3],
        }
    }

    /// a, b, c: borrowed, or for a deferred assignment evaluated on the CPU (the parallel
    /// sparse products of its recording, `R1cs::evaluate`).
    ///
    /// # Errors
    /// [`SynthesisError::ShapeMismatch`] when a deferred assignment's witness does not
    /// have its recording's counts.
    pub fn abc_values(&self) -> Result<AbcValues<'_>, SynthesisError> {
        match &self.abc {
            Abc::Evaluated { a, b, c } => Ok(AbcValues {
                a: Cow::Borrowed(a),
                b: Cow::Borrowed(b),
                c: Cow::Borrowed(c),
            }),
            Abc::Deferred(r1cs) => {
                let [a, b, c] = r1cs.evaluate(&self.input_assignment, &self.aux_assignment)?;
                Ok(AbcValues {
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
    /// As [`Assignment::abc_values`].
    pub fn evaluate(&mut self) -> Result<(), SynthesisError> {
        if let Abc::Deferred(r1cs) = &self.abc {
            let [a, b, c] = r1cs.evaluate(&self.input_assignment, &self.aux_assignment)?;
            self.abc = Abc::Evaluated { a, b, c };
        }
        Ok(())
    }

    /// This assignment with a, b, c evaluated: itself when it holds them, else an
    /// evaluated copy (the witness is cloned).
    ///
    /// # Errors
    /// As [`Assignment::abc_values`].
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
    /// deferred assignment holds no a, b, c and its recording is shared (its
    /// `Synthesizer` counts it, `Synthesizer::recorded_bytes`), so neither is counted here.
    pub fn host_bytes(&self) -> usize {
        let [a, b, c] = self.evaluated_vectors();
        32 * (a.len() + b.len() + c.len())
            + 32 * (self.input_assignment.len() + self.aux_assignment.len())
            + 8 * (self.a_aux_density.words().len()
                + self.b_input_density.words().len()
                + self.b_aux_density.words().len())
    }
}

#[cfg(test)]
mod tests {
    use super::Density;
    use rand::{Rng, SeedableRng};

    /// A random bitmap of `len` bits, each set with probability `p`.
    fn random(len: usize, p: f64, rng: &mut impl Rng) -> Density {
        let mut d = Density::new(0);
        (0..len).for_each(|_| d.push(rng.gen_bool(p)));
        d
    }

    #[test]
    fn ones_in_a_range_are_the_set_bits_a_bit_at_a_time_finds() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
        for (len, p) in [
            (0, 0.5),
            (1, 1.0),
            (63, 0.5),
            (64, 1.0),
            (65, 0.3),
            (1000, 0.997),
        ] {
            for d in [random(len, p, &mut rng), random(len, 0.0, &mut rng)] {
                let ends = [0, 1, 5, 63, 64, 65, 127, 128, 129, 500, len, len + 70];
                for &b in &ends {
                    for &e in &ends {
                        let want: Vec<usize> = (b..e).filter(|&i| i < len && d.get(i)).collect();
                        let got: Vec<usize> = d.ones_in(b..e).collect();
                        assert_eq!(got, want, "len {len} p {p} range {b}..{e}");
                        assert_eq!(d.count_ones_in(b..e), want.len(), "{len} {b}..{e}");
                    }
                }
                assert_eq!(d.count_ones_in(0..len), d.count_ones());
            }
        }
    }
}
