//! Engine sizing from the machine: the defaults of the synthesis pool and of the host
//! memory budgets derive from the number of cores and the host memory
//! ([`Sizing::for_machine`], a pure function), so that a 16-core, 128 GiB host and a
//! 2-core laptop both start with settings that fit them. [`crate::EngineConfig`]'s
//! `Default` uses this machine's ([`Machine::detect`]); every value stays overridable by
//! the config file and the daemon's flags, and `cuzk daemon --print-config` shows them.
//!
//! The formula (also in `cuzk.example.toml`):
//! - usable = memory − max(memory / 8, 2 GiB): an eighth, at least 2 GiB, stays for the
//!   OS, the page cache and the rest of the daemon;
//! - `srs_budget_bytes` = min(128 GiB, usable / 2): one 32 GiB PoRep SRS (about 45 GiB)
//!   fits on a 128 GiB host;
//! - `recorded_r1cs_budget_bytes` = min(16 GiB, usable / 8);
//! - `host_memory_budget_bytes` = usable − the two above (at least 1 GiB): what
//!   partitions in flight may hold. Admission charges each partition its kind's
//!   estimate, so the partitions in flight are at most this budget over the per-partition
//!   bytes of the kind (a 32 GiB PoRep partition: about 4 GiB of witness while a, b, c are
//!   left to the backend, as the engine sets it; 15.5 GiB with them), and at most
//!   `synthesis_workers + handoff_depth` beyond those on the provers. The GPUs' pinned
//!   staging (per GPU worker, made on its first prove of a size: 9.4 GB at 2^27) is
//!   host memory too; admission takes it from this budget once it exists
//!   (`Shared::partition_budget`);
//! - `synthesis_workers` = cores − min(2, cores / 4) (at least 1): every core but two
//!   synthesizes (the two feed the provers: uploads, host preparation); fewer are kept
//!   back on small machines. A worker whose partition does not fit the budget waits, so
//!   more workers than the memory admits cost nothing but an idle thread.

use std::path::Path;

const GIB: u64 = 1 << 30;

/// What the defaults derive from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Machine {
    /// CPU threads this process may run on.
    pub cores: usize,
    /// Host memory in bytes.
    pub mem_total_bytes: u64,
}

impl Machine {
    /// Memory assumed when neither `/proc/meminfo` nor a cgroup limit can be read.
    pub const UNKNOWN_MEM_TOTAL_BYTES: u64 = 64 * GIB;

    /// This machine: the threads `std::thread::available_parallelism` reports (CPU
    /// affinity and cgroup quotas included) and the smaller of `MemTotal` in
    /// `/proc/meminfo` and the cgroup v2 limit of this process's cgroup
    /// ([`cgroup_memory_limit`]: a systemd unit's `MemoryMax=`, a container's limit).
    pub fn detect() -> Machine {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let mem_total = read_meminfo_total(Path::new("/proc/meminfo"));
        let cgroup = std::fs::read_to_string("/proc/self/cgroup")
            .ok()
            .and_then(|text| cgroup_memory_limit(Path::new("/sys/fs/cgroup"), &text));
        let mem_total_bytes = match (mem_total, cgroup) {
            (Some(m), Some(c)) => m.min(c),
            (Some(m), None) => m,
            (None, Some(c)) => c,
            (None, None) => Machine::UNKNOWN_MEM_TOTAL_BYTES,
        };
        Machine {
            cores,
            mem_total_bytes,
        }
    }
}

/// The defaults derived from a [`Machine`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizing {
    /// Partitions synthesized at once.
    pub synthesis_workers: usize,
    /// Host bytes partitions in flight may reserve.
    pub host_memory_budget_bytes: u64,
    /// Host bytes of resident SRSs.
    pub srs_budget_bytes: u64,
    /// Host bytes of recorded constraint systems.
    pub recorded_r1cs_budget_bytes: u64,
}

impl Sizing {
    /// The sizing for `machine`; see the module docs for the formula.
    pub fn for_machine(machine: Machine) -> Sizing {
        let cores = machine.cores.max(1);
        let mem = machine.mem_total_bytes;
        let usable = mem.saturating_sub((mem / 8).max(2 * GIB));
        let srs_budget_bytes = (128 * GIB).min(usable / 2);
        let recorded_r1cs_budget_bytes = (16 * GIB).min(usable / 8);
        let host_memory_budget_bytes = usable
            .saturating_sub(srs_budget_bytes + recorded_r1cs_budget_bytes)
            .max(GIB);
        Sizing {
            synthesis_workers: (cores - (cores / 4).min(2)).max(1),
            host_memory_budget_bytes,
            srs_budget_bytes,
            recorded_r1cs_budget_bytes,
        }
    }
}

/// `MemTotal` of a meminfo file in bytes.
fn read_meminfo_total(path: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_meminfo_total(&text)
}

