//! [`DeviceSpec`]: a prover device as the engine sees it: a name, an `Arc<dyn Backend>`
//! and how many workers share it; and the engine's per-device state (the fair compute
//! token, busy time, the job on it). Finding devices and building their backends is the
//! caller's business (the daemon); with none given the engine proves on the CPU backend.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cuzk_groth16::Backend;
use parking_lot::Mutex;

use crate::token::ComputeToken;
use crate::ProofKindId;

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
        }
    }
}

/// A device's live state.
pub(crate) struct Device {
    pub spec: DeviceSpec,
    pub workers: usize,
    pub token: ComputeToken,
    busy_ns: AtomicU64,
    pub current: Mutex<Option<(String, ProofKindId)>>,
}

impl Device {
    pub fn new(spec: DeviceSpec, workers: usize) -> Self {
        Device {
            spec,
            workers,
            token: ComputeToken::new(),
            busy_ns: AtomicU64::new(0),
            current: Mutex::new(None),
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
}
