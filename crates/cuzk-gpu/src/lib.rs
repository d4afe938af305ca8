//! Everything CUDA, in three layers and a side door:
//! - [`device`]: one [`Device`] handle per ordinal (context, streams, kernels loaded once),
//!   NVRTC compilation of the kernels under `kernels/` with an on-disk cache
//!   ([`device::kernels`]), the [`VramArena`] and [`PinnedPool`], and one safe wrapper per
//!   kernel. `unsafe` lives only here.
//! - [`ops`]: what the kernels compute, as host sequences of launches: the NTT and the
//!   prover's quotient, Pippenger MSMs, scalar classification and batch addition,
//!   fixed-base multiplication.
//! - [`backend`]: the GPU `Backend` ([`GpuBackend`]): per-worker device slots, the SRS kept
//!   in VRAM or streamed, a fair compute token held only around the kernels.
//! - `diag` (feature `diag`): device self-checks against the CPU and the benchmarks behind
//!   `cuzk bench msm|ntt|gpu`.
//!
//! Other crates never see a raw pointer.
#![deny(missing_docs)]

pub mod backend;
pub mod device;
#[cfg(feature = "diag")]
pub mod diag;
pub mod error;
pub mod ops;
pub mod tuning;

pub use backend::budget::{Costs, Fit};
pub use backend::{GpuBackend, GpuBackendConfig, Residency};
pub use device::arena::{DevRegion, Scratch, VramArena};
pub use device::kernels::KernelId;
pub use device::pinned::PinnedPool;
pub use device::{device_count, driver_available, Device};
pub use error::{GpuError, Result};
pub use ops::fixed_base::GpuFixedBase;
pub use tuning::GpuTuning;

/// 32-bit multiply(-add) instructions one Fr Montgomery product issues (4N² + N, N = 8).
pub const FR_MUL_MADS: u64 = 264;
/// 32-bit multiply(-add) instructions one Fp Montgomery product issues (4N² + N, N = 12).
pub const FP_MUL_MADS: u64 = 588;
/// Carry-chained 32-bit multiply-adds per second measured on the H200 (issue #3).
pub const H200_MAD_PER_S: f64 = 1.25e13;
