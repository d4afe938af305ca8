//! [`DeviceSpec`]: a prover device as the engine sees it: a name, an `Arc<dyn Backend>`
//! and how many workers share it; and the engine's per-device state (the fair compute
//! token, busy time, the job on it, its health). Finding devices and building their
//! backends is the caller's business (the daemon); with none given the engine proves on
//! the CPU backend, and with only GPUs given it adds a CPU fallback device (see
//! `build_devices`). Fault counting and routing live in `faults.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::Backend;
use parking_lot::Mutex;

use crate::status::DeviceStatus;
use crate::token::ComputeToken;
use crate::{EngineConfig, ProofKindId};

/// A device to prove on.
#[derive(Clone)]
pub struct DeviceSpec {
    /// Engine-wide name, e.g. "gpu:0" or "cpu".
    pub name: String,
    /// Hardware name, e.g. "NVIDIA H200" or "cpu".
    pub hardware: String,
    /// Whether this is a GPU (reported in `GetStatus.gpus`).
    pub is_gpu: bool,
    /// Device ordinal (0 for the CPU).
    pub ordinal: u32,
    /// Device memory in bytes (0 for the CPU).
    pub vram_total_bytes: u64,
    /// The backend bound to this device.
    pub backend: Arc<dyn Backend>,
    /// Prove workers sharing this device; `None` takes the config's per-device default.
    pub workers: Option<usize>,
    /// A critical lane (#29): a second backend on a GPU (its own high-priority streams,
    /// budget and token; named "gpu:N/critical") whose workers prove only CRITICAL
    /// partitions whose SRS it can hold (`Device::lane_holds`). While one in service
    /// admits a CRITICAL partition, regular devices leave it to the lane, so a busy GPU's
    /// queue never holds it behind a large partition (`faults.rs`).
    pub critical_only: bool,
}

impl DeviceSpec {
    /// The CPU backend as the only device.
    pub fn cpu() -> DeviceSpec {
        DeviceSpec {
            name: "cpu".into(),
            hardware: "cpu".into(),
            is_gpu: false,
            ordinal: 0,
            vram_total_bytes: 0,
            backend: Arc::new(cuzk_groth16::cpu::CpuBackend::new()),
            workers: None,
            critical_only: false,
        }
    }
}

/// The engine's devices from the caller's specs: the CPU backend alone when there are
/// none; the specs, plus a CPU fallback device when every spec is a GPU and
/// `cfg.cpu_fallback` is on. The fallback proves only partitions that no in-service
/// regular device may take (after faults), so a healthy GPU never waits for the CPU.
pub(crate) fn build_devices(cfg: &EngineConfig, specs: Vec<DeviceSpec>) -> Vec<Arc<Device>> {
    let add_fallback = cfg.cpu_fallback && !specs.is_empty() && specs.iter().all(|s| s.is_gpu);
    let mut devices: Vec<Device> = if specs.is_empty() {
        vec![Device::new(DeviceSpec::cpu(), cfg.cpu_workers, false)]
    } else {
        specs
            .into_iter()
            .map(|spec| {
                let workers = spec.workers.unwrap_or(if spec.is_gpu {
                    cfg.gpu_workers_per_device
                } else {
                    cfg.cpu_workers
                });
                Device::new(spec, workers.max(1), false)
            })
            .collect()
    };
    if add_fallback {
        devices.push(Device::new(DeviceSpec::cpu(), cfg.cpu_workers, true));
    }
    devices
        .into_iter()
        .enumerate()
        .map(|(index, mut d)| {
            d.index = index;
            Arc::new(d)
        })
        .collect()
}

/// A device's live state.
pub(crate) struct Device {
    pub spec: DeviceSpec,
    /// Position in the engine's device list (what a partition's route names).
    pub index: usize,
    pub workers: usize,
    /// The CPU fallback: proves only what no regular device may take.
    pub fallback: bool,
    pub token: ComputeToken,
    busy_ns: AtomicU64,
    pub current: Mutex<Option<(String, ProofKindId)>>,
    health: Mutex<Health>,
}

/// Faults of one device. A leaf lock: nothing else is locked while it is held.
#[derive(Default)]
struct Health {
    /// Faults since the last partition this device proved.
    consecutive_faults: u32,
    faults_total: u64,
    last_fault: String,
    /// Why the device was taken out of service, and when; `None` while in service.
    out_of_service: Option<(String, Instant)>,
}

