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

/// One timed stage of a prove.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    /// Stage name, e.g. "ntt_h", "msm_l", "msm_b_g2", "upload", "token_wait".
    pub name: String,
    /// Host wall time.
    pub wall: Duration,
    /// Device time from events, when the stage ran on a device.
    pub device: Option<Duration>,
}

/// Per-stage timings of one prove, filled in by the backend and the prover.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProveReport {
    /// Name of the backend that computed the MSMs ("cpu", "gpu:0", ...).
    pub backend: String,
    /// Stages in the order they ran.
    pub stages: Vec<StageTime>,
    /// For a backend that takes its device's compute token itself
    /// ([`Backend::owns_compute_token`]): how long it held it (first kernel enqueued to
    /// completion recorded). The engine counts this as the device's busy time.
    pub token_held: Option<Duration>,
}

impl ProveReport {
    /// Records a host-timed stage.
    pub fn push(&mut self, name: &str, wall: Duration) {
        self.stages.push(StageTime {
            name: name.to_string(),
            wall,
            device: None,
        });
    }

    /// Records a stage with both host and device time.
    pub fn push_device(&mut self, name: &str, wall: Duration, device: Duration) {
        self.stages.push(StageTime {
            name: name.to_string(),
            wall,
            device: Some(device),
        });
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
        /// Stage or kernel that failed.
        stage: String,
        /// The driver's or our message.
        message: String,
    },
    /// The prove was cancelled before it finished.
    #[error("cancelled")]
    Cancelled,
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
    /// `token_wait` stage and the hold as [`ProveReport::token_held`].
    fn owns_compute_token(&self) -> bool {
        false
    }

    /// Device bytes that `srs` holds on this backend's device (0: not resident there;
    /// always 0 for a backend without device memory).
    fn srs_device_bytes(&self, _srs: &Srs) -> u64 {
        0
    }

    /// Makes `srs` resident in the device's memory when the backend keeps parameters
    /// there; returns its device bytes (0 when it does not, or streams them).
    ///
    /// # Errors
    /// [`BackendError::Device`] when the upload fails or it does not fit.
    fn preload_srs(&self, _srs: &Srs) -> Result<u64, BackendError> {
        Ok(0)
    }

    /// Drops the device copy of `srs` if no prove uses it; returns the bytes freed.
    fn evict_srs(&self, _srs: &Srs) -> u64 {
        0
    }
}
