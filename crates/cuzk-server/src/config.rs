//! [`DaemonConfig`]: the `cuzk.toml` file format (serde), its defaults, and its mapping to
//! the engine's [`EngineConfig`]. Every key is optional; `cuzk.example.toml` at the repo
//! root documents each one with its default. Also parses listen addresses.

use std::path::PathBuf;
use std::time::Duration;

use cuzk_engine::EngineConfig;
use serde::{Deserialize, Serialize};

/// The daemon's config file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DaemonConfig {
    /// This daemon's name: every job id it issues starts with it (`NAME.…`), and every
    /// gRPC response carries it as `x-cuzk-daemon`, so that a balancer in front of many
    /// daemons routes `AwaitProof` and `CancelProof` back to the one holding the job.
    /// Letters, digits, `_` and `-`. Empty: the host name (or "cuzk" without one).
    pub name: String,
    /// gRPC listen address: `unix:///path.sock` or `HOST:PORT`.
    pub listen: String,
    /// HTTP `/metrics`, `/status` and `/ready` listen address `HOST:PORT`; empty disables it.
    pub http_listen: String,
    /// Seconds to let accepted jobs finish on SIGINT/SIGTERM before failing them.
    pub drain_timeout_secs: u64,
    /// A file holding the bearer token every gRPC call must carry (`authorization: Bearer
    /// <token>`); empty: no token. The health service needs none.
    pub auth_token_file: PathBuf,
    /// Serve gRPC on a non-loopback TCP address without a token.
    pub allow_unauthenticated_remote: bool,
    /// Serve the test-only SYNTHETIC kind (its parameters are generated on first use).
    pub allow_synthetic: bool,
    /// Largest gRPC request message accepted, bytes.
    pub max_request_bytes: u64,
    /// Largest gRPC response message sent, bytes.
    pub max_response_bytes: u64,
    /// Concurrent gRPC calls (HTTP/2 streams) per client connection.
    pub max_concurrent_streams: u32,
    /// GPU ordinals to prove on; empty: every GPU found.
    pub gpu_ordinals: Vec<u32>,
    /// More gRPC listen addresses served beside `listen` (same forms), e.g. a TCP port
    /// for remote provers beside Curio's unix socket.
    pub listen_also: Vec<String>,
    /// Whether calls on unix-socket listeners must carry the token too. False: a unix
    /// socket is authorised by its file mode (0660, the daemon's user and group) and only
    /// TCP listeners require the token, so Curio's client (which sends none) works beside
    /// a token-protected TCP port.
    pub token_on_unix_sockets: bool,
    /// Directory of the job journal: accepted jobs and finished results survive a crash
    /// or a restart and are replayed at start. Empty: no journal. Default:
    /// `$STATE_DIRECTORY` (systemd's `StateDirectory=`), else `$XDG_STATE_HOME/cuzk`,
    /// else `$HOME/.local/state/cuzk`, else `/var/lib/cuzk`.
    pub journal_dir: PathBuf,
    /// Engine settings.
    pub engine: EngineSection,
    /// GPU backend tuning.
    pub gpu: GpuSection,
}

/// The `[gpu]` table: the GPU backend's tuning knobs, which the binary hands to
/// cuzk-gpu's `GpuTuning` (this crate does not depend on cuzk-gpu).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GpuSection {
    /// Device bytes each GPU's backend may hold in all (SRS, matrices, worker slots,
    /// scratch); unset: what is free on the device when the backend first needs it, less
    /// `vram_reserve_bytes`.
    pub vram_budget_bytes: Option<u64>,
    /// Device bytes the default budget leaves free for others; unset: 1 GiB.
    pub vram_reserve_bytes: Option<u64>,
    /// Points per chunk of a streamed SRS, the largest tried (halves of it are tried when
    /// a mode does not fit); unset: 2^24.
    pub stream_chunk_points: Option<usize>,
    /// Device bytes of each GPU's critical lane (#29): a second backend on the GPU's
    /// highest-priority streams that proves only CRITICAL partitions (WinningPoSt) beside
    /// the regular one, its bytes taken out of the GPU's budget; 0: no lane; unset: 1 GiB
    /// where the GPU's budget is at least 32 GiB, else none (a 16 or 24 GiB card's PoRep
    /// mode needs every byte).
    pub critical_lane_bytes: Option<u64>,
    /// Device bytes an H window table may take (0: none); unset: the built-in choice.
    pub h_table_max_bytes: Option<u64>,
    /// Witness sums on a second stream; unset: the built-in choice.
    pub concurrent_sums: Option<bool>,
    /// One MSM window width for every MSM (benchmarking only).
    pub msm_window_bits: Option<u32>,
    /// Per-phase device timing on stderr (diagnosis only).
    pub profile: bool,
    /// Extra NVRTC options for every kernel module.
    pub nvrtc_options: Vec<String>,
}

