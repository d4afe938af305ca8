//! The devices this process proves on, found at start-up: every CUDA device that opens,
//! each with one [`GpuBackend`] (and, where the budget allows, a critical lane beside
//! it: [`gpu_specs`]), or none (no libcuda, no device, or `--no-gpu`), in which
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
/// the `[gpu]` table's VRAM budget and reserve, and beside it, where the GPU has a
/// critical lane (`critical_lane_bytes`, [`lane_split`]), a second device
/// "gpu:N/critical": a [`GpuBackend`] with one worker on the GPU's high-priority streams
/// ([`Device::critical`]) that the engine gives only CRITICAL partitions. The lane has a
/// compute token of its own, so it proves beside the regular backend's token holder: a
/// departure from one token per card (docs/internals.md, "Critical lanes"), for a
/// WinningPoSt that must not wait behind a 2 s PoRep partition (#29).
pub fn gpu_specs(
    gpus: &[Arc<Device>],
    workers: usize,
    gpu: &cuzk_server::config::GpuSection,
) -> Vec<DeviceSpec> {
    let mut specs = Vec::new();
    for dev in gpus {
        let defaults = GpuBackendConfig::default();
        let reserve = gpu
            .vram_reserve_bytes
            .unwrap_or(defaults.vram_reserve_bytes);
        // Without a configured budget the lane is sized against what is free now, as the
        // regular backend's budget is (it reads the same figure again just below).
        let free = match gpu.vram_budget_bytes {
            None => dev.mem_info().map_or(0, |(free, _)| free),
            Some(_) => 0,
        };
        let split = lane_split(
            gpu.vram_budget_bytes,
            reserve,
            free,
            gpu.critical_lane_bytes,
        );
        let main_cfg = GpuBackendConfig {
            workers,
            vram_budget_bytes: split.main_budget_bytes,
            vram_reserve_bytes: split.main_reserve_bytes,
            stream_chunk_points: gpu
                .stream_chunk_points
                .filter(|&p| p > 0)
                .unwrap_or(defaults.stream_chunk_points),
            host_threads: cuzk_gpu::tuning::tuning().host_threads,
            ..defaults
        };
        let lane_cfg = GpuBackendConfig {
            workers: 1,
            vram_budget_bytes: Some(split.lane_bytes),
            host_threads: Some(LANE_HOST_THREADS),
            ..main_cfg.clone()
        };
        let host_threads = main_cfg.host_threads.unwrap_or(0);
        let backend = GpuBackend::with_config(dev.clone(), main_cfg);
        // The budget is read now, at start, and logged with the free memory it came
        // from.
        let budget = backend.vram_budget_bytes();
        info!(
            gpu = dev.ordinal(),
            vram_budget_bytes = budget,
            critical_lane_bytes = split.lane_bytes,
            host_threads,
            "gpu budget"
        );
        specs.push(spec(dev, "", backend, workers, false));
        if split.lane_bytes == 0 {
            continue;
        }
        let handle = match cuzk_gpu::tuning::tuning().critical_yield {
            true => dev.critical_yielding(),
            false => dev.critical(),
        };
        match handle {
            Ok(handle) => {
                let lane = GpuBackend::with_config(handle, lane_cfg);
                // Fixed now, at start, as the regular budget: the engine's routing reads
                // it under its lock, where a first read's memory query does not belong.
                let lane_budget = lane.vram_budget_bytes();
                info!(
                    gpu = dev.ordinal(),
                    vram_budget_bytes = lane_budget,
                    "critical lane"
                );
                specs.push(spec(dev, "/critical", lane, 1, true));
            }
            Err(e) => warn!(
                gpu = dev.ordinal(),
                "no critical lane: its streams cannot be made: {e}"
            ),
        }
    }
    specs
}

/// The engine device of `backend` on `dev`, named "gpu:N" plus `suffix`.
fn spec(
    dev: &Device,
    suffix: &str,
    backend: GpuBackend,
    workers: usize,
    critical_only: bool,
) -> DeviceSpec {
    DeviceSpec {
        name: format!("gpu:{}{suffix}", dev.ordinal()),
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
        critical_only,
    }
}

/// Threads of a critical lane's own host pool ([`GpuBackendConfig::host_threads`]): its
/// fills are small (a 32 GiB WinningPoSt's witness), and must not queue behind the
/// process-wide pool's synthesis.
const LANE_HOST_THREADS: usize = 4;

