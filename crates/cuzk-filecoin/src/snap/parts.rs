//! A SnapDeals partition as its parts (`cuzk_groth16::sublayout::Parts`): the update
//! circuit (`EmptySectorUpdateCircuit::synthesize`, storage-proofs-update 19.1.0
//! `circuit.rs:341-745`) is a prefix — the public inputs and the bits of `k_and_h_select`,
//! `phi`, comm_c and the two tree-R roots, the apex leaves and the partition path, the two
//! `comm_r = H(comm_c ‖ root_r)` checks, the apex tree's inclusion in comm_d_new
//! (`apex_por`) and the challenges' bits (`gen_challenge_bits`) — then one sub-circuit per
//! challenge (86 at 32 GiB, 10 below 16 MiB), which reads the prefix's values only.
//!
//! The crate has no entry point per challenge and its gadgets module is private, so the
//! top level is mirrored (`snap/mirror.rs`): [`UpdateMirror`] allocates and constrains
//! exactly what the circuit does, in the same order, over the prefix and the challenges
//! its [`Span`] names. Tests hold the mirror to the circuit: equal recordings and equal
//! assignments at 2 KiB, equal counts at 512 MiB ([`walk_layout`]). The circuit itself
//! stays what records a shape; the mirror computes witnesses. Owns [`UpdateParts`], the
//! mirror, and the checks of the mirror against the circuit; the gadgets are in
//! `snap/mirror.rs`.

use std::sync::{Arc, OnceLock};

use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use cuzk_groth16::recorded::{CsrView, Matrix, R1cs};
use cuzk_groth16::sublayout::{Parts, SubLayout};
use cuzk_groth16::witness::Counts;
use filecoin_proofs::MerkleTreeTrait;
use storage_proofs_update::circuit::ChallengeProof;
use storage_proofs_update::constants::TreeRHasher;
use storage_proofs_update::EmptySectorUpdateCircuit;

use super::mirror::{synthesize_challenge, synthesize_prefix};
use super::replay::{CaptureCs, PrefixWitness};

/// Which of the update circuit's pieces a [`UpdateMirror`] synthesizes after the prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Span {
    /// The prefix alone.
    Prefix,
    /// The prefix, then challenge `j` alone: part `j`.
    Challenge(usize),
    /// The prefix, then every challenge: the whole circuit.
    All,
}

/// The update circuit `circuit`, mirrored, over `span`; with `replay`, the prefix is
/// replayed from its values instead of walked (witness-only: `snap/replay.rs`).
pub(crate) struct UpdateMirror<'a, Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    pub(crate) circuit: &'a EmptySectorUpdateCircuit<Tree>,
    pub(crate) span: Span,
    pub(crate) replay: Option<Arc<PrefixWitness>>,
}

/// A SnapDeals partition's circuit as its challenges: part `j` is the prefix and challenge
/// `j` ([`Span::Challenge`]); for the witness, the prefix is replayed from the values of
/// one walk of it (`Parts::witness_part`). Made only from a circuit whose shape the mirror
/// can walk without a panic ([`UpdateParts::new`]). It gives no prefix to record from:
/// its challenges read different prefix bits, so one part's rows are not the others'.
pub(crate) struct UpdateParts<'a, Tree: MerkleTreeTrait<Hasher = TreeRHasher>> {
    circuit: &'a EmptySectorUpdateCircuit<Tree>,
    /// The prefix's values, walked by the first part asked for.
    prefix: OnceLock<Result<Arc<PrefixWitness>, String>>,
}

impl<'a, Tree: MerkleTreeTrait<Hasher = TreeRHasher>> UpdateParts<'a, Tree> {
    /// The parts of `circuit`.
    ///
    /// # Errors
    /// A sentence naming what in the circuit's inputs does not have the shape its public
    /// parameters give (a challenge count, an apex-leaf count, a Merkle path's length).
    pub(crate) fn new(circuit: &'a EmptySectorUpdateCircuit<Tree>) -> Result<Self, String> {
        check_shape(circuit)?;
        Ok(UpdateParts {
            circuit,
            prefix: OnceLock::new(),
        })
    }
}

impl<'a, Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Parts for UpdateParts<'a, Tree> {
    type Part = UpdateMirror<'a, Tree>;

    fn n_parts(&self) -> usize {
        self.circuit.priv_inputs.challenge_proofs.len()
    }

