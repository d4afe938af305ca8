//! Fake SnapDeals requests: one bincode update `PartitionProof` per partition (16 at
//! 32 GiB, 86 challenges each), as filecoin-proofs-api's `generate_partition_proofs`
//! returns them (storage-proofs-update `vanilla.rs`). Random except for what the update
//! circuit asserts in Rust (`circuit.rs`), which would otherwise panic in synthesis:
//! - each challenge's `leaf_r_new == leaf_r_old + leaf_d_new · rho(phi, high)`, with the
//!   challenges `Challenges::new(sector_nodes, comm_r_new, k)` derives (the circuit
//!   re-derives them from `comm_r_new`), `phi = phi(comm_d_new, comm_r_old)` and `high`
//!   the top `h` bits of the challenge;
//! - the same top `partition_bit_len` tree-D siblings for every challenge of a partition.

use bincode::Options as _;
use blstrs::Scalar as Fr;
use cuzk_groth16::ProofRequest;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{MerkleTreeTrait, SectorUpdateConfig};
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
use storage_proofs_update::constants::{TreeDDomain, TreeRDomain, TreeRHasher};
use storage_proofs_update::{phi, rho, ChallengeProof, Challenges, PartitionProof, PublicParams};

use super::{
    item_rng, levels, par_map, random_domain, random_domains, PayloadShape, TreeShape,
    FAKE_MINER_ID, FAKE_SECTOR_NUMBER,
};
use crate::registry::{FilecoinKind, Registered, SectorSize};
use crate::testgen::TestgenError;

/// Random streams of the SnapDeals generator.
const PART_PUBLIC: u64 = 21;
const PART_PARTITION: u64 = 22;

/// The commitments of a fake update.
struct Commitments {
    comm_c: TreeRDomain,
    root_r_old: TreeRDomain,
    root_r_new: TreeRDomain,
    comm_r_new: TreeRDomain,
    comm_d_new: TreeDDomain,
    phi: TreeRDomain,
    h: usize,
}

/// A fake SnapDeals request at `size`.
pub(super) fn request(size: SectorSize, seed: u64) -> Result<ProofRequest, TestgenError> {
    let abi = Registered::default_abi(FilecoinKind::SnapDeals, size);
    let registered = crate::testgen::sector::update_proof(abi)?;
    let config = SectorUpdateConfig::from_porep_config(&registered.as_v1_config());
    let mut rng = item_rng(seed, PART_PUBLIC, 0);
    let comm_c: TreeRDomain = random_domain(&mut rng);
    let root_r_old: TreeRDomain = random_domain(&mut rng);
    let root_r_new: TreeRDomain = random_domain(&mut rng);
    let comm_d_new: TreeDDomain = random_domain(&mut rng);
    // As the sealer and the updater compute them: comm_r = Poseidon2(comm_c, root_r).
    let comm_r_old = <TreeRHasher as Hasher>::Function::hash2(&comm_c, &root_r_old);
    let comm_r_new = <TreeRHasher as Hasher>::Function::hash2(&comm_c, &root_r_new);
    let commitments = Commitments {
        comm_c,
        root_r_old,
        root_r_new,
        comm_r_new,
        comm_d_new,
        phi: phi(&comm_d_new, &comm_r_old),
        h: config.h,
    };
    let partitions = with_tree!(size, partition_proofs, size, &commitments, seed)?;
    Ok(ProofRequest {
        sector_size: size.bytes(),
        registered_proof: abi,
        vanilla_proofs: partitions,
        sector_number: FAKE_SECTOR_NUMBER,
        miner_id: FAKE_MINER_ID,
        comm_r_old: comm_r_old.into_bytes(),
        comm_r_new: comm_r_new.into_bytes(),
        comm_d_new: comm_d_new.into_bytes(),
        ..ProofRequest::default()
    })
}

