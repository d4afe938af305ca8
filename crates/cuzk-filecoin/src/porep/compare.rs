//! Checks of a PoRep request's parts against its whole circuit, for tests and benchmarks:
//! the shape recorded from the prefix and one challenge against the whole recording, and a
//! challenge's native witness against the real circuit's.

use std::path::Path;

use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::{KindError, ProofRequest, SynthesisError};
use filecoin_proofs::MerkleTreeTrait;
use filecoin_proofs_api::seal::VanillaSealProof;

use super::{parse, read_c1, C1Meta, PartitionVanilla, Piece, PoRepC2};
use crate::native::Collected;

/// Partition `partition_idx` of a PoRep request recorded whole and recorded from its
/// prefix and one challenge (`cuzk_groth16::recorded::compare_recordings`): `None` when
/// the two are the same constraint system, else how they differ. For tests and
/// benchmarks; parses as [`parse`] does.
///
/// # Errors
/// As [`parse`], and [`KindError::Synthesis`] when a recording fails.
pub fn compare_recordings(
    req: &ProofRequest,
    param_dir: &Path,
    opts: crate::ParseOptions,
    partition_idx: usize,
) -> Result<Option<String>, KindError> {
    fn of<Tree: 'static + MerkleTreeTrait>(
        meta: C1Meta,
        proofs: Vec<PartitionVanilla<Tree>>,
        k: usize,
    ) -> Result<Option<String>, KindError> {
        let proof = PoRepC2::new(meta, proofs)?;
        let parts = proof.challenge_parts(k)?;
        let circuit = proof.circuit(parts.vanilla, k)?;
        cuzk_groth16::recorded::compare_recordings(circuit, &parts).map_err(|e| {
            KindError::Synthesis {
                partition_idx: k,
                reason: e.to_string(),
            }
        })
    }
    // Every refusal of `parse` first (a size that does not match its proofs included).
    parse(req, param_dir, opts)?;
    let (meta, vanilla, _) = read_c1(req, param_dir, opts)?;
    let k = partition_idx;
    match vanilla {
        VanillaSealProof::StackedDrg2KiBV1(p) => of(meta, p, k),
        VanillaSealProof::StackedDrg8MiBV1(p) => of(meta, p, k),
        VanillaSealProof::StackedDrg512MiBV1(p) => of(meta, p, k),
        VanillaSealProof::StackedDrg32GiBV1(p) => of(meta, p, k),
        VanillaSealProof::StackedDrg64GiBV1(p) => of(meta, p, k),
    }
}

