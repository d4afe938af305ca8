//! The update circuit's prefix walked once per partition and replayed by every part.
//!
//! A SnapDeals prefix is large: `apex_por` alone is 127 SHA-256 hashes at 32 GiB (about
//! 6M of the 81M constraints), seven times one challenge. Parts that each walked it again
//! would do 86 × 8 challenges' work for 94 (at 2 KiB on the 2-core VM they took twice the
//! whole witness's time, `cuzk bench synth --kind snap`). So the prefix is walked once
//! ([`PrefixWitness::walk`], its values kept), and each part replays it
//! ([`PrefixWitness::replay`]): the same aux and input values in order and the same
//! number of constraints, with real handles (`AllocatedNum`, `AllocatedBit`) at the
//! indices the challenges read. The replayed constraints are placeholders: a replay is
//! valid witness-only (the constraint system only counts constraints), which is what
//! `Parts::witness_part` promises; `Parts::part` walks the prefix. Owns [`PrefixWitness`]
//! and [`CaptureCs`]; the prefix itself is `snap/mirror.rs`'s.

use bellperson::gadgets::boolean::AllocatedBit;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, Index, LinearCombination, SynthesisError, Variable};
use blstrs::Scalar as Fr;
use cuzk_groth16::witness::Counts;
use ff::Field;
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::EmptySectorUpdateCircuit;

use super::mirror::{synthesize_prefix, Prefix};

/// The prefix's witness and where the handles the challenges read sit in it.
pub(super) struct PrefixWitness {
    /// Input values, without `ONE`.
    inputs: Vec<Fr>,
    aux: Vec<Fr>,
    constraints: usize,
    partition_bits: Vec<usize>,
    h_select_bits: Vec<usize>,
    phi: usize,
    root_r_old: usize,
    root_r_new: usize,
    apex_leafs: Vec<usize>,
    /// Each challenge's generated bits.
    generated_bits: Vec<Vec<usize>>,
    hs: [usize; 6],
}

/// The prefix walked witness-only natively (as [`PrefixWitness::walk`] does) against the
/// same walk through the gadgets: `None` when their inputs, aux values and constraint
/// counts agree, else where they first differ.
///
/// # Errors
/// Either walk's error, as a sentence.
pub(super) fn native_prefix_difference<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: &EmptySectorUpdateCircuit<Tree>,
) -> Result<Option<String>, String> {
    let walk = |native: bool| {
        let mut cs = CaptureCs::default();
        synthesize_prefix(&mut cs, circuit, native)
            .map_err(|e| format!("the prefix (native {native}): {e}"))?;
        Ok::<_, String>(cs)
    };
    let (ours, theirs) = (walk(true)?, walk(false)?);
    let first = |a: &[Fr], b: &[Fr]| a.iter().zip(b).position(|(x, y)| x != y);
    Ok(if ours.counts != theirs.counts {
        Some(format!("counts {} against {}", ours.counts, theirs.counts))
    } else if let Some(i) = first(&ours.inputs, &theirs.inputs) {
        Some(format!("input {i} differs"))
    } else {
        first(&ours.aux, &theirs.aux).map(|i| format!("aux {i} differs"))
    })
}

/// Which handle of [`Prefix`] an aux index is.
#[derive(Clone, Copy)]
enum Slot {
    PartitionBit,
    HSelectBit,
    ChallengeBit,
    Phi,
    RootROld,
    RootRNew,
    ApexLeaf,
}

