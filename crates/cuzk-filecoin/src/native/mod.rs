//! Native witnesses: witness-only mirrors of circuit pieces whose gadgets spend nearly all
//! of a witness-only walk building linear combinations that only `enforce` reads (see
//! /work/shared/synthesis-notes.md, sections 2 and 4, S3 (b)). A mirror allocates exactly
//! the variables its circuit allocates, in the same order and with the same values, and
//! counts the same constraints; it is run only by witness-only systems (`Parts::witness_part`),
//! never to record a shape, and each piece is tested bit for bit against its gadget.
//!
//! - `bits.rs`: [`bits::Bit`] (a `Boolean` without its variable) and the bit helpers.
//! - `sha256.rs`: bellperson 0.27's SHA-256 gadget.
//! - `poseidon.rs`: neptune 11's legacy Poseidon gadget (columns, trees C and R).
//! - `por.rs`: storage-proofs' `PoRCircuit` over a Poseidon tree (trees C and R).
//! - `challenge.rs`: storage-proofs-porep 19.1's one-challenge PoRep circuit, its SHA-256
//!   and Poseidon hashes native, the rest through the real gadgets.
//! - `shared.rs`: the mirrors' errors, the Poseidon-tree requirement and the
//!   `comm_r = H(comm_c ‖ comm_r_last)` check both circuits make.
//! - `post_sector.rs`: one sector of storage-proofs-post 19.1's fallback PoSt circuit, its
//!   Poseidon hashes native, the rest through the real gadgets.

pub(crate) mod bits;
pub(crate) mod challenge;
pub(crate) mod por;
pub(crate) mod poseidon;
pub(crate) mod post_sector;
pub(crate) mod sha256;
pub(crate) mod shared;

pub(crate) use challenge::NativeChallenge;
/// The witness-only system a mirror is compared on: cuzk-groth16's own.
pub(crate) use cuzk_groth16::witness::WitnessCs as Collected;
pub(crate) use post_sector::NativeSector;

#[cfg(test)]
mod tests;