fn parse_meminfo_total(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// A cgroup v2 memory limit in bytes; `None` for "max" or no file.
fn read_cgroup_limit(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The tightest cgroup v2 `memory.max` over this process's cgroup and its ancestors, given
/// the cgroup mount `root` and the text of `/proc/self/cgroup` (its v2 line `0::/path`).
/// A systemd unit with `MemoryMax=` sits below the root
/// (`/sys/fs/cgroup/system.slice/cuzk.service/memory.max`); the root itself has no
/// `memory.max`. `None` when no level sets one.
pub fn cgroup_memory_limit(root: &Path, proc_self_cgroup: &str) -> Option<u64> {
    let rel = proc_self_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))?
        .trim()
        .trim_start_matches('/');
    let mut dir = root.join(rel);
    let mut limit: Option<u64> = None;
    loop {
        if let Some(l) = read_cgroup_limit(&dir.join("memory.max")) {
            limit = Some(limit.map_or(l, |m| m.min(l)));
        }
        if dir == root || !dir.pop() || !dir.starts_with(root) {
            return limit;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizing(cores: usize, mem_gib: u64) -> Sizing {
        Sizing::for_machine(Machine {
            cores,
            mem_total_bytes: mem_gib * GIB,
        })
    }

    #[test]
    fn the_h200_host_gets_fourteen_workers_and_a_42_gib_partition_budget() {
        // 16 cores, 128 GiB: usable 112 GiB = 56 SRS + 14 recorded + 42 partitions.
        assert_eq!(
            sizing(16, 128),
            Sizing {
                synthesis_workers: 14,
                host_memory_budget_bytes: 42 * GIB,
                srs_budget_bytes: 56 * GIB,
                recorded_r1cs_budget_bytes: 14 * GIB,
            }
        );
    }

    #[test]
    fn large_hosts_cap_the_srs_and_recorded_budgets() {
        // 96 cores, 512 GiB: usable 448 GiB = 128 + 16 + 304.
        let s = sizing(96, 512);
        assert_eq!(s.synthesis_workers, 94);
        assert_eq!(s.srs_budget_bytes, 128 * GIB);
        assert_eq!(s.recorded_r1cs_budget_bytes, 16 * GIB);
        assert_eq!(s.host_memory_budget_bytes, 304 * GIB);
    }

    #[test]
    fn small_machines_keep_every_core_and_a_positive_budget() {
        assert_eq!(sizing(2, 24).synthesis_workers, 2);
        assert_eq!(sizing(4, 24).synthesis_workers, 3);
        assert_eq!(sizing(8, 24).synthesis_workers, 6);
        let tiny = sizing(1, 1);
        assert_eq!(tiny.synthesis_workers, 1);
        assert_eq!(tiny.host_memory_budget_bytes, GIB);
        assert_eq!(tiny.srs_budget_bytes, 0);
        let none = Sizing::for_machine(Machine {
            cores: 0,
            mem_total_bytes: 0,
        });
        assert_eq!(none.synthesis_workers, 1);
        assert_eq!(none.host_memory_budget_bytes, GIB);
    }

    #[test]
    fn meminfo_total_is_read_in_bytes() {
        let text = "MemTotal:       131072000 kB\nMemFree:        1000 kB\n";
        assert_eq!(parse_meminfo_total(text), Some(131_072_000 * 1024));
        assert_eq!(parse_meminfo_total("MemFree: 5 kB\n"), None);
        assert_eq!(parse_meminfo_total("MemTotal: lots kB\n"), None);
    }

    #[test]
    fn the_cgroup_limit_is_the_tightest_of_this_process_and_its_ancestors() {
        let root = std::env::temp_dir().join(format!("cuzk-cgroup-{}", std::process::id()));
        let unit = root.join("system.slice/cuzk.service");
        std::fs::create_dir_all(&unit).expect("temp dir is writable");
        let write =
            |dir: &Path, v: &str| std::fs::write(dir.join("memory.max"), v).expect("writes");
        let cg = "0::/system.slice/cuzk.service\n";
        // No level sets one (the root has no file; "max" is no limit).
        assert_eq!(cgroup_memory_limit(&root, cg), None);
        write(&unit, "max\n");
        assert_eq!(cgroup_memory_limit(&root, cg), None);
        // The unit's MemoryMax=64G.
        write(&unit, "68719476736\n");
        assert_eq!(cgroup_memory_limit(&root, cg), Some(64 * GIB));
        // A tighter slice above it wins; a looser one does not.
        write(&root.join("system.slice"), "34359738368\n");
        assert_eq!(cgroup_memory_limit(&root, cg), Some(32 * GIB));
        write(&root.join("system.slice"), "137438953472\n");
        assert_eq!(cgroup_memory_limit(&root, cg), Some(64 * GIB));
        // A v1-only file (no "0::" line) gives none.
        assert_eq!(cgroup_memory_limit(&root, "4:memory:/x\n"), None);
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn this_machine_is_detected() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(m.mem_total_bytes > 0);
    }
}
