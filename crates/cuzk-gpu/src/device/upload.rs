//! Asynchronous uploads on a device's copy stream, safe to call: the host bytes of a copy
//! cannot be written or freed before the copy stream has passed it. Two shapes:
//! - [`Device::upload_scope`]: uploads of borrowed bytes inside a scope that waits for its
//!   copies before it returns, on every path (as `std::thread::scope` joins its threads), so
//!   a borrow handed to [`UploadScope::upload`] outlives its copy. For a buffer filled part
//!   by part while the earlier parts are copied (the prove's staging, an SRS streamed from
//!   host memory).
//! - [`Device::upload_pinned`]: a [`PinnedBuf`] moved into the copy and handed back by
//!   [`PinnedUpload::wait`] once the copy is done (dropping the ticket waits too; forgetting
//!   it leaks the buffer, never frees it early). For double-buffered staging that is
//!   refilled between copies.
//!
//! Ordering device work after a copy is the caller's, with events ([`UploadScope::record`],
//! [`PinnedUpload::event`]); that orders device memory, which Rust does not see.

use std::marker::PhantomData;

use cudarc::driver::{CudaEvent, CudaStream};

use super::arena::DevRegion;
use super::pinned::PinnedBuf;
use super::{check_fits, Device};
use crate::error::{drv, GpuError, Result};

/// Uploads whose host bytes stay borrowed until the scope has waited for them.
pub struct UploadScope<'scope, 'env: 'scope> {
    dev: &'scope Device,
    // Invariant in both lifetimes, as std::thread::Scope: 'env cannot shrink to a borrow
    // that ends inside the scope.
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// Waits for everything enqueued on the copy stream before the wait.
struct Drain<'d>(&'d Device);

impl Drain<'_> {
    fn wait(&self) -> Result<()> {
        let ev = self.0.timing_event()?;
        self.0.record_on_copy(&ev)?;
        self.0.wait_event(&ev)
    }
}

impl Drop for Drain<'_> {
    fn drop(&mut self) {
        // Reached only when the scope's closure panicked (`upload_scope` forgets it
        // otherwise): the borrowed bytes must still outlive their copies.
        if self.wait().is_err() {
            let _ = self.0.copy.synchronize();
        }
    }
}

