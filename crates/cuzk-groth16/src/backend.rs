//! The [`Backend`] boundary: what a prover backend computes for one partition (the H
//! polynomial and the five multi-scalar multiplications) and how it reports its stages.
//! Proof assembly with the randomness r, s stays on the CPU, in `prover.rs`; the CPU
//! backend itself lives in `cpu/`, the GPU backend in the `cuzk-gpu` crate.

use std::time::Duration;

use blstrs::{G1Projective, G2Projective};

use crate::{Assignment, Srs};

/// The sums a backend returns for one partition. With z = (inputs ‖ aux):
/// - `h = Σ h_i · h_query[i]` where h = (a·b − c)/Z over the domain,
/// - `l = Σ aux_j · l_query[j]`,
/// - `a = Σ z_k · a_query[k]` over the variables in the A density,
/// - `b_g1 = Σ z_k · b_g1_query[k]`, `b_g2 = Σ z_k · b_g2_query[k]` over the B density.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MsmOutputs {
    /// H-query sum.
    pub h: G1Projective,
    /// L-query sum.
    pub l: G1Projective,
    /// A-query sum (inputs and aux).
    pub a: G1Projective,
    /// B-query sum in G1 (inputs and aux).
    pub b_g1: G1Projective,
    /// B-query sum in G2 (inputs and aux).
    pub b_g2: G2Projective,
}

/// A stage of one prove, as backends and the prover time it and as errors name it. The
/// names of [`ProveStage::as_str`] are what reports print; code matches the variants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProveStage {
    /// Checking the assignment against the parameters and preparing host buffers.
    Prepare,
    /// Finding (or uploading) the parameters on the device.
    Srs,
    /// Writing the device's upload staging on the host.
    Fill,
    /// Copying the assignment to the device.
    Upload,
    /// Waiting for the device's compute token.
    TokenWait,
    /// Making the device scratch and tables for this shape.
    GpuSetup,
    /// The quotient H = (A·B − C)/Z: the NTTs and the pointwise product.
    NttH,
    /// The H-query sum.
    MsmH,
    /// Splitting scalars into zeros, ones and the rest (CPU backend).
    Classify,
    /// The L-query sum.
    MsmL,
    /// The A-query sum.
    MsmA,
    /// The B-query sum in G1.
    MsmBG1,
    /// The B-query sum in G2.
    MsmBG2,
    /// Proof assembly with r and s on the CPU.
    Assemble,
    /// Making parameters resident before any prove ([`Backend::preload_srs`]).
    PreloadSrs,
    /// Building the window table of a resident H query (outside any prove's stages).
    HTable,
}

impl ProveStage {
    /// Every stage, in the order a GPU prove runs them.
    pub const ALL: [ProveStage; 16] = [
        ProveStage::Prepare,
        ProveStage::Srs,
        ProveStage::Fill,
        ProveStage::Upload,
        ProveStage::TokenWait,
        ProveStage::GpuSetup,
        ProveStage::NttH,
        ProveStage::MsmH,
        ProveStage::Classify,
        ProveStage::MsmL,
        ProveStage::MsmA,
        ProveStage::MsmBG1,
        ProveStage::MsmBG2,
        ProveStage::Assemble,
        ProveStage::PreloadSrs,
        ProveStage::HTable,
    ];

    /// Lowercase name for reports and logs, e.g. "msm_b_g2".
    pub fn as_str(self) -> &'static str {
        match self {
            ProveStage::Prepare => "prepare",
            ProveStage::Srs => "srs",
            ProveStage::Fill => "fill",
            ProveStage::Upload => "upload",
            ProveStage::TokenWait => "token_wait",
            ProveStage::GpuSetup => "gpu_setup",
            ProveStage::NttH => "ntt_h",
            ProveStage::MsmH => "msm_h",
            ProveStage::Classify => "classify",
            ProveStage::MsmL => "msm_l",
            ProveStage::MsmA => "msm_a",
            ProveStage::MsmBG1 => "msm_b_g1",
            ProveStage::MsmBG2 => "msm_b_g2",
            ProveStage::Assemble => "assemble",
            ProveStage::PreloadSrs => "preload_srs",
            ProveStage::HTable => "h_table",
        }
    }

    /// Parses [`ProveStage::as_str`]'s names back (for command-line flags).
    pub fn from_name(name: &str) -> Option<ProveStage> {
        ProveStage::ALL.into_iter().find(|s| s.as_str() == name)
    }
}

