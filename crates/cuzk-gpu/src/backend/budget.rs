//! The device's memory budget and the mode a shape is proved in ([`Fit`]). One byte budget
//! per device (`GpuBackendConfig::vram_budget_bytes`, by default what was free when the
//! backend first needed it, less `vram_reserve_bytes`) bounds everything the backend
//! allocates: resident SRSs with their window tables, recorded matrices, the workers'
//! slots and the shared prove arena. Nothing asks the driver for free memory after that:
//! another process's allocations on a shared card are what the first reading saw.
//!
//! [`choose_among`] is a pure function of the byte counts: for the first shape proved (or
//! preloaded) it picks, in this order of preference, the SRS resident with every worker,
//! resident with one worker, then streamed with one worker in a full slot or in a **lean**
//! one, whose witness vectors are uploaded over a, b, c (`slots.rs`: split when each fits
//! one of them, the L and A scalars once the quotient is done, the B scalars once the H sum
//! has read it), whichever fits with the larger chunk of streamed points (the full one on a
//! tie). Below that a partition of the shape cannot be proved on the device, and the error
//! names both figures. Recorded matrices (a, b, c on the device) are admitted later only
//! into what the chosen mode leaves. Each shape proved on the device keeps its own mode
//! ([`Fits`]): a WindowPoSt or WinningPoSt partition between two PoRep ones neither takes
//! the PoRep's stream chunk away nor adds a slot beside its one.
//!
//! A streamed SRS never gets a second worker slot, however much room is left: the other
//! callers stage ahead of the one slot (`ahead.rs`), which keeps the compute stream as busy
//! as two slots would, and two slots would stream the SRS twice over the one PCIe link. On
//! an 80 GB H100 (2026-12-06) two full streamed workers proved the 32 GiB PoRep in 3.02 s
//! per 2^27 partition (GPU busy 78%), one lean worker held to 24 GiB on the same card in
//! 2.13 (busy 96%).

use crate::backend::slots::SlotShape;

/// What [`choose_among`] weighs, in device bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Costs {
    /// The resident SRS without a window table.
    pub srs: u64,
    /// One full slot (a, b, c and the witness vectors side by side).
    pub slot_full: u64,
    /// One lean slot (the witness vectors over a, b, c).
    pub slot_lean: u64,
    /// The shared prove arena with the SRS resident.
    pub plan_resident: u64,
    /// The shared prove arena with the SRS streamed.
    pub plan_streamed: u64,
}

/// How a shape is proved on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fit {
    /// The SRS is made resident (else streamed from host memory).
    pub srs_resident: bool,
    /// Workers that prove at once: slots made.
    pub workers: usize,
    /// Slots are lean: the witness vectors go up once the H sum has read the quotient.
    pub lean: bool,
    /// Device bytes this mode holds (SRS, slots, arena; no table, no matrices).
    pub bytes: u64,
    /// Points per streamed chunk of the SRS (0 with the SRS resident, or when the costs
    /// did not say): a smaller chunk needs smaller bounce buffers and MSM scratch, so a
    /// mode that does not fit with the configured chunk may fit with a smaller one.
    pub chunk: usize,
}

impl Fit {
    /// Device bytes of one slot in this mode.
    pub fn slot_bytes(&self, costs: &Costs) -> u64 {
        match self.lean {
            true => costs.slot_lean,
            false => costs.slot_full,
        }
    }

    /// Who evaluates a deferred assignment's a, b, c in this mode; `host_only`: the
    /// tuning knob that keeps them on the host (`CUZK_GPU_HOST_ABC=1`).
    pub fn abc_by(&self, host_only: bool) -> AbcBy {
        match self.srs_resident && !self.lean && !host_only {
            true => AbcBy::Device,
            false => AbcBy::Host,
        }
    }
}

