//! The parameters side of [`Engine`]: preloading an SRS (host, then each device that keeps
//! parameters in its own memory, then the circuit's shape, so that a warm daemon's first
//! proof starts at once), evicting it, and the SRS status with its tier.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{Backend, Srs};
use tracing::{info, warn};

use crate::device::Device;
use crate::srs_manager::{SrsStatus, SrsTier};
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
    if every_regular_device(&shared.devices, |b| b.srs_device_bytes(srs) > 0) {
        shared.srs.release(circuit_id);
        return;
    }
    release_if_streamed(shared, circuit_id, srs);
}

/// Releases the host copy of `circuit_id`'s points when it is larger than the SRS budget
/// and every regular device in service streams them and can read them from the file
/// (`SrsManager::release_to_file`): such an SRS is opened to stream in the first place
/// (`SrsManager::set_stream_rule`), so this returns one read back in full (for a device
/// that needed the points again) to its file.
fn release_if_streamed(shared: &Shared, circuit_id: &str, srs: &Srs) {
    if srs.host_bytes() as u64 > shared.cfg.srs_budget_bytes
        && every_device_streams(&shared.devices, srs)
    {
        shared.srs.release_to_file(circuit_id);
    }
}

/// Whether there is a regular device in service and every one streams `srs`'s points and
/// can read them from its file ([`cuzk_groth16::Backend::streams_srs_from_file`]).
pub(crate) fn every_device_streams(devices: &[Arc<Device>], srs: &Srs) -> bool {
    every_regular_device(devices, |b| b.streams_srs_from_file(srs))
}

/// Whether there is a regular (not fallback) device in service and `f` holds for each.
/// Critical lanes do not count: a lane that holds a WinningPoSt SRS must not release the
/// host copy that its GPU's regular device reads when the lane is busy or out of service,
/// and a lane that never holds a PoRep SRS must not keep that SRS's host copy.
fn every_regular_device(devices: &[Arc<Device>], f: impl Fn(&dyn Backend) -> bool) -> bool {
    let mut regular = regular_devices(devices).peekable();
    regular.peek().is_some() && regular.all(|d| f(&*d.spec.backend))
}

/// The devices in service that are neither the CPU fallback nor a critical lane.
fn regular_devices(devices: &[Arc<Device>]) -> impl Iterator<Item = &Arc<Device>> {
    devices
        .iter()
        .filter(|d| !d.fallback && !d.spec.critical_only && d.in_service())
}

impl Engine {
    /// Loads an SRS ahead of use: (already resident, load time).
    ///
    /// # Errors
    /// [`EngineError::UnknownSrs`], [`EngineError::SrsLoad`].
    pub fn preload_srs(&self, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        // An SRS too large for its budget that every device streams comes back opened to
        // stream, never decoded (`SrsManager::set_stream_rule`).
        let (lease, loaded) = self.shared.srs.acquire(circuit_id)?;
        let t = Instant::now();
        // Then into each device that keeps parameters in its own memory; into a critical
        // lane only an SRS it holds (its partitions go to the regular devices otherwise).
        let points_bytes = lease.srs().points_bytes();
        for device in &self.shared.devices {
            if device.spec.critical_only && !device.lane_holds(points_bytes) {
                continue;
            }
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
        self.record_shape(circuit_id);
        self.preload_matrices(circuit_id, lease.srs());
        drop(lease);
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
        let synth = &self.shared.synth;
        if !synth.recording_on() {
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
        match provider.record_shape(synth, circuit_id) {
            Ok(true) => info!(
                circuit_id,
                ms = t.elapsed().as_millis() as u64,
                bytes = synth.recorded_bytes(),
                "shape recorded at preload"
            ),
            Ok(false) => {}
            Err(e) => warn!(circuit_id, "shape not recorded at preload: {e}"),
        }
    }

    /// Hands `circuit_id`'s recorded shape, when there is one, to each regular device, so
    /// that a device which evaluates a, b, c from the shape's matrices loads them now
    /// rather than in its first prove: there the load held the slot for ~15.7 s of a
    /// 32 GiB PoRep's first call while the other worker proved alone
    /// (docs/runs/2026-12-06.md, seventh session). A failure is logged: the first prove
    /// loads them then, or takes the host's a, b, c.
    fn preload_matrices(&self, circuit_id: &str, srs: &Srs) {
        let Some(r1cs) = self.shared.synth.recorded(circuit_id) else {
            return;
        };
        for device in regular_devices(&self.shared.devices) {
            let t = Instant::now();
            match device.spec.backend.preload_matrices(srs, &r1cs) {
                Ok(0) => {}
                Ok(bytes) => info!(
                    circuit_id,
                    device = %device.spec.name,
                    bytes,
                    ms = t.elapsed().as_millis() as u64,
                    "recorded matrices loaded at preload"
                ),
                Err(e) => {
                    warn!(circuit_id, device = %device.spec.name, "recorded matrices left to the first prove: {e}")
                }
            }
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
