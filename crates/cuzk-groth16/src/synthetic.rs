//! Synthetic circuits shaped like a Filecoin PoRep partition, for tests and benchmarks.
//! Owns [`SyntheticCircuit`], its [`SyntheticShape`] and [`SyntheticError`]; proving and
//! parameter generation for it are the prover's and `paramgen`'s business.
//!
//! A real 32 GiB PoRep partition (~130M constraints, 328 public inputs) is mostly SHA-256
//! and Poseidon gadgets: nearly every aux variable appears in some A linear combination
//! (≈ 99.7%), about a quarter in B (≈ 25%), B uses ≈ 1/328 of the public inputs (`ONE`),
//! and most aux values are bits. The generator reproduces those densities with four kinds
//! of constraint, each defining one new aux variable v from earlier variables:
//! - boolean allocation, `(ONE − v) · v = 0` (bellpepper's `AllocatedBit::alloc`): v in A and B;
//! - XOR of two bits, `(2x) · y = x + y − v`, y a bit already in B: v in C only, until a
//!   later constraint takes it into A;
//! - multiplication gate, `(x₁ + x₂ + k·ONE) · (y + ONE) = v`: v a field element;
//! - public-input binding, `x · ONE = p` (or `x · p = v` for an input that belongs in B).
//!
//! Variables not yet in A queue up and are consumed as later A operands, so the A density
//! is set by how many are held back on purpose; a B-flagged field value queues until a
//! multiplication gate uses it in B. Operands come from recent variables, so synthesis
//! needs only O(1) memory beyond the constraint system. Everything is deterministic in
//! the seed.

use std::collections::VecDeque;

use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use ff::Field;
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::Scalar;

/// Density and value mix of a synthetic circuit. Defaults match a 32 GiB PoRep partition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticShape {
    /// Fraction of aux variables that appear in A.
    pub a_aux_fraction: f64,
    /// Fraction of aux variables that appear in B.
    pub b_aux_fraction: f64,
    /// Fraction of public inputs (`ONE` included) that appear in B; at least `ONE` does
    /// whenever the circuit has a multiplication gate.
    pub b_input_fraction: f64,
    /// Fraction of aux values that are bits (0 or 1); the rest are field elements.
    /// PoRep's witness is dominated by SHA-256 bits; 0.9 is an estimate.
    pub bit_fraction: f64,
    /// Public inputs including `ONE`; `None` scales with the size (see
    /// [`SyntheticCircuit::default_inputs`]).
    pub n_inputs: Option<usize>,
}

impl Default for SyntheticShape {
    fn default() -> Self {
        SyntheticShape {
            a_aux_fraction: 0.997,
            b_aux_fraction: 0.25,
            b_input_fraction: 1.0 / 328.0,
            bit_fraction: 0.9,
            n_inputs: None,
        }
    }
}

/// A deterministic, satisfiable PoRep-shaped circuit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SyntheticCircuit {
    /// Constraints the circuit enforces (not counting the prover's `input · 0 = 0` rows).
    pub n_constraints: usize,
    /// Public inputs including `ONE`.
    pub n_inputs: usize,
    /// Seed of the structure: which variables each constraint uses, and its constants.
    /// Parameters belong to one structure seed.
    pub seed: u64,
    /// Seed of the witness values (boolean allocations, B-bound inputs): proofs for one
    /// set of parameters differ in this one. [`SyntheticCircuit::new`] sets it to `seed`.
    pub witness_seed: u64,
    /// Densities and value mix.
    pub shape: SyntheticShape,
}

/// A synthetic circuit that cannot be built as asked.
#[derive(Debug, thiserror::Error)]
pub enum SyntheticError {
    /// A fraction outside [0, 1].
    #[error("{name} must lie in [0, 1], got {value}")]
    BadFraction {
        /// Which field.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// Too few constraints for the public inputs.
    #[error(
        "{n_constraints} constraints cannot bind {n_inputs} public inputs (need at least {min})"
    )]
    TooSmall {
        /// Constraints asked for.
        n_constraints: usize,
        /// Inputs asked for.
        n_inputs: usize,
        /// The minimum.
        min: usize,
    },
    /// The domain size is out of range.
    #[error("log2 domain size {lg} outside 3..=31")]
    BadLogN {
        /// What was asked.
        lg: u32,
    },
}

