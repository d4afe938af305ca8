//! The [`PartitionedProof`] trait: how the engine drives one proof request of any kind
//! (synthetic, PoRep C2, WindowPoSt, WinningPoSt, SnapDeals) without knowing its circuits.
//! The trait lives here, below both the engine and `cuzk-filecoin`, so that the Filecoin
//! kinds can implement it and the engine can consume it with dependencies pointing one way.
//! A kind only describes the work; scheduling, memory, devices and how to synthesize (the
//! [`Synthesizer`] it is handed) are the engine's.

use std::path::PathBuf;

use crate::{Assignment, Proof, Scalar, Synthesizer, VerifyingKey};

/// The fields of a proof request as the wire carries them, kind-neutral. The server fills
/// it from protobuf; each kind's parser reads the fields it needs and names any bad one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProofRequest {
    /// Sector size in bytes (0 when the kind does not use it).
    pub sector_size: u64,
    /// Filecoin actor ABI number of the registered proof.
    pub registered_proof: u64,
    /// Single payload (PoRep C2: the C1 wrapper JSON; synthetic: its parameters).
    pub vanilla_proof: Vec<u8>,
    /// Multiple payloads (PoSt: one per sector; SnapDeals: one per partition).
    pub vanilla_proofs: Vec<Vec<u8>>,
    /// Sector number.
    pub sector_number: u64,
    /// Miner (actor) id.
    pub miner_id: u64,
    /// PoSt randomness, 32 bytes.
    pub randomness: Vec<u8>,
    /// WindowPoSt partition index.
    pub partition_index: u32,
    /// SnapDeals old replica commitment, 32 bytes.
    pub comm_r_old: Vec<u8>,
    /// SnapDeals new replica commitment, 32 bytes.
    pub comm_r_new: Vec<u8>,
    /// SnapDeals new data commitment, 32 bytes.
    pub comm_d_new: Vec<u8>,
}

/// An error from parsing, synthesizing, assembling or verifying a proof of some kind.
#[derive(Debug, thiserror::Error)]
pub enum KindError {
    /// A request field is missing or malformed; `field` is the wire field's name.
    #[error("invalid {field}: {reason}")]
    InvalidField {
        /// Wire field name, e.g. "vanilla_proof", "randomness".
        field: &'static str,
        /// What was wrong with it.
        reason: String,
    },
    /// Building or synthesizing a partition's circuit failed.
    #[error("synthesis of partition {partition_idx}: {reason}")]
    Synthesis {
        /// Partition index.
        partition_idx: usize,
        /// The circuit's error.
        reason: String,
    },
    /// The assembled proof did not verify.
    #[error("proof does not verify: {reason}")]
    Verification {
        /// Which check failed.
        reason: String,
    },
    /// Anything else the kind's library reported.
    #[error("{0}")]
    Other(String),
}

/// One parsed and validated proof request, ready to be proved partition by partition.
/// Implementations must be cheap to share across threads: the engine synthesizes several
/// partitions of the same job at once.
pub trait PartitionedProof: Send + Sync {
    /// The SRS this request needs, e.g. "porep-32g", "wpost-2k", "synthetic-20".
    fn circuit_id(&self) -> String;

    /// Path of the parameters file for `circuit_id` under `param_dir`.
    fn params_path(&self, param_dir: &std::path::Path) -> PathBuf;

    /// Number of partitions (each one Groth16 proof).
    fn num_partitions(&self) -> usize;

    /// Estimated host bytes one partition holds once `synth` has synthesized it (for
    /// admission: less while `synth` defers a, b, c to the backend).
    fn partition_host_bytes(&self, synth: &Synthesizer) -> usize;

    /// Builds partition `partition_idx`'s circuit and synthesizes it with `synth` (its
    /// recorded shapes, budget, deferral and pool gate: the engine's).
    ///
    /// # Errors
    /// [`KindError::Synthesis`] when the circuit cannot be built or synthesized.
    fn synthesize(
        &self,
        synth: &Synthesizer,
        partition_idx: usize,
    ) -> Result<Assignment, KindError>;

    /// Public inputs of partition `partition_idx`, without the leading `ONE`.
    ///
    /// # Errors
    /// [`KindError`] when the kind's library cannot derive them.
    fn public_inputs(&self, partition_idx: usize) -> Result<Vec<Scalar>, KindError>;

    /// Lays the partition proofs out in the kind's byte format and verifies the result
    /// with the kind's own verifier, returning the bytes the client receives.
    ///
    /// # Errors
    /// [`KindError::Verification`] when the proof does not verify.
    fn assemble_and_verify(
        &self,
        proofs: &[Proof],
        vk: &VerifyingKey,
    ) -> Result<Vec<u8>, KindError>;
}
