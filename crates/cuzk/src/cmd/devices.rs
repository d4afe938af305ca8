//! The devices this process proves on, found at start-up: every CUDA device that opens,
//! each with one [`GpuBackend`], or none (no libcuda, no device, or `--no-gpu`), in which
//! case callers fall back to the CPU backend. Also the fixed-base multiplier for
//! parameter generation (the first GPU when there is one).

use std::sync::Arc;

use cuzk_engine::DeviceSpec;
use cuzk_gpu::{Device, GpuBackend, GpuBackendConfig, GpuFixedBase};
use cuzk_groth16::paramgen::{CpuFixedBase, FixedBaseMul};
use tracing::{info, warn};

/// Every CUDA device that opens, in ordinal order. No driver or no device gives an empty
/// list with the reason logged; a device that is present but fails to open is logged and
/// skipped (the others still serve).
pub fn open_gpus() -> Vec<Arc<Device>> {
    let count = match cuzk_gpu::device_count() {
        Ok(n) => n,
        Err(e) => {
            info!("no GPU: {e}");
            return Vec::new();
        }
    };
    let mut gpus = Vec::new();
    for ordinal in 0..count {
        match Device::open(ordinal) {
            Ok(dev) => {
                info!(ordinal, name = dev.name(), arch = dev.arch(), "GPU found");
                gpus.push(dev);
            }
            Err(e) => warn!(ordinal, "GPU present but not usable, skipped: {e}"),
        }
    }
    gpus
}

/// One engine device per GPU, each with its own [`GpuBackend`] for `workers` workers and
/// the `[gpu]` table's VRAM budget and reserve.
pub fn gpu_specs(
    gpus: &[Arc<Device>],
    workers: usize,
    gpu: &cuzk_server::config::GpuSection,
) -> Vec<DeviceSpec> {
    gpus.iter()
        .map(|dev| {
            let defaults = GpuBackendConfig::default();
            let backend = GpuBackend::with_config(
                dev.clone(),
                GpuBackendConfig {
                    workers,
                    vram_budget_bytes: gpu.vram_budget_bytes,
                    vram_reserve_bytes: gpu
                        .vram_reserve_bytes
                        .unwrap_or(defaults.vram_reserve_bytes),
                    stream_chunk_points: gpu
                        .stream_chunk_points
                        .filter(|&p| p > 0)
                        .unwrap_or(defaults.stream_chunk_points),
                    ..defaults
                },
            );
            // The budget is read now, at start, and logged with the free memory it came
            // from.
            let budget = backend.vram_budget_bytes();
            info!(
                gpu = dev.ordinal(),
                vram_budget_bytes = budget,
                "gpu budget"
            );
            DeviceSpec {
                name: format!("gpu:{}", dev.ordinal()),
                hardware: dev.name().to_string(),
                is_gpu: true,
                ordinal: u32::try_from(dev.ordinal()).unwrap_or(u32::MAX),
                vram_total_bytes: dev
                    .context()
                    .total_mem()
                    .map(|b| b as u64)
                    .unwrap_or_default(),
                backend: Arc::new(backend),
                workers: Some(workers),
            }
        })
        .collect()
}

/// The GPUs to prove on: all that open, or none with `no_gpu`.
pub fn gpus(no_gpu: bool) -> Vec<Arc<Device>> {
    if no_gpu {
        info!("GPUs not used (--no-gpu or --cpu): the CPU does the work");
        return Vec::new();
    }
    open_gpus()
}

/// The fixed-base multiplier for parameter generation: the first of `gpus`, or the CPU
/// (with `window_bits` when given) when there is none.
pub fn fixed_base_on(
    gpus: &[Arc<Device>],
    window_bits: Option<u32>,
) -> Arc<dyn FixedBaseMul + Send> {
    match gpus.first() {
        Some(dev) => Arc::new(GpuFixedBase::new(dev.clone())),
        None => Arc::new(CpuFixedBase { window_bits }),
    }
}
