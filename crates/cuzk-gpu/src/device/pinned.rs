//! [`PinnedPool`]: page-locked host buffers made once and reused across calls (pinned
//! uploads run at PCIe rate; registering or allocating pinned memory per call stalls the
//! driver, see ../shared/lessons.md). A [`PinnedBuf`] owns a handle on its pool, so the
//! backend can keep one in a long-lived slot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use cudarc::driver::PinnedHostSlice;
use parking_lot::Mutex;

use crate::device::Device;
use crate::error::{drv, Result};

/// A pool of pinned host buffers on one device's context.
pub struct PinnedPool {
    dev: Arc<Device>,
    free: Mutex<Vec<PinnedHostSlice<u8>>>,
    /// Bytes of every buffer made (pooled or taken); buffers are never freed before the
    /// pool is.
    made: AtomicU64,
}

/// A pinned buffer taken from a pool; it goes back to the pool on drop.
pub struct PinnedBuf {
    pool: Arc<PinnedPool>,
    buf: Option<PinnedHostSlice<u8>>,
}

impl PinnedPool {
    /// An empty pool for `dev`.
    pub fn new(dev: Arc<Device>) -> Arc<PinnedPool> {
        Arc::new(PinnedPool {
            dev,
            free: Mutex::new(Vec::new()),
            made: AtomicU64::new(0),
        })
    }

    /// Makes `count` buffers of `bytes` each now (start-up, not the hot path).
    ///
    /// # Errors
    /// Driver errors (out of pinned memory).
    pub fn reserve(&self, count: usize, bytes: usize) -> Result<()> {
        for _ in 0..count {
            let b = self.alloc(bytes)?;
            self.free.lock().push(b);
        }
        tracing::info!(
            gpu = self.dev.ordinal(),
            count,
            bytes,
            "pinned host buffers reserved"
        );
        Ok(())
    }

    fn alloc(&self, bytes: usize) -> Result<PinnedHostSlice<u8>> {
        // SAFETY: the allocation starts uninitialized; it is zero-filled right below,
        // before anything can read it.
        let mut b = drv(
            self.dev.ordinal(),
            || format!("pinned alloc {bytes}"),
            unsafe {
                self.dev
                    .context()
                    .alloc_pinned_with_flags::<u8>(bytes.max(1), 0)
            },
        )?;
        if let Ok(s) = b.as_mut_slice() {
            // On all cores: at 2^27 a worker's staging is 9.4 GB of fresh pages.
            use rayon::prelude::*;
            s.par_chunks_mut(1 << 24).for_each(|c| c.fill(0));
        }
        self.made.fetch_add(b.len() as u64, Ordering::Relaxed);
        Ok(b)
    }

    /// Page-locked host bytes this pool holds: every buffer made, pooled or taken.
    pub fn made_bytes(&self) -> u64 {
        self.made.load(Ordering::Relaxed)
    }

    /// Bytes held by the buffers now in the pool (not those taken).
    pub fn free_bytes(&self) -> usize {
        self.free.lock().iter().map(|b| b.len()).sum()
    }

    /// A buffer of at least `bytes` bytes: the smallest pooled one that fits, else a new
    /// one (logged: that is an allocation the caller should have reserved).
    ///
    /// # Errors
    /// Driver errors.
    pub fn take(self: &Arc<Self>, bytes: usize) -> Result<PinnedBuf> {
        let found = {
            let mut free = self.free.lock();
            let best = free
                .iter()
                .enumerate()
                .filter(|(_, b)| b.len() >= bytes)
                .min_by_key(|(_, b)| b.len())
                .map(|(i, _)| i);
            best.map(|i| free.swap_remove(i))
        };
        let buf = match found {
            Some(b) => b,
            None => {
                tracing::info!(gpu = self.dev.ordinal(), bytes, "pinned host buffer made");
                self.alloc(bytes)?
            }
        };
        Ok(PinnedBuf {
            pool: self.clone(),
            buf: Some(buf),
        })
    }
}

impl PinnedBuf {
    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.len())
    }

    /// Whether the buffer has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The buffer's bytes.
    ///
    /// # Errors
    /// Driver errors from synchronizing with a pending copy.
    pub fn as_mut_slice(&mut self) -> Result<&mut [u8]> {
        let ord = self.pool.dev.ordinal();
        match self.buf.as_mut() {
            Some(b) => drv(ord, || "pinned slice".into(), b.as_mut_slice()),
            None => Ok(&mut []),
        }
    }

    /// The buffer's bytes, read-only.
    ///
    /// # Errors
    /// Driver errors from synchronizing with a pending copy.
    pub fn as_slice(&self) -> Result<&[u8]> {
        let ord = self.pool.dev.ordinal();
        match self.buf.as_ref() {
            Some(b) => drv(ord, || "pinned slice".into(), b.as_slice()),
            None => Ok(&[]),
        }
    }
}

impl Drop for PinnedBuf {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.free.lock().push(b);
        }
    }
}

/// Host memory page-locked where it lies (`cuMemHostRegister`, portable to every
/// context): copies from it run as DMA at PCIe rate, with no pass through a pinned bounce
/// buffer and no host thread copying. For the host points of a streamed SRS, registered
/// once (registering per call stalls the driver: ../shared/lessons.md) and attached to the
/// `Srs` (`Srs::host_pins`), which drops it before the points. Each span is registered
/// over the whole pages inside it (never a page it shares with other memory); a copy of
/// bytes that reach past them copies those few bytes apart ([`HostRegistration::split`]).
/// The registration ends on drop.
pub struct HostRegistration {
    dev: Arc<Device>,
    /// The page ranges registered: (first byte, one past the last).
    ranges: Vec<(usize, usize)>,
}

