//! [`GpuError`]: every way a call into cuzk-gpu can fail, with the context needed to act
//! on it (which library, which module, which device). Device errors are values: they fail
//! the operation, never the process.

use cudarc::driver::DriverError;

/// An error from the GPU layer.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// A CUDA shared library could not be loaded.
    #[error(
        "cuda library {lib} not found (searched {searched:?}); install it or add its folder \
         to LD_LIBRARY_PATH"
    )]
    LibraryMissing {
        /// Library role, e.g. "libcuda (driver)" or "libnvrtc".
        lib: &'static str,
        /// File names that were tried.
        searched: Vec<String>,
    },
    /// There is no device with this ordinal.
    #[error("no CUDA device {ordinal} ({count} present)")]
    NoDevice {
        /// Requested ordinal.
        ordinal: usize,
        /// Devices the driver reports.
        count: usize,
    },
    /// A driver call failed.
    #[error("device {ordinal}: {op}: {source}")]
    Driver {
        /// Device ordinal.
        ordinal: usize,
        /// What was being done, e.g. "launch msm_accumulate_g1".
        op: String,
        /// The driver's error.
        #[source]
        source: DriverError,
    },
    /// NVRTC rejected a kernel module.
    #[error("nvrtc: compiling {module} for {arch}: {log}")]
    Compile {
        /// Kernel module name, e.g. "msm".
        module: &'static str,
        /// Target, e.g. "sm_90".
        arch: String,
        /// NVRTC's log or result code.
        log: String,
    },
    /// The on-disk kernel cache could not be written.
    #[error("kernel cache {path}: {source}")]
    Cache {
        /// File or folder involved.
        path: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The VRAM arena has no room for a request.
    #[error("vram arena full: asked {asked} bytes, {free} of {size} free")]
    ArenaFull {
        /// Bytes requested.
        asked: usize,
        /// Bytes left.
        free: usize,
        /// Arena size.
        size: usize,
    },
    /// Device self-checks disagreed with the CPU.
    #[error("{failed} of {total} device checks failed")]
    CheckFailed {
        /// Checks that failed.
        failed: usize,
        /// Checks run.
        total: usize,
    },
    /// The caller's input is not valid for the operation (sizes, lengths, parameters).
    #[error("invalid input: {0}")]
    Input(String),
    /// A kernel launch whose region argument is shorter than the kernel reads or writes.
    #[error("kernel {kernel}: {arg} needs {need} bytes, the region has {have}")]
    Launch {
        /// Kernel name.
        kernel: &'static str,
        /// Argument name.
        arg: &'static str,
        /// Bytes the kernel touches through it.
        need: usize,
        /// Bytes the region has.
        have: usize,
    },
    /// Parameters that do not fit the device's memory budget.
    #[error("srs of {bytes} bytes does not fit the vram budget")]
    SrsTooLarge {
        /// Device bytes the resident copy needs.
        bytes: u64,
    },
    /// A partition of this shape cannot be proved within the device's memory budget, not
    /// even with the SRS streamed and one lean worker.
    #[error(
        "gpu {ordinal}: a 2^{lg} partition needs at least {need} bytes of device memory \
         (srs streamed, one lean worker), the vram budget is {budget} bytes"
    )]
    OverBudget {
        /// The device.
        ordinal: usize,
        /// log2 of the partition's domain.
        lg: u32,
        /// The least the partition needs.
        need: u64,
        /// The device's budget.
        budget: u64,
    },
    /// An allocation would take the backend past its device's memory budget (the mode
    /// chosen for the shape should have prevented it: a bug, or a larger shape).
    #[error("gpu {ordinal}: {what} of {bytes} bytes would exceed the vram budget ({used} of {budget} used)")]
    BudgetExceeded {
        /// The device.
        ordinal: usize,
        /// What was to be allocated.
        what: &'static str,
        /// Its bytes.
        bytes: u64,
        /// Bytes held now.
        used: u64,
        /// The budget.
        budget: u64,
    },
    /// The parameters' points were released from host memory and this device does not
    /// hold them: they must be loaded again to be uploaded or streamed.
    #[error("the srs points are not in host memory and this device does not hold them")]
    SrsReleased,
    /// Streaming the points from the parameters file failed (a read error, a file
    /// truncated or changed under the daemon): the points must come from elsewhere.
    #[error("streaming the srs from its file: {0}")]
    SrsFile(String),
    /// A failure of this crate's own machinery, not of the caller's input nor of the
    /// driver (a helper thread that panicked, a layout that does not hold): a bug.
    #[error("internal: {0}")]
    Internal(String),
}

/// Result alias for this crate.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// Wraps a driver result with the device and the operation.
pub(crate) fn drv<T>(
    ordinal: usize,
    op: impl FnOnce() -> String,
    r: std::result::Result<T, DriverError>,
) -> Result<T> {
    r.map_err(|source| GpuError::Driver {
        ordinal,
        op: op(),
        source,
    })
}