/// Challenge `challenge_idx` (each in turn when `None`) of partition `partition_idx` of a
/// PoRep request, its witness-only run through the real one-challenge circuit and through
/// its native mirror (the path the parts' witness takes): `None` when both give the same
/// values in the same order and the same constraint count, else where they first differ. For tests and
/// benchmarks; parses as [`parse`] does. Witness generation does not check constraints, so
/// fake requests serve.
///
/// # Errors
/// As [`parse`], and [`KindError::Synthesis`] when either run fails.
pub fn compare_native_witness(
    req: &ProofRequest,
    param_dir: &Path,
    opts: crate::ParseOptions,
    partition_idx: usize,
    challenge_idx: Option<usize>,
) -> Result<Option<String>, KindError> {
    fn of<Tree: 'static + MerkleTreeTrait>(
        meta: C1Meta,
        proofs: Vec<PartitionVanilla<Tree>>,
        k: usize,
        only: Option<usize>,
    ) -> Result<Option<String>, KindError> {
        let proof = PoRepC2::new(meta, proofs)?;
        let parts = proof.challenge_parts(k)?;
        let run = |j: usize, piece: Result<Piece<Tree>, SynthesisError>| {
            let failed = |e: String| KindError::Synthesis {
                partition_idx: k,
                reason: format!("challenge {j}: {e}"),
            };
            let piece = piece.map_err(|e| failed(e.to_string()))?;
            Collected::of(piece).map_err(|e| failed(e.to_string()))
        };
        let challenges = match only {
            Some(j) => j..j + 1,
            None => 0..parts.n_parts(),
        };
        for j in challenges {
            let (gadgets, native) =
                rayon::join(|| run(j, parts.part(j)), || run(j, parts.witness_part(j)));
            if let Some(diff) = native?.difference(&gadgets?) {
                return Ok(Some(format!("challenge {j}: {diff}")));
            }
        }
        Ok(None)
    }
    parse(req, param_dir, opts)?;
    let (meta, vanilla, _) = read_c1(req, param_dir, opts)?;
    let (k, j) = (partition_idx, challenge_idx);
    match vanilla {
        VanillaSealProof::StackedDrg2KiBV1(p) => of(meta, p, k, j),
        VanillaSealProof::StackedDrg8MiBV1(p) => of(meta, p, k, j),
        VanillaSealProof::StackedDrg512MiBV1(p) => of(meta, p, k, j),
        VanillaSealProof::StackedDrg32GiBV1(p) => of(meta, p, k, j),
        VanillaSealProof::StackedDrg64GiBV1(p) => of(meta, p, k, j),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::native::NativeChallenge;
    use crate::testgen::FakeRequest;
    use crate::{FilecoinKind, ParseOptions, SectorSize};

    /// A fake 2 KiB PoRep request (seed 5), parsed.
    fn fake_2k() -> PoRepC2<filecoin_proofs::SectorShape2KiB> {
        let fake = FakeRequest::generate(FilecoinKind::PoRep, SectorSize::S2KiB, 5).expect("fake");
        let opts = ParseOptions { fake_ok: true };
        let (meta, vanilla, _) =
            read_c1(&fake.request, &crate::default_param_dir(), opts).expect("its C1 output");
        let VanillaSealProof::StackedDrg2KiBV1(proofs) = vanilla else {
            panic!("a 2 KiB request gives 2 KiB proofs");
        };
        PoRepC2::new(meta, proofs).expect("parses")
    }

    /// On a verified request the native witness checks its SHA-256 results (tree-D root,
    /// labels) against the vanilla proof. A fake's random data contradicts them as a wrong
    /// digest of the mirror would: the checked run refuses by name, the unchecked one
    /// (fakes, whose proofs are never verified) goes on. See: #17.
    #[test]
    fn a_checked_native_witness_refuses_values_the_proof_contradicts() {
        let proof = fake_2k();
        let tau = proof.pub_inputs.tau.as_ref();
        let native = |check_values| NativeChallenge {
            replica_id: proof.pub_inputs.replica_id,
            comm_d: tau.map(|t| t.comm_d),
            comm_r: tau.map(|t| t.comm_r),
            proof: proof.vanilla_proofs[0][0].clone(),
            check_values,
        };
        assert!(Collected::of(native(false)).is_ok());
        let err = Collected::of(native(true)).expect_err("random data contradicts the mirror");
        assert!(
            err.to_string().contains("native porep witness is wrong"),
            "{err}"
        );
    }

    /// The Poseidon half of the check: a fake's `comm_r` is `H(comm_c ‖ comm_r_last)` as a
    /// real one is, so a checked run with another comm_r is refused there, by name, before
    /// any SHA-256 check; the unchecked run goes on. See: #17.
    #[test]
    fn a_checked_native_witness_refuses_a_comm_r_its_poseidon_contradicts() {
        use filecoin_hashers::Domain;
        use rand::SeedableRng;
        let proof = fake_2k();
        let tau = proof.pub_inputs.tau.as_ref();
        let other = Domain::random(&mut rand_chacha::ChaCha8Rng::seed_from_u64(5));
        let native = |comm_r, check_values| NativeChallenge {
            replica_id: proof.pub_inputs.replica_id,
            comm_d: tau.map(|t| t.comm_d),
            comm_r,
            proof: proof.vanilla_proofs[0][0].clone(),
            check_values,
        };
        assert!(Collected::of(native(Some(other), false)).is_ok());
        let err = Collected::of(native(Some(other), true)).expect_err("another comm_r");
        assert!(err.to_string().contains("is not comm_r"), "{err}");
        let err = Collected::of(native(tau.map(|t| t.comm_r), true)).expect_err("random data");
        assert!(err.to_string().contains("tree-D root"), "{err}");
    }
}