/// The page size the registrations round to.
const PAGE: usize = 4096;

impl Device {
    /// Page-locks the whole pages inside each of `spans` for copies to the devices (see
    /// [`HostRegistration`]). Spans without a whole page are skipped.
    ///
    /// # Errors
    /// Driver errors (out of lockable memory, pages already registered); what was
    /// registered before the failure is unregistered.
    pub fn register_host(self: &Arc<Self>, spans: &[&[u8]]) -> Result<HostRegistration> {
        self.bind()?;
        let mut reg = HostRegistration {
            dev: self.clone(),
            ranges: Vec::new(),
        };
        for s in spans {
            let (b, e) = (s.as_ptr() as usize, s.as_ptr() as usize + s.len());
            let (start, end) = (b.div_ceil(PAGE) * PAGE, e / PAGE * PAGE);
            if end <= start {
                continue;
            }
            // SAFETY: [start, end) lies inside `s`, mapped memory the caller borrows.
            // Registering only pins those pages and lets devices read them; it writes
            // nothing. A registration that outlived the memory would keep pages pinned and
            // let a copy read stale bytes, never write host memory; `Srs::host_pins` drops
            // it before the points.
            let r = unsafe {
                cudarc::driver::sys::cuMemHostRegister_v2(
                    start as *mut std::ffi::c_void,
                    end - start,
                    cudarc::driver::sys::CU_MEMHOSTREGISTER_PORTABLE,
                )
            };
            drv(
                self.ordinal(),
                || format!("register {} host bytes", end - start),
                r.result(),
            )?;
            reg.ranges.push((start, end));
        }
        Ok(reg)
    }
}

impl HostRegistration {
    /// `bytes` cut where a registered range begins and ends, as (offset in `bytes`,
    /// piece): the registered middle, and before and after it the bytes outside (at most
    /// a page each when `bytes` lies in a registered span; all of `bytes` when it meets
    /// none).
    pub fn split<'a>(&self, bytes: &'a [u8]) -> impl Iterator<Item = (usize, &'a [u8])> {
        split_at_ranges(&self.ranges, bytes)
    }

    /// Bytes registered.
    pub fn bytes(&self) -> u64 {
        self.ranges.iter().map(|(b, e)| (e - b) as u64).sum()
    }
}

/// [`HostRegistration::split`] over the address ranges `ranges`.
fn split_at_ranges<'a>(
    ranges: &[(usize, usize)],
    bytes: &'a [u8],
) -> impl Iterator<Item = (usize, &'a [u8])> {
    let (b, e) = (
        bytes.as_ptr() as usize,
        bytes.as_ptr() as usize + bytes.len(),
    );
    let (mid_b, mid_e) = ranges
        .iter()
        .map(|&(rb, re)| (rb.max(b), re.min(e)))
        .find(|&(mb, me)| mb < me)
        .map_or((bytes.len(), bytes.len()), |(mb, me)| (mb - b, me - b));
    [(0, mid_b), (mid_b, mid_e), (mid_e, bytes.len())]
        .into_iter()
        .filter(|(from, to)| from < to)
        .map(move |(from, to)| (from, &bytes[from..to]))
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        let _ = self.dev.bind();
        for &(start, _) in &self.ranges {
            // SAFETY: `start` was registered by `register_host` and not unregistered since.
            let r =
                unsafe { cudarc::driver::sys::cuMemHostUnregister(start as *mut std::ffi::c_void) };
            if let Err(e) = r.result() {
                tracing::warn!(
                    gpu = self.dev.ordinal(),
                    "host memory not unregistered: {e}"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces of a split tile the bytes in order: outside, registered, outside.
    #[test]
    fn a_split_tiles_the_bytes_at_the_registered_pages() {
        let buf = vec![7u8; 5 * PAGE];
        let (b, e) = (buf.as_ptr() as usize, buf.as_ptr() as usize + buf.len());
        let range = (b.div_ceil(PAGE) * PAGE, e / PAGE * PAGE);
        let cut = |bytes: &[u8], ranges: &[(usize, usize)]| -> Vec<(usize, usize)> {
            let pieces: Vec<_> = split_at_ranges(ranges, bytes).collect();
            let mut next = 0;
            for (off, p) in &pieces {
                assert_eq!(*off, next, "in order, no gap");
                assert_eq!(p.as_ptr() as usize, bytes.as_ptr() as usize + off);
                next += p.len();
            }
            assert_eq!(next, bytes.len());
            pieces.iter().map(|(o, p)| (*o, p.len())).collect()
        };
        let head = range.0 - b;
        let mid = range.1 - range.0;
        assert_eq!(cut(&buf, &[range]), {
            let mut v = vec![(0, head), (head, mid), (head + mid, buf.len() - head - mid)];
            v.retain(|&(_, len)| len > 0);
            v
        });
        // Inside the registered pages: one piece; outside every range: one piece.
        let inner = &buf[head + 1..head + PAGE];
        assert_eq!(cut(inner, &[range]), [(0, PAGE - 1)]);
        assert_eq!(cut(&buf, &[]), [(0, buf.len())]);
        assert_eq!(cut(&buf[..0], &[range]), []);
    }
}
