//! One prove's staging upload: the four parts (a, b, c, the witness vectors) filled batch
//! by batch on the host and copied on the copy stream (`Uploads`), and the parts the
//! kernels wait for once the token was taken (`LateParts`, filled on another thread or,
//! for a lean slot's witness, copied over a, b, c after the H sum). `prove.rs` runs it.

use std::time::{Duration, Instant};

use cudarc::driver::CudaEvent;
use cuzk_groth16::{ProveReport, ProveStage};

use super::prepare::{fill_batched, pieces_within, Piece, UPLOAD_BATCH};
use super::prove::CallPlan;
use super::slots::SlotShape;
use crate::device::arena::DevRegion;
use crate::device::upload::UploadScope;
use crate::device::Device;
use crate::error::{GpuError, Result};

/// Fills part k of the staging (`part`, the layout's bytes `bounds[k]..bounds[k + 1]`),
/// enqueues each batch's copy into `used` as it is written, and records `done` after them.
#[allow(clippy::too_many_arguments)]
fn fill_part<'env>(
    up: &UploadScope<'_, 'env>,
    part: &'env mut [u8],
    k: usize,
    bounds: &[usize; 5],
    pieces: &[Piece<'_>],
    used: &DevRegion<'_>,
    done: &CudaEvent,
) -> Result<()> {
    let range = bounds[k]..bounds[k + 1];
    let mine = pieces_within(pieces, &range);
    fill_batched(part, range, mine, UPLOAD_BATCH, |bytes, off| {
        up.upload(&used.slice(off, bytes.len())?, bytes)
    })?;
    up.record(done)
}

/// Fills part k of the staging like [`fill_part`] but enqueues no copy: the batches are
/// kept in `later` for the lean slot's witness upload, which waits for the H sum.
fn fill_later<'env>(
    part: &'env mut [u8],
    k: usize,
    bounds: &[usize; 5],
    pieces: &[Piece<'_>],
    later: &parking_lot::Mutex<Vec<(&'env [u8], usize)>>,
) -> Result<()> {
    let range = bounds[k]..bounds[k + 1];
    let mine = pieces_within(pieces, &range);
    fill_batched(part, range, mine, UPLOAD_BATCH, |bytes, off| {
        later.lock().push((bytes, off));
        Ok(())
    })
}

/// `staging` cut at `bounds` into the four upload parts (a, b, c, the witness vectors).
/// A staging from the witness vectors on (`staged_from == bounds[3]`: the device computes
/// a, b, c) gives three empty parts and the witness.
pub(super) fn cut_parts<'s>(
    staging: &'s mut [u8],
    bounds: &[usize; 5],
    staged_from: usize,
) -> Result<[&'s mut [u8]; 4]> {
    let short = || GpuError::Internal("slot staging smaller than its layout".into());
    if staged_from == bounds[3] {
        let witness = staging.get_mut(..bounds[4] - bounds[3]).ok_or_else(short)?;
        return Ok([&mut [], &mut [], &mut [], witness]);
    }
    if staged_from != 0 || staging.len() < bounds[4] {
        return Err(short());
    }
    let (rest, _) = staging.split_at_mut(bounds[4]);
    let (rest, p3) = rest.split_at_mut(bounds[3]);
    let (rest, p2) = rest.split_at_mut(bounds[2]);
    let (p0, p1) = rest.split_at_mut(bounds[1]);
    Ok([p0, p1, p2, p3])
}

/// One prove's staging upload (the uploads handle): the four parts (a, b, c, the witness
/// vectors; a, b, c first, in the order the quotient reads them) at `bounds` in the
/// layout, each filled batch by batch with every batch's copy into `used` enqueued as
/// soon as it is written and an event recorded after the part's copies; with the matrices
/// resident a, b, c upload nothing (the device computes them), and a lean slot's witness
/// is kept in `later` until the H sum has read the quotient. If the token is free once a
/// is on its way, the kernels start on it while b, c and the witness are filled on
/// another thread; else the whole staging is filled first, under the other worker's
/// kernels. "fill" is the host time of filling, "upload" the host wait for the last copy
/// after it, with the device time from the first copy's start to the last one's end.
pub(super) struct Uploads<'a, 's, 'env> {
    dev: &'a Device,
    up: &'s UploadScope<'s, 'env>,
    bounds: [usize; 5],
    pieces: &'a [Piece<'a>],
    used: &'a DevRegion<'a>,
    device_abc: bool,
    lean: bool,
    /// Where a lean slot's witness goes (over a, b, c).
    witness_at: usize,
    /// Recorded on the copy stream before the first copy.
    start: &'a CudaEvent,
    end: CudaEvent,
    parts_done: [CudaEvent; 4],
    later: parking_lot::Mutex<Vec<(&'env [u8], usize)>>,
}