/// What [`Device::record_fault`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FaultEffect {
    /// Counted; the device stays in service.
    Counted,
    /// This fault took the device out of service.
    TakenOut,
}

impl Device {
    pub fn new(spec: DeviceSpec, workers: usize, fallback: bool) -> Self {
        Device {
            spec,
            index: 0,
            workers,
            fallback,
            token: ComputeToken::new(),
            busy_ns: AtomicU64::new(0),
            current: Mutex::new(None),
            health: Mutex::new(Health::default()),
        }
    }

    pub fn add_busy(&self, d: Duration) {
        self.busy_ns.fetch_add(
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed))
    }

    /// Whether this critical lane can hold an SRS whose points take `points_bytes`: at most
    /// half of its VRAM budget, the other half left for its one slot, the prove plan's
    /// arena and the H window table (the 32 GiB WinningPoSt's ~0.23 GB of points in a
    /// 1 GiB lane). A larger SRS would be streamed through the lane's small budget, slower
    /// than the regular device's queue; it stays there.
    pub fn lane_holds(&self, points_bytes: u64) -> bool {
        points_bytes.saturating_mul(2) <= self.spec.backend.vram_budget_bytes()
    }

    /// Whether partitions may be routed here.
    pub fn in_service(&self) -> bool {
        self.health.lock().out_of_service.is_none()
    }

    /// A partition proved here: the consecutive-fault count starts again.
    pub fn record_success(&self) {
        self.health.lock().consecutive_faults = 0;
    }

    /// Counts a fault; the `threshold`-th in a row takes the device out of service.
    pub fn record_fault(&self, reason: &str, threshold: u32) -> FaultEffect {
        let mut h = self.health.lock();
        h.consecutive_faults += 1;
        h.faults_total += 1;
        h.last_fault = reason.to_string();
        if h.out_of_service.is_none() && h.consecutive_faults >= threshold {
            h.out_of_service = Some((
                format!(
                    "{} consecutive faults, the last: {reason}",
                    h.consecutive_faults
                ),
                Instant::now(),
            ));
            return FaultEffect::TakenOut;
        }
        FaultEffect::Counted
    }

    /// Counts a fault that takes the device out of service at once (a hung call).
    pub fn take_out_of_service(&self, reason: &str) -> FaultEffect {
        let mut h = self.health.lock();
        h.consecutive_faults += 1;
        h.faults_total += 1;
        h.last_fault = reason.to_string();
        if h.out_of_service.is_some() {
            return FaultEffect::Counted;
        }
        h.out_of_service = Some((reason.to_string(), Instant::now()));
        FaultEffect::TakenOut
    }

    /// Puts the device back in service with a clean fault count; false if it was in service.
    pub fn restore(&self) -> bool {
        let mut h = self.health.lock();
        h.consecutive_faults = 0;
        h.out_of_service.take().is_some()
    }

    /// The status snapshot of this device.
    pub fn status(&self) -> DeviceStatus {
        let current = self.current.lock().clone();
        let health = self.health.lock();
        DeviceStatus {
            name: self.spec.name.clone(),
            hardware: self.spec.hardware.clone(),
            is_gpu: self.spec.is_gpu,
            ordinal: self.spec.ordinal,
            vram_total_bytes: self.spec.vram_total_bytes,
            matrices_vram_bytes: self.spec.backend.matrices_device_bytes(),
            vram_budget_bytes: self.spec.backend.vram_budget_bytes(),
            vram_used_bytes: self.spec.backend.vram_used_bytes(),
            proving_mode: self.spec.backend.proving_mode(),
            counters: self.spec.backend.counters(),
            workers: self.workers,
            busy: self.busy(),
            current_job_id: current.as_ref().map(|c| c.0.clone()).unwrap_or_default(),
            current_kind: current.map(|c| c.1),
            fallback: self.fallback,
            critical_only: self.spec.critical_only,
            in_service: health.out_of_service.is_none(),
            out_of_service_reason: health
                .out_of_service
                .as_ref()
                .map(|o| o.0.clone())
                .unwrap_or_default(),
            out_of_service_for: health.out_of_service.as_ref().map(|o| o.1.elapsed()),
            faults_total: health.faults_total,
            last_fault: health.last_fault.clone(),
        }
    }
}
