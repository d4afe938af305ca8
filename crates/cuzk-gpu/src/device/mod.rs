//! The device layer, the only place that holds `unsafe` (the kernel wrappers in `launch`,
//! the asynchronous uploads in [`upload`], memory and the driver calls here):
//! [`Device`], the handle for one GPU ordinal that every device call goes through (there is
//! no "current device"). It owns the CUDA context, a compute stream and a copy stream, and
//! loads each kernel module lazily, once, for the device's own architecture. [`Device::lane`]
//! gives a second handle on the same context and modules with its own compute stream, for
//! work that runs beside the first handle's; [`Device::critical`] gives one whose compute and
//! copy streams have the device's greatest stream priority, for a small prove that must not
//! wait behind a large one's blocks (#29). Beside it: device memory ([`arena`]), pinned
//! host memory ([`pinned`]), the byte layout shared with the kernels ([`layout`]), NVRTC
//! compilation and its disk cache ([`kernels`]), one safe wrapper per kernel (`launch`),
//! uploads on the copy stream whose host bytes outlive their copies ([`upload`]) and the
//! stage timers ([`timer`]). The operations built from the kernels are in
//! `crate::ops`; nothing here knows a prove.

pub mod arena;
pub mod gate;
pub mod kernels;
pub(crate) mod launch;
pub mod layout;
pub mod pinned;
pub mod timer;
pub mod upload;

pub use timer::{PhaseTimer, StageTimer, Trace};
pub use upload::{PinnedUpload, UploadScope};

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaEvent, CudaFunction, CudaModule, CudaStream, LaunchConfig};
use parking_lot::Mutex;

use crate::error::{drv, GpuError, Result};
use kernels::KernelId;

/// One GPU: context, streams and loaded kernel modules.
pub struct Device {
    ordinal: usize,
    ctx: Arc<CudaContext>,
    compute: Arc<CudaStream>,
    copy: Arc<CudaStream>,
    name: String,
    arch: String,
    sm_count: u32,
    /// The CUDA stream priority of this handle's streams (0, the default, except on a
    /// [`Device::critical`] handle); [`Device::lane`] creates its stream at the same one.
    priority: i32,
    /// Whether this handle is a [`Device::critical`] one (or a lane of one): it holds the
    /// card's yield gate while it proves and never waits at it.
    critical: bool,
    /// Shared with the device's lanes.
    loaded: Arc<Loaded>,
}

/// The kernel modules and functions loaded into one context.
#[derive(Default)]
struct Loaded {
    modules: [OnceLock<Arc<CudaModule>>; KernelId::ALL.len()],
    functions: Mutex<HashMap<&'static str, CudaFunction>>,
    /// The first traced prove's start: every span of a [`timer::Trace`] is timed from it.
    trace_base: OnceLock<CudaEvent>,
    /// The card's yield gate, made by the first [`Device::critical_yielding`] handle.
    gate: OnceLock<Arc<gate::YieldGate>>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Device({} {} {})", self.ordinal, self.name, self.arch)
    }
}

/// Whether libcuda can be loaded.
///
/// # Errors
/// [`GpuError::LibraryMissing`] naming the file names that were tried.
pub fn driver_available() -> Result<()> {
    // SAFETY: is_culib_present only tries to dlopen the candidate names.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::LibraryMissing {
            lib: "libcuda (NVIDIA driver)",
            searched: cudarc::get_lib_name_candidates("cuda"),
        })
    }
}

/// Number of CUDA devices; 0 when the driver loads but sees none.
///
/// # Errors
/// [`GpuError::LibraryMissing`] without libcuda; a driver error from `cuInit`.
pub fn device_count() -> Result<usize> {
    driver_available()?;
    let n = CudaContext::device_count();
    match n {
        Ok(n) => Ok(n.max(0) as usize),
        // cuInit fails with "no device" on machines with a driver but no GPU.
        Err(e) if format!("{e:?}").contains("NO_DEVICE") => Ok(0),
        Err(source) => Err(GpuError::Driver {
            ordinal: 0,
            op: "cuDeviceGetCount".into(),
            source,
        }),
    }
}

impl Device {
    /// Binds this device's context to the calling thread: every driver call below names
    /// its device this way, never through a thread's "current" context.
    fn bind(&self) -> Result<()> {
        drv(
            self.ordinal,
            || "bind context".into(),
            self.ctx.bind_to_thread(),
        )
    }

