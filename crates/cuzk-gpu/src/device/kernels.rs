//! The kernel modules under `kernels/` ([`KernelId`], embedded with `include_str!`), their
//! compilation with NVRTC to a CUBIN for one architecture, and the on-disk cache of the
//! results keyed by sha256(source, headers, options, arch). Loading a module into a device
//! is `device.rs`'s job.

use std::ffi::{CStr, CString};
use std::path::PathBuf;

use cudarc::nvrtc::sys as nvrtc;
use sha2::{Digest, Sha256};

use crate::error::{GpuError, Result};

/// One kernel module: a `.cu` file under `kernels/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KernelId {
    /// `ntt.cu`: NTT passes, twiddle tables, coset scaling, elementwise Fr.
    Ntt,
    /// `msm.cu`: Pippenger phases for G1 and G2, scan, point reductions.
    Msm,
    /// `classify.cu`: 0 / 1 / other scalar classification and compaction.
    Classify,
    /// `batch_add.cu`: sums of bases selected by an index list.
    BatchAdd,
    /// `fixed_base.cu`: scalars times one fixed base (parameter generation).
    FixedBase,
    /// `table.cu`: rows of a G1 window table (the resident H query's precomputation).
    Table,
    /// `sparse.cu`: recorded constraint matrices times the witness (a, b, c on the device).
    Sparse,
}

impl KernelId {
    /// Every module, in build order.
    pub const ALL: [KernelId; 7] = [
        KernelId::Ntt,
        KernelId::Msm,
        KernelId::Classify,
        KernelId::BatchAdd,
        KernelId::FixedBase,
        KernelId::Table,
        KernelId::Sparse,
    ];

    /// Module name (the file stem).
    pub fn name(self) -> &'static str {
        match self {
            KernelId::Ntt => "ntt",
            KernelId::Msm => "msm",
            KernelId::Classify => "classify",
            KernelId::BatchAdd => "batch_add",
            KernelId::FixedBase => "fixed_base",
            KernelId::Table => "table",
            KernelId::Sparse => "sparse",
        }
    }

    /// The module's CUDA source.
    pub fn source(self) -> &'static str {
        match self {
            KernelId::Ntt => include_str!("../../kernels/ntt.cu"),
            KernelId::Msm => include_str!("../../kernels/msm.cu"),
            KernelId::Classify => include_str!("../../kernels/classify.cu"),
            KernelId::BatchAdd => include_str!("../../kernels/batch_add.cu"),
            KernelId::FixedBase => include_str!("../../kernels/fixed_base.cu"),
            KernelId::Table => include_str!("../../kernels/table.cu"),
            KernelId::Sparse => include_str!("../../kernels/sparse.cu"),
        }
    }

    /// Index into per-device module tables.
    pub(crate) fn slot(self) -> usize {
        self as usize
    }
}

/// Headers the modules include, by name.
const HEADERS: [(&str, &str); 5] = [
    ("field.cuh", include_str!("../../kernels/field.cuh")),
    ("fp_dfma.cuh", include_str!("../../kernels/fp_dfma.cuh")),
    ("ec.cuh", include_str!("../../kernels/ec.cuh")),
    ("digits.cuh", include_str!("../../kernels/digits.cuh")),
    ("inverse.cuh", include_str!("../../kernels/inverse.cuh")),
];

/// NVRTC options besides the architecture.
const OPTIONS: [&str; 2] = ["-std=c++17", "-default-device"];

/// [`OPTIONS`], then the tuning's extra ones (`GpuTuning::nvrtc_options`, e.g.
/// `-DACC_G1_MIN_BLOCKS=3`), for benchmarking kernel variants only: what compilation passes
/// and what the cache key hashes, so each set gets its own CUBINs.
fn options() -> impl Iterator<Item = &'static str> {
    let extra = &crate::tuning::tuning().nvrtc_options;
    OPTIONS
        .iter()
        .copied()
        .chain(extra.iter().map(String::as_str))
}

