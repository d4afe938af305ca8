//! PoRep commit phase 2 (C2): the request carries the C1 wrapper JSON that Lotus' bench
//! tool writes, `{"SectorNum", "Phase1Out": base64(JSON of filecoin-proofs-api's
//! SealCommitPhase1Output), "SectorSize"}`. Owns [`PoRepC2`]: the parsed, validated C1
//! output of one sector whose partition k circuit is `StackedCompound::circuit(.., Some(k))`
//! and whose public inputs are `StackedCompound::generate_public_inputs(.., Some(k))`, as
//! filecoin-proofs' `seal_commit_phase2` and `verify_seal` build them.
//!
//! All three [`PoRepVariant`]s go through here: the registered proof's `PoRepConfig`
//! picks the partition count and how the public inputs derive each partition's
//! challenges (from the seed, from the seed among synthetic challenges, or from comm_r
//! alone). A non-interactive PoRep's partition proofs are then aggregated with SnarkPack
//! (`snarkpack.rs`) into the one proof `verify_seal` accepts for it.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::{
    Assignment, KindError, PartitionedProof, Proof, ProofRequest, Scalar, SynthesisError,
    Synthesizer, VerifyingKey,
};
use filecoin_hashers::{Domain, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, MerkleTreeTrait, PoRepConfig};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::RegisteredSealProof;
use storage_proofs_core::{compound_proof::CompoundProof, proof::ProofScheme};
use storage_proofs_porep::stacked::{
    self, generate_replica_id, StackedCircuit, StackedCompound, StackedDrg,
};

use crate::native::NativeChallenge;
use crate::partition::{self, check_sector_size};
use crate::registry::{circuit_id, FilecoinKind, PoRepVariant, Registered, SectorSize};
use crate::snarkpack;

mod compare;
pub use compare::{compare_native_witness, compare_recordings};

/// The vanilla proofs of one partition (one per challenge).
type PartitionVanilla<Tree> = Vec<filecoin_proofs::VanillaSealProof<Tree>>;
type PubInputs<Tree> = stacked::PublicInputs<
    <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain,
    DefaultPieceDomain,
>;

/// The C1 wrapper JSON's fields (Go field names).
#[derive(serde::Deserialize)]
struct C1Wrapper {
    #[serde(rename = "SectorNum")]
    sector_num: u64,
    #[serde(rename = "Phase1Out")]
    phase1_out: String,
    #[serde(rename = "SectorSize")]
    sector_size: u64,
    /// Set only in fake requests (`testgen::FakeRequest`): what they are.
    #[serde(rename = "Fake", default)]
    fake: Option<String>,
}

/// A PoRep C2 request for a sector of shape `Tree`, ready to prove.
pub struct PoRepC2<Tree: 'static + MerkleTreeTrait> {
    size: SectorSize,
    comm_r: [u8; 32],
    /// Non-interactive PoRep only: the SnarkPack key file the partition proofs are
    /// aggregated with.
    aggregation_key: Option<PathBuf>,
    params_file: String,
    vanilla_params: stacked::PublicParams<Tree>,
    pub_inputs: PubInputs<Tree>,
    vanilla_proofs: Vec<PartitionVanilla<Tree>>,
    /// A fake request (`ParseOptions::fake_ok`): its proof is assembled unverified.
    fake: bool,
}

/// What the C1 output says besides the vanilla proofs.
struct C1Meta {
    registered: RegisteredSealProof,
    aggregation_key: Option<PathBuf>,
    sector_num: u64,
    miner_id: u64,
    comm_r: [u8; 32],
    comm_d: [u8; 32],
    seed: [u8; 32],
    ticket: [u8; 32],
    replica_id: filecoin_proofs::DefaultTreeDomain,
    /// Accepted as a fake: the vanilla proofs are not checked.
    fake: bool,
}