impl<'a, 's, 'env> Uploads<'a, 's, 'env> {
    /// The upload of `shape`'s staging into `used` for a call planned as `plan`, its
    /// first copy after `start` (recorded on the copy stream).
    pub(super) fn new(
        dev: &'a Device,
        up: &'s UploadScope<'s, 'env>,
        shape: &SlotShape,
        plan: &CallPlan,
        pieces: &'a [Piece<'a>],
        used: &'a DevRegion<'a>,
        start: &'a CudaEvent,
    ) -> Result<Self> {
        Ok(Uploads {
            dev,
            up,
            bounds: upload_bounds(shape),
            pieces,
            used,
            device_abc: plan.device_abc,
            lean: plan.lean,
            witness_at: shape.witness_at(plan.lean),
            start,
            end: dev.timing_event()?,
            parts_done: part_events(dev)?,
            later: parking_lot::Mutex::new(Vec::new()),
        })
    }

    /// Fills part k (`part`) and enqueues its copies, or keeps them for later (a lean
    /// slot's witness), or records only its event (a, b, c computed on the device).
    pub(super) fn fill(&self, part: &'env mut [u8], k: usize) -> Result<()> {
        match self.device_abc {
            true if k < 3 => self.up.record(&self.parts_done[k]),
            _ if self.lean && k == 3 => fill_later(part, k, &self.bounds, self.pieces, &self.later),
            _ => fill_part(
                self.up,
                part,
                k,
                &self.bounds,
                self.pieces,
                self.used,
                &self.parts_done[k],
            ),
        }
    }

    /// Parts 1, 2, 3 filled now (`filled`: the host time of part 0), then the host wait
    /// for their copies, both reported.
    pub(super) fn fill_rest_now(
        &self,
        rest: Rest<'env>,
        filled: Duration,
        report: &mut ProveReport,
    ) -> Result<()> {
        let t = Instant::now();
        let r = rest
            .into_iter()
            .zip(1..4)
            .try_for_each(|(p, k)| self.fill(p, k));
        report.push(ProveStage::Fill, filled + t.elapsed());
        let t = Instant::now();
        let waited = self.up.drain(&self.end);
        r?;
        waited?;
        let device = self.dev.elapsed(self.start, &self.end)?;
        report.push_device(ProveStage::Upload, t.elapsed(), device);
        Ok(())
    }

    /// After kernels that overlapped the fill: the copies are done (the sums waited for
    /// them) unless the fill failed midway; the witness part's event stays where the
    /// filler recorded it. Reports the fill's host time `filled`.
    pub(super) fn settle<T>(
        &self,
        out: Result<T>,
        filled: Duration,
        report: &mut ProveReport,
    ) -> Result<T> {
        let waited = self.up.drain(&self.end);
        report.push(ProveStage::Fill, filled);
        let o = out?;
        waited?;
        let device = self.dev.elapsed(self.start, &self.parts_done[3])?;
        if self.dev.is_critical() && device > Duration::from_millis(20) {
            // The copies' own span on the device, beside the host's waits for the filler
            // ("waits for the filler"): which of the two a slow critical call waited for.
            tracing::info!(
                gpu = self.dev.ordinal(),
                ms = device.as_secs_f64() * 1e3,
                "slow upload on the device"
            );
        }
        report.push_device(ProveStage::Upload, Duration::ZERO, device);
        Ok(o)
    }
}

/// The upload parts a prove's kernels wait for after the token was taken
/// ([`LateParts::wait`] is their `ready`): those a filler thread fills and copies while
/// the kernels run (it says when each part's copies are enqueued), and a lean slot's
/// witness, copied over a, b, c once the H sum has read the quotient.
pub(super) struct LateParts<'u, 'a, 's, 'scope, 'env> {
    uploads: &'u Uploads<'a, 's, 'env>,
    /// The token was taken before b, c and the witness were filled.
    overlapped: bool,
    /// The parts the filler has enqueued, in order.
    filled: std::sync::mpsc::Receiver<usize>,
    filler: Option<std::thread::ScopedJoinHandle<'scope, (Result<()>, Duration)>>,
    /// Parts known to be enqueued (0 < recorded: a always is).
    recorded: usize,
    witness_up: bool,
    /// The filler's host time, once joined.
    pub(super) fill_time: Duration,
    /// How long the kernels' thread waited on the host for the filler, per part (a, b,
    /// c, the witness): told apart from a wait of the device's streams for the copies.
    pub(super) host_waits: [Duration; 4],
}

