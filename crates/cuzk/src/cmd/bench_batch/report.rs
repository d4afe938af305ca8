//! The report of one `cuzk bench batch` run: one JSON line on stdout, a table on stderr
//! (end to end per proof, per-partition synthesis and prove time, each device's busy
//! fraction, peak host memory, the figure compared against) and the timeline picture.

use std::time::Duration;

use super::timeline::{device_efficiency, render_svg, stage_means_ms};
use anyhow::Context;
use cuzk_engine::{Priority, TimelineEvent};

use super::workload::Workload;
use super::{Args, Sample};

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Peak resident memory of this process (VmHWM in /proc/self/status), bytes.
pub(crate) fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One benchmark run, as the report reads it.
pub(super) struct Run<'a> {
    pub(super) args: &'a Args,
    pub(super) priority: Priority,
    pub(super) workload: &'a Workload,
    pub(super) samples: &'a [Sample],
    pub(super) wall: Duration,
    pub(super) events: &'a [TimelineEvent],
    pub(super) from_us: u64,
    pub(super) to_us: u64,
    pub(super) peak_rss_bytes: Option<u64>,
    /// Real test sectors: completed proofs checked by filecoin-proofs, and accepted.
    pub(super) filecoin_checked: Option<super::FilecoinChecked>,
}

pub(super) fn report(run: &Run<'_>) -> anyhow::Result<()> {
    let (args, samples, events) = (run.args, run.samples, run.events);
    let mut lat: Vec<f64> = samples.iter().map(|s| s.latency.as_secs_f64()).collect();
    lat.sort_by(f64::total_cmp);
    let failed: Vec<&Sample> = samples.iter().filter(|s| !s.ok).collect();
    let effs = device_efficiency(events, run.from_us, run.to_us);
    let stages = stage_means_ms(events);
    let stage_ms = |name: &str| stages.iter().find(|(k, _)| k == name).map(|(_, v)| *v);
    let s_per_proof = run.wall.as_secs_f64() / samples.len().max(1) as f64;
    let label = run.workload.label();
    let mut line = serde_json::json!({
        "op": "batch",
        "kind": args.kind,
        "case": label,
        "circuit_id": run.workload.circuit_id(),
        "fake": run.workload.is_fake(),
        "priority": run.priority.as_str(),
        "partitions": run.workload.partitions(),
        "count": samples.len(),
        "concurrency": args.concurrency,
        "failed": failed.len(),
        "wall_s": run.wall.as_secs_f64(),
        "s_per_proof": s_per_proof,
        "latency_p50_s": percentile(&lat, 0.5),
        "latency_p95_s": percentile(&lat, 0.95),
        "latency_max_s": lat.last().copied().unwrap_or(0.0),
        "synthesis_ms_per_partition": stage_ms("synthesis"),
        "prove_ms_per_partition": stage_ms("compute"),
        "peak_rss_bytes": run.peak_rss_bytes,
        "threads": crate::cmd::threads(),
        "vs": run.workload.reference(),
        "stage_mean_ms": stages.iter().map(|(k, v)| (k.clone(), serde_json::json!(v))).collect::<serde_json::Map<_, _>>(),
        "devices": effs.iter().map(|d| serde_json::json!({
            "device": d.device,
            "busy_s": d.busy_s,
            "efficiency": d.efficiency(),
            "steady_efficiency": d.steady_efficiency(),
            "partitions": d.partitions,
            "steady_s_per_partition": d.steady_s_per_partition(),
        })).collect::<Vec<_>>(),
    });
    if let Workload::Synthetic { log_n, .. } = run.workload {
        line["log_n"] = serde_json::json!(log_n);
    }
    if run.workload.is_fake() {
        line["note"] = serde_json::json!(cuzk_filecoin::testgen::FAKE_NOTE);
    }
    if let Some(c) = run.filecoin_checked {
        line["filecoin_proofs_checked"] = serde_json::json!(c.completed);
        line["filecoin_proofs_verified"] = serde_json::json!(c.verified);
    }
    println!("{line}");

    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let busy = effs
        .iter()
        .map(|d| format!("{} {:.0}%", d.device, 100.0 * d.efficiency()))
        .collect::<Vec<_>>()
        .join(", ");
    let rss = run.peak_rss_bytes.map_or("-".to_string(), |b| {
        format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
    });
    eprintln!(
        "{:<28} {:>6} {:>6} {:>9} {:>9} {:>14} {:>14} {:>10}  busy",
        "case",
        "proofs",
        "failed",
        "s/proof",
        "p95 s",
        "synth ms/part",
        "prove ms/part",
        "peak RSS"
    );
    eprintln!(
        "{:<28} {:>6} {:>6} {:>9.3} {:>9.3} {:>14} {:>14} {:>10}  {}",
        label,
        samples.len(),
        failed.len(),
        s_per_proof,
        percentile(&lat, 0.95),
        ms(stage_ms("synthesis")),
        ms(stage_ms("compute")),
        rss,
        if busy.is_empty() { "-" } else { &busy }
    );
    eprintln!(
        "compared against: {}",
        run.workload
            .reference()
            .unwrap_or("no published figure for this case (the JSON line is the record)")
    );
    if run.workload.is_fake() {
        eprintln!("FAKE request: random data of the true shape; its proofs cannot verify and were not verified");
    }
    if let Some(c) = run.filecoin_checked {
        eprintln!(
            "filecoin-proofs' verifier accepted {} of {} completed proofs",
            c.verified, c.completed
        );
    }
    for (stage, ms) in &stages {
        eprintln!("  {stage:<24} mean {ms:>10.2} ms");
    }
    for d in &effs {
        eprintln!(
            "  device {:<8} busy {:.2} s: efficiency {:.1}% of the run, {:.1}% steady state; \
             {} partitions, {:.3} s/partition steady",
            d.device,
            d.busy_s,
            100.0 * d.efficiency(),
            100.0 * d.steady_efficiency(),
            d.partitions,
            d.steady_s_per_partition()
        );
    }
    if let Some(first) = failed.first() {
        eprintln!("first failure: {}", first.error);
    }
    if let Some(path) = &args.timeline {
        let title = format!(
            "cuzk bench batch: {} x {label}, concurrency {}, {:.3} s/proof",
            samples.len(),
            args.concurrency,
            s_per_proof
        );
        std::fs::write(path, render_svg(events, run.from_us, run.to_us, &title))
            .with_context(|| format!("writing {}", path.display()))?;
        eprintln!("timeline written to {}", path.display());
    }
    Ok(())
}
