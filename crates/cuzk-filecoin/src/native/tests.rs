//! The native mirrors against the gadgets they mirror, on a witness-only system: the same
//! values in the same order, the same constraint count, the same output bits. See: #17.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::sha256::sha256 as sha256_gadget;
use bellperson::SynthesisError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::Digest;

use super::bits::{alloc_bit, Bit};
use super::por::poseidon_inclusion;
use super::poseidon::poseidon_hash;
use super::sha256::sha256;
use super::Collected;

/// How an input bit reaches the hash.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Constant,
    Allocated,
    Negated,
}

/// Random bytes, each bit of a kind drawn from `kinds`.
fn message(rng: &mut ChaCha8Rng, n_bytes: usize, kinds: &[Kind]) -> Vec<(Kind, bool)> {
    (0..n_bytes * 8)
        .map(|_| (kinds[rng.gen_range(0..kinds.len())], rng.gen::<bool>()))
        .collect()
}

fn through_gadget(msg: &[(Kind, bool)]) -> Result<(Collected, Vec<Bit>), SynthesisError> {
    let mut cs = Collected::with_one();
    let mut bits = Vec::with_capacity(msg.len());
    for &(kind, v) in msg {
        bits.push(match kind {
            Kind::Constant => Boolean::constant(v),
            Kind::Allocated => Boolean::from(AllocatedBit::alloc(&mut cs, Some(v))?),
            Kind::Negated => Boolean::from(AllocatedBit::alloc(&mut cs, Some(!v))?).not(),
        });
    }
    let digest = sha256_gadget(&mut cs, &bits)?;
    let digest = digest.iter().map(Bit::of).collect::<Result<_, _>>()?;
    Ok((cs, digest))
}

fn through_native(msg: &[(Kind, bool)]) -> Result<(Collected, Vec<Bit>), SynthesisError> {
    let mut cs = Collected::with_one();
    let mut bits = Vec::with_capacity(msg.len());
    for &(kind, v) in msg {
        bits.push(match kind {
            Kind::Constant => Bit::Const(v),
            Kind::Allocated => alloc_bit(&mut cs, v)?,
            Kind::Negated => alloc_bit(&mut cs, !v)?.not(),
        });
    }
    let digest = sha256(&mut cs, &bits)?;
    Ok((cs, digest))
}

fn bytes_of(bits: &[bool]) -> Vec<u8> {
    bits.chunks(8)
        .map(|b| b.iter().fold(0u8, |byte, &x| byte << 1 | u8::from(x)))
        .collect()
}

/// The SHA-256 mirror allocates the gadget's values in its order, counts its constraints
/// and returns its digest bits (constants where the gadget's are), for one and several
/// blocks, the 64-byte tree-D node pair and the 1,248-byte label message, with inputs all
/// allocated, all constant, or mixed with negated bits; and the digest is SHA-256.
#[test]
fn sha256_mirror_is_the_gadget_bit_for_bit() {
    use Kind::*;
    let mixes: [&[Kind]; 4] = [
        &[Allocated],
        &[Constant],
        &[Allocated, Constant],
        &[Allocated, Negated, Constant],
    ];
    let seed = 17u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for n_bytes in [0usize, 1, 3, 55, 56, 64, 100, 119, 1248] {
        for kinds in mixes {
            let msg = message(&mut rng, n_bytes, kinds);
            let (want, want_digest) = through_gadget(&msg).expect("gadget");
            let (got, got_digest) = through_native(&msg).expect("native");
            let case = format!("seed {seed}, {n_bytes} bytes of {kinds:?}");
            assert_eq!(got.difference(&want), None, "{case}");
            assert_eq!(got, want, "{case}");
            assert_eq!(got_digest, want_digest, "{case}");
            let values: Vec<bool> = msg.iter().map(|&(_, v)| v).collect();
            let digest: Vec<bool> = got_digest.iter().map(|b| b.value()).collect();
            assert_eq!(
                bytes_of(&digest),
                sha2::Sha256::digest(bytes_of(&values)).to_vec(),
                "{case}"
            );
        }
    }
}

/// A message that is not whole bytes is refused, not hashed (the gadget asserts).
#[test]
fn sha256_mirror_refuses_a_partial_byte() {
    let mut cs = Collected::with_one();
    let err = sha256(&mut cs, &[Bit::Const(true); 7]).expect_err("7 bits");
    assert!(matches!(err, SynthesisError::Unsatisfiable), "{err:?}");
}

