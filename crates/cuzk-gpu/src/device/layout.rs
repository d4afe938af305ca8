//! The one audited place where blstrs values are viewed as raw words for the device.
//!
//! blstrs' `Scalar` is `#[repr(transparent)]` over `blst_fr` (4 × u64, Montgomery,
//! little-endian), `G1Affine` over `blst_p1_affine` ({x, y}: 2 × `blst_fp` = 2 × 6 × u64,
//! Montgomery; infinity = all zero), `G2Affine` over `blst_p2_affine` ({x, y}: `blst_fp2`
//! = (c0, c1)). The kernels in `kernels/field.cuh` and `ec.cuh` use exactly these layouts
//! with 32-bit limbs, which on a little-endian host is the same bytes. The size asserts
//! below pin the layouts at compile time.

use blstrs::{Fp, Fp2, G1Affine, G1Projective, G2Affine, G2Projective, Scalar};

const _: () = assert!(std::mem::size_of::<Scalar>() == 32);
const _: () = assert!(std::mem::size_of::<G1Affine>() == 96);
const _: () = assert!(std::mem::size_of::<G2Affine>() == 192);
const _: () = assert!(std::mem::size_of::<Fp>() == 48);
const _: () = assert!(cfg!(target_endian = "little"));

/// Bytes of one Fr element on the device.
pub const FR_BYTES: usize = 32;
/// Bytes of one affine G1 point.
pub const G1_AFFINE_BYTES: usize = 96;
/// Bytes of one affine G2 point.
pub const G2_AFFINE_BYTES: usize = 192;

/// Marker for the blstrs types whose memory is plain little-endian words (no padding, no
/// pointers, every bit pattern a valid value as far as memory safety goes).
///
/// # Safety
/// Implement only for `#[repr(transparent)]` wrappers over blst's plain `u64` structs.
pub unsafe trait Plain: Copy {}
// SAFETY: repr(transparent) over blst_fr { l: [u64; 4] }.
unsafe impl Plain for Scalar {}
// SAFETY: repr(transparent) over blst_p1_affine { x: [u64; 6], y: [u64; 6] }, repr(C).
unsafe impl Plain for G1Affine {}
// SAFETY: repr(transparent) over blst_p2_affine { x: fp2, y: fp2 }, repr(C), 24 × u64.
unsafe impl Plain for G2Affine {}

/// Views a slice of blstrs values as bytes.
pub fn as_bytes<T: Plain>(v: &[T]) -> &[u8] {
    // SAFETY: T: Plain has no padding and no invalid byte patterns; the length is the
    // slice's size in bytes and u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// Views a mutable slice of blstrs values as bytes (for downloads into them).
pub fn as_bytes_mut<T: Plain>(v: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; any bytes written form a valid T as far as memory goes
    // (a non-canonical field value is a wrong value, not undefined behaviour).
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
}

/// A vector of `n` all-zero-bytes values, allocated zeroed (large ones come from the
/// kernel as untouched zero pages, so this costs no pass over the memory), for outputs
/// filled by downloads through [`as_bytes_mut`].
pub fn zeroed_vec<T: Plain>(n: usize) -> Vec<T> {
    let size = std::mem::size_of::<T>();
    if n == 0 || size == 0 {
        return Vec::new();
    }
    let layout = std::alloc::Layout::array::<T>(n).expect("vector size overflows");
    // SAFETY: the layout has a non-zero size; a null result is handed to the allocation
    // error handler; the memory is zeroed, which is a valid T for T: Plain; the Vec takes
    // ownership with the same layout (capacity n of T, the global allocator).
    unsafe {
        let ptr = std::alloc::alloc_zeroed(layout).cast::<T>();
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Vec::from_raw_parts(ptr, n, n)
    }
}

/// The Montgomery limbs of a scalar as 8 × u32, for kernel arguments.
pub fn scalar_words(s: &Scalar) -> [u32; 8] {
    words(as_bytes(std::slice::from_ref(s)))
}

fn words<const N: usize>(b: &[u8]) -> [u32; N] {
    let mut w = [0u32; N];
    for (i, c) in b.chunks_exact(4).take(N).enumerate() {
        w[i] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
    }
    w
}

fn fp_at(b: &[u8], i: usize) -> Fp {
    let mut l = [0u64; 6];
    for (j, c) in b[i * 48..(i + 1) * 48].chunks_exact(8).enumerate() {
        let mut a = [0u8; 8];
        a.copy_from_slice(c);
        l[j] = u64::from_le_bytes(a);
    }
    Fp::from_raw_unchecked(l)
}

/// Bytes of a Jacobian G1 point from the device (X, Y, Z, Montgomery).
pub const G1_JACOBIAN_BYTES: usize = 144;
/// Bytes of a Jacobian G2 point from the device.
pub const G2_JACOBIAN_BYTES: usize = 288;

/// A G1 point from the device's Jacobian words; blst_p1 is Jacobian too.
///
/// # Panics
/// If `b` is shorter than [`G1_JACOBIAN_BYTES`] (a bug in this crate's buffer sizing).
pub fn g1_from_jacobian(b: &[u8]) -> G1Projective {
    G1Projective::from_raw_unchecked(fp_at(b, 0), fp_at(b, 1), fp_at(b, 2))
}

/// A G2 point from the device's Jacobian words (each coordinate c0, c1).
///
/// # Panics
/// If `b` is shorter than [`G2_JACOBIAN_BYTES`].
pub fn g2_from_jacobian(b: &[u8]) -> G2Projective {
    let f2 = |i: usize| Fp2::new(fp_at(b, 2 * i), fp_at(b, 2 * i + 1));
    G2Projective::from_raw_unchecked(f2(0), f2(1), f2(2))
}

/// Which group an MSM runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Group {
    /// G1 over Fp.
    G1,
    /// G2 over Fp2.
    G2,
}

