//! WindowPoSt (one partition per request) and WinningPoSt. The request carries one
//! bincode-serialized `FallbackPoStSectorProof` per sector (what filecoin-proofs-api's
//! `generate_single_vanilla_proof` returns), the 32-byte randomness, the miner id and, for
//! WindowPoSt, the partition index. Owns [`FallbackPoStProof`], whose single circuit is
//! `FallbackPoStCompound::circuit` over the partition's vanilla proof.
//!
//! Public inputs are built the way the verifiers build them: WinningPoSt from the one
//! sector repeated `sector_count` (66) times, as `verify_winning_post` does (a one-sector
//! list gives inputs that do not match the circuit under API V1_0_0); WindowPoSt from the
//! partition's sectors at position `partition_index` of the whole sector list, so that
//! API V1_0_0's sector-indexed challenges come out right (V1_2 challenges do not depend
//! on the position).

use std::path::{Path, PathBuf};

use bincode::Options as _;
use cuzk_groth16::sublayout::Parts;
use cuzk_groth16::{
    Assignment, KindError, PartitionedProof, Proof, ProofRequest, Scalar, SynthesisError,
    Synthesizer, VerifyingKey,
};
use filecoin_hashers::Hasher;
use filecoin_proofs::{
    FallbackPoStSectorProof, MerkleTreeTrait, PoStConfig, PoStType, VanillaProof,
};
use filecoin_proofs_api::ApiVersion;
use storage_proofs_core::{compound_proof::CompoundProof, proof::ProofScheme};
use storage_proofs_post::fallback::{
    self, FallbackPoSt, FallbackPoStCircuit, FallbackPoStCompound, PublicSector, Sector,
    SectorProof,
};

use crate::native::NativeSector;
use crate::partition::{self, bytes32, check_sector_size};
use crate::registry::{circuit_id, FilecoinKind, Registered, SectorSize};

mod compare;
pub use compare::{compare_native_witness, NativeComparison};

/// Most sectors placed before a V1_0_0 WindowPoSt partition to position it (4M sectors,
/// 1,785 partitions of 2349): far above any deadline, small enough to bound memory.
const MAX_V1_0_SECTORS_BEFORE: usize = 1 << 22;

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// A WindowPoSt partition or a WinningPoSt for sectors of shape `Tree`, ready to prove.
pub struct FallbackPoStProof<Tree: 'static + MerkleTreeTrait> {
    kind: FilecoinKind,
    size: SectorSize,
    params_file: String,
    vanilla_params: fallback::PublicParams,
    /// Public inputs whose chunk `partition_k` (of `sector_count` sectors) is this proof's.
    pub_inputs: fallback::PublicInputs<TreeDomain<Tree>>,
    partition_k: usize,
    vanilla: VanillaProof<Tree>,
    /// A fake request (`ParseOptions::fake_ok`): its proof is assembled unverified.
    fake: bool,
}

/// Parses a WindowPoSt or WinningPoSt request.
///
/// # Errors
/// [`KindError::InvalidField`] naming `registered_proof`, `sector_size`, `randomness`,
/// `vanilla_proofs` or `partition_index`. Vanilla proofs that do not verify are accepted
/// only with `opts.fake_ok`.
pub fn parse(
    kind: FilecoinKind,
    req: &ProofRequest,
    opts: crate::ParseOptions,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    let (size, cfg) = post_config(kind, req)?;
    with_tree!(size, boxed, kind, size, cfg, req, opts)
}

/// The request's sector size and PoSt configuration, checked against each other.
fn post_config(
    kind: FilecoinKind,
    req: &ProofRequest,
) -> Result<(SectorSize, PoStConfig), KindError> {
    let reg = Registered::from_abi(kind, req.registered_proof)?;
    let Registered::PoSt(registered) = reg else {
        return Err(KindError::Other(
            "registered proof is not a PoSt proof".into(),
        ));
    };
    let size = reg.sector_size();
    check_sector_size(req.sector_size, size)?;
    Ok((size, registered.as_v1_config()))
}

