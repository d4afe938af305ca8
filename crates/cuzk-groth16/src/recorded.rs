//! Pre-recorded constraint systems: record a circuit shape's R1CS once ([`R1cs::record`]:
//! the A, B, C matrices in CSR form with a table of distinct coefficients, and the density
//! bitmaps), then make the [`Assignment`] of later instances of the same shape
//! ([`R1cs::assign`]) by running the circuit for its witness only — `enforce` does not even
//! build its linear combinations — and evaluating a, b, c as sparse matrix-vector products
//! in parallel. The result is the same assignment [`crate::synthesize`] returns.
//!
//! Only for fixed-structure circuits (Groth16 circuits are: the parameters fix the
//! structure). [`R1cs::assign`] checks the counts it sees against the recording and
//! refuses a witness of another shape. A circuit that is a prefix plus independent
//! sub-circuits ([`Parts`]) gets its witness part by part on many threads
//! ([`R1cs::assign_parts`], `sublayout.rs`); the witness-only systems live in `witness.rs`.

use std::collections::HashMap;

use bellperson::{Circuit, ConstraintSystem, LinearCombination, Variable};
use ff::Field;
use rayon::prelude::*;

use crate::sublayout::{witness_parts, Parts, SubLayout};
use crate::synthesis::{SynthesisCs, SynthesisError};
use crate::witness::{Counts, WitnessCs};
use crate::{Assignment, Density, Scalar};

/// One matrix in compressed-row form. A column is aux `k` as `k`, input `j` as
/// `j | INPUT` (inputs are allocated late, so a split by count would move); each entry's
/// coefficient is an index into [`R1cs`]'s table.
#[derive(Clone, Debug, Default)]
struct Csr {
    row_start: Vec<u32>,
    col: Vec<u32>,
    coeff: Vec<u32>,
}

/// Marks an input column.
const INPUT: u32 = 1 << 31;

impl Csr {
    fn new() -> Csr {
        Csr {
            row_start: vec![0],
            ..Csr::default()
        }
    }

    fn entries(&self) -> usize {
        self.col.len()
    }

    /// Row i's value against z = (inputs ‖ aux).
    fn eval_row(&self, i: usize, coeffs: &[Scalar], inputs: &[Scalar], aux: &[Scalar]) -> Scalar {
        let (b, e) = (self.row_start[i] as usize, self.row_start[i + 1] as usize);
        let mut acc = Scalar::ZERO;
        for k in b..e {
            let c = self.col[k];
            let v = if c & INPUT != 0 {
                &inputs[(c & !INPUT) as usize]
            } else {
                &aux[c as usize]
            };
            match self.coeff[k] {
                0 => acc += v,
                j => acc += *v * coeffs[j as usize],
            }
        }
        acc
    }
}

/// A circuit shape's constraint system, recorded once.
#[derive(Clone, Debug)]
pub struct R1cs {
    n_inputs: usize,
    n_aux: usize,
    /// Distinct coefficients; index 0 is ONE.
    coeffs: Vec<Scalar>,
    a: Csr,
    b: Csr,
    c: Csr,
    a_aux_density: Density,
    b_input_density: Density,
    b_aux_density: Density,
}

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

    /// Constraints recorded (without the input rows).
    pub fn n_constraints(&self) -> usize {
        self.a.row_start.len() - 1
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

    /// The assignment of `circuit`, an instance of the recorded shape: its witness from
    /// a run that skips every linear combination, then a, b, c by parallel sparse products.
    ///
    /// # Errors
    /// [`SynthesisError::Circuit`] when the circuit fails, [`SynthesisError::ShapeMismatch`]
    /// when it allocates another number of variables or constraints than the recording.
    pub fn assign<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Assignment, SynthesisError> {
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
        Ok(self.products(w.inputs, w.aux))
    }

    /// [`Self::assign`] for a circuit given as its [`Parts`] laid out as `layout`: the
    /// parts' witnesses are computed in parallel straight into their ranges, then a, b, c
    /// as in [`Self::assign`]. Same result as assigning the whole circuit.
    ///
    /// # Errors
    /// As [`Self::assign`], and [`SynthesisError::ShapeMismatch`] when `layout` does not
    /// add up to the recording or a part does not match it.
    pub fn assign_parts<P: Parts>(
        &self,
        layout: &SubLayout,
        parts: &P,
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
        let (inputs, aux) = witness_parts(layout, parts)?;
        Ok(self.products(inputs, aux))
    }

    /// The assignment of a witness of the recorded counts: a = A·z, b = B·z, c = C·z
    /// (rows in parallel) plus the `input_i · 0 = 0` rows, and the recorded densities.
    fn products(&self, inputs: Vec<Scalar>, aux: Vec<Scalar>) -> Assignment {
        let rows = self.n_constraints();
        let n_in = self.n_inputs;
        let eval = |m: &Csr| -> Vec<Scalar> {
            let mut v = Vec::with_capacity(rows + n_in);
            (0..rows)
                .into_par_iter()
                .map(|i| m.eval_row(i, &self.coeffs, &inputs, &aux))
                .collect_into_vec(&mut v);
            v
        };
        let (mut a, (mut b, mut c)) = rayon::join(
            || eval(&self.a),
            || rayon::join(|| eval(&self.b), || eval(&self.c)),
        );
        // The `input_i · 0 = 0` rows, as `SynthesisCs::finish` appends them.
        a.extend_from_slice(&inputs);
        b.resize(rows + n_in, Scalar::ZERO);
        c.resize(rows + n_in, Scalar::ZERO);
        Assignment {
            a,
            b,
            c,
            input_assignment: inputs,
            aux_assignment: aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
        }
    }
}

