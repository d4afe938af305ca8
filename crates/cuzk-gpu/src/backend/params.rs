//! The parameters side of a [`GpuBackend`]: the mode a shape's partitions run in and the
//! worker slots made for it at preload, the SRS resident on the device (and its H window
//! table) or streamed (its host points registered for straight copies, or its file), and
//! the recorded matrices beside it.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use cuzk_groth16::{ProveStage, Srs};

use super::budget::AbcBy;
use super::matrices::ResidentMatrices;
use super::prepare::shape_of_srs;
use super::residency::{fingerprint, resident_size, Admit, ResidentSrs};
use super::slots::SlotShape;
use super::{GpuBackend, Residency};
use crate::device::layout::as_bytes;
use crate::device::pinned::HostRegistration;
use crate::error::{GpuError, Result};
use crate::ops::msm::{build_table_g1, WindowTable};

/// A streamed SRS's host registration as attached to it (`Srs::host_pins`): `None` when
/// registering failed, so that it is tried once.
pub(super) struct Registered(pub(super) Option<HostRegistration>);

impl GpuBackend {
    /// Chooses the mode of `srs`'s partitions (`budget.rs`), makes `srs` resident now when
    /// the mode keeps it so, and makes the workers' slots for its partitions; returns the
    /// SRS's device bytes, 0 when it is streamed.
    ///
    /// # Errors
    /// [`GpuError::OverBudget`] when a partition of its shape cannot be proved within the
    /// budget; [`GpuError::SrsTooLarge`] when the mode keeps it resident but it does not
    /// fit (another SRS in use); allocation or upload errors.
    pub fn preload(&self, srs: &Srs) -> Result<u64> {
        let shape = shape_of_srs(srs);
        let fit = self.fit(srs, &shape)?;
        let bytes = match fit.srs_resident {
            false => {
                self.registered(srs);
                0
            }
            true => match self.resident_for(srs, &shape)? {
                Some(r) => r.bytes(),
                None => {
                    return Err(GpuError::SrsTooLarge {
                        bytes: resident_size(srs),
                    })
                }
            },
        };
        // The workers' buffers for this SRS's partitions: with a resident SRS the
        // matrices are expected beside it and the staging holds the witness only; a later
        // prove that needs more re-makes them as before. Without room they are made by
        // the first proves instead.
        let t = std::time::Instant::now();
        let device_abc = fit.abc_by(crate::tuning::tuning().host_abc) == AbcBy::Device;
        let ahead = self.stages_ahead(fit.workers);
        // A slot fed by stagings ahead of it holds none itself.
        let staged_from = match ahead {
            true => shape.bytes(),
            false => shape.staged_from(device_abc),
        };
        let slot_bytes = shape.device_bytes(fit.lean);
        let made = self
            .check_budget(
                "worker slots",
                self.slots.unmade() as u64 * slot_bytes as u64,
            )
            .and_then(|()| {
                self.slots
                    .reserve(&self.dev, &self.pinned, &shape, staged_from, slot_bytes)
            })
            .and_then(|made| match ahead {
                true => self.reserve_ahead(&shape, !device_abc).map(|()| made),
                false => Ok(made),
            });
        match made {
            Ok(0) => {}
            Ok(made) => tracing::info!(
                gpu = self.dev.ordinal(),
                made,
                lg = shape.lg,
                ms = t.elapsed().as_millis() as u64,
                "worker slots made at preload"
            ),
            Err(e) => tracing::warn!(
                gpu = self.dev.ordinal(),
                "worker slots left to the first proves: {e}"
            ),
        }
        Ok(bytes)
    }

    /// The registration of `srs`'s host points for copies straight from them
    /// ([`HostRegistration`]), made by the first streamed prove or preload and attached to
    /// the SRS (so every device shares it, and it ends before the points do). `None` when
    /// it is turned off ([`GpuBackendConfig::register_streamed_srs`]), the points were released, or
    /// registering failed (logged once; streaming then bounces through pinned buffers).
    pub(super) fn registered(&self, srs: &Srs) -> Option<Arc<Registered>> {
        if !self.cfg.register_streamed_srs || srs.is_released() {
            return None;
        }
        let reg = srs.host_pins.get_or_attach(|| {
            let t = Instant::now();
            let spans = [
                as_bytes(&srs.h),
                as_bytes(&srs.l),
                as_bytes(&srs.a),
                as_bytes(&srs.b_g1),
                as_bytes(&srs.b_g2),
            ];
            match self.dev.register_host(&spans) {
                Ok(r) => {
                    tracing::info!(
                        gpu = self.dev.ordinal(),
                        bytes = r.bytes(),
                        ms = t.elapsed().as_millis() as u64,
                        "streamed srs registered: chunks copied straight from its host points"
                    );
                    Registered(Some(r))
                }
                Err(e) => {
                    tracing::warn!(
                        gpu = self.dev.ordinal(),
                        "streamed srs not registered, chunks bounce through pinned buffers: {e}"
                    );
                    Registered(None)
                }
            }
        });
        reg.0.is_some().then_some(reg)
    }

