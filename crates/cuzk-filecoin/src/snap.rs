//! SnapDeals (EmptySectorUpdate): the request carries one bincode-serialized update
//! `PartitionProof` per partition (what filecoin-proofs-api's `generate_partition_proofs`
//! returns) and the three commitments `comm_r_old`, `comm_r_new`, `comm_d_new`. Owns
//! [`SnapDealsProof`]: partition k's circuit is `EmptySectorUpdateCompound::circuit(..,
//! Some(k))`, its public inputs `generate_public_inputs(.., Some(k))` (k, comm_r_old,
//! comm_d_new, comm_r_new, h_select), as `generate_empty_sector_update_proof_with_vanilla`
//! and `verify_empty_sector_update_proof` build them.

use std::path::{Path, PathBuf};

use bincode::Options as _;
use cuzk_groth16::recorded::R1cs;
use cuzk_groth16::witness::Counts;
use cuzk_groth16::{
    Assignment, KindError, PartitionedProof, Proof, ProofRequest, Scalar, Synthesizer, VerifyingKey,
};
use filecoin_hashers::Domain;
use filecoin_proofs::{DefaultPieceDomain, MerkleTreeTrait, SectorUpdateConfig};
use storage_proofs_core::{compound_proof::CompoundProof, proof::ProofScheme};
use storage_proofs_update::{
    constants::TreeRHasher, EmptySectorUpdate, EmptySectorUpdateCircuit, EmptySectorUpdateCompound,
    PartitionProof, PublicInputs, PublicParams,
};

use crate::partition::{self, bytes32, check_sector_size};
use crate::registry::{circuit_id, FilecoinKind, Registered, SectorSize};
use parts::UpdateParts;

type TreeRDomain = <TreeRHasher as filecoin_hashers::Hasher>::Domain;

// The update circuit mirrored (`mirror`), given as a prefix and its challenges (`parts`)
// whose prefix is walked once and replayed (`replay`).
mod gadgets;
mod mirror;
mod parts;
mod replay;

/// A SnapDeals update proof request for sectors of shape `Tree`, ready to prove.
pub struct SnapDealsProof<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> {
    size: SectorSize,
    params_file: String,
    pub_params: PublicParams,
    pub_inputs: PublicInputs,
    vanilla_proofs: Vec<PartitionProof<Tree>>,
    /// A fake request (`ParseOptions::fake_ok`): its proof is assembled unverified.
    fake: bool,
}

/// The request's sector size and update configuration, checked against its registered
/// proof.
fn update_config(req: &ProofRequest) -> Result<(SectorSize, SectorUpdateConfig), KindError> {
    let reg = Registered::from_abi(FilecoinKind::SnapDeals, req.registered_proof)?;
    let Registered::Update(registered) = reg else {
        return Err(KindError::Other(
            "registered proof is not an update proof".into(),
        ));
    };
    let size = reg.sector_size();
    check_sector_size(req.sector_size, size)?;
    Ok((
        size,
        SectorUpdateConfig::from_porep_config(&registered.as_v1_config()),
    ))
}

/// Parses a SnapDeals request.
///
/// # Errors
/// [`KindError::InvalidField`] naming `registered_proof`, `sector_size`, `comm_r_old`,
/// `comm_r_new`, `comm_d_new` or `vanilla_proofs` (vanilla proofs that do not open the
/// commitments are accepted only with `opts.fake_ok`).
pub fn parse(
    req: &ProofRequest,
    opts: crate::ParseOptions,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    let (size, config) = update_config(req)?;
    with_tree!(size, boxed, size, config, req, opts)
}

/// What [`check_mirror`] compares for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MirrorCheck {
    /// The update circuit and its mirror over every challenge, each recorded
    /// (`cuzk_groth16::recorded::R1cs`): the same counts, coefficient table and matrices.
    Recordings,
    /// Counts only, of the mirror's prefix and of its last part (the prefix and the last
    /// challenge) walked witness-only, against the update circuit's known counts
    /// (`params::CircuitShape`): for sizes too large to record in a test.
    Counts,
    /// The prefix walked witness-only with `apex_por` through the native SHA-256 mirror
    /// (as every partition's parts replay it) against the same walk through the gadgets:
    /// the same input and aux values and the same constraint count.
    NativePrefix,
}

