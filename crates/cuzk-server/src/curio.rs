//! Curio's `cuzk.toml` (the config of the daemon in Curio's `extern/cuzk`, tables
//! `[daemon]`, `[srs]`, `[memory]`, `[gpus]`, `[scheduler]`, `[synthesis]`, `[pipeline]`,
//! `[logging]`) read as cuzk's own format: [`translate`] moves each Curio key that has a
//! cuzk equivalent to cuzk's key before the file is deserialized, and returns a note for
//! every Curio key it leaves without effect. cuzk's own keys win where a file has both.
//!
//! The key list follows Curio's `extern/cuzk/cuzk-core/src/config.rs`
//! (github.com/filecoin-project/curio, commit e0294b0).

use toml::{Table, Value};

/// What becomes of one key of a Curio table.
enum Mapping {
    /// cuzk's key (a dotted path into cuzk's format) takes the value as it is.
    To(&'static str),
    /// cuzk's key takes the value when it is a positive integer; 0 means Curio's default.
    ToPositive(&'static str),
    /// No effect here, with the reason.
    Ignored(&'static str),
}

/// Curio's tables and keys.
const CURIO_KEYS: &[(&str, &[(&str, Mapping)])] = &[
    (
        "daemon",
        &[
            ("listen", Mapping::To("listen")),
            ("status_listen", Mapping::To("http_listen")),
        ],
    ),
    (
        "srs",
        &[
            ("param_cache", Mapping::To("engine.param_dir")),
            (
                "preload",
                Mapping::Ignored("parameters load on first use, or by PreloadSRS"),
            ),
        ],
    ),
    (
        "memory",
        &[
            (
                "total_budget",
                Mapping::Ignored(
                    "cuzk budgets partitions and parameters apart: set [engine] \
                     host_memory_budget_bytes and srs_budget_bytes",
                ),
            ),
            (
                "safety_margin",
                Mapping::Ignored("set [engine] host_memory_budget_bytes"),
            ),
            (
                "eviction_min_idle",
                Mapping::Ignored("idle parameters are evicted least recently used first"),
            ),
            (
                "pinned_budget",
                Mapping::Ignored("deprecated in Curio; set [engine] host_memory_budget_bytes"),
            ),
            (
                "working_memory_budget",
                Mapping::Ignored("deprecated in Curio; set [engine] host_memory_budget_bytes"),
            ),
        ],
    ),
    (
        "gpus",
        &[
            ("devices", Mapping::To("gpu_ordinals")),
            (
                "gpu_threads",
                Mapping::Ignored("the B query sums run on the GPU, not on a CPU pool"),
            ),
            (
                "gpu_workers_per_device",
                Mapping::To("engine.gpu_workers_per_device"),
            ),
        ],
    ),
    (
        "scheduler",
        &[
            (
                "max_batch_size",
                Mapping::Ignored("partitions of all jobs are scheduled one by one"),
            ),
            (
                "max_batch_wait_ms",
                Mapping::Ignored("partitions of all jobs are scheduled one by one"),
            ),
            (
                "sort_by_type",
                Mapping::Ignored("the order is priority, then oldest job first"),
            ),
        ],
    ),
    (
        "synthesis",
        &[
            (
                "threads",
                Mapping::Ignored("synthesis uses every core; set [engine] synthesis_workers"),
            ),
            (
                "partition_workers",
                Mapping::ToPositive("engine.synthesis_workers"),
            ),
        ],
    ),
    (
        "pipeline",
        &[
            (
                "enabled",
                Mapping::Ignored("cuzk always pipelines partitions"),
            ),
            (
                "synthesis_lookahead",
                Mapping::Ignored("set [engine] handoff_depth (in partitions)"),
            ),
            (
                "synthesis_concurrency",
                Mapping::Ignored("set [engine] synthesis_workers (in partitions)"),
            ),
            (
                "max_parallel_synthesis",
                Mapping::ToPositive("engine.synthesis_workers"),
            ),
            (
                "slot_size",
                Mapping::Ignored("set [engine] synthesis_workers and handoff_depth"),
            ),
            (
                "max_gpu_queue_depth",
                Mapping::ToPositive("engine.handoff_depth"),
            ),
        ],
    ),
    (
        "logging",
        &[
            (
                "level",
                Mapping::Ignored("set RUST_LOG, e.g. RUST_LOG=info"),
            ),
            ("format", Mapping::Ignored("logs are text on stderr")),
        ],
    ),
];

/// Moves the keys of Curio's tables in `table` to cuzk's keys and removes those tables.
/// Returns one note per Curio key without effect (or overridden by cuzk's own key).
///
/// # Errors
/// A Curio table that is not a table, or a key of the wrong type, named.
pub fn translate(table: &mut Table) -> Result<Vec<String>, String> {
    let mut notes = Vec::new();
    for (section, keys) in CURIO_KEYS {
        let Some(value) = table.remove(*section) else {
            continue;
        };
        let Value::Table(curio) = value else {
            return Err(format!("[{section}] must be a table (Curio's cuzk.toml)"));
        };
        for (key, value) in curio {
            let name = format!("[{section}] {key}");
            let Some((_, mapping)) = keys.iter().find(|(k, _)| *k == key) else {
                notes.push(format!("ignoring {name}: not a key of Curio's cuzk.toml"));
                continue;
            };
            let target = match mapping {
                Mapping::Ignored(why) => {
                    notes.push(format!("ignoring Curio's {name}: {why}"));
                    continue;
                }
                Mapping::To(target) => target,
                Mapping::ToPositive(target) => match value.as_integer() {
                    Some(n) if n > 0 => target,
                    Some(_) => {
                        notes.push(format!("ignoring Curio's {name} = {value}: the default"));
                        continue;
                    }
                    None => return Err(format!("{name}: expected an integer, found {value}")),
                },
            };
            if let Some(note) = insert(table, target, value, &name)? {
                notes.push(note);
            }
        }
    }
    Ok(notes)
}

/// Sets the dotted `target` key unless cuzk's file sets it already (then a note).
fn insert(
    table: &mut Table,
    target: &str,
    value: Value,
    name: &str,
) -> Result<Option<String>, String> {
    let (parent, leaf) = match target.split_once('.') {
        Some((parent, leaf)) => {
            let entry = table
                .entry(parent.to_string())
                .or_insert_with(|| Value::Table(Table::new()));
            let Value::Table(inner) = entry else {
                return Err(format!("[{parent}] must be a table"));
            };
            (inner, leaf)
        }
        None => (table, target),
    };
    if parent.contains_key(leaf) {
        return Ok(Some(format!(
            "ignoring Curio's {name}: cuzk's {target} is set in the same file"
        )));
    }
    parent.insert(leaf.to_string(), value);
    Ok(None)
}

#[cfg(test)]
mod tests {
    use crate::DaemonConfig;

    /// Every key of Curio's example `cuzk.toml` (values changed from its defaults so that
    /// each mapping shows).
    const CURIO_TOML: &str = r#"
[daemon]
listen = "unix:///run/curio/other.sock"
status_listen = "127.0.0.1:9900"

[srs]
param_cache = "/data/zk/params"
preload = ["porep-32g"]

[memory]
total_budget = "auto"
safety_margin = "5GiB"
eviction_min_idle = "5m"

[gpus]
devices = [0, 2]
gpu_threads = 32
gpu_workers_per_device = 3

[scheduler]
max_batch_size = 1
max_batch_wait_ms = 10000
sort_by_type = true

[synthesis]
threads = 0
partition_workers = 7

[pipeline]
enabled = true
synthesis_lookahead = 1
synthesis_concurrency = 1
max_parallel_synthesis = 0
slot_size = 0
max_gpu_queue_depth = 4

[logging]
level = "info"
"#;

    #[test]
    fn curio_cuzk_toml_maps_what_it_can_and_names_the_rest() {
        let (cfg, notes) = DaemonConfig::parse_noting(CURIO_TOML).expect("Curio's file parses");
        assert_eq!(cfg.listen, "unix:///run/curio/other.sock");
        assert_eq!(cfg.http_listen, "127.0.0.1:9900");
        assert_eq!(
            cfg.engine.param_dir,
            std::path::PathBuf::from("/data/zk/params")
        );
        assert_eq!(cfg.gpu_ordinals, vec![0, 2]);
        assert_eq!(cfg.engine.gpu_workers_per_device, 3);
        assert_eq!(cfg.engine.synthesis_workers, 7);
        assert_eq!(cfg.engine.handoff_depth, 4);
        for key in [
            "[srs] preload",
            "[memory] total_budget",
            "[memory] safety_margin",
            "[memory] eviction_min_idle",
            "[gpus] gpu_threads",
            "[scheduler] max_batch_size",
            "[scheduler] max_batch_wait_ms",
            "[scheduler] sort_by_type",
            "[synthesis] threads",
            "[pipeline] enabled",
            "[pipeline] synthesis_lookahead",
            "[pipeline] synthesis_concurrency",
            "[pipeline] max_parallel_synthesis",
            "[pipeline] slot_size",
            "[logging] level",
        ] {
            assert!(
                notes.iter().any(|n| n.contains(key)),
                "no note names {key}: {notes:#?}"
            );
        }
        assert_eq!(notes.len(), 15, "{notes:#?}");
    }

    #[test]
    fn cuzk_keys_win_over_curio_keys_with_a_note() {
        let text = "listen = \"127.0.0.1:1\"\n[daemon]\nlisten = \"127.0.0.1:2\"\n";
        let (cfg, notes) = DaemonConfig::parse_noting(text).expect("parses");
        assert_eq!(cfg.listen, "127.0.0.1:1");
        assert!(notes[0].contains("[daemon] listen"), "{notes:?}");
    }

    #[test]
    fn unknown_curio_keys_are_named_and_bad_types_refused() {
        let (_, notes) = DaemonConfig::parse_noting("[daemon]\nlisten_addr = \"x\"\n").unwrap();
        assert!(notes[0].contains("[daemon] listen_addr"), "{notes:?}");
        let err =
            DaemonConfig::parse_noting("[pipeline]\nmax_gpu_queue_depth = \"4\"\n").unwrap_err();
        assert!(err.contains("max_gpu_queue_depth"), "{err}");
        let err = DaemonConfig::parse_noting("[daemon]\nlisten = 5\n").unwrap_err();
        assert!(err.contains("listen"), "{err}");
        let err = DaemonConfig::parse_noting("daemon = 1\n").unwrap_err();
        assert!(err.contains("[daemon]"), "{err}");
    }
}
