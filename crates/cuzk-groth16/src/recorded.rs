//! Pre-recorded constraint systems: record a circuit shape's R1CS once ([`R1cs::record`]:
//! the A, B, C matrices in CSR form with a table of distinct coefficients, and the density
//! bitmaps, plain data in `matrices.rs`), then make the [`Assignment`] of later instances of the same shape
//! ([`R1cs::assign`]) by running the circuit for its witness only — `enforce` does not even
//! build its linear combinations — and evaluating a, b, c as sparse matrix-vector products
//! in parallel. The result is the same assignment [`crate::synthesize`] returns.
//!
//! Only for fixed-structure circuits (Groth16 circuits are: the parameters fix the
//! structure). [`R1cs::assign`] checks the counts it sees against the recording and
//! refuses a witness of another shape. A circuit that is a prefix plus independent
//! sub-circuits ([`Parts`]) gets its witness part by part on many threads
//! ([`R1cs::assign_parts`], `sublayout.rs`); the witness-only systems live in `witness.rs`.
//!
//! A *deferred* assignment ([`R1cs::assign_deferred`], [`R1cs::with_witness`]) keeps the
//! recording instead of a, b, c, so that a backend can evaluate the products where the
//! witness already is (the GPU) and the host never holds them; [`Assignment::abc_values`]
//! is the CPU evaluation, the oracle of every other. Which shapes are recorded and kept,
//! and whether assignments are deferred, is a [`crate::Synthesizer`]'s choice.

use std::collections::HashMap;
use std::sync::Arc;

use bellperson::{Circuit, ConstraintSystem, LinearCombination, Variable};
use ff::Field;

use crate::assignment::Abc;
use crate::matrices::{next_id, Csr, INPUT};
use crate::pool_gate::PoolGate;
use crate::sublayout::{witness_parts, Parts, SubLayout};
use crate::synthesis::{SynthesisCs, SynthesisError};
use crate::witness::WitnessCs;
use crate::{Assignment, Scalar};

pub use crate::matrices::{CsrView, Matrix, R1cs, INPUT_COLUMN};

impl R1cs {
    /// Runs `circuit` once and records its structure (its witness values are not kept).
    ///
    /// # Errors
    /// As [`crate::synthesize`]: the circuit's own error, or a constraint naming a
    /// variable that does not exist.
    pub fn record<C: Circuit<Scalar>>(circuit: C) -> Result<R1cs, SynthesisError> {
        Self::record_with_assignment(circuit).map(|(r, _)| r)
    }

    /// Runs `circuit` once through cuzk's [`SynthesisCs`], capturing the matrices as the
    /// constraints are enforced: returns the recording and the very assignment
    /// [`crate::synthesize`] gives for this instance (densities included), so the first
    /// instance of a shape is not synthesized twice.
    ///
    /// # Errors
    /// As [`R1cs::record`].
    pub fn record_with_assignment<C: Circuit<Scalar>>(
        circuit: C,
    ) -> Result<(R1cs, Assignment), SynthesisError> {
        let mut cs = RecordingCs {
            cs: SynthesisCs::new(),
            coeffs: vec![Scalar::ONE],
            coeff_ids: HashMap::from([(Scalar::ONE.to_bytes_le(), 0)]),
            a: Csr::new(),
            b: Csr::new(),
            c: Csr::new(),
        };
        if let Err(source) = circuit.synthesize(&mut cs) {
            return Err(SynthesisError::Circuit {
                n_constraints: cs.cs.n_constraints(),
                source,
            });
        }
        let asg = cs.cs.finish()?;
        let (n_inputs, n_aux) = (asg.input_assignment.len(), asg.aux_assignment.len());
        if n_aux >= INPUT as usize || n_inputs >= INPUT as usize {
            return Err(SynthesisError::ShapeMismatch {
                what: format!(
                    "{n_inputs} inputs, {n_aux} aux: column indices need fewer than 2^31"
                ),
            });
        }
        let r = R1cs {
            id: next_id(),
            n_inputs,
            n_aux,
            coeffs: cs.coeffs,
            a: cs.a,
            b: cs.b,
            c: cs.c,
            a_aux_density: asg.a_aux_density.clone(),
            b_input_density: asg.b_input_density.clone(),
            b_aux_density: asg.b_aux_density.clone(),
        };
        Ok((r, asg))
    }