impl SyntheticCircuit {
    /// A circuit with `n_constraints` constraints.
    ///
    /// # Errors
    /// [`SyntheticError::BadFraction`] or [`SyntheticError::TooSmall`].
    pub fn new(
        n_constraints: usize,
        seed: u64,
        shape: SyntheticShape,
    ) -> Result<Self, SyntheticError> {
        for (name, value) in [
            ("a_aux_fraction", shape.a_aux_fraction),
            ("b_aux_fraction", shape.b_aux_fraction),
            ("b_input_fraction", shape.b_input_fraction),
            ("bit_fraction", shape.bit_fraction),
        ] {
            if !(0.0..=1.0).contains(&value) {
                return Err(SyntheticError::BadFraction { name, value });
            }
        }
        let n_inputs = shape
            .n_inputs
            .unwrap_or_else(|| Self::default_inputs(n_constraints))
            .max(1);
        let min = 2 * n_inputs;
        if n_constraints < min {
            return Err(SyntheticError::TooSmall {
                n_constraints,
                n_inputs,
                min,
            });
        }
        Ok(SyntheticCircuit {
            n_constraints,
            n_inputs,
            seed,
            witness_seed: seed,
            shape,
        })
    }

    /// The same circuit structure with another witness.
    pub fn with_witness_seed(self, witness_seed: u64) -> Self {
        SyntheticCircuit {
            witness_seed,
            ..self
        }
    }

    /// The circuit whose constraints plus `input · 0 = 0` rows fill a domain of exactly
    /// 2^lg rows, so that its parameters and proofs use that domain.
    ///
    /// # Errors
    /// [`SyntheticError::BadLogN`] for lg outside 3..=31, or as [`Self::new`].
    pub fn with_log_n(lg: u32, seed: u64, shape: SyntheticShape) -> Result<Self, SyntheticError> {
        if !(3..=31).contains(&lg) {
            return Err(SyntheticError::BadLogN { lg });
        }
        let rows = 1usize << lg;
        let n_inputs = shape
            .n_inputs
            .unwrap_or_else(|| Self::default_inputs(rows))
            .max(1);
        let shape = SyntheticShape {
            n_inputs: Some(n_inputs),
            ..shape
        };
        Self::new(rows.saturating_sub(n_inputs), seed, shape)
    }

    /// Public inputs (with `ONE`) for a circuit of about `rows` rows: PoRep's 328 from 2^19
    /// rows up, scaled down as rows/1024 below, and at least 2.
    pub fn default_inputs(rows: usize) -> usize {
        (rows / 1024).clamp(2, 328)
    }

    /// Rows of the prover's evaluation domain: constraints plus one per input.
    pub fn n_rows(&self) -> usize {
        self.n_constraints + self.n_inputs
    }
}

impl Circuit<Scalar> for SyntheticCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        Generator::new(&self).run(cs, &self)
    }
}

/// Recent variables kept as operand candidates.
const RING: usize = 256;

/// A variable with its value.
#[derive(Clone, Copy)]
struct Var {
    var: Variable,
    value: Scalar,
}

/// A fixed-size pool of recent variables, sampled uniformly.
struct Ring {
    items: Vec<Var>,
    next: usize,
}

impl Ring {
    fn new() -> Self {
        Ring {
            items: Vec::with_capacity(RING),
            next: 0,
        }
    }

    fn push(&mut self, v: Var) {
        if self.items.len() < RING {
            self.items.push(v);
        } else {
            self.items[self.next] = v;
            self.next = (self.next + 1) % RING;
        }
    }

    fn pick(&self, rng: &mut ChaCha8Rng) -> Option<Var> {
        match self.items.len() {
            0 => None,
            n => Some(self.items[rng.gen_range(0..n)]),
        }
    }
}

