//! Synthesis: runs a bellperson circuit into our own constraint system and returns its
//! [`Assignment`]. Owns [`synthesize`], the [`SynthesisCs`] constraint system and
//! [`SynthesisError`]; what the prover does with the assignment lives in `prover.rs`.
//!
//! Each constraint's A, B and C linear combinations are evaluated against the witness as
//! soon as they are enforced; no constraint matrix is stored. The density bitmaps follow
//! bellperson 0.27's `ProvingAssignment` (`src/groth16/prover/mod.rs` and `src/lc.rs`): a
//! variable enters a query's density when it appears with a nonzero coefficient; A tracks
//! aux variables only (every input is in the A query through the `input_i · 0 = 0` rows),
//! B tracks inputs and aux variables.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, Variable};
use ff::Field;

use crate::assignment::Abc;
use crate::{Assignment, Scalar};

/// Why a circuit could not be synthesized.
#[derive(Debug, thiserror::Error)]
pub enum SynthesisError {
    /// The circuit's own code returned an error (e.g. a missing witness value).
    #[error("circuit failed after {n_constraints} constraints: {source}")]
    Circuit {
        /// Constraints enforced before the failure.
        n_constraints: usize,
        /// The circuit's error.
        source: bellperson::SynthesisError,
    },
    /// A linear combination names a variable that was never allocated.
    #[error("constraint {constraint} uses unallocated {kind} variable {index} (have {allocated})")]
    UnknownVariable {
        /// Index of the offending constraint.
        constraint: usize,
        /// "input" or "aux".
        kind: &'static str,
        /// The variable index used.
        index: usize,
        /// How many variables of that kind existed when the constraint was enforced.
        allocated: usize,
    },
    /// Part `part` of a split circuit (`crate::sublayout::Parts`) could not be built.
    #[error("part {part}: {reason}")]
    Part {
        /// The part's index.
        part: usize,
        /// Why.
        reason: String,
    },
    /// A pre-recorded constraint system ([`crate::recorded::R1cs`]) was given an instance
    /// of another shape.
    #[error("not the recorded shape: {what}")]
    ShapeMismatch {
        /// Both shapes' counts.
        what: String,
    },
}

/// Runs `circuit` and returns its assignment, with the `input_i · 0 = 0` rows appended.
///
/// # Errors
/// [`SynthesisError::Circuit`] when the circuit fails, [`SynthesisError::UnknownVariable`]
/// when a constraint names a variable that does not exist.
pub fn synthesize<C: Circuit<Scalar>>(circuit: C) -> Result<Assignment, SynthesisError> {
    let mut cs = SynthesisCs::new();
    if let Err(source) = circuit.synthesize(&mut cs) {
        return Err(SynthesisError::Circuit {
            n_constraints: cs.n_constraints(),
            source,
        });
    }
    cs.finish()
}

/// The constraint system [`synthesize`] runs circuits into. Public so that callers who
/// drive a circuit's pieces themselves (or extend one system with another) can use it;
/// most callers want [`synthesize`].
#[derive(Debug)]
pub struct SynthesisCs {
    /// The witness and densities; a, b, c grow in the three vectors below and join it in
    /// [`Self::finish`].
    asg: Assignment,
    /// ⟨A_j, z⟩ for each constraint enforced so far.
    a: Vec<Scalar>,
    /// ⟨B_j, z⟩ likewise.
    b: Vec<Scalar>,
    /// ⟨C_j, z⟩ likewise.
    c: Vec<Scalar>,
    /// The first bad constraint seen; `enforce` cannot return errors, so it is kept here.
    error: Option<SynthesisError>,
}

impl Default for SynthesisCs {
    fn default() -> Self {
        Self::new()
    }
}

impl SynthesisCs {
    /// An empty system holding the constant input `ONE`.
    pub fn new() -> Self {
        let mut asg = Assignment::default();
        asg.input_assignment.push(Scalar::ONE);
        asg.b_input_density.push(false);
        SynthesisCs {
            asg,
            a: Vec::new(),
            b: Vec::new(),
            c: Vec::new(),
            error: None,
        }
    }

    /// Public inputs allocated so far, `ONE` included.
    pub fn n_inputs(&self) -> usize {
        self.asg.input_assignment.len()
    }

    /// Private variables allocated so far.
    pub fn n_aux(&self) -> usize {
        self.asg.aux_assignment.len()
    }

    /// Constraints enforced so far (without the input rows, which [`Self::finish`] adds).
    pub fn n_constraints(&self) -> usize {
        self.a.len()
    }

