//! [`GpuTuning`]: every tuning knob of the crate in one place. A process sets it once
//! ([`GpuTuning::install`]) before its first device work, from its configuration; the
//! `CUZK_GPU_*` / `CUZK_NVRTC_OPTS` environment variables override single knobs for
//! benchmarking ([`GpuTuning::with_env`]). Nothing else in the crate reads the
//! environment. The defaults are the measured best (docs/benchmarks.md).

use std::sync::OnceLock;

/// The tuning knobs. `None` means "the built-in choice".
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuTuning {
    /// One window width c (8..=20) for every MSM instead of the cost model's choice, and
    /// no window tables (`CUZK_GPU_MSM_C`). For benchmarking window widths.
    pub msm_window_bits: Option<u32>,
    /// Device bytes the window table of a resident H query may take beyond the query;
    /// `Some(0)`: no table (`CUZK_GPU_H_TABLE=0`). Default: half of the budget left once
    /// the SRS is in. A backend's own `GpuBackendConfig::h_table_max_bytes` wins.
    pub h_table_max_bytes: Option<u64>,
    /// Whether resident proves run the four witness sums on a second stream beside the
    /// quotient and the H sum (`CUZK_GPU_LANES=1`: `Some(false)`). Default: while the H
    /// sum's own scratch is at most 1/32 of the device. A backend's own
    /// `GpuBackendConfig::concurrent_sums` wins.
    pub concurrent_sums: Option<bool>,
    /// Per-phase device times of every MSM and split sum, one JSON line each on stderr
    /// (`CUZK_GPU_PROFILE=1`). Synchronizes the stream after each: diagnosis only.
    pub profile: bool,
    /// Whether a streamed SRS is copied through pinned bounce buffers instead of straight
    /// from its host points registered with the driver (`CUZK_GPU_REGISTER=0`). For
    /// measuring the registration against the bounce copy; default: registered.
    pub no_host_registration: bool,
    /// A file each streamed prove appends one JSON line of device-timed spans to (its
    /// chunk copies and sums on the copy and compute streams, on one clock per device;
    /// `CUZK_GPU_TRACE=FILE`). Events only, no synchronization: `bench/trace.py` reads it.
    pub trace: Option<std::path::PathBuf>,
    /// Whether the split sums (L, A, B) of an SRS streamed in chunks of fewer than 2^22
    /// points take chunks of a whole chunk buffer, two ring slots (`CUZK_GPU_WIDE_SPLIT=0|1`);
    /// default: `backend::plan`'s choice. For measuring the ring with either.
    pub wide_split: Option<bool>,
    /// The bucket width of a streamed H sum that keeps its buckets across its chunks
    /// (`CUZK_GPU_H_ACC=c`, 8..=20 as `CUZK_GPU_MSM_C`), `Some(0)`: reduced per chunk
    /// (`CUZK_GPU_H_ACC=0|off`). For measuring the accumulators; default: kept at the
    /// chunk's own width where the budget has room.
    pub h_acc: Option<u32>,
    /// Whether every NTT pass reads its twists from the two-level table of the root (two
    /// products an element) instead of a table of its own where R <= 18
    /// (`CUZK_GPU_NTT_TWIST=two-level`). For measuring one against the other.
    pub ntt_two_level_twists: bool,
    /// Whether a deferred assignment's a, b, c are always evaluated by the host from its
    /// recording, the recorded matrices never put on the device (`CUZK_GPU_HOST_ABC=1`).
    /// For measuring the device's products against the host's where both fit (a streamed
    /// SRS on a 48 or 80 GB card); default: on the device whenever they fit.
    pub host_abc: bool,
    /// Whether a card's critical lane makes the card's other streams wait at their yield
    /// points while it proves (`device/gate.rs`, `CUZK_GPU_CRITICAL_YIELD=1`). Off: beside
    /// a 32 GiB PoRep load the lane was still held until the gate's watchdog in some
    /// calls, slower than the lane without the gate (the figures: gate.rs's module docs).
    pub critical_yield: bool,
    /// Threads of each host pool of a regular backend's own (one per worker), in which its
    /// compute calls' host work runs (the staging's fill, a, b, c by the host) instead of
    /// the process-wide pool it shares with synthesis (`CUZK_GPU_HOST_THREADS=n`, 0: none).
    /// There a call's fill is queued behind the synthesis jobs: some 24 GiB calls waited
    /// ~215 ms for it (docs/runs/2026-12-07.md, fourteenth session). For measuring one
    /// pool against two; default: the process-wide pool.
    pub host_threads: Option<usize>,
    /// Extra NVRTC options for every kernel module (`CUZK_NVRTC_OPTS`, whitespace
    /// separated, e.g. `-DACC_G1_MIN_BLOCKS=3`); part of the kernel cache key.
    pub nvrtc_options: Vec<String>,
}