struct Generator {
    /// Drives the structure only, never a value.
    rng: ChaCha8Rng,
    /// Drives the witness values.
    values: ChaCha8Rng,
    /// Aux variables not yet in any A linear combination.
    pending_a_bits: VecDeque<Var>,
    pending_a_fields: VecDeque<Var>,
    /// B-flagged field values not yet in any B linear combination.
    pending_b: VecDeque<Var>,
    /// Recent bits known to be in B (XOR's B operand).
    b_bits: Ring,
    /// Recent variables known to be in B (the multiplication gate's fallback B operand).
    b_any: Ring,
    /// Recent bits and variables known to be in A (fallback A operands).
    a_bits: Ring,
    a_any: Ring,
    /// Probability that a non-boolean-allocated variable is held out of A for good.
    p_skip_a: f64,
    /// How many inputs besides `ONE` get bound in B.
    n_b_inputs: usize,
}

impl Generator {
    fn new(c: &SyntheticCircuit) -> Self {
        let s = &c.shape;
        // Boolean allocations are in A already; hold back the rest's share.
        let bool_share = s.bit_fraction * s.b_aux_fraction;
        let p_skip_a = match 1.0 - bool_share {
            d if d > 0.0 => ((1.0 - s.a_aux_fraction) / d).clamp(0.0, 1.0),
            _ => 0.0,
        };
        let n_b_inputs =
            ((c.n_inputs as f64 * s.b_input_fraction).round() as usize).saturating_sub(1);
        Generator {
            rng: ChaCha8Rng::seed_from_u64(c.seed),
            values: ChaCha8Rng::seed_from_u64(c.witness_seed),
            pending_a_bits: VecDeque::new(),
            pending_a_fields: VecDeque::new(),
            pending_b: VecDeque::new(),
            b_bits: Ring::new(),
            b_any: Ring::new(),
            a_bits: Ring::new(),
            a_any: Ring::new(),
            p_skip_a,
            n_b_inputs,
        }
    }

    fn run<CS: ConstraintSystem<Scalar>>(
        mut self,
        cs: &mut CS,
        c: &SyntheticCircuit,
    ) -> Result<(), SynthesisError> {
        let n_pub = c.n_inputs - 1;
        let mut next_input = 0usize;
        for step in 0..c.n_constraints {
            // Inputs are allocated late and spread out, as real circuits do.
            let input_due =
                next_input < n_pub && step >= (next_input + 1) * c.n_constraints / (n_pub + 1);
            if input_due {
                self.bind_input(cs, next_input < self.n_b_inputs)?;
                next_input += 1;
                continue;
            }
            let is_bit = self.rng.gen_bool(c.shape.bit_fraction);
            let in_b = self.rng.gen_bool(c.shape.b_aux_fraction);
            match (is_bit, in_b) {
                (true, true) => self.boolean(cs)?,
                (true, false) => match self.b_bits.pick(&mut self.rng) {
                    Some(y) => self.xor(cs, y)?,
                    None => self.boolean(cs)?,
                },
                (false, in_b) => self.mul_gate(cs, in_b)?,
            }
        }
        debug_assert_eq!(next_input, n_pub);
        Ok(())
    }

    fn alloc<CS: ConstraintSystem<Scalar>>(
        &mut self,
        cs: &mut CS,
        value: Scalar,
    ) -> Result<Var, SynthesisError> {
        Ok(Var {
            var: cs.alloc(|| "v", || Ok(value))?,
            value,
        })
    }

    /// `(ONE − v) · v = 0`.
    fn boolean<CS: ConstraintSystem<Scalar>>(&mut self, cs: &mut CS) -> Result<(), SynthesisError> {
        let value = if self.values.gen_bool(0.5) {
            Scalar::ONE
        } else {
            Scalar::ZERO
        };
        let v = self.alloc(cs, value)?;
        cs.enforce(
            || "bool",
            |lc| lc + CS::one() - v.var,
            |lc| lc + v.var,
            |lc| lc,
        );
        self.b_bits.push(v);
        self.b_any.push(v);
        self.a_bits.push(v);
        self.a_any.push(v);
        Ok(())
    }

    /// `(2x) · y = x + y − v`, v = x ⊕ y.
    fn xor<CS: ConstraintSystem<Scalar>>(
        &mut self,
        cs: &mut CS,
        y: Var,
    ) -> Result<(), SynthesisError> {
        let x = match self.pending_a_bits.pop_front() {
            Some(x) => self.now_in_a(x, true),
            None => self.a_bits.pick(&mut self.rng).unwrap_or(y),
        };
        let value = x.value + y.value - (x.value * y.value).double();
        let v = self.alloc(cs, value)?;
        let two = Scalar::from(2u64);
        cs.enforce(
            || "xor",
            |lc| lc + (two, x.var),
            |lc| lc + y.var,
            |lc| lc + x.var + y.var - v.var,
        );
        self.queue_for_a(v, true);
        Ok(())
    }

