//! `--critical-request`: CRITICAL requests sent beside the main load, the way a miner's
//! WinningPoSt arrives while its GPUs prove PoRep (#29). Once the main load's first
//! partition is proving, one request at a time: each is submitted at CRITICAL priority
//! when the previous one has completed and `--critical-gap-ms` has passed. The report is
//! one JSON line of its own (`"op":"batch_critical"`): each latency (submit to proof), the
//! device whose prove worker proved it, whether the main load was still running when it
//! completed, how much of it ran beside the main load's kernels, and the p50 and max. The
//! main load's report leaves these jobs out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use cuzk_engine::{AwaitOutcome, Engine, JobSpec, JobState, Priority, Stage, TimelineEvent};

use super::report::percentile;
use super::workload::Workload;

/// How long to wait for the main load's first partition to reach a device.
const START_LIMIT: Duration = Duration::from_secs(3600);

/// One CRITICAL request as the client saw it.
pub(super) struct CriticalSample {
    pub(super) job_id: String,
    latency: Duration,
    ok: bool,
    error: String,
    /// Time under the compute token (the engine's figure).
    compute: Duration,
    /// Whether the main load was still running when it completed.
    beside_load: bool,
}

/// Sends `count` CRITICAL requests of `workload`, one after another with `gap` between,
/// starting once a partition of the main load is proving; `main_done` says when the main
/// load has finished.
pub(super) async fn run(
    engine: Arc<Engine>,
    workload: Workload,
    count: usize,
    gap: Duration,
    main_done: Arc<AtomicBool>,
) -> anyhow::Result<Vec<CriticalSample>> {
    let waited = Instant::now();
    while !proving(&engine) {
        if main_done.load(Ordering::Relaxed) || waited.elapsed() > START_LIMIT {
            bail!("the main load never had a partition proving: nothing to measure beside");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let mut samples = Vec::with_capacity(count);
    for i in 0..count {
        if i > 0 {
            tokio::time::sleep(gap).await;
        }
        let (kind, request) = workload.job(i);
        let job = JobSpec {
            request_id: format!("critical-{i}"),
            kind,
            priority: Some(Priority::Critical),
            request,
        };
        let t = Instant::now();
        let submit = engine.clone();
        let out = tokio::task::spawn_blocking(move || submit.submit(job)).await??;
        let AwaitOutcome::Finished(o) = engine.await_job(&out.job_id, None).await? else {
            bail!("await without a timeout timed out");
        };
        samples.push(CriticalSample {
            job_id: out.job_id,
            latency: t.elapsed(),
            ok: o.state == JobState::Completed,
            error: o.error.clone(),
            compute: o.timings.compute,
            beside_load: !main_done.load(Ordering::Relaxed),
        });
    }
    Ok(samples)
}

/// Whether a partition is on a device now.
fn proving(engine: &Engine) -> bool {
    engine
        .status()
        .partitions_by_stage
        .iter()
        .any(|(stage, n)| *stage == "proving" && *n > 0)
}

/// Prints the CRITICAL requests' JSON line (stdout) and a line on stderr; `events` is the
/// run's timeline, which names the device of each prove.
pub(super) fn report(
    workload: &Workload,
    gap: Duration,
    samples: &[CriticalSample],
    events: &[TimelineEvent],
) {
    let device_of = |job_id: &str| {
        events
            .iter()
            .filter(|e| e.job_id == job_id && e.stage == Stage::Compute)
            .map(|e| e.device.clone())
            .next_back()
            .unwrap_or_default()
    };
    let critical_ids: Vec<&str> = samples.iter().map(|s| s.job_id.as_str()).collect();
    let main = main_compute(events, &critical_ids);
    let beside: Vec<f64> = samples
        .iter()
        .map(|s| beside_compute(events, &s.job_id, &main))
        .collect();
    let mostly_beside = beside.iter().filter(|f| **f >= 0.5).count();
    let beside_load = samples.iter().filter(|s| s.beside_load).count();
    // Each request's stages, summed over its events: where its latency went.
    let stages: Vec<Vec<(String, f64)>> = samples
        .iter()
        .map(|s| stages_ms(events, &s.job_id))
        .collect();
    let stages_json = stages
        .iter()
        .map(|st| {
            st.iter()
                .map(|(name, ms)| (name.clone(), serde_json::json!((ms * 10.0).round() / 10.0)))
                .collect::<serde_json::Map<_, _>>()
        })
        .collect::<Vec<_>>();
    let mut sorted: Vec<f64> = samples.iter().map(|s| s.latency.as_secs_f64()).collect();
    sorted.sort_by(f64::total_cmp);
    let failed: Vec<&str> = samples
        .iter()
        .filter(|s| !s.ok)
        .map(|s| s.error.as_str())
        .collect();
    let line = serde_json::json!({
        "op": "batch_critical",
        "case": workload.label(),
        "circuit_id": workload.circuit_id(),
        "fake": workload.is_fake(),
        "count": samples.len(),
        "gap_ms": gap.as_millis() as u64,
        "failed": failed.len(),
        "errors": failed,
        "critical_p50_s": percentile(&sorted, 0.5),
        "critical_max_s": sorted.last().copied().unwrap_or(0.0),
        "latencies_s": samples.iter().map(|s| s.latency.as_secs_f64()).collect::<Vec<_>>(),
        "compute_ms": samples.iter().map(|s| s.compute.as_secs_f64() * 1e3).collect::<Vec<_>>(),
        "devices": samples.iter().map(|s| device_of(&s.job_id)).collect::<Vec<_>>(),
        "stages_ms": stages_json,
        "beside_load": beside_load,
        "beside_compute": beside.iter().map(|f| (f * 100.0).round() / 100.0).collect::<Vec<_>>(),
        "mostly_beside_compute": mostly_beside,
    });
    println!("{line}");
    eprintln!(
        "critical {}: {} requests, p50 {:.3} s, max {:.3} s, {} completed beside the main load, \
         {mostly_beside} with the main load's kernels running for at least half their span",
        workload.label(),
        samples.len(),
        percentile(&sorted, 0.5),
        sorted.last().copied().unwrap_or(0.0),
        beside_load
    );
    for ((s, st), b) in samples.iter().zip(&stages).zip(&beside) {
        let parts: Vec<String> = st
            .iter()
            .filter(|(_, ms)| *ms >= 0.05)
            .map(|(name, ms)| format!("{name} {ms:.1}"))
            .collect();
        eprintln!(
            "  {:.3} s ({:.0}% beside the main load's kernels): {}",
            s.latency.as_secs_f64(),
            b * 100.0,
            parts.join(", ")
        );
    }
}

/// The main load's compute events: those of every job not in `critical`.
fn main_compute(events: &[TimelineEvent], critical: &[&str]) -> Vec<TimelineEvent> {
    events
        .iter()
        .filter(|e| e.stage == Stage::Compute && !critical.contains(&e.job_id.as_str()))
        .cloned()
        .collect()
}

/// The share of `job_id`'s span (its first event's start to its last event's end) during
/// which a partition of the main load ([`main_compute`]) was under a device's compute
/// token; the largest share over the main load's devices. 0 for a request proved while
/// the main load only synthesized, 1 for one proved wholly beside its kernels: what a
/// latency "under load" was under.
fn beside_compute(events: &[TimelineEvent], job_id: &str, main: &[TimelineEvent]) -> f64 {
    let own = || events.iter().filter(|e| e.job_id == job_id);
    let (Some(from), Some(to)) = (
        own().map(|e| e.start_us).min(),
        own().map(|e| e.end_us).max(),
    ) else {
        return 0.0;
    };
    super::timeline::device_efficiency(main, from, to)
        .iter()
        .map(|d| d.efficiency())
        .fold(0.0, f64::max)
}

/// The summed ms of each stage of `job_id`'s events.
fn stages_ms(events: &[TimelineEvent], job_id: &str) -> Vec<(String, f64)> {
    super::timeline::stage_sums_ms(events.iter().filter(|e| e.job_id == job_id))
}

#[cfg(test)]
mod tests {
    use super::super::timeline::test_event as ev;
    use super::*;

    #[test]
    fn beside_compute_is_the_main_loads_kernels_over_the_requests_span() {
        let events = [
            // The critical request: synthesis then compute on the lane, 1000..2000.
            ev("crit-0", "", Stage::Synthesis, 1000, 1200),
            ev("crit-0", "gpu:0/critical", Stage::Compute, 1200, 2000),
            // Another critical request's compute does not count as load.
            ev("crit-1", "gpu:0/critical", Stage::Compute, 1000, 2000),
            // The main load: synthesis does not count; two overlapping computes do, once.
            ev("main", "", Stage::Synthesis, 0, 3000),
            ev("main", "gpu:0", Stage::Compute, 500, 1300),
            ev("main", "gpu:0", Stage::Compute, 1100, 1500),
            ev("main", "gpu:0", Stage::Compute, 1900, 2500),
        ];
        let critical = ["crit-0", "crit-1"];
        // gpu:0 computes over 1000..1500 and 1900..2000 of the span: 600 of 1000 us.
        let main = main_compute(&events, &critical);
        let f = beside_compute(&events, "crit-0", &main);
        assert!((f - 0.6).abs() < 1e-9, "{f}");
        // Before the main load's first kernel: nothing beside.
        let early = [
            ev("crit-0", "gpu:0/critical", Stage::Compute, 0, 400),
            ev("main", "gpu:0", Stage::Compute, 500, 1300),
        ];
        let early_main = main_compute(&early, &critical);
        assert_eq!(beside_compute(&early, "crit-0", &early_main), 0.0);
        // A request with no events at all.
        assert_eq!(beside_compute(&events, "crit-9", &main), 0.0);
    }
}
