//! [`ResidentSet`]: the SRSs kept in device memory across proofs (the design's VRAM tier).
//! Each is keyed by its [`fingerprint`] (SHA-256 of the verifying key, the five query
//! lengths and a sample of query points), which a released SRS keeps. Loading
//! uploads the five queries once, through pinned staging buffers on the copy stream, into
//! one allocation per SRS; an SRS in use by a compute call is never evicted, and idle ones
//! leave least-recently-used first when a new one needs the room. What does not fit is
//! streamed by the backend instead (backend.rs decides, `streamed.rs` streams).
//!
//! When the budget leaves room, the H query's allocation is widened into a window table
//! (`msm/table.rs`): the query is row 0, and the rows after it are built on the device under
//! the compute token by the first user ([`ResidentSrs::table_pending`]); until then, and for
//! good if the build fails, the plain MSM reads row 0.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use cuzk_groth16::Srs;
use parking_lot::Mutex;

use crate::device::arena::{DevRegion, VramArena, ALIGN};
use crate::device::layout::{as_bytes, G1_AFFINE_BYTES, G2_AFFINE_BYTES};
use crate::device::pinned::PinnedPool;
use crate::device::upload::PinnedUpload;
use crate::device::Device;
use crate::error::{GpuError, Result};
use crate::ops::msm::WindowTable;

/// SHA-256 identity of an SRS.
pub type Fingerprint = [u8; 32];

/// Bytes per staging chunk of an SRS upload.
const STAGE_BYTES: usize = 64 << 20;

/// States of a resident SRS's H window table (one caller moves it from pending to
/// building, then to ready or failed).
const TABLE_PENDING: u8 = 0;
const TABLE_BUILDING: u8 = 1;
const TABLE_READY: u8 = 2;
const TABLE_FAILED: u8 = 3;

/// Which query of an SRS, in the order they are laid out on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Query {
    /// H.
    H,
    /// L.
    L,
    /// A.
    A,
    /// B in G1.
    BG1,
    /// B in G2.
    BG2,
}

impl Query {
    /// All five, in order.
    pub const ALL: [Query; 5] = [Query::H, Query::L, Query::A, Query::BG1, Query::BG2];

    /// Its name in traces and logs.
    pub fn name(self) -> &'static str {
        match self {
            Query::H => "h",
            Query::L => "l",
            Query::A => "a",
            Query::BG1 => "b_g1",
            Query::BG2 => "b_g2",
        }
    }
}

/// The fingerprint of `srs` ([`Srs::fingerprint`]; a released SRS keeps the one of the
/// points it had, so a device finds its copy by it).
pub fn fingerprint(srs: &Srs) -> Fingerprint {
    srs.fingerprint()
}

/// (points, bytes, bytes per point) of the five queries in [`Query`] order.
fn query_bytes(srs: &Srs) -> [(usize, &[u8], usize); 5] {
    [
        (srs.h.len(), as_bytes(&srs.h), G1_AFFINE_BYTES),
        (srs.l.len(), as_bytes(&srs.l), G1_AFFINE_BYTES),
        (srs.a.len(), as_bytes(&srs.a), G1_AFFINE_BYTES),
        (srs.b_g1.len(), as_bytes(&srs.b_g1), G1_AFFINE_BYTES),
        (srs.b_g2.len(), as_bytes(&srs.b_g2), G2_AFFINE_BYTES),
    ]
}

/// Offsets and lengths of the five queries in one allocation, and the total; the H query's
/// region holds `h_rows` rows of its points (a window table when more than one).
fn srs_layout(srs: &Srs, h_rows: usize) -> ([(usize, usize); 5], usize) {
    let mut out = [(0, 0); 5];
    let mut at = 0;
    for (i, (o, (_, bytes, _))) in out.iter_mut().zip(query_bytes(srs)).enumerate() {
        let len = if i == Query::H as usize {
            bytes.len() * h_rows.max(1)
        } else {
            bytes.len()
        };
        *o = (at, len);
        at = (at + len).next_multiple_of(ALIGN);
    }
    (out, at.max(ALIGN))
}