    /// `(x₁ + x₂ + k·ONE) · (y + ONE) = v`.
    fn mul_gate<CS: ConstraintSystem<Scalar>>(
        &mut self,
        cs: &mut CS,
        in_b: bool,
    ) -> Result<(), SynthesisError> {
        let mut a_lc = LinearCombination::zero();
        let mut a_val = Scalar::from(self.rng.gen::<u64>() | 1);
        a_lc = a_lc + (a_val, CS::one());
        let first = self
            .pop_pending_a()
            .or_else(|| self.a_any.pick(&mut self.rng));
        for x in first.into_iter().chain(self.pop_pending_a()) {
            a_lc = a_lc + x.var;
            a_val += x.value;
        }
        let mut b_lc = LinearCombination::zero() + CS::one();
        let mut b_val = Scalar::ONE;
        if let Some(y) = self
            .pending_b
            .pop_front()
            .or_else(|| self.b_any.pick(&mut self.rng))
        {
            b_lc = b_lc + y.var;
            b_val += y.value;
            self.b_any.push(y);
        }
        let v = self.alloc(cs, a_val * b_val)?;
        cs.enforce(|| "mul", |_| a_lc, |_| b_lc, |lc| lc + v.var);
        self.queue_for_a(v, false);
        if in_b {
            self.pending_b.push_back(v);
        }
        Ok(())
    }

    /// `x · ONE = p`, or for an input that belongs in B, `x · p = v` with a fresh v.
    fn bind_input<CS: ConstraintSystem<Scalar>>(
        &mut self,
        cs: &mut CS,
        in_b: bool,
    ) -> Result<(), SynthesisError> {
        let x = self
            .pop_pending_a()
            .or_else(|| self.a_any.pick(&mut self.rng));
        let x = x.unwrap_or(Var {
            var: CS::one(),
            value: Scalar::ONE,
        });
        if in_b {
            let p_val = Scalar::random(&mut self.values);
            let p = cs.alloc_input(|| "p", || Ok(p_val))?;
            let v = self.alloc(cs, x.value * p_val)?;
            cs.enforce(|| "bind_b", |lc| lc + x.var, |lc| lc + p, |lc| lc + v.var);
            self.queue_for_a(v, false);
        } else {
            let p = cs.alloc_input(|| "p", || Ok(x.value))?;
            cs.enforce(|| "bind", |lc| lc + x.var, |lc| lc + CS::one(), |lc| lc + p);
        }
        Ok(())
    }

    fn pop_pending_a(&mut self) -> Option<Var> {
        if let Some(x) = self.pending_a_fields.pop_front() {
            return Some(self.now_in_a(x, false));
        }
        let x = self.pending_a_bits.pop_front()?;
        Some(self.now_in_a(x, true))
    }

    /// Records that `x` is about to appear in A.
    fn now_in_a(&mut self, x: Var, is_bit: bool) -> Var {
        if is_bit {
            self.a_bits.push(x);
        }
        self.a_any.push(x);
        x
    }