fn boxed<Tree: 'static + MerkleTreeTrait>(
    kind: FilecoinKind,
    size: SectorSize,
    cfg: PoStConfig,
    req: &ProofRequest,
    opts: crate::ParseOptions,
) -> Result<Box<dyn PartitionedProof>, KindError> {
    Ok(Box::new(FallbackPoStProof::<Tree>::new(
        kind, size, cfg, req, opts,
    )?))
}

impl<Tree: 'static + MerkleTreeTrait> FallbackPoStProof<Tree> {
    fn new(
        kind: FilecoinKind,
        size: SectorSize,
        cfg: PoStConfig,
        req: &ProofRequest,
        opts: crate::ParseOptions,
    ) -> Result<Self, KindError> {
        let invalid = |field, reason: String| KindError::InvalidField { field, reason };
        let randomness_bytes = bytes32("randomness", &req.randomness)?;
        let randomness: TreeDomain<Tree> =
            filecoin_proofs::as_safe_commitment(&randomness_bytes, "randomness")
                .map_err(|e| invalid("randomness", format!("not a field element: {e:#}")))?;
        let prover_id: TreeDomain<Tree> =
            filecoin_proofs::as_safe_commitment(&crate::prover_id(req.miner_id), "prover_id")
                .map_err(|e| invalid("miner_id", format!("prover id: {e:#}")))?;

        let vanilla_params = match cfg.typ {
            PoStType::Winning => filecoin_proofs::parameters::winning_post_setup_params(&cfg)
                .map_err(|e| KindError::Other(format!("winning post setup: {e:#}")))?,
            PoStType::Window => filecoin_proofs::parameters::window_post_setup_params(&cfg),
        };
        let vanilla_params = <FallbackPoSt<'_, Tree> as ProofScheme<'_>>::setup(&vanilla_params)
            .map_err(|e| KindError::Other(format!("post public parameters: {e:#}")))?;

        let sectors = decode_sector_proofs::<Tree>(&req.vanilla_proofs, &cfg, size)?;
        let ours: Vec<PublicSector<TreeDomain<Tree>>> = sectors
            .iter()
            .map(|p| PublicSector {
                id: p.sector_id,
                comm_r: p.comm_r,
            })
            .collect();

        let (vanilla, pub_inputs, partition_k) = match cfg.typ {
            PoStType::Winning => {
                if sectors.len() != cfg.sector_count {
                    return Err(invalid(
                        "vanilla_proofs",
                        format!(
                            "{} sector proofs, WinningPoSt takes {}",
                            sectors.len(),
                            cfg.sector_count
                        ),
                    ));
                }
                let one_sector = fallback::PublicInputs {
                    randomness,
                    prover_id,
                    sectors: ours.clone(),
                    k: None,
                };
                let vanilla = if opts.fake_ok {
                    partition::warn_fake(kind, size);
                    // One sector: its count is checked just above.
                    unchecked_winning(&sectors[0], vanilla_params.sector_count)
                } else {
                    let mut partitions = crate::guard("vanilla_proofs", || {
                        filecoin_proofs::partition_vanilla_proofs(
                            &cfg,
                            &vanilla_params,
                            &one_sector,
                            1,
                            &sectors,
                        )
                    })?
                    .map_err(|e| {
                        invalid(
                            "vanilla_proofs",
                            format!("do not verify against randomness and miner_id: {e:#}"),
                        )
                    })?;
                    partitions
                        .pop()
                        .ok_or_else(|| invalid("vanilla_proofs", "no partition".into()))?
                };
                // As verify_winning_post: the sector repeated once per circuit "sector".
                let repeated = ours
                    .iter()
                    .cycle()
                    .take(vanilla_params.sector_count)
                    .cloned()
                    .collect();
                (
                    vanilla,
                    fallback::PublicInputs {
                        randomness,
                        prover_id,
                        sectors: repeated,
                        k: None,
                    },
                    0,
                )
            }
            PoStType::Window => {
                if sectors.len() > cfg.sector_count {
                    return Err(invalid(
                        "vanilla_proofs",
                        format!(
                            "{} sector proofs, one {size} WindowPoSt partition holds at most {}",
                            sectors.len(),
                            cfg.sector_count
                        ),
                    ));
                }
                let mut ids: Vec<u64> = ours.iter().map(|s| u64::from(s.id)).collect();
                ids.sort_unstable();
                if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
                    return Err(invalid(
                        "vanilla_proofs",
                        format!("sector {} appears twice", w[0]),
                    ));
                }
                let k = req.partition_index as usize;
                let partition_inputs = fallback::PublicInputs {
                    randomness,
                    prover_id,
                    sectors: ours.clone(),
                    k: Some(k),
                };
                let vanilla = if opts.fake_ok {
                    partition::warn_fake(kind, size);
                    Ok(unchecked_partition(&sectors, cfg.sector_count))
                } else {
                    crate::guard("vanilla_proofs", || {
                        filecoin_proofs::single_partition_vanilla_proofs(
                            &cfg,
                            &vanilla_params,
                            &partition_inputs,
                            &sectors,
                        )
                    })?
                }
                .map_err(|e| {
                    invalid(
                        "vanilla_proofs",
                        format!(
                            "do not verify against randomness, miner_id and partition_index: {e:#}"
                        ),
                    )
                })?;
                let (placed, partition_k) = if cfg.api_version == ApiVersion::V1_2_0 {
                    (ours, 0)
                } else {
                    let before = k
                        .checked_mul(cfg.sector_count)
                        .filter(|n| *n <= MAX_V1_0_SECTORS_BEFORE);
                    let before = before.ok_or_else(|| {
                        invalid(
                            "partition_index",
                            format!("{k} is beyond any deadline's partitions"),
                        )
                    })?;
                    let filler = std::iter::repeat_n(ours[0].clone(), before);
                    (filler.chain(ours).collect(), k)
                };
                (
                    vanilla,
                    fallback::PublicInputs {
                        randomness,
                        prover_id,
                        sectors: placed,
                        k: None,
                    },
                    partition_k,
                )
            }
        };
        let params_file = crate::params_file_name(kind, size)?;
        Ok(FallbackPoStProof {
            kind,
            size,
            params_file,
            vanilla_params,
            pub_inputs,
            partition_k,
            vanilla,
            fake: opts.fake_ok,
        })
    }

    /// The partition's circuit, as `FallbackPoStCompound::circuit` makes it.
    fn circuit(&self) -> Result<FallbackPoStCircuit<Tree>, KindError> {
        crate::guard("vanilla_proofs", || {
            <FallbackPoStCompound<Tree> as CompoundProof<FallbackPoSt<'_, Tree>, _>>::circuit(
                &self.pub_inputs,
                Default::default(),
                &self.vanilla,
                &self.vanilla_params,
                Some(self.partition_k),
            )
        })?
        .map_err(|e| partition::circuit_error(0, e))
    }

    /// `circuit` (this proof's) given as its sectors.
    fn sectors(&self, circuit: FallbackPoStCircuit<Tree>) -> Sectors<'_, Tree> {
        Sectors {
            circuit,
            vanilla: &self.vanilla,
            check_values: !self.fake,
        }
    }
}

