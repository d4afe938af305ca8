//! The keypair assembly: a constraint system that records the A, B and C matrices of any
//! bellperson circuit as flat (row, variable, coefficient) triples, without calling the
//! circuit's witness closures, and then evaluates the QAP polynomials u_k(τ), v_k(τ),
//! w_k(τ) of every variable k from the Lagrange coefficients L_j(τ):
//! `u_k(τ) = Σ_j A[j][k] · L_j(τ)` (paper: u_i(x) ↔ `u`, v_i ↔ `v`, w_i ↔ `w`).
//!
//! Variables are numbered as bellperson's prover numbers them: inputs first (`ONE` is
//! input 0), then aux variables, each in allocation order, even when the circuit
//! interleaves `alloc_input` with `alloc`.

use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use ff::Field;
use rayon::prelude::*;

use super::ParamgenError;
use crate::Scalar;

/// Marks an input in a recorded variable id (aux ids are plain).
const INPUT_TAG: u32 = 1 << 31;

/// One sparse matrix, row-major as recorded.
#[derive(Default)]
pub(super) struct Terms {
    rows: Vec<u32>,
    vars: Vec<u32>,
    coeffs: Vec<Scalar>,
}

impl Terms {
    /// Records one linear combination; a variable that was never allocated is an error.
    fn push_lc(
        &mut self,
        row: u32,
        lc: &LinearCombination<Scalar>,
        n_inputs: usize,
        n_aux: usize,
    ) -> Result<(), ParamgenError> {
        for (&i, coeff) in lc.iter_inputs() {
            if i >= n_inputs {
                return Err(ParamgenError::UnknownVariable {
                    kind: "input",
                    index: i,
                    allocated: n_inputs,
                });
            }
            // i < n_inputs < 2^31 (checked on allocation), so the tag bit is free.
            self.push(row, i as u32 | INPUT_TAG, *coeff);
        }
        for (&j, coeff) in lc.iter_aux() {
            if j >= n_aux {
                return Err(ParamgenError::UnknownVariable {
                    kind: "aux",
                    index: j,
                    allocated: n_aux,
                });
            }
            self.push(row, j as u32, *coeff);
        }
        Ok(())
    }

    fn push(&mut self, row: u32, var: u32, coeff: Scalar) {
        // A zero coefficient adds nothing to any evaluation.
        if !bool::from(coeff.is_zero()) {
            self.rows.push(row);
            self.vars.push(var);
            self.coeffs.push(coeff);
        }
    }

    /// Number of recorded (nonzero) terms.
    pub fn len(&self) -> usize {
        self.rows.len()
    }
}

/// The recorded circuit.
#[derive(Default)]
pub(super) struct KeypairAssembly {
    /// Public inputs, `ONE` included.
    pub n_inputs: usize,
    /// Private variables.
    pub n_aux: usize,
    /// Constraints enforced so far (without the `input · 0 = 0` rows).
    pub n_constraints: usize,
    /// The A matrix.
    pub a: Terms,
    /// The B matrix.
    pub b: Terms,
    /// The C matrix.
    pub c: Terms,
    /// The first misuse seen (enforce cannot return errors).
    pub error: Option<ParamgenError>,
}

impl KeypairAssembly {
    /// Appends bellperson's `input_i · 0 = 0` rows, which put every input in the A query.
    pub fn add_input_rows(&mut self) -> Result<(), ParamgenError> {
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        for i in 0..self.n_inputs {
            let row = self.row_id()?;
            self.a.push(row, i as u32 | INPUT_TAG, Scalar::ONE);
            self.n_constraints += 1;
        }
        Ok(())
    }

    fn row_id(&self) -> Result<u32, ParamgenError> {
        u32::try_from(self.n_constraints)
            .ok()
            .filter(|&r| r < u32::MAX)
            .ok_or(ParamgenError::TooLarge {
                what: "constraints",
                count: self.n_constraints as u64,
            })
    }