    /// The assignment of `circuit`, an instance of the recorded shape: its witness from
    /// a run that skips every linear combination, then a, b, c by parallel sparse products.
    ///
    /// # Errors
    /// [`SynthesisError::Circuit`] when the circuit fails, [`SynthesisError::ShapeMismatch`]
    /// when it allocates another number of variables or constraints than the recording.
    pub fn assign<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Assignment, SynthesisError> {
        let (inputs, aux) = self.witness(circuit)?;
        Ok(self.products(inputs, aux))
    }

    /// [`Self::assign`] with a, b, c left to the backend: the assignment holds the witness,
    /// the densities and this recording ([`Abc::Deferred`]) instead of a, b, c.
    ///
    /// # Errors
    /// As [`Self::assign`].
    pub fn assign_deferred<C: Circuit<Scalar>>(
        self: &Arc<Self>,
        circuit: C,
    ) -> Result<Assignment, SynthesisError> {
        let (inputs, aux) = self.witness(circuit)?;
        self.with_witness(inputs, aux)
    }

    /// The deferred assignment ([`Abc::Deferred`]) of a witness of the recorded
    /// counts: `inputs` (ONE first) and `aux`.
    ///
    /// # Errors
    /// [`SynthesisError::ShapeMismatch`] when the witness has other counts than the
    /// recording or does not start with ONE.
    pub fn with_witness(
        self: &Arc<Self>,
        inputs: Vec<Scalar>,
        aux: Vec<Scalar>,
    ) -> Result<Assignment, SynthesisError> {
        self.check_witness(&inputs, &aux)?;
        Ok(Assignment {
            abc: Abc::Deferred(self.clone()),
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
        })
    }

    /// The witness of `circuit` by a run that skips every linear combination, checked
    /// against the recorded counts.
    fn witness<C: Circuit<Scalar>>(
        &self,
        circuit: C,
    ) -> Result<(Vec<Scalar>, Vec<Scalar>), SynthesisError> {
        let mut w = WitnessCs::with_capacity(self.counts());
        if let Err(source) = circuit.synthesize(&mut w) {
            return Err(SynthesisError::Circuit {
                n_constraints: w.constraints,
                source,
            });
        }
        if w.counts() != self.counts() {
            return Err(SynthesisError::ShapeMismatch {
                what: format!("{} against {}", w.counts(), self.counts()),
            });
        }
        Ok((w.inputs, w.aux))
    }

    /// [`Self::assign`] for a circuit given as its [`Parts`] laid out as `layout`: the
    /// parts' witnesses are computed in parallel straight into their ranges, after a turn
    /// at `gate` ([`witness_parts`]), then a, b, c as in [`Self::assign`]. Same result as
    /// assigning the whole circuit.
    ///
    /// # Errors
    /// As [`Self::assign`], and [`SynthesisError::ShapeMismatch`] when `layout` does not
    /// add up to the recording or a part does not match it.
    pub fn assign_parts<P: Parts>(
        &self,
        layout: &SubLayout,
        parts: &P,
        gate: &PoolGate,
    ) -> Result<Assignment, SynthesisError> {
        if layout.total() != self.counts() {
            return Err(SynthesisError::ShapeMismatch {
                what: format!(
                    "parts laid out as {} against {}",
                    layout.total(),
                    self.counts()
                ),
            });
        }
        let (inputs, aux) = witness_parts(layout, parts, gate)?;
        Ok(self.products(inputs, aux))
    }

    /// The assignment of a witness of the recorded counts: a, b, c from [`Self::abc`] and
    /// the recorded densities.
    pub(crate) fn products(&self, inputs: Vec<Scalar>, aux: Vec<Scalar>) -> Assignment {
        let [a, b, c] = self.abc(&inputs, &aux);
        Assignment {
            abc: Abc::Evaluated { a, b, c },
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
        }
    }
}

// Recording a shape from its prefix and one part: a child module, for the matrices' fields.
mod parts;
pub use parts::compare_recordings;
pub(crate) use parts::record_from_parts;

// The recording constraint system: a child module, for the matrices' fields.
mod cs;
use cs::RecordingCs;

#[cfg(test)]
mod tests;
