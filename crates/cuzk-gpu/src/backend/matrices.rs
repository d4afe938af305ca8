//! [`MatrixSet`]: the recorded A, B, C matrices of circuit shapes kept in device memory
//! beside the SRSs, so that a deferred assignment (`Assignment::deferred`) has its a, b, c
//! computed on the device from the uploaded witness (`ops::sparse`) instead of computed and
//! uploaded by the host. Keyed by the recording's identity (`R1cs::id`), one allocation
//! each, uploaded on a shape's first deferred prove; counted in the backend's VRAM budget
//! with the resident SRSs (`mod.rs` decides what fits; what does not is evaluated on the
//! CPU); a set of matrices in use by a compute call is never evicted, idle ones leave least
//! recently used first.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cuzk_groth16::recorded::R1cs;
use parking_lot::Mutex;

use crate::device::arena::{DevRegion, VramArena};
use crate::device::Device;
use crate::error::Result;
use crate::ops::sparse::MatricesLayout;

/// One recording's matrices in device memory.
pub struct ResidentMatrices {
    layout: MatricesLayout,
    // A Mutex only to make the arena (whose bump pointer is a Cell) shareable; the region
    // is taken by offset.
    arena: Mutex<VramArena>,
    last_used: AtomicU64,
}

impl ResidentMatrices {
    /// Runs `f` with the matrices' region and layout.
    ///
    /// # Errors
    /// Whatever `f` returns.
    pub fn with_region<T>(
        &self,
        f: impl FnOnce(&DevRegion<'_>, &MatricesLayout) -> Result<T>,
    ) -> Result<T> {
        let arena = self.arena.lock();
        let region = arena.region(0, self.layout.bytes())?;
        f(&region, &self.layout)
    }

    /// Device bytes held.
    pub fn bytes(&self) -> u64 {
        self.layout.bytes() as u64
    }
}

/// The resident matrices of one device.
#[derive(Default)]
pub struct MatrixSet {
    list: Mutex<Vec<Arc<ResidentMatrices>>>,
    // Serializes loads, so two workers with the same new shape upload it once.
    loading: Mutex<()>,
    clock: AtomicU64,
    uploads: AtomicU64,
}

impl MatrixSet {
    /// The resident matrices of recording `id`, marked used now.
    pub fn find(&self, id: u64) -> Option<Arc<ResidentMatrices>> {
        let list = self.list.lock();
        let m = list.iter().find(|m| m.layout.r1cs_id == id)?.clone();
        m.last_used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        Some(m)
    }

    /// Bytes of all resident matrices.
    pub fn bytes(&self) -> u64 {
        self.list.lock().iter().map(|m| m.bytes()).sum()
    }

    /// Matrix uploads made so far.
    pub fn uploads(&self) -> u64 {
        self.uploads.load(Ordering::Relaxed)
    }

    /// Drops idle matrices, least recently used first, until `need` more bytes fit in
    /// `budget` or none idle is left. Returns whether they fit.
    pub fn make_room(&self, dev: &Device, need: u64, budget: u64) -> bool {
        let mut list = self.list.lock();
        loop {
            let used: u64 = list.iter().map(|m| m.bytes()).sum();
            if used + need <= budget {
                return true;
            }
            // Idle: nobody but the list holds it.
            let victim = list
                .iter()
                .enumerate()
                .filter(|(_, m)| Arc::strong_count(m) == 1)
                .min_by_key(|(_, m)| m.last_used.load(Ordering::Relaxed))
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    let m = list.swap_remove(i);
                    tracing::info!(
                        gpu = dev.ordinal(),
                        bytes = m.bytes(),
                        "recorded matrices evicted from vram"
                    );
                }
                None => return false,
            }
        }
    }

    /// Drops every idle set of matrices; returns the bytes released.
    pub fn evict_idle(&self, dev: &Device) -> u64 {
        let mut list = self.list.lock();
        let before: u64 = list.iter().map(|m| m.bytes()).sum();
        list.retain(|m| Arc::strong_count(m) > 1);
        let after: u64 = list.iter().map(|m| m.bytes()).sum();
        if before > after {
            tracing::info!(
                gpu = dev.ordinal(),
                bytes = before - after,
                "recorded matrices evicted from vram"
            );
        }
        before - after
    }

    /// The resident matrices of `r1cs`, uploading them when absent and `admit(bytes)` says
    /// they fit (the closure makes room or refuses). `Ok(None)`: not resident, not admitted.
    ///
    /// # Errors
    /// A recording too large for the kernels' 32-bit indices; allocation or upload errors.
    pub fn get_or_load(
        &self,
        dev: &Arc<Device>,
        r1cs: &R1cs,
        admit: impl FnOnce(u64) -> Result<bool>,
    ) -> Result<Option<Arc<ResidentMatrices>>> {
        if let Some(m) = self.find(r1cs.id()) {
            return Ok(Some(m));
        }
        let _loading = self.loading.lock();
        if let Some(m) = self.find(r1cs.id()) {
            return Ok(Some(m));
        }
        let layout = MatricesLayout::of(r1cs)?;
        if !admit(layout.bytes() as u64)? {
            return Ok(None);
        }
        let t = std::time::Instant::now();
        let arena = VramArena::new(dev.clone(), layout.bytes())?;
        layout.upload(dev, r1cs, &arena.region(0, layout.bytes())?)?;
        self.uploads.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            gpu = dev.ordinal(),
            bytes = layout.bytes(),
            rows = layout.n_rows(),
            entries = r1cs.entries(),
            ms = t.elapsed().as_millis() as u64,
            "recorded matrices resident in vram"
        );
        let m = Arc::new(ResidentMatrices {
            layout,
            arena: Mutex::new(arena),
            last_used: AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed)),
        });
        self.list.lock().push(m.clone());
        Ok(Some(m))
    }
}
