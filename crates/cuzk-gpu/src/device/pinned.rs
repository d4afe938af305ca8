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
