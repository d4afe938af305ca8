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
//!
//! With [`SyntheticShape::parts`] = n ≥ 2 the circuit is laid out as a PoRep partition is
//! (a short prefix, then 18 identical challenges): a prefix of [`PREFIX`] constraints, then
//! n sub-circuits of one structure that read the prefix's variables but never each other's,
//! each with its own witness values. The circuit is then also given as its
//! [`Parts`], so a recorded shape computes its witness part by
//! part on many threads, as PoRep's challenges do. One part (the default) is one sequential
//! circuit, the one every earlier parameters file was made for.

use std::collections::VecDeque;

use bellperson::{Circuit, ConstraintSystem, LinearCombination, SynthesisError, Variable};
use ff::Field;
use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::sublayout::Parts;
use crate::Scalar;

/// Constraints of the prefix of a circuit given as parts, besides two per public input it
/// binds: enough to fill the operand pools the sub-circuits start from.
pub const PREFIX: usize = 256;

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
    /// Independent sub-circuits after a short prefix (a 32 GiB PoRep partition has 18
    /// challenges); 1, the default, is one sequential circuit.
    pub parts: usize,
}

impl Default for SyntheticShape {
    fn default() -> Self {
        SyntheticShape {
            a_aux_fraction: 0.997,
            b_aux_fraction: 0.25,
            b_input_fraction: 1.0 / 328.0,
            bit_fraction: 0.9,
            n_inputs: None,
            parts: 1,
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
    /// No parts.
    #[error("a circuit has at least 1 part, got 0")]
    NoParts,
}

/// A run of constraints that binds `inputs` public inputs, the first `b_inputs` of them in B.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Segment {
    constraints: usize,
    inputs: usize,
    b_inputs: usize,
}

/// How a circuit is laid out: the prefix, then `parts` sub-circuits of one shape (for a
/// sequential circuit the prefix is the whole circuit and there are no parts).
#[derive(Clone, Copy, Debug)]
struct Split {
    prefix: Segment,
    part: Segment,
    parts: usize,
}

impl Split {
    /// The layout of `n_constraints` binding `n_inputs` (with `ONE`) in `shape.parts`
    /// parts: the public inputs other than `ONE` shared evenly (the rest in the prefix),
    /// the B-bound ones first in the prefix, then evenly over the parts; the constraints
    /// shared evenly after at least [`PREFIX`] plus two per prefix input.
    fn of(n_constraints: usize, n_inputs: usize, shape: &SyntheticShape) -> Split {
        let n_pub = n_inputs.saturating_sub(1);
        let n_b = ((n_inputs as f64 * shape.b_input_fraction).round() as usize).saturating_sub(1);
        let parts = shape.parts;
        if parts <= 1 {
            let whole = Segment {
                constraints: n_constraints,
                inputs: n_pub,
                b_inputs: n_b,
            };
            return Split {
                prefix: whole,
                part: Segment::default(),
                parts: 0,
            };
        }
        let part_pub = n_pub / parts;
        let prefix_pub = n_pub - parts * part_pub;
        let prefix_b = n_b.min(prefix_pub);
        let part_b = (n_b - prefix_b).div_ceil(parts).min(part_pub);
        let part_c = n_constraints.saturating_sub(PREFIX + 2 * prefix_pub) / parts;
        Split {
            prefix: Segment {
                constraints: n_constraints - parts * part_c,
                inputs: prefix_pub,
                b_inputs: prefix_b,
            },
            part: Segment {
                constraints: part_c,
                inputs: part_pub,
                b_inputs: part_b,
            },
            parts,
        }
    }

    /// The fewest constraints this many inputs and parts need.
    fn min_constraints(n_inputs: usize, parts: usize) -> usize {
        let n_pub = n_inputs.saturating_sub(1);
        if parts <= 1 {
            return 2 * n_inputs;
        }
        let part_pub = n_pub / parts;
        PREFIX + 2 * (n_pub - parts * part_pub) + parts * (2 * part_pub + 1)
    }
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
        if shape.parts == 0 {
            return Err(SyntheticError::NoParts);
        }
        let n_inputs = shape
            .n_inputs
            .unwrap_or_else(|| Self::default_inputs(n_constraints))
            .max(1);
        let min = Split::min_constraints(n_inputs, shape.parts);
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

    fn split(&self) -> Split {
        Split::of(self.n_constraints, self.n_inputs, &self.shape)
    }
}

impl Circuit<Scalar> for SyntheticCircuit {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        Generator::new(&self).run(cs, &self, Pieces::All)
    }
}

/// What a run synthesizes: the whole circuit, its prefix alone, or its prefix and one part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pieces {
    All,
    Prefix,
    Part(usize),
}

// The circuit as its prefix and parts.
pub(crate) mod parts;
pub use parts::SyntheticPart;

/// Recent variables kept as operand candidates.
const RING: usize = 256;

/// A variable with its value.
#[derive(Clone, Copy)]
struct Var {
    var: Variable,
    value: Scalar,
}

/// A fixed-size pool of recent variables, sampled uniformly.
#[derive(Clone)]
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

#[derive(Clone)]
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
        }
    }

    /// The prefix, then the sub-circuits `pieces` asks for. Every sub-circuit starts from
    /// the generator as the prefix left it (same structure: the structure stream is
    /// cloned) with a witness stream of its own (stream j + 1 of the witness seed; the
    /// prefix draws from stream 0).
    fn run<CS: ConstraintSystem<Scalar>>(
        mut self,
        cs: &mut CS,
        c: &SyntheticCircuit,
        pieces: Pieces,
    ) -> Result<(), SynthesisError> {
        let split = c.split();
        self.segment(cs, split.prefix, &c.shape)?;
        let parts = match pieces {
            Pieces::All => 0..split.parts,
            Pieces::Prefix => 0..0,
            Pieces::Part(j) => j..j + 1,
        };
        for j in parts {
            let mut part = self.clone();
            part.values = ChaCha8Rng::seed_from_u64(c.witness_seed);
            part.values.set_stream(j as u64 + 1);
            part.segment(cs, split.part, &c.shape)?;
        }
        Ok(())
    }

    /// `seg.constraints` constraints, binding `seg.inputs` public inputs on the way.
    fn segment<CS: ConstraintSystem<Scalar>>(
        &mut self,
        cs: &mut CS,
        seg: Segment,
        shape: &SyntheticShape,
    ) -> Result<(), SynthesisError> {
        let mut next_input = 0usize;
        for step in 0..seg.constraints {
            // Inputs are allocated late and spread out, as real circuits do.
            let input_due = next_input < seg.inputs
                && step >= (next_input + 1) * seg.constraints / (seg.inputs + 1);
            if input_due {
                self.bind_input(cs, next_input < seg.b_inputs)?;
                next_input += 1;
                continue;
            }
            let is_bit = self.rng.gen_bool(shape.bit_fraction);
            let in_b = self.rng.gen_bool(shape.b_aux_fraction);
            match (is_bit, in_b) {
                (true, true) => self.boolean(cs)?,
                (true, false) => match self.b_bits.pick(&mut self.rng) {
                    Some(y) => self.xor(cs, y)?,
                    None => self.boolean(cs)?,
                },
                (false, in_b) => self.mul_gate(cs, in_b)?,
            }
        }
        debug_assert_eq!(next_input, seg.inputs);
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
mod tests;
