//! The budget's side of [`GpuBackend`]: the device byte budget, what it holds now, the
//! mode each shape is proved in (`budget.rs` chooses it from the byte counts made here),
//! and the checks every allocation passes.

use crate::backend::budget::{self, Costs, Fit};
use crate::backend::plan::{Placement, ProvePlan};
use crate::backend::residency::resident_size;
use crate::backend::slots::SlotShape;
use crate::backend::{shape_of_srs, GpuBackend, Residency, MIN_STREAM_CHUNK};
use crate::error::{GpuError, Result};
use cuzk_groth16::Srs;

impl GpuBackend {
    /// The device budget: `vram_budget_bytes`, or what was free on first use less
    /// `vram_reserve_bytes` (read once: another process's allocations on a shared card are
    /// what that reading saw).
    pub fn vram_budget_bytes(&self) -> u64 {
        *self.budget.get_or_init(|| {
            let (free, total) = self.dev.mem_info().unwrap_or((0, 0));
            let budget = self
                .cfg
                .vram_budget_bytes
                .unwrap_or_else(|| free.saturating_sub(self.cfg.vram_reserve_bytes));
            tracing::info!(
                gpu = self.dev.ordinal(),
                budget,
                free,
                total,
                reserve = self.cfg.vram_reserve_bytes,
                configured = self.cfg.vram_budget_bytes.is_some(),
                "vram budget"
            );
            budget
        })
    }

    /// Device bytes the backend holds now: resident SRSs, matrices, slots, the arena.
    pub fn vram_used_bytes(&self) -> u64 {
        self.srs.bytes() + self.matrices.bytes() + self.slots.device_bytes() + self.shared_bytes()
    }

    /// The mode partitions of `shape` are proved in with `srs` (`budget.rs`), chosen on the
    /// first call for the shape (logged once) and kept for it: the device's other shapes
    /// keep theirs, and none gets more workers than the fewest any admits (`Fits`).
    ///
    /// # Errors
    /// [`GpuError::OverBudget`] when not even a streamed SRS with one lean worker fits.
    pub fn fit(&self, srs: &Srs, shape: &SlotShape) -> Result<Fit> {
        let mut fits = self.fit.lock();
        if let Some((f, _)) = fits.get(shape) {
            return Ok(f);
        }
        // On a small card a smaller chunk is what lets a streamed mode fit at all.
        let options: Vec<_> = budget::chunk_sizes(self.configured_chunk(shape), MIN_STREAM_CHUNK)
            .map(|chunk| (chunk, self.costs_at(srs, shape, chunk)))
            .collect();
        let budget = self.vram_budget_bytes();
        let (chosen, costs) =
            budget::choose_among(&options, budget, self.cfg.workers).map_err(|need| {
                GpuError::OverBudget {
                    ordinal: self.dev.ordinal(),
                    lg: shape.lg,
                    need,
                    budget,
                }
            })?;
        fits.insert(*shape, chosen, costs);
        let max_slots = fits.max_slots().unwrap_or(chosen.workers);
        let (chosen, _) = fits.get(shape).unwrap_or((chosen, costs));
        tracing::info!(
            gpu = self.dev.ordinal(),
            lg = shape.lg,
            bytes = chosen.bytes,
            budget,
            "proving mode: {chosen}"
        );
        self.slots.set_max(max_slots);
        Ok(chosen)
    }

    /// What the modes of `shape` cost on this device with `srs` (`budget.rs`), the SRS
    /// streamed in chunks of the configured size.
    pub fn costs(&self, srs: &Srs, shape: &SlotShape) -> Costs {
        self.costs_at(srs, shape, self.configured_chunk(shape))
    }

    /// The configured streamed chunk for `shape` (no larger than its longest query).
    fn configured_chunk(&self, shape: &SlotShape) -> usize {
        self.cfg.stream_chunk_points.clamp(1, shape.max_query())
    }

