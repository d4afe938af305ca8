//! The update circuit's top level (storage-proofs-update 19.1.0 `circuit.rs:341-745`),
//! mirrored for `snap/parts.rs`: the prefix and one pass of the challenge loop, each
//! allocating and constraining exactly what the original does, in the same order (the
//! crate's private gadgets they call are `snap/gadgets.rs`'s). Where the original
//! asserts on its input (a panic), the mirror returns `SynthesisError::Unsatisfiable`;
//! `snap/parts.rs` checks the shapes first.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::multipack::pack_bits;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::PrimeFieldBits;
use filecoin_hashers::{HashFunction, Hasher};
use filecoin_proofs::MerkleTreeTrait;
use neptune::circuit::poseidon_hash;
use storage_proofs_core::gadgets::insertion::select;
use storage_proofs_core::gadgets::por::por_no_challenge_input;

use super::gadgets::{
    apex_por, enforce_binary_decomposition, gen_challenge_bits, get_challenge_high_bits,
    label_r_new, tree_d_por_native,
};
use storage_proofs_update::constants::{hs, TreeD, TreeRHasher, POSEIDON_CONSTANTS_GEN_RANDOMNESS};
use storage_proofs_update::EmptySectorUpdateCircuit;

/// What the challenges read from the prefix.
pub(super) struct Prefix {
    pub(super) partition_bits: Vec<AllocatedBit>,
    pub(super) h_select_bits: Vec<AllocatedBit>,
    pub(super) phi: AllocatedNum<Fr>,
    pub(super) root_r_old: AllocatedNum<Fr>,
    pub(super) root_r_new: AllocatedNum<Fr>,
    pub(super) apex_leafs: Vec<AllocatedNum<Fr>>,
    /// Each challenge's generated bits (without the partition bits), little-endian.
    pub(super) generated_bits: Vec<Vec<AllocatedBit>>,
    pub(super) hs: [usize; 6],
}

