//! A witness-only mirror of bellperson 0.27's SHA-256 gadget (`gadgets::sha256::sha256`
//! over `uint32::UInt32`, `boolean::Boolean` and `multieq::MultiEq`): given the input bits
//! as the gadget sees them, [`sha256`] allocates exactly the variables the gadget
//! allocates, in the same order and with the same values, counts as many constraints, and
//! returns the digest bits as the gadget's `Boolean`s would be. It builds no linear
//! combination: on a witness-only system the gadget's cost is almost all the sums of
//! `UInt32::addmany` and the `MultiEq` accumulator, which only feed `enforce`.
//!
//! Which bits are constants decides whether xor, ch, maj and addmany allocate, so the
//! constants (padding, the IV, round constants, `shr`'s fill) are carried as the gadget
//! carries them. Tested bit for bit against the gadget (`native/tests.rs`).

use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;

use super::bits::{alloc_bit, alloc_value, enforce, Bit, CAPACITY};

/// SHA-256's round constants (FIPS 180-4, 4.2.2).
const K: [u32; 64] = [
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
];

/// SHA-256's initial hash value (FIPS 180-4, 5.3.3).
const IV: [u32; 8] = [
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
];

/// `sha256(cs, input)`: `input` (a whole number of bytes) padded with constant bits, then
/// one compression per 512-bit block from the constant IV. The digest's 256 bits, big-endian
/// per word as the gadget returns them.
///
/// # Errors
/// `Unsatisfiable` when `input` is not a whole number of bytes (the gadget asserts it);
/// the system's own allocation errors.
pub(crate) fn sha256<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    input: &[Bit],
) -> Result<Vec<Bit>, SynthesisError> {
    if !input.len().is_multiple_of(8) {
        return Err(SynthesisError::Unsatisfiable);
    }
    let len = input.len() as u64;
    let mut padded = Vec::with_capacity(input.len() + 576);
    padded.extend_from_slice(input);
    padded.push(Bit::Const(true));
    while !(padded.len() + 64).is_multiple_of(512) {
        padded.push(Bit::Const(false));
    }
    padded.extend((0..64).rev().map(|i| Bit::Const(len >> i & 1 == 1)));
    let mut state = IV.map(Word::constant);
    for block in padded.chunks_exact(512) {
        state = compress(cs, block, &state)?;
    }
    Ok(state.iter().flat_map(Word::bits_be).collect())
}

/// A `UInt32`: 32 bits, least significant first, and its value.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Word {
    bits: [Bit; 32],
    value: u32,
}

impl Word {
    /// `UInt32::constant`.
    pub(crate) fn constant(value: u32) -> Word {
        Word {
            bits: std::array::from_fn(|i| Bit::Const(value >> i & 1 == 1)),
            value,
        }
    }

    /// `UInt32::from_bits_be`: `bits[0]` is the most significant.
    fn from_bits_be(bits: &[Bit]) -> Word {
        let value = bits.iter().fold(0u32, |v, b| v << 1 | u32::from(b.value()));
        Word {
            bits: std::array::from_fn(|i| bits[31 - i]),
            value,
        }
    }

    /// `UInt32::into_bits_be`.
    pub(crate) fn bits_be(&self) -> impl Iterator<Item = Bit> + '_ {
        self.bits.iter().rev().copied()
    }

    fn rotr(&self, by: usize) -> Word {
        Word {
            bits: std::array::from_fn(|i| self.bits[(i + by) % 32]),
            value: self.value.rotate_right(by as u32),
        }
    }

    fn shr(&self, by: usize) -> Word {
        Word {
            bits: std::array::from_fn(|i| {
                self.bits.get(i + by).copied().unwrap_or(Bit::Const(false))
            }),
            value: self.value >> by,
        }
    }
}

/// One `sha256_compression_function` call: its own `MultiEq`, whose packed equalities are
/// counted as they fill a scalar's capacity and once more when it is dropped.
struct Compression<'a, CS> {
    cs: &'a mut CS,
    /// `MultiEq::bits_used`.
    bits_used: usize,
}

/// `a` of the round loop: a word, or the operands of a sum not yet made (`Maybe`).
enum Pending {
    Done(Word),
    Sum(Vec<Word>),
}

fn compress<CS: ConstraintSystem<Fr>>(
    cs: &mut CS,
    block: &[Bit],
    current: &[Word; 8],
) -> Result<[Word; 8], SynthesisError> {
    let mut c = Compression { cs, bits_used: 0 };
    let out = c.rounds(block, current)?;
    // `MultiEq`'s drop: the last packed equality.
    if c.bits_used > 0 {
        enforce(c.cs);
    }
    Ok(out)
}

