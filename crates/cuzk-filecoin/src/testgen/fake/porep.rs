//! Fake PoRep C2 requests: a `SealCommitPhase1Output` of the true shape in the C1 wrapper
//! JSON (`{"SectorNum","Phase1Out","SectorSize"}` plus a `Fake` note) that
//! `crates/cuzk-filecoin/src/porep.rs` parses. Per challenge (storage-proofs-porep
//! `stacked/vanilla/params.rs`): a tree-D path (SHA-256, binary), a tree-R path, the
//! challenged node's column and 6 + 8 parents' columns (one row per layer, each with a
//! tree-C path), one labeling proof per layer and the encoding proof (37 parents each).

use base64::Engine as _;
use cuzk_groth16::ProofRequest;
use filecoin_hashers::{Domain, HashFunction, Hasher};
use filecoin_proofs::{DefaultPieceDomain, DefaultPieceHasher, MerkleTreeTrait};
use filecoin_proofs_api::seal::{SealCommitPhase1Output, VanillaSealProof};
use filecoin_proofs_api::RegisteredSealProof;
use storage_proofs_core::drgraph::Graph;
use storage_proofs_core::merkle::{MerkleProof, MerkleProofTrait};
use storage_proofs_core::proof::ProofScheme;
use storage_proofs_porep::stacked::{
    self, generate_replica_id, ColumnProof, EncodingProof, LabelingProof, ReplicaColumnProof,
    StackedDrg, TOTAL_PARENTS,
};

use super::{
    binary_path, item_rng, levels, par_map, random_bytes32, random_domain, random_domains,
    setup_error, PayloadShape, TreeShape, FAKE_MINER_ID, FAKE_NOTE, FAKE_SECTOR_NUMBER,
};
use crate::registry::{FilecoinKind, Registered, SectorSize};
use crate::testgen::TestgenError;

type TreeDomain<Tree> = <<Tree as MerkleTreeTrait>::Hasher as Hasher>::Domain;
type Challenge<Tree> = filecoin_proofs::VanillaSealProof<Tree>;
/// The vanilla proofs of a sector: partitions of challenges.
type Partitions<Tree> = Vec<Vec<Challenge<Tree>>>;

/// Random streams of the PoRep generator.
const PART_PUBLIC: u64 = 1;
const PART_CHALLENGE: u64 = 2;

/// The C1 wrapper JSON of a fake PoRep request at `size`.
pub(super) fn request(size: SectorSize, seed: u64) -> Result<ProofRequest, TestgenError> {
    let abi = Registered::default_abi(FilecoinKind::PoRep, size);
    let registered = crate::testgen::sector::seal_proof(abi)?;
    let (vanilla_proofs, public) = match size {
        SectorSize::S2KiB => {
            let (p, public) = vanilla::<filecoin_proofs::SectorShape2KiB>(registered, size, seed)?;
            (VanillaSealProof::StackedDrg2KiBV1(p), public)
        }
        SectorSize::S8MiB => {
            let (p, public) = vanilla::<filecoin_proofs::SectorShape8MiB>(registered, size, seed)?;
            (VanillaSealProof::StackedDrg8MiBV1(p), public)
        }
        SectorSize::S512MiB => {
            let (p, public) =
                vanilla::<filecoin_proofs::SectorShape512MiB>(registered, size, seed)?;
            (VanillaSealProof::StackedDrg512MiBV1(p), public)
        }
        SectorSize::S32GiB => {
            let (p, public) = vanilla::<filecoin_proofs::SectorShape32GiB>(registered, size, seed)?;
            (VanillaSealProof::StackedDrg32GiBV1(p), public)
        }
        SectorSize::S64GiB => {
            let (p, public) = vanilla::<filecoin_proofs::SectorShape64GiB>(registered, size, seed)?;
            (VanillaSealProof::StackedDrg64GiBV1(p), public)
        }
    };
    let c1 = SealCommitPhase1Output {
        registered_proof: registered,
        vanilla_proofs,
        comm_r: public.comm_r,
        comm_d: public.comm_d,
        replica_id: public.replica_id,
        seed: public.seed,
        ticket: public.ticket,
    };
    let c1_json = serde_json::to_vec(&c1)
        .map_err(|e| TestgenError::Encode(format!("fake C1 output: {e}")))?;
    let wrapper = serde_json::json!({
        "SectorNum": FAKE_SECTOR_NUMBER,
        "Phase1Out": base64::engine::general_purpose::STANDARD.encode(c1_json),
        "SectorSize": size.bytes(),
        "Fake": FAKE_NOTE,
    });
    Ok(ProofRequest {
        sector_size: size.bytes(),
        registered_proof: abi,
        vanilla_proof: wrapper.to_string().into_bytes(),
        sector_number: FAKE_SECTOR_NUMBER,
        miner_id: FAKE_MINER_ID,
        ..ProofRequest::default()
    })
}

