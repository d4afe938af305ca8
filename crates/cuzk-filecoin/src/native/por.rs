//! A witness-only mirror of storage-proofs-core 19.1's `PoRCircuit` over a Poseidon tree
//! with a private root (`gadgets/por.rs`, as the PoRep challenge proves inclusion in trees C
//! and R): per level the index bits, the siblings and `insert` through the real gadgets
//! (their linear combinations live only in `enforce` closures, which a witness-only system
//! never calls), the level's hash through the native Poseidon ([`super::poseidon`]); then
//! the index bits packed into an input and the computed root constrained to the given one.
//!
//! The levels follow the tree's type as the gadget's `AuthPath` splits them: the base tree's
//! levels at `Tree::Arity`, then one sub-tree level and one top-tree level where the tree has
//! them. A path of another shape is an error (the gadget asserts).

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{Hasher, PoseidonArity};
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_core::gadgets::{constraint, insertion::insert};
use storage_proofs_core::merkle::{base_path_length, compound_path_length};

use super::poseidon::poseidon_hash;
use super::shared::malformed;

/// A Merkle path as circuits take it: per level, the siblings and the index.
pub(crate) type Path = Vec<(Vec<Option<Fr>>, Option<usize>)>;

/// `PoRCircuit::<Tree>::synthesize(cs, Root::Var(leaf), path.into(), Root::Var(root), true)`.
/// Returns the root it computes (which the circuit constrains to `root`).
///
/// # Errors
/// A tree not hashed with Poseidon, or a path of another shape than the tree's; a missing
/// index or sibling (`AssignmentMissing`); the system's own allocation errors.
pub(crate) fn poseidon_inclusion<Tree: MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    path: Path,
    leaf: &AllocatedNum<Fr>,
    root: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if <Tree::Hasher as Hasher>::name() != PoseidonHasher::name() {
        return Err(malformed(format!(
            "a tree hashed with {}, not Poseidon",
            <Tree::Hasher as Hasher>::name()
        )));
    }
    let upper = upper_levels::<Tree>();
    let n_base = path.len().checked_sub(upper).ok_or_else(|| {
        malformed(format!(
            "a path of {} levels for a tree of {upper} above its base",
            path.len()
        ))
    })?;
    let mut levels = path.into_iter();
    let mut cur = leaf.clone();
    let mut index_bits = Vec::new();
    for level in levels.by_ref().take(n_base) {
        cur = ascend::<Tree::Arity, CS>(cs, level, &cur, &mut index_bits)?;
    }
    if let Some(level) = levels.next() {
        cur = ascend::<Tree::SubTreeArity, CS>(cs, level, &cur, &mut index_bits)?;
    }
    if let Some(level) = levels.next() {
        cur = ascend::<Tree::TopTreeArity, CS>(cs, level, &cur, &mut index_bits)?;
    }
    multipack::pack_into_inputs(&mut *cs, &index_bits)?;
    constraint::equal(cs, || "root", &cur, root);
    Ok(cur)
}

/// The levels above the base tree: one for a sub-tree arity, one more for a top-tree arity.
/// A compound path is the base path plus exactly those (`compound_path_length`), so their
/// difference counts them; the leaf count only has to be one both accept.
fn upper_levels<Tree: MerkleTreeTrait>() -> usize {
    const LEAVES: usize = 1 << 30;
    compound_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(LEAVES)
        - base_path_length::<Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>(LEAVES)
}

/// `SubPath::synthesize` for one level of arity `A`: its index bits (least significant
/// first, appended to `index_bits`), its siblings, `insert` of `cur` among them, and the
/// Poseidon hash of the result, which this returns.
fn ascend<A: PoseidonArity, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    (siblings, index): (Vec<Option<Fr>>, Option<usize>),
    cur: &AllocatedNum<Fr>,
    index_bits: &mut Vec<Boolean>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let constants = A::PARAMETERS();
    let arity = constants.arity();
    if !arity.is_power_of_two() || siblings.len() + 1 != arity {
        return Err(malformed(format!(
            "a tree level of {} siblings at arity {arity}",
            siblings.len()
        )));
    }
    let mut bits = Vec::with_capacity(arity.trailing_zeros() as usize);
    for i in 0..arity.trailing_zeros() {
        let bit = AllocatedBit::alloc(&mut *cs, index.map(|x| (x >> i) & 1 == 1))?;
        bits.push(Boolean::from(bit));
    }
    index_bits.extend_from_slice(&bits);
    let siblings = siblings
        .iter()
        .map(|s| AllocatedNum::alloc(&mut *cs, || s.ok_or(SynthesisError::AssignmentMissing)))
        .collect::<Result<Vec<_>, _>>()?;
    let inserted = insert(cs, cur, &bits, &siblings)?;
    let preimage = inserted
        .iter()
        .map(|n| n.get_value().ok_or(SynthesisError::AssignmentMissing))
        .collect::<Result<Vec<_>, _>>()?;
    poseidon_hash(cs, &preimage, constants)
}
