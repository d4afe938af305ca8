//! Pre-recorded constraint systems: record a circuit shape's R1CS once ([`R1cs::record`]:
//! the A, B, C matrices in CSR form with a table of distinct coefficients, and the density
//! bitmaps), then make the [`Assignment`] of later instances of the same shape
//! ([`R1cs::assign`]) by running the circuit for its witness only — `enforce` does not even
//! build its linear combinations — and evaluating a, b, c as sparse matrix-vector products
//! in parallel. The result is the same assignment [`crate::synthesize`] returns.
//!
//! Only for fixed-structure circuits (Groth16 circuits are: the parameters fix the
//! structure). [`R1cs::assign`] checks the counts it sees against the recording and
//! refuses a witness of another shape.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, Variable};
use ff::Field;
use parking_lot::Mutex;
use rayon::prelude::*;

use crate::synthesis::{SynthesisCs, SynthesisError};
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

    /// The assignment of `circuit`, an instance of the recorded shape: its witness from
    /// a run that skips every linear combination, then a, b, c by parallel sparse products.
    ///
    /// # Errors
    /// [`SynthesisError::Circuit`] when the circuit fails, [`SynthesisError::ShapeMismatch`]
    /// when it allocates another number of variables or constraints than the recording.
    pub fn assign<C: Circuit<Scalar>>(&self, circuit: C) -> Result<Assignment, SynthesisError> {
        let mut w = WitnessCs {
            inputs: Vec::with_capacity(self.n_inputs),
            aux: Vec::with_capacity(self.n_aux),
            constraints: 0,
        };
        w.inputs.push(Scalar::ONE);
        if let Err(source) = circuit.synthesize(&mut w) {
            return Err(SynthesisError::Circuit {
                n_constraints: w.constraints,
                source,
            });
        }
        if (w.inputs.len(), w.aux.len(), w.constraints)
            != (self.n_inputs, self.n_aux, self.n_constraints())
        {
            return Err(SynthesisError::ShapeMismatch {
                what: format!(
                    "{} inputs, {} aux, {} constraints against {}, {}, {}",
                    w.inputs.len(),
                    w.aux.len(),
                    w.constraints,
                    self.n_inputs,
                    self.n_aux,
                    self.n_constraints()
                ),
            });
        }
        let rows = self.n_constraints();
        let n_in = self.n_inputs;
        let eval = |m: &Csr| -> Vec<Scalar> {
            let mut v = Vec::with_capacity(rows + n_in);
            (0..rows)
                .into_par_iter()
                .map(|i| m.eval_row(i, &self.coeffs, &w.inputs, &w.aux))
                .collect_into_vec(&mut v);
            v
        };
        let (mut a, (mut b, mut c)) = rayon::join(
            || eval(&self.a),
            || rayon::join(|| eval(&self.b), || eval(&self.c)),
        );
        // The `input_i · 0 = 0` rows, as `SynthesisCs::finish` appends them.
        a.extend_from_slice(&w.inputs);
        b.resize(rows + n_in, Scalar::ZERO);
        c.resize(rows + n_in, Scalar::ZERO);
        Ok(Assignment {
            a,
            b,
            c,
            input_assignment: w.inputs,
            aux_assignment: w.aux,
            a_aux_density: self.a_aux_density.clone(),
            b_input_density: self.b_input_density.clone(),
            b_aux_density: self.b_aux_density.clone(),
        })
    }
}

/// One circuit id's recording, made once: `None` when it failed or did not fit.
type Slot = Arc<OnceLock<Option<Arc<R1cs>>>>;

/// Recordings kept by circuit id for [`synthesize_cached`], within a byte budget.
struct ShapeCache {
    entries: Mutex<HashMap<String, Slot>>,
    bytes: AtomicU64,
}

fn cache() -> &'static ShapeCache {
    static CACHE: OnceLock<ShapeCache> = OnceLock::new();
    CACHE.get_or_init(|| ShapeCache {
        entries: Mutex::new(HashMap::new()),
        bytes: AtomicU64::new(0),
    })
}

/// Host bytes recordings may take in this process (0: never record).
static BUDGET: AtomicU64 = AtomicU64::new(DEFAULT_BUDGET);

/// The default recording budget: 16 GiB, enough for the largest Filecoin partition
/// (~130M constraints, ~10 GB recorded).
pub const DEFAULT_BUDGET: u64 = 16 << 30;

/// Sets the bytes recordings may take from now on (0 turns recording off; recordings
/// already made stay).
pub fn set_budget(bytes: u64) {
    BUDGET.store(bytes, Ordering::Relaxed);
}

/// Host bytes held by recordings.
pub fn recorded_bytes() -> u64 {
    cache().bytes.load(Ordering::Relaxed)
}

/// [`crate::synthesize`] through the recording of `circuit_id`'s shape: the first call
/// for an id records it (when the budget allows), later calls only run the witness and the
/// parallel products. An instance that does not match its id's recording, or an id whose
/// recording failed or did not fit, is synthesized the plain way. Same result either way.
///
/// # Errors
/// As [`crate::synthesize`].
pub fn synthesize_cached<C: Circuit<Scalar> + Clone>(
    circuit_id: &str,
    circuit: C,
) -> Result<Assignment, SynthesisError> {
    if BUDGET.load(Ordering::Relaxed) == 0 {
        return crate::synthesize(circuit);
    }
    let cell = cache()
        .entries
        .lock()
        .entry(circuit_id.to_string())
        .or_default()
        .clone();
    // The first call of an id records the shape and keeps the assignment of that same
    // run; every other call finds the recording (or `None`) and runs once more below.
    let mut first: Option<Result<Assignment, SynthesisError>> = None;
    let recorded = cell.get_or_init(|| {
        let t = std::time::Instant::now();
        let (r, asg) = match R1cs::record_with_assignment(circuit.clone()) {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(circuit_id, "not recorded, synthesizing each time: {e}");
                first = Some(Err(e));
                return None;
            }
        };
        first = Some(Ok(asg));
        let bytes = r.host_bytes() as u64;
        let used = cache().bytes.load(Ordering::Relaxed);
        if used + bytes > BUDGET.load(Ordering::Relaxed) {
            tracing::info!(
                circuit_id,
                bytes,
                used,
                "recording over budget, synthesizing each time"
            );
            return None;
        }
        cache().bytes.fetch_add(bytes, Ordering::Relaxed);
        tracing::info!(
            circuit_id,
            bytes,
            constraints = r.n_constraints(),
            ms = t.elapsed().as_millis() as u64,
            "constraint system recorded"
        );
        Some(Arc::new(r))
    });
    if let Some(done) = first {
        return done;
    }
    match recorded {
        Some(r) => match r.assign(circuit.clone()) {
            Err(SynthesisError::ShapeMismatch { what }) => {
                tracing::warn!(
                    circuit_id,
                    "instance of another shape ({what}), synthesizing"
                );
                crate::synthesize(circuit)
            }
            other => other,
        },
        None => crate::synthesize(circuit),
    }
}

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

/// Collects the witness only; constraints are counted, their closures never called.
struct WitnessCs {
    inputs: Vec<Scalar>,
    aux: Vec<Scalar>,
    constraints: usize,
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        Ok(Variable(Index::Input(self.inputs.len() - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        self.constraints += 1;
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
}
