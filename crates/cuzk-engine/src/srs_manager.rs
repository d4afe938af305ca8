//! [`SrsManager`]: circuit id → resident [`Srs`], shared by every partition that needs it.
//! Loads once (concurrent callers wait for the one load), counts references through
//! [`SrsLease`] guards, keeps resident bytes under a budget by evicting idle entries
//! least-recently-used first, and reports each entry's tier as it really is: resident in
//! host memory, or known on disk only. Which file a circuit id names is the
//! [`KindRegistry`]'s business.
//!
//! Once every device that proves with an SRS holds its points in its own memory, the
//! engine [`SrsManager::release`]s the host copy: the entry keeps a [`Srs::released`]
//! copy (verifying key, lengths, fingerprint) and counts no host bytes. A prove that needs
//! the points again (a device that lost its copy, the CPU fallback) asks
//! [`SrsManager::acquire_full`], which reads the file again, one reload at a time.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cuzk_groth16::{Srs, SrsOptions};
use parking_lot::{Condvar, Mutex};
use tracing::{info, warn};

use crate::params_check::{ParamsCheck, ParamsSummary};
use crate::{EngineError, KindRegistry};

/// Where an SRS lives. `Vram` means resident in host memory and in at least one device's
/// memory (the GPU backend keeps parameters there across proves; the engine asks each
/// device's backend).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SrsTier {
    /// Resident in device memory.
    Vram,
    /// Decoded and resident in host memory.
    Host,
    /// Known, on disk only (evicted or never loaded).
    Disk,
    /// In use with its host copy released, its points streamed to the devices from the
    /// file through the page cache (larger than the SRS budget).
    File,
}

/// One SRS entry as status reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SrsStatus {
    /// The circuit id.
    pub circuit_id: String,
    /// Where it is.
    pub tier: SrsTier,
    /// Host bytes held (0 when on disk).
    pub size_bytes: u64,
    /// Partitions holding it now.
    pub ref_count: u32,
    /// The parameters file.
    pub path: PathBuf,
    /// How long its last load took.
    pub load_time: Duration,
}

enum Residency {
    Loading,
    Resident(Arc<Srs>),
    OnDisk,
}

struct Entry {
    path: PathBuf,
    residency: Residency,
    size_bytes: u64,
    refs: u32,
    last_used: Instant,
    load_time: Duration,
}

/// The SRS cache.
pub struct SrsManager {
    param_dir: PathBuf,
    budget_bytes: u64,
    options: SrsOptions,
    registry: Arc<KindRegistry>,
    entries: Mutex<HashMap<String, Entry>>,
    load_done: Condvar,
    // Serializes reloads of released SRSs: two at once would hold two host copies.
    reloading: Mutex<()>,
    // Which listed circuits' files can be proved with (readiness); loads report to it.
    check: ParamsCheck,
    // Whether every device streams an SRS (set by the engine once its devices exist): one
    // larger than the budget is then opened to stream from its file, never loaded.
    streams: std::sync::OnceLock<StreamRule>,
}

/// Whether every device that proves streams this SRS's points (see [`SrsManager::set_stream_rule`]).
pub type StreamRule = Box<dyn Fn(&Srs) -> bool + Send + Sync>;

/// A reference to a resident SRS; the entry cannot be evicted while a lease lives.
pub struct SrsLease {
    manager: Arc<SrsManager>,
    circuit_id: String,
    srs: Arc<Srs>,
}

impl SrsLease {
    /// The parameters.
    pub fn srs(&self) -> &Arc<Srs> {
        &self.srs
    }

    /// The circuit id.
    pub fn circuit_id(&self) -> &str {
        &self.circuit_id
    }
}

impl Drop for SrsLease {
    fn drop(&mut self) {
        let mut entries = self.manager.entries.lock();
        if let Some(entry) = entries.get_mut(&self.circuit_id) {
            entry.refs = entry.refs.saturating_sub(1);
            entry.last_used = Instant::now();
        }
    }
}

impl SrsManager {
    /// An empty cache over `param_dir`.
    pub fn new(
        param_dir: PathBuf,
        budget_bytes: u64,
        options: SrsOptions,
        registry: Arc<KindRegistry>,
    ) -> Self {
        SrsManager {
            check: ParamsCheck::new(&registry, &param_dir),
            param_dir,
            budget_bytes,
            options,
            registry,
            entries: Mutex::new(HashMap::new()),
            load_done: Condvar::new(),
            reloading: Mutex::new(()),
            streams: std::sync::OnceLock::new(),
        }
    }