/// Who evaluates a deferred assignment's a, b, c (from its recorded matrices): the
/// device, in ~90 ms of kernels a 2^27 partition on the compute stream, or the host, in
/// ~1.1 s of 16 cores into the pinned staging, beside the device's kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AbcBy {
    /// The device, from the matrices in VRAM: beside a resident SRS, whose staging then
    /// holds the witness only (the host's a, b, c would take 13 GB more pinned memory a
    /// worker at 2^27; the full card's host budget is 64 GiB).
    Device,
    /// The host: a lean slot takes the witness only after the quotient, while the
    /// matrices would read it before. And with a streamed SRS in a full slot, whose
    /// staging holds a, b, c anyway: on an 80 GB H100 the 32 GiB PoRep proved in 2.125 s
    /// a partition with the host's products against 2.406 with the device's (fifth
    /// session). The device's for a call alone (`AbcBy::Load`, ded02c1) made that call
    /// load the matrices: ~15.7 s in the first call (the timeline's shift) while the other
    /// worker proved alone with ~2 s gaps (2 proofs: 27.39 s per proof against 22.93 with
    /// the host's; docs/runs/2026-12-06.md, seventh session).
    Host,
}

impl std::fmt::Display for Fit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "srs {}, {} {} worker{}",
            if self.srs_resident {
                "resident"
            } else {
                "streamed"
            },
            self.workers,
            if self.lean { "lean" } else { "full" },
            if self.workers == 1 { "" } else { "s" }
        )?;
        if !self.srs_resident && self.chunk > 0 {
            write!(f, " ({}-point chunks)", self.chunk)?;
        }
        Ok(())
    }
}

/// The first mode of the preference order (module docs) that fits `budget` for up to
/// `max_workers` workers, over the costs of several stream chunk sizes (`(points per
/// chunk, costs)`, largest chunk first): the first mode that fits with any of them, with
/// the largest chunk it fits with, and the costs of that chunk. A smaller chunk is slower
/// only by more, shorter MSM launches; a mode further down the order (one worker instead
/// of two, a lean slot) costs more. `Err(least)`: the smallest mode's bytes at the
/// smallest chunk.
pub fn choose_among(
    options: &[(usize, Costs)],
    budget: u64,
    max_workers: usize,
) -> Result<(Fit, Costs), u64> {
    let max_workers = max_workers.max(1) as u64;
    let mode = |costs: &Costs, chunk: usize, srs_resident: bool, workers: u64, lean: bool| {
        let slot = if lean {
            costs.slot_lean
        } else {
            costs.slot_full
        };
        let (srs, plan, chunk) = match srs_resident {
            true => (costs.srs, costs.plan_resident, 0),
            false => (0, costs.plan_streamed, chunk),
        };
        Fit {
            srs_resident,
            workers: workers as usize,
            lean,
            bytes: srs.saturating_add(plan).saturating_add(workers * slot),
            chunk,
        }
    };
    // The first that fits with any chunk (the largest it fits with).
    let first = |resident: bool, workers: u64, lean: bool| {
        options.iter().find_map(|(chunk, costs)| {
            let fit = mode(costs, *chunk, resident, workers, lean);
            (fit.bytes <= budget).then_some((fit, *costs))
        })
    };
    let order = [(true, max_workers, false), (true, 1, false)];
    if let Some(found) = order.into_iter().find_map(|(r, w, l)| first(r, w, l)) {
        return Ok(found);
    }
    // One streamed worker: a full slot, unless a lean one fits with larger chunks. With
    // the next call staged ahead of the slot (`ahead.rs`) a lean slot costs only its
    // witness upload after the H sum (0.19 s at 2^27), less than the chunk overhead of
    // halving the chunk (24 GiB free: 3.22 s per partition in a full slot with 2^20-point
    // chunks, 2.97 s at 16 GiB in a lean one with 2^21; docs/runs/2026-12-04.md).
    match (first(false, 1, false), first(false, 1, true)) {
        (Some(full), Some(lean)) if lean.0.chunk > full.0.chunk => return Ok(lean),
        (Some(full), _) => return Ok(full),
        (None, Some(lean)) => return Ok(lean),
        (None, None) => {}
    }
    Err(options
        .iter()
        .map(|(chunk, costs)| mode(costs, *chunk, false, 1, true).bytes)
        .min()
        .unwrap_or(u64::MAX))
}