/// The `[engine]` table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSection {
    /// Parameter files directory.
    pub param_dir: PathBuf,
    /// Partitions synthesized at once.
    pub synthesis_workers: usize,
    /// Synthesis threads for CRITICAL partitions only.
    pub critical_synthesis_workers: usize,
    /// Synthesized partitions that may wait for a prover.
    pub handoff_depth: usize,
    /// Prove workers per GPU.
    pub gpu_workers_per_device: usize,
    /// Prove workers on the CPU backend when there is no GPU.
    pub cpu_workers: usize,
    /// Host memory budget for partitions in flight, bytes.
    pub host_memory_budget_bytes: u64,
    /// Resident SRS budget, bytes.
    pub srs_budget_bytes: u64,
    /// Recorded constraint systems budget, bytes (0: off).
    pub recorded_r1cs_budget_bytes: u64,
    /// Check SRS points' curve and subgroup membership on load.
    pub srs_check_points: bool,
    /// Jobs accepted and not finished at most.
    pub max_queued_jobs: usize,
    /// Request payload bytes of jobs accepted and not finished at most.
    pub max_queued_bytes: u64,
    /// Seconds finished results are kept.
    pub result_retention_secs: u64,
    /// Finished results kept at most.
    pub result_retention_count: usize,
    /// Timeline events kept.
    pub timeline_capacity: usize,
    /// Consecutive faults that take a device out of service.
    pub device_fault_threshold: u32,
    /// Seconds a GPU backend call may run before its device is presumed hung.
    pub prove_timeout_secs: u64,
    /// A CPU fallback device beside the GPUs.
    pub cpu_fallback: bool,
}

/// Curio's default address for its cuzk daemon.
pub const DEFAULT_LISTEN: &str = "unix:///run/curio/cuzk.sock";

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            name: String::new(),
            listen: DEFAULT_LISTEN.into(),
            http_listen: "127.0.0.1:9821".into(),
            // A 32 GiB PoRep takes minutes even on a fast GPU, longer behind a queue.
            drain_timeout_secs: 1800,
            auth_token_file: PathBuf::new(),
            allow_unauthenticated_remote: false,
            allow_synthetic: false,
            // Curio's client sends and receives at most 256 MiB; a 64 GiB PoRep C1 output
            // is well below that.
            max_request_bytes: 256 << 20,
            max_response_bytes: 256 << 20,
            max_concurrent_streams: 256,
            gpu_ordinals: Vec::new(),
            listen_also: Vec::new(),
            token_on_unix_sockets: true,
            journal_dir: default_journal_dir(),
            engine: EngineSection::default(),
            gpu: GpuSection::default(),
        }
    }
}

impl Default for EngineSection {
    fn default() -> Self {
        let e = EngineConfig::default();
        EngineSection {
            param_dir: e.param_dir,
            synthesis_workers: e.synthesis_workers,
            critical_synthesis_workers: e.critical_synthesis_workers,
            handoff_depth: e.handoff_depth,
            gpu_workers_per_device: e.gpu_workers_per_device,
            cpu_workers: e.cpu_workers,
            host_memory_budget_bytes: e.host_memory_budget_bytes,
            srs_budget_bytes: e.srs_budget_bytes,
            recorded_r1cs_budget_bytes: e.recorded_r1cs_budget_bytes,
            srs_check_points: e.srs_check_points,
            max_queued_jobs: e.max_queued_jobs,
            max_queued_bytes: e.max_queued_bytes,
            result_retention_secs: e.result_retention.as_secs(),
            result_retention_count: e.result_retention_count,
            timeline_capacity: e.timeline_capacity,
            device_fault_threshold: e.device_fault_threshold,
            prove_timeout_secs: e.prove_timeout.as_secs(),
            cpu_fallback: e.cpu_fallback,
        }
    }
}

/// The default `journal_dir` (see [`DaemonConfig::journal_dir`]).
pub fn default_journal_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("STATE_DIRECTORY") {
        // systemd may list several, separated by colons; the first is this unit's.
        let first = dir
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or("")
            .to_string();
        return PathBuf::from(first);
    }
    if let Some(dir) = var("XDG_STATE_HOME") {
        return PathBuf::from(dir).join("cuzk");
    }
    if let Some(home) = var("HOME") {
        return PathBuf::from(home).join(".local/state/cuzk");
    }
    PathBuf::from("/var/lib/cuzk")
}