    /// Sets how the manager asks whether every device streams an SRS (given one opened to
    /// stream, [`Srs::open_streamed`]): an SRS larger than the budget that they all stream
    /// is then never decoded into host memory; its points are checked once, a chunk at a
    /// time, and read from the file on each prove. Without a rule every SRS is loaded.
    pub fn set_stream_rule(&self, rule: StreamRule) {
        let _ = self.streams.set(rule);
    }

    /// Reads `path`: decoded into host memory, or, larger than the budget on devices that
    /// all stream it, opened to stream from the file with its first `budget_bytes` left to
    /// the page cache.
    fn open(&self, circuit_id: &str, path: &std::path::Path) -> Result<Srs, String> {
        let decoded = Srs::check_file(path)
            .map_err(|e| e.to_string())?
            .decoded_bytes();
        if let (true, Some(rule)) = (decoded > self.budget_bytes, self.streams.get()) {
            let srs = Srs::open_streamed(path).map_err(|e| e.to_string())?;
            if let (true, Some(file)) = (rule(&srs), srs.file.as_ref()) {
                file.check_points(self.options.check_points)
                    .map_err(|e| e.to_string())?;
                file.set_cache_share(self.budget_bytes);
                info!(
                    circuit_id,
                    decoded_bytes = decoded,
                    budget = self.budget_bytes,
                    "srs larger than the srs budget: its points are streamed from its file, never held"
                );
                return Ok(srs);
            }
        }
        Srs::load(path, self.options).map_err(|e| e.to_string())
    }

    /// Checks that `circuit_id` names parameters that exist or can be generated, without
    /// loading them.
    ///
    /// # Errors
    /// [`EngineError::UnknownSrs`] naming where it looked.
    pub fn check_known(&self, circuit_id: &str) -> Result<(), EngineError> {
        if self.entries.lock().contains_key(circuit_id) {
            return Ok(());
        }
        let (provider, path) = self.resolve(circuit_id)?;
        if path.is_file() || provider.can_generate(circuit_id) {
            Ok(())
        } else {
            Err(EngineError::UnknownSrs {
                circuit_id: circuit_id.to_string(),
                reason: format!("no parameters file at {}", path.display()),
            })
        }
    }

    /// Returns a lease on `circuit_id`'s SRS, loading it first if needed; the second value
    /// is the load time when this call loaded it.
    ///
    /// # Errors
    /// [`EngineError::UnknownSrs`] or [`EngineError::SrsLoad`].
    pub fn acquire(
        self: &Arc<Self>,
        circuit_id: &str,
    ) -> Result<(SrsLease, Option<Duration>), EngineError> {
        let mut entries = self.entries.lock();
        loop {
            match entries.get_mut(circuit_id) {
                Some(Entry {
                    residency: Residency::Resident(srs),
                    refs,
                    last_used,
                    ..
                }) => {
                    *refs += 1;
                    *last_used = Instant::now();
                    let lease = SrsLease {
                        manager: self.clone(),
                        circuit_id: circuit_id.to_string(),
                        srs: srs.clone(),
                    };
                    return Ok((lease, None));
                }
                Some(Entry {
                    residency: Residency::Loading,
                    ..
                }) => self.load_done.wait(&mut entries),
                _ => break,
            }
        }
        let (provider, path) = self.resolve(circuit_id)?;
        entries.insert(
            circuit_id.to_string(),
            Entry {
                path: path.clone(),
                residency: Residency::Loading,
                size_bytes: 0,
                refs: 0,
                last_used: Instant::now(),
                load_time: Duration::ZERO,
            },
        );
        drop(entries);

        let started = Instant::now();
        // A panicking reader must not leave the entry in `Loading` with waiters forever.
        let loaded = std::panic::catch_unwind(AssertUnwindSafe(|| {
            provider
                .ensure(circuit_id, &path)
                .map_err(|e| e.to_string())?;
            self.open(circuit_id, &path)
        }))
        .unwrap_or_else(|_| Err("parameter reader panicked".to_string()));
        let load_time = started.elapsed();
        self.check.loaded(
            circuit_id,
            loaded.as_ref().map(|_| ()).map_err(|e| e.as_str()),
        );

        let mut entries = self.entries.lock();
        self.load_done.notify_all();
        match loaded {
            Ok(srs) => {
                let srs = Arc::new(srs);
                let size_bytes = srs.host_bytes() as u64;
                info!(
                    circuit_id,
                    size_bytes,
                    load_ms = load_time.as_millis() as u64,
                    "srs loaded"
                );
                entries.insert(
                    circuit_id.to_string(),
                    Entry {
                        path,
                        residency: Residency::Resident(srs.clone()),
                        size_bytes,
                        refs: 1,
                        last_used: Instant::now(),
                        load_time,
                    },
                );
                self.evict_over_budget(&mut entries);
                let lease = SrsLease {
                    manager: self.clone(),
                    circuit_id: circuit_id.to_string(),
                    srs,
                };
                Ok((lease, Some(load_time)))
            }
            Err(reason) => {
                entries.remove(circuit_id);
                warn!(circuit_id, cause = %reason, "srs load failed");
                Err(EngineError::SrsLoad {
                    circuit_id: circuit_id.to_string(),
                    reason,
                })
            }
        }
    }

