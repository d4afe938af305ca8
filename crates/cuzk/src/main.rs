//! The `cuzk` binary: parses flags and hands each subcommand to its module under `cmd/`.
//! Subcommands own their flags (`cmd::*::Args`); nothing here does work.
#![forbid(unsafe_code)]

mod cmd;

use clap::{Parser, Subcommand};

/// cuzk: a Groth16 proving engine for Filecoin (BLS12-381).
#[derive(Parser)]
#[command(name = "cuzk", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Prove one circuit in-process (no daemon) and print a stage table.
    Prove(cmd::prove::Args),
    /// Generate test inputs: parameters, sectors.
    #[command(subcommand)]
    Gen(GenCommand),
    /// Benchmarks; each case prints one JSON line.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Run the proving daemon.
    Daemon(cmd::daemon::Args),
    /// Ask a running daemon for its status.
    Status(cmd::status::Args),
}

#[derive(Subcommand)]
enum GenCommand {
    /// Write a bellperson-format parameters file with a local (test-only) toxic waste.
    Params(cmd::gen_params::Args),
    /// Seal a small test sector and write the request payloads a client would send.
    Sector(cmd::gen_sector::Args),
    /// Write a FAKE request of the true shape (random data: its proofs cannot verify).
    Request(cmd::gen_request::Args),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Whole-partition prove: cuzk backends against bellperson / SupraSeal.
    Prove(cmd::bench_prove::Args),
    /// GPU multi-scalar multiplication.
    Msm(cmd::bench_gpu::MsmArgs),
    /// GPU number-theoretic transform over Fr.
    Ntt(cmd::bench_gpu::NttArgs),
    /// Whole GPU proves: timing, two workers, checks against the CPU, faults.
    #[command(subcommand)]
    Gpu(cmd::bench_gpu::GpuCommand),
    /// Many proofs through the engine: throughput, latency, GPU efficiency, timeline.
    Batch(cmd::bench_batch::Args),
    /// Circuit synthesis: plain against the recorded constraint system.
    Synth(cmd::bench_synth::Args),
}

fn main() {
    cmd::init_tracing();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Prove(args) => cmd::prove::run(args),
        Command::Gen(GenCommand::Params(args)) => cmd::gen_params::run(args),
        Command::Gen(GenCommand::Sector(args)) => cmd::gen_sector::run(args),
        Command::Gen(GenCommand::Request(args)) => cmd::gen_request::run(args),
        Command::Bench(BenchCommand::Prove(args)) => cmd::bench_prove::run(args),
        Command::Bench(BenchCommand::Msm(args)) => cmd::bench_gpu::run_msm(args),
        Command::Bench(BenchCommand::Ntt(args)) => cmd::bench_gpu::run_ntt(args),
        Command::Bench(BenchCommand::Gpu(cmd)) => cmd::bench_gpu::run_gpu(cmd),
        Command::Bench(BenchCommand::Batch(args)) => cmd::bench_batch::run(args),
        Command::Bench(BenchCommand::Synth(args)) => cmd::bench_synth::run(args),
        Command::Daemon(args) => cmd::daemon::run(args),
        Command::Status(args) => cmd::status::run(args),
    };
    if let Err(err) = result {
        eprintln!("error: {}", cmd::error_chain(&err));
        std::process::exit(1);
    }
}