impl PrefixWitness {
    /// Walks `circuit`'s prefix witness-only and keeps its values.
    ///
    /// # Errors
    /// The prefix's own error, as a sentence.
    pub(super) fn walk<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
        circuit: &EmptySectorUpdateCircuit<Tree>,
    ) -> Result<PrefixWitness, String> {
        let mut cs = CaptureCs::default();
        let p =
            synthesize_prefix(&mut cs, circuit, true).map_err(|e| format!("the prefix: {e}"))?;
        let aux = |v: Variable| match v.get_unchecked() {
            Index::Aux(i) => Ok(i),
            Index::Input(i) => Err(format!("a prefix handle is input {i}")),
        };
        let bits = |b: &[AllocatedBit]| b.iter().map(|b| aux(b.get_variable())).collect();
        Ok(PrefixWitness {
            partition_bits: bits(&p.partition_bits)?,
            h_select_bits: bits(&p.h_select_bits)?,
            phi: aux(p.phi.get_variable())?,
            root_r_old: aux(p.root_r_old.get_variable())?,
            root_r_new: aux(p.root_r_new.get_variable())?,
            apex_leafs: p
                .apex_leafs
                .iter()
                .map(|n| aux(n.get_variable()))
                .collect::<Result<_, _>>()?,
            generated_bits: p
                .generated_bits
                .iter()
                .map(|b| bits(b))
                .collect::<Result<_, _>>()?,
            hs: p.hs,
            inputs: cs.inputs,
            aux: cs.aux,
            constraints: cs.counts.constraints,
        })
    }

    /// Allocates the prefix again from its values, for challenge `c_index`: what
    /// [`synthesize_prefix`] returns, with only that challenge's generated bits (the
    /// others are empty).
    ///
    /// # Errors
    /// [`SynthesisError::Unsatisfiable`] for a challenge past the last or a bit whose
    /// value is not 0 or 1; the constraint system's own errors.
    pub(super) fn replay<CS: ConstraintSystem<Fr>>(
        &self,
        cs: &mut CS,
        c_index: usize,
    ) -> Result<Prefix, SynthesisError> {
        let own_bits = self
            .generated_bits
            .get(c_index)
            .ok_or(SynthesisError::Unsatisfiable)?;
        let mut slots: Vec<(usize, Slot)> = Vec::new();
        let mut mark = |ixs: &[usize], slot: Slot| slots.extend(ixs.iter().map(|&i| (i, slot)));
        mark(&self.partition_bits, Slot::PartitionBit);
        mark(&self.h_select_bits, Slot::HSelectBit);
        mark(own_bits, Slot::ChallengeBit);
        mark(&[self.phi], Slot::Phi);
        mark(&[self.root_r_old], Slot::RootROld);
        mark(&[self.root_r_new], Slot::RootRNew);
        mark(&self.apex_leafs, Slot::ApexLeaf);
        slots.sort_unstable_by_key(|&(i, _)| i);

        for &v in &self.inputs {
            cs.alloc_input(|| "replayed input", || Ok(v))?;
        }
        let (mut bits, mut nums) = (Vec::new(), Vec::new());
        let mut next = 0;
        for (i, &v) in self.aux.iter().enumerate() {
            match slots.get(next) {
                Some(&(at, slot)) if at == i => {
                    next += 1;
                    match slot {
                        Slot::PartitionBit | Slot::HSelectBit | Slot::ChallengeBit => {
                            let bit = match v {
                                v if v == Fr::ZERO => false,
                                v if v == Fr::ONE => true,
                                _ => return Err(SynthesisError::Unsatisfiable),
                            };
                            let b =
                                AllocatedBit::alloc(cs.namespace(|| "replayed bit"), Some(bit))?;
                            bits.push((slot_rank(slot), b));
                        }
                        _ => {
                            let n = AllocatedNum::alloc(cs.namespace(|| "replayed"), || Ok(v))?;
                            nums.push((slot_rank(slot), n));
                        }
                    }
                }
                _ => {
                    cs.alloc(|| "replayed", || Ok(v))?;
                }
            }
        }
        // Every replayed bit enforced its booleanity: the rest of the count.
        for _ in bits.len()..self.constraints {
            cs.enforce(|| "replayed", |lc| lc, |lc| lc, |lc| lc);
        }
        // Handles in index order within each slot, which is their order in `Prefix`.
        let take_bits = |rank: u8| -> Vec<AllocatedBit> {
            bits.iter()
                .filter(|(r, _)| *r == rank)
                .map(|(_, b)| b.clone())
                .collect()
        };
        let mut take_nums = |rank: u8| -> Vec<AllocatedNum<Fr>> {
            let (these, rest): (Vec<_>, Vec<_>) = nums.drain(..).partition(|(r, _)| *r == rank);
            nums = rest;
            these.into_iter().map(|(_, n)| n).collect()
        };
        let one = |mut v: Vec<AllocatedNum<Fr>>| v.pop().ok_or(SynthesisError::Unsatisfiable);
        let phi = one(take_nums(slot_rank(Slot::Phi)))?;
        let root_r_old = one(take_nums(slot_rank(Slot::RootROld)))?;
        let root_r_new = one(take_nums(slot_rank(Slot::RootRNew)))?;
        let apex_leafs = take_nums(slot_rank(Slot::ApexLeaf));
        let mut generated_bits = vec![Vec::new(); self.generated_bits.len()];
        generated_bits[c_index] = take_bits(slot_rank(Slot::ChallengeBit));
        Ok(Prefix {
            partition_bits: take_bits(slot_rank(Slot::PartitionBit)),
            h_select_bits: take_bits(slot_rank(Slot::HSelectBit)),
            phi,
            root_r_old,
            root_r_new,
            apex_leafs,
            generated_bits,
            hs: self.hs,
        })
    }
}

fn slot_rank(slot: Slot) -> u8 {
    slot as u8
}

/// A witness-only walk that keeps the values and counts: alloc closures run (gadgets
/// read values through them), enforce closures do not.
pub(super) struct CaptureCs {
    pub(super) counts: Counts,
    inputs: Vec<Fr>,
    aux: Vec<Fr>,
}

impl Default for CaptureCs {
    fn default() -> Self {
        CaptureCs {
            counts: Counts {
                inputs: 1, // ONE
                aux: 0,
                constraints: 0,
            },
            inputs: Vec::new(),
            aux: Vec::new(),
        }
    }
}

impl ConstraintSystem<Fr> for CaptureCs {
    type Root = Self;

    fn alloc<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.aux.push(f()?);
        self.counts.aux += 1;
        Ok(Variable::new_unchecked(Index::Aux(self.counts.aux - 1)))
    }

    fn alloc_input<F, A, AR>(&mut self, _: A, f: F) -> Result<Variable, SynthesisError>
    where
        F: FnOnce() -> Result<Fr, SynthesisError>,
        A: FnOnce() -> AR,
        AR: Into<String>,
    {
        self.inputs.push(f()?);
        self.counts.inputs += 1;
        Ok(Variable::new_unchecked(Index::Input(
            self.counts.inputs - 1,
        )))
    }

    fn enforce<A, AR, LA, LB, LC>(&mut self, _: A, _: LA, _: LB, _: LC)
    where
        A: FnOnce() -> AR,
        AR: Into<String>,
        LA: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LB: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
        LC: FnOnce(LinearCombination<Fr>) -> LinearCombination<Fr>,
    {
        self.counts.constraints += 1;
    }

    fn push_namespace<NR: Into<String>, N: FnOnce() -> NR>(&mut self, _: N) {}

    fn pop_namespace(&mut self) {}

    fn get_root(&mut self) -> &mut Self::Root {
        self
    }
}