/// How a GPU's device memory is shared by its regular backend and its critical lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaneSplit {
    /// The regular backend's explicit budget (`None`: free at start less its reserve).
    pub main_budget_bytes: Option<u64>,
    /// The regular backend's reserve, which grows by the lane when its budget is unset.
    pub main_reserve_bytes: u64,
    /// The lane's budget; 0: no lane.
    pub lane_bytes: u64,
}

/// The lane's size when `critical_lane_bytes` is unset, and the least GPU budget that gets
/// one: a 32 GiB WinningPoSt's lane holds its ~0.23 GB of points, one slot and its arena;
/// a 16 or 24 GiB card's PoRep mode needs every byte.
const AUTO_LANE_BYTES: u64 = 1 << 30;
const AUTO_LANE_MIN_BUDGET: u64 = 32 << 30;

/// Splits a GPU's memory between its regular backend and its critical lane so that the
/// two together hold no more than the operator's budget: `budget` (the configured
/// `vram_budget_bytes`) less the lane, or, with the budget unset, `free` less a reserve
/// grown by the lane. `lane` is `critical_lane_bytes`: unset gives [`AUTO_LANE_BYTES`]
/// where the budget is at least [`AUTO_LANE_MIN_BUDGET`]; a lane that would take the whole
/// budget is none.
pub fn lane_split(budget: Option<u64>, reserve: u64, free: u64, lane: Option<u64>) -> LaneSplit {
    let whole = budget.unwrap_or_else(|| free.saturating_sub(reserve));
    let lane_bytes = match lane {
        Some(bytes) => bytes,
        None if whole >= AUTO_LANE_MIN_BUDGET => AUTO_LANE_BYTES,
        None => 0,
    };
    if lane_bytes == 0 || lane_bytes >= whole {
        if lane_bytes > 0 {
            warn!(
                lane_bytes,
                budget = whole,
                "no critical lane: it would take the whole budget"
            );
        }
        return LaneSplit {
            main_budget_bytes: budget,
            main_reserve_bytes: reserve,
            lane_bytes: 0,
        };
    }
    match budget {
        Some(b) => LaneSplit {
            main_budget_bytes: Some(b - lane_bytes),
            main_reserve_bytes: reserve,
            lane_bytes,
        },
        None => LaneSplit {
            main_budget_bytes: None,
            main_reserve_bytes: reserve + lane_bytes,
            lane_bytes,
        },
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    /// The regular backend's budget given `free` memory at start, plus the lane's.
    fn total(split: &LaneSplit, free: u64) -> u64 {
        let main = split
            .main_budget_bytes
            .unwrap_or_else(|| free.saturating_sub(split.main_reserve_bytes));
        main + split.lane_bytes
    }

    // See: #29.
    #[test]
    fn main_and_lane_together_hold_no_more_than_the_budget() {
        // An explicit 70 GiB budget with the automatic lane: 69 + 1.
        let s = lane_split(Some(70 * GIB), GIB, 0, None);
        assert_eq!((s.main_budget_bytes, s.lane_bytes), (Some(69 * GIB), GIB));
        assert_eq!(total(&s, 0), 70 * GIB);
        // The budget unset on an 80 GiB card: the reserve grows by the lane.
        let free = 79 * GIB;
        let s = lane_split(None, GIB, free, Some(2 * GIB));
        assert_eq!((s.main_budget_bytes, s.main_reserve_bytes), (None, 3 * GIB));
        assert_eq!(total(&s, free), free - GIB);
    }

    #[test]
    fn the_automatic_lane_needs_a_32_gib_budget_and_zero_turns_it_off() {
        assert_eq!(lane_split(None, GIB, 40 * GIB, None).lane_bytes, GIB);
        // A 24 GiB card: every byte goes to the PoRep mode.
        let s = lane_split(None, GIB, 23 * GIB, None);
        assert_eq!((s.lane_bytes, s.main_reserve_bytes), (0, GIB));
        assert_eq!(lane_split(Some(16 * GIB), GIB, 0, None).lane_bytes, 0);
        // Asked for, a small card gets one too.
        assert_eq!(
            lane_split(Some(16 * GIB), GIB, 0, Some(GIB)).lane_bytes,
            GIB
        );
        let off = lane_split(Some(80 * GIB), GIB, 0, Some(0));
        assert_eq!((off.main_budget_bytes, off.lane_bytes), (Some(80 * GIB), 0));
        // A lane as large as the budget is none.
        assert_eq!(lane_split(Some(GIB), GIB, 0, Some(GIB)).lane_bytes, 0);
    }
}