/// Checks partition `partition_idx` of a SnapDeals request's mirrored update circuit
/// (`snap/parts.rs`, the circuit given as its challenges) against the update circuit
/// itself: `None` when they agree as `check` asks, else how they differ. For tests and
/// benchmarks; parses as [`parse`] does.
///
/// # Errors
/// As [`parse`], and [`KindError::Synthesis`] when a circuit or the mirror fails.
pub fn check_mirror(
    req: &ProofRequest,
    opts: crate::ParseOptions,
    partition_idx: usize,
    check: MirrorCheck,
) -> Result<Option<String>, KindError> {
    fn of<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
        size: SectorSize,
        config: SectorUpdateConfig,
        req: &ProofRequest,
        opts: crate::ParseOptions,
        k: usize,
        check: MirrorCheck,
    ) -> Result<Option<String>, KindError> {
        let proof = SnapDealsProof::<Tree>::new(size, config, req, opts)?;
        let circuit = proof.circuit(k)?;
        let synthesis = |e: &dyn std::fmt::Display| KindError::Synthesis {
            partition_idx: k,
            reason: e.to_string(),
        };
        match check {
            MirrorCheck::Recordings => {
                let mirror = parts::UpdateMirror {
                    circuit: &circuit,
                    span: parts::Span::All,
                    replay: None,
                };
                let ours = R1cs::record(mirror).map_err(|e| synthesis(&e))?;
                let theirs = R1cs::record(proof.circuit(k)?).map_err(|e| synthesis(&e))?;
                Ok(parts::recording_difference(&theirs, &ours))
            }
            MirrorCheck::NativePrefix => {
                replay::native_prefix_difference(&circuit).map_err(|e| synthesis(&e))
            }
            MirrorCheck::Counts => {
                let layout = parts::walk_layout(&circuit).map_err(|e| synthesis(&e))?;
                let shape = crate::params::CircuitShape::of(FilecoinKind::SnapDeals, size);
                let want = Counts {
                    inputs: shape.inputs,
                    aux: shape.aux,
                    constraints: shape.constraints,
                };
                Ok((layout.total() != want).then(|| {
                    format!(
                        "the mirror's prefix {} and {} parts of {} add up to {}, the update \
                         circuit has {want}",
                        layout.prefix,
                        layout.n_parts,
                        layout.stride,
                        layout.total()
                    )
                }))
            }
        }
    }
    let (size, config) = update_config(req)?;
    with_tree!(size, of, size, config, req, opts, partition_idx, check)
}

fn boxed<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    config: SectorUpdateConfig,
    req: &ProofRequest,
    opts: crate::ParseOptions,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    Ok(Box::new(SnapDealsProof::<Tree>::new(
        size, config, req, opts,
    )?))
}