/// What a C1 output says besides its vanilla proofs.
pub(super) struct C1Public {
    pub(super) comm_r: [u8; 32],
    pub(super) comm_d: [u8; 32],
    pub(super) replica_id: filecoin_proofs::DefaultTreeDomain,
    pub(super) seed: [u8; 32],
    pub(super) ticket: [u8; 32],
}

/// Fake vanilla proofs (partitions of challenges) for sectors of shape `Tree`, and the
/// public values they belong to.
pub(super) fn vanilla<Tree: 'static + MerkleTreeTrait>(
    registered: RegisteredSealProof,
    size: SectorSize,
    seed: u64,
) -> Result<(Partitions<Tree>, C1Public), TestgenError> {
    let porep_config = registered.as_v1_config();
    let setup = filecoin_proofs::parameters::setup_params(&porep_config)
        .map_err(setup_error("setup_params"))?;
    let pp = <StackedDrg<'_, Tree, DefaultPieceHasher> as ProofScheme<'_>>::setup(&setup)
        .map_err(setup_error("StackedDrg::setup"))?;

    let mut rng = item_rng(seed, PART_PUBLIC, 0);
    let (ticket, porep_seed) = (random_bytes32(&mut rng), random_bytes32(&mut rng));
    let comm_d: DefaultPieceDomain = random_domain(&mut rng);
    let comm_d_bytes = bytes32(&comm_d);
    let replica_id = generate_replica_id::<Tree::Hasher, _>(
        &crate::prover_id(FAKE_MINER_ID),
        FAKE_SECTOR_NUMBER,
        &ticket,
        comm_d_bytes,
        &porep_config.porep_id,
    );
    // One tree C and one tree R for the sector: every challenge opens the same roots.
    let comm_c: TreeDomain<Tree> = random_domain(&mut rng);
    let comm_r_last: TreeDomain<Tree> = random_domain(&mut rng);
    let comm_r = <Tree::Hasher as Hasher>::Function::hash2(&comm_c, &comm_r_last);
    let pub_inputs = stacked::PublicInputs::<TreeDomain<Tree>, DefaultPieceDomain> {
        replica_id,
        tau: Some(stacked::Tau { comm_d, comm_r }),
        k: None,
        seed: Some(porep_seed),
    };

    let nodes = size.bytes() as usize / 32;
    let partitions = usize::from(porep_config.partitions);
    let per_partition = pp.challenges.num_challenges_per_partition();
    let challenges: Vec<usize> = (0..partitions)
        .flat_map(|k| pub_inputs.challenges(&pp.challenges, nodes, Some(k)))
        .collect();
    if challenges.len() != partitions * per_partition {
        return Err(TestgenError::Encode(format!(
            "{} challenges derived for {partitions} partitions of {per_partition}",
            challenges.len()
        )));
    }
    let roots = Roots::<Tree> {
        comm_d,
        comm_c,
        comm_r_last,
    };
    let tree = TreeShape::of(size);
    let proofs = par_map(challenges.len(), |i| {
        let mut rng = item_rng(seed, PART_CHALLENGE, i as u64);
        challenge_proof(&pp, &tree, &roots, challenges[i], nodes, &mut rng)
    })
    .into_iter()
    .collect::<Result<Vec<_>, _>>()?;
    let mut proofs = proofs.into_iter();
    let vanilla: Partitions<Tree> = (0..partitions)
        .map(|_| proofs.by_ref().take(per_partition).collect())
        .collect();

    let replica_id = filecoin_proofs::DefaultTreeDomain::try_from_bytes(&replica_id.into_bytes())
        .map_err(|e| TestgenError::Encode(format!("replica id: {e:#}")))?;
    let public = C1Public {
        comm_r: bytes32(&comm_r),
        comm_d: comm_d_bytes,
        replica_id,
        seed: porep_seed,
        ticket,
    };
    Ok((vanilla, public))
}

