//! A card's critical lane (#29) on the device: its handles ([`Device::critical`], on the
//! card's highest-priority streams) and [`YieldGate`], how it makes the card's other
//! streams step aside while it proves. Stream priority alone orders only *pending* blocks: each of the
//! lane's kernels still waits for SM slots that the main prove's running blocks free
//! (~20 ms a wave of the H sum's accumulation at 2^24-point chunks), so a 2^19
//! WinningPoSt that takes 50 ms on an idle H100 took 0.8–1.4 s beside a 32 GiB PoRep
//! (docs/runs/2026-12-06.md, sixth session). With the gate, the main streams wait at
//! their yield points (between chunk sums, between sums, before and inside the
//! quotient) while the lane holds it, so the lane has the card after the kernels already
//! running.
//!
//! The gate is one word of pinned host memory mapped for the device: the lane sets it
//! from the host before its first kernel ([`YieldGate::hold`]) and the main streams wait
//! for it to read 0 (`cuStreamWaitValue32`) at each yield point. It is lowered twice: on
//! the lane's compute stream once its last kernel is done ([`GateHold::lower_after`]),
//! and by the host when the hold is dropped (the call's end or its error). A host thread
//! blocked in the driver behind a main stream that waits at the gate could hold the lane
//! up before it lowers it (a synchronizing free in another thread): a watchdog lowers
//! any hold older than [`HOLD_LIMIT`], logged, so a wait at the gate always ends. A call
//! that raises the gate has its copies done first ([`Device::raises_gate`]; the backend's
//! `kernels`, before it raises it): beside a 32 GiB PoRep its stages that wait for an
//! upload part stalled until the watchdog in 4 of 10 calls, and with the copies first 1 of
//! 10 did, in the lane's H sum (one run each, max 2.66 and 2.50 s against the lane's 0.71
//! s without the gate; docs/runs/2026-12-07.md, twelfth session). That stall is why the
//! gate stays off by default.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use cudarc::driver::sys::{self, CUdeviceptr, CUstreamWaitValue_flags, CUstreamWriteValue_flags};
use cudarc::driver::{CudaContext, CudaStream, PinnedHostSlice};
use parking_lot::{Condvar, Mutex};

use super::Device;
use crate::error::{drv, GpuError, Result};

impl Device {
    /// Another handle on this device for a critical prove (#29): the same context and loaded
    /// modules, with a compute stream and a copy stream of its own, both at the device's
    /// greatest stream priority. The block scheduler dispatches a high-priority stream's
    /// pending blocks before a low-priority stream's, so a small prove's kernels run between
    /// the waves of a large prove's kernels instead of after them; priority never preempts a
    /// running block. The copy stream is its own because the main handle's fills with
    /// streamed SRS chunks. Buffers are the caller's to keep apart, as with [`Device::lane`].
    ///
    /// # Errors
    /// Driver errors reading the priority range or creating the streams.
    pub fn critical(&self) -> Result<Arc<Device>> {
        self.bind()?;
        // (least, greatest): numerically lower is the higher priority.
        let (_, greatest) = drv(
            self.ordinal,
            || "stream priority range".into(),
            cudarc::driver::result::stream::get_priority_range(),
        )?;
        let stream = |what: &'static str| {
            drv(
                self.ordinal,
                || format!("create critical {what} stream"),
                self.ctx.new_stream_with_priority(greatest),
            )
        };
        let compute = stream("compute")?;
        let copy = stream("copy")?;
        tracing::info!(
            ordinal = self.ordinal,
            priority = greatest,
            "critical streams created"
        );
        Ok(self.with_streams(compute, copy, greatest, true))
    }

    /// A [`Device::critical`] handle that also makes the card's other handles yield to it
    /// (`gate.rs`): while it proves, their streams wait at their yield points, so its
    /// kernels need not wait for SM slots that their blocks free.
    ///
    /// # Errors
    /// As `critical`; driver errors making the gate.
    pub fn critical_yielding(&self) -> Result<Arc<Device>> {
        let dev = self.critical()?;
        if self.loaded.gate.get().is_none() {
            let gate = YieldGate::new(self.ordinal, &self.ctx)?;
            // A gate made by another thread meanwhile wins; this one ends with its drop.
            let _ = self.loaded.gate.set(gate);
        }
        Ok(dev)
    }

    /// Where a long prove steps aside for the card's critical lane: this handle's compute
    /// stream waits here while a critical prove holds the gate. Nothing on a card without
    /// a yielding critical handle, and on a critical handle.
    ///
    /// # Errors
    /// Driver errors.
    pub fn yield_point(&self) -> Result<()> {
        match self.loaded.gate.get() {
            Some(g) if !self.critical => g.wait_on(&self.compute),
            _ => Ok(()),
        }
    }

    /// Raises the card's yield gate for this critical handle's prove, until the hold is
    /// dropped; `None` on other handles or without a gate.
    pub fn hold_gate(&self) -> Option<GateHold> {
        match self.loaded.gate.get() {
            Some(g) if self.critical => Some(g.hold()),
            _ => None,
        }
    }

    /// Lowers `hold`'s gate once this handle's compute stream is done with the work
    /// enqueued so far.
    ///
    /// # Errors
    /// Driver errors.
    pub fn lower_gate_after(&self, hold: &GateHold) -> Result<()> {
        hold.lower_after(&self.compute)
    }

    /// Whether this handle raises the card's yield gate when it proves: a critical
    /// handle on a card with a gate ([`Device::critical_yielding`]).
    pub fn raises_gate(&self) -> bool {
        self.critical && self.loaded.gate.get().is_some()
    }

    /// Whether this is a [`Device::critical`] handle (or a lane of one).
    pub fn is_critical(&self) -> bool {
        self.critical
    }

    /// The stream priority of this handle's streams: 0 by default, the device's greatest
    /// (a negative number) on a [`Device::critical`] handle.
    pub fn priority(&self) -> i32 {
        self.priority
    }
}

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