impl<'u, 'a, 's, 'scope, 'env> LateParts<'u, 'a, 's, 'scope, 'env> {
    /// The late parts of `uploads`; `filler` fills them while the kernels run, announcing
    /// each on the channel of `filled`, when the token was taken early (`overlapped`).
    pub(super) fn new(
        uploads: &'u Uploads<'a, 's, 'env>,
        overlapped: bool,
        filled: std::sync::mpsc::Receiver<usize>,
        filler: Option<std::thread::ScopedJoinHandle<'scope, (Result<()>, Duration)>>,
    ) -> Self {
        LateParts {
            uploads,
            overlapped,
            filled,
            filler,
            recorded: 1,
            witness_up: false,
            fill_time: Duration::ZERO,
            host_waits: [Duration::ZERO; 4],
        }
    }

    /// `ready(k, d)` (see [`Ready`](super::prove::Ready)): makes `d`'s stream wait for part k's copies, after
    /// the filler has enqueued them (joining it for the witness) or, for a lean slot's
    /// witness, after enqueueing them behind the H sum.
    pub(super) fn wait(&mut self, k: usize, d: Option<&Device>) -> Result<()> {
        // Every part here is sent by the filler or (a lean slot's witness) at the wait
        // for it.
        let Some(d) = d else { return Ok(()) };
        let u = self.uploads;
        // The B scalars (4) go up with the other witness vectors (3).
        let k = k.min(3);
        let t = Instant::now();
        if self.overlapped {
            if k < 3 {
                while self.recorded <= k {
                    match self.filled.recv() {
                        Ok(j) => self.recorded = j + 1,
                        // The filler stopped early: its error comes from the join.
                        Err(_) => break,
                    }
                }
            }
            if self.recorded <= k {
                let Some(f) = self.filler.take() else {
                    return Err(GpuError::Internal("the staging fill stopped".into()));
                };
                let (r, took) = f
                    .join()
                    .map_err(|_| GpuError::Internal("the staging fill panicked".into()))?;
                self.fill_time += took;
                r?;
                self.recorded = 4;
            }
        }
        self.host_waits[k] += t.elapsed();
        if u.lean && k == 3 && !self.witness_up {
            self.witness_up = true;
            // The witness goes over a, b, c: after the H sum (on the compute stream) has
            // read the quotient.
            let h_read = u.dev.timing_event()?;
            u.dev.record(&h_read)?;
            u.dev.copy_wait(&h_read)?;
            for (bytes, off) in u.later.lock().drain(..) {
                let dst = u.used.slice(off - u.witness_at, bytes.len())?;
                u.up.upload(&dst, bytes)?;
            }
            u.up.record(&u.parts_done[3])?;
        }
        match self.overlapped || (u.lean && k == 3) {
            true => d.wait_on(&u.parts_done[k]),
            false => Ok(()),
        }
    }
}

/// Parts 1, 2, 3 of the staging (b, c, the witness vectors), filled after part a.
pub(super) type Rest<'env> = [&'env mut [u8]; 3];

/// The events recorded after each upload part's copies.
fn part_events(dev: &Device) -> Result<[CudaEvent; 4]> {
    let e = || dev.timing_event();
    Ok([e()?, e()?, e()?, e()?])
}

/// The staging's upload parts: a, b, c, the witness vectors, as bounds in its layout.
pub(super) fn upload_bounds(shape: &SlotShape) -> [usize; 5] {
    let [a, b, c, witness, _, end] = super::ahead::bounds(shape);
    [a, b, c, witness, end]
}

/// The filler thread's work: parts 1, 2, 3 (b, c, the witness) filled and copied in
/// order, each announced on `tx` once its copies are enqueued; its result and host time.
pub(super) fn fill_rest<'env>(
    parts: Rest<'env>,
    uploads: &Uploads<'_, '_, 'env>,
    tx: std::sync::mpsc::Sender<usize>,
) -> (Result<()>, Duration) {
    let t = Instant::now();
    let r = parts.into_iter().zip(1..4).try_for_each(|(p, k)| {
        uploads.fill(p, k)?;
        // The receiver is gone only when the kernels failed.
        let _ = tx.send(k);
        Ok(())
    });
    (r, t.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_parts_gives_all_four_parts_or_only_the_witness() {
        let bounds = [0, 64, 128, 192, 320];
        let mut full = vec![0u8; 320];
        let parts = cut_parts(&mut full, &bounds, 0).expect("full staging");
        assert_eq!(parts.map(|p| p.len()), [64, 64, 64, 128]);
        let mut witness = vec![0u8; 128];
        let parts = cut_parts(&mut witness, &bounds, 192).expect("witness staging");
        assert_eq!(parts.map(|p| p.len()), [0, 0, 0, 128]);
        assert!(cut_parts(&mut [0u8; 127], &bounds, 192).is_err());
        assert!(cut_parts(&mut [0u8; 319], &bounds, 0).is_err());
        assert!(cut_parts(&mut [0u8; 320], &bounds, 64).is_err());
    }
}
