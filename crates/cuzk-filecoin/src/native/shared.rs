//! What the PoRep challenge and PoSt sector mirrors share: their errors (a malformed
//! vanilla proof, a value a verified proof contradicts), the Poseidon-tree requirement,
//! and the check both circuits make first, `comm_r = H(comm_c ‖ comm_r_last)`.

use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::poseidon::PoseidonHasher;
use filecoin_hashers::{Hasher, POSEIDON_CONSTANTS_2};
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_core::gadgets::constraint;

use super::poseidon::poseidon_hash;

/// A vanilla proof of another shape than the circuit's: the real circuit would panic on
/// an assert; here it is an error naming what is wrong. Shared by every mirror (PoRep
/// challenges, PoSt sectors, the Poseidon paths both take).
pub(crate) fn malformed(what: String) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(format!("native witness: {what}")))
}

/// A value of the `kind` mirror ("porep", "post") that a verified vanilla proof
/// contradicts: a bug of the mirror.
pub(crate) fn wrong(kind: &str, what: String) -> SynthesisError {
    SynthesisError::IoError(std::io::Error::other(format!(
        "native {kind} witness is wrong, not proving with it: {what}"
    )))
}

/// The value of an allocated number (mirrors allocate with values).
pub(crate) fn value(num: &AllocatedNum<Fr>) -> Result<Fr, SynthesisError> {
    num.get_value().ok_or(SynthesisError::AssignmentMissing)
}

/// Refuses a tree type not hashed with Poseidon: the mirrors' paths are Poseidon's.
/// `trees` names the trees in the error ("trees C and R").
pub(crate) fn require_poseidon<Tree: MerkleTreeTrait>(trees: &str) -> Result<(), SynthesisError> {
    let name = <Tree::Hasher as Hasher>::name();
    if name != PoseidonHasher::name() {
        return Err(malformed(format!(
            "{trees} hashed with {name}, not Poseidon"
        )));
    }
    Ok(())
}

/// `hash2_circuit(comm_c, comm_r_last)` of a Poseidon tree, natively, constrained equal to
/// `comm_r` as both circuits do; with `check`, a hash that is not comm_r is refused as
/// the `kind` mirror's bug.
pub(crate) fn comm_r_of_columns<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    comm_r: &AllocatedNum<Fr>,
    comm_c: &AllocatedNum<Fr>,
    comm_r_last: &AllocatedNum<Fr>,
    check: bool,
    kind: &str,
) -> Result<(), SynthesisError> {
    let hash = poseidon_hash(
        cs,
        &[value(comm_c)?, value(comm_r_last)?],
        &*POSEIDON_CONSTANTS_2,
    )?;
    if check && hash.get_value() != comm_r.get_value() {
        return Err(wrong(
            kind,
            "its H(comm_c ‖ comm_r_last) is not comm_r".into(),
        ));
    }
    constraint::equal(cs, || "comm_r", comm_r, &hash);
    Ok(())
}