/// One bincode `PartitionProof` per partition.
fn partition_proofs<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    size: SectorSize,
    c: &Commitments,
    seed: u64,
) -> Result<Vec<Vec<u8>>, TestgenError> {
    let pp = PublicParams::from_sector_size(size.bytes());
    let tree = TreeShape::of(size);
    let encoded = par_map(pp.partition_count, |k| {
        let mut rng = item_rng(seed, PART_PARTITION, k as u64);
        let apex_leafs: Vec<TreeDDomain> = random_domains(&mut rng, pp.apex_leaf_count);
        // The tree-D levels above the apex tree are the partition's path: one per partition.
        let partition_path: Vec<TreeDDomain> = random_domains(&mut rng, pp.partition_bit_len);
        let below_partition = pp.challenge_bit_len - pp.partition_bit_len;
        let challenge_proofs = Challenges::new(pp.sector_nodes, c.comm_r_new, k)
            .map(|challenge| {
                let node = challenge as usize;
                let path_d: Vec<(Vec<TreeDDomain>, usize)> = (0..pp.challenge_bit_len)
                    .map(|level| {
                        let sibling = match level.checked_sub(below_partition) {
                            Some(i) => partition_path[i],
                            None => random_domain(&mut rng),
                        };
                        (vec![sibling], (node >> level) & 1)
                    })
                    .collect();
                let leaf_d_new: TreeDDomain = random_domain(&mut rng);
                let leaf_r_old: TreeRDomain = random_domain(&mut rng);
                // vanilla.rs `Rhos`: high = the top h bits of the node index.
                let high = (node >> (pp.challenge_bit_len - c.h)) as u32;
                let (old, data): (Fr, Fr) = (leaf_r_old.into(), leaf_d_new.into());
                let leaf_r_new = old + data * rho(&c.phi, high);
                ChallengeProof::<Tree> {
                    proof_r_old: MerkleProof::from_parts(
                        leaf_r_old,
                        c.root_r_old,
                        tree.path(node, &mut rng),
                    ),
                    proof_d_new: MerkleProof::from_parts(leaf_d_new, c.comm_d_new, path_d),
                    proof_r_new: MerkleProof::from_parts(
                        TreeRDomain::from(leaf_r_new),
                        c.root_r_new,
                        tree.path(node, &mut rng),
                    ),
                }
            })
            .collect();
        let proof = PartitionProof::<Tree> {
            comm_c: c.comm_c,
            apex_leafs,
            challenge_proofs,
        };
        // filecoin-proofs-api's encoding: bincode 1 with fixed-width integers.
        bincode::serialize(&proof)
            .map_err(|e| TestgenError::Encode(format!("fake update partition {k}: {e}")))
    });
    encoded.into_iter().collect()
}

/// The structure of a SnapDeals payload (one bincode partition proof per entry).
pub(super) fn shape(request: &ProofRequest) -> Result<PayloadShape, TestgenError> {
    let size = SectorSize::from_bytes(request.sector_size).ok_or_else(|| {
        TestgenError::Encode(format!("unknown sector size {}", request.sector_size))
    })?;
    with_tree!(size, partitions_shape, &request.vanilla_proofs)
}

fn partitions_shape<Tree: 'static + MerkleTreeTrait<Hasher = TreeRHasher>>(
    raw: &[Vec<u8>],
) -> Result<PayloadShape, TestgenError> {
    let mut shapes = Vec::new();
    let mut per_partition = Vec::new();
    for (k, bytes) in raw.iter().enumerate() {
        let proof: PartitionProof<Tree> = bincode::options()
            .with_fixint_encoding()
            .deserialize(bytes)
            .map_err(|e| TestgenError::Encode(format!("partition proof {k}: {e}")))?;
        per_partition.push(proof.challenge_proofs.len());
        for ch in &proof.challenge_proofs {
            let paths = vec![
                ("tree_r_old".to_string(), levels(&ch.proof_r_old.path())),
                ("tree_d_new".to_string(), levels(&ch.proof_d_new.path())),
                ("tree_r_new".to_string(), levels(&ch.proof_r_new.path())),
            ];
            let counts = vec![("apex_leafs".to_string(), proof.apex_leafs.len())];
            shapes.push((paths, counts));
        }
    }
    let mut all = shapes.into_iter();
    let (paths, counts) = all.next().unwrap_or_default();
    let uniform = all.all(|(p, c)| p == paths && c == counts)
        && per_partition
            .iter()
            .all(|n| Some(n) == per_partition.first());
    Ok(PayloadShape {
        partitions: raw.len(),
        per_partition: per_partition.first().copied().unwrap_or(0),
        paths,
        counts,
        uniform,
    })
}
