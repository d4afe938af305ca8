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

use std::path::{Path, PathBuf};

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
    /// `/proc/meminfo` and the memory limit of this process's cgroups, v2 or v1
    /// ([`cgroup_memory_limit`]: a systemd unit's `MemoryMax=`, a container's limit).
    pub fn detect() -> Machine {
        Machine::detect_with_origin().0
    }

    /// [`Machine::detect`], and where its memory figure was read: `MemTotal` or the
    /// cgroup file that set it.
    pub fn detect_with_origin() -> (Machine, String) {
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let mem_total = read_meminfo_total(Path::new("/proc/meminfo"));
        let read = |p: &str| std::fs::read_to_string(p).ok();
        let cgroup = read("/proc/self/mountinfo")
            .zip(read("/proc/self/cgroup"))
            .and_then(|(mounts, groups)| cgroup_memory_limit(&mounts, &groups));
        let (mem_total_bytes, origin) = match (mem_total, cgroup) {
            (Some(m), Some(c)) if c.bytes < m => (c.bytes, c.file.display().to_string()),
            (Some(m), _) => (m, "MemTotal".to_string()),
            (None, Some(c)) => (c.bytes, c.file.display().to_string()),
            (None, None) => (Machine::UNKNOWN_MEM_TOTAL_BYTES, "assumed".to_string()),
        };
        (
            Machine {
                cores,
                mem_total_bytes,
            },
            origin,
        )
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

/// A memory limit of this process's cgroups: its bytes and the file that set it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLimit {
    /// The limit in bytes.
    pub bytes: u64,
    /// The `memory.max` (v2) or `memory.limit_in_bytes` (v1) file it was read from.
    pub file: PathBuf,
}

/// A directory of this process's cgroup in a mounted hierarchy that can limit memory, and
/// the file there that holds the limit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct CgroupDir {
    /// This process's cgroup, below `mount_point`.
    dir: PathBuf,
    /// Where its hierarchy is mounted: the walk up to ancestors stops here.
    mount_point: PathBuf,
    /// `memory.max` for cgroup v2, `memory.limit_in_bytes` for v1's memory controller.
    limit_file: &'static str,
}

/// v1's "no limit": the largest page-aligned `i64` (`9223372036854771712` with 4 KiB
/// pages); anything from 2^62 up is taken as none.
const V1_UNLIMITED_FROM: u64 = 1 << 62;

/// The tightest memory limit over this process's cgroups and their ancestors, given the
/// texts of `/proc/self/mountinfo` and `/proc/self/cgroup`: v2's `memory.max` (a systemd
/// unit's `MemoryMax=`) and v1's `memory.limit_in_bytes` (a container on a v1 or hybrid
/// host, as Docker sets with `--memory`). `None` when no level sets one.
pub fn cgroup_memory_limit(mountinfo: &str, proc_self_cgroup: &str) -> Option<CgroupLimit> {
    let mut tightest: Option<CgroupLimit> = None;
    for cg in cgroup_dirs(mountinfo, proc_self_cgroup) {
        let mut dir = cg.dir.clone();
        loop {
            let file = dir.join(cg.limit_file);
            if let Some(bytes) = read_limit(&file) {
                if tightest.as_ref().is_none_or(|t| bytes < t.bytes) {
                    tightest = Some(CgroupLimit { bytes, file });
                }
            }
            if dir == cg.mount_point || !dir.pop() || !dir.starts_with(&cg.mount_point) {
                break;
            }
        }
    }
    tightest
}

