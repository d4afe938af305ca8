//! The operations built from the kernels, each a host sequence of launches on one device's
//! compute stream over regions of device memory: the NTT over Fr and the prover's quotient
//! ([`ntt`]), Pippenger MSMs in G1 and G2 over resident, streamed or window-table bases
//! ([`msm`]), the split of bit scalars into zeros, ones and the rest with the batch
//! addition of the ones ([`classify`]), fixed-base multiplication for parameter
//! generation ([`fixed_base`]), and a recorded shape's a, b, c from the witness
//! ([`sparse`]). They know nothing of proofs, jobs or slots: the backend
//! (`crate::backend`) arranges them into a prove.

pub mod classify;
pub mod fixed_base;
pub mod msm;
pub mod ntt;
pub mod sparse;