    /// Drops the host copy of `circuit_id`'s points, keeping a [`Srs::released`] copy in
    /// the entry (the leases already given out keep theirs until they end). Returns the
    /// host bytes it will free; 0 when it is not resident or already released.
    pub fn release(&self, circuit_id: &str) -> u64 {
        self.release_if(circuit_id, |_| {
            Some("srs host copy released: every device holds its points")
        })
    }

    /// Releases the host copy of `circuit_id`'s points when it is larger than the SRS
    /// budget and its file can be streamed from (the released copy keeps the file open,
    /// [`Srs::file`]): the devices then read the points from the file through the page
    /// cache. Returns the bytes freed (0 when it fits, has no usable file, or is already
    /// released).
    pub fn release_to_file(&self, circuit_id: &str) -> u64 {
        let over = self
            .entries
            .lock()
            .get(circuit_id)
            .is_some_and(|e| e.size_bytes > self.budget_bytes);
        if !over {
            return 0;
        }
        let budget = self.budget_bytes;
        self.release_if(circuit_id, |released| {
            // The SRS budget it does not fit is the share of its file the page cache keeps.
            if let Some(f) = &released.file {
                f.set_cache_share(budget);
            }
            released.file.is_some().then_some(
                "srs host copy released: larger than the srs budget, its points are streamed from its file",
            )
        })
    }