impl<CS: ConstraintSystem<Fr>> Compression<'_, CS> {
    fn rounds(&mut self, block: &[Bit], current: &[Word; 8]) -> Result<[Word; 8], SynthesisError> {
        let mut w: Vec<Word> = block.chunks_exact(32).map(Word::from_bits_be).collect();
        for i in 16..64 {
            let x = w[i - 15];
            let s0 = self.xor(&x.rotr(7), &x.rotr(18))?;
            let s0 = self.xor(&s0, &x.shr(3))?;
            let y = w[i - 2];
            let s1 = self.xor(&y.rotr(17), &y.rotr(19))?;
            let s1 = self.xor(&s1, &y.shr(10))?;
            let sum = self.addmany(&[w[i - 16], s0, w[i - 7], s1])?;
            w.push(sum);
        }

        let mut a = Pending::Done(current[0]);
        let [_, mut b, mut c, mut d, _, mut f, mut g, mut h] = *current;
        let mut e = Pending::Done(current[4]);
        for (i, &k) in K.iter().enumerate() {
            let new_e = self.settle(e, &[])?;
            let s1 = self.xor(&new_e.rotr(6), &new_e.rotr(11))?;
            let s1 = self.xor(&s1, &new_e.rotr(25))?;
            let ch = self.triop(&new_e, &f, &g, Self::ch)?;
            let temp1 = [h, s1, ch, Word::constant(k), w[i]];

            let new_a = self.settle(a, &[])?;
            let s0 = self.xor(&new_a.rotr(2), &new_a.rotr(13))?;
            let s0 = self.xor(&s0, &new_a.rotr(22))?;
            let maj = self.triop(&new_a, &b, &c, Self::maj)?;

            h = g;
            g = f;
            f = new_e;
            e = Pending::Sum(temp1.iter().copied().chain([d]).collect());
            d = c;
            c = b;
            b = new_a;
            a = Pending::Sum(temp1.iter().copied().chain([s0, maj]).collect());
        }

        let h0 = self.settle(a, &[current[0]])?;
        let h1 = self.addmany(&[current[1], b])?;
        let h2 = self.addmany(&[current[2], c])?;
        let h3 = self.addmany(&[current[3], d])?;
        let h4 = self.settle(e, &[current[4]])?;
        let h5 = self.addmany(&[current[5], f])?;
        let h6 = self.addmany(&[current[6], g])?;
        let h7 = self.addmany(&[current[7], h])?;
        Ok([h0, h1, h2, h3, h4, h5, h6, h7])
    }

    /// `Maybe::compute`: a pending sum is made with `others` appended; a made word is
    /// returned as it is (`others` ignored, as the gadget does).
    fn settle(&mut self, p: Pending, others: &[Word]) -> Result<Word, SynthesisError> {
        match p {
            Pending::Done(w) => Ok(w),
            Pending::Sum(mut ops) => {
                ops.extend_from_slice(others);
                self.addmany(&ops)
            }
        }
    }

    /// `UInt32::xor`, bit by bit from the least significant.
    fn xor(&mut self, x: &Word, y: &Word) -> Result<Word, SynthesisError> {
        let mut bits = [Bit::Const(false); 32];
        for (out, (&a, &b)) in bits.iter_mut().zip(x.bits.iter().zip(&y.bits)) {
            *out = self.xor_bit(a, b)?;
        }
        Ok(Word {
            bits,
            value: x.value ^ y.value,
        })
    }

    /// `UInt32::triop` with a per-bit gadget (`sha256_ch` or `sha256_maj`).
    fn triop(
        &mut self,
        x: &Word,
        y: &Word,
        z: &Word,
        op: fn(&mut Self, Bit, Bit, Bit) -> Result<Bit, SynthesisError>,
    ) -> Result<Word, SynthesisError> {
        let mut bits = [Bit::Const(false); 32];
        for (i, out) in bits.iter_mut().enumerate() {
            *out = op(self, x.bits[i], y.bits[i], z.bits[i])?;
        }
        let value = bits
            .iter()
            .rev()
            .fold(0u32, |v, b| v << 1 | u32::from(b.value()));
        Ok(Word { bits, value })
    }

    /// `Boolean::xor`: constants fold; two allocated bits give one allocated bit of the
    /// xor of their variables, negated when their polarities differ.
    fn xor_bit(&mut self, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
        Ok(match (a, b) {
            (Bit::Const(false), x) | (x, Bit::Const(false)) => x,
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x.not(),
            (Bit::Is(u), Bit::Not(v)) | (Bit::Not(v), Bit::Is(u)) => {
                self.gate(u ^ v)?;
                Bit::Not(u ^ v)
            }
            (Bit::Is(u), Bit::Is(v)) | (Bit::Not(u), Bit::Not(v)) => {
                self.gate(u ^ v)?;
                Bit::Is(u ^ v)
            }
        })
    }

    /// `Boolean::and`: constants fold; otherwise `and`, `and_not` or `nor` of the
    /// variables, whose value is always the and of the two bits' values.
    fn and_bit(&mut self, a: Bit, b: Bit) -> Result<Bit, SynthesisError> {
        Ok(match (a, b) {
            (Bit::Const(false), _) | (_, Bit::Const(false)) => Bit::Const(false),
            (Bit::Const(true), x) | (x, Bit::Const(true)) => x,
            _ => {
                let v = a.value() & b.value();
                self.gate(v)?;
                Bit::Is(v)
            }
        })
    }

    /// `Boolean::sha256_ch`: `(a ∧ b) ⊕ (¬a ∧ c)`, with the gadget's constant cases in its
    /// order.
    fn ch(&mut self, a: Bit, b: Bit, c: Bit) -> Result<Bit, SynthesisError> {
        let v = (a.value() & b.value()) ^ (!a.value() & c.value());
        Ok(match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Bit::Const(v),
            (Bit::Const(false), _, c) => c,
            (a, Bit::Const(false), c) => self.and_bit(a.not(), c)?,
            (a, b, Bit::Const(false)) => self.and_bit(a, b)?,
            (a, b, Bit::Const(true)) => self.and_bit(a, b.not())?.not(),
            (a, Bit::Const(true), c) => self.and_bit(a.not(), c.not())?.not(),
            _ => {
                self.gate(v)?;
                Bit::Is(v)
            }
        })
    }

    /// `Boolean::sha256_maj`: `(a ∧ b) ⊕ (a ∧ c) ⊕ (b ∧ c)`, with the gadget's constant
    /// cases in its order; in general `maj` is allocated, then `b ∧ c`, then `maj`'s
    /// constraint.
    fn maj(&mut self, a: Bit, b: Bit, c: Bit) -> Result<Bit, SynthesisError> {
        let (x, y, z) = (a.value(), b.value(), c.value());
        let v = (x & y) ^ (x & z) ^ (y & z);
        Ok(match (a, b, c) {
            (Bit::Const(_), Bit::Const(_), Bit::Const(_)) => Bit::Const(v),
            (Bit::Const(false), b, c) => self.and_bit(b, c)?,
            (a, Bit::Const(false), c) => self.and_bit(a, c)?,
            (a, b, Bit::Const(false)) => self.and_bit(a, b)?,
            (a, b, Bit::Const(true)) => self.and_bit(a.not(), b.not())?.not(),
            (a, Bit::Const(true), c) => self.and_bit(a.not(), c.not())?.not(),
            (Bit::Const(true), b, c) => self.and_bit(b.not(), c.not())?.not(),
            _ => {
                alloc_value(self.cs, v)?;
                self.and_bit(b, c)?;
                enforce(self.cs);
                Bit::Is(v)
            }
        })
    }

    /// One allocated result bit and its constraint (`AllocatedBit::xor`, `and`, ...).
    fn gate(&mut self, v: bool) -> Result<(), SynthesisError> {
        alloc_value(self.cs, v)?;
        enforce(self.cs);
        Ok(())
    }

    /// `UInt32::addmany`: a constant when every operand bit is; otherwise the sum's bits
    /// (as many as `operands.len()·(2^32 − 1)` needs, carries included) allocated as
    /// booleans and one equality handed to the `MultiEq`, and the low 32 bits returned.
    fn addmany(&mut self, operands: &[Word]) -> Result<Word, SynthesisError> {
        let sum: u64 = operands.iter().map(|w| u64::from(w.value)).sum();
        if operands.iter().all(|w| w.bits.iter().all(|b| b.is_const())) {
            return Ok(Word::constant(sum as u32));
        }
        let max = operands.len() as u64 * u64::from(u32::MAX);
        let n_bits = (u64::BITS - max.leading_zeros()) as usize;
        let mut bits = [Bit::Const(false); 32];
        for i in 0..n_bits {
            let bit = alloc_bit(self.cs, sum >> i & 1 == 1)?;
            if let Some(slot) = bits.get_mut(i) {
                *slot = bit;
            }
        }
        // `MultiEq::enforce_equal`: a full accumulator is flushed first.
        if CAPACITY <= self.bits_used + n_bits {
            enforce(self.cs);
            self.bits_used = 0;
        }
        self.bits_used += n_bits;
        Ok(Word {
            bits,
            value: sum as u32,
        })
    }
}
