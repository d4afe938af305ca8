//! The one-challenge PoRep circuit of storage-proofs-porep 19.1 (`StackedCircuit` over
//! one challenge's vanilla proof: the prefix of `stacked/circuit/proof.rs`, then
//! `params.rs`' `Proof::synthesize`), mirrored for the witness only. Its SHA-256 parts —
//! the eleven labels (`create_label.rs`) and tree D's inclusion path (`Sha256Hasher`'s
//! `hash_multi_leaf_circuit`) — go through [`super::sha256`]; its Poseidon parts — the
//! prefix's `comm_r` check, the column hashes and the inclusion paths in trees C and R —
//! through [`super::poseidon`] and [`super::por`]; everything else (the prefix's bits,
//! `insert`, `encode`, `UInt64`, the packed inputs) runs the real public gadgets on the same
//! system, so it is exact by construction. The result allocates what the real circuit
//! allocates, in the same order with the same values, and counts its constraints: a
//! witness-only system cannot tell them apart (`native/tests.rs`), and nothing else may
//! run it.
//!
//! On a request whose vanilla proofs were verified (`check_values`), the mirror's hashes
//! are also checked where the proof states them: the tree-D root is comm_d, each layer's
//! label is the challenged column's row, `H(comm_c ‖ comm_r_last)` is comm_r and the roots
//! of trees C and R are comm_c and comm_r_last. A mirror that computed a wrong value
//! then fails the partition instead of giving a witness that cannot prove. Fakes skip it.
//!
//! Two fields of the vanilla proof have no public accessor (a column proof's inclusion
//! proof, a labeling proof's node); they are read through the proof's own serde form.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use filecoin_hashers::{Hasher, POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_2};
use filecoin_proofs::{DefaultPieceDomain, MerkleTreeTrait};
use storage_proofs_core::gadgets::uint64::UInt64;
use storage_proofs_core::gadgets::{constraint, encode::encode, insertion::insert};
use storage_proofs_core::merkle::MerkleProofTrait;

use super::bits::{num_to_bits_le, pack_bits, reverse_bit_numbering, Bit, CAPACITY};
use super::por::{poseidon_inclusion, Path};
use super::poseidon::poseidon_hash;
use super::sha256::{sha256, Word};
use super::shared::{self, comm_r_of_columns, malformed, require_poseidon, value};

/// Labels hash this many parents (`stacked::TOTAL_PARENTS`): 6 DRG and 8 expander
/// parents repeated, or the 6 DRG parents repeated on layer 1.
const TOTAL_PARENTS: usize = 37;

/// One PoRep challenge's circuit, prefix included, for the witness only: the replica id
/// and commitments `StackedCompound::circuit` gives the prefix, and the challenge's
/// vanilla proof (its own comm_r_last and comm_c, as a one-challenge circuit takes them).
pub(crate) struct NativeChallenge<Tree: 'static + MerkleTreeTrait> {
    pub(crate) replica_id: <Tree::Hasher as Hasher>::Domain,
    pub(crate) comm_d: Option<DefaultPieceDomain>,
    pub(crate) comm_r: Option<<Tree::Hasher as Hasher>::Domain>,
    pub(crate) proof: filecoin_proofs::VanillaSealProof<Tree>,
    /// The vanilla proof was verified: check the SHA-256 results against it.
    pub(crate) check_values: bool,
}

impl<Tree: 'static + MerkleTreeTrait> Circuit<Fr> for NativeChallenge<Tree> {
    fn synthesize<CS: ConstraintSystem<Fr>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let NativeChallenge {
            replica_id,
            comm_d,
            comm_r,
            proof,
            check_values,
        } = self;
        require_poseidon::<Tree>("trees C and R")?;
        // The prefix, as `StackedCircuit::synthesize` allocates it.
        let replica_id = AllocatedNum::alloc(&mut *cs, || Ok(replica_id.into()))?;
        replica_id.inputize(&mut *cs)?;
        let replica_id_bits =
            storage_proofs_core::util::reverse_bit_numbering(replica_id.to_bits_le(&mut *cs)?);
        let comm_d = alloc_input(cs, comm_d.map(Into::into))?;
        let comm_r = alloc_input(cs, comm_r.map(Into::into))?;
        let comm_r_last = AllocatedNum::alloc(&mut *cs, || Ok(proof.comm_r_last().into()))?;
        let comm_c = AllocatedNum::alloc(&mut *cs, || Ok(proof.comm_c().into()))?;
        // `hash2_circuit` of the tree's hasher, Poseidon (checked above).
        comm_r_of_columns(cs, &comm_r, &comm_c, &comm_r_last, check_values, KIND)?;

        let replica_id_bits = replica_id_bits
            .iter()
            .map(Bit::of)
            .collect::<Result<Vec<_>, _>>()?;
        let roots = Roots {
            comm_d,
            comm_c,
            comm_r_last,
        };
        challenge::<Tree, CS>(cs, &proof, &roots, &replica_id_bits, check_values)
    }
}