    /// [`GpuBackend::costs`] with the SRS streamed in chunks of `chunk` points.
    pub fn costs_at(&self, srs: &Srs, shape: &SlotShape, chunk: usize) -> Costs {
        let n_h = srs.lens().h;
        let resident = Placement::Resident {
            lanes: self.lanes(shape, n_h, None),
            table: None,
        };
        let streamed = Placement::Streamed {
            chunk,
            h_acc: None,
            acc: self.cfg.stream_accumulators,
        };
        let plan =
            |p| ProvePlan::new(shape, n_h, p, self.hints(shape), self.packed_max()).total as u64;
        Costs {
            srs: match self.cfg.residency {
                Residency::Streamed => u64::MAX / 4,
                _ => resident_size(srs),
            },
            slot_full: shape.device_bytes(false) as u64,
            slot_lean: shape.device_bytes(true) as u64,
            plan_resident: plan(resident),
            plan_streamed: match self.cfg.residency {
                Residency::Resident => u64::MAX / 4,
                _ => plan(streamed),
            },
        }
    }

    /// [`GpuBackend::costs`] of the partitions `srs` is for.
    pub fn costs_of(&self, srs: &Srs) -> Costs {
        self.costs(srs, &shape_of_srs(srs))
    }

    /// Points per streamed chunk for partitions of `shape`: the chosen mode's, or the
    /// configured size before a mode is chosen.
    pub(super) fn stream_chunk(&self, shape: &SlotShape) -> usize {
        match self.fit.lock().get(shape) {
            Some((f, _)) if f.chunk > 0 => f.chunk,
            _ => self.configured_chunk(shape),
        }
    }

    /// The mode of the largest shape chosen for (`budget.rs`), if any: what the slots are
    /// made for.
    pub fn chosen_fit(&self) -> Option<Fit> {
        self.fit_costs().map(|(f, _)| f)
    }

    /// The mode and byte counts of the largest shape chosen for.
    fn fit_costs(&self) -> Option<(Fit, Costs)> {
        self.fit.lock().largest()
    }

    /// Device bytes the chosen mode still has to make (slots not yet made, the arena's
    /// growth): what an SRS or matrices loaded now must leave free.
    pub(super) fn still_to_make(&self, shape: &SlotShape, srs: &Srs) -> u64 {
        let (own, largest) = {
            let fits = self.fit.lock();
            (fits.get(shape), fits.largest())
        };
        // The arena grows to the larger of this shape's plan and the largest shape's.
        let own = own.map(|(fit, costs)| match fit.srs_resident {
            true => {
                let placement = Placement::Resident {
                    lanes: self.lanes(shape, srs.lens().h, None),
                    table: None,
                };
                ProvePlan::new(
                    shape,
                    srs.lens().h,
                    placement,
                    self.hints(shape),
                    self.packed_max(),
                )
                .total as u64
            }
            false => costs.plan_streamed,
        });
        let largest = largest.map(|(fit, costs)| match fit.srs_resident {
            true => costs.plan_resident,
            false => costs.plan_streamed,
        });
        let Some(plan) = own.into_iter().chain(largest).max() else {
            return 0;
        };
        let grow = plan.saturating_sub(self.shared_bytes());
        self.unmade_slot_bytes() + grow
    }

    /// Device bytes of the slots the chosen mode has still to make.
    fn unmade_slot_bytes(&self) -> u64 {
        self.fit_costs().map_or(0, |(fit, costs)| {
            self.slots.unmade() as u64 * fit.slot_bytes(&costs)
        })
    }

    /// Device bytes of the shared prove arena.
    fn shared_bytes(&self) -> u64 {
        self.shared_bytes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Device bytes the shared prove arena may take now: the budget less everything else
    /// held and the slots the chosen mode still has to make.
    pub(super) fn arena_room(&self) -> u64 {
        let others = self.vram_used_bytes() - self.shared_bytes();
        self.vram_budget_bytes()
            .saturating_sub(others.saturating_add(self.unmade_slot_bytes()))
    }

    /// Fails unless `bytes` more fit the budget now.
    ///
    /// # Errors
    /// [`GpuError::BudgetExceeded`] naming `what`.
    pub(super) fn check_budget(&self, what: &'static str, bytes: u64) -> Result<()> {
        let (used, budget) = (self.vram_used_bytes(), self.vram_budget_bytes());
        if used + bytes > budget {
            return Err(GpuError::BudgetExceeded {
                ordinal: self.dev.ordinal(),
                what,
                bytes,
                used,
                budget,
            });
        }
        Ok(())
    }
}