/// `circuit.rs:341-580`: everything before the challenge loop. The circuit's asserts on
/// `k_and_h_select` and on the partition path are errors here. `native` (a witness-only
/// system): `apex_por`'s SHA-256 hashes through the native mirror.
pub(super) fn synthesize_prefix<Tree, CS>(
    cs: &mut CS,
    circuit: &EmptySectorUpdateCircuit<Tree>,
    native: bool,
) -> Result<Prefix, SynthesisError>
where
    Tree: MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    let pp = &circuit.pub_params;
    let pub_inputs = &circuit.pub_inputs;
    let priv_inputs = &circuit.priv_inputs;
    let (challenge_bit_len, partition_bit_len) = (pp.challenge_bit_len, pp.partition_bit_len);
    let hs = hs(pp.sector_nodes);
    let h_select_bit_len = hs.len();
    let proofs = &priv_inputs.challenge_proofs;
    // `check_shape` made the tree-D paths `challenge_bit_len` long.
    let partition_path = proofs[0].path_d_new[challenge_bit_len - partition_bit_len..].to_vec();

    if let Some(k_and_h_select) = pub_inputs.k_and_h_select {
        let bits: Vec<bool> = k_and_h_select.to_le_bits().into_iter().collect();
        let k = bits[..partition_bit_len]
            .iter()
            .enumerate()
            .fold(0usize, |k, (i, &bit)| k | usize::from(bit) << i);
        let h_select = &bits[partition_bit_len..partition_bit_len + h_select_bit_len];
        let high_zero = bits[partition_bit_len + h_select_bit_len..]
            .iter()
            .all(|bit| !*bit);
        if k >= pp.partition_count || h_select.iter().filter(|bit| **bit).count() != 1 || !high_zero
        {
            return Err(SynthesisError::Unsatisfiable);
        }
    }
    let tail = challenge_bit_len - partition_bit_len;
    if proofs[1..]
        .iter()
        .any(|p| p.path_d_new[tail..] != partition_path[..])
    {
        return Err(SynthesisError::Unsatisfiable);
    }

    let k_and_h_select = AllocatedNum::alloc(cs.namespace(|| "k_and_h_select"), || {
        pub_inputs
            .k_and_h_select
            .ok_or(SynthesisError::AssignmentMissing)
    })?;
    k_and_h_select.inputize(cs.namespace(|| "k_and_h_select (public input)"))?;

    // Split `k_and_h_select` into partition and h-select bits.
    let k_and_h_select_bits = {
        let bit_len = partition_bit_len + h_select_bit_len;
        let bits: Vec<Option<bool>> = match k_and_h_select.get_value() {
            Some(v) => v.to_le_bits().into_iter().take(bit_len).map(Some).collect(),
            None => vec![None; bit_len],
        };
        let bits = bits
            .into_iter()
            .enumerate()
            .map(|(i, bit)| {
                AllocatedBit::alloc(cs.namespace(|| format!("k_and_h_select_bit_{i}")), bit)
            })
            .collect::<Result<Vec<AllocatedBit>, SynthesisError>>()?;
        enforce_binary_decomposition(
            cs,
            || "k_and_h_select binary decomp",
            &bits,
            &k_and_h_select,
        );
        bits
    };
    let partition_bits = k_and_h_select_bits[..partition_bit_len].to_vec();
    let h_select_bits = k_and_h_select_bits[partition_bit_len..].to_vec();
    let partition = pack_bits(
        cs.namespace(|| "pack partition bits"),
        &partition_bits
            .iter()
            .cloned()
            .map(Into::into)
            .collect::<Vec<Boolean>>(),
    )?;

    let input = |cs: &mut CS, name: &'static str, value: Option<Fr>| {
        let num = AllocatedNum::alloc(cs.namespace(|| name), || {
            value.ok_or(SynthesisError::AssignmentMissing)
        })?;
        num.inputize(cs.namespace(|| format!("{name}_input")))?;
        Ok::<_, SynthesisError>(num)
    };
    let comm_r_old = input(cs, "comm_r_old", pub_inputs.comm_r_old)?;
    let comm_d_new = input(cs, "comm_d_new", pub_inputs.comm_d_new)?;
    let comm_r_new = input(cs, "comm_r_new", pub_inputs.comm_r_new)?;

    // phi = H(comm_d_new ‖ comm_r_old)
    let phi = poseidon_hash(
        cs.namespace(|| "phi"),
        vec![comm_d_new.clone(), comm_r_old.clone()],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;

    let private = |cs: &mut CS, name: String, value: Option<Fr>| {
        AllocatedNum::alloc(cs.namespace(|| name), || {
            value.ok_or(SynthesisError::AssignmentMissing)
        })
    };
    let comm_c = private(cs, "comm_c".into(), priv_inputs.comm_c)?;
    let root_r_old = private(cs, "root_r_old".into(), priv_inputs.root_r_old)?;
    let root_r_new = private(cs, "root_r_new".into(), priv_inputs.root_r_new)?;
    let apex_leafs = priv_inputs
        .apex_leafs
        .iter()
        .enumerate()
        .map(|(i, leaf)| private(cs, format!("apex_leaf_{i}"), *leaf))
        .collect::<Result<Vec<_>, _>>()?;
    let partition_path = partition_path
        .iter()
        .enumerate()
        .map(|(i, siblings)| {
            private(cs, format!("partition_path_sibling_{i}"), siblings[0]).map(|s| vec![s])
        })
        .collect::<Result<Vec<_>, _>>()?;

    // comm_r = H(comm_c ‖ root_r), old and new.
    for (name, root, comm_r) in [
        ("comm_r_old_calc", &root_r_old, &comm_r_old),
        ("comm_r_new_calc", &root_r_new, &comm_r_new),
    ] {
        let calc =
            <TreeRHasher as Hasher>::Function::hash2_circuit(cs.namespace(|| name), &comm_c, root)?;
        cs.enforce(
            || format!("enforce {name} == comm_r"),
            |lc| lc + calc.get_variable(),
            |lc| lc + CS::one(),
            |lc| lc + comm_r.get_variable(),
        );
    }

    apex_por(
        cs.namespace(|| "apex_gadget"),
        apex_leafs.clone(),
        partition_bits.clone(),
        partition_path,
        comm_d_new,
        native,
    )?;

    let generated_bits = gen_challenge_bits(
        cs.namespace(|| "gen_challenge_bits"),
        &comm_r_new,
        &partition,
        pp.challenge_count,
        challenge_bit_len - partition_bit_len,
    )?;

    Ok(Prefix {
        partition_bits,
        h_select_bits,
        phi,
        root_r_old,
        root_r_new,
        apex_leafs,
        generated_bits,
        hs,
    })
}

