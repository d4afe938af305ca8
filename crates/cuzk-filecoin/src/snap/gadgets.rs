//! The private gadgets of storage-proofs-update 19.1.0 (`gadgets.rs:18-274`) that the
//! update circuit's top level (`snap/mirror.rs`) calls, mirrored: each allocates and
//! constrains exactly what the original does, in the same order, and returns
//! `SynthesisError::Unsatisfiable` where the original would panic on its input. Beside
//! them `tree_d_por_native`, `por_no_challenge_input::<TreeD, _>` for witness-only systems,
//! which the challenges' tree-D paths and `apex_por` use.

use bellperson::gadgets::boolean::{field_into_allocated_bits_le, AllocatedBit, Boolean};
use bellperson::gadgets::multipack::pack_bits;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, LinearCombination, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField};
use filecoin_hashers::{HashFunction, Hasher};
use neptune::circuit::poseidon_hash;
use storage_proofs_core::gadgets::por::por_no_challenge_input;

use crate::native::challenge::{tree_d_level, tree_d_node};
use storage_proofs_update::constants::{TreeD, TreeDHasher, POSEIDON_CONSTANTS_GEN_RANDOMNESS};
/// `por_no_challenge_input::<TreeD, _>` for witness-only systems: the same allocations
/// level by level (the index bit given, the sibling, `insert`), the SHA-256 of each level
/// through the native mirror (`native::challenge::tree_d_level`, no linear combination
/// built), then the root's equality. Most of a challenge's constraints are these levels.
pub(super) fn tree_d_por_native<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    bits: Vec<AllocatedBit>,
    leaf: AllocatedNum<Fr>,
    path: Vec<Vec<AllocatedNum<Fr>>>,
    root: &AllocatedNum<Fr>,
) -> Result<(), SynthesisError> {
    if bits.len() != path.len() || path.iter().any(|s| s.len() != 1) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut cur = leaf;
    for (bit, siblings) in bits.into_iter().zip(path) {
        cur = tree_d_level(&mut *cs, &cur, Boolean::from(bit), &siblings)?;
    }
    cs.enforce(
        || "calculated root == provided root",
        |lc| lc + cur.get_variable(),
        |lc| lc + CS::one(),
        |lc| lc + root.get_variable(),
    );
    Ok(())
}

/// `(2^0·bits[0] + … + 2^(n−1)·bits[n−1]) · 1 = num`.
pub(super) fn enforce_binary_decomposition<CS, N, NR>(
    cs: &mut CS,
    name: N,
    bits: &[AllocatedBit],
    num: &AllocatedNum<Fr>,
) where
    CS: ConstraintSystem<Fr>,
    N: FnOnce() -> NR,
    NR: Into<String>,
{
    let mut lc = LinearCombination::<Fr>::zero();
    let mut pow2 = Fr::ONE;
    for bit in bits {
        lc = lc + (pow2, bit.get_variable());
        pow2 = pow2.double();
    }
    cs.enforce(
        name,
        |_| lc,
        |lc| lc + CS::one(),
        |lc| lc + num.get_variable(),
    );
}

/// `allocated_num_to_allocated_bits` (`gadgets.rs:18-39`): `num` as its `Fr::NUM_BITS`
/// little-endian bits.
fn allocated_num_to_allocated_bits<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    num: &AllocatedNum<Fr>,
) -> Result<Vec<AllocatedBit>, SynthesisError> {
    let bits = field_into_allocated_bits_le(&mut cs, num.get_value())?;
    if bits.len() != Fr::NUM_BITS as usize {
        return Err(SynthesisError::Unsatisfiable);
    }
    enforce_binary_decomposition(&mut cs, || "binary decomp", &bits, num);
    Ok(bits)
}

/// `apex_por` (`gadgets.rs:45-89`): the apex tree over `apex_leafs` (SHA-256), and its
/// root's inclusion in `comm_d` along `partition_path`. `native` (a witness-only system):
/// the hashes and the path's levels through the native SHA-256 mirror, the same
/// allocations and constraint count in the same order. The tree is 127 hashes at 512 MiB
/// and 32 GiB, about 6M constraints, walked on one thread before a partition's parts run
/// (`snap/replay.rs`).
pub(super) fn apex_por<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    apex_leafs: Vec<AllocatedNum<Fr>>,
    partition_bits: Vec<AllocatedBit>,
    partition_path: Vec<Vec<AllocatedNum<Fr>>>,
    comm_d: AllocatedNum<Fr>,
    native: bool,
) -> Result<(), SynthesisError> {
    // `check_shape`: the apex-leaf count is a power of two, so one root is left.
    if !apex_leafs.len().is_power_of_two() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let mut row = apex_leafs;
    let mut row_index = 0;
    while row.len() > 1 {
        row = row
            .chunks(2)
            .enumerate()
            .map(|(i, siblings)| match native {
                true => tree_d_node(&mut cs, &siblings[0], &siblings[1]),
                false => <TreeDHasher as Hasher>::Function::hash2_circuit(
                    cs.namespace(|| {
                        format!("apex_tree generation hash (tree_row={row_index}, siblings={i})")
                    }),
                    &siblings[0],
                    &siblings[1],
                ),
            })
            .collect::<Result<Vec<_>, _>>()?;
        row_index += 1;
    }
    let apex_root = row.swap_remove(0);
    if native {
        return tree_d_por_native(&mut cs, partition_bits, apex_root, partition_path, &comm_d);
    }
    por_no_challenge_input::<TreeD, _>(
        cs.namespace(|| "partition-tree por"),
        partition_bits,
        apex_root,
        partition_path,
        comm_d,
    )
}