/// Parses a PoRep C2 request of any [`PoRepVariant`]; a non-interactive one's SnarkPack
/// key is looked up in `param_dir` (`v28-fil-inner-product-v1.srs`).
///
/// # Errors
/// [`KindError::InvalidField`] naming `registered_proof`, `sector_size`, `sector_number`,
/// `miner_id`, `vanilla_proof` (the wrapper, or a fake one without `opts.fake_ok`) or
/// `vanilla_proof.Phase1Out` (the C1 output); [`KindError::Other`] when a non-interactive
/// PoRep's SnarkPack key is not in `param_dir`.
pub fn parse(
    req: &ProofRequest,
    param_dir: &Path,
    opts: crate::ParseOptions,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    let (meta, vanilla, size) = read_c1(req, param_dir, opts)?;
    let wrong_shape = |variant: &str| KindError::InvalidField {
        field: "vanilla_proof.Phase1Out",
        reason: format!("vanilla proofs are {variant} but registered_proof is {size}"),
    };
    match vanilla {
        VanillaSealProof::StackedDrg2KiBV1(p) if size == SectorSize::S2KiB => {
            PoRepC2::boxed(meta, p)
        }
        VanillaSealProof::StackedDrg8MiBV1(p) if size == SectorSize::S8MiB => {
            PoRepC2::boxed(meta, p)
        }
        VanillaSealProof::StackedDrg512MiBV1(p) if size == SectorSize::S512MiB => {
            PoRepC2::boxed(meta, p)
        }
        VanillaSealProof::StackedDrg32GiBV1(p) if size == SectorSize::S32GiB => {
            PoRepC2::boxed(meta, p)
        }
        VanillaSealProof::StackedDrg64GiBV1(p) if size == SectorSize::S64GiB => {
            PoRepC2::boxed(meta, p)
        }
        other => Err(wrong_shape(match other {
            VanillaSealProof::StackedDrg2KiBV1(_) => "2KiB",
            VanillaSealProof::StackedDrg8MiBV1(_) => "8MiB",
            VanillaSealProof::StackedDrg512MiBV1(_) => "512MiB",
            VanillaSealProof::StackedDrg32GiBV1(_) => "32GiB",
            VanillaSealProof::StackedDrg64GiBV1(_) => "64GiB",
        })),
    }
}

