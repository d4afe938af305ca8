//! `cuzk status`: asks a running daemon for `GetStatus` and prints it as a short table
//! (or as JSON with `--json`).

use anyhow::Context;
use cuzk_server::pb;
use cuzk_server::ListenAddr;

/// Flags of this subcommand.
#[derive(clap::Args)]
pub struct Args {
    /// The daemon's gRPC address: unix:///path.sock or HOST:PORT.
    #[arg(long, default_value = cuzk_server::config::DEFAULT_LISTEN)]
    pub connect: String,
    /// File holding the daemon's bearer token (its auth_token_file).
    #[arg(long)]
    pub token_file: Option<std::path::PathBuf>,
    /// Print the raw status as JSON-like debug output instead of the table.
    #[arg(long)]
    pub raw: bool,
}

/// Runs the subcommand.
pub fn run(args: Args) -> anyhow::Result<()> {
    let addr = ListenAddr::parse(&args.connect)?;
    let token = match &args.token_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?
                .trim()
                .to_string(),
        ),
        None => None,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let status = runtime.block_on(async {
        let mut client = cuzk_server::connect(&addr)
            .await
            .map_err(|e| unreachable(&addr, e))?;
        let request = cuzk_server::auth::request(pb::GetStatusRequest {}, token.as_deref())?;
        let status = client.get_status(request).await.context("GetStatus")?;
        anyhow::Ok(status.into_inner())
    })?;
    if args.raw {
        println!("{status:#?}");
        return Ok(());
    }
    print!("{}", render(&status));
    Ok(())
}

/// Why no daemon answered at `addr`, with the OS's reason (the innermost cause: tonic's
/// outer ones say only "transport error") and what to do about it.
fn unreachable(
    addr: &ListenAddr,
    err: impl std::error::Error + Send + Sync + 'static,
) -> anyhow::Error {
    let err = anyhow::Error::from(err);
    anyhow::anyhow!(
        "connecting to {addr}: {}; is the daemon running? start it with `cuzk daemon` \
         (or pass --connect ADDR)",
        err.root_cause()
    )
}

/// The status as a human-readable table.
pub fn render(s: &pb::GetStatusResponse) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "uptime {} s, accepting {}, active jobs {}, completed {}, failed {}, cancelled {}",
        s.uptime_seconds,
        s.accepting,
        s.active_jobs,
        s.total_proofs_completed,
        s.total_proofs_failed,
        s.total_proofs_cancelled
    );
    if s.ready {
        let _ = writeln!(out, "ready");
    } else {
        let _ = writeln!(out, "not ready: {}", s.not_ready_reason);
    }
    let _ = writeln!(
        out,
        "memory reserved {:.1} MiB of {:.1} MiB",
        s.pinned_memory_bytes as f64 / 1048576.0,
        s.pinned_memory_limit_bytes as f64 / 1048576.0
    );
    let _ = writeln!(out, "devices:");
    for d in &s.devices {
        let _ = writeln!(
            out,
            "  {:<8} {:<16} workers {} busy {:.1} s faults {}{}{}",
            d.name,
            d.hardware,
            d.workers,
            d.busy_ms as f64 / 1000.0,
            d.faults_total,
            if d.fallback { " (fallback)" } else { "" },
            if d.current_job_id.is_empty() {
                String::new()
            } else {
                format!(" on {}", d.current_job_id)
            }
        );
        if d.is_gpu {
            let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
            let _ = writeln!(
                out,
                "    vram {:.1} of {:.1} GiB{}",
                gib(d.vram_used_bytes),
                gib(d.vram_budget_bytes),
                match d.proving_mode.as_str() {
                    "" => String::new(),
                    m => format!(", proving mode: {m}"),
                }
            );
        }
        if !d.in_service {
            let _ = writeln!(out, "    OUT OF SERVICE: {}", d.out_of_service_reason);
        }
        if !d.last_fault.is_empty() {
            let _ = writeln!(out, "    last fault: {}", d.last_fault);
        }
    }
    let _ = writeln!(out, "partitions:");
    for p in &s.partitions {
        let _ = writeln!(out, "  {:<14} {}", p.stage, p.count);
    }
    let _ = writeln!(out, "queues:");
    for q in &s.queues {
        let _ = writeln!(
            out,
            "  {:<24} pending {} in progress {}",
            q.proof_kind, q.pending, q.in_progress
        );
    }
    let _ = writeln!(out, "srs:");
    for e in &s.loaded_srs {
        let tier = pb::srs_status::Tier::try_from(e.tier)
            .map(|t| t.as_str_name())
            .unwrap_or("?");
        let _ = writeln!(
            out,
            "  {:<20} {:<5} {:>10.1} MiB refs {} {}",
            e.circuit_id,
            tier,
            e.size_bytes as f64 / 1048576.0,
            e.ref_count,
            e.path
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_shows_its_vram_and_proving_mode() {
        let gpu = pb::DeviceStatus {
            name: "gpu:0".into(),
            hardware: "NVIDIA H100".into(),
            is_gpu: true,
            workers: 2,
            in_service: true,
            vram_budget_bytes: 24 << 30,
            vram_used_bytes: 22 << 30,
            proving_mode: "srs streamed, 1 lean worker (16777216-point chunks)".into(),
            ..pb::DeviceStatus::default()
        };
        let cpu = pb::DeviceStatus {
            name: "cpu".into(),
            in_service: true,
            ..pb::DeviceStatus::default()
        };
        let fresh = pb::DeviceStatus {
            proving_mode: String::new(),
            ..gpu.clone()
        };
        let status = |d: Vec<pb::DeviceStatus>| pb::GetStatusResponse {
            devices: d,
            ..pb::GetStatusResponse::default()
        };
        let out = render(&status(vec![gpu, cpu]));
        assert!(
            out.contains(
                "    vram 22.0 of 24.0 GiB, proving mode: srs streamed, 1 lean worker \
                 (16777216-point chunks)\n"
            ),
            "{out}"
        );
        assert_eq!(out.matches("vram").count(), 1, "the cpu has none: {out}");
        // Before its first shape a GPU has no mode yet.
        let out = render(&status(vec![fresh]));
        assert!(out.contains("    vram 22.0 of 24.0 GiB\n"), "{out}");
    }
}