static INSTALLED: OnceLock<GpuTuning> = OnceLock::new();

/// An MSM window width a variable names: 8..=20.
fn msm_width(v: &str) -> Option<u32> {
    v.parse().ok().filter(|c| (8..=20).contains(c))
}

impl GpuTuning {
    /// `self` with the knobs the environment sets replaced: `CUZK_GPU_MSM_C=c`,
    /// `CUZK_GPU_H_TABLE=0|off`, `CUZK_GPU_LANES=1`, `CUZK_GPU_PROFILE=1`,
    /// `CUZK_GPU_REGISTER=0|off`, `CUZK_GPU_TRACE=FILE`, `CUZK_GPU_WIDE_SPLIT=0|1`,
    /// `CUZK_GPU_H_ACC=0|off|c`, `CUZK_GPU_NTT_TWIST=two-level`, `CUZK_GPU_HOST_ABC=1`,
    /// `CUZK_GPU_CRITICAL_YIELD=1`, `CUZK_GPU_HOST_THREADS=n`, `CUZK_NVRTC_OPTS="…"`.
    /// Values that do not parse are ignored.
    pub fn with_env(self) -> GpuTuning {
        self.with_vars(|k| std::env::var(k).ok())
    }

    /// [`GpuTuning::with_env`] over any variable source.
    fn with_vars(mut self, var: impl Fn(&str) -> Option<String>) -> GpuTuning {
        if let Some(c) = var("CUZK_GPU_MSM_C").and_then(|v| msm_width(&v)) {
            self.msm_window_bits = Some(c);
        }
        if matches!(var("CUZK_GPU_H_TABLE").as_deref(), Some("0") | Some("off")) {
            self.h_table_max_bytes = Some(0);
        }
        if var("CUZK_GPU_LANES").as_deref() == Some("1") {
            self.concurrent_sums = Some(false);
        }
        if var("CUZK_GPU_PROFILE").as_deref() == Some("1") {
            self.profile = true;
        }
        if matches!(var("CUZK_GPU_REGISTER").as_deref(), Some("0") | Some("off")) {
            self.no_host_registration = true;
        }
        if let Some(path) = var("CUZK_GPU_TRACE").filter(|p| !p.is_empty()) {
            self.trace = Some(path.into());
        }
        match var("CUZK_GPU_H_ACC").as_deref() {
            Some("0") | Some("off") => self.h_acc = Some(0),
            Some(v) => self.h_acc = msm_width(v).or(self.h_acc),
            None => {}
        }
        if var("CUZK_GPU_NTT_TWIST").as_deref() == Some("two-level") {
            self.ntt_two_level_twists = true;
        }
        if var("CUZK_GPU_HOST_ABC").as_deref() == Some("1") {
            self.host_abc = true;
        }
        if var("CUZK_GPU_CRITICAL_YIELD").as_deref() == Some("1") {
            self.critical_yield = true;
        }
        if let Some(n) = var("CUZK_GPU_HOST_THREADS").and_then(|v| v.parse::<usize>().ok()) {
            self.host_threads = (n > 0).then_some(n);
        }
        match var("CUZK_GPU_WIDE_SPLIT").as_deref() {
            Some("1") => self.wide_split = Some(true),
            Some("0") => self.wide_split = Some(false),
            _ => {}
        }
        if let Some(opts) = var("CUZK_NVRTC_OPTS") {
            self.nvrtc_options = opts.split_whitespace().map(str::to_string).collect();
        }
        self
    }

