//! Bits as bellpepper's `Boolean` sees them, without their variables: [`Bit`] is a
//! constant, an allocated bit or a negated allocated bit, with the allocated value. That
//! is all the gadgets' allocation decisions depend on (constness and, for xor, whether two
//! operands have the same polarity), so a witness-only mirror of a gadget can decide
//! exactly as the gadget does while building no linear combination. Also the small
//! bit-level helpers of the Filecoin circuits the mirrors need: `AllocatedNum::to_bits_le`,
//! `reverse_bit_numbering` and `multipack::pack_bits`.
//!
//! Every function here allocates exactly the variables its gadget allocates, in the same
//! order and with the same values, and counts as many `enforce` calls; the `enforce`
//! closures are trivial (a witness-only system never calls them). They are only valid on
//! witness-only constraint systems.

use bellperson::gadgets::boolean::Boolean;
use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::{Field, PrimeField, PrimeFieldBits};

/// Field bits of a BLS12-381 scalar (`Fr::NUM_BITS`): what `to_bits_le` allocates.
pub(crate) const NUM_BITS: usize = 255;
/// Bits a scalar holds without reduction (`Fr::CAPACITY`): what `pack_bits` packs.
pub(crate) const CAPACITY: usize = 254;

/// One bit as a `Boolean`: a constant, or the value of an allocated bit, read as is or
/// negated. The payload of `Is` and `Not` is the allocated variable's own value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bit {
    /// `Boolean::Constant`.
    Const(bool),
    /// `Boolean::Is`: an allocated bit of this value.
    Is(bool),
    /// `Boolean::Not`: the negation of an allocated bit of this value.
    Not(bool),
}

impl Bit {
    /// The bit's value (a `Not` is the negated variable's).
    pub(crate) fn value(self) -> bool {
        match self {
            Bit::Const(b) | Bit::Is(b) => b,
            Bit::Not(b) => !b,
        }
    }

    /// `Boolean::not`: no variable.
    pub(crate) fn not(self) -> Bit {
        match self {
            Bit::Const(b) => Bit::Const(!b),
            Bit::Is(v) => Bit::Not(v),
            Bit::Not(v) => Bit::Is(v),
        }
    }

    pub(crate) fn is_const(self) -> bool {
        matches!(self, Bit::Const(_))
    }

    /// The bit a gadget's `Boolean` stands for.
    ///
    /// # Errors
    /// `AssignmentMissing` for an allocated bit without a value (a blank circuit).
    pub(crate) fn of(b: &Boolean) -> Result<Bit, SynthesisError> {
        let value = |v: Option<bool>| v.ok_or(SynthesisError::AssignmentMissing);
        Ok(match b {
            Boolean::Constant(c) => Bit::Const(*c),
            Boolean::Is(a) => Bit::Is(value(a.get_value())?),
            Boolean::Not(a) => Bit::Not(value(a.get_value())?),
        })
    }
}

/// Allocates one variable of value `v` (0 or 1).
pub(crate) fn alloc_value<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    v: bool,
) -> Result<(), SynthesisError> {
    cs.alloc(|| "", || Ok(if v { Fr::ONE } else { Fr::ZERO }))?;
    Ok(())
}

/// Counts one constraint; its closures are never called by a witness-only system.
pub(crate) fn enforce<CS: ConstraintSystem<Fr>>(cs: &mut CS) {
    cs.enforce(|| "", |lc| lc, |lc| lc, |lc| lc);
}

/// `AllocatedBit::alloc`: the bit, then its booleanity constraint.
pub(crate) fn alloc_bit<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    v: bool,
) -> Result<Bit, SynthesisError> {
    alloc_value(cs, v)?;
    enforce(cs);
    Ok(Bit::Is(v))
}

/// `AllocatedNum::to_bits_le` of a number of value `x`: its 255 little-endian bits
/// allocated (`field_into_allocated_bits_le`), then the unpacking constraint.
pub(crate) fn num_to_bits_le<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    x: Fr,
) -> Result<Vec<Bit>, SynthesisError> {
    let le = x.to_le_bits();
    let mut bits = Vec::with_capacity(NUM_BITS + 1);
    for i in 0..NUM_BITS {
        bits.push(alloc_bit(cs, le[i])?);
    }
    enforce(cs);
    Ok(bits)
}

/// storage-proofs' `reverse_bit_numbering`: padded with constant zeros to whole bytes,
/// then each byte's bits reversed.
pub(crate) fn reverse_bit_numbering(mut bits: Vec<Bit>) -> Vec<Bit> {
    while !bits.len().is_multiple_of(8) {
        bits.push(Bit::Const(false));
    }
    for byte in bits.chunks_exact_mut(8) {
        byte.reverse();
    }
    bits
}

/// `multipack::pack_bits`: the number `Σ bits[i]·2^i` over the first 254 bits, allocated
/// as an `AllocatedNum` (the gadget's one variable), then the packing constraint.
pub(crate) fn pack_bits<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    bits: &[Bit],
) -> Result<AllocatedNum<Fr>, SynthesisError> {
    let mut repr = [0u8; 32];
    for (i, b) in bits.iter().take(CAPACITY).enumerate() {
        repr[i / 8] |= u8::from(b.value()) << (i % 8);
    }
    // Below 2^254, so below the modulus: always a canonical encoding.
    let value: Option<Fr> = Fr::from_repr(repr).into();
    let value = value.ok_or(SynthesisError::Unsatisfiable)?;
    let num = AllocatedNum::alloc(&mut *cs, || Ok(value))?;
    enforce(cs);
    Ok(num)
}