impl Group {
    /// Bytes of an affine base.
    pub fn affine_bytes(self) -> usize {
        match self {
            Group::G1 => G1_AFFINE_BYTES,
            Group::G2 => G2_AFFINE_BYTES,
        }
    }
    /// Bytes of an XYZZ bucket.
    pub fn xyzz_bytes(self) -> usize {
        4 * self.affine_bytes() / 2
    }
    /// Bytes of a Jacobian result.
    pub fn jacobian_bytes(self) -> usize {
        match self {
            Group::G1 => G1_JACOBIAN_BYTES,
            Group::G2 => G2_JACOBIAN_BYTES,
        }
    }
    /// Threads per block for point kernels: G2 uses about twice the registers.
    pub(crate) fn block(self) -> u32 {
        match self {
            Group::G1 => 128,
            Group::G2 => 64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_vectors_hold_zeros_of_their_length() {
        let v: Vec<Scalar> = zeroed_vec(1000);
        assert_eq!(v.len(), 1000);
        assert!(v.iter().all(|s| bool::from(s.is_zero())));
        let mut p: Vec<G1Affine> = zeroed_vec(3);
        as_bytes_mut(&mut p[1..2]).fill(0xff);
        assert!(as_bytes(&p[..1]).iter().all(|&b| b == 0));
        assert!(as_bytes(&p[1..2]).iter().all(|&b| b == 0xff));
        assert!(zeroed_vec::<G2Affine>(0).is_empty());
    }
    use ff::Field;
    use group::{prime::PrimeCurveAffine, Curve, Group};

    #[test]
    fn one_is_montgomery_r() {
        // R mod r, the value field.cuh's FrParams::one holds.
        let w = scalar_words(&Scalar::ONE);
        assert_eq!(w[0], 0xfffffffe);
        assert_eq!(w[7], 0x1824b159);
    }

    #[test]
    fn jacobian_roundtrip_through_bytes() {
        // The device emits (X, Y, Z); for an affine point with Z = 1 (R mod p in Montgomery
        // form, the value field.cuh's FpParams::one holds) the same point must come back.
        let p = (G1Projective::generator() * Scalar::from(12345u64)).to_affine();
        let mut raw = as_bytes(std::slice::from_ref(&p)).to_vec();
        for l in [
            0x760900000002fffdu64,
            0xebf4000bc40c0002,
            0x5f48985753c758ba,
            0x77ce585370525745,
            0x5c071a97a256ec6d,
            0x15f65ec3fa80e493,
        ] {
            raw.extend_from_slice(&l.to_le_bytes());
        }
        assert_eq!(g1_from_jacobian(&raw).to_affine(), p);
        assert!(bool::from(
            g1_from_jacobian(&[0u8; G1_JACOBIAN_BYTES]).is_identity()
        ));
    }

    #[test]
    fn blst_p1_is_jacobian() {
        // (X Z^2, Y Z^3, Z) with Z = 2 is the same point as (X, Y, 1): blst_p1 is Jacobian,
        // which is what to_jacobian in ec.cuh emits.
        let p = (G1Projective::generator() * Scalar::from(777u64)).to_affine();
        let two = Fp::ONE.double();
        let x = p.x() * two.square();
        let y = p.y() * two.square() * two;
        assert_eq!(G1Projective::from_raw_unchecked(x, y, two).to_affine(), p);
    }

    #[test]
    fn infinity_is_all_zero() {
        assert!(as_bytes(&[G1Affine::identity()]).iter().all(|&b| b == 0));
        assert!(as_bytes(&[G2Affine::identity()]).iter().all(|&b| b == 0));
    }
}
