//! A witness-only mirror of neptune 11's legacy Poseidon circuit (`circuit::poseidon_hash`,
//! the one storage-proofs 19.1 hashes with: column hashes, `hash2_circuit` and
//! `hash_multi_leaf_circuit` of trees C and R): given the preimage values, [`poseidon_hash`]
//! allocates exactly the variables the gadget allocates, in the same order and with the same
//! values, counts as many constraints, and returns the digest as the gadget's `AllocatedNum`.
//! It builds no linear combination: on a witness-only system the gadget's cost is almost all
//! its `Elt::Num` terms, rescaled by every MDS product, which only feed `enforce`.
//!
//! The round constants and matrices are neptune's own (`PoseidonConstants`, as filecoin-hashers
//! makes them): the mirror owns the schedule only. That schedule, read from the gadget:
//! - the state is the domain tag (a constant) then the preimage (allocated);
//! - the first full round adds a key before and after each S-box; the tag's S-box is computed
//!   as a constant, each preimage element's allocates `(l+k)²`, `(l+k)⁴` and `(l+k)⁵+k'`;
//! - every later S-box's input is a linear combination, so it first allocates the input, then
//!   `l²`, `l⁴` and `l⁵(+k)`: full rounds on every element, partial rounds on the first;
//! - full rounds add one key per element after the S-box, except the terminal one; partial
//!   rounds add one key; the MDS product after round `r` is the pre-sparse matrix for the
//!   last initial full round, a sparse matrix for each partial round and `M` otherwise;
//! - the digest is element 1 of the last state, allocated.
//!
//! Every allocation comes with one constraint. Tested against the gadget for every arity the
//! Filecoin circuits use (`native/tests.rs`).

use bellperson::gadgets::num::AllocatedNum;
use bellperson::{ConstraintSystem, SynthesisError};
use blstrs::Scalar as Fr;
use ff::Field;
use neptune::hash_type::HashType;
use neptune::poseidon::{Arity, PoseidonConstants};

use super::bits::enforce;

/// `neptune::circuit::poseidon_hash(cs, preimage, constants)` over preimage values.
///
/// # Errors
/// `Unsatisfiable` when `preimage` is not `constants.arity()` long or the constants are not
/// for a constant-length hash of that arity (the gadget asserts both); the system's own
/// allocation errors.
pub(crate) fn poseidon_hash<CS, A>(
    cs: &mut CS,
    preimage: &[Fr],
    constants: &PoseidonConstants<Fr, A>,
) -> Result<AllocatedNum<Fr>, SynthesisError>
where
    CS: ConstraintSystem<Fr>,
    A: Arity<Fr>,
{
    let arity = constants.arity();
    if preimage.len() != arity {
        return Err(SynthesisError::Unsatisfiable);
    }
    if let HashType::ConstantLength(length) = constants.hash_type {
        if length != arity {
            return Err(SynthesisError::Unsatisfiable);
        }
    }
    let mut state = Vec::with_capacity(constants.width());
    state.push(constants.domain_tag);
    state.extend_from_slice(preimage);
    let mut p = Permutation {
        cs,
        constants,
        state,
        key: 0,
        round: 0,
    };
    p.run()?;
    let digest = p.state[1];
    let num = AllocatedNum::alloc(&mut *p.cs, || Ok(digest))?;
    enforce(p.cs);
    Ok(num)
}

/// The gadget's `PoseidonCircuit`, values only: `key` is `constants_offset`, `round`
/// `current_round` (MDS products so far).
struct Permutation<'a, CS, A: Arity<Fr>> {
    cs: &'a mut CS,
    constants: &'a PoseidonConstants<Fr, A>,
    state: Vec<Fr>,
    key: usize,
    round: usize,
}