impl std::fmt::Display for ProveStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

/// One timed stage of a prove.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    /// Which stage.
    pub stage: ProveStage,
    /// Host wall time.
    pub wall: Duration,
    /// Device time from events, when the stage ran on a device.
    pub device: Option<Duration>,
}

/// How a backend that takes its device's compute token itself
/// ([`Backend::owns_compute_token`]) used it, as offsets from the start of its compute call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenTimes {
    /// When it began to wait for the token (its uploads and preparation ran before).
    pub wait_start: Duration,
    /// How long it waited.
    pub wait: Duration,
    /// How long it held the token (first kernel enqueued to completion recorded). The
    /// engine counts this as the device's busy time.
    pub held: Duration,
}

/// Per-stage timings of one prove, filled in by the backend and the prover.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProveReport {
    /// Name of the backend that computed the MSMs ("cpu", "gpu:0", ...).
    pub backend: String,
    /// Stages in the order they ran.
    pub stages: Vec<StageTime>,
    /// For a backend that takes its device's compute token itself: when it waited for it
    /// and how long it held it.
    pub token: Option<TokenTimes>,
}

impl ProveReport {
    /// Records a host-timed stage.
    pub fn push(&mut self, stage: ProveStage, wall: Duration) {
        self.stages.push(StageTime {
            stage,
            wall,
            device: None,
        });
    }

    /// Records a stage with both host and device time.
    pub fn push_device(&mut self, stage: ProveStage, wall: Duration, device: Duration) {
        self.stages.push(StageTime {
            stage,
            wall,
            device: Some(device),
        });
    }

    /// The first record of `stage`, if it ran.
    pub fn stage(&self, stage: ProveStage) -> Option<&StageTime> {
        self.stages.iter().find(|s| s.stage == stage)
    }

    /// Sum of the host wall time of all stages.
    pub fn total_wall(&self) -> Duration {
        self.stages.iter().map(|s| s.wall).sum()
    }
}

/// An error from a backend, naming where it happened.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The assignment does not fit the parameters (wrong circuit or wrong SRS).
    #[error("assignment does not match parameters: {what}")]
    Mismatch {
        /// What differed, with both numbers.
        what: String,
    },
    /// A device error; the device stays usable for the next prove.
    #[error("device {device}: {stage}: {message}")]
    Device {
        /// Device name, e.g. "gpu:0".
        device: String,
        /// The stage that failed.
        stage: ProveStage,
        /// The driver's or our message.
        message: String,
    },
    /// The prove was cancelled before it finished.
    #[error("cancelled")]
    Cancelled,
    /// A partition of this size cannot be proved within the device's memory budget: the
    /// request's size, not a device fault (the engine fails the job with this reason
    /// rather than taking the device out of service).
    #[error("{what}")]
    TooLarge {
        /// Both figures: what the partition needs and what the device may hold.
        what: String,
    },
    /// The parameters' query points were released from host memory ([`crate::Srs::released`])
    /// and this backend does not hold them itself: the caller proves again with the points
    /// loaded.
    #[error("the parameters' points are not in host memory and this device does not hold them")]
    SrsReleased,
}

/// A prover backend: computes H and the five MSMs of one partition.
pub trait Backend: Send + Sync {
    /// Short name for reports and logs ("cpu", "gpu:0").
    fn name(&self) -> String;

    /// Computes the MSM sums for `asg` against `srs`, appending its stage times to `report`.
    ///
    /// # Errors
    /// [`BackendError::Mismatch`] when the assignment's sizes or densities do not match the
    /// parameters, [`BackendError::Device`] on a device failure.
    fn compute(
        &self,
        asg: &Assignment,
        srs: &Srs,
        report: &mut ProveReport,
    ) -> Result<MsmOutputs, BackendError>;