/// The request's C1 output, checked against the request: what it says and its vanilla
/// proofs, and the registered sector size.
fn read_c1(
    req: &ProofRequest,
    param_dir: &Path,
    opts: crate::ParseOptions,
) -> Result<(C1Meta, VanillaSealProof, SectorSize), KindError> {
    let Registered::Seal(registered) =
        Registered::from_abi(FilecoinKind::PoRep, req.registered_proof)?
    else {
        return Err(KindError::Other(
            "registered proof is not a seal proof".into(),
        ));
    };
    let size = Registered::Seal(registered).sector_size();
    check_sector_size(req.sector_size, size)?;
    let invalid = |field, reason: String| KindError::InvalidField { field, reason };

    if req.vanilla_proof.is_empty() {
        return Err(invalid(
            "vanilla_proof",
            "empty: expected the C1 wrapper JSON".into(),
        ));
    }
    let wrapper: C1Wrapper = serde_json::from_slice(&req.vanilla_proof).map_err(|e| {
        invalid(
            "vanilla_proof",
            format!("not the C1 wrapper JSON {{SectorNum, Phase1Out, SectorSize}}: {e}"),
        )
    })?;
    if let (Some(note), false) = (&wrapper.fake, opts.fake_ok) {
        return Err(invalid(
            "vanilla_proof",
            format!("refused: {note}; only benchmarks accept it (`cuzk bench batch --fake`)"),
        ));
    }
    if wrapper.sector_size != size.bytes() {
        return Err(invalid(
            "vanilla_proof",
            format!(
                "SectorSize {} does not match registered_proof {} ({size})",
                wrapper.sector_size, req.registered_proof
            ),
        ));
    }
    if req.sector_number != 0 && req.sector_number != wrapper.sector_num {
        return Err(invalid(
            "sector_number",
            format!(
                "{} but the C1 output is for sector {}",
                req.sector_number, wrapper.sector_num
            ),
        ));
    }
    let phase1_json = base64::engine::general_purpose::STANDARD
        .decode(wrapper.phase1_out.trim())
        .map_err(|e| invalid("vanilla_proof.Phase1Out", format!("not base64: {e}")))?;
    let phase1: SealCommitPhase1Output = serde_json::from_slice(&phase1_json).map_err(|e| {
        invalid(
            "vanilla_proof.Phase1Out",
            format!("not a SealCommitPhase1Output JSON: {e}"),
        )
    })?;

    let c1_size = Registered::Seal(phase1.registered_proof).sector_size();
    if c1_size != size {
        return Err(invalid(
            "vanilla_proof",
            format!(
                "the C1 output is for {c1_size} sectors ({:?}) but registered_proof {} is {size}",
                phase1.registered_proof, req.registered_proof
            ),
        ));
    }
    if phase1.registered_proof != registered {
        return Err(invalid(
            "registered_proof",
            format!(
                "{registered:?} but the C1 output was made with {:?}",
                phase1.registered_proof
            ),
        ));
    }
    // Refuse before checking the vanilla proofs (seconds at 32 GiB) and any proving:
    // without the key every partition would be proved for nothing.
    let aggregation_key = match PoRepVariant::of(registered) {
        PoRepVariant::NonInteractive => {
            let path = snarkpack::srs_path(param_dir);
            if !path.is_file() {
                return Err(KindError::Other(format!(
                    "non-interactive PoRep ({registered:?}) aggregates its partition proofs \
                     with the SnarkPack key {}, which is not there (it comes with the \
                     Filecoin parameters; `cuzk gen params --kind porep` writes a test one)",
                    path.display()
                )));
            }
            Some(path)
        }
        PoRepVariant::Interactive | PoRepVariant::Synthetic => None,
    };
    let meta = C1Meta {
        registered,
        aggregation_key,
        sector_num: wrapper.sector_num,
        miner_id: req.miner_id,
        comm_r: phase1.comm_r,
        comm_d: phase1.comm_d,
        seed: phase1.seed,
        ticket: phase1.ticket,
        replica_id: phase1.replica_id,
        fake: opts.fake_ok,
    };
    Ok((meta, phase1.vanilla_proofs, size))
}