/// `circuit.rs:582-742`: one pass of the challenge loop.
pub(super) fn synthesize_challenge<Tree, CS>(
    cs: &mut CS,
    circuit: &EmptySectorUpdateCircuit<Tree>,
    prefix: &Prefix,
    c_index: usize,
    native: bool,
) -> Result<(), SynthesisError>
where
    Tree: MerkleTreeTrait<Hasher = TreeRHasher>,
    CS: ConstraintSystem<Fr>,
{
    let pp = &circuit.pub_params;
    let challenge_proof = &circuit.priv_inputs.challenge_proofs[c_index];
    let c_bits: Vec<AllocatedBit> = prefix.generated_bits[c_index]
        .iter()
        .chain(prefix.partition_bits.iter())
        .cloned()
        .collect();

    // This challenge's rho = H(phi ‖ c_high).
    let c_high = get_challenge_high_bits(
        cs.namespace(|| format!("get_challenge_high_bits (c_index={c_index})")),
        &c_bits,
        &prefix.h_select_bits,
        &prefix.hs,
    )?;
    let rho = poseidon_hash(
        cs.namespace(|| format!("rho (c_index={c_index})")),
        vec![prefix.phi.clone(), c_high],
        &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
    )?;

    let leaf = |cs: &mut CS, name: &str, value: Option<Fr>| {
        AllocatedNum::alloc(
            cs.namespace(|| format!("{name} (c_index={c_index})")),
            || value.ok_or(SynthesisError::AssignmentMissing),
        )
    };
    let leaf_r_old = leaf(cs, "leaf_r_old", challenge_proof.leaf_r_old)?;
    let leaf_d_new = leaf(cs, "leaf_d_new", challenge_proof.leaf_d_new)?;
    let leaf_r_new = label_r_new(
        cs.namespace(|| format!("leaf_r_new (c_index={c_index})")),
        &leaf_r_old,
        &leaf_d_new,
        &rho,
    )?;
    // The circuit asserts the computed label against the vanilla proof's.
    if let Some(value) = leaf_r_new.get_value() {
        if challenge_proof.leaf_r_new != Some(value) {
            return Err(SynthesisError::Unsatisfiable);
        }
    }

    let path_r = |cs: &mut CS, name: &str, path: &[Vec<Option<Fr>>]| {
        path.iter()
            .enumerate()
            .map(|(tree_row, siblings)| {
                siblings
                    .iter()
                    .enumerate()
                    .map(|(sibling_index, sibling)| {
                        AllocatedNum::alloc(
                            cs.namespace(|| {
                                format!(
                                    "{name} sibling (c_index={c_index}, tree_row={tree_row}, \
                                     sibling_index={sibling_index})"
                                )
                            }),
                            || sibling.ok_or(SynthesisError::AssignmentMissing),
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()
    };
    let path_r_old = path_r(cs, "path_r_old", &challenge_proof.path_r_old)?;
    por_no_challenge_input::<Tree, _>(
        cs.namespace(|| format!("por tree_r_old (c_index={c_index})")),
        c_bits.clone(),
        leaf_r_old,
        path_r_old,
        prefix.root_r_old.clone(),
    )?;
    let path_r_new = path_r(cs, "path_r_new", &challenge_proof.path_r_new)?;
    por_no_challenge_input::<Tree, _>(
        cs.namespace(|| format!("por tree_r_new (c_index={c_index})")),
        c_bits.clone(),
        leaf_r_new,
        path_r_new,
        prefix.root_r_new.clone(),
    )?;

    // The apex leaf above the challenge, and the tree-D path from the data leaf to it.
    let path_len_to_apex_leaf = pp.challenge_bit_len - pp.partition_bit_len - pp.apex_leaf_bit_len;
    let apex_leaf_bits: Vec<Boolean> = c_bits
        [path_len_to_apex_leaf..path_len_to_apex_leaf + pp.apex_leaf_bit_len]
        .iter()
        .cloned()
        .map(Into::into)
        .collect();
    let apex_leaf = select(
        cs.namespace(|| format!("select_apex_leaf (c_index={c_index})")),
        &prefix.apex_leafs,
        &apex_leaf_bits,
    )?;
    let c_bits_to_apex_leaf: Vec<AllocatedBit> =
        c_bits.into_iter().take(path_len_to_apex_leaf).collect();
    let path_to_apex_leaf = challenge_proof
        .path_d_new
        .iter()
        .take(path_len_to_apex_leaf)
        .enumerate()
        .map(|(tree_row, siblings)| {
            AllocatedNum::alloc(
                cs.namespace(|| {
                    format!("path_to_apex_leaf sibling (c_index={c_index}, tree_row={tree_row})")
                }),
                || siblings[0].ok_or(SynthesisError::AssignmentMissing),
            )
            .map(|sibling| vec![sibling])
        })
        .collect::<Result<Vec<_>, _>>()?;
    if native {
        return tree_d_por_native(
            cs,
            c_bits_to_apex_leaf,
            leaf_d_new,
            path_to_apex_leaf,
            &apex_leaf,
        );
    }
    por_no_challenge_input::<TreeD, _>(
        cs.namespace(|| format!("por to_apex_leaf (c_index={c_index})")),
        c_bits_to_apex_leaf,
        leaf_d_new,
        path_to_apex_leaf,
        apex_leaf,
    )
}
