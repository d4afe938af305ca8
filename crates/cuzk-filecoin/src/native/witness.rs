//! [`Collected`]: the witness and constraint count a circuit gives on a witness-only
//! system, to compare a native mirror with the gadgets it mirrors (tests, and
//! `porep::compare_native_witness`). The engine's own witness systems live in
//! cuzk-groth16 (`witness.rs`); this one only collects.

use bellperson::{Circuit, ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use ff::Field;

/// A circuit's inputs (`ONE` first), aux values and constraint count, closures of
/// `enforce` never called.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Collected {
    pub(crate) inputs: Vec<Fr>,
    pub(crate) aux: Vec<Fr>,
    pub(crate) constraints: usize,
}

impl Collected {
    /// Runs `circuit` witness-only.
    ///
    /// # Errors
    /// The circuit's own error.
    pub(crate) fn of<C: Circuit<Fr>>(circuit: C) -> Result<Collected, SynthesisError> {
        let mut cs = Collected::new();
        circuit.synthesize(&mut cs)?;
        Ok(cs)
    }

    /// An empty system holding `ONE`.
    pub(crate) fn new() -> Collected {
        Collected {
            inputs: vec![Fr::ONE],
            aux: Vec::new(),
            constraints: 0,
        }
    }

    /// `None` when `self` and `other` are the same witness, else where they first differ.
    pub(crate) fn difference(&self, other: &Collected) -> Option<String> {
        let first = |x: &[Fr], y: &[Fr]| x.iter().zip(y).position(|(a, b)| a != b);
        if self.constraints != other.constraints {
            return Some(format!(
                "{} constraints against {}",
                self.constraints, other.constraints
            ));
        }
        for (what, x, y) in [
            ("input", &self.inputs, &other.inputs),
            ("aux", &self.aux, &other.aux),
        ] {
            if x.len() != y.len() {
                return Some(format!("{} {what} values against {}", x.len(), y.len()));
            }
            if let Some(i) = first(x, y) {
                return Some(format!("{what} {i} of {} differs", x.len()));
            }
        }
        None
    }
}

impl ConstraintSystem<Fr> for Collected {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        Ok(Variable(Index::Aux(self.aux.len() - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
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
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
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
