//! [`YieldGate`]: how a card's critical lane (#29) makes the card's other streams step
//! aside while it proves. Stream priority alone orders only *pending* blocks: each of the
//! lane's kernels still waits for SM slots that the main prove's running blocks free
//! (~20 ms a wave of the H sum's accumulation at 2^24-point chunks), so a 2^19
//! WinningPoSt that takes 50 ms on an idle H100 took 0.8–1.4 s beside a 32 GiB PoRep
//! (docs/runs/2026-12-06.md, sixth session). With the gate, the main streams wait at
//! their yield points (between chunk sums, between sums, around the quotient) while the
//! lane holds it, so the lane has the card after the kernels already running.
//!
//! The gate is one word of pinned host memory mapped for the device: the lane sets it
//! from the host before its first kernel ([`YieldGate::hold`]) and the main streams wait
//! for it to read 0 (`cuStreamWaitValue32`) at each yield point. It is lowered twice: on
//! the lane's compute stream once its last kernel is done ([`GateHold::lower_after`]),
//! and by the host when the hold is dropped (the call's end or its error). A host thread
//! blocked in the driver behind a main stream that waits at the gate could hold the lane
//! up before it lowers it (a synchronizing free in another thread): a watchdog lowers
//! any hold older than [`HOLD_LIMIT`], logged, so a wait at the gate always ends.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUdeviceptr, CUstreamWaitValue_flags, CUstreamWriteValue_flags};
use cudarc::driver::{CudaContext, CudaStream, PinnedHostSlice};
use parking_lot::{Condvar, Mutex};

use crate::error::{drv, GpuError, Result};

/// The longest a hold keeps the main streams waiting: a lone 32 GiB WinningPoSt prove
/// takes ~50 ms on an H100; past this the watchdog lowers the gate.
pub const HOLD_LIMIT: Duration = Duration::from_secs(2);

/// A card's gate (module docs); shared by every handle of the card.
pub struct YieldGate {
    ordinal: usize,
    /// The mapped word (kept alive; read and written through `word`).
    _mem: PinnedHostSlice<u32>,
    /// The word as the host sees it.
    word: *const AtomicU32,
    /// The word as the device sees it.
    dev_ptr: CUdeviceptr,
    /// Holds in flight and when the oldest began.
    holds: Mutex<(u32, Option<Instant>)>,
    held: Condvar,
    /// Set once a wait at the gate failed to enqueue (no stream memory operations on this
    /// device): yield points do nothing from then on.
    unsupported: AtomicBool,
}

// SAFETY: `word` points into `_mem`, pinned host memory owned by the gate for its whole
// life; every access to it is atomic.
unsafe impl Send for YieldGate {}
// SAFETY: as above.
unsafe impl Sync for YieldGate {}