    /// Makes `self` the process's tuning. Only the first call counts, and only before
    /// anything read the tuning (which then fixed the default with the environment's
    /// overrides); returns whether it did.
    pub fn install(self) -> bool {
        INSTALLED.set(self).is_ok()
    }
}

/// The process's tuning: the installed one, else the defaults with the environment's
/// overrides.
pub fn tuning() -> &'static GpuTuning {
    INSTALLED.get_or_init(|| GpuTuning::default().with_env())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_override_single_knobs() {
        let vars = |k: &str| match k {
            "CUZK_GPU_MSM_C" => Some("16".to_string()),
            "CUZK_GPU_LANES" => Some("1".to_string()),
            "CUZK_NVRTC_OPTS" => Some(" -DA=1  -DB ".to_string()),
            "CUZK_GPU_REGISTER" => Some("0".to_string()),
            "CUZK_GPU_TRACE" => Some("/tmp/t.jsonl".to_string()),
            "CUZK_GPU_WIDE_SPLIT" => Some("0".to_string()),
            "CUZK_GPU_H_ACC" => Some("off".to_string()),
            _ => None,
        };
        let base = GpuTuning {
            h_table_max_bytes: Some(5),
            ..GpuTuning::default()
        };
        let t = base.with_vars(vars);
        assert_eq!(t.msm_window_bits, Some(16));
        assert_eq!(t.concurrent_sums, Some(false));
        assert_eq!(
            t.h_table_max_bytes,
            Some(5),
            "unset variables keep the base"
        );
        assert!(!t.profile);
        assert!(t.no_host_registration);
        assert_eq!(
            t.trace.as_deref(),
            Some(std::path::Path::new("/tmp/t.jsonl"))
        );
        assert_eq!(t.nvrtc_options, ["-DA=1", "-DB"]);
        assert_eq!(t.wide_split, Some(false));
        assert_eq!(t.h_acc, Some(0));
        let t = GpuTuning::default().with_vars(|k| (k == "CUZK_GPU_H_ACC").then(|| "16".into()));
        assert_eq!(t.h_acc, Some(16));
        let t = GpuTuning::default().with_vars(|k| (k == "CUZK_GPU_H_ACC").then(|| "21".into()));
        assert_eq!(t.h_acc, None, "not an MSM width");
        assert!(!t.ntt_two_level_twists);
        let t = GpuTuning::default()
            .with_vars(|k| (k == "CUZK_GPU_NTT_TWIST").then(|| "two-level".into()));
        assert!(t.ntt_two_level_twists);
        assert!(!t.host_abc);
        let t = GpuTuning::default().with_vars(|k| (k == "CUZK_GPU_HOST_ABC").then(|| "1".into()));
        assert!(t.host_abc);
        assert!(!GpuTuning::default().critical_yield);
        let t = GpuTuning::default()
            .with_vars(|k| (k == "CUZK_GPU_CRITICAL_YIELD").then(|| "1".into()));
        assert!(t.critical_yield);
        assert_eq!(GpuTuning::default().host_threads, None);
        let t =
            GpuTuning::default().with_vars(|k| (k == "CUZK_GPU_HOST_THREADS").then(|| "12".into()));
        assert_eq!(t.host_threads, Some(12));
        let t = GpuTuning {
            host_threads: Some(12),
            ..GpuTuning::default()
        }
        .with_vars(|k| (k == "CUZK_GPU_HOST_THREADS").then(|| "0".into()));
        assert_eq!(t.host_threads, None, "0: the process-wide pool");
    }

    #[test]
    fn out_of_range_widths_are_ignored() {
        for bad in ["7", "21", "x"] {
            let t = GpuTuning::default()
                .with_vars(|k| (k == "CUZK_GPU_MSM_C").then(|| bad.to_string()));
            assert_eq!(t.msm_window_bits, None, "{bad}");
        }
    }
}