    /// The resident copy of `srs`, loading it if the shape's mode keeps it resident and the
    /// budget, less what the mode still makes and what the matrices and slots hold, has
    /// room (idle SRSs leave first).
    pub(super) fn resident_for(
        &self,
        srs: &Srs,
        shape: &SlotShape,
    ) -> Result<Option<Arc<ResidentSrs>>> {
        let fit = self.fit(srs, shape)?;
        if !fit.srs_resident {
            // Streaming reads the host points, or those of the file.
            return match srs.is_released() && srs.file.is_none() {
                true => Err(GpuError::SrsReleased),
                false => Ok(None),
            };
        }
        let fp = fingerprint(srs);
        let resident = self
            .srs
            .get_or_load(&self.dev, &self.pinned, srs, &fp, |need| {
                let others = self.matrices.bytes()
                    + self.slots.device_bytes()
                    + self.shared_bytes.load(std::sync::atomic::Ordering::Relaxed)
                    + self.still_to_make(shape, srs);
                let budget = self.vram_budget_bytes().saturating_sub(others);
                let fits = self.srs.make_room(&self.dev, need, budget);
                if !fits {
                    tracing::info!(
                        gpu = self.dev.ordinal(),
                        need,
                        budget,
                        "srs does not fit the vram budget"
                    );
                }
                if !fits && self.cfg.residency != Residency::Resident {
                    return Ok(Admit::No);
                }
                // Half of what is left stays for the recorded matrices and other SRSs.
                let left = budget.saturating_sub(self.srs.bytes() + need);
                let table_bytes = match self.cfg.h_table_max_bytes {
                    _ if !fits => 0,
                    Some(max) => max.min(left),
                    None => left / 2,
                };
                Ok(Admit::Yes { table_bytes })
            })?;
        if let Some(r) = &resident {
            self.build_table(r);
        }
        Ok(resident)
    }

    /// Builds the H window table of `r` if it has one still unbuilt, under the compute
    /// token (its kernels must not run inside another prove's kernels' time). A failed
    /// build is logged and the table given up: the sums then use the plain MSM, and a
    /// device left unusable fails the prove at its next kernel, with that stage.
    pub(super) fn build_table(&self, r: &ResidentSrs) {
        let Some(t) = r.table_pending() else {
            return;
        };
        let _token = self.token.acquire();
        let start = Instant::now();
        let built = r.build_table(|h, t| {
            self.fault_at(ProveStage::HTable)?;
            build_table_g1(&self.dev, h, t)?;
            self.dev.sync_compute()
        });
        match built {
            Ok(true) => tracing::info!(
                gpu = self.dev.ordinal(),
                c = t.c,
                sets = t.sets,
                rows = t.rows(),
                bytes = t.bytes(),
                ms = start.elapsed().as_millis() as u64,
                "h window table built"
            ),
            Ok(false) => {}
            Err(e) => tracing::warn!(
                gpu = self.dev.ordinal(),
                "h window table not built, proving without it: {e}"
            ),
        }
    }

    /// The resident matrices of `r1cs` for a prove of `shape` with `srs`, uploading them
    /// when they fit the budget beside what
    /// the shape's mode holds and still makes (the SRS is made resident first when the
    /// mode keeps it so: the SRS comes before the matrices). `Ok(None)`: they do not fit,
    /// or the mode leaves this call's a, b, c to the host ([`AbcBy`]).
    pub(super) fn matrices_for(
        &self,
        r1cs: &cuzk_groth16::recorded::R1cs,
        shape: &SlotShape,
        srs: &Srs,
    ) -> Result<Option<Arc<ResidentMatrices>>> {
        let by = self
            .fit(srs, shape)?
            .abc_by(crate::tuning::tuning().host_abc);
        if by == AbcBy::Host {
            return Ok(None);
        }
        if let Some(m) = self.matrices.find(r1cs.id()) {
            return Ok(Some(m));
        }
        self.resident_for(srs, shape)?;
        self.matrices.get_or_load(&self.dev, r1cs, |need| {
            let others = self.srs.bytes()
                + self.slots.device_bytes()
                + self.shared_bytes.load(std::sync::atomic::Ordering::Relaxed)
                + self.still_to_make(shape, srs);
            let budget = self.vram_budget_bytes().saturating_sub(others);
            let fits = self.matrices.make_room(&self.dev, need, budget);
            // Said until a prove has said that it evaluates a, b, c on the host instead.
            if !fits && !self.host_products_logged.load(Ordering::Relaxed) {
                tracing::info!(
                    gpu = self.dev.ordinal(),
                    need,
                    budget,
                    "recorded matrices do not fit the vram budget"
                );
            }
            Ok(fits)
        })
    }

    /// The window table of the H query of `srs`, when it is resident with one built.
    pub fn h_table(&self, srs: &Srs) -> Option<WindowTable> {
        self.srs.peek(&fingerprint(srs)).and_then(|r| r.table())
    }
}
