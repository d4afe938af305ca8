//! One module per subcommand; each owns its `Args` and a `run` function.

pub mod bench_batch;
pub mod bench_gpu;
pub mod bench_prove;
pub mod bench_synth;
pub mod daemon;
pub mod devices;
pub mod gen_params;
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
