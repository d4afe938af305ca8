//! One module per subcommand; each owns its `Args` and a `run` function.

pub mod bench_batch;
pub mod bench_gpu;
pub mod bench_prove;
pub mod bench_synth;
pub mod daemon;
pub mod devices;
pub mod gen_params;
pub mod gen_request;
pub mod gen_sector;
pub mod prove;
pub mod prove_filecoin;
pub mod status;

/// `RUST_LOG`-driven logs to stderr, `info` by default.
pub fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// A millisecond figure for a benchmark's JSON line: one decimal.
pub(crate) fn round1(v: f64) -> serde_json::Value {
    serde_json::Value::from((v * 10.0).round() / 10.0)
}

/// theirs ÷ ours for a benchmark's JSON line: three decimals; null when ours is 0.
pub(crate) fn ratio(theirs: f64, ours: f64) -> serde_json::Value {
    if ours > 0.0 {
        serde_json::Value::from((theirs / ours * 1000.0).round() / 1000.0)
    } else {
        serde_json::Value::Null
    }
}

/// Threads this process may run on, as the benchmarks report it.
pub(crate) fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