/// Whether libnvrtc can be loaded.
///
/// # Errors
/// [`GpuError::LibraryMissing`] naming the file names that were tried.
pub fn nvrtc_available() -> Result<()> {
    // SAFETY: is_culib_present only tries to dlopen the candidate names.
    if unsafe { nvrtc::is_culib_present() } {
        Ok(())
    } else {
        Err(GpuError::LibraryMissing {
            lib: "libnvrtc (CUDA 13 NVRTC)",
            searched: cudarc::get_lib_name_candidates("nvrtc"),
        })
    }
}

/// Compiles `id` to a CUBIN for `arch` (e.g. "sm_90") with NVRTC; no GPU needed.
///
/// # Errors
/// [`GpuError::LibraryMissing`] without libnvrtc, [`GpuError::Compile`] with NVRTC's log.
pub fn compile_cubin(id: KernelId, arch: &str) -> Result<Vec<u8>> {
    nvrtc_available()?;
    let err = |log: String| GpuError::Compile {
        module: id.name(),
        arch: arch.to_string(),
        log,
    };
    let src = CString::new(id.source()).map_err(|e| err(e.to_string()))?;
    let name = CString::new(format!("{}.cu", id.name())).map_err(|e| err(e.to_string()))?;
    let hdr_src: Vec<CString> = HEADERS
        .iter()
        .map(|(_, s)| CString::new(*s))
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    let hdr_name: Vec<CString> = HEADERS
        .iter()
        .map(|(n, _)| CString::new(*n))
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    let hdr_src_p: Vec<*const std::ffi::c_char> = hdr_src.iter().map(|c| c.as_ptr()).collect();
    let hdr_name_p: Vec<*const std::ffi::c_char> = hdr_name.iter().map(|c| c.as_ptr()).collect();
    let mut opts: Vec<CString> =
        vec![CString::new(format!("-arch={arch}")).map_err(|e| err(e.to_string()))?];
    for o in options() {
        opts.push(CString::new(o).map_err(|e| err(e.to_string()))?);
    }
    let opts_p: Vec<*const std::ffi::c_char> = opts.iter().map(|c| c.as_ptr()).collect();

    let mut prog: nvrtc::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a live NUL-terminated CString above; the header arrays have
    // HEADERS.len() entries each; prog is written by NVRTC and destroyed below.
    let rc = unsafe {
        nvrtc::nvrtcCreateProgram(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            HEADERS.len() as i32,
            hdr_src_p.as_ptr(),
            hdr_name_p.as_ptr(),
        )
    };
    if rc != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        return Err(err(format!("nvrtcCreateProgram: {rc:?}")));
    }
    let out = compile_program(prog, &opts_p).map_err(err);
    // SAFETY: prog was created above and is destroyed exactly once.
    unsafe { nvrtc::nvrtcDestroyProgram(&mut prog) };
    out
}