    /// Queues a new variable for a later A operand, unless it is one held out of A.
    fn queue_for_a(&mut self, v: Var, is_bit: bool) {
        if self.rng.gen_bool(self.p_skip_a) {
            return;
        }
        match is_bit {
            true => self.pending_a_bits.push_back(v),
            false => self.pending_a_fields.push_back(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every row satisfies a·b = c, the densities land near the shape's, and the witness
    /// has mostly bit values.
    #[test]
    fn satisfiable_with_porep_densities() {
        let c = SyntheticCircuit::with_log_n(14, 3, SyntheticShape::default()).expect("valid size");
        let asg = crate::synthesize(c).expect("synthesizes");
        assert_eq!(asg.n_rows(), 1 << 14);
        assert_eq!(asg.input_assignment.len(), c.n_inputs);
        assert_eq!(c.n_inputs, 16);
        for (j, ((a, b), cc)) in asg.a.iter().zip(&asg.b).zip(&asg.c).enumerate() {
            assert_eq!(a * b, *cc, "row {j} unsatisfied");
        }
        let n_aux = asg.aux_assignment.len() as f64;
        let a_frac = asg.a_aux_density.count_ones() as f64 / n_aux;
        let b_frac = asg.b_aux_density.count_ones() as f64 / n_aux;
        let bits = asg
            .aux_assignment
            .iter()
            .filter(|v| **v == Scalar::ZERO || **v == Scalar::ONE)
            .count();
        let bit_frac = bits as f64 / n_aux;
        assert!((a_frac - 0.997).abs() < 0.002, "A density {a_frac}");
        assert!((b_frac - 0.25).abs() < 0.02, "B density {b_frac}");
        assert!((bit_frac - 0.9).abs() < 0.02, "bit fraction {bit_frac}");
        assert_eq!(asg.b_input_density.count_ones(), 1, "only ONE in B");
        assert!(asg.b_input_density.get(0));
    }

    #[test]
    fn shape_is_configurable() {
        let shape = SyntheticShape {
            a_aux_fraction: 0.9,
            b_aux_fraction: 0.5,
            b_input_fraction: 0.5,
            bit_fraction: 0.5,
            n_inputs: Some(20),
        };
        let c = SyntheticCircuit::with_log_n(13, 4, shape).expect("valid size");
        let asg = crate::synthesize(c).expect("synthesizes");
        for (j, ((a, b), cc)) in asg.a.iter().zip(&asg.b).zip(&asg.c).enumerate() {
            assert_eq!(a * b, *cc, "row {j} unsatisfied");
        }
        let n_aux = asg.aux_assignment.len() as f64;
        let a_frac = asg.a_aux_density.count_ones() as f64 / n_aux;
        let b_frac = asg.b_aux_density.count_ones() as f64 / n_aux;
        assert!((a_frac - 0.9).abs() < 0.02, "A density {a_frac}");
        assert!((b_frac - 0.5).abs() < 0.03, "B density {b_frac}");
        assert_eq!(
            asg.b_input_density.count_ones(),
            10,
            "half the 20 inputs in B"
        );
    }

    #[test]
    fn deterministic_in_the_seed() {
        let make = |seed| {
            let c = SyntheticCircuit::with_log_n(10, seed, SyntheticShape::default())
                .expect("valid size");
            crate::synthesize(c).expect("synthesizes")
        };
        let (a, b, other) = (make(1), make(1), make(2));
        assert_eq!(a.aux_assignment, b.aux_assignment);
        assert_eq!(a.a, b.a);
        assert_ne!(a.aux_assignment, other.aux_assignment);
    }

    /// Another witness seed changes the values but not the structure: the densities match
    /// and every row still holds.
    #[test]
    fn witness_seed_keeps_the_structure() {
        let c = SyntheticCircuit::with_log_n(10, 5, SyntheticShape::default()).expect("valid size");
        let a = crate::synthesize(c).expect("synthesizes");
        let b = crate::synthesize(c.with_witness_seed(6)).expect("synthesizes");
        assert_ne!(a.aux_assignment, b.aux_assignment);
        assert_eq!(a.a_aux_density, b.a_aux_density);
        assert_eq!(a.b_aux_density, b.b_aux_density);
        assert_eq!(a.b_input_density, b.b_input_density);
        for (j, ((x, y), z)) in b.a.iter().zip(&b.b).zip(&b.c).enumerate() {
            assert_eq!(x * y, *z, "row {j} unsatisfied");
        }
    }

    #[test]
    fn bad_shapes_are_refused() {
        let bad = SyntheticShape {
            b_aux_fraction: 1.5,
            ..SyntheticShape::default()
        };
        assert!(matches!(
            SyntheticCircuit::new(1000, 0, bad),
            Err(SyntheticError::BadFraction {
                name: "b_aux_fraction",
                ..
            })
        ));
        let many = SyntheticShape {
            n_inputs: Some(600),
            ..SyntheticShape::default()
        };
        assert!(matches!(
            SyntheticCircuit::new(1000, 0, many),
            Err(SyntheticError::TooSmall { .. })
        ));
        assert!(matches!(
            SyntheticCircuit::with_log_n(2, 0, SyntheticShape::default()),
            Err(SyntheticError::BadLogN { lg: 2 })
        ));
    }
}