impl<Tree: 'static + MerkleTreeTrait> PoRepC2<Tree> {
    fn boxed(
        meta: C1Meta,
        proofs: Vec<PartitionVanilla<Tree>>,
    ) -> Result<Box<dyn PartitionedProof>, KindError> {
        Ok(Box::new(Self::new(meta, proofs)?))
    }

    fn new(meta: C1Meta, vanilla_proofs: Vec<PartitionVanilla<Tree>>) -> Result<Self, KindError> {
        let field = "vanilla_proof.Phase1Out";
        let invalid = |reason: String| KindError::InvalidField { field, reason };
        let size = Registered::Seal(meta.registered).sector_size();
        let porep_config: PoRepConfig = meta.registered.as_v1_config();
        for (name, value) in [
            ("comm_r", &meta.comm_r),
            ("comm_d", &meta.comm_d),
            ("seed", &meta.seed),
        ] {
            if *value == [0u8; 32] {
                return Err(invalid(format!("{name} is all zero")));
            }
        }
        let comm_r: <Tree::Hasher as Hasher>::Domain =
            filecoin_proofs::as_safe_commitment(&meta.comm_r, "comm_r")
                .map_err(|e| invalid(format!("comm_r is not a field element: {e:#}")))?;
        let comm_d: DefaultPieceDomain =
            filecoin_proofs::as_safe_commitment(&meta.comm_d, "comm_d")
                .map_err(|e| invalid(format!("comm_d is not a field element: {e:#}")))?;
        if meta.miner_id != 0 {
            let expected = generate_replica_id::<Tree::Hasher, _>(
                &crate::prover_id(meta.miner_id),
                meta.sector_num,
                &meta.ticket,
                meta.comm_d,
                &porep_config.porep_id,
            );
            if expected.into_bytes() != meta.replica_id.into_bytes() {
                return Err(KindError::InvalidField {
                    field: "miner_id",
                    reason: format!(
                        "the C1 output's replica_id was not derived from miner {} and sector {}",
                        meta.miner_id, meta.sector_num
                    ),
                });
            }
        }
        let setup = filecoin_proofs::parameters::setup_params(&porep_config)
            .map_err(|e| KindError::Other(format!("porep setup parameters: {e:#}")))?;
        let vanilla_params =
            <StackedDrg<'_, Tree, DefaultPieceHasher> as ProofScheme<'_>>::setup(&setup)
                .map_err(|e| KindError::Other(format!("porep public parameters: {e:#}")))?;

        let partitions = usize::from(porep_config.partitions);
        let per_partition = vanilla_params.challenges.num_challenges_per_partition();
        if vanilla_proofs.len() != partitions {
            return Err(invalid(format!(
                "{} partitions of vanilla proofs, {size} PoRep has {partitions}",
                vanilla_proofs.len()
            )));
        }
        if let Some((k, p)) = vanilla_proofs
            .iter()
            .enumerate()
            .find(|(_, p)| p.len() != per_partition)
        {
            return Err(invalid(format!(
                "partition {k} has {} challenge proofs, expected {per_partition}",
                p.len()
            )));
        }
        // The replica id is already bound by the C1 output; `Tau` names the commitments.
        let replica_id = <<Tree::Hasher as Hasher>::Domain as Domain>::try_from_bytes(
            &meta.replica_id.into_bytes(),
        )
        .map_err(|e| invalid(format!("replica_id: {e}")))?;
        let pub_inputs = stacked::PublicInputs {
            replica_id,
            tau: Some(stacked::Tau { comm_d, comm_r }),
            k: None,
            seed: Some(meta.seed),
        };
        // Check the vanilla proofs against comm_r, the seed's challenges and the labels
        // before any expensive synthesis: C2 itself does not, and a bad C1 would only show
        // as a failed Groth16 verification at the very end. A fake's cannot hold.
        if meta.fake {
            partition::warn_fake(FilecoinKind::PoRep, size);
        }
        let ok = meta.fake || crate::guard(field, || {
            <StackedDrg<'_, Tree, DefaultPieceHasher> as ProofScheme<'_>>::verify_all_partitions(
                &vanilla_params,
                &pub_inputs,
                &vanilla_proofs,
            )
        })?
        .map_err(|e| invalid(format!("vanilla proofs cannot be checked: {e:#}")))?;
        if !ok {
            return Err(invalid(
                "vanilla proofs do not verify against comm_r, comm_d, replica_id and seed".into(),
            ));
        }
        let params_file = crate::params_file_name(FilecoinKind::PoRep, size)?;
        Ok(PoRepC2 {
            size,
            comm_r: meta.comm_r,
            aggregation_key: meta.aggregation_key,
            params_file,
            vanilla_params,
            pub_inputs,
            vanilla_proofs,
            fake: meta.fake,
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait> PoRepC2<Tree> {
    /// Partition `partition_idx`'s circuit over `vanilla`, its challenges' proofs (all of
    /// them, or one for a [`ChallengeParts`] part).
    fn circuit(
        &self,
        vanilla: &PartitionVanilla<Tree>,
        partition_idx: usize,
    ) -> Result<StackedCircuit<Tree, DefaultPieceHasher>, KindError> {
        crate::guard("vanilla_proof.Phase1Out", || {
            <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
                StackedDrg<'_, Tree, DefaultPieceHasher>,
                _,
            >>::circuit(
                &self.pub_inputs,
                (),
                vanilla,
                &self.vanilla_params,
                Some(partition_idx),
            )
        })?
        .map_err(|e| KindError::Other(format!("{e:#}")))
    }

    /// Partition `partition_idx` as its challenges.
    fn challenge_parts(&self, partition_idx: usize) -> Result<ChallengeParts<'_, Tree>, KindError> {
        let vanilla = self
            .vanilla_proofs
            .get(partition_idx)
            .ok_or_else(|| partition::circuit_error(partition_idx, "no such partition"))?;
        Ok(ChallengeParts {
            proof: self,
            vanilla,
            partition_idx,
        })
    }
}

/// A PoRep partition as its challenges: part j is the one-challenge circuit of challenge
/// j, which synthesizes the circuit's prefix (replica id and its bits, comm_d, comm_r,
/// comm_r_last, comm_c and `comm_r = H(comm_c ‖ comm_r_last)`) and then that challenge, as
/// `StackedCircuit::synthesize` does for all of them in a row: the challenges share only
/// the prefix's values.
struct ChallengeParts<'a, Tree: 'static + MerkleTreeTrait> {
    proof: &'a PoRepC2<Tree>,
    vanilla: &'a PartitionVanilla<Tree>,
    partition_idx: usize,
}

/// One piece of a PoRep partition given as its challenges: a one-challenge circuit, or the
/// prefix alone (`StackedCircuit::synthesize` over no challenge proofs), from which a shape
/// is recorded together with one challenge (`cuzk_groth16::recorded`), or a one-challenge
/// circuit's witness-only mirror (`native/`), which only witness-only systems run.
enum Piece<Tree: 'static + MerkleTreeTrait> {
    Challenge(StackedCircuit<Tree, DefaultPieceHasher>),
    Native(Box<NativeChallenge<Tree>>),
    Prefix {
        replica_id: <Tree::Hasher as Hasher>::Domain,
        comm_d: Option<DefaultPieceDomain>,
        comm_r: Option<<Tree::Hasher as Hasher>::Domain>,
        comm_r_last: <Tree::Hasher as Hasher>::Domain,
        comm_c: <Tree::Hasher as Hasher>::Domain,
    },
}

impl<Tree: 'static + MerkleTreeTrait> bellperson::Circuit<Scalar> for Piece<Tree> {
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        match self {
            Piece::Challenge(circuit) => circuit.synthesize(cs),
            Piece::Native(circuit) => circuit.synthesize(cs),
            Piece::Prefix {
                replica_id,
                comm_d,
                comm_r,
                comm_r_last,
                comm_c,
            } => StackedCircuit::<Tree, DefaultPieceHasher>::synthesize(
                cs,
                Some(replica_id),
                comm_d,
                comm_r,
                Some(comm_r_last),
                Some(comm_c),
                Vec::new(),
            ),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Parts for ChallengeParts<'_, Tree> {
    type Part = Piece<Tree>;

    fn n_parts(&self) -> usize {
        self.vanilla.len()
    }

    fn part(&self, j: usize) -> Result<Self::Part, SynthesisError> {
        let one = self.challenge(j)?;
        self.proof
            .circuit(&vec![one.clone()], self.partition_idx)
            .map(Piece::Challenge)
            .map_err(|e| SynthesisError::Part {
                part: j,
                reason: e.to_string(),
            })
    }

    /// Challenge `j`'s witness-only mirror: its SHA-256 parts (labels, tree D) build no
    /// linear combination, the rest runs the real gadgets (`native/challenge.rs`).
    fn witness_part(&self, j: usize) -> Result<Self::Part, SynthesisError> {
        let one = self.challenge(j)?;
        let tau = self.proof.pub_inputs.tau.as_ref();
        Ok(Piece::Native(Box::new(NativeChallenge {
            replica_id: self.proof.pub_inputs.replica_id,
            comm_d: tau.map(|t| t.comm_d),
            comm_r: tau.map(|t| t.comm_r),
            proof: one.clone(),
            check_values: !self.proof.fake,
        })))
    }

    /// The values `StackedCompound::circuit` gives the prefix: the replica id and the
    /// commitments of the public inputs, comm_r_last and comm_c of the first challenge
    /// (the same in every challenge of a partition: `circuit` checks it).
    fn prefix(&self) -> Result<Option<Piece<Tree>>, SynthesisError> {
        let first = self.vanilla.first().ok_or_else(|| SynthesisError::Part {
            part: 0,
            reason: "a partition without challenges".into(),
        })?;
        let pub_inputs = &self.proof.pub_inputs;
        Ok(Some(Piece::Prefix {
            replica_id: pub_inputs.replica_id,
            comm_d: pub_inputs.tau.as_ref().map(|t| t.comm_d),
            comm_r: pub_inputs.tau.as_ref().map(|t| t.comm_r),
            comm_r_last: first.comm_r_last(),
            comm_c: first.comm_c(),
        }))
    }
}

impl<Tree: 'static + MerkleTreeTrait> ChallengeParts<'_, Tree> {
    /// Challenge `j`'s vanilla proof.
    fn challenge(
        &self,
        j: usize,
    ) -> Result<&filecoin_proofs::VanillaSealProof<Tree>, SynthesisError> {
        self.vanilla.get(j).ok_or_else(|| SynthesisError::Part {
            part: j,
            reason: format!("a partition of {} challenges", self.vanilla.len()),
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait> PartitionedProof for PoRepC2<Tree> {
    fn circuit_id(&self) -> String {
        circuit_id(FilecoinKind::PoRep, self.size)
    }

    fn params_path(&self, param_dir: &Path) -> PathBuf {
        param_dir.join(&self.params_file)
    }

    fn num_partitions(&self) -> usize {
        self.vanilla_proofs.len()
    }

    fn partition_host_bytes(&self, synth: &Synthesizer) -> usize {
        crate::params::CircuitShape::of(FilecoinKind::PoRep, self.size).admission_bytes(synth)
    }

    fn synthesize(
        &self,
        synth: &Synthesizer,
        partition_idx: usize,
    ) -> Result<Assignment, KindError> {
        let parts = self.challenge_parts(partition_idx)?;
        let circuit = self
            .circuit(parts.vanilla, partition_idx)
            .map_err(|e| partition::circuit_error(partition_idx, e))?;
        partition::synthesize_parts(synth, &self.circuit_id(), circuit, &parts, partition_idx)
    }

    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError> {
        <StackedCompound<Tree, DefaultPieceHasher> as CompoundProof<
            StackedDrg<'_, Tree, DefaultPieceHasher>,
            StackedCircuit<Tree, DefaultPieceHasher>,
        >>::generate_public_inputs(
            &self.pub_inputs, &self.vanilla_params, Some(partition_idx)
        )
        .map_err(|e| {
            KindError::Other(format!(
                "porep public inputs of partition {partition_idx}: {e:#}"
            ))
        })
    }

    fn assemble_and_verify(
        &self,
        proofs: &[Proof],
        vk: &VerifyingKey,
    ) -> Result<Vec<u8>, KindError> {
        if self.fake {
            return partition::assemble_fake(&self.circuit_id(), proofs, self.num_partitions());
        }
        let inputs = (0..self.num_partitions())
            .map(|k| self.public_inputs(k))
            .collect::<Result<Vec<_>, _>>()?;
        // Every partition is checked on its own first, also before aggregating: a bad
        // partition fails here with the plain batch verifier's message.
        let bytes = partition::assemble_and_verify(proofs, &inputs, vk)?;
        match &self.aggregation_key {
            None => Ok(bytes),
            Some(srs) => snarkpack::aggregate_and_verify(srs, proofs, &inputs, vk, &self.comm_r),
        }
    }
}