/// One fake challenge proof of a sector of `size` (random values of the true shape), for
/// circuits whose structure alone is used: the blank PoRep circuit given as parts
/// (`testgen/blank.rs`) is made of copies of its one-challenge circuit.
pub(crate) fn structure_challenge<Tree: 'static + MerkleTreeTrait>(
    pp: &stacked::PublicParams<Tree>,
    size: SectorSize,
) -> Result<Challenge<Tree>, TestgenError> {
    let mut rng = item_rng(0, PART_CHALLENGE, 0);
    let roots = Roots::<Tree> {
        comm_d: random_domain(&mut rng),
        comm_c: random_domain(&mut rng),
        comm_r_last: random_domain(&mut rng),
    };
    let nodes = size.bytes() as usize / 32;
    challenge_proof(pp, &TreeShape::of(size), &roots, 0, nodes, &mut rng)
}

/// The roots every challenge of the sector opens.
struct Roots<Tree: MerkleTreeTrait> {
    comm_d: DefaultPieceDomain,
    comm_c: TreeDomain<Tree>,
    comm_r_last: TreeDomain<Tree>,
}

/// The vanilla proof of one challenged node `c`.
fn challenge_proof<Tree: 'static + MerkleTreeTrait>(
    pp: &stacked::PublicParams<Tree>,
    tree: &TreeShape,
    roots: &Roots<Tree>,
    c: usize,
    nodes: usize,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> Result<Challenge<Tree>, TestgenError> {
    let graph_error = |e: anyhow::Error| TestgenError::Filecoin {
        step: "stacked graph parents",
        message: format!("{e:#}"),
    };
    let layers = pp.num_layers;
    let mut drg = vec![0u32; pp.graph.base_graph().degree()];
    pp.graph.base_parents(c, &mut drg).map_err(graph_error)?;
    let mut exp = vec![0u32; pp.graph.expansion_degree()];
    pp.graph
        .expanded_parents(c, &mut exp)
        .map_err(graph_error)?;

    let column = |node: u32, rng: &mut rand_chacha::ChaCha8Rng| {
        let rows: Vec<TreeDomain<Tree>> = random_domains(rng, layers);
        let leaf = random_domain(rng);
        let path = tree.path(node as usize, rng);
        ColumnProof::new(
            node,
            rows,
            MerkleProof::from_parts(leaf, roots.comm_c, path),
        )
    };
    let c_x = column(c as u32, rng);
    let drg_parents = drg.iter().map(|p| column(*p, rng)).collect();
    let exp_parents = exp.iter().map(|p| column(*p, rng)).collect();

    // As the prover does: layer 1 labels from the 6 base parents, the others from 6 + 8,
    // each list repeated to TOTAL_PARENTS (37) entries.
    let labeling_parents = |layer: usize, rng: &mut rand_chacha::ChaCha8Rng| {
        let distinct = if layer == 1 {
            drg.len()
        } else {
            drg.len() + exp.len()
        };
        let own: Vec<TreeDomain<Tree>> = random_domains(rng, distinct);
        own.iter()
            .cycle()
            .take(TOTAL_PARENTS)
            .copied()
            .collect::<Vec<_>>()
    };
    let mut labeling_proofs = Vec::with_capacity(layers);
    let mut last_parents = Vec::new();
    for layer in 1..=layers {
        let parents = labeling_parents(layer, rng);
        labeling_proofs.push(LabelingProof::new(layer as u32, c as u64, parents.clone()));
        last_parents = parents;
    }
    let encoding_proof = EncodingProof::new(layers as u32, c as u64, last_parents);

    let tree_d_levels = nodes.trailing_zeros() as usize;
    let data_leaf: DefaultPieceDomain = random_domain(rng);
    let comm_d_proofs =
        MerkleProof::from_parts(data_leaf, roots.comm_d, binary_path(tree_d_levels, c, rng));
    let replica_leaf = random_domain(rng);
    let comm_r_last_proof =
        MerkleProof::from_parts(replica_leaf, roots.comm_r_last, tree.path(c, rng));
    Ok(stacked::Proof {
        comm_d_proofs,
        comm_r_last_proof,
        replica_column_proofs: ReplicaColumnProof {
            c_x,
            drg_parents,
            exp_parents,
        },
        labeling_proofs,
        encoding_proof,
    })
}