fn compile_program(
    prog: nvrtc::nvrtcProgram,
    opts: &[*const std::ffi::c_char],
) -> std::result::Result<Vec<u8>, String> {
    // SAFETY: prog is a live program; opts points to opts.len() live C strings.
    let rc = unsafe { nvrtc::nvrtcCompileProgram(prog, opts.len() as i32, opts.as_ptr()) };
    if rc != nvrtc::nvrtcResult::NVRTC_SUCCESS {
        let mut size = 0usize;
        // SAFETY: size is written by NVRTC; the log buffer has exactly that many bytes.
        let log = unsafe {
            nvrtc::nvrtcGetProgramLogSize(prog, &mut size);
            let mut buf = vec![0u8; size.max(1)];
            nvrtc::nvrtcGetProgramLog(prog, buf.as_mut_ptr().cast());
            CStr::from_bytes_until_nul(&buf)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        return Err(format!("{rc:?}: {log}"));
    }
    let mut size = 0usize;
    // SAFETY: as above; the CUBIN buffer is sized by nvrtcGetCUBINSize.
    unsafe {
        let rc = nvrtc::nvrtcGetCUBINSize(prog, &mut size);
        if rc != nvrtc::nvrtcResult::NVRTC_SUCCESS || size == 0 {
            return Err(format!("nvrtcGetCUBINSize: {rc:?}"));
        }
        let mut buf = vec![0u8; size];
        let rc = nvrtc::nvrtcGetCUBIN(prog, buf.as_mut_ptr().cast());
        if rc != nvrtc::nvrtcResult::NVRTC_SUCCESS {
            return Err(format!("nvrtcGetCUBIN: {rc:?}"));
        }
        Ok(buf)
    }
}

/// sha256 over everything that determines the CUBIN.
pub fn cache_key(id: KernelId, arch: &str) -> String {
    let mut h = Sha256::new();
    h.update(id.source());
    for (n, s) in HEADERS {
        h.update(n);
        h.update(s);
    }
    for o in options() {
        h.update(o);
    }
    h.update(arch);
    hex::encode(&h.finalize()[..16])
}

/// `$XDG_CACHE_HOME/cuzk/kernels`, else `~/.cache/cuzk/kernels`, else a temp folder.
pub fn cache_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(x).join("cuzk/kernels");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".cache/cuzk/kernels");
    }
    std::env::temp_dir().join("cuzk-kernels")
}

/// Where [`cubin`] keeps `id`'s CUBIN for `arch`.
pub fn cache_path(id: KernelId, arch: &str) -> PathBuf {
    cache_dir().join(format!(
        "{}-{arch}-{}.cubin",
        id.name(),
        cache_key(id, arch)
    ))
}

/// Writes a CUBIN compiled elsewhere ([`compile_cubin`]) into the disk cache, as
/// [`cubin`] would have: a GPU machine given the cache skips NVRTC.
///
/// # Errors
/// The cache folder or file cannot be written.
pub fn store_cubin(id: KernelId, arch: &str, bytes: &[u8]) -> Result<()> {
    write_atomic(&cache_dir(), &cache_path(id, arch), bytes)
}

/// The CUBIN for `id` on `arch`, from the disk cache or compiled (and then cached).
///
/// # Errors
/// As [`compile_cubin`]; a cache that cannot be written is logged, not an error.
pub fn cubin(id: KernelId, arch: &str) -> Result<Vec<u8>> {
    let path = cache_path(id, arch);
    let dir = cache_dir();
    if let Ok(bytes) = std::fs::read(&path) {
        tracing::debug!(module = id.name(), arch, path = %path.display(), "kernel cache hit");
        return Ok(bytes);
    }
    let t = std::time::Instant::now();
    let bytes = compile_cubin(id, arch)?;
    tracing::info!(
        module = id.name(),
        arch,
        ms = t.elapsed().as_millis() as u64,
        "nvrtc compiled"
    );
    if let Err(e) = write_atomic(&dir, &path, &bytes) {
        tracing::warn!(cause = %e, "kernel cache not written");
    }
    Ok(bytes)
}

/// [`cubin`] for every module, compiling the missing ones in parallel (one thread each).
///
/// # Errors
/// The first compile error.
pub fn cubin_all(arch: &str) -> Result<()> {
    std::thread::scope(|s| {
        let handles: Vec<_> = KernelId::ALL
            .iter()
            .map(|&id| s.spawn(move || cubin(id, arch).map(|_| ())))
            .collect();
        for h in handles {
            match h.join() {
                Ok(r) => r?,
                Err(_) => return Err(GpuError::Internal("kernel compile thread panicked".into())),
            }
        }
        Ok(())
    })
}

fn write_atomic(dir: &std::path::Path, path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    let io = |source| GpuError::Cache {
        path: path.display().to_string(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}