/// The modes chosen so far, one per shape proved or preloaded: a device's kinds (PoRep,
/// WindowPoSt, WinningPoSt, SnapDeals) share its slots and its budget. Each shape keeps
/// its own mode (its stream chunk, lean or full slot), but no shape gets more workers than
/// the fewest any shape's mode admits: a smaller shape's mode never adds a slot beside a
/// larger one's, which the budget has no room for. What the slots still to make need
/// follows the largest shape's mode.
#[derive(Debug, Default)]
pub struct Fits(Vec<(SlotShape, Fit, Costs)>);

/// Shapes [`Fits`] keeps at most (the oldest other than the largest goes first).
const FITS_MAX: usize = 16;

impl Fits {
    /// The mode of `shape`, its workers no more than `Fits::workers`, and its costs.
    pub fn get(&self, shape: &SlotShape) -> Option<(Fit, Costs)> {
        let workers = self.workers();
        self.0
            .iter()
            .find(|(s, _, _)| s == shape)
            .map(|&(_, f, c)| {
                let fit = Fit {
                    workers: f.workers.min(workers),
                    ..f
                };
                (fit, c)
            })
    }

    /// Keeps `fit` (with `costs`) as the mode of `shape`.
    pub fn insert(&mut self, shape: SlotShape, fit: Fit, costs: Costs) {
        self.0.retain(|(s, _, _)| *s != shape);
        if self.0.len() >= FITS_MAX {
            let largest = self.largest_at();
            if let Some(i) = (0..self.0.len()).find(|&i| Some(i) != largest) {
                self.0.remove(i);
            }
        }
        self.0.push((shape, fit, costs));
    }

    /// The fewest workers any shape's mode admits (the slots that may exist), or `None`
    /// before any.
    pub fn max_slots(&self) -> Option<usize> {
        self.0.iter().map(|(_, f, _)| f.workers).min()
    }

    fn workers(&self) -> usize {
        self.max_slots().unwrap_or(usize::MAX)
    }

    /// Where the shape with the largest slot is (the last such on a tie).
    fn largest_at(&self) -> Option<usize> {
        (0..self.0.len()).max_by_key(|&i| {
            let (_, f, c) = &self.0[i];
            (f.slot_bytes(c), i)
        })
    }

    /// The mode (workers as [`Fits::get`]) and costs of the shape with the largest slot:
    /// what the slots are made for.
    pub fn largest(&self) -> Option<(Fit, Costs)> {
        let (shape, _, _) = self.0[self.largest_at()?];
        self.get(&shape)
    }
}

/// The streamed chunk sizes [`choose_among`] weighs, largest first: `configured`, then
/// its halves while they stay at least `min`.
pub fn chunk_sizes(configured: usize, min: usize) -> impl Iterator<Item = usize> {
    std::iter::successors(Some(configured), move |&c| (c / 2 >= min).then_some(c / 2))
}