    /// The prefix walked, then challenge `j`: valid in any constraint system.
    fn part(&self, j: usize) -> Result<Self::Part, cuzk_groth16::SynthesisError> {
        self.check_index(j)?;
        Ok(UpdateMirror {
            circuit: self.circuit,
            span: Span::Challenge(j),
            replay: None,
        })
    }

    /// The prefix replayed from the partition's one walk of it, then challenge `j`:
    /// witness-only (`snap/replay.rs`).
    fn witness_part(&self, j: usize) -> Result<Self::Part, cuzk_groth16::SynthesisError> {
        self.check_index(j)?;
        let prefix = self
            .prefix
            .get_or_init(|| PrefixWitness::walk(self.circuit).map(Arc::new))
            .clone()
            .map_err(|reason| cuzk_groth16::SynthesisError::Part { part: j, reason })?;
        Ok(UpdateMirror {
            circuit: self.circuit,
            span: Span::Challenge(j),
            replay: Some(prefix),
        })
    }
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> UpdateParts<'_, Tree> {
    fn check_index(&self, j: usize) -> Result<(), cuzk_groth16::SynthesisError> {
        match j < self.n_parts() {
            true => Ok(()),
            false => Err(cuzk_groth16::SynthesisError::Part {
                part: j,
                reason: format!("a partition of {} challenges", self.n_parts()),
            }),
        }
    }
}

/// The layout of `circuit`'s parts from its prefix and its last part, walked witness-only
/// ([`CaptureCs`]): what the whole circuit counts without walking all of it.
///
/// # Errors
/// The mirror's error, or the shape's ([`UpdateParts::new`]).
pub(crate) fn walk_layout<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: &EmptySectorUpdateCircuit<Tree>,
) -> Result<SubLayout, String> {
    let parts = UpdateParts::new(circuit)?;
    let n_parts = parts.n_parts();
    let count = |span: Span| -> Result<Counts, String> {
        let mut cs = CaptureCs::default();
        UpdateMirror {
            circuit,
            span,
            replay: None,
        }
        .synthesize(&mut cs)
        .map_err(|e| format!("the mirror over {span:?}: {e}"))?;
        Ok(cs.counts)
    };
    let prefix = count(Span::Prefix)?;
    let last = count(Span::Challenge(n_parts.saturating_sub(1)))?;
    let less = |a: usize, b: usize| a.checked_sub(b).ok_or("a part smaller than its prefix");
    Ok(SubLayout {
        prefix,
        stride: Counts {
            inputs: less(last.inputs, prefix.inputs)?,
            aux: less(last.aux, prefix.aux)?,
            constraints: less(last.constraints, prefix.constraints)?,
        },
        n_parts,
    })
}

/// `None` when two recordings are one constraint system (counts, coefficient table and
/// matrices), else where they first differ.
pub(crate) fn recording_difference(theirs: &R1cs, ours: &R1cs) -> Option<String> {
    if theirs.counts() != ours.counts() {
        return Some(format!(
            "counts: the circuit's {}, the mirror's {}",
            theirs.counts(),
            ours.counts()
        ));
    }
    if theirs.coeffs() != ours.coeffs() {
        return Some(format!(
            "coefficient tables of {} and {} entries",
            theirs.coeffs().len(),
            ours.coeffs().len()
        ));
    }
    fn row(v: CsrView<'_>, i: usize) -> (&[u32], &[u32]) {
        let (b, e) = (v.row_start[i] as usize, v.row_start[i + 1] as usize);
        (&v.col[b..e], &v.coeff[b..e])
    }
    Matrix::ALL.into_iter().find_map(|m| {
        let (x, y) = (theirs.matrix(m), ours.matrix(m));
        (0..theirs.n_constraints())
            .find(|&i| row(x, i) != row(y, i))
            .map(|i| {
                format!(
                    "matrix {m:?} row {i}: {:?} against {:?}",
                    row(x, i),
                    row(y, i)
                )
            })
    })
}