impl<CS: ConstraintSystem<Fr>, A: Arity<Fr>> Permutation<'_, CS, A> {
    /// `PoseidonCircuit::hash` up to (not including) the digest's allocation.
    fn run(&mut self) -> Result<(), SynthesisError> {
        let half = self.constants.full_rounds / 2;
        self.first_round()?;
        for _ in 1..half {
            self.full_round(true)?;
        }
        for _ in 0..self.constants.partial_rounds {
            self.partial_round()?;
        }
        for _ in 0..half.saturating_sub(1) {
            self.full_round(true)?;
        }
        self.full_round(false)
    }

    /// The next `n` compressed round constants.
    fn keys(&mut self, n: usize) -> Result<&[Fr], SynthesisError> {
        let keys = self
            .constants
            .compressed_round_constants
            .get(self.key..self.key + n)
            .ok_or(SynthesisError::Unsatisfiable)?;
        self.key += n;
        Ok(keys)
    }

    /// Round 0: a key before and after each S-box; the tag's S-box is a constant
    /// (`constant_quintic_s_box_pre_add_tag`), the preimage's allocate from `l + k` on
    /// (`quintic_s_box_pre_add`: the element itself is already allocated).
    fn first_round(&mut self) -> Result<(), SynthesisError> {
        let width = self.state.len();
        let keys = self.keys(2 * width)?.to_vec();
        let (pre, post) = keys.split_at(width);
        self.state[0] = pow5(self.state[0] + pre[0]) + post[0];
        for i in 1..width {
            self.state[i] = self.s_box(self.state[i] + pre[i], post[i])?;
        }
        self.product_mds()
    }

    /// A full round after the first: every element's input allocated, then its S-box, then
    /// a key added unless this is the terminal round (`with_keys`).
    fn full_round(&mut self, with_keys: bool) -> Result<(), SynthesisError> {
        let width = self.state.len();
        let keys = if with_keys {
            self.keys(width)?.to_vec()
        } else {
            vec![Fr::ZERO; width]
        };
        for (i, key) in keys.iter().enumerate() {
            let l = self.state[i];
            self.alloc(l)?;
            self.state[i] = self.s_box(l, *key)?;
        }
        self.product_mds()
    }

    /// A partial round: the first element's input allocated, its S-box, one key.
    fn partial_round(&mut self) -> Result<(), SynthesisError> {
        let key = self.keys(1)?[0];
        let l = self.state[0];
        self.alloc(l)?;
        self.state[0] = self.s_box(l, key)?;
        self.product_mds()
    }

    /// `l²`, `l⁴` and `l⁵ + key` allocated (the gadget's `square` or `square_sum`, `square`
    /// and `mul_sum`; the terminal round's key is zero). Returns `l⁵ + key`.
    fn s_box(&mut self, l: Fr, key: Fr) -> Result<Fr, SynthesisError> {
        let l2 = l.square();
        self.alloc(l2)?;
        let l4 = l2.square();
        self.alloc(l4)?;
        let l5 = l4 * l + key;
        self.alloc(l5)?;
        Ok(l5)
    }

    /// One allocation and its constraint.
    fn alloc(&mut self, v: Fr) -> Result<(), SynthesisError> {
        self.cs.alloc(|| "", || Ok(v))?;
        enforce(self.cs);
        Ok(())
    }

    /// `product_mds`: the state times the matrix of this round.
    fn product_mds(&mut self) -> Result<(), SynthesisError> {
        let c = self.constants;
        let sparse_offset = c.half_full_rounds.saturating_sub(1);
        let r = self.round;
        let width = self.state.len();
        if r == sparse_offset {
            self.state = dense(&self.state, &c.pre_sparse_matrix)?;
        } else if r > sparse_offset && r < c.half_full_rounds + c.partial_rounds {
            let m = c
                .sparse_matrixes
                .get(r - sparse_offset - 1)
                .ok_or(SynthesisError::Unsatisfiable)?;
            if m.w_hat.len() != width || m.v_rest.len() + 1 != width {
                return Err(SynthesisError::Unsatisfiable);
            }
            // M'' = [w_hat as the first column; v_rest as the rest of the first row; 1 on
            // the diagonal]: out_0 = Σ s_i·ŵ_i, out_j = s_j + s_0·v_j.
            let first = self.state.iter().zip(&m.w_hat).map(|(s, w)| *s * w).sum();
            let s0 = self.state[0];
            for (s, v) in self.state[1..].iter_mut().zip(&m.v_rest) {
                *s += s0 * v;
            }
            self.state[0] = first;
        } else {
            self.state = dense(&self.state, &c.mds_matrices.m)?;
        }
        self.round += 1;
        Ok(())
    }
}

/// `x⁵`, as neptune's native `quintic_s_box`.
fn pow5(x: Fr) -> Fr {
    x.square().square() * x
}

/// `out_j = Σ_i state_i · m[i][j]` (the gadget's `product_mds_with_matrix`).
fn dense(state: &[Fr], m: &[Vec<Fr>]) -> Result<Vec<Fr>, SynthesisError> {
    if m.len() != state.len() || m.iter().any(|row| row.len() != state.len()) {
        return Err(SynthesisError::Unsatisfiable);
    }
    Ok((0..state.len())
        .map(|j| state.iter().zip(m).map(|(s, row)| *s * row[j]).sum())
        .collect())
}