/// The prefix's commitments a challenge proves against.
struct Roots {
    comm_d: AllocatedNum<Fr>,
    comm_c: AllocatedNum<Fr>,
    comm_r_last: AllocatedNum<Fr>,
}

/// `Proof::synthesize` (`stacked/circuit/params.rs`) of one challenge.
fn challenge<Tree: 'static + MerkleTreeTrait, CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    proof: &filecoin_proofs::VanillaSealProof<Tree>,
    roots: &Roots,
    replica_id: &[Bit],
    check_values: bool,
) -> Result<(), SynthesisError> {
    let data_leaf: Fr = proof.comm_d_proofs.leaf().into();
    let data_leaf = AllocatedNum::alloc(&mut *cs, || Ok(data_leaf))?;
    let root = tree_d_inclusion(
        cs,
        proof.comm_d_proofs.as_options(),
        &roots.comm_d,
        &data_leaf,
    )?;
    if check_values && root.get_value() != roots.comm_d.get_value() {
        return Err(wrong("the tree-D root it computes is not comm_d".into()));
    }

    let columns = &proof.replica_column_proofs;
    let num_layers = proof.labeling_proofs.len();
    let mut parent_columns = |proofs: &[_]| -> Result<Vec<Vec<AllocatedNum<Fr>>>, SynthesisError> {
        let mut out = Vec::with_capacity(proofs.len());
        for p in proofs {
            let (rows, path) = open_column::<Tree>(p)?;
            if rows.len() != num_layers {
                return Err(malformed(format!(
                    "a parent column of {} rows for {num_layers} layers",
                    rows.len()
                )));
            }
            let column = rows
                .iter()
                .map(|&r| AllocatedNum::alloc(&mut *cs, || Ok(r)))
                .collect::<Result<Vec<_>, _>>()?;
            let hash = hash_column(&mut *cs, &rows)?;
            let root = poseidon_inclusion::<Tree, CS>(cs, path, &hash, &roots.comm_c)?;
            check_root(check_values, &root, &roots.comm_c, "comm_c")?;
            out.push(column);
        }
        Ok(out)
    };
    let drg = parent_columns(&columns.drg_parents)?;
    let exp = parent_columns(&columns.exp_parents)?;
    if drg.is_empty() || exp.is_empty() {
        return Err(malformed(
            "a challenge without DRG or expander parents".into(),
        ));
    }

    let node = labeling_node::<Tree>(proof)?;
    let node = UInt64::alloc(&mut *cs, Some(node))?;
    node.pack_into_input(&mut *cs)?;
    let node_bits = node
        .to_bits_be()
        .iter()
        .map(Bit::of)
        .collect::<Result<Vec<_>, _>>()?;

    let mut labels = Vec::with_capacity(num_layers);
    for layer in 1..=num_layers {
        let mut parents = Vec::with_capacity(drg.len() + exp.len());
        for column in &drg {
            parents.push(value_bits(cs, &column[layer - 1])?);
        }
        // Expander parents hold no first-layer value: their rows start at layer 2.
        if layer > 1 {
            for column in &exp {
                parents.push(value_bits(cs, &column[layer - 2])?);
            }
        }
        let expanded: Vec<&[Bit]> = if layer > 1 {
            parents
                .iter()
                .chain(&parents)
                .chain(parents.iter().take(9))
                .map(Vec::as_slice)
                .collect()
        } else {
            (0..6)
                .flat_map(|_| &parents)
                .chain(parents.first())
                .map(Vec::as_slice)
                .collect()
        };
        if expanded.len() != TOTAL_PARENTS {
            return Err(malformed(format!(
                "layer {layer} hashes {} parents, not {TOTAL_PARENTS}",
                expanded.len()
            )));
        }
        labels.push(label(cs, replica_id, &expanded, layer as u32, &node_bits)?);
    }

    let key = labels
        .last()
        .ok_or_else(|| malformed("a challenge without labeling proofs".into()))?;
    let encoded = encode(&mut *cs, key, &data_leaf)?;
    let root = poseidon_inclusion::<Tree, CS>(
        cs,
        proof.comm_r_last_proof.as_options(),
        &encoded,
        &roots.comm_r_last,
    )?;
    check_root(check_values, &root, &roots.comm_r_last, "comm_r_last")?;
    let label_values = labels.iter().map(value).collect::<Result<Vec<_>, _>>()?;
    let column_hash = hash_column(&mut *cs, &label_values)?;
    let (c_x_rows, c_x_path) = open_column::<Tree>(&columns.c_x)?;
    if check_values {
        let computed = labels.iter().map(AllocatedNum::get_value);
        if let Some(l) = computed.zip(&c_x_rows).position(|(x, &row)| x != Some(row)) {
            return Err(wrong(format!(
                "its label of layer {} is not the challenged column's row",
                l + 1
            )));
        }
    }
    let root = poseidon_inclusion::<Tree, CS>(cs, c_x_path, &column_hash, &roots.comm_c)?;
    check_root(check_values, &root, &roots.comm_c, "comm_c")
}