/// Random field elements, allocated as the gadget's preimage and as the mirror's values.
fn preimage(rng: &mut ChaCha8Rng, n: usize) -> Vec<blstrs::Scalar> {
    use ff::Field;
    (0..n).map(|_| blstrs::Scalar::random(&mut *rng)).collect()
}

/// The Poseidon mirror allocates the legacy gadget's values in its order, counts its
/// constraints and returns its digest, for every arity the Filecoin circuits hash with
/// (2: `hash2_circuit`, 2 KiB columns, top trees; 4; 8: trees C and R; 11: 32 GiB
/// columns; 16), on random preimages, zeros and ones; the digest is neptune's native hash.
#[test]
fn poseidon_mirror_is_the_gadget_bit_for_bit() {
    use bellperson::gadgets::num::AllocatedNum;
    use ff::Field;
    use filecoin_hashers::{
        POSEIDON_CONSTANTS_11, POSEIDON_CONSTANTS_16, POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_4,
        POSEIDON_CONSTANTS_8,
    };
    use neptune::poseidon::{Arity, PoseidonConstants};

    fn check<A: Arity<blstrs::Scalar>>(
        constants: &PoseidonConstants<blstrs::Scalar, A>,
        values: &[blstrs::Scalar],
        case: &str,
    ) {
        let mut want = Collected::with_one();
        let nums = values
            .iter()
            .map(|&v| AllocatedNum::alloc(&mut want, || Ok(v)))
            .collect::<Result<Vec<_>, _>>()
            .expect("alloc");
        let want_digest =
            neptune::circuit::poseidon_hash(&mut want, nums, constants).expect("gadget");
        let mut got = Collected::with_one();
        for &v in values {
            AllocatedNum::alloc(&mut got, || Ok(v)).expect("alloc");
        }
        let got_digest = poseidon_hash(&mut got, values, constants).expect("native");
        assert_eq!(got.difference(&want), None, "{case}");
        assert_eq!(got, want, "{case}");
        assert_eq!(got_digest.get_value(), want_digest.get_value(), "{case}");
        let native = neptune::Poseidon::new_with_preimage(values, constants).hash();
        assert_eq!(got_digest.get_value(), Some(native), "{case}");
    }

    let seed = 17u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for round in 0..3 {
        let case = |arity: usize| format!("seed {seed}, round {round}, arity {arity}");
        let fill = |rng: &mut ChaCha8Rng, n| match round {
            0 => vec![blstrs::Scalar::ZERO; n],
            1 => vec![blstrs::Scalar::ONE; n],
            _ => preimage(rng, n),
        };
        check(&*POSEIDON_CONSTANTS_2, &fill(&mut rng, 2), &case(2));
        check(&*POSEIDON_CONSTANTS_4, &fill(&mut rng, 4), &case(4));
        check(&*POSEIDON_CONSTANTS_8, &fill(&mut rng, 8), &case(8));
        check(&*POSEIDON_CONSTANTS_11, &fill(&mut rng, 11), &case(11));
        check(&*POSEIDON_CONSTANTS_16, &fill(&mut rng, 16), &case(16));
    }
}

/// A preimage of another length than the constants' arity is refused, not hashed (the
/// gadget asserts).
#[test]
fn poseidon_mirror_refuses_a_preimage_of_the_wrong_arity() {
    let mut cs = Collected::with_one();
    let hashed = poseidon_hash(
        &mut cs,
        &[blstrs::Scalar::from(1u64); 3],
        &*filecoin_hashers::POSEIDON_CONSTANTS_8,
    );
    let Err(err) = hashed else {
        panic!("3 elements hashed at arity 8");
    };
    assert!(matches!(err, SynthesisError::Unsatisfiable), "{err:?}");
}

/// A path of `arities` (per level), random siblings and index digits, and the root it
/// opens to by neptune's native hash.
fn poseidon_path(
    rng: &mut ChaCha8Rng,
    leaf: blstrs::Scalar,
    arities: &[usize],
) -> (super::por::Path, blstrs::Scalar) {
    use filecoin_hashers::{POSEIDON_CONSTANTS_2, POSEIDON_CONSTANTS_8};
    let mut cur = leaf;
    let mut path = Vec::with_capacity(arities.len());
    for &arity in arities {
        let siblings = preimage(rng, arity - 1);
        let index = rng.gen_range(0..arity);
        let mut children = siblings.clone();
        children.insert(index, cur);
        cur = match arity {
            2 => neptune::Poseidon::new_with_preimage(&children, &*POSEIDON_CONSTANTS_2).hash(),
            8 => neptune::Poseidon::new_with_preimage(&children, &*POSEIDON_CONSTANTS_8).hash(),
            _ => unreachable!("the test trees have arities 2 and 8"),
        };
        path.push((siblings.into_iter().map(Some).collect(), Some(index)));
    }
    (path, cur)
}