/// `gen_challenge_bits` (`gadgets.rs:92-159`): each challenge's random bits, from the
/// digests `H(comm_r_new ‖ k·digests_per_partition + j)`.
pub(super) fn gen_challenge_bits<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    comm_r_new: &AllocatedNum<Fr>,
    partition: &AllocatedNum<Fr>,
    challenges: usize,
    bits_per_challenge: usize,
) -> Result<Vec<Vec<AllocatedBit>>, SynthesisError> {
    let challenges_per_digest = Fr::CAPACITY as usize / bits_per_challenge;
    // As the circuit computes it (in f32), so that the two agree.
    let digests_per_partition = (challenges as f32 / challenges_per_digest as f32).ceil() as u64;
    let mut generated_bits = Vec::with_capacity(challenges);
    for j in 0..digests_per_partition {
        let digest_index =
            AllocatedNum::alloc(cs.namespace(|| format!("digest_index_{j}")), || {
                let k = partition
                    .get_value()
                    .ok_or(SynthesisError::AssignmentMissing)?;
                Ok(k * Fr::from(digests_per_partition) + Fr::from(j))
            })?;
        cs.enforce(
            || format!("digest_index_{j} == k * digests_per_partition + {j}"),
            |lc| {
                lc + (Fr::from(digests_per_partition), partition.get_variable())
                    + (Fr::from(j), CS::one())
            },
            |lc| lc + CS::one(),
            |lc| lc + digest_index.get_variable(),
        );
        let digest = poseidon_hash(
            cs.namespace(|| format!("digest_{j}")),
            vec![comm_r_new.clone(), digest_index],
            &POSEIDON_CONSTANTS_GEN_RANDOMNESS,
        )?;
        let digest_bits =
            allocated_num_to_allocated_bits(cs.namespace(|| format!("digest_{j}_bits")), &digest)?;
        let to_take = if j == digests_per_partition - 1 {
            challenges - generated_bits.len()
        } else {
            challenges_per_digest
        };
        generated_bits.extend(
            digest_bits
                .chunks(bits_per_challenge)
                .take(to_take)
                .map(<[AllocatedBit]>::to_vec),
        );
    }
    Ok(generated_bits)
}

/// `get_challenge_high_bits` (`gadgets.rs:164-235`): the `h` high bits of `c_bits`, `h`
/// the entry of `hs` that the one set bit of `h_select_bits` picks.
pub(super) fn get_challenge_high_bits<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    c_bits: &[AllocatedBit],
    h_select_bits: &[AllocatedBit],
    hs: &[usize],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    if h_select_bits.len() != hs.len() {
        return Err(SynthesisError::Unsatisfiable);
    }
    let bit_len = c_bits.len();
    let c_bits: Vec<Boolean> = c_bits.iter().cloned().map(Into::into).collect();
    let c_high_and_zeros = hs
        .iter()
        .zip(h_select_bits)
        .enumerate()
        .map(|(k, (h, h_select_bit))| {
            let c_high = pack_bits(
                cs.namespace(|| format!("c_high (h={h}, k={k})")),
                &c_bits[bit_len - h..],
            )?;
            // c_high · h_select_bit
            let c_high_or_zero = AllocatedNum::alloc(
                cs.namespace(|| format!("c_high_or_zero (h={h}, k={k})")),
                || match h_select_bit
                    .get_value()
                    .ok_or(SynthesisError::AssignmentMissing)?
                {
                    true => c_high.get_value().ok_or(SynthesisError::AssignmentMissing),
                    false => Ok(Fr::ZERO),
                },
            )?;
            cs.enforce(
                || format!("c_high_or_zero == c_high * h_select_bit (h={h}, k={k})"),
                |lc| lc + c_high.get_variable(),
                |lc| lc + h_select_bit.get_variable(),
                |lc| lc + c_high_or_zero.get_variable(),
            );
            Ok(c_high_or_zero)
        })
        .collect::<Result<Vec<_>, SynthesisError>>()?;
    // One term is the selected c_high, the others zero: the sum is the selected one.
    let c_high_selected = AllocatedNum::alloc(cs.namespace(|| "c_high_selected"), || {
        c_high_and_zeros.iter().try_fold(Fr::ZERO, |sum, v| {
            v.get_value()
                .map(|v| sum + v)
                .ok_or(SynthesisError::AssignmentMissing)
        })
    })?;
    cs.enforce(
        || "c_high_selected == dot(c_highs, h_select_bits)",
        |mut lc| {
            for c_high_or_zero in &c_high_and_zeros {
                lc = lc + c_high_or_zero.get_variable();
            }
            lc
        },
        |lc| lc + CS::one(),
        |lc| lc + c_high_selected.get_variable(),
    );
    Ok(c_high_selected)
}

/// `label_r_new` (`gadgets.rs:238-274`): `label_r_new = label_r_old + label_d_new · rho`.
pub(super) fn label_r_new<CS: ConstraintSystem<Fr>>(
    mut cs: CS,
    label_r_old: &AllocatedNum<Fr>,
    label_d_new: &AllocatedNum<Fr>,
    rho: &AllocatedNum<Fr>,
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let label_d_new_rho = label_d_new.mul(cs.namespace(|| "label_d_new * rho"), rho)?;
    let label_r_new = AllocatedNum::alloc(cs.namespace(|| "label_r_new"), || {
        let old = label_r_old
            .get_value()
            .ok_or(SynthesisError::AssignmentMissing)?;
        let d_rho = label_d_new_rho
            .get_value()
            .ok_or(SynthesisError::AssignmentMissing)?;
        Ok(old + d_rho)
    })?;
    cs.enforce(
        || "label_r_new == label_r_old + label_d_new * rho",
        |lc| lc + label_r_old.get_variable() + label_d_new_rho.get_variable(),
        |lc| lc + CS::one(),
        |lc| lc + label_r_new.get_variable(),
    );
    Ok(label_r_new)
}