    fn check_var_count(&mut self) -> Result<(), ParamgenError> {
        let count = self.n_inputs as u64 + self.n_aux as u64;
        if count >= u64::from(INPUT_TAG) {
            return Err(ParamgenError::TooLarge {
                what: "variables",
                count,
            });
        }
        Ok(())
    }

    /// Evaluates Σ_j M[j][k] · lagrange[j] for every variable k (inputs, then aux), taking
    /// the terms (they are freed afterwards). Rows must be `< lagrange.len()`.
    pub fn evaluate(&self, m: Terms, lagrange: &[Scalar]) -> Result<Vec<Scalar>, ParamgenError> {
        let n_vars = self.n_inputs + self.n_aux;
        let column = |var: u32| -> Result<usize, ParamgenError> {
            let (kind, idx, bound, col) = match var & INPUT_TAG != 0 {
                true => {
                    let i = (var & !INPUT_TAG) as usize;
                    ("input", i, self.n_inputs, i)
                }
                false => (
                    "aux",
                    var as usize,
                    self.n_aux,
                    self.n_inputs + var as usize,
                ),
            };
            match idx < bound {
                true => Ok(col),
                false => Err(ParamgenError::UnknownVariable {
                    kind,
                    index: idx,
                    allocated: bound,
                }),
            }
        };
        // Transpose by counting sort: col_ptr[k]..col_ptr[k + 1] are variable k's terms.
        let mut col_ptr = vec![0usize; n_vars + 1];
        for &var in &m.vars {
            col_ptr[column(var)? + 1] += 1;
        }
        for k in 0..n_vars {
            col_ptr[k + 1] += col_ptr[k];
        }
        let mut next = col_ptr.clone();
        let mut rows_t = vec![0u32; m.len()];
        let mut coeffs_t = vec![Scalar::ZERO; m.len()];
        let Terms { rows, vars, coeffs } = m;
        for ((row, var), coeff) in rows.into_iter().zip(vars).zip(coeffs) {
            let slot = &mut next[column(var)?];
            rows_t[*slot] = row;
            coeffs_t[*slot] = coeff;
            *slot += 1;
        }
        drop(next);
        let mut out = vec![Scalar::ZERO; n_vars];
        out.par_iter_mut()
            .enumerate()
            .with_min_len(1024)
            .for_each(|(k, acc)| {
                let span = col_ptr[k]..col_ptr[k + 1];
                for (&row, coeff) in rows_t[span.clone()].iter().zip(&coeffs_t[span]) {
                    *acc += lagrange[row as usize] * coeff;
                }
            });
        Ok(out)
    }
}

impl ConstraintSystem<Scalar> for KeypairAssembly {
    type Root = Self;

    fn new() -> Self {
        Self::default()
    }

    fn alloc<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        // No witness here: the value closure is never called (as in bellperson's generator).
        self.n_aux += 1;
        if let Err(e) = self.check_var_count() {
            self.error.get_or_insert(e);
        }
        Ok(Variable(Index::Aux(self.n_aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, _: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.n_inputs += 1;
        if let Err(e) = self.check_var_count() {
            self.error.get_or_insert(e);
        }
        Ok(Variable(Index::Input(self.n_inputs - 1)))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, a: LA, b: LB, c: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LB: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
        LC: FnOnce(LinearCombination<Scalar>) -> LinearCombination<Scalar>,
    {
        let row = match self.row_id() {
            Ok(row) => row,
            Err(e) => {
                self.error.get_or_insert(e);
                return;
            }
        };
        let (n_in, n_aux) = (self.n_inputs, self.n_aux);
        let recorded = self
            .a
            .push_lc(row, &a(LinearCombination::zero()), n_in, n_aux)
            .and_then(|()| {
                self.b
                    .push_lc(row, &b(LinearCombination::zero()), n_in, n_aux)
            })
            .and_then(|()| {
                self.c
                    .push_lc(row, &c(LinearCombination::zero()), n_in, n_aux)
            });
        if let Err(e) = recorded {
            self.error.get_or_insert(e);
        }
        self.n_constraints += 1;
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
