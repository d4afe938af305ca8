//! The native mirrors against the gadgets they mirror, on a witness-only system: the same
//! values in the same order, the same constraint count, the same output bits. See: #17.

use bellperson::gadgets::boolean::{AllocatedBit, Boolean};
use bellperson::gadgets::sha256::sha256 as sha256_gadget;
use bellperson::SynthesisError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use sha2::Digest;

use super::bits::{alloc_bit, Bit};
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