/// The partition's vanilla proof as `single_partition_vanilla_proofs` lays out a
/// WindowPoSt one (the sectors' proofs in request order, the last repeated up to
/// `sector_count`), without its verification: for fake requests only.
fn unchecked_partition<Tree: 'static + MerkleTreeTrait>(
    sectors: &[FallbackPoStSectorProof<Tree>],
    sector_count: usize,
) -> VanillaProof<Tree> {
    let mut proofs: Vec<_> = sectors
        .iter()
        .flat_map(|s| s.vanilla_proof.sectors.iter().cloned())
        .collect();
    while let Some(last) = proofs.last().filter(|_| proofs.len() < sector_count) {
        proofs.push(last.clone());
    }
    fallback::Proof { sectors: proofs }
}

/// The WinningPoSt partition's vanilla proof as `partition_vanilla_proofs` lays it out
/// (the one sector's inclusion proofs unrolled into one-challenge "sectors", `circuit_sectors`
/// of them, the last repeated), without its verification: for fake requests only.
fn unchecked_winning<Tree: 'static + MerkleTreeTrait>(
    sector: &FallbackPoStSectorProof<Tree>,
    circuit_sectors: usize,
) -> VanillaProof<Tree> {
    let mut proofs: Vec<_> = sector
        .vanilla_proof
        .sectors
        .iter()
        .flat_map(|s| {
            s.inclusion_proofs.iter().map(|p| SectorProof {
                inclusion_proofs: vec![p.clone()],
                comm_c: s.comm_c,
                comm_r_last: s.comm_r_last,
            })
        })
        .collect();
    while let Some(last) = proofs.last().filter(|_| proofs.len() < circuit_sectors) {
        proofs.push(last.clone());
    }
    fallback::Proof { sectors: proofs }
}