/// On a verified proof (`check`), a tree root the mirror computes must be the commitment.
fn check_root(
    check: bool,
    computed: &AllocatedNum<Fr>,
    commitment: &AllocatedNum<Fr>,
    name: &str,
) -> Result<(), SynthesisError> {
    if check && computed.get_value() != commitment.get_value() {
        return Err(wrong(format!("a tree root it computes is not {name}")));
    }
    Ok(())
}

/// `AllocatedNum::alloc` then `inputize`, as the prefix makes comm_d and comm_r.
fn alloc_input<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    value: Option<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let num = AllocatedNum::alloc(&mut *cs, || value.ok_or(SynthesisError::AssignmentMissing))?;
    num.inputize(&mut *cs)?;
    Ok(num)
}

/// A parent's value as the label hashes it: `reverse_bit_numbering(to_bits_le)`.
fn value_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    num: &AllocatedNum<Fr>,
) -> Result<Vec<Bit>, SynthesisError> {
    let value = num.get_value().ok_or(SynthesisError::AssignmentMissing)?;
    Ok(reverse_bit_numbering(num_to_bits_le(cs, value)?))
}

/// `create_label_circuit`: SHA-256 of `replica_id ‖ layer ‖ node ‖ parents` (each field
/// padded with constant zeros to 32 bytes, layer and node to 32 together), packed from its
/// first 254 bits in storage-proofs' bit numbering.
fn label<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    replica_id: &[Bit],
    parents: &[&[Bit]],
    layer: u32,
    node_be: &[Bit],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut message = Vec::with_capacity((2 + parents.len()) * 256);
    message.extend_from_slice(replica_id);
    while message.len() < 256 {
        message.push(Bit::Const(false));
    }
    message.extend(Word::constant(layer).bits_be());
    message.extend_from_slice(node_be);
    while message.len() < 512 {
        message.push(Bit::Const(false));
    }
    for parent in parents {
        message.extend_from_slice(parent);
        while !message.len().is_multiple_of(256) {
            message.push(Bit::Const(false));
        }
    }
    let digest = reverse_bit_numbering(sha256(cs, &message)?);
    pack_bits(cs, &digest[..CAPACITY])
}

/// Tree D's `PoRCircuit` (binary SHA-256 tree, private root): per level an index bit, the
/// sibling, `insert` and the node hash; then the index bits packed into an input and the
/// computed root constrained to comm_d. Returns the computed root.
fn tree_d_inclusion<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    path: Path,
    root: &AllocatedNum<Fr>,
    leaf: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut cur = leaf.clone();
    let mut index_bits = Vec::with_capacity(path.len());
    for (siblings, index) in path {
        if siblings.len() != 1 {
            return Err(malformed(format!(
                "a tree D level of {} siblings, not 1",
                siblings.len()
            )));
        }
        let bit = Boolean::from(AllocatedBit::alloc(&mut *cs, index.map(|i| i & 1 == 1))?);
        index_bits.push(bit.clone());
        let siblings = siblings
            .iter()
            .map(|s| AllocatedNum::alloc(&mut *cs, || s.ok_or(SynthesisError::AssignmentMissing)))
            .collect::<Result<Vec<_>, _>>()?;
        cur = tree_d_level(cs, &cur, bit, &siblings)?;
    }
    multipack::pack_into_inputs(&mut *cs, &index_bits)?;
    constraint::equal(cs, || "tree d root", &cur, root);
    Ok(cur)
}

