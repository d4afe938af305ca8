//! Everything CUDA: one [`Device`] handle per ordinal, NVRTC compilation of the kernels under
//! `kernels/` with an on-disk cache ([`kernels`]), the [`VramArena`] and [`PinnedPool`], the
//! field, curve, NTT ([`ntt`]), MSM ([`msm`]), classification and batch-addition
//! ([`classify`]) kernels, the GPU `Backend` ([`GpuBackend`]: per-worker [`slots`], the SRS
//! kept in VRAM by [`residency`] or streamed by [`sums`], a fair compute token held only
//! around the kernels), and device self-checks against the CPU ([`check`],
//! [`backend_bench`]).
//! Other crates never see a raw pointer: `unsafe` lives only here.
#![deny(missing_docs)]

pub mod arena;
pub mod backend;
pub mod backend_bench;
pub mod bench;
pub mod check;
pub mod classify;
pub mod device;
pub mod error;
pub mod fixed_base;
pub mod kernels;
pub mod layout;
pub mod msm;
pub mod ntt;
pub mod pinned;
mod prepare;
pub mod residency;
pub mod slots;
pub mod sums;
pub mod testdata;

pub use arena::{DevRegion, Scratch, VramArena};
pub use backend::{GpuBackend, GpuBackendConfig, Residency};
pub use device::{device_count, driver_available, Device};
pub use error::{GpuError, Result};
pub use fixed_base::GpuFixedBase;
pub use kernels::KernelId;
pub use pinned::PinnedPool;

/// 32-bit multiply(-add) instructions one Fr Montgomery product issues (4N² + N, N = 8).
pub const FR_MUL_MADS: u64 = 264;
/// 32-bit multiply(-add) instructions one Fp Montgomery product issues (4N² + N, N = 12).
pub const FP_MUL_MADS: u64 = 588;
/// Carry-chained 32-bit multiply-adds per second measured on the H200 (issue #3).
pub const H200_MAD_PER_S: f64 = 1.25e13;
