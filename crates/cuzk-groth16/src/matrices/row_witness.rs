//! A witness made ready for evaluating rows of a, b, c: most of a PoRep witness is bits
//! (SHA-256), so a row's term mostly adds nothing (a zero) or its coefficient (a one). A
//! byte per aux value saying which lets a term read that byte instead of the 32-byte value:
//! the products read about a thirtieth of the witness bytes they read before, which is what
//! bounds them on a host whose memory bandwidth synthesis shares.

use blst::blst_fr;
use rayon::prelude::*;

use crate::Scalar;

/// The kind of an aux value: zero.
pub(super) const ZERO: u8 = 0;
/// The kind of an aux value: one.
pub(super) const ONE: u8 = 1;
/// The kind of an aux value: neither (its term reads the value).
pub(super) const OTHER: u8 = 2;

/// `Scalar::ONE`'s Montgomery limbs (R mod r), which `blst_fr` holds.
const ONE_LIMBS: [u64; 4] = [
    0x0000_0001_ffff_fffe,
    0x5884_b7fa_0003_4802,
    0x998c_4fef_ecbc_4ff5,
    0x1824_b159_acc5_056f,
];

/// Aux values classified per piece of the parallel pass.
const PIECE: usize = 1 << 16;

/// z = (inputs ‖ aux), checked against a recording's counts
/// ([`R1cs::row_witness`](super::R1cs::row_witness)), with each aux value's kind in a byte.
/// Rows are evaluated from it with [`R1cs::eval_row`](super::R1cs::eval_row). It holds
/// one byte per aux value beside the borrowed witness ([`RowWitness::host_bytes`]).
#[derive(Debug)]
pub struct RowWitness<'a> {
    /// The recording's id (`R1cs::id`) it was checked against.
    pub(super) recording: u64,
    pub(super) inputs: &'a [Scalar],
    pub(super) aux: &'a [Scalar],
    pub(super) kinds: Vec<u8>,
}

impl<'a> RowWitness<'a> {
    /// Classifies `aux` on the current rayon pool; the caller checked the counts against
    /// recording `recording`.
    pub(super) fn new(recording: u64, inputs: &'a [Scalar], aux: &'a [Scalar]) -> RowWitness<'a> {
        let mut kinds = vec![0u8; aux.len()];
        kinds
            .par_chunks_mut(PIECE)
            .zip(aux.par_chunks(PIECE))
            .for_each(|(kinds, aux)| {
                for (k, v) in kinds.iter_mut().zip(aux) {
                    *k = kind(v);
                }
            });
        RowWitness {
            recording,
            inputs,
            aux,
            kinds,
        }
    }

    /// Host bytes it holds beside the witness: the kinds, one per aux value.
    pub fn host_bytes(&self) -> usize {
        self.kinds.len()
    }
}

/// Zero, one or other, from the limbs (a comparison of `Scalar`s is constant-time and
/// several times dearer).
fn kind(v: &Scalar) -> u8 {
    match blst_fr::from(*v).l {
        [0, 0, 0, 0] => ZERO,
        ONE_LIMBS => ONE,
        _ => OTHER,
    }
}

#[cfg(test)]
mod tests {
    use ff::Field;
    use rand::{rngs::StdRng, SeedableRng};

    use super::*;

    #[test]
    fn the_one_limbs_are_the_fields() {
        assert_eq!(blst_fr::from(Scalar::ONE).l, ONE_LIMBS);
    }

    #[test]
    fn kinds_name_zero_one_and_the_rest() {
        let mut rng = StdRng::seed_from_u64(rand::random());
        let mut aux = vec![
            Scalar::ZERO,
            Scalar::ONE,
            -Scalar::ONE,
            Scalar::from(2u64),
            Scalar::ONE.double() - Scalar::ONE,
        ];
        aux.extend((0..PIECE + 17).map(|i| match i % 3 {
            0 => Scalar::ZERO,
            1 => Scalar::ONE,
            _ => Scalar::random(&mut rng),
        }));
        let z = RowWitness::new(0, &[], &aux);
        assert_eq!(z.host_bytes(), aux.len());
        for (v, &k) in aux.iter().zip(&z.kinds) {
            let want = if *v == Scalar::ZERO {
                ZERO
            } else if *v == Scalar::ONE {
                ONE
            } else {
                OTHER
            };
            assert_eq!(k, want, "{v:?}");
        }
    }
}
