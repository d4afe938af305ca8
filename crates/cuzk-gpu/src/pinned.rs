//! [`PinnedPool`]: page-locked host buffers made once and reused across calls (pinned
//! uploads run at PCIe rate; registering or allocating pinned memory per call stalls the
//! driver, see ../shared/lessons.md).

use std::sync::Arc;

use cudarc::driver::PinnedHostSlice;
use parking_lot::Mutex;

use crate::device::Device;
use crate::error::{drv, Result};

/// A pool of pinned host buffers on one device's context.
pub struct PinnedPool {
    dev: Arc<Device>,
    free: Mutex<Vec<PinnedHostSlice<u8>>>,
}

/// A pinned buffer taken from a pool; it goes back to the pool on drop.
pub struct PinnedBuf<'p> {
    pool: &'p PinnedPool,
    buf: Option<PinnedHostSlice<u8>>,
}

impl PinnedPool {
    /// An empty pool for `dev`.
    pub fn new(dev: Arc<Device>) -> PinnedPool {
        PinnedPool {
            dev,
            free: Mutex::new(Vec::new()),
        }
    }

    /// Makes `count` buffers of `bytes` each now (start-up, not the hot path).
    ///
    /// # Errors
    /// Driver errors (out of pinned memory).
    pub fn reserve(&self, count: usize, bytes: usize) -> Result<()> {
        for _ in 0..count {
            // SAFETY: the allocation starts uninitialized; it is zero-filled right below,
            // before anything can read it.
            let mut b = drv(
                self.dev.ordinal(),
                || format!("pinned alloc {bytes}"),
                unsafe { self.dev.context().alloc_pinned_with_flags::<u8>(bytes, 0) },
            )?;
            if let Ok(s) = b.as_mut_slice() {
                s.fill(0);
            }
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

    /// A buffer of at least `bytes` bytes, from the pool when one fits, else newly made.
    ///
    /// # Errors
    /// Driver errors.
    pub fn take(&self, bytes: usize) -> Result<PinnedBuf<'_>> {
        let found = {
            let mut free = self.free.lock();
            free.iter()
                .position(|b| b.len() >= bytes)
                .map(|i| free.swap_remove(i))
        };
        let buf = match found {
            Some(b) => b,
            None => {
                self.reserve(1, bytes)?;
                let mut free = self.free.lock();
                let i = free.iter().position(|b| b.len() >= bytes).unwrap_or(0);
                free.swap_remove(i)
            }
        };
        Ok(PinnedBuf {
            pool: self,
            buf: Some(buf),
        })
    }
}

impl PinnedBuf<'_> {
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
}

impl Drop for PinnedBuf<'_> {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            self.pool.free.lock().push(b);
        }
    }
}
