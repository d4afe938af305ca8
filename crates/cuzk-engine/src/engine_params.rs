//! The parameters side of [`Engine`]: preloading an SRS (host, then each device that keeps
//! parameters in its own memory, then the circuit's shape, so that a warm daemon's first
//! proof starts at once), evicting it, and the SRS status with its tier.

use std::time::{Duration, Instant};

use tracing::{info, warn};

use cuzk_groth16::Srs;

use crate::srs_manager::{SrsLease, SrsStatus, SrsTier};
use crate::state::Shared;
use crate::{Engine, EngineError};

/// Releases the host copy of `circuit_id`'s points when every regular device in service
/// holds `srs` in its own memory (the CPU fallback reads them again if it must prove).
/// Called after a preload and after each prove on a device; cheap when there is nothing
/// to do (a fingerprint per device).
pub(crate) fn release_if_held(shared: &Shared, circuit_id: &str, srs: &Srs) {
    if srs.is_released() {
        return;
    }
    let mut regular = shared
        .devices
        .iter()
        .filter(|d| !d.fallback && d.in_service())
        .peekable();
    if regular.peek().is_none() {
        return;
    }
    if regular.all(|d| d.spec.backend.srs_device_bytes(srs) > 0) {
        shared.srs.release(circuit_id);
        return;
    }
    release_if_streamed(shared, circuit_id, srs);
}

/// `lease`, or, when [`release_if_streamed`] releases its SRS's host copy (or another
/// worker did), a lease on the released copy instead, so that this one does not keep the
/// host copy alive. Called right after each acquire: on a host whose budget the copy
/// overdraws, the devices then never make their staging while it is held.
pub(crate) fn streamed_lease(shared: &Shared, circuit_id: &str, lease: SrsLease) -> SrsLease {
    release_if_streamed(shared, circuit_id, lease.srs());
    let entry_released = shared
        .srs
        .resident(circuit_id)
        .is_some_and(|s| s.is_released());
    if lease.srs().is_released() || !entry_released {
        return lease;
    }
    match shared.srs.acquire(circuit_id) {
        Ok((released, _)) => released,
        Err(_) => lease,
    }
}

/// Releases the host copy of `circuit_id`'s points when it is larger than the SRS budget
/// and every regular device in service streams them and can read them from the file: a
/// 32 GiB PoRep SRS (47.4 GB) on a 64 GiB host goes to the page cache instead of the
/// process (`SrsManager::release_to_file`).
fn release_if_streamed(shared: &Shared, circuit_id: &str, srs: &Srs) {
    if srs.is_released() || srs.host_bytes() as u64 <= shared.cfg.srs_budget_bytes {
        return;
    }
    if every_device_streams(&shared.devices, srs) {
        shared.srs.release_to_file(circuit_id);
    }
}

/// Whether there is a regular device in service and every one streams `srs`'s points and
/// can read them from its file ([`cuzk_groth16::Backend::streams_srs_from_file`]).
pub(crate) fn every_device_streams(
    devices: &[std::sync::Arc<crate::device::Device>],
    srs: &Srs,
) -> bool {
    let mut regular = devices
        .iter()
        .filter(|d| !d.fallback && d.in_service())
        .peekable();
    regular.peek().is_some() && regular.all(|d| d.spec.backend.streams_srs_from_file(srs))
}

impl Engine {
    /// Loads an SRS ahead of use: (already resident, load time).
    ///
    /// # Errors
    /// [`EngineError::UnknownSrs`], [`EngineError::SrsLoad`].
    pub fn preload_srs(&self, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        let (lease, loaded) = self.shared.srs.acquire(circuit_id)?;
        let t = Instant::now();
        // Before the devices make their staging: a host copy too large for the SRS budget
        // gives way to the file first, so that the two are never held together.
        let lease = streamed_lease(&self.shared, circuit_id, lease);
        // Then into each device that keeps parameters in its own memory.
        for device in &self.shared.devices {
            match device.spec.backend.preload_srs(lease.srs()) {
                Ok(0) => {}
                Ok(bytes) => {
                    info!(circuit_id, device = %device.spec.name, bytes, "srs resident on device")
                }
                Err(e) => {
                    warn!(circuit_id, device = %device.spec.name, "srs stays in host memory: {e}")
                }
            }
        }
        release_if_held(&self.shared, circuit_id, lease.srs());
        drop(lease);
        self.record_shape(circuit_id);
        // What stays held from now on must leave the partitions room: say so when not.
        if let Some(why) = self.shared.memory_ledger().overdrawn() {
            warn!(circuit_id, "{why}");
        }
        let elapsed = loaded.unwrap_or(Duration::ZERO) + t.elapsed();
        Ok((loaded.is_none(), elapsed))
    }

    /// Records `circuit_id`'s shape if its provider can (a warm daemon's first proof then
    /// synthesizes witness-only at once: a 32 GiB PoRep partition's recording otherwise
    /// holds the first proof for seconds). A failure is logged, not returned: the first
    /// request records the shape then.
    fn record_shape(&self, circuit_id: &str) {
        if !cuzk_groth16::recorded::recording_on() {
            return;
        }
        let Some((provider, _)) = self
            .shared
            .registry
            .resolve_params(circuit_id, &self.shared.cfg.param_dir)
        else {
            return;
        };
        let t = Instant::now();
        match provider.record_shape(circuit_id) {
            Ok(true) => info!(
                circuit_id,
                ms = t.elapsed().as_millis() as u64,
                bytes = cuzk_groth16::recorded::recorded_bytes(),
                "shape recorded at preload"
            ),
            Ok(false) => {}
            Err(e) => warn!(circuit_id, "shape not recorded at preload: {e}"),
        }
    }

    /// Evicts an SRS: (was resident, bytes freed).
    ///
    /// # Errors
    /// [`EngineError::SrsInUse`], [`EngineError::UnknownSrs`].
    pub fn evict_srs(&self, circuit_id: &str) -> Result<(bool, u64), EngineError> {
        let mut device_freed = 0;
        if let Some(srs) = self.shared.srs.resident(circuit_id) {
            for device in &self.shared.devices {
                device_freed += device.spec.backend.evict_srs(&srs);
            }
        }
        let (was, host_freed) = self.shared.srs.evict(circuit_id)?;
        Ok((was || device_freed > 0, host_freed + device_freed))
    }

    /// SRS entries; one resident on any device reports the `Vram` tier.
    pub fn srs_status(&self) -> Vec<SrsStatus> {
        let mut status = self.shared.srs.status();
        for s in &mut status {
            if !matches!(s.tier, SrsTier::Host | SrsTier::File) {
                continue;
            }
            let Some(srs) = self.shared.srs.resident(&s.circuit_id) else {
                continue;
            };
            if self
                .shared
                .devices
                .iter()
                .any(|d| d.spec.backend.srs_device_bytes(&srs) > 0)
            {
                s.tier = SrsTier::Vram;
            }
        }
        status
    }
}