/// Decodes the request's sector proofs, checking each one's shape.
fn decode_sector_proofs<Tree: 'static + MerkleTreeTrait>(
    raw: &[Vec<u8>],
    cfg: &PoStConfig,
    size: SectorSize,
) -> Result<Vec<FallbackPoStSectorProof<Tree>>, KindError> {
    let invalid = |reason: String| KindError::InvalidField {
        field: "vanilla_proofs",
        reason,
    };
    if raw.is_empty() {
        return Err(invalid(
            "empty: expected one FallbackPoStSectorProof per sector".into(),
        ));
    }
    // A WinningPoSt sector proof holds all 66 challenges; a WindowPoSt one 10.
    let challenges = match cfg.typ {
        PoStType::Winning => cfg.challenge_count,
        PoStType::Window => cfg.challenge_count,
    };
    let mut out = Vec::with_capacity(raw.len());
    for (i, bytes) in raw.iter().enumerate() {
        // Same encoding as filecoin-proofs-api (bincode 1, fixed-width integers), but
        // trailing bytes are an error: they mean the payload is something else.
        let proof: FallbackPoStSectorProof<Tree> = bincode::options()
            .with_fixint_encoding()
            .reject_trailing_bytes()
            .with_limit(bytes.len() as u64 * 4 + 4096)
            .deserialize(bytes)
            .map_err(|e| {
                invalid(format!(
                    "entry {i} is not a bincode FallbackPoStSectorProof of a {size} sector: {e}"
                ))
            })?;
        let n_sectors = proof.vanilla_proof.sectors.len();
        let n_challenges = proof
            .vanilla_proof
            .sectors
            .first()
            .map_or(0, |s| s.inclusion_proofs().len());
        if n_sectors != 1 || n_challenges != challenges {
            return Err(invalid(format!(
                "entry {i} (sector {}) holds {n_sectors} sector proofs with {n_challenges} challenges, \
                 expected 1 with {challenges}: a vanilla proof of another kind or size?",
                u64::from(proof.sector_id)
            )));
        }
        out.push(proof);
    }
    Ok(out)
}

impl<Tree: 'static + MerkleTreeTrait> PartitionedProof for FallbackPoStProof<Tree> {
    fn circuit_id(&self) -> String {
        circuit_id(self.kind, self.size)
    }

    fn params_path(&self, param_dir: &Path) -> PathBuf {
        param_dir.join(&self.params_file)
    }

    fn num_partitions(&self) -> usize {
        1
    }

    fn partition_host_bytes(&self, synth: &Synthesizer) -> usize {
        crate::params::CircuitShape::of(self.kind, self.size).admission_bytes(synth)
    }

    fn synthesize(
        &self,
        synth: &Synthesizer,
        partition_idx: usize,
    ) -> Result<Assignment, KindError> {
        if partition_idx != 0 {
            return Err(partition::circuit_error(
                partition_idx,
                "a PoSt request has one partition",
            ));
        }
        let circuit = self.circuit()?;
        let sectors = self.sectors(circuit.clone());
        partition::synthesize_parts(synth, &self.circuit_id(), circuit, &sectors, partition_idx)
    }

    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError> {
        if partition_idx != 0 {
            return Err(KindError::Other(format!(
                "a PoSt request has one partition, not {}",
                partition_idx + 1
            )));
        }
        <FallbackPoStCompound<Tree> as CompoundProof<
            FallbackPoSt<'_, Tree>,
            FallbackPoStCircuit<Tree>,
        >>::generate_public_inputs(
            &self.pub_inputs,
            &self.vanilla_params,
            Some(self.partition_k),
        )
        .map_err(|e| KindError::Other(format!("post public inputs: {e:#}")))
    }

    fn assemble_and_verify(
        &self,
        proofs: &[Proof],
        vk: &VerifyingKey,
    ) -> Result<Vec<u8>, KindError> {
        if self.fake {
            return partition::assemble_fake(&self.circuit_id(), proofs, 1);
        }
        let inputs = vec![self.public_inputs(0)?];
        partition::assemble_and_verify(proofs, &inputs, vk)
    }
}