/// A nonzero 32-byte commitment that is a field element.
fn commitment<D: Domain>(field: &'static str, value: &[u8]) -> Result<D, KindError> {
    let bytes = bytes32(field, value)?;
    if bytes == [0u8; 32] {
        return Err(KindError::InvalidField {
            field,
            reason: "all zero".into(),
        });
    }
    filecoin_proofs::as_safe_commitment(&bytes, field).map_err(|e| KindError::InvalidField {
        field,
        reason: format!("not a field element: {e:#}"),
    })
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> SnapDealsProof<Tree> {
    fn new(
        size: SectorSize,
        config: SectorUpdateConfig,
        req: &ProofRequest,
        opts: crate::ParseOptions,
    ) -> Result<Self, KindError> {
        let invalid = |reason: String| KindError::InvalidField {
            field: "vanilla_proofs",
            reason,
        };
        let comm_r_old: TreeRDomain = commitment("comm_r_old", &req.comm_r_old)?;
        let comm_r_new: TreeRDomain = commitment("comm_r_new", &req.comm_r_new)?;
        let comm_d_new: DefaultPieceDomain = commitment("comm_d_new", &req.comm_d_new)?;
        let pub_params = PublicParams::from_sector_size(size.bytes());
        let partitions = usize::from(config.update_partitions);
        if req.vanilla_proofs.len() != partitions {
            return Err(invalid(format!(
                "{} partition proofs, a {size} update has {partitions}",
                req.vanilla_proofs.len()
            )));
        }
        let mut vanilla_proofs = Vec::with_capacity(partitions);
        for (k, bytes) in req.vanilla_proofs.iter().enumerate() {
            let proof: PartitionProof<Tree> = bincode::options()
                .with_fixint_encoding()
                .reject_trailing_bytes()
                .with_limit(bytes.len() as u64 * 4 + 4096)
                .deserialize(bytes)
                .map_err(|e| {
                    invalid(format!(
                        "entry {k} is not a bincode update PartitionProof of a {size} sector: {e}"
                    ))
                })?;
            if proof.challenge_proofs.len() != pub_params.challenge_count {
                return Err(invalid(format!(
                    "entry {k} holds {} challenge proofs, a {size} update partition has {}: \
                     a vanilla proof of another kind or size?",
                    proof.challenge_proofs.len(),
                    pub_params.challenge_count
                )));
            }
            vanilla_proofs.push(proof);
        }
        let pub_inputs = PublicInputs {
            k: partitions,
            comm_r_old,
            comm_d_new,
            comm_r_new,
            h: config.h,
        };
        // Cheap check before synthesis: the vanilla proofs open the three commitments.
        // A fake's cannot.
        if opts.fake_ok {
            partition::warn_fake(FilecoinKind::SnapDeals, size);
        }
        let ok = opts.fake_ok
            || crate::guard("vanilla_proofs", || {
                <EmptySectorUpdate<Tree> as ProofScheme<'_>>::verify_all_partitions(
                    &pub_params,
                    &pub_inputs,
                    &vanilla_proofs,
                )
            })?
            .map_err(|e| invalid(format!("cannot be checked: {e:#}")))?;
        if !ok {
            return Err(invalid(
                "do not verify against comm_r_old, comm_r_new and comm_d_new".into(),
            ));
        }
        let params_file = crate::params_file_name(FilecoinKind::SnapDeals, size)?;
        Ok(SnapDealsProof {
            size,
            params_file,
            pub_params,
            pub_inputs,
            vanilla_proofs,
            fake: opts.fake_ok,
        })
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> SnapDealsProof<Tree> {
    /// Partition `partition_idx`'s update circuit.
    fn circuit(&self, partition_idx: usize) -> Result<EmptySectorUpdateCircuit<Tree>, KindError> {
        let vanilla = self
            .vanilla_proofs
            .get(partition_idx)
            .ok_or_else(|| partition::circuit_error(partition_idx, "no such partition"))?;
        crate::guard("vanilla_proofs", || {
            <EmptySectorUpdateCompound<Tree> as CompoundProof<EmptySectorUpdate<Tree>, _>>::circuit(
                &self.pub_inputs,
                (),
                vanilla,
                &self.pub_params,
                Some(partition_idx),
            )
        })?
        .map_err(|e| partition::circuit_error(partition_idx, e))
    }
}

impl<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>> PartitionedProof
    for SnapDealsProof<Tree>
{
    fn circuit_id(&self) -> String {
        circuit_id(FilecoinKind::SnapDeals, self.size)
    }

    fn params_path(&self, param_dir: &Path) -> PathBuf {
        param_dir.join(&self.params_file)
    }

    fn num_partitions(&self) -> usize {
        self.vanilla_proofs.len()
    }

    fn partition_host_bytes(&self, synth: &Synthesizer) -> usize {
        crate::params::CircuitShape::of(FilecoinKind::SnapDeals, self.size).admission_bytes(synth)
    }

    fn synthesize(
        &self,
        synth: &Synthesizer,
        partition_idx: usize,
    ) -> Result<Assignment, KindError> {
        let build = || self.circuit(partition_idx);
        // The update circuit is not Clone: build it once to surface errors (and to give
        // the mirrored parts their inputs), then let the recorder rebuild it for each run
        // it makes.
        let circuit = build()?;
        let parts =
            UpdateParts::new(&circuit).map_err(|e| partition::circuit_error(partition_idx, e))?;
        partition::synthesize_parts(
            synth,
            &self.circuit_id(),
            partition::Rebuild(&build),
            &parts,
            partition_idx,
        )
    }

    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError> {
        <EmptySectorUpdateCompound<Tree> as CompoundProof<
            EmptySectorUpdate<Tree>,
            EmptySectorUpdateCircuit<Tree>,
        >>::generate_public_inputs(&self.pub_inputs, &self.pub_params, Some(partition_idx))
        .map_err(|e| {
            KindError::Other(format!(
                "update public inputs of partition {partition_idx}: {e:#}"
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
        partition::assemble_and_verify(proofs, &inputs, vk)
    }
}