impl YieldGate {
    /// Makes the gate of device `ordinal` (lowered) and its watchdog thread.
    ///
    /// # Errors
    /// Driver errors allocating or mapping the word.
    pub(crate) fn new(ordinal: usize, ctx: &Arc<CudaContext>) -> Result<Arc<YieldGate>> {
        // SAFETY: the word is written (0) below before anything reads it.
        let mut mem = drv(ordinal, || "yield gate word".into(), unsafe {
            ctx.alloc_pinned_with_flags::<u32>(1, sys::CU_MEMHOSTALLOC_DEVICEMAP)
        })?;
        let host = drv(ordinal, || "yield gate word".into(), mem.as_mut_ptr())?;
        let mut dev_ptr: CUdeviceptr = 0;
        // SAFETY: `host` is a live DEVICEMAP allocation of this context (bound by the
        // allocation above, on this thread).
        drv(ordinal, || "yield gate device pointer".into(), unsafe {
            sys::cuMemHostGetDevicePointer_v2(&mut dev_ptr, host.cast(), 0).result()
        })?;
        let word = host as *const AtomicU32;
        // SAFETY: `host` is 4-byte aligned (checked by cudarc) and lives as long as `mem`.
        unsafe { (*word).store(0, Ordering::SeqCst) };
        let gate = Arc::new(YieldGate {
            ordinal,
            _mem: mem,
            word,
            dev_ptr,
            holds: Mutex::new((0, None)),
            held: Condvar::new(),
            unsupported: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&gate);
        std::thread::Builder::new()
            .name(format!("gpu{ordinal}-gate"))
            .spawn(move || watchdog(weak))
            .map_err(|e| GpuError::Internal(format!("yield gate watchdog: {e}")))?;
        Ok(gate)
    }

    fn set(&self, v: u32) {
        // SAFETY: see the `Send` impl.
        unsafe { (*self.word).store(v, Ordering::SeqCst) };
    }

    /// Whether the gate is raised now (the host's view).
    pub fn is_raised(&self) -> bool {
        // SAFETY: see the `Send` impl.
        unsafe { (*self.word).load(Ordering::SeqCst) != 0 }
    }

    /// Raises the gate until the hold is dropped (or [`GateHold::lower_after`]'s stream
    /// point, or the watchdog).
    pub fn hold(self: &Arc<Self>) -> GateHold {
        let mut h = self.holds.lock();
        h.0 += 1;
        h.1.get_or_insert_with(Instant::now);
        self.set(1);
        self.held.notify_all();
        GateHold { gate: self.clone() }
    }

    /// Makes `stream` wait here until the gate is down. A device without stream memory
    /// operations logs once and never waits.
    pub(crate) fn wait_on(&self, stream: &CudaStream) -> Result<()> {
        if self.unsupported.load(Ordering::Relaxed) {
            return Ok(());
        }
        // SAFETY: `dev_ptr` maps the gate's word, alive as long as the gate (which the
        // device handles keep beyond any stream's work).
        let r = unsafe {
            sys::cuStreamWaitValue32_v2(
                stream.cu_stream(),
                self.dev_ptr,
                0,
                CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_EQ as u32,
            )
            .result()
        };
        match r {
            Ok(()) => Ok(()),
            Err(e) if format!("{e:?}").contains("NOT_SUPPORTED") => {
                if !self.unsupported.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        gpu = self.ordinal,
                        "stream memory operations not supported: the critical lane proves \
                         beside the main streams without their yielding"
                    );
                }
                Ok(())
            }
            Err(source) => Err(GpuError::Driver {
                ordinal: self.ordinal,
                op: "wait at the yield gate".into(),
                source,
            }),
        }
    }

    /// Holds that the watchdog found too old lowered, logged.
    fn lower_if_stale(&self) -> Option<Duration> {
        let mut h = self.holds.lock();
        let since = h.1?;
        if h.0 == 0 {
            return None;
        }
        let age = since.elapsed();
        if age >= HOLD_LIMIT {
            self.set(0);
            // The holds stay counted until dropped; the word stays down.
            h.1 = None;
            tracing::warn!(
                gpu = self.ordinal,
                ms = age.as_millis() as u64,
                "critical lane held the yield gate too long: lowered"
            );
            return None;
        }
        Some(HOLD_LIMIT - age)
    }
}

/// Lowers the gate of a watchdog's card when a hold outlives [`HOLD_LIMIT`]; ends with
/// the gate.
fn watchdog(gate: Weak<YieldGate>) {
    loop {
        let Some(g) = gate.upgrade() else { return };
        let next = g.lower_if_stale();
        let mut h = g.holds.lock();
        // Asleep until a hold begins or the current one may be stale; wakes now and then to
        // see whether the gate is gone.
        g.held
            .wait_for(&mut h, next.unwrap_or(Duration::from_secs(1)));
        drop(h);
        drop(g);
    }
}

/// A raised gate ([`YieldGate::hold`]); lowers it on drop when it is the last hold.
pub struct GateHold {
    gate: Arc<YieldGate>,
}

impl GateHold {
    /// Enqueues the gate's lowering on `stream` (once the work enqueued there so far is
    /// done): the main streams go on as soon as the lane's kernels are, not when its host
    /// has read the results.
    ///
    /// # Errors
    /// Driver errors (the drop lowers it then).
    pub fn lower_after(&self, stream: &CudaStream) -> Result<()> {
        let gate = &self.gate;
        if gate.unsupported.load(Ordering::Relaxed) {
            return Ok(());
        }
        // SAFETY: as in `wait_on`.
        drv(gate.ordinal, || "lower the yield gate".into(), unsafe {
            sys::cuStreamWriteValue32_v2(
                stream.cu_stream(),
                gate.dev_ptr,
                0,
                CUstreamWriteValue_flags::CU_STREAM_WRITE_VALUE_DEFAULT as u32,
            )
            .result()
        })
    }
}

impl Drop for GateHold {
    fn drop(&mut self) {
        let mut h = self.gate.holds.lock();
        h.0 = h.0.saturating_sub(1);
        if h.0 == 0 {
            h.1 = None;
            self.gate.set(0);
        }
    }
}
