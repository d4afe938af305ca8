//! cuzk's Groth16 prover over BLS12-381, split in two halves: [`synthesize`] turns a
//! bellperson circuit into an [`Assignment`] (the a, b, c evaluations, the witness and the
//! density bitmaps), and [`prove`] turns an assignment plus an [`Srs`] into a [`Proof`]
//! through a [`Backend`] that does the heavy arithmetic (NTT, MSMs).
//!
//! This crate owns the formats (bellperson `.params` files, 192-byte proofs), the CPU
//! backend (the correctness oracle for the GPU and the fallback without one), the
//! synthetic PoRep-shaped circuits used by tests and benchmarks, and the
//! [`PartitionedProof`] trait through which the engine drives any proof kind.
//! It knows nothing about CUDA, jobs or gRPC.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod assignment;
pub mod backend;
#[cfg(feature = "bellperson-native")]
pub mod compare;
pub mod cpu;
pub mod kind;
pub mod matrices;
pub mod paramgen;
pub mod pool_gate;
pub mod prover;
pub mod recorded;
pub mod srs;
pub mod stats;
pub mod sublayout;
pub mod synthesis;
pub mod synthesizer;
pub mod synthetic;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod token;
pub mod witness;

pub use assignment::{Abc, Assignment, Density};
pub use backend::{
    Backend, BackendError, MsmOutputs, ProveReport, ProveStage, StageTime, TokenTimes,
};
pub use cpu::CpuBackend;
pub use kind::{KindError, PartitionedProof, ProofRequest};
pub use prover::{prove, prove_random, verify, ProveError};
pub use srs::{
    point_bytes, HostPins, QueryLens, Released, Srs, SrsError, SrsFile, SrsOptions, SrsQuery,
};
pub use synthesis::{synthesize, SynthesisCs, SynthesisError};
pub use synthesizer::{CachedPath, Synthesizer};
pub use token::{ComputeToken, TokenGuard};

/// The scalar field of BLS12-381 (`Fr`).
pub use blstrs::Scalar;
/// A Groth16 proof in bellperson's type: `write` gives the 192-byte compressed encoding.
pub type Proof = bellperson::groth16::Proof<blstrs::Bls12>;
/// A Groth16 verifying key in bellperson's type and layout.
pub type VerifyingKey = bellperson::groth16::VerifyingKey<blstrs::Bls12>;