    /// Opens device `ordinal`: creates its context and two streams.
    ///
    /// # Errors
    /// [`GpuError::LibraryMissing`], [`GpuError::NoDevice`], or a driver error.
    pub fn open(ordinal: usize) -> Result<Arc<Device>> {
        let count = device_count()?;
        if ordinal >= count {
            return Err(GpuError::NoDevice { ordinal, count });
        }
        let ctx = drv(
            ordinal,
            || "create context".into(),
            CudaContext::new(ordinal),
        )?;
        // Synchronization is ours (streams and events); cudarc's per-buffer event tracking
        // would add events to every launch.
        // SAFETY: no cudarc-managed buffers are shared between streams in this crate.
        unsafe { ctx.disable_event_tracking() };
        let compute = drv(ordinal, || "create compute stream".into(), ctx.new_stream())?;
        let copy = drv(ordinal, || "create copy stream".into(), ctx.new_stream())?;
        let name = drv(ordinal, || "device name".into(), ctx.name())?;
        let (major, minor) = drv(
            ordinal,
            || "compute capability".into(),
            ctx.compute_capability(),
        )?;
        let sm_count = drv(
            ordinal,
            || "multiprocessor count".into(),
            ctx.attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        )? as u32;
        let arch = format!("sm_{major}{minor}");
        tracing::info!(ordinal, name = %name, arch = %arch, sm_count, "cuda device opened");
        Ok(Arc::new(Device {
            ordinal,
            ctx,
            compute,
            copy,
            name,
            arch,
            sm_count,
            priority: 0,
            critical: false,
            loaded: Arc::default(),
        }))
    }

    /// Another handle on this device: the same context, copy stream and loaded modules,
    /// with a compute stream of its own at this handle's stream priority (a critical
    /// handle's lane stays critical). Kernels launched through it run beside this
    /// handle's, ordered against them only by events; it shares the device's memory, so the
    /// caller keeps the two handles' buffers apart.
    ///
    /// # Errors
    /// Driver errors creating the stream.
    pub fn lane(&self) -> Result<Arc<Device>> {
        let compute = drv(
            self.ordinal,
            || "create lane stream".into(),
            self.ctx.new_stream_with_priority(self.priority),
        )?;
        Ok(self.with_streams(compute, self.copy.clone(), self.priority, self.critical))
    }

    /// A handle on this device's context and modules with the given streams.
    fn with_streams(
        &self,
        compute: Arc<CudaStream>,
        copy: Arc<CudaStream>,
        priority: i32,
        critical: bool,
    ) -> Arc<Device> {
        Arc::new(Device {
            ordinal: self.ordinal,
            ctx: self.ctx.clone(),
            compute,
            copy,
            name: self.name.clone(),
            arch: self.arch.clone(),
            sm_count: self.sm_count,
            priority,
            critical,
            loaded: self.loaded.clone(),
        })
    }

    /// Makes this handle's compute stream wait for `ev` (recorded on any stream of the
    /// device) before its next work.
    ///
    /// # Errors
    /// Driver errors.
    pub fn wait_on(&self, ev: &CudaEvent) -> Result<()> {
        drv(
            self.ordinal,
            || "stream wait for event".into(),
            self.compute.wait(ev),
        )
    }

    /// Makes the copy stream wait for `ev` (recorded on the compute stream): copies
    /// enqueued after it start once the kernels before it are done.
    ///
    /// # Errors
    /// Driver errors.
    pub fn copy_wait(&self, ev: &CudaEvent) -> Result<()> {
        drv(
            self.ordinal,
            || "copy stream wait for event".into(),
            self.copy.wait(ev),
        )
    }

    /// The device ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }
    /// The device's name, e.g. "NVIDIA H200".
    pub fn name(&self) -> &str {
        &self.name
    }
    /// NVRTC architecture, e.g. "sm_90".
    pub fn arch(&self) -> &str {
        &self.arch
    }
    /// Streaming multiprocessors.
    pub fn sm_count(&self) -> u32 {
        self.sm_count
    }
    /// The CUDA context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }
    /// The stream kernels run on.
    pub fn compute_stream(&self) -> &Arc<CudaStream> {
        &self.compute
    }
    /// The stream uploads run on.
    pub fn copy_stream(&self) -> &Arc<CudaStream> {
        &self.copy
    }

    /// Loads every module now (otherwise each loads on first use). Modules missing from
    /// the disk cache are compiled in parallel first: NVRTC takes tens of seconds for the
    /// point-arithmetic modules, one thread each.
    ///
    /// # Errors
    /// Compile or load errors.
    pub fn load_all(&self) -> Result<()> {
        kernels::cubin_all(&self.arch)?;
        for id in KernelId::ALL {
            self.module(id)?;
        }
        Ok(())
    }