    /// Appends one `input_i · 0 = 0` row per public input (A evaluates to the input's
    /// value, B and C to zero) and returns the assignment.
    ///
    /// # Errors
    /// The first [`SynthesisError::UnknownVariable`] recorded while enforcing.
    pub fn finish(mut self) -> Result<Assignment, SynthesisError> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        let (mut asg, mut a, mut b, mut c) = (self.asg, self.a, self.b, self.c);
        let n_inputs = asg.input_assignment.len();
        a.reserve(n_inputs);
        b.resize(b.len() + n_inputs, Scalar::ZERO);
        c.resize(c.len() + n_inputs, Scalar::ZERO);
        a.extend_from_slice(&asg.input_assignment);
        asg.abc = Abc::Evaluated { a, b, c };
        Ok(asg)
    }

    /// Evaluates `lc` on the witness, marking its variables in the given densities.
    /// Coefficients are tested with `==`, which compares limbs: `is_zero()` is constant-time
    /// (an optimization barrier per limb), pointless on public coefficients and ~6% of a
    /// synthesis profile.
    fn eval(&mut self, lc: &LinearCombination<Scalar>, query: Query) -> Scalar {
        let mut acc = Scalar::ZERO;
        let constraint = self.a.len();
        let inputs = &self.asg.input_assignment;
        for (&i, coeff) in lc.iter_inputs() {
            if *coeff == Scalar::ZERO {
                continue;
            }
            let Some(value) = inputs.get(i) else {
                record(&mut self.error, constraint, "input", i, inputs.len());
                continue;
            };
            acc += mul_coeff(value, coeff);
            if query == Query::B {
                self.asg.b_input_density.set(i);
            }
        }
        let aux = &self.asg.aux_assignment;
        for (&i, coeff) in lc.iter_aux() {
            if *coeff == Scalar::ZERO {
                continue;
            }
            let Some(value) = aux.get(i) else {
                record(&mut self.error, constraint, "aux", i, aux.len());
                continue;
            };
            acc += mul_coeff(value, coeff);
            match query {
                Query::A => self.asg.a_aux_density.set(i),
                Query::B => self.asg.b_aux_density.set(i),
                Query::C => {}
            }
        }
        acc
    }
}

/// Which query a linear combination belongs to (decides the density it marks).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Query {
    A,
    B,
    C,
}

/// `value · coeff`, skipping the multiplication for the common coefficient one.
#[inline]
fn mul_coeff(value: &Scalar, coeff: &Scalar) -> Scalar {
    if *coeff == Scalar::ONE {
        *value
    } else {
        *value * coeff
    }
}

/// Keeps the first unknown-variable error.
fn record(
    error: &mut Option<SynthesisError>,
    constraint: usize,
    kind: &'static str,
    index: usize,
    allocated: usize,
) {
    if error.is_none() {
        *error = Some(SynthesisError::UnknownVariable {
            constraint,
            kind,
            index,
            allocated,
        });
    }
}

impl ConstraintSystem<Scalar> for SynthesisCs {
    type Root = Self;

    /// bellperson's contract: `CS::new()` is empty. Circuits that synthesize pieces into
    /// sub-systems (storage-proofs' `FallbackPoStCircuit::synthesize_extendable`) allocate
    /// their own temporary ONE first, which [`Self::extend`] drops.
    fn new() -> Self {
        SynthesisCs {
            asg: Assignment::default(),
            a: Vec::new(),
            b: Vec::new(),
            c: Vec::new(),
            error: None,
        }
    }

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.asg.aux_assignment.push(f()?);
        self.asg.a_aux_density.push(false);
        self.asg.b_aux_density.push(false);
        Ok(Variable(Index::Aux(self.asg.aux_assignment.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.asg.input_assignment.push(f()?);
        self.asg.b_input_density.push(false);
        Ok(Variable(Index::Input(self.asg.input_assignment.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let a = self.eval(&a(LinearCombination::zero()), Query::A);
        let b = self.eval(&b(LinearCombination::zero()), Query::B);
        let c = self.eval(&c(LinearCombination::zero()), Query::C);
        self.a.push(a);
        self.b.push(b);
        self.c.push(c);
    }

    fn push_namespace<NR, N>(&mut self, _: N)
    where
        NR: Into<String>,
        N: FnOnce() -> NR,
    {
    }

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }

    fn is_extensible() -> bool {
        true
    }

    /// Appends `other`'s constraints and variables, as bellperson's `ProvingAssignment`
    /// does: `other` was built from its own `ONE`, which is dropped here.
    fn extend(&mut self, other: &Self) {
        // Only UnknownVariable is ever stored; keep the first one, renumbered.
        if let (
            None,
            Some(SynthesisError::UnknownVariable {
                constraint,
                kind,
                index,
                allocated,
            }),
        ) = (&self.error, &other.error)
        {
            self.error = Some(SynthesisError::UnknownVariable {
                constraint: constraint + self.a.len(),
                kind,
                index: *index,
                allocated: *allocated,
            });
        }
        self.a.extend_from_slice(&other.a);
        self.b.extend_from_slice(&other.b);
        self.c.extend_from_slice(&other.c);
        let asg = &mut self.asg;
        let o = &other.asg;
        for i in 0..o.aux_assignment.len() {
            asg.a_aux_density.push(o.a_aux_density.get(i));
            asg.b_aux_density.push(o.b_aux_density.get(i));
        }
        // Both systems share input 0 (ONE): its B bit is the union of the two.
        if !o.b_input_density.is_empty() && o.b_input_density.get(0) {
            asg.b_input_density.set(0);
        }
        for i in 1..o.input_assignment.len() {
            asg.b_input_density.push(o.b_input_density.get(i));
        }
        asg.aux_assignment.extend_from_slice(&o.aux_assignment);
        asg.input_assignment
            .extend_from_slice(o.input_assignment.get(1..).unwrap_or(&[]));
    }
}