/// A config file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not valid TOML for this format.
    #[error("parsing {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (names the key).
        message: String,
    },
    /// The token file cannot be used.
    #[error("auth_token_file {path}: {reason}")]
    Token {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A listen address is malformed.
    #[error("invalid listen address {addr:?}: {reason}")]
    Listen {
        /// The address.
        addr: String,
        /// What is wrong.
        reason: String,
    },
}

impl DaemonConfig {
    /// Reads a config file; missing keys take their defaults. Curio's `cuzk.toml` tables
    /// are translated (see [`crate::curio`]); each note about a key that was ignored is
    /// logged as a warning.
    ///
    /// # Errors
    /// [`ConfigError::Read`] or [`ConfigError::Parse`] naming the file (and the key).
    pub fn load(path: &std::path::Path) -> Result<DaemonConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let (cfg, notes) =
            DaemonConfig::parse_noting(&text).map_err(|message| ConfigError::Parse {
                path: path.to_path_buf(),
                message,
            })?;
        for note in notes {
            tracing::warn!(config = %path.display(), "{note}");
        }
        Ok(cfg)
    }

    /// Parses TOML text.
    ///
    /// # Errors
    /// The parser's message.
    pub fn parse(text: &str) -> Result<DaemonConfig, String> {
        DaemonConfig::parse_noting(text).map(|(cfg, _)| cfg)
    }

    /// Parses TOML text in cuzk's format, Curio's, or both, with a note for each key of
    /// Curio's that has no effect here.
    ///
    /// # Errors
    /// The parser's message, naming the key.
    pub fn parse_noting(text: &str) -> Result<(DaemonConfig, Vec<String>), String> {
        let mut table: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
        let notes = crate::curio::translate(&mut table)?;
        let cfg = DaemonConfig::deserialize(table).map_err(|e| e.to_string())?;
        Ok((cfg, notes))
    }

    /// The bearer token from `auth_token_file`, or `None` when no file is configured.
    ///
    /// # Errors
    /// [`ConfigError::Token`] when the file cannot be read or holds no token.
    pub fn auth_token(&self) -> Result<Option<String>, ConfigError> {
        if self.auth_token_file.as_os_str().is_empty() {
            return Ok(None);
        }
        let path = &self.auth_token_file;
        let bad = |reason: String| ConfigError::Token {
            path: path.clone(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        {
            use std::os::unix::fs::PermissionsExt;
            if let Ok(meta) = std::fs::metadata(path) {
                let mode = meta.permissions().mode() & 0o777;
                if mode & 0o077 != 0 {
                    tracing::warn!(
                        path = %path.display(),
                        mode = format!("{mode:o}"),
                        "the token file is readable by other users: chmod 600 it"
                    );
                }
            }
        }
        let token = text.trim();
        if token.is_empty() {
            return Err(bad("the file is empty".into()));
        }
        if token.chars().any(|c| !c.is_ascii_graphic()) {
            return Err(bad(
                "the token must be printable ASCII without spaces".into()
            ));
        }
        Ok(Some(token.to_string()))
    }

    /// The effective config as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot render config: {e}\n"))
    }

    /// The engine's part.
    pub fn engine_config(&self) -> EngineConfig {
        let e = &self.engine;
        EngineConfig {
            param_dir: e.param_dir.clone(),
            synthesis_workers: e.synthesis_workers,
            critical_synthesis_workers: e.critical_synthesis_workers,
            handoff_depth: e.handoff_depth,
            gpu_workers_per_device: e.gpu_workers_per_device,
            cpu_workers: e.cpu_workers,
            host_memory_budget_bytes: e.host_memory_budget_bytes,
            srs_budget_bytes: e.srs_budget_bytes,
            recorded_r1cs_budget_bytes: e.recorded_r1cs_budget_bytes,
            srs_check_points: e.srs_check_points,
            max_queued_jobs: e.max_queued_jobs,
            max_queued_bytes: e.max_queued_bytes,
            result_retention: Duration::from_secs(e.result_retention_secs),
            result_retention_count: e.result_retention_count,
            timeline_capacity: e.timeline_capacity,
            device_fault_threshold: e.device_fault_threshold,
            prove_timeout: Duration::from_secs(e.prove_timeout_secs),
            cpu_fallback: e.cpu_fallback,
            // The daemon sets it from the top-level `journal_dir` (serve.rs); an engine
            // run in-process from this config keeps no journal.
            journal_dir: PathBuf::new(),
            name: self.daemon_name(),
        }
    }

    /// [`DaemonConfig::name`], or when empty the host name made fit for a job id
    /// (characters other than letters, digits, `_` and `-` become `-`), or "cuzk".
    pub fn daemon_name(&self) -> String {
        if !self.name.is_empty() {
            return self.name.clone();
        }
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .or_else(|_| std::fs::read_to_string("/etc/hostname"))
            .unwrap_or_default();
        let host: String = host
            .trim()
            .chars()
            .take(cuzk_engine::config::MAX_NAME_LEN)
            .map(|c| {
                if cuzk_engine::config::is_name_char(c) {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        if host.is_empty() {
            "cuzk".into()
        } else {
            host
        }
    }
}

/// Where to listen or connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListenAddr {
    /// A unix socket path.
    Unix(PathBuf),
    /// A TCP `HOST:PORT`.
    Tcp(String),
}

impl ListenAddr {
    /// Parses `unix:///path`, `unix:path`, `tcp://HOST:PORT`, `http://HOST:PORT` or `HOST:PORT`.
    ///
    /// # Errors
    /// [`ConfigError::Listen`].
    pub fn parse(addr: &str) -> Result<ListenAddr, ConfigError> {
        let bad = |reason: &str| ConfigError::Listen {
            addr: addr.to_string(),
            reason: reason.to_string(),
        };
        if let Some(path) = addr
            .strip_prefix("unix://")
            .or_else(|| addr.strip_prefix("unix:"))
        {
            if path.is_empty() {
                return Err(bad("empty socket path"));
            }
            return Ok(ListenAddr::Unix(PathBuf::from(path)));
        }
        let hostport = addr
            .strip_prefix("tcp://")
            .or_else(|| addr.strip_prefix("http://"))
            .unwrap_or(addr);
        match hostport.rsplit_once(':') {
            Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
                Ok(ListenAddr::Tcp(hostport.to_string()))
            }
            _ => Err(bad("expected unix:///path.sock or HOST:PORT")),
        }
    }
}

impl std::fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListenAddr::Unix(p) => write!(f, "unix://{}", p.display()),
            ListenAddr::Tcp(a) => f.write_str(a),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_through_toml() {
        let cfg = DaemonConfig::default();
        assert_eq!(DaemonConfig::parse(&cfg.to_toml()), Ok(cfg));
    }

    #[test]
    fn gpu_budget_keys_round_trip_through_toml() {
        // See: #26. The VRAM budget, its reserve and the streamed chunk, as an operator
        // writes them and as `--print-config` shows them.
        let text = "[gpu]\nvram_budget_bytes = 17179869184\nvram_reserve_bytes = 536870912\n\
                    stream_chunk_points = 2097152\n";
        let cfg = DaemonConfig::parse(text).expect("parses");
        assert_eq!(cfg.gpu.vram_budget_bytes, Some(16 << 30));
        assert_eq!(cfg.gpu.vram_reserve_bytes, Some(512 << 20));
        assert_eq!(cfg.gpu.stream_chunk_points, Some(1 << 21));
        let shown = cfg.to_toml();
        assert!(shown.contains("stream_chunk_points = 2097152"), "{shown}");
        assert_eq!(DaemonConfig::parse(&shown), Ok(cfg));
    }

    #[test]
    fn critical_lane_key_round_trips_through_toml() {
        // See: #29. Off (0) and a size, as an operator writes them and `--print-config`
        // shows them; unset stays unset (the automatic choice).
        for bytes in [0u64, 1 << 30] {
            let text = format!("[gpu]\ncritical_lane_bytes = {bytes}\n");
            let cfg = DaemonConfig::parse(&text).expect("parses");
            assert_eq!(cfg.gpu.critical_lane_bytes, Some(bytes));
            let shown = cfg.to_toml();
            assert!(
                shown.contains(&format!("critical_lane_bytes = {bytes}")),
                "{shown}"
            );
            assert_eq!(DaemonConfig::parse(&shown), Ok(cfg));
        }
        let unset = DaemonConfig::parse("[gpu]\n").expect("parses");
        assert_eq!(unset.gpu.critical_lane_bytes, None);
        assert!(!unset.to_toml().contains("critical_lane_bytes"));
    }

    #[test]
    fn unknown_key_is_named() {
        let err = DaemonConfig::parse("[engine]\nsynthesis_wrokers = 3\n").unwrap_err();
        assert!(err.contains("synthesis_wrokers"), "{err}");
    }

    #[test]
    fn listen_addresses_parse() {
        assert_eq!(
            ListenAddr::parse("unix:///run/c.sock").ok(),
            Some(ListenAddr::Unix("/run/c.sock".into()))
        );
        assert_eq!(
            ListenAddr::parse("127.0.0.1:9000").ok(),
            Some(ListenAddr::Tcp("127.0.0.1:9000".into()))
        );
        assert!(ListenAddr::parse("nonsense").is_err());
        assert!(ListenAddr::parse("unix://").is_err());
    }
}
