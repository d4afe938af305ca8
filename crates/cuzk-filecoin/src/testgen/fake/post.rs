//! Fake PoSt requests. WindowPoSt: one full partition (`sector_count` sectors: 2,349 at
//! 32 GiB), each sector a bincode `FallbackPoStSectorProof` as filecoin-proofs-api's
//! `generate_single_vanilla_proof` returns it, with `challenge_count` (10) tree-R
//! inclusion proofs at the leaves the verifier derives from the randomness and sector id
//! (storage-proofs-post `fallback/vanilla.rs`). WinningPoSt: the same with its own
//! configuration, one sector (`sector_count` 1) with 66 inclusion proofs, at the leaves
//! filecoin-proofs' `generate_fallback_sector_challenges` derives for sector index 0; the
//! parser unrolls them into the circuit's 66 one-challenge "sectors" (#29).

use bincode::Options as _;
use cuzk_groth16::ProofRequest;
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::{FallbackPoStSectorProof, MerkleTreeTrait, PoStConfig};
use filecoin_proofs_api::SectorId;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
use storage_proofs_post::fallback::{self, SectorProof};

use super::{
    item_rng, levels, par_map, random_bytes32, random_domain, setup_error, PayloadShape, TreeShape,
    FAKE_MINER_ID, FAKE_SECTOR_NUMBER,
};
use crate::registry::{FilecoinKind, Registered, SectorSize};
use crate::testgen::TestgenError;

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;

/// Random streams of the PoSt generator.
const PART_PUBLIC: u64 = 11;
const PART_SECTOR: u64 = 12;

/// A fake WindowPoSt (partition 0) or WinningPoSt request of `kind` at `size`.
pub(super) fn request(
    kind: FilecoinKind,
    size: SectorSize,
    seed: u64,
) -> Result<ProofRequest, TestgenError> {
    let abi = Registered::default_abi(kind, size);
    let registered = crate::testgen::sector::post_proof(kind, abi)?;
    let cfg = registered.as_v1_config();
    let mut rng = item_rng(seed, PART_PUBLIC, 0);
    let randomness = random_bytes32(&mut rng);
    let sectors = with_tree!(size, sector_proofs, size, &cfg, randomness, seed)?;
    Ok(ProofRequest {
        sector_size: size.bytes(),
        registered_proof: abi,
        vanilla_proofs: sectors,
        sector_number: FAKE_SECTOR_NUMBER,
        miner_id: FAKE_MINER_ID,
        randomness: randomness.to_vec(),
        partition_index: 0,
        ..ProofRequest::default()
    })
}

/// `cfg.sector_count` bincode `FallbackPoStSectorProof`s, sectors numbered from
/// [`FAKE_SECTOR_NUMBER`].
fn sector_proofs<Tree: 'static + MerkleTreeTrait>(
    size: SectorSize,
    cfg: &PoStConfig,
    randomness: [u8; 32],
    seed: u64,
) -> Result<Vec<Vec<u8>>, TestgenError> {
    let randomness_domain: TreeDomain<Tree> =
        filecoin_proofs::as_safe_commitment(&randomness, "randomness")
            .map_err(setup_error("as_safe_commitment"))?;
    let pub_params = fallback::PublicParams {
        sector_size: size.bytes(),
        challenge_count: cfg.challenge_count,
        sector_count: cfg.sector_count,
        api_version: cfg.api_version,
    };
    let tree = TreeShape::of(size);
    let encoded = par_map(cfg.sector_count, |i| {
        let mut rng = item_rng(seed, PART_SECTOR, i as u64);
        let sector_id = FAKE_SECTOR_NUMBER + i as u64;
        let comm_c: TreeDomain<Tree> = random_domain(&mut rng);
        let comm_r_last: TreeDomain<Tree> = random_domain(&mut rng);
        let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
        let inclusion_proofs = (0..cfg.challenge_count)
            .map(|n| {
                let challenge_index =
                    fallback::get_challenge_index(cfg.api_version, i, cfg.challenge_count, n);
                let leaf = fallback::generate_leaf_challenge(
                    &pub_params,
                    randomness_domain,
                    sector_id,
                    challenge_index,
                ) as usize;
                let value = random_domain(&mut rng);
                MerkleProof::from_parts(value, comm_r_last, tree.path(leaf, &mut rng))
            })
            .collect();
        let proof = FallbackPoStSectorProof::<Tree> {
            sector_id: SectorId::from(sector_id),
            comm_r,
            vanilla_proof: fallback::Proof {
                sectors: vec![SectorProof {
                    inclusion_proofs,
                    comm_c,
                    comm_r_last,
                }],
            },
        };
        // filecoin-proofs-api's encoding: bincode 1 with fixed-width integers.
        bincode::serialize(&proof)
            .map_err(|e| TestgenError::Encode(format!("fake sector {sector_id}: {e}")))
    });
    encoded.into_iter().collect()
}

/// The structure of a PoSt payload (one bincode sector proof per entry).
pub(super) fn shape(request: &ProofRequest) -> Result<PayloadShape, TestgenError> {
    let size = SectorSize::from_bytes(request.sector_size).ok_or_else(|| {
        TestgenError::Encode(format!("unknown sector size {}", request.sector_size))
    })?;
    with_tree!(size, sectors_shape, &request.vanilla_proofs)
}

fn sectors_shape<Tree: 'static + MerkleTreeTrait>(
    raw: &[Vec<u8>],
) -> Result<PayloadShape, TestgenError> {
    let mut shapes = Vec::with_capacity(raw.len());
    for (i, bytes) in raw.iter().enumerate() {
        let proof: FallbackPoStSectorProof<Tree> = bincode::options()
            .with_fixint_encoding()
            .deserialize(bytes)
            .map_err(|e| TestgenError::Encode(format!("sector proof {i}: {e}")))?;
        let sectors = &proof.vanilla_proof.sectors;
        let inclusion = sectors.first().map_or(&[][..], |s| &s.inclusion_proofs[..]);
        let paths = inclusion
            .first()
            .map(|p| vec![("tree_r".to_string(), levels(&p.path()))])
            .unwrap_or_default();
        let uniform = inclusion
            .iter()
            .all(|p| Some(&levels(&p.path())) == paths.first().map(|(_, l)| l));
        let counts = vec![
            ("sector_proofs".to_string(), sectors.len()),
            ("challenges".to_string(), inclusion.len()),
        ];
        shapes.push((paths, counts, uniform));
    }
    let mut all = shapes.into_iter();
    let (paths, counts, mut uniform) = all.next().unwrap_or_default();
    for (p, c, u) in all {
        uniform &= u && p == paths && c == counts;
    }
    Ok(PayloadShape {
        partitions: 1,
        per_partition: raw.len(),
        paths,
        counts,
        uniform,
    })
}