    fn module(&self, id: KernelId) -> Result<&Arc<CudaModule>> {
        if let Some(m) = self.loaded.modules[id.slot()].get() {
            return Ok(m);
        }
        let cubin = kernels::cubin(id, &self.arch)?;
        let m = drv(
            self.ordinal,
            || format!("load module {}", id.name()),
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_binary(cubin)),
        )?;
        // Two threads may race to load: the loser's module is dropped, the winner's kept.
        let _ = self.loaded.modules[id.slot()].set(m);
        self.loaded.modules[id.slot()]
            .get()
            .ok_or_else(|| GpuError::Internal(format!("module {} failed to load", id.name())))
    }

    /// Kernel `name` from module `id`.
    ///
    /// # Errors
    /// Compile, load or lookup errors.
    pub fn function(&self, id: KernelId, name: &'static str) -> Result<CudaFunction> {
        if let Some(f) = self.loaded.functions.lock().get(name) {
            return Ok(f.clone());
        }
        let m = self.module(id)?;
        let f = drv(
            self.ordinal,
            || format!("get function {name}"),
            m.load_function(name),
        )?;
        self.loaded.functions.lock().insert(name, f.clone());
        Ok(f)
    }

    /// A launch configuration for `n` threads in blocks of `block`.
    pub fn grid(n: u64, block: u32) -> LaunchConfig {
        let blocks = n.div_ceil(block as u64).max(1) as u32;
        LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (block, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// A timing event (recorded on a stream with [`Device::record`]).
    ///
    /// # Errors
    /// Driver errors.
    pub fn timing_event(&self) -> Result<CudaEvent> {
        drv(
            self.ordinal,
            || "create event".into(),
            self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)),
        )
    }

    /// Records `ev` on the compute stream.
    ///
    /// # Errors
    /// Driver errors.
    pub fn record(&self, ev: &CudaEvent) -> Result<()> {
        drv(
            self.ordinal,
            || "record event".into(),
            ev.record(&self.compute),
        )
    }

    /// Waits for all work queued on the compute stream (not on the hot path: the end of a
    /// benchmark or a download).
    ///
    /// # Errors
    /// Driver errors, including asynchronous kernel faults surfacing here.
    pub fn sync_compute(&self) -> Result<()> {
        drv(
            self.ordinal,
            || "synchronize compute stream".into(),
            self.compute.synchronize(),
        )
    }

    /// Waits for all copies queued on the copy stream (a call that raises the yield gate
    /// has its uploads done first: `backend/run.rs`).
    ///
    /// # Errors
    /// Driver errors.
    pub fn sync_copy(&self) -> Result<()> {
        drv(
            self.ordinal,
            || "synchronize copy stream".into(),
            self.copy.synchronize(),
        )
    }

    /// Copies `src` to device memory at `dst` on the compute stream and waits.
    ///
    /// # Errors
    /// [`GpuError::Input`] if `src` is larger than the region; driver errors.
    pub fn upload(&self, dst: &crate::device::arena::DevRegion<'_>, src: &[u8]) -> Result<()> {
        // SAFETY: src stays borrowed until the synchronize below, and the compute stream
        // orders the copy after the kernels already queued on it.
        unsafe { self.enqueue_upload(dst, src, &self.compute, "") }?;
        self.sync_compute()
    }

    /// Records `ev` on the copy stream.
    ///
    /// # Errors
    /// Driver errors.
    pub fn record_on_copy(&self, ev: &CudaEvent) -> Result<()> {
        drv(
            self.ordinal,
            || "record event on copy stream".into(),
            ev.record(&self.copy),
        )
    }

    /// Whether `ev` has completed (without waiting).
    ///
    /// # Errors
    /// Driver errors, including asynchronous faults of the work before it.
    pub fn event_done(&self, ev: &CudaEvent) -> Result<bool> {
        drv(self.ordinal, || "query event".into(), ev.try_is_complete())
    }

    /// Waits on the host until `ev` has completed.
    ///
    /// # Errors
    /// Driver errors, including asynchronous faults of the work before it.
    pub fn wait_event(&self, ev: &CudaEvent) -> Result<()> {
        drv(self.ordinal, || "wait for event".into(), ev.synchronize())
    }

    /// The event every [`timer::Trace`] of this device times its spans from: recorded on
    /// the compute stream by the first trace.
    ///
    /// # Errors
    /// Driver errors.
    pub(crate) fn trace_base(&self) -> Result<&CudaEvent> {
        if let Some(ev) = self.loaded.trace_base.get() {
            return Ok(ev);
        }
        let ev = self.timing_event()?;
        self.record(&ev)?;
        // Two first traces at once: one event wins, both were recorded before any span.
        let _ = self.loaded.trace_base.set(ev);
        self.loaded
            .trace_base
            .get()
            .ok_or_else(|| GpuError::Internal("trace base".into()))
    }

    /// Milliseconds between two completed events.
    ///
    /// # Errors
    /// Driver errors (e.g. an event not yet recorded).
    pub fn elapsed(&self, start: &CudaEvent, end: &CudaEvent) -> Result<std::time::Duration> {
        let ms = drv(
            self.ordinal,
            || "event timing".into(),
            start.elapsed_ms(end),
        )?;
        Ok(std::time::Duration::from_secs_f64(
            f64::from(ms.max(0.0)) / 1e3,
        ))
    }

    /// Free and total device memory in bytes. A device-wide query: for start-up and SRS
    /// admission, never the hot path.
    ///
    /// # Errors
    /// Driver errors.
    pub fn mem_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (free, total) = drv(
            self.ordinal,
            || "memory info".into(),
            self.ctx.mem_get_info(),
        )?;
        Ok((free as u64, total as u64))
    }

    /// Issues a launch the driver rejects (a block of 4096 threads, above the 1024 limit):
    /// a real, non-sticky launch error for fault-injection tests. Always returns `Err`.
    ///
    /// # Errors
    /// The driver's launch error (or [`GpuError::Internal`] if the driver accepted it).
    pub fn invalid_launch(&self) -> Result<()> {
        let bad = LaunchConfig {
            grid_dim: (1, 1, 1),
            block_dim: (4096, 1, 1),
            shared_mem_bytes: 0,
        };
        // count = 0: even a launch the driver accepted would touch no memory.
        let none = crate::device::arena::DevRegion::null();
        crate::device::launch::ntt_powers(self, bad, &none, [0; 8], [0; 8], 0)?;
        Err(GpuError::Internal(
            "the driver accepted a 4096-thread block".into(),
        ))
    }

    /// Copies device memory at `src` into `dst` after the compute stream's queued work.
    ///
    /// # Errors
    /// [`GpuError::Input`] if `dst` is larger than the region; driver errors.
    pub fn download(
        &self,
        dst: &mut [u8],
        src: &crate::device::arena::DevRegion<'_>,
    ) -> Result<()> {
        if dst.len() > src.bytes() {
            return Err(GpuError::Input(format!(
                "download of {} bytes from a {}-byte region",
                dst.len(),
                src.bytes()
            )));
        }
        self.bind()?;
        // Wait for the queued kernels first and copy from an idle stream. A copy into
        // pageable memory enqueued behind running kernels waits inside the driver, and
        // while it did, another worker's calls on this context (its uploads) stalled too:
        // on an H200 a second worker's 51 ms upload took ~240 ms of wall time, the first
        // worker's whole kernel section (docs/runs/2026-11-30.md, "Downloads from an idle
        // stream").
        self.sync_compute()?;
        // SAFETY: src.ptr() is a live device allocation of at least dst.len() bytes; dst
        // stays borrowed until the synchronize below.
        let r = unsafe {
            cudarc::driver::result::memcpy_dtoh_async(dst, src.ptr(), self.compute.cu_stream())
        };
        drv(self.ordinal, || format!("download {} bytes", dst.len()), r)?;
        self.sync_compute()
    }

    /// Enqueues a copy of the first `bytes` bytes of `src` into `dst` on the compute stream.
    ///
    /// # Errors
    /// [`GpuError::Input`] if either region is shorter; driver errors.
    pub fn copy_on_compute(
        &self,
        dst: &crate::device::arena::DevRegion<'_>,
        src: &crate::device::arena::DevRegion<'_>,
        bytes: usize,
    ) -> Result<()> {
        check_fits(dst, bytes)?;
        if src.bytes() < bytes {
            return Err(GpuError::Input(format!(
                "copy of {bytes} bytes from a {}-byte region",
                src.bytes()
            )));
        }
        self.bind()?;
        // SAFETY: both regions are live device allocations of at least `bytes` bytes
        // (checked above; a region borrows its arena).
        let r = unsafe {
            cudarc::driver::result::memcpy_dtod_async(
                dst.ptr(),
                src.ptr(),
                bytes,
                self.compute.cu_stream(),
            )
        };
        drv(self.ordinal, || format!("copy {bytes} bytes"), r)
    }

    /// Fills a region with zero bytes on the compute stream.
    ///
    /// # Errors
    /// Driver errors.
    pub fn memset_zero(&self, r: &crate::device::arena::DevRegion<'_>) -> Result<()> {
        self.bind()?;
        // SAFETY: the region is a live device allocation of r.bytes() bytes.
        let res = unsafe {
            cudarc::driver::result::memset_d8_async(r.ptr(), 0, r.bytes(), self.compute.cu_stream())
        };
        drv(self.ordinal, || "memset".into(), res)
    }
}

/// [`GpuError::Input`] unless `len` bytes fit in `dst`.
pub(crate) fn check_fits(dst: &crate::device::arena::DevRegion<'_>, len: usize) -> Result<()> {
    if len > dst.bytes() {
        return Err(GpuError::Input(format!(
            "upload of {len} bytes into a {}-byte region",
            dst.bytes()
        )));
    }
    Ok(())
}