/// This process's cgroup directories that can hold a memory limit: the v2 one (line
/// `0::/path` of `/proc/self/cgroup`) in every `cgroup2` mount, and the v1 memory
/// controller's (line `N:…memory…:/path`) in every `cgroup` mount with the `memory`
/// option. A mount's root (the fourth field of mountinfo: a container sees its own cgroup
/// as `/` or mounted from `/docker/<id>`) is taken off the path; a path outside the
/// mount's root maps to the mount point itself.
fn cgroup_dirs(mountinfo: &str, proc_self_cgroup: &str) -> Vec<CgroupDir> {
    let mut v2_path = None;
    let mut v1_path = None;
    for line in proc_self_cgroup.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        if id == "0" && controllers.is_empty() {
            v2_path = Some(path.trim());
        } else if controllers.split(',').any(|c| c == "memory") {
            v1_path = Some(path.trim());
        }
    }
    let mut dirs = Vec::new();
    for line in mountinfo.lines() {
        let Some((before, after)) = line.split_once(" - ") else {
            continue;
        };
        let fields: Vec<&str> = before.split(' ').collect();
        let mut fs = after.split(' ');
        let (Some(fstype), Some(_source), Some(options)) = (fs.next(), fs.next(), fs.next()) else {
            continue;
        };
        let (Some(root), Some(point)) = (fields.get(3), fields.get(4)) else {
            continue;
        };
        let (path, limit_file) = match fstype {
            "cgroup2" => (v2_path, "memory.max"),
            "cgroup" if options.split(',').any(|o| o == "memory") => {
                (v1_path, "memory.limit_in_bytes")
            }
            _ => continue,
        };
        let Some(path) = path else {
            continue;
        };
        let mount_point = PathBuf::from(unescape_mountinfo(point));
        let root = unescape_mountinfo(root);
        let below = Path::new(path).strip_prefix(&root).unwrap_or(Path::new(""));
        dirs.push(CgroupDir {
            dir: mount_point.join(below),
            mount_point,
            limit_file,
        });
    }
    dirs
}

/// A limit in bytes; `None` for v2's "max", v1's "no limit", or no file.
fn read_limit(path: &Path) -> Option<u64> {
    let bytes: u64 = std::fs::read_to_string(path).ok()?.trim().parse().ok()?;
    (bytes < V1_UNLIMITED_FROM).then_some(bytes)
}