    /// Swaps the entry's resident copy for its released copy when `why(&released)` gives
    /// a reason (logged).
    fn release_if(&self, circuit_id: &str, why: impl FnOnce(&Srs) -> Option<&'static str>) -> u64 {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.get_mut(circuit_id) else {
            return 0;
        };
        let Residency::Resident(srs) = &entry.residency else {
            return 0;
        };
        if srs.is_released() {
            return 0;
        }
        let released = srs.released();
        let Some(why) = why(&released) else {
            return 0;
        };
        let freed = entry.size_bytes;
        entry.residency = Residency::Resident(Arc::new(released));
        entry.size_bytes = 0;
        info!(circuit_id, freed_bytes = freed, "{why}");
        freed
    }

    /// A lease on `circuit_id`'s SRS with its points in host memory: the resident copy, or,
    /// when it was released, a copy read from the file again (which then replaces the
    /// released one in the entry).
    ///
    /// # Errors
    /// As [`SrsManager::acquire`].
    pub fn acquire_full(self: &Arc<Self>, circuit_id: &str) -> Result<SrsLease, EngineError> {
        let (lease, _) = self.acquire(circuit_id)?;
        if !lease.srs().is_released() {
            return Ok(lease);
        }
        let _one = self.reloading.lock();
        // Another caller may have reloaded it while this one waited.
        let (lease, _) = self.acquire(circuit_id)?;
        if !lease.srs().is_released() {
            return Ok(lease);
        }
        let path = self
            .entries
            .lock()
            .get(circuit_id)
            .map(|e| e.path.clone())
            .unwrap_or_default();
        let started = Instant::now();
        let srs = Srs::load(&path, self.options).map_err(|e| {
            let reason = e.to_string();
            self.check.loaded(circuit_id, Err(&reason));
            EngineError::SrsLoad {
                circuit_id: circuit_id.to_string(),
                reason,
            }
        })?;
        let srs = Arc::new(srs);
        let size_bytes = srs.host_bytes() as u64;
        info!(
            circuit_id,
            size_bytes,
            load_ms = started.elapsed().as_millis() as u64,
            "srs host copy read again: a device needs its points"
        );
        let mut entries = self.entries.lock();
        if let Some(entry) = entries.get_mut(circuit_id) {
            entry.residency = Residency::Resident(srs.clone());
            entry.size_bytes = size_bytes;
            entry.refs += 1;
            entry.last_used = Instant::now();
        }
        self.evict_over_budget(&mut entries);
        drop(entries);
        // The released lease goes; its reference was counted separately.
        drop(lease);
        Ok(SrsLease {
            manager: self.clone(),
            circuit_id: circuit_id.to_string(),
            srs,
        })
    }

    /// Loads `circuit_id` ahead of use. Returns whether it was already resident and how
    /// long the load took (zero when it was).
    ///
    /// # Errors
    /// As [`SrsManager::acquire`].
    pub fn preload(self: &Arc<Self>, circuit_id: &str) -> Result<(bool, Duration), EngineError> {
        let (_lease, loaded) = self.acquire(circuit_id)?;
        Ok((loaded.is_none(), loaded.unwrap_or(Duration::ZERO)))
    }

    /// Drops `circuit_id`'s resident copy. Returns whether it was resident and the bytes freed.
    ///
    /// # Errors
    /// [`EngineError::SrsInUse`] while partitions hold it or it is loading,
    /// [`EngineError::UnknownSrs`] for an id no provider knows.
    pub fn evict(&self, circuit_id: &str) -> Result<(bool, u64), EngineError> {
        let mut entries = self.entries.lock();
        let Some(entry) = entries.get_mut(circuit_id) else {
            self.resolve(circuit_id)?;
            return Ok((false, 0));
        };
        match entry.residency {
            Residency::OnDisk => Ok((false, 0)),
            Residency::Loading => Err(EngineError::SrsInUse {
                circuit_id: circuit_id.to_string(),
                ref_count: entry.refs,
            }),
            Residency::Resident(_) if entry.refs > 0 => Err(EngineError::SrsInUse {
                circuit_id: circuit_id.to_string(),
                ref_count: entry.refs,
            }),
            Residency::Resident(_) => {
                let freed = entry.size_bytes;
                entry.residency = Residency::OnDisk;
                entry.size_bytes = 0;
                info!(circuit_id, freed_bytes = freed, "srs evicted");
                Ok((true, freed))
            }
        }
    }

    /// Every entry the manager has seen, by circuit id.
    pub fn status(&self) -> Vec<SrsStatus> {
        let entries = self.entries.lock();
        let mut out: Vec<SrsStatus> = entries
            .iter()
            .map(|(id, e)| SrsStatus {
                circuit_id: id.clone(),
                tier: match &e.residency {
                    Residency::Resident(srs) if srs.is_released() && srs.file.is_some() => {
                        SrsTier::File
                    }
                    Residency::Resident(_) => SrsTier::Host,
                    Residency::Loading | Residency::OnDisk => SrsTier::Disk,
                },
                size_bytes: e.size_bytes,
                ref_count: e.refs,
                path: e.path.clone(),
                load_time: e.load_time,
            })
            .collect();
        out.sort_by(|a, b| a.circuit_id.cmp(&b.circuit_id));
        out
    }

    /// Which listed circuits can be proved with the files under the parameter directory.
    pub fn params(&self) -> ParamsSummary {
        self.check.summary()
    }

    /// The host-resident copy of `circuit_id`, if any (no reference is taken).
    pub fn resident(&self, circuit_id: &str) -> Option<Arc<Srs>> {
        match &self.entries.lock().get(circuit_id)?.residency {
            Residency::Resident(srs) => Some(srs.clone()),
            _ => None,
        }
    }

    /// Host bytes of resident entries.
    pub fn resident_bytes(&self) -> u64 {
        self.entries.lock().values().map(|e| e.size_bytes).sum()
    }

    fn resolve(
        &self,
        circuit_id: &str,
    ) -> Result<(Arc<dyn crate::ParamsProvider>, PathBuf), EngineError> {
        self.registry
            .resolve_params(circuit_id, &self.param_dir)
            .ok_or_else(|| EngineError::UnknownSrs {
                circuit_id: circuit_id.to_string(),
                reason: "no proof kind served by this daemon uses it".to_string(),
            })
    }

    fn evict_over_budget(&self, entries: &mut HashMap<String, Entry>) {
        loop {
            let resident: u64 = entries.values().map(|e| e.size_bytes).sum();
            if resident <= self.budget_bytes {
                return;
            }
            let victim = entries
                .iter()
                .filter(|(_, e)| e.refs == 0 && matches!(e.residency, Residency::Resident(_)))
                .min_by_key(|(_, e)| e.last_used)
                .map(|(id, _)| id.clone());
            let Some(victim) = victim else {
                warn!(
                    resident,
                    budget = self.budget_bytes,
                    "srs budget exceeded by entries in use"
                );
                return;
            };
            if let Some(entry) = entries.get_mut(&victim) {
                info!(circuit_id = %victim, freed_bytes = entry.size_bytes, "srs evicted (lru)");
                entry.residency = Residency::OnDisk;
                entry.size_bytes = 0;
            }
        }
    }
}