/// One level of a tree-D path as `PoRCircuit` and `por_no_challenge_input` walk it: `cur`
/// and its sibling put in order by the index bit (`insert`), then their SHA-256 node hash
/// ([`hash_nodes`]). Also SnapDeals' levels to the apex leaf (`snap/mirror.rs`).
pub(crate) fn tree_d_level<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    cur: &AllocatedNum<Fr>,
    bit: Boolean,
    sibling: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let pair = insert(&mut *cs, cur, &[bit], sibling)?;
    hash_nodes(cs, &pair)
}

/// `Sha256Function::hash2_circuit(left, right)`, which allocates and constrains what
/// `hash_multi_leaf_circuit` does over the two nodes (each node's 255 bits and their
/// unpacking constraint, a constant zero bit, each byte's bits reversed, SHA-256, the
/// digest packed): SnapDeals' apex tree (`snap/gadgets.rs`).
pub(crate) fn tree_d_node<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    left: &AllocatedNum<Fr>,
    right: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    hash_nodes(cs, &[left.clone(), right.clone()])
}

/// `Sha256Function::hash_multi_leaf_circuit`: each node's bits in storage-proofs' bit
/// numbering, SHA-256, and the digest's first 254 bits packed in the same numbering.
fn hash_nodes<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    nodes: &[AllocatedNum<Fr>],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut message = Vec::with_capacity(nodes.len() * 256);
    for node in nodes {
        message.extend(value_bits(cs, node)?);
    }
    let digest = reverse_bit_numbering(sha256(cs, &message)?);
    pack_bits(cs, &digest[..CAPACITY])
}

/// `hash_single_column`: the Poseidon hash of a column of 2 or 11 rows.
fn hash_column<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    rows: &[Fr],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    match rows.len() {
        2 => poseidon_hash(cs, rows, &*POSEIDON_CONSTANTS_2),
        11 => poseidon_hash(cs, rows, &*POSEIDON_CONSTANTS_11),
        n => Err(malformed(format!("a column of {n} rows (2 or 11 hash)"))),
    }
}

type TreeProof<Tree> = storage_proofs_core::merkle::MerkleProof<
    <Tree as MerkleTreeTrait>::Hasher,
    <Tree as MerkleTreeTrait>::Arity,
    <Tree as MerkleTreeTrait>::SubTreeArity,
    <Tree as MerkleTreeTrait>::TopTreeArity,
>;

/// A column proof's rows and its inclusion path in tree C, read through its serde form
/// (`column.rows`, `inclusion_proof`: fields without an accessor).
fn open_column<Tree: 'static + MerkleTreeTrait>(
    proof: &storage_proofs_porep::stacked::ColumnProof<TreeProof<Tree>>,
) -> Result<(Vec<Fr>, Path), SynthesisError> {
    let mut v = serde_json::to_value(proof).map_err(|e| malformed(format!("column proof: {e}")))?;
    let rows: Vec<<Tree::Hasher as Hasher>::Domain> =
        serde_json::from_value(v["column"]["rows"].take())
            .map_err(|e| malformed(format!("column proof rows: {e}")))?;
    let inclusion: TreeProof<Tree> = serde_json::from_value(v["inclusion_proof"].take())
        .map_err(|e| malformed(format!("column inclusion proof: {e}")))?;
    Ok((
        rows.into_iter().map(Into::into).collect(),
        inclusion.as_options(),
    ))
}

/// The challenged node (`labeling_proofs[0].node`, the only labeling field the circuit
/// reads), through the labeling proof's serde form.
fn labeling_node<Tree: 'static + MerkleTreeTrait>(
    proof: &filecoin_proofs::VanillaSealProof<Tree>,
) -> Result<u64, SynthesisError> {
    let first = proof
        .labeling_proofs
        .first()
        .ok_or_else(|| malformed("a challenge without labeling proofs".into()))?;
    let v = serde_json::to_value(first).map_err(|e| malformed(format!("labeling proof: {e}")))?;
    v["node"]
        .as_u64()
        .ok_or_else(|| malformed("a labeling proof without its node".into()))
}

/// A value of this mirror that a verified vanilla proof contradicts: a bug of the mirror.
fn wrong(what: String) -> SynthesisError {
    shared::wrong(KIND, what)
}

/// The mirror's name in its errors.
const KIND: &str = "porep";