/// Device bytes `srs` takes when resident, without a window table.
pub fn resident_size(srs: &Srs) -> u64 {
    srs_layout(srs, 1).1 as u64
}

/// What the budget lets [`ResidentSet::get_or_load`] upload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Nothing: the SRS stays on the host.
    No,
    /// The SRS, and a window table for its H query of at most `table_bytes` beyond it.
    Yes {
        /// Bytes a table's rows after the first may take (0: no table).
        table_bytes: u64,
    },
}

/// One SRS in device memory.
pub struct ResidentSrs {
    fp: Fingerprint,
    // A Mutex only to make the arena (whose bump pointer is a Cell) shareable; regions are
    // taken by offset and the lock is uncontended (compute calls use it under the token).
    arena: Mutex<VramArena>,
    layout: [(usize, usize); 5],
    bytes: u64,
    last_used: AtomicU64,
    /// The H query's window table, its rows after the first built once `table_state` is
    /// TABLE_READY.
    table: Option<WindowTable>,
    table_state: AtomicU8,
}

impl ResidentSrs {
    /// Runs `f` with the device regions of the five queries, in [`Query`] order.
    ///
    /// # Errors
    /// Whatever `f` returns.
    pub fn with_regions<T>(&self, f: impl FnOnce([DevRegion<'_>; 5]) -> Result<T>) -> Result<T> {
        let arena = self.arena.lock();
        let mut regs = Vec::with_capacity(5);
        for (off, bytes) in self.layout {
            regs.push(arena.region(off, bytes)?);
        }
        let regs: [DevRegion<'_>; 5] = regs
            .try_into()
            .map_err(|_| GpuError::Internal("five query regions".into()))?;
        f(regs)
    }

    /// Device bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The H query's window table, once built.
    pub fn table(&self) -> Option<WindowTable> {
        self.table
            .filter(|_| self.table_state.load(Ordering::Acquire) == TABLE_READY)
    }

    /// The H query's window table while its rows are still to be built.
    pub fn table_pending(&self) -> Option<WindowTable> {
        self.table
            .filter(|_| self.table_state.load(Ordering::Acquire) == TABLE_PENDING)
    }

    /// Builds the window table's rows if nobody has tried: `build` gets the H region (row 0
    /// is the query) and must enqueue the rows and wait for them. The caller holds the
    /// compute token. Returns whether this call built it.
    ///
    /// # Errors
    /// Whatever `build` returns. The table is then given up for good (its memory stays with
    /// the SRS): a build that fails once, say from a kernel this device cannot run, would
    /// fail every prove that retried it, while the plain MSM needs only row 0.
    pub fn build_table(
        &self,
        build: impl FnOnce(&DevRegion<'_>, &WindowTable) -> Result<()>,
    ) -> Result<bool> {
        let Some(t) = self.table else {
            return Ok(false);
        };
        let claimed = self.table_state.compare_exchange(
            TABLE_PENDING,
            TABLE_BUILDING,
            Ordering::AcqRel,
            Ordering::Acquire,
        );
        if claimed.is_err() {
            return Ok(false);
        }
        match self.with_regions(|q| build(&q[Query::H as usize], &t)) {
            Ok(()) => {
                self.table_state.store(TABLE_READY, Ordering::Release);
                Ok(true)
            }
            Err(e) => {
                self.table_state.store(TABLE_FAILED, Ordering::Release);
                Err(e)
            }
        }
    }
}

/// The resident SRSs of one device, with an upload counter for tests and metrics.
#[derive(Default)]
pub struct ResidentSet {
    list: Mutex<Vec<Arc<ResidentSrs>>>,
    // Serializes loads, so two workers asking for the same new SRS upload it once.
    loading: Mutex<()>,
    clock: AtomicU64,
    uploads: AtomicU64,
}

impl ResidentSet {
    /// The resident copy of the SRS with fingerprint `fp`, marked used now.
    pub fn find(&self, fp: &Fingerprint) -> Option<Arc<ResidentSrs>> {
        let list = self.list.lock();
        let r = list.iter().find(|r| &r.fp == fp)?.clone();
        r.last_used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
        Some(r)
    }

    /// The resident copy of the SRS with fingerprint `fp`, without marking it used.
    pub fn peek(&self, fp: &Fingerprint) -> Option<Arc<ResidentSrs>> {
        self.list.lock().iter().find(|r| &r.fp == fp).cloned()
    }

    /// Drops the resident copy with fingerprint `fp` if no prove holds it; returns the
    /// bytes released.
    pub fn evict_idle_one(&self, dev: &Device, fp: &Fingerprint) -> u64 {
        let mut list = self.list.lock();
        let Some(i) = list
            .iter()
            .position(|r| &r.fp == fp && Arc::strong_count(r) == 1)
        else {
            return 0;
        };
        let r = list.remove(i);
        tracing::info!(
            gpu = dev.ordinal(),
            bytes = r.bytes,
            "srs evicted from vram"
        );
        r.bytes
    }

    /// Bytes of all resident SRSs.
    pub fn bytes(&self) -> u64 {
        self.list.lock().iter().map(|r| r.bytes).sum()
    }

    /// SRS uploads made so far.
    pub fn uploads(&self) -> u64 {
        self.uploads.load(Ordering::Relaxed)
    }

    /// Drops idle resident SRSs, least recently used first, until `need` more bytes fit in
    /// `budget` or none idle is left. Returns whether they fit.
    pub fn make_room(&self, dev: &Device, need: u64, budget: u64) -> bool {
        let mut list = self.list.lock();
        loop {
            let used: u64 = list.iter().map(|r| r.bytes).sum();
            if used + need <= budget {
                return true;
            }
            // Idle: nobody but the list holds it.
            let victim = list
                .iter()
                .enumerate()
                .filter(|(_, r)| Arc::strong_count(r) == 1)
                .min_by_key(|(_, r)| r.last_used.load(Ordering::Relaxed))
                .map(|(i, _)| i);
            match victim {
                Some(i) => {
                    let r = list.swap_remove(i);
                    tracing::info!(
                        gpu = dev.ordinal(),
                        bytes = r.bytes,
                        "srs evicted from vram"
                    );
                }
                None => return false,
            }
        }
    }

    /// Drops every idle resident SRS; returns the bytes released.
    pub fn evict_idle(&self, dev: &Device) -> u64 {
        let mut list = self.list.lock();
        let before: u64 = list.iter().map(|r| r.bytes).sum();
        list.retain(|r| Arc::strong_count(r) > 1);
        let after: u64 = list.iter().map(|r| r.bytes).sum();
        if before > after {
            tracing::info!(
                gpu = dev.ordinal(),
                bytes = before - after,
                "srs evicted from vram"
            );
        }
        before - after
    }

    /// The resident copy of `srs`, uploading it when absent and `admit(bytes)` says it may
    /// (the closure makes room or refuses, and says how much a window table may add).
    /// `Ok(None)`: not resident and not admitted.
    ///
    /// # Errors
    /// Allocation or upload errors.
    pub fn get_or_load(
        &self,
        dev: &Arc<Device>,
        pinned: &Arc<PinnedPool>,
        srs: &Srs,
        fp: &Fingerprint,
        admit: impl FnOnce(u64) -> Result<Admit>,
    ) -> Result<Option<Arc<ResidentSrs>>> {
        if let Some(r) = self.find(fp) {
            return Ok(Some(r));
        }
        let _loading = self.loading.lock();
        if let Some(r) = self.find(fp) {
            return Ok(Some(r));
        }
        if srs.is_released() {
            return Err(GpuError::SrsReleased);
        }
        let plain = srs_layout(srs, 1).1;
        let table_bytes = match admit(plain as u64)? {
            Admit::No => return Ok(None),
            Admit::Yes { table_bytes } => table_bytes,
        };
        let h_bytes = srs.h.len() * G1_AFFINE_BYTES;
        let mut table = WindowTable::choose(
            srs.h.len(),
            h_bytes.saturating_add(usize::try_from(table_bytes).unwrap_or(usize::MAX)),
        );
        let (mut layout, mut total) = srs_layout(srs, table.map_or(1, |t| t.rows() as usize));
        let t = std::time::Instant::now();
        let arena = match (VramArena::new(dev.clone(), total), table) {
            (Ok(a), _) => a,
            // The free-memory estimate was off: the SRS without its table rather than
            // nothing.
            (Err(e), Some(_)) => {
                tracing::warn!(
                    gpu = dev.ordinal(),
                    bytes = total,
                    "no room for the h window table: {e}"
                );
                table = None;
                (layout, total) = srs_layout(srs, 1);
                VramArena::new(dev.clone(), total)?
            }
            (Err(e), None) => return Err(e),
        };
        for ((off, _), (_, src, _)) in layout.iter().zip(query_bytes(srs)) {
            // Each query at the start of its region (H's row 0).
            staged_upload(dev, pinned, &arena.region(*off, src.len())?, src)?;
        }
        self.uploads.fetch_add(1, Ordering::Relaxed);
        tracing::info!(
            gpu = dev.ordinal(),
            bytes = total,
            ms = t.elapsed().as_millis() as u64,
            fingerprint = %hex::encode(&fp[..8]),
            h_table = ?table,
            "srs resident in vram"
        );
        let r = Arc::new(ResidentSrs {
            fp: *fp,
            arena: Mutex::new(arena),
            layout,
            bytes: total as u64,
            last_used: AtomicU64::new(self.clock.fetch_add(1, Ordering::Relaxed)),
            table,
            table_state: AtomicU8::new(TABLE_PENDING),
        });
        self.list.lock().push(r.clone());
        Ok(Some(r))
    }
}

/// Copies `src` (pageable host memory) into `dst` through two pinned staging buffers on the
/// copy stream: the host fills one buffer while the other is in flight. Waits for the end.
///
/// # Errors
/// Driver errors; [`GpuError::Input`] if `src` does not fit `dst`.
pub fn staged_upload(
    dev: &Device,
    pinned: &Arc<PinnedPool>,
    dst: &DevRegion<'_>,
    src: &[u8],
) -> Result<()> {
    crate::device::check_fits(dst, src.len())?;
    if src.is_empty() {
        return Ok(());
    }
    let chunk = STAGE_BYTES.min(src.len());
    let mut free = [Some(pinned.take(chunk)?), Some(pinned.take(chunk)?)];
    let mut flight: [Option<PinnedUpload>; 2] = [None, None];
    for (j, part) in src.chunks(chunk).enumerate() {
        let k = j % 2;
        // The copy that last read this buffer must be finished before refilling it (an
        // error return drops the tickets, which wait).
        if let Some(up) = flight[k].take() {
            free[k] = Some(up.wait()?);
        }
        let mut buf = free[k]
            .take()
            .ok_or_else(|| GpuError::Internal("srs staging buffer missing".into()))?;
        copy_parallel(&mut buf.as_mut_slice()?[..part.len()], part);
        let d = dst.slice(j * chunk, part.len())?;
        flight[k] = Some(dev.upload_pinned(&d, buf, part.len())?);
    }
    for up in flight.into_iter().flatten() {
        up.wait()?;
    }
    Ok(())
}

/// `dst.copy_from_slice(src)` on the rayon pool, in 4 MiB pieces (one core's memcpy is far
/// below the memory bandwidth a PCIe 5 upload can take).
pub fn copy_parallel(dst: &mut [u8], src: &[u8]) {
    use rayon::prelude::*;
    const PIECE: usize = 4 << 20;
    dst.par_chunks_mut(PIECE)
        .zip(src.par_chunks(PIECE))
        .for_each(|(d, s)| d.copy_from_slice(s));
}
