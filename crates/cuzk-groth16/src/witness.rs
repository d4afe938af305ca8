//! Witness-only constraint systems: they run a circuit for its variable values and count
//! its constraints, never calling an `enforce` closure (no linear combination is built
//! inside one). Owns [`WitnessCs`] (growing vectors; extensible, so circuits that
//! synthesize pieces in parallel into `CS::new()` children, as storage-proofs' PoSt does,
//! keep doing so) and `PartCs` (one part of a split circuit, writing straight into its
//! ranges of the partition's vectors, see `sublayout.rs`). What the values are used for —
//! a, b, c from a recording — lives in `recorded.rs`.
//!
//! Alloc closures are always called, even for values that are thrown away: gadgets capture
//! values through them (bellperson's `AllocatedNum::mul` sets its result's value inside
//! its closure), so skipping one would leave later values unknown.
//!
//! `is_witness_generator` stays `false`: in the gadgets the Filecoin circuits use
//! (bellperson 0.27, storage-proofs 19.1, neptune 11's legacy `circuit::poseidon_hash`)
//! nothing branches on it; only neptune's `circuit2` and sponge gadgets do, and answering
//! `true` obliges a system to implement bellpepper's slice-extension methods.

use bellperson::{ConstraintSystem, Index, LinearCombination, Variable};
use ff::Field;

use crate::Scalar;

/// Variable and constraint counts of a circuit (or of a piece of one). `inputs` counts
/// `ONE`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Public inputs, `ONE` included.
    pub inputs: usize,
    /// Private variables.
    pub aux: usize,
    /// Constraints, without the `input_i · 0 = 0` rows.
    pub constraints: usize,
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} inputs, {} aux, {} constraints",
            self.inputs, self.aux, self.constraints
        )
    }
}

/// Collects the witness into growing vectors; constraints are counted, their closures
/// never called. Public so that a crate mirroring a circuit for its witness (cuzk-filecoin's
/// native PoRep challenge) can compare the mirror with the gadgets on the same system.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct WitnessCs {
    pub(crate) inputs: Vec<Scalar>,
    pub(crate) aux: Vec<Scalar>,
    pub(crate) constraints: usize,
}

impl WitnessCs {
    /// An empty system holding `ONE`, with room for a circuit of `counts`.
    pub(crate) fn with_capacity(counts: Counts) -> WitnessCs {
        let mut inputs = Vec::with_capacity(counts.inputs.max(1));
        inputs.push(Scalar::ONE);
        WitnessCs {
            inputs,
            aux: Vec::with_capacity(counts.aux),
            constraints: 0,
        }
    }

    /// An empty system holding `ONE` (the top-level form; `ConstraintSystem::new` is the
    /// empty child form extensible circuits ask for).
    pub fn with_one() -> WitnessCs {
        WitnessCs::with_capacity(Counts::default())
    }

    /// `circuit` run witness-only on a fresh system.
    ///
    /// # Errors
    /// The circuit's own error.
    pub fn of<C: bellperson::Circuit<Scalar>>(
        circuit: C,
    ) -> Result<WitnessCs, bellperson::SynthesisError> {
        let mut cs = WitnessCs::with_one();
        circuit.synthesize(&mut cs)?;
        Ok(cs)
    }

    /// The variable and constraint counts so far.
    pub fn counts(&self) -> Counts {
        Counts {
            inputs: self.inputs.len(),
            aux: self.aux.len(),
            constraints: self.constraints,
        }
    }

    /// `None` when `self` and `other` hold the same witness and constraint count, else
    /// where they first differ.
    pub fn difference(&self, other: &WitnessCs) -> Option<String> {
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
            if let Some(i) = x.iter().zip(y).position(|(a, b)| a != b) {
                return Some(format!("{what} {i} of {} differs", x.len()));
            }
        }
        None
    }
}

impl ConstraintSystem<Scalar> for WitnessCs {
    type Root = Self;

    /// bellperson's contract: `CS::new()` is empty; extensible circuits allocate their own
    /// temporary `ONE` first, which [`Self::extend`] drops.
    fn new() -> Self {
        WitnessCs::default()
    }

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

    fn is_extensible() -> bool {
        true
    }

    /// Appends `other`'s variables and constraint count, as bellperson's
    /// `ProvingAssignment` does: `other` was built from its own `ONE`, which is dropped.
    fn extend(&mut self, other: &Self) {
        self.aux.extend_from_slice(&other.aux);
        self.inputs
            .extend_from_slice(other.inputs.get(1..).unwrap_or(&[]));
        self.constraints += other.constraints;
    }
}

/// One kind of variable (inputs or aux) of one part of a split circuit: the part first
/// allocates the `n_prefix` values of the shared prefix (written to `prefix` when this
/// part is the one that keeps them, else only computed), then its own values into `own`.
/// Values past `own` are counted, not written: the caller compares the count with the
/// layout and refuses the result.
#[derive(Debug)]
pub(crate) struct Region<'a> {
    pub(crate) prefix: Option<&'a mut [Scalar]>,
    pub(crate) own: &'a mut [Scalar],
    pub(crate) n_prefix: usize,
    /// Values allocated so far (for inputs, `ONE` included).
    pub(crate) next: usize,
}

impl Region<'_> {
    fn push(&mut self, value: Scalar) -> usize {
        let i = self.next;
        self.next += 1;
        if i < self.n_prefix {
            if let Some(slot) = self.prefix.as_deref_mut().and_then(|p| p.get_mut(i)) {
                *slot = value;
            }
        } else if let Some(slot) = self.own.get_mut(i - self.n_prefix) {
            *slot = value;
        }
        i
    }
}

/// A witness-only system for one part of a split circuit, writing straight into its
/// ranges of the partition's input and aux vectors. Variable indices are the part's own
/// (nothing evaluates a linear combination here, so they only need to be distinct).
#[derive(Debug)]
pub(crate) struct PartCs<'a> {
    pub(crate) inputs: Region<'a>,
    pub(crate) aux: Region<'a>,
    pub(crate) constraints: usize,
}

impl PartCs<'_> {
    pub(crate) fn counts(&self) -> Counts {
        Counts {
            inputs: self.inputs.next,
            aux: self.aux.next,
            constraints: self.constraints,
        }
    }
}

impl ConstraintSystem<Scalar> for PartCs<'_> {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable(Index::Aux(self.aux.push(f()?))))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, bellperson::SynthesisError>
    where
        F: FnOnce() -> Result<Scalar, bellperson::SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        Ok(Variable(Index::Input(self.inputs.push(f()?))))
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