/// Trees C and R's inclusion: the mirror allocates the real `PoRCircuit`'s values in its
/// order and counts its constraints, for every tree shape of the PoRep sector sizes (base
/// only, 2- and 8-ary sub-trees, a 2-ary top tree), and computes the path's root.
#[test]
fn poseidon_inclusion_mirror_is_the_por_circuit_bit_for_bit() {
    use bellperson::gadgets::num::AllocatedNum;
    use filecoin_proofs::{
        MerkleTreeTrait, SectorShape2KiB, SectorShape32GiB, SectorShape4KiB, SectorShape64GiB,
    };
    use storage_proofs_core::gadgets::por::PoRCircuit;
    use storage_proofs_core::gadgets::variables::Root;

    fn check<Tree: MerkleTreeTrait>(rng: &mut ChaCha8Rng, arities: &[usize], case: &str) {
        let leaf = preimage(rng, 1)[0];
        let (path, root) = poseidon_path(rng, leaf, arities);
        let mut want = Collected::with_one();
        let leaf_num = AllocatedNum::alloc(&mut want, || Ok(leaf)).expect("alloc");
        let root_num = AllocatedNum::alloc(&mut want, || Ok(root)).expect("alloc");
        PoRCircuit::<Tree>::synthesize(
            &mut want,
            Root::Var(leaf_num),
            path.clone().into(),
            Root::Var(root_num),
            true,
        )
        .expect("gadget");
        let mut got = Collected::with_one();
        let leaf_num = AllocatedNum::alloc(&mut got, || Ok(leaf)).expect("alloc");
        let root_num = AllocatedNum::alloc(&mut got, || Ok(root)).expect("alloc");
        let computed =
            poseidon_inclusion::<Tree, _>(&mut got, path, &leaf_num, &root_num).expect("native");
        assert_eq!(got.difference(&want), None, "{case}");
        assert_eq!(got, want, "{case}");
        assert_eq!(computed.get_value(), Some(root), "{case}");
    }

    let seed = 17u64;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for round in 0..2 {
        let case = |shape: &str| format!("seed {seed}, round {round}, {shape}");
        check::<SectorShape2KiB>(&mut rng, &[8, 8], &case("8-0-0"));
        check::<SectorShape4KiB>(&mut rng, &[8, 2], &case("8-2-0"));
        check::<SectorShape32GiB>(&mut rng, &[8, 8, 8, 8], &case("8-8-0"));
        check::<SectorShape64GiB>(&mut rng, &[8, 8, 8, 2], &case("8-8-2"));
    }
}

/// A path of another shape than the tree's is refused by name, not hashed or panicked on
/// (the gadget asserts): a level with a sibling too few, and a path shorter than the
/// levels above a tree's base.
#[test]
fn poseidon_inclusion_mirror_refuses_a_path_of_another_shape() {
    use bellperson::gadgets::num::AllocatedNum;
    use filecoin_proofs::{SectorShape32GiB, SectorShape64GiB};

    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let leaf = preimage(&mut rng, 1)[0];
    let mut cs = Collected::with_one();
    let leaf = AllocatedNum::alloc(&mut cs, || Ok(leaf)).expect("alloc");
    let (mut short_level, _) = poseidon_path(&mut rng, blstrs::Scalar::from(1u64), &[8, 8]);
    short_level[1].0.pop();
    let (one_level, _) = poseidon_path(&mut rng, blstrs::Scalar::from(1u64), &[8]);
    let refusals = [
        (
            poseidon_inclusion::<SectorShape32GiB, _>(&mut cs, short_level, &leaf, &leaf),
            "a tree level of 6 siblings at arity 8",
        ),
        (
            poseidon_inclusion::<SectorShape64GiB, _>(&mut cs, one_level, &leaf, &leaf),
            "a path of 1 levels for a tree of 2 above its base",
        ),
    ];
    for (result, want) in refusals {
        let Err(err) = result else {
            panic!("a malformed path was hashed ({want})");
        };
        assert!(err.to_string().contains(want), "{err}");
    }
}