    /// Whether the backend serializes device work with its own fair compute token, held
    /// only across its kernel region (uploads and host preparation run outside it). The
    /// engine then lets all of a device's workers call [`Backend::compute`] at once instead
    /// of holding its own token around the whole call; the backend reports the wait as a
    /// wait and the hold in [`ProveReport::token`].
    fn owns_compute_token(&self) -> bool {
        false
    }

    /// Device bytes that `srs` holds on this backend's device (0: not resident there;
    /// always 0 for a backend without device memory).
    fn srs_device_bytes(&self, _srs: &Srs) -> u64 {
        0
    }

    /// Device bytes held by recorded constraint matrices of deferred assignments'
    /// shapes (`Assignment::deferred`), kept beside the parameters (0 for a backend that
    /// evaluates a, b, c on the host).
    fn matrices_device_bytes(&self) -> u64 {
        0
    }

    /// Host bytes this backend holds page-locked (pinned staging of its workers' uploads;
    /// 0 for a backend without a device). The engine counts them against the host memory
    /// it lets partitions reserve.
    fn host_pinned_bytes(&self) -> u64 {
        0
    }

    /// Host bytes this backend's compute calls may allocate at once beyond their
    /// assignments and the pinned staging [`Backend::host_pinned_bytes`] counts, over all
    /// its workers. The engine counts them against the host memory it lets partitions
    /// reserve. (The GPU backend allocates none: when the recorded matrices do not fit its
    /// memory it evaluates a, b, c straight into its pinned staging.)
    fn host_compute_bytes(&self) -> u64 {
        0
    }

    /// Device bytes the backend may hold in all (0 for a backend without device memory).
    fn vram_budget_bytes(&self) -> u64 {
        0
    }

    /// Device bytes the backend holds now.
    fn vram_used_bytes(&self) -> u64 {
        0
    }

    /// How the backend proves the largest shape it has proved or preloaded, in words (the
    /// GPU backend's mode, e.g. "srs streamed, 1 lean worker (2097152-point chunks)"), or
    /// empty before any or for a backend without modes.
    fn proving_mode(&self) -> String {
        String::new()
    }

    /// Counts of how the backend's proves went, by name, for benchmarks (the GPU
    /// backend's hand-overs of a, b, c between calls, the calls whose a, b, c the host
    /// evaluated, the slots of its last ring); empty for a backend without.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Makes `srs` resident in the device's memory when the backend keeps parameters
    /// there; returns its device bytes (0 when it does not, or streams them).
    ///
    /// # Errors
    /// [`BackendError::Device`] when the upload fails or it does not fit.
    fn preload_srs(&self, _srs: &Srs) -> Result<u64, BackendError> {
        Ok(0)
    }

    /// Loads ahead what the first prove of `srs`'s partitions would load from `r1cs`,
    /// their recorded shape (the GPU backend: the matrices in device memory, where its
    /// mode evaluates a, b, c there), so that no prove holds its slot for it while other
    /// calls wait; returns the device bytes taken (0: nothing loaded).
    ///
    /// # Errors
    /// [`BackendError::Device`] when the upload fails.
    fn preload_matrices(
        &self,
        _srs: &Srs,
        _r1cs: &crate::recorded::R1cs,
    ) -> Result<u64, BackendError> {
        Ok(0)
    }

    /// Drops the device copy of `srs` if no prove uses it; returns the bytes freed.
    fn evict_srs(&self, _srs: &Srs) -> u64 {
        0
    }

    /// Whether this backend streams `srs`'s points to its device rather than holding them
    /// there, and can read them from the parameters file ([`Srs::file`]) when the host
    /// copy is released: the engine may then release the host copy of an SRS that does
    /// not fit its host budget. False for a backend that reads the host points itself.
    fn streams_srs_from_file(&self, _srs: &Srs) -> bool {
        false
    }
}