/// A mountinfo field with its octal escapes (`\040` for a space, `\011`, `\012`, `\134`)
/// undone.
fn unescape_mountinfo(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal.and_then(|d| u8::from_str_radix(std::str::from_utf8(d).ok()?, 8).ok()) {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
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

    /// A fresh directory standing in for `/sys/fs/cgroup`.
    fn fake_sys(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("cuzk-cgroup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("temp dir is writable");
        root
    }

    fn write(dir: &Path, file: &str, v: &str) {
        std::fs::create_dir_all(dir).expect("temp dir is writable");
        std::fs::write(dir.join(file), v).expect("writes");
    }

    #[test]
    fn the_v2_limit_is_the_tightest_of_this_process_and_its_ancestors() {
        let sys = fake_sys("v2");
        let unit = sys.join("system.slice/cuzk.service");
        std::fs::create_dir_all(&unit).expect("temp dir is writable");
        let mounts = format!(
            "30 23 0:26 / {} rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n",
            sys.display()
        );
        let cg = "0::/system.slice/cuzk.service\n";
        let limit = || cgroup_memory_limit(&mounts, cg).map(|l| l.bytes);
        // No level sets one (the root has no file; "max" is no limit).
        assert_eq!(limit(), None);
        write(&unit, "memory.max", "max\n");
        assert_eq!(limit(), None);
        // The unit's MemoryMax=64G, and the file named.
        write(&unit, "memory.max", "68719476736\n");
        assert_eq!(
            cgroup_memory_limit(&mounts, cg),
            Some(CgroupLimit {
                bytes: 64 * GIB,
                file: unit.join("memory.max"),
            })
        );
        // A tighter slice above it wins; a looser one does not.
        write(&sys.join("system.slice"), "memory.max", "34359738368\n");
        assert_eq!(limit(), Some(32 * GIB));
        write(&sys.join("system.slice"), "memory.max", "137438953472\n");
        assert_eq!(limit(), Some(64 * GIB));
        // A v1-only /proc/self/cgroup has no v2 path to follow.
        assert_eq!(cgroup_memory_limit(&mounts, "4:memory:/x\n"), None);
        let _ = std::fs::remove_dir_all(&sys);
    }

    #[test]
    fn the_v1_memory_controller_limits_on_a_hybrid_host() {
        // The layout of a hybrid host (this project's CI machine): v1 controllers, each its
        // own mount, and an empty cgroup2 at `unified`.
        let sys = fake_sys("v1");
        let mounts = format!(
            "31 23 0:28 / {sys} rw,relatime - tmpfs tmpfs rw,mode=755\n\
             32 31 0:29 / {sys}/cpu rw,relatime - cgroup cgroup rw,cpu\n\
             35 31 0:32 / {sys}/memory rw,relatime - cgroup cgroup rw,memory\n\
             41 31 0:38 / {sys}/unified rw,relatime - cgroup2 cgroup2 rw\n",
            sys = sys.display()
        );
        let cg = "9:name=systemd:/\n4:memory:/jobs/worker\n1:cpu:/\n0::/\n";
        let worker = sys.join("memory/jobs/worker");
        // v1's "no limit" at every level.
        let unlimited = "9223372036854771712\n";
        write(&sys.join("memory"), "memory.limit_in_bytes", unlimited);
        write(&sys.join("memory/jobs"), "memory.limit_in_bytes", unlimited);
        write(&worker, "memory.limit_in_bytes", unlimited);
        assert_eq!(cgroup_memory_limit(&mounts, cg), None);
        // A limit on the parent reaches its child.
        write(
            &sys.join("memory/jobs"),
            "memory.limit_in_bytes",
            "8589934592\n",
        );
        assert_eq!(
            cgroup_memory_limit(&mounts, cg),
            Some(CgroupLimit {
                bytes: 8 * GIB,
                file: sys.join("memory/jobs/memory.limit_in_bytes"),
            })
        );
        // The process's own tighter one wins.
        write(&worker, "memory.limit_in_bytes", "4294967296\n");
        assert_eq!(
            cgroup_memory_limit(&mounts, cg).map(|l| l.bytes),
            Some(4 * GIB)
        );
        // Another controller's line does not count as memory's.
        assert_eq!(
            cgroup_memory_limit(&mounts, "1:cpu:/jobs/worker\n0::/\n"),
            None
        );
        let _ = std::fs::remove_dir_all(&sys);
    }

    #[test]
    fn a_container_reads_its_own_cgroup_at_the_mount_point() {
        // Docker on a v1 host without a cgroup namespace: /proc/self/cgroup names the host's
        // path, and the mount's root is that same cgroup, mounted at the mount point.
        let sys = fake_sys("docker");
        let point = sys.join("memory space");
        let mounts = format!(
            "611 603 0:32 /docker/abc {}\\040space ro,nosuid - cgroup cgroup rw,memory\n",
            sys.join("memory").display()
        );
        write(&point, "memory.limit_in_bytes", "17179869184\n");
        let dirs = cgroup_dirs(&mounts, "4:memory:/docker/abc\n");
        assert_eq!(
            dirs,
            vec![CgroupDir {
                dir: point.clone(),
                mount_point: point.clone(),
                limit_file: "memory.limit_in_bytes",
            }]
        );
        assert_eq!(
            cgroup_memory_limit(&mounts, "4:memory:/docker/abc\n").map(|l| l.bytes),
            Some(16 * GIB)
        );
        // A path outside the mount's root maps to the mount point.
        assert_eq!(cgroup_dirs(&mounts, "4:memory:/other\n")[0].dir, point);
        // With a cgroup namespace both are "/".
        let ns = format!(
            "30 23 0:26 / {}\\040space rw - cgroup2 cgroup2 rw\n",
            sys.join("memory").display()
        );
        write(&point, "memory.max", "2147483648\n");
        assert_eq!(
            cgroup_memory_limit(&ns, "0::/\n").map(|l| l.bytes),
            Some(2 * GIB)
        );
        let _ = std::fs::remove_dir_all(&sys);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape_mountinfo(r"/a\040b\134c"), r"/a b\c");
        assert_eq!(unescape_mountinfo(r"/trailing\04"), r"/trailing\04");
        assert_eq!(unescape_mountinfo(r"/not\09x"), r"/not\09x");
        assert_eq!(unescape_mountinfo("/plain"), "/plain");
    }

    #[test]
    fn this_machine_is_detected() {
        let m = Machine::detect();
        assert!(m.cores >= 1);
        assert!(m.mem_total_bytes > 0);
    }
}