impl Device {
    /// Runs `f` with a scope whose uploads borrow host bytes for the scope's environment,
    /// then waits for every copy enqueued on the copy stream so far (also when `f` failed or
    /// panicked), and returns `f`'s value.
    ///
    /// # Errors
    /// Driver errors of the final wait (`f`'s own errors are in its value).
    pub fn upload_scope<'env, T>(
        &self,
        f: impl for<'scope> FnOnce(&'scope UploadScope<'scope, 'env>) -> T,
    ) -> Result<T> {
        let scope = UploadScope {
            dev: self,
            _scope: PhantomData,
            _env: PhantomData,
        };
        let drain = Drain(self);
        let out = f(&scope);
        let waited = drain.wait();
        if waited.is_ok() {
            std::mem::forget(drain);
        }
        // On a failed wait `drain`'s drop synchronizes the whole copy stream.
        waited.map(|()| out)
    }

    /// Enqueues the copy of the first `len` bytes of `buf` into `dst` on the copy stream;
    /// the buffer travels with the returned ticket until the copy is done.
    ///
    /// # Errors
    /// [`GpuError::Input`] if `len` exceeds the buffer or the region; driver errors (the
    /// buffer is then dropped once nothing can read it).
    pub fn upload_pinned(
        &self,
        dst: &DevRegion<'_>,
        buf: PinnedBuf,
        len: usize,
    ) -> Result<PinnedUpload> {
        if len > buf.len() {
            return Err(GpuError::Input(format!(
                "upload of {len} bytes from a {}-byte pinned buffer",
                buf.len()
            )));
        }
        let done = self.timing_event()?;
        let src = &buf.as_slice()?[..len];
        // SAFETY: `buf` moves into the returned ticket, which waits for `done` (recorded
        // after this copy) before it hands the buffer back or drops it; on the error paths
        // below the copy stream is drained first, and the buffer leaked if that fails.
        let r = unsafe { self.enqueue_upload(dst, src, &self.copy, " on copy stream") };
        let recorded = r.and_then(|()| self.record_on_copy(&done));
        if let Err(e) = recorded {
            if self.copy.synchronize().is_err() {
                std::mem::forget(buf);
            }
            return Err(e);
        }
        Ok(PinnedUpload {
            buf: Some(buf),
            done,
            ordinal: self.ordinal,
        })
    }

    /// Enqueues copies of ranges of `buf` on the copy stream, in order: each `(dst, range,
    /// after)` copies `buf[range]` into `dst` and then records `after` when given (for a
    /// stream to wait on before it reads `dst`). The buffer travels with the returned
    /// ticket until the last copy is done, like [`Device::upload_pinned`].
    ///
    /// # Errors
    /// [`GpuError::Input`] for a range outside the buffer or larger than its region;
    /// driver errors (the buffer is then dropped once nothing can read it).
    pub fn upload_pinned_ranges(
        &self,
        buf: PinnedBuf,
        copies: &[(DevRegion<'_>, std::ops::Range<usize>, Option<&CudaEvent>)],
    ) -> Result<PinnedUpload> {
        let copies: Vec<_> = copies
            .iter()
            .map(|(dst, range, after)| (*dst, range.clone(), None, *after))
            .collect();
        self.upload_pinned_ranges_after(buf, &copies)
    }

    /// [`Device::upload_pinned_ranges`] where each copy `(dst, range, before, after)` first
    /// makes the copy stream wait for `before` when given (an event of another stream:
    /// the copy goes into a place that stream's work reads until then). Every copy behind
    /// it on the copy stream waits too: `before` must not depend on any of them.
    ///
    /// # Errors
    /// As [`Device::upload_pinned_ranges`].
    #[allow(clippy::type_complexity)]
    pub fn upload_pinned_ranges_after(
        &self,
        buf: PinnedBuf,
        copies: &[(
            DevRegion<'_>,
            std::ops::Range<usize>,
            Option<&CudaEvent>,
            Option<&CudaEvent>,
        )],
    ) -> Result<PinnedUpload> {
        if let Some((_, r, _, _)) = copies
            .iter()
            .find(|(_, r, _, _)| r.end > buf.len() || r.start > r.end)
        {
            return Err(GpuError::Input(format!(
                "upload of bytes {r:?} from a {}-byte pinned buffer",
                buf.len()
            )));
        }
        let done = self.timing_event()?;
        let bytes = buf.as_slice()?;
        // SAFETY: as in `upload_pinned`: `buf` moves into the returned ticket, which waits
        // for `done` (recorded after the last copy) before it hands the buffer back or
        // drops it; on the error paths the copy stream is drained first, and the buffer
        // leaked if that fails.
        let r = copies.iter().try_for_each(|(dst, range, before, after)| {
            if let Some(ev) = before {
                self.copy_wait(ev)?;
            }
            unsafe {
                self.enqueue_upload(dst, &bytes[range.clone()], &self.copy, " on copy stream")
            }?;
            match after {
                Some(ev) => self.record_on_copy(ev),
                None => Ok(()),
            }
        });
        let recorded = r.and_then(|()| self.record_on_copy(&done));
        if let Err(e) = recorded {
            if self.copy.synchronize().is_err() {
                std::mem::forget(buf);
            }
            return Err(e);
        }
        Ok(PinnedUpload {
            buf: Some(buf),
            done,
            ordinal: self.ordinal,
        })
    }

    /// Checks that `src` fits `dst`, binds the context and enqueues the copy on `stream`.
    ///
    /// # Safety
    /// `src` must stay alive and unmodified until `stream` has passed the copy.
    pub(super) unsafe fn enqueue_upload(
        &self,
        dst: &DevRegion<'_>,
        src: &[u8],
        stream: &CudaStream,
        which: &str,
    ) -> Result<()> {
        check_fits(dst, src.len())?;
        self.bind()?;
        // SAFETY: dst.ptr() is a live device allocation of at least src.len() bytes (the
        // region borrows its arena); src's lifetime is the caller's contract above.
        let r = unsafe {
            cudarc::driver::result::memcpy_htod_async(dst.ptr(), src, stream.cu_stream())
        };
        drv(
            self.ordinal,
            || format!("upload {} bytes{which}", src.len()),
            r,
        )
    }
}

impl<'scope, 'env> UploadScope<'scope, 'env> {
    /// Enqueues the copy of `src` into `dst` on the copy stream and returns at once
    /// (asynchronous when `src` is pinned); `src` stays borrowed until the scope's end.
    ///
    /// # Errors
    /// [`GpuError::Input`] if `src` is larger than the region; driver errors.
    pub fn upload(&self, dst: &DevRegion<'_>, src: &'env [u8]) -> Result<()> {
        // SAFETY: `src` is borrowed for 'env, which outlives the scope, and the scope waits
        // for every copy on the copy stream before it returns (Drain, also on panics).
        unsafe {
            self.dev
                .enqueue_upload(dst, src, &self.dev.copy, " on copy stream")
        }
    }

    /// Records `ev` on the copy stream, after the uploads enqueued so far.
    ///
    /// # Errors
    /// Driver errors.
    pub fn record(&self, ev: &CudaEvent) -> Result<()> {
        self.dev.record_on_copy(ev)
    }

    /// Records `ev` after the uploads so far and waits for it on the host.
    ///
    /// # Errors
    /// Driver errors.
    pub fn drain(&self, ev: &CudaEvent) -> Result<()> {
        self.record(ev)?;
        self.dev.wait_event(ev)
    }
}

/// A pinned buffer whose upload is in flight.
pub struct PinnedUpload {
    buf: Option<PinnedBuf>,
    done: CudaEvent,
    ordinal: usize,
}

impl PinnedUpload {
    /// The event recorded after the copy: make a stream wait on it before reading the
    /// region.
    pub fn event(&self) -> &CudaEvent {
        &self.done
    }

    /// Waits for the copy and hands the buffer back.
    ///
    /// # Errors
    /// Driver errors (the buffer is then leaked: the copy may still read it).
    pub fn wait(mut self) -> Result<PinnedBuf> {
        let r = drv(
            self.ordinal,
            || "wait for upload".into(),
            self.done.synchronize(),
        );
        let buf = self.buf.take();
        match (r, buf) {
            (Ok(()), Some(b)) => Ok(b),
            (Err(e), b) => {
                std::mem::forget(b);
                Err(e)
            }
            (Ok(()), None) => Err(GpuError::Internal("pinned upload without a buffer".into())),
        }
    }
}

impl Drop for PinnedUpload {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            if self.done.synchronize().is_err() {
                std::mem::forget(b);
            }
        }
    }
}
