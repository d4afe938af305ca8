//! One sector of storage-proofs-post 19.1's fallback PoSt circuit (`fallback/circuit.rs`:
//! `Sector::synthesize`, which `FallbackPoStCircuit::synthesize` runs per sector) mirrored
//! for the witness only: comm_r_last, comm_c and comm_r allocated, comm_r made an input,
//! `H(comm_c ‖ comm_r_last)` through the native Poseidon ([`super::poseidon`]) and
//! constrained to comm_r, then per challenge the leaf allocated and its tree-R inclusion
//! path through the native `PoRCircuit` ([`super::por`]) against comm_r_last (a private
//! root: the gadget's `Root::Var`, no allocation, no input). The constraint `equal`, the
//! index bits, `insert` and the packed inputs run the real public gadgets on the same
//! system. A WindowPoSt partition's sector or one of WinningPoSt's one-challenge sectors
//! alike: the gadget does not tell them apart.
//!
//! The result allocates what the real sector allocates, in the same order with the same
//! values, and counts its constraints (tests/filecoin/parts.rs); nothing but a
//! witness-only system may run it. On a request whose vanilla proofs were verified
//! (`check_values`), the mirror's hashes are also checked where the proof states them:
//! `H(comm_c ‖ comm_r_last)` is comm_r and every path opens to comm_r_last. A mirror that
//! computed a wrong value then fails the partition instead of giving a witness that
//! cannot prove. Fakes skip it.

use std::marker::PhantomData;

use bellperson::gadgets::num::AllocatedNum;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_post::fallback::{Sector, SectorProof};

use super::por::{poseidon_inclusion, Path};
use super::shared::{self, comm_r_of_columns, malformed, require_poseidon};

/// One PoSt sector's circuit for the witness only: the values `Sector::circuit` gives the
/// gadget, with the inclusion paths as the vanilla proof's options (the gadget's
/// `AuthPath` keeps its levels private).
pub(crate) struct NativeSector<Tree: 'static + MerkleTreeTrait> {
    comm_r: Option<Fr>,
    comm_c: Option<Fr>,
    comm_r_last: Option<Fr>,
    leafs: Vec<Option<Fr>>,
    paths: Vec<Path>,
    /// The vanilla proof was verified: check the Poseidon results against it.
    check_values: bool,
    _tree: PhantomData<Tree>,
}

impl<Tree: 'static + MerkleTreeTrait> NativeSector<Tree> {
    /// The mirror of `sector`, the circuit `Sector::circuit` made from `proof`.
    ///
    /// # Errors
    /// When `proof` is not the one `sector` was made from: another number of challenges or
    /// other leaves.
    pub(crate) fn new(
        sector: &Sector<Tree>,
        proof: &SectorProof<Tree::Proof>,
        check_values: bool,
    ) -> Result<NativeSector<Tree>, SynthesisError> {
        let leafs: Vec<Option<Fr>> = proof.leafs().into_iter().map(|l| Some(l.into())).collect();
        if leafs != sector.leafs {
            return Err(malformed(format!(
                "a sector's vanilla proof of {} leaves is not its circuit's {}",
                leafs.len(),
                sector.leafs.len()
            )));
        }
        Ok(NativeSector {
            comm_r: sector.comm_r,
            comm_c: sector.comm_c,
            comm_r_last: sector.comm_r_last,
            leafs,
            paths: proof.as_options(),
            check_values,
            _tree: PhantomData,
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Fr> for NativeSector<Tree> {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let NativeSector {
            comm_r,
            comm_c,
            comm_r_last,
            leafs,
            paths,
            check_values,
            _tree,
        } = self;
        require_poseidon::<Tree>("tree R")?;
        // The gadget asserts it.
        if leafs.len() != paths.len() {
            return Err(malformed(format!(
                "a sector of {} leaves and {} paths",
                leafs.len(),
                paths.len()
            )));
        }
        let comm_r_last = alloc(cs, comm_r_last)?;
        let comm_c = alloc(cs, comm_c)?;
        let comm_r = alloc(cs, comm_r)?;
        comm_r.inputize(&mut *cs)?;
        // `hash2_circuit` of tree R's hasher, Poseidon (checked above).
        comm_r_of_columns(cs, &comm_r, &comm_c, &comm_r_last, check_values, KIND)?;

        // `PoRCircuit::synthesize(Root::Val(leaf), path, Root::Var(comm_r_last), true)`.
        for (i, (leaf, path)) in leafs.into_iter().zip(paths).enumerate() {
            let leaf = alloc(cs, leaf)?;
            let root = poseidon_inclusion::<Tree, CS>(cs, path, &leaf, &comm_r_last)?;
            if check_values && root.get_value() != comm_r_last.get_value() {
                return Err(wrong(format!(
                    "the tree-R root of challenge {i} is not comm_r_last"
                )));
            }
        }
        Ok(())
    }
}

/// `AllocatedNum::alloc` of an optional value, as the gadget allocates its fields.
fn alloc<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    value: Option<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    AllocatedNum::alloc(&mut *cs, || value.ok_or(SynthesisError::AssignmentMissing))
}

/// A value of this mirror that a verified vanilla proof contradicts: a bug of the mirror.
fn wrong(what: String) -> SynthesisError {
    shared::wrong(KIND, what)
}

/// The mirror's name in its errors.
const KIND: &str = "post";