// Recording a shape from its prefix and one part: a child module, for the matrices' fields.
#[path = "recorded_parts.rs"]
mod parts;
pub use parts::compare_recordings;
pub(crate) use parts::record_from_parts;

pub use crate::shape_cache::{
    layout, recorded_bytes, set_budget, synthesize_cached, synthesize_cached_parts, with_path,
    CachedPath, DEFAULT_BUDGET,
};

/// cuzk's [`SynthesisCs`] (witness, a/b/c values, densities, unknown-variable errors)
/// plus the A, B, C matrices captured as each constraint is enforced.
struct RecordingCs {
    cs: SynthesisCs,
    /// Distinct coefficients; index 0 is ONE.
    coeffs: Vec<Scalar>,
    coeff_ids: HashMap<[u8; 32], u32>,
    a: Csr,
    b: Csr,
    c: Csr,
}

impl RecordingCs {
    fn coeff_id(&mut self, c: &Scalar) -> u32 {
        let next = self.coeffs.len() as u32;
        let id = *self.coeff_ids.entry(c.to_bytes_le()).or_insert(next);
        if id == next {
            self.coeffs.push(*c);
        }
        id
    }

    /// Appends `lc`'s row to matrix `m` (0, 1, 2: A, B, C): its nonzero terms on allocated
    /// variables (an unknown one is `SynthesisCs`'s error to record).
    fn push_row(&mut self, lc: &LinearCombination<Scalar>, m: usize) {
        let (n_in, n_aux) = (self.cs.n_inputs(), self.cs.n_aux());
        let mut entries: Vec<(u32, u32)> = Vec::new();
        for (&i, coeff) in lc.iter_inputs() {
            if i < n_in && *coeff != Scalar::ZERO {
                entries.push((i as u32 | INPUT, self.coeff_id(coeff)));
            }
        }
        for (&i, coeff) in lc.iter_aux() {
            if i < n_aux && *coeff != Scalar::ZERO {
                entries.push((i as u32, self.coeff_id(coeff)));
            }
        }
        let m = match m {
            0 => &mut self.a,
            1 => &mut self.b,
            _ => &mut self.c,
        };
        for (col, coeff) in entries {
            m.col.push(col);
            m.coeff.push(coeff);
        }
        m.row_start.push(m.col.len() as u32);
    }
}