/// A PoSt partition as its sectors: part `j` is the circuit of sector `j` alone, the
/// prefix the circuit of none (ONE alone). `FallbackPoStCircuit` synthesizes its sectors
/// one after another, each the same gadget code over another sector, so the shape cache
/// records a 32 GiB WindowPoSt partition (2,349 sectors, 125,305,057 rows) from one sector
/// instead of walking the whole circuit on one thread (more than 5 minutes on the H200
/// host), and computes later witnesses sector by sector on the rayon pool, each through
/// its witness-only mirror (`native/post_sector.rs`). WinningPoSt's circuit is its one
/// sector's 66 challenges as 66 one-challenge sectors: 66 parts.
struct Sectors<'a, Tree: 'static + MerkleTreeTrait> {
    circuit: FallbackPoStCircuit<Tree>,
    /// The vanilla proof `circuit` was made from, sector for sector: the mirrors' paths.
    vanilla: &'a VanillaProof<Tree>,
    /// The vanilla proof was verified: the mirrors check their hashes against it.
    check_values: bool,
}

/// One piece of a PoSt partition given as its sectors: the real circuit of one sector or
/// of none (shapes are recorded from these), or one sector's witness-only mirror, which
/// only witness-only systems run.
enum SectorPiece<Tree: 'static + MerkleTreeTrait> {
    Circuit(FallbackPoStCircuit<Tree>),
    Native(NativeSector<Tree>),
}

impl<Tree: 'static + MerkleTreeTrait> bellperson::Circuit<Scalar> for SectorPiece<Tree> {
    fn synthesize<CS: bellperson::ConstraintSystem<Scalar>>(
        self,
        cs: &mut CS,
    ) -> Result<(), bellperson::SynthesisError> {
        match self {
            SectorPiece::Circuit(circuit) => circuit.synthesize(cs),
            SectorPiece::Native(sector) => sector.synthesize(cs),
        }
    }
}

impl<Tree: 'static + MerkleTreeTrait> Parts for Sectors<'_, Tree> {
    type Part = SectorPiece<Tree>;

    fn n_parts(&self) -> usize {
        self.circuit.sectors.len()
    }

    fn part(&self, j: usize) -> Result<SectorPiece<Tree>, SynthesisError> {
        Ok(SectorPiece::Circuit(FallbackPoStCircuit {
            prover_id: self.circuit.prover_id,
            sectors: vec![self.sector(j)?.clone()],
        }))
    }

    /// Sector `j`'s witness-only mirror: its Poseidon hashes build no linear combination,
    /// the rest runs the real gadgets (`native/post_sector.rs`).
    fn witness_part(&self, j: usize) -> Result<SectorPiece<Tree>, SynthesisError> {
        let sector = self.sector(j)?;
        let proof = self
            .vanilla
            .sectors
            .get(j)
            .ok_or_else(|| SynthesisError::Part {
                part: j,
                reason: format!(
                    "a vanilla proof of {} sectors for a circuit of {}",
                    self.vanilla.sectors.len(),
                    self.circuit.sectors.len()
                ),
            })?;
        NativeSector::new(sector, proof, self.check_values)
            .map(SectorPiece::Native)
            .map_err(|e| SynthesisError::Part {
                part: j,
                reason: e.to_string(),
            })
    }

    fn prefix(&self) -> Result<Option<SectorPiece<Tree>>, SynthesisError> {
        Ok(Some(SectorPiece::Circuit(FallbackPoStCircuit {
            prover_id: self.circuit.prover_id,
            sectors: Vec::new(),
        })))
    }
}

impl<Tree: 'static + MerkleTreeTrait> Sectors<'_, Tree> {
    /// Sector `j` of the circuit.
    fn sector(&self, j: usize) -> Result<&Sector<Tree>, SynthesisError> {
        self.circuit
            .sectors
            .get(j)
            .ok_or_else(|| SynthesisError::Part {
                part: j,
                reason: format!("a partition of {} sectors", self.circuit.sectors.len()),
            })
    }
}