/// Bytes of a lean slot of `shape`: the larger of a, b, c and the witness vectors, which
/// share the same memory one after the other.
pub fn lean_slot_bytes(shape: &SlotShape) -> u64 {
    let (lay, total) = shape.layout();
    let abc = lay[crate::backend::slots::SlotVec::L as usize].0;
    abc.max(total - abc) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`choose_among`] with one set of costs (chunk unknown: 0).
    fn choose(costs: &Costs, budget: u64, max_workers: usize) -> Result<Fit, u64> {
        choose_among(&[(0, *costs)], budget, max_workers).map(|(fit, _)| fit)
    }

    const GB: u64 = 1_000_000_000;
    const GIB: u64 = 1 << 30;

    /// A 32 GiB PoRep partition (2^27) as measured on the H200: SRS 47.4 GB, a full slot
    /// 22.3 GB, a lean one 12.9 GB; the arenas are this module's estimate.
    fn porep_32g() -> Costs {
        Costs {
            srs: 47_400_000_000,
            slot_full: 22_300_000_000,
            slot_lean: 12_900_000_000,
            plan_resident: 6 * GB,
            plan_streamed: 2 * GB,
        }
    }

    #[test]
    fn a_full_h200_keeps_the_srs_and_two_workers() {
        let fit = choose(&porep_32g(), 138 * GB, 2).expect("fits");
        assert_eq!((fit.srs_resident, fit.workers, fit.lean), (true, 2, false));
        assert_eq!(fit.to_string(), "srs resident, 2 full workers");
    }

    #[test]
    fn an_80_gb_card_keeps_the_srs_with_one_worker() {
        let fit = choose(&porep_32g(), 79 * GB, 2).expect("fits");
        assert_eq!((fit.srs_resident, fit.workers, fit.lean), (true, 1, false));
    }

    #[test]
    fn a_24_gib_card_streams_the_srs_with_one_full_worker() {
        let fit = choose(&porep_32g(), 24 * GIB, 2).expect("fits");
        assert_eq!((fit.srs_resident, fit.workers, fit.lean), (false, 1, false));
    }

    #[test]
    fn a_streamed_srs_gets_one_worker_however_much_room_is_left() {
        // 70 GB: the SRS and one full slot do not fit, two streamed full slots would.
        let fit = choose(&porep_32g(), 70 * GB, 2).expect("fits");
        assert_eq!((fit.srs_resident, fit.workers, fit.lean), (false, 1, false));
        assert_eq!(fit.bytes, 2 * GB + 22_300_000_000);
    }

    #[test]
    fn a_smaller_shape_never_adds_a_slot_beside_a_larger_ones() {
        let shape = |lg: u32| SlotShape {
            lg,
            n_l: 1 << (lg - 1),
            n_a: 1 << (lg - 1),
            n_b: 1 << (lg - 2),
        };
        // A WinningPoSt-sized shape alone: its SRS resident with both workers.
        let small_costs = Costs {
            srs: 200_000_000,
            slot_full: 60_000_000,
            slot_lean: 40_000_000,
            plan_resident: 300_000_000,
            plan_streamed: 100_000_000,
        };
        let small = choose(&small_costs, 24 * GIB, 2).expect("fits");
        assert_eq!((small.srs_resident, small.workers), (true, 2));
        let big = choose(&porep_32g(), 24 * GIB, 2).expect("fits");
        assert_eq!((big.srs_resident, big.workers), (false, 1));
        let mut fits = Fits::default();
        assert_eq!(fits.max_slots(), None);
        fits.insert(shape(19), small, small_costs);
        assert_eq!(fits.max_slots(), Some(2));
        assert_eq!(fits.get(&shape(19)).map(|(f, _)| f.workers), Some(2));
        // The 32 GiB PoRep comes: one slot for both, each shape keeping its own mode.
        fits.insert(shape(27), big, porep_32g());
        assert_eq!(fits.max_slots(), Some(1));
        let (s, _) = fits.get(&shape(19)).expect("kept");
        assert_eq!((s.srs_resident, s.workers), (true, 1));
        assert_eq!(fits.get(&shape(27)).map(|(f, _)| f), Some(big));
        assert_eq!(fits.largest().map(|(f, _)| f), Some(big));
        assert_eq!(fits.get(&shape(20)), None);
        // Chosen again (a larger budget), a shape's mode replaces its own only.
        let again = Fit {
            chunk: 1 << 21,
            ..big
        };
        fits.insert(shape(27), again, porep_32g());
        assert_eq!(fits.get(&shape(27)).map(|(f, _)| f.chunk), Some(1 << 21));
        assert_eq!(fits.0.len(), 2);
        // Many shapes: the largest stays.
        for lg in (3..30).filter(|&lg| lg != 27) {
            fits.insert(shape(lg), small, small_costs);
        }
        assert!(fits.0.len() <= FITS_MAX);
        assert_eq!(fits.largest().map(|(f, _)| f.chunk), Some(1 << 21));
    }

    #[test]
    fn a_16_gib_card_streams_the_srs_with_one_lean_worker() {
        let fit = choose(&porep_32g(), 16 * GIB, 2).expect("fits");
        assert_eq!((fit.srs_resident, fit.workers, fit.lean), (false, 1, true));
        assert_eq!(fit.to_string(), "srs streamed, 1 lean worker");
        assert!(fit.bytes <= 16 * GIB);
    }

    /// The streamed arena as it shrinks with the chunk: two G2 bounce buffers and the
    /// MSM scratch, per point of the chunk (about 380 B), over a fixed part.
    fn porep_32g_at(chunk: usize) -> (usize, Costs) {
        let costs = Costs {
            plan_streamed: GB / 2 + chunk as u64 * 800,
            ..porep_32g()
        };
        (chunk, costs)
    }

    #[test]
    fn chunk_sizes_halve_down_to_the_least() {
        let sizes: Vec<_> = chunk_sizes(1 << 22, 1 << 19).collect();
        assert_eq!(sizes, [1 << 22, 1 << 21, 1 << 20, 1 << 19]);
        // A configured chunk below the least is tried alone.
        assert_eq!(chunk_sizes(300, 1 << 19).collect::<Vec<_>>(), [300]);
    }

    #[test]
    fn a_smaller_chunk_lets_a_better_mode_fit() {
        let options: Vec<_> = (20..=22).rev().map(|lg| porep_32g_at(1 << lg)).collect();
        // 16 GiB less a reserve: one lean slot fits only with chunks of 2^21 points.
        let budget = 15_550_000_000;
        let (fit, costs) = choose_among(&options, budget, 2).expect("fits");
        assert_eq!((fit.srs_resident, fit.workers, fit.lean), (false, 1, true));
        assert_eq!(fit.chunk, 1 << 21);
        assert_eq!(costs, options[1].1);
        assert!(fit.bytes <= budget);
        assert_eq!(
            fit.to_string(),
            "srs streamed, 1 lean worker (2097152-point chunks)"
        );
        // 23 GiB: a lean slot with chunks of 2^22 beats a full one with 2^21; 24 GiB: a
        // full one fits with 2^22 too and wins the tie.
        let (fit, _) = choose_among(&options, 23 * GIB, 2).expect("fits");
        assert_eq!((fit.lean, fit.chunk), (true, 1 << 22));
        let (fit, _) = choose_among(&options, 25 * GIB, 2).expect("fits");
        assert_eq!((fit.lean, fit.chunk), (false, 1 << 22));
        // A card too small even for the smallest chunk names what that needs.
        let least = choose_among(&options, 12 * GIB, 2).expect_err("too small");
        assert_eq!(least, options[2].1.plan_streamed + porep_32g().slot_lean);
    }

    #[test]
    fn a_12_gib_card_is_refused_with_the_least_it_needs() {
        let least = choose(&porep_32g(), 12 * GIB, 2).expect_err("too small");
        assert_eq!(least, 14_900_000_000);
    }

    // The modes of these costs (the tests above): a, b, c by the device beside a resident
    // SRS (138 and 80 GB), by the host with a streamed SRS in a full slot (24 GiB) and in
    // a lean slot (16 GiB); the knob keeps them on the host everywhere.
    #[test]
    fn a_b_c_are_evaluated_where_the_mode_has_room_and_time() {
        let by = |budget: u64, host_only: bool| {
            choose(&porep_32g(), budget, 2)
                .expect("fits")
                .abc_by(host_only)
        };
        assert_eq!(by(138 * GB, false), AbcBy::Device);
        assert_eq!(by(80 * GB, false), AbcBy::Device);
        assert_eq!(by(24 * GIB, false), AbcBy::Host);
        assert_eq!(by(16 * GIB, false), AbcBy::Host);
        for budget in [138 * GB, 80 * GB, 24 * GIB] {
            assert_eq!(by(budget, true), AbcBy::Host);
        }
    }

    #[test]
    fn the_lean_slot_holds_the_larger_half_of_the_layout() {
        let shape = SlotShape {
            lg: 27,
            n_l: 130_278_000,
            n_a: 130_000_000,
            n_b: 33_000_000,
        };
        let lean = lean_slot_bytes(&shape);
        let abc = 3 * (1u64 << 27) * 32;
        assert!(lean >= abc && lean < abc + (1 << 20));
        assert!(lean < shape.bytes() as u64);
        // A shape whose witness is longer than a, b, c: the witness decides.
        let wide = SlotShape {
            lg: 4,
            n_l: 40,
            n_a: 40,
            n_b: 40,
        };
        let (lay, total) = wide.layout();
        assert_eq!(
            lean_slot_bytes(&wide),
            (total - lay[crate::backend::slots::SlotVec::L as usize].0) as u64
        );
    }
}