impl ConstraintSystem<Scalar> for RecordingCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, name: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.cs.alloc(name, f)
    }

    fn alloc_input<F, A, AR>(
        &mut self,
        name: A,
        f: F,
    ) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.cs.alloc_input(name, f)
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, name: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let (la, lb, lc) = (
            a(LinearCombination::zero()),
            b(LinearCombination::zero()),
            c(LinearCombination::zero()),
        );
        self.push_row(&la, 0);
        self.push_row(&lb, 1);
        self.push_row(&lc, 2);
        self.cs.enforce(name, |_| la, |_| lb, |_| lc);
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::{SyntheticCircuit, SyntheticShape};

    /// The recorded path gives exactly `synthesize`'s assignment, for other witnesses of
    /// the recorded shape, at sizes and shapes around the defaults.
    #[test]
    fn assign_equals_synthesize() {
        let shapes = [
            SyntheticShape::default(),
            SyntheticShape {
                bit_fraction: 0.5,
                b_aux_fraction: 0.6,
                ..SyntheticShape::default()
            },
        ];
        for (lg, shape) in [
            (6u32, shapes[0]),
            (10, shapes[0]),
            (11, shapes[1]),
            (13, shapes[0]),
        ] {
            let c = SyntheticCircuit::with_log_n(lg, 5, shape).expect("valid size");
            let r = R1cs::record(c).expect("records");
            for w in [5u64, 77, 1234] {
                let inst = c.with_witness_seed(w);
                let want = crate::synthesize(inst).expect("synthesizes");
                let got = r.assign(inst).expect("assigns");
                assert_eq!(got.a, want.a, "a at 2^{lg}, witness {w}");
                assert_eq!(got.b, want.b, "b at 2^{lg}, witness {w}");
                assert_eq!(got.c, want.c, "c at 2^{lg}, witness {w}");
                assert_eq!(got.input_assignment, want.input_assignment);
                assert_eq!(got.aux_assignment, want.aux_assignment);
                assert_eq!(got.a_aux_density, want.a_aux_density);
                assert_eq!(got.b_input_density, want.b_input_density);
                assert_eq!(got.b_aux_density, want.b_aux_density);
            }
        }
    }

    /// The cache records once per id and gives `synthesize`'s result; an instance of
    /// another shape under the same id falls back to plain synthesis.
    #[test]
    fn cached_synthesis_matches_and_falls_back() {
        let c = SyntheticCircuit::with_log_n(9, 3, SyntheticShape::default()).expect("valid");
        let id = "test-recorded-9";
        let before = recorded_bytes();
        for w in [1u64, 2] {
            let got = synthesize_cached(id, c.with_witness_seed(w)).expect("cached");
            assert_eq!(
                got,
                crate::synthesize(c.with_witness_seed(w)).expect("plain")
            );
        }
        assert!(recorded_bytes() > before, "the shape was recorded");
        let other = SyntheticCircuit::with_log_n(10, 3, SyntheticShape::default()).expect("valid");
        let got = synthesize_cached(id, other).expect("falls back");
        assert_eq!(got, crate::synthesize(other).expect("plain"));
    }

    /// A circuit of another shape is refused, naming both shapes.
    #[test]
    fn another_shape_is_refused() {
        let small = SyntheticCircuit::with_log_n(8, 5, SyntheticShape::default()).expect("valid");
        let big = SyntheticCircuit::with_log_n(9, 5, SyntheticShape::default()).expect("valid");
        let r = R1cs::record(small).expect("records");
        let err = r.assign(big).expect_err("another shape");
        assert!(err.to_string().contains("not the recorded shape"), "{err}");
    }

    /// Sums `x_j · x_j` for sectors `j`, each in a `CS::new()` child when the system is
    /// extensible (as storage-proofs' PoSt does), else in line.
    struct Extending(Vec<u64>);

    impl Circuit<Scalar> for Extending {
        fn synthesize<CS: ConstraintSystem<Scalar>>(
            self,
            cs: &mut CS,
        ) -> Result<(), bellperson::SynthesisError> {
            use bellperson::gadgets::num::AllocatedNum;
            fn sector<CS: ConstraintSystem<Scalar>>(
                cs: &mut CS,
                x: u64,
            ) -> Result<(), bellperson::SynthesisError> {
                let n = AllocatedNum::alloc(cs.namespace(|| "x"), || Ok(Scalar::from(x)))?;
                n.inputize(cs.namespace(|| "x input"))?;
                n.square(cs.namespace(|| "x²"))?;
                Ok(())
            }
            if !CS::is_extensible() {
                return self.0.iter().try_for_each(|&x| sector(cs, x));
            }
            for chunk in self.0.chunks(2) {
                let mut child = CS::new();
                child.alloc_input(|| "temp ONE", || Ok(Scalar::ONE))?;
                for &x in chunk {
                    sector(&mut child, x)?;
                }
                cs.extend(&child);
            }
            Ok(())
        }
    }

    /// The witness-only system is extensible, and extending gives the sequential layout.
    #[test]
    fn extending_circuits_assign_as_synthesized() {
        assert!(<WitnessCs as ConstraintSystem<Scalar>>::is_extensible());
        let r = R1cs::record(Extending(vec![1, 2, 3, 4, 5])).expect("records");
        let xs = vec![9, 8, 7, 6, 5];
        let want = crate::synthesize(Extending(xs.clone())).expect("plain");
        assert_eq!(r.assign(Extending(xs)).expect("assigns"), want);
    }
}