fn bytes32<D: Domain>(d: &D) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The structure of a PoRep C2 payload (the C1 wrapper JSON).
pub(super) fn shape(request: &ProofRequest) -> Result<PayloadShape, TestgenError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| TestgenError::Encode(format!("{what}: {e}"));
    let wrapper: serde_json::Value =
        serde_json::from_slice(&request.vanilla_proof).map_err(|e| bad("C1 wrapper", &e))?;
    let phase1 = wrapper["Phase1Out"]
        .as_str()
        .ok_or_else(|| TestgenError::Encode("C1 wrapper without Phase1Out".into()))?;
    let phase1 = base64::engine::general_purpose::STANDARD
        .decode(phase1.trim())
        .map_err(|e| bad("Phase1Out", &e))?;
    let c1: SealCommitPhase1Output =
        serde_json::from_slice(&phase1).map_err(|e| bad("Phase1Out", &e))?;
    Ok(match &c1.vanilla_proofs {
        VanillaSealProof::StackedDrg2KiBV1(p) => proofs_shape(p),
        VanillaSealProof::StackedDrg8MiBV1(p) => proofs_shape(p),
        VanillaSealProof::StackedDrg512MiBV1(p) => proofs_shape(p),
        VanillaSealProof::StackedDrg32GiBV1(p) => proofs_shape(p),
        VanillaSealProof::StackedDrg64GiBV1(p) => proofs_shape(p),
    })
}

/// The structure of PoRep vanilla proofs (partitions of challenges).
pub(super) fn proofs_shape<Tree: 'static + MerkleTreeTrait>(
    partitions: &[Vec<Challenge<Tree>>],
) -> PayloadShape {
    let mut all = partitions.iter().flatten().map(challenge_shape);
    let (paths, counts) = all.next().unwrap_or_default();
    let uniform = all.all(|(p, c)| p == paths && c == counts)
        && partitions.iter().all(|p| p.len() == partitions[0].len());
    PayloadShape {
        partitions: partitions.len(),
        per_partition: partitions.first().map_or(0, Vec::len),
        paths,
        counts,
        uniform,
    }
}

type Shape = (Vec<(String, Vec<usize>)>, Vec<(String, usize)>);

fn challenge_shape<Tree: 'static + MerkleTreeTrait>(p: &Challenge<Tree>) -> Shape {
    let cols = &p.replica_column_proofs;
    // A column's rows and tree-C path and the labeling parents are private fields: read
    // them from the serde form.
    let len = |v: serde_json::Value, key: &str| v[key].as_array().map_or(0, Vec::len);
    let c_x = serde_json::to_value(&cols.c_x).unwrap_or_default();
    let rows = c_x["column"]["rows"].as_array().map_or(0, Vec::len);
    let tree_c = serde_json::from_value::<
        MerkleProof<Tree::Hasher, Tree::Arity, Tree::SubTreeArity, Tree::TopTreeArity>,
    >(c_x["inclusion_proof"].clone())
    .map_or_else(|_| Vec::new(), |p| levels(&p.path()));
    let labeling_parents = p
        .labeling_proofs
        .iter()
        .map(|l| serde_json::to_value(l).map_or(0, |v| len(v, "parents")))
        .max()
        .unwrap_or(0);
    let encoding_parents = serde_json::to_value(&p.encoding_proof).map_or(0, |v| len(v, "parents"));
    let paths = vec![
        ("tree_d".to_string(), levels(&p.comm_d_proofs.path())),
        ("tree_r".to_string(), levels(&p.comm_r_last_proof.path())),
        ("tree_c".to_string(), tree_c),
    ];
    let counts = vec![
        ("drg_parents".to_string(), cols.drg_parents.len()),
        ("exp_parents".to_string(), cols.exp_parents.len()),
        ("column_rows".to_string(), rows),
        ("labeling_proofs".to_string(), p.labeling_proofs.len()),
        ("labeling_parents".to_string(), labeling_parents),
        ("encoding_parents".to_string(), encoding_parents),
    ];
    (paths, counts)
}