/// Checks what the mirror indexes or what the gadgets it calls assert on (a Merkle path
/// of another length): the circuit's inputs have the shape of its public parameters.
fn check_shape<Tree: MerkleTreeTrait<Hasher = TreeRHasher>>(
    circuit: &EmptySectorUpdateCircuit<Tree>,
) -> Result<(), String> {
    let pp = &circuit.pub_params;
    let priv_inputs = &circuit.priv_inputs;
    let proofs = &priv_inputs.challenge_proofs;
    if proofs.len() != pp.challenge_count {
        return Err(format!(
            "{} challenge proofs, the partition has {}",
            proofs.len(),
            pp.challenge_count
        ));
    }
    if priv_inputs.apex_leafs.len() != pp.apex_leaf_count {
        return Err(format!(
            "{} apex leaves, the partition has {}",
            priv_inputs.apex_leafs.len(),
            pp.apex_leaf_count
        ));
    }
    let below_apex = pp.partition_bit_len + pp.apex_leaf_bit_len;
    if pp.challenge_bit_len < below_apex || pp.apex_leaf_count != 1 << pp.apex_leaf_bit_len {
        return Err(format!("public parameters {pp:?} do not add up"));
    }
    let empty = ChallengeProof::<Tree>::empty(pp.sector_nodes);
    let lengths = |path: &[Vec<Option<Fr>>]| path.iter().map(Vec::len).collect::<Vec<_>>();
    let path_r = lengths(&empty.path_r_old);
    for (c, proof) in proofs.iter().enumerate() {
        if lengths(&proof.path_d_new) != vec![1; pp.challenge_bit_len] {
            return Err(format!(
                "challenge {c}'s tree-D path is not {} single siblings",
                pp.challenge_bit_len
            ));
        }
        if lengths(&proof.path_r_old) != path_r || lengths(&proof.path_r_new) != path_r {
            return Err(format!(
                "challenge {c}'s tree-R paths are not of the shape {path_r:?}"
            ));
        }
    }
    Ok(())
}

impl<Tree: MerkleTreeTrait<Hasher = TreeRHasher>> Circuit<Fr> for UpdateMirror<'_, Tree> {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        check_shape(self.circuit).map_err(|_| SynthesisError::Unsatisfiable)?;
        let prefix = match (&self.replay, self.span) {
            (Some(walked), Span::Challenge(j)) => walked.replay(cs, j)?,
            _ => synthesize_prefix(cs, self.circuit, false)?,
        };
        let challenges = match self.span {
            Span::Prefix => 0..0,
            Span::Challenge(j) if j < prefix.generated_bits.len() => j..j + 1,
            Span::Challenge(_) => return Err(SynthesisError::Unsatisfiable),
            Span::All => 0..prefix.generated_bits.len(),
        };
        // A replayed prefix means a witness-only system: the tree-D levels go native.
        let native = self.replay.is_some();
        for c_index in challenges {
            synthesize_challenge::<Tree, _>(cs, self.circuit, &prefix, c_index, native)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use filecoin_proofs::SectorShape2KiB;
    use storage_proofs_update::PublicParams;

    fn blank() -> EmptySectorUpdateCircuit<SectorShape2KiB> {
        EmptySectorUpdateCircuit::blank(PublicParams::from_sector_size(2048))
    }

    /// Inputs of another shape than the public parameters' are refused by name before
    /// the mirror walks them (the gadgets it calls would panic on them), and so is a part
    /// past the last challenge.
    #[test]
    fn inputs_of_another_shape_are_refused_by_name() {
        let circuit = blank();
        let parts = UpdateParts::new(&circuit).expect("the blank circuit's shape");
        assert_eq!(parts.n_parts(), 10);
        for err in [parts.part(10).err(), parts.witness_part(10).err()] {
            let err = err.expect("no part 10");
            assert!(err.to_string().contains("10 challenges"), "{err}");
        }
        // No values: the prefix's walk for the witness fails, once, and every part says so.
        for j in [0, 9] {
            let err = parts.witness_part(j).err().expect("a blank prefix");
            assert!(err.to_string().contains("the prefix"), "{err}");
        }

        let mut short = blank();
        short.priv_inputs.challenge_proofs[3].path_d_new.pop();
        let err = UpdateParts::new(&short).err().expect("a short tree-D path");
        assert!(err.contains("challenge 3's tree-D path"), "{err}");

        let mut wide = blank();
        wide.priv_inputs.challenge_proofs[7].path_r_new[0].push(None);
        let err = UpdateParts::new(&wide).err().expect("a wide tree-R level");
        assert!(err.contains("challenge 7's tree-R paths"), "{err}");

        let mut fewer = blank();
        fewer.priv_inputs.challenge_proofs.pop();
        let err = UpdateParts::new(&fewer).err().expect("9 challenges");
        assert!(err.contains("9 challenge proofs"), "{err}");

        let mut leaves = blank();
        leaves.priv_inputs.apex_leafs.push(None);
        let err = UpdateParts::new(&leaves).err().expect("9 apex leaves");
        assert!(err.contains("9 apex leaves"), "{err}");
    }
}
