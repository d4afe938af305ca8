//! [`Metrics`]: counters and latency histograms the engine updates as work flows, and the
//! Prometheus text exposition of them plus a [`Gauges`] snapshot of the live state (queue
//! depths, partitions per stage, memory, device busy time). Hand-written exposition format
//! 0.0.4; no metrics library.

use std::fmt::Write;
use std::time::Duration;

use parking_lot::Mutex;

use crate::timeline::Stage;
use crate::{Priority, ProofKindId, RetryCause};

/// Histogram bucket upper bounds in seconds (partition stages span ms to minutes).
const BUCKETS_S: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0,
];

/// Stages with a latency histogram.
const TIMED_STAGES: [Stage; 6] = [
    Stage::SrsLoad,
    Stage::Synthesis,
    Stage::Queue,
    Stage::TokenWait,
    Stage::Compute,
    Stage::Assembly,
];

#[derive(Clone, Default)]
struct Histogram {
    counts: [u64; BUCKETS_S.len()],
    count: u64,
    sum_s: f64,
}

impl Histogram {
    fn observe(&mut self, seconds: f64) {
        for (i, bound) in BUCKETS_S.iter().enumerate() {
            if seconds <= *bound {
                self.counts[i] += 1;
            }
        }
        self.count += 1;
        self.sum_s += seconds;
    }
}

/// How a job ended, for the per-kind counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Completed with a verified proof.
    Completed,
    /// Failed.
    Failed,
    /// Cancelled.
    Cancelled,
}

/// What refused a submit: an admission limit, or the daemon not being ready.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// `max_queued_jobs`.
    MaxQueuedJobs,
    /// `max_queued_bytes`.
    MaxQueuedBytes,
    /// Not ready (draining, no device, no or broken parameters): the server's gate
    /// answered the submit with HTTP 503 before the engine saw it.
    NotReady,
}

impl Limit {
    /// Every limit.
    pub const ALL: [Limit; 3] = [Limit::MaxQueuedJobs, Limit::MaxQueuedBytes, Limit::NotReady];

    /// The config key's name, also the metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::MaxQueuedJobs => "max_queued_jobs",
            Limit::MaxQueuedBytes => "max_queued_bytes",
            Limit::NotReady => "not_ready",
        }
    }
}

#[derive(Default)]
struct Inner {
    // [kind][ending]
    endings: [[u64; 3]; ProofKindId::ALL.len()],
    refused: [u64; Limit::ALL.len()],
    stages: [Histogram; TIMED_STAGES.len()],
    job_total: [Histogram; ProofKindId::ALL.len()],
    // [cause], see faults.rs
    retries: [u64; RetryCause::ALL.len()],
}

/// Counters and histograms, updated by the pipeline.
#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

/// The live state at render time.
#[derive(Clone, Debug, Default)]
pub struct Gauges {
    /// Partitions waiting for synthesis, per priority.
    pub queued_by_priority: Vec<(Priority, u64)>,
    /// Partitions per pipeline stage ("queued", "synthesizing", "ready", "proving", "assembling").
    pub partitions_by_stage: Vec<(&'static str, u64)>,
    /// Active (unfinished) jobs.
    pub active_jobs: u64,
    /// Request payload bytes of active jobs.
    pub queued_payload_bytes: u64,
    /// Finished results retained.
    pub retained_results: u64,
    /// Host bytes reserved by partitions in flight.
    pub memory_reserved_bytes: u64,
    /// The host memory budget.
    pub memory_limit_bytes: u64,
    /// Host bytes of resident SRSs.
    pub srs_resident_bytes: u64,
    /// The host-memory ledger.
    pub memory_ledger: crate::state::MemoryLedger,
    /// Per GPU: name, VRAM budget and VRAM held, bytes.
    pub device_vram: Vec<(String, u64, u64)>,
    /// Per device: name and seconds spent under its compute token.
    pub device_busy_s: Vec<(String, f64)>,
    /// Seconds since the engine started.
    pub uptime_s: f64,
    /// Per device: name, whether it is in service, faults since start.
    pub device_health: Vec<(String, bool, u64)>,
}

fn kind_index(kind: ProofKindId) -> usize {
    ProofKindId::ALL
        .iter()
        .position(|k| *k == kind)
        .unwrap_or(0)
}

impl Metrics {
    /// Empty metrics.
    pub fn new() -> Self {
        Metrics::default()
    }

    /// Counts a finished job and its total latency.
    pub fn job_ended(&self, kind: ProofKindId, ending: Ending, total: Duration) {
        let mut inner = self.inner.lock();
        let k = kind_index(kind);
        inner.endings[k][ending as usize] += 1;
        if ending == Ending::Completed {
            inner.job_total[k].observe(total.as_secs_f64());
        }
    }

    /// Counts a submit refused by admission control.
    pub fn submit_refused(&self, limit: Limit) {
        self.inner.lock().refused[limit as usize] += 1;
    }

    /// Observes one stage's latency.
    pub fn stage(&self, stage: Stage, elapsed: Duration) {
        if let Some(i) = TIMED_STAGES.iter().position(|s| *s == stage) {
            self.inner.lock().stages[i].observe(elapsed.as_secs_f64());
        }
    }

    /// Counts a partition sent to another device (or the CPU) after a fault.
    pub fn partition_retried(&self, cause: RetryCause) {
        if let Some(i) = RetryCause::ALL.iter().position(|c| *c == cause) {
            self.inner.lock().retries[i] += 1;
        }
    }

    /// Jobs of any kind that ended this way.
    pub fn total(&self, ending: Ending) -> u64 {
        self.inner
            .lock()
            .endings
            .iter()
            .map(|e| e[ending as usize])
            .sum()
    }

    /// The Prometheus text exposition of these metrics and `gauges`.
    pub fn render(&self, gauges: &Gauges) -> String {
        let inner = self.inner.lock().clone_inner();
        let mut out = String::new();
        gauge_header(
            &mut out,
            "cuzk_queue_depth",
            "partitions waiting for synthesis, by priority",
        );
        for (priority, n) in &gauges.queued_by_priority {
            let _ = writeln!(out, "cuzk_queue_depth{{priority=\"{priority}\"}} {n}");
        }
        gauge_header(
            &mut out,
            "cuzk_partitions",
            "partitions in each pipeline stage",
        );
        for (stage, n) in &gauges.partitions_by_stage {
            let _ = writeln!(out, "cuzk_partitions{{stage=\"{stage}\"}} {n}");
        }
        scalar(
            &mut out,
            "cuzk_active_jobs",
            "jobs accepted and not finished",
            gauges.active_jobs as f64,
        );
        scalar(
            &mut out,
            "cuzk_queued_payload_bytes",
            "request payload bytes of jobs accepted and not finished",
            gauges.queued_payload_bytes as f64,
        );
        scalar(
            &mut out,
            "cuzk_retained_results",
            "finished results kept for AwaitProof and re-submits",
            gauges.retained_results as f64,
        );
        let _ = writeln!(
            out,
            "# HELP cuzk_submits_refused_total submits refused by an admission limit or while not ready"
        );
        let _ = writeln!(out, "# TYPE cuzk_submits_refused_total counter");
        for limit in Limit::ALL {
            let _ = writeln!(
                out,
                "cuzk_submits_refused_total{{limit=\"{}\"}} {}",
                limit.as_str(),
                inner.refused[limit as usize]
            );
        }
        scalar(
            &mut out,
            "cuzk_memory_reserved_bytes",
            "host bytes reserved by partitions in flight",
            gauges.memory_reserved_bytes as f64,
        );
        scalar(
            &mut out,
            "cuzk_memory_limit_bytes",
            "host memory budget",
            gauges.memory_limit_bytes as f64,
        );
        scalar(
            &mut out,
            "cuzk_srs_resident_bytes",
            "host bytes of resident SRSs",
            gauges.srs_resident_bytes as f64,
        );
        let l = &gauges.memory_ledger;
        scalar(
            &mut out,
            "cuzk_host_memory_budget_bytes",
            "the one host-memory budget the ledger stays under",
            l.budget_bytes as f64,
        );
        let _ = writeln!(
            out,
            "# HELP cuzk_host_memory_bytes host memory held, by ledger item"
        );
        let _ = writeln!(out, "# TYPE cuzk_host_memory_bytes gauge");
        for (item, bytes) in [
            ("srs", l.srs_bytes),
            ("recorded_shapes", l.recorded_bytes),
            ("pinned_staging", l.pinned_bytes),
            ("device_compute", l.device_compute_bytes),
            ("partitions", l.partitions_bytes),
        ] {
            let _ = writeln!(out, "cuzk_host_memory_bytes{{item=\"{item}\"}} {bytes}");
        }
        for (name, help, pick) in [
            (
                "cuzk_vram_budget_bytes",
                "device memory the backend may hold",
                0,
            ),
            ("cuzk_vram_used_bytes", "device memory the backend holds", 1),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} gauge");
            for (device, budget, used) in &gauges.device_vram {
                let v = if pick == 0 { budget } else { used };
                let _ = writeln!(out, "{name}{{device=\"{device}\"}} {v}");
            }
        }
        scalar(
            &mut out,
            "cuzk_uptime_seconds",
            "seconds since the engine started",
            gauges.uptime_s,
        );
        let _ = writeln!(
            out,
            "# HELP cuzk_device_busy_seconds_total time under the device's compute token"
        );
        let _ = writeln!(out, "# TYPE cuzk_device_busy_seconds_total counter");
        for (device, s) in &gauges.device_busy_s {
            let _ = writeln!(
                out,
                "cuzk_device_busy_seconds_total{{device=\"{device}\"}} {s}"
            );
        }
        render_faults(&mut out, gauges, &inner.retries);
        for (name, ending) in [
            ("cuzk_proofs_completed_total", Ending::Completed),
            ("cuzk_proofs_failed_total", Ending::Failed),
            ("cuzk_proofs_cancelled_total", Ending::Cancelled),
        ] {
            let _ = writeln!(out, "# HELP {name} jobs that ended {ending:?}, by kind");
            let _ = writeln!(out, "# TYPE {name} counter");
            for (k, kind) in ProofKindId::ALL.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{name}{{kind=\"{kind}\"}} {}",
                    inner.endings[k][ending as usize]
                );
            }
        }
        let _ = writeln!(out, "# HELP cuzk_stage_seconds per-partition stage latency");
        let _ = writeln!(out, "# TYPE cuzk_stage_seconds histogram");
        for (stage, hist) in TIMED_STAGES.iter().zip(&inner.stages) {
            histogram(
                &mut out,
                "cuzk_stage_seconds",
                &format!("stage=\"{}\"", stage.as_str()),
                hist,
            );
        }
        let _ = writeln!(
            out,
            "# HELP cuzk_job_seconds submission-to-completion latency of completed jobs"
        );
        let _ = writeln!(out, "# TYPE cuzk_job_seconds histogram");
        for (kind, hist) in ProofKindId::ALL.iter().zip(&inner.job_total) {
            histogram(
                &mut out,
                "cuzk_job_seconds",
                &format!("kind=\"{kind}\""),
                hist,
            );
        }
        out
    }
}

impl Inner {
    fn clone_inner(&self) -> Inner {
        Inner {
            endings: self.endings,
            refused: self.refused,
            stages: self.stages.clone(),
            job_total: self.job_total.clone(),
            retries: self.retries,
        }
    }
}

/// Device health and partition retries (faults.rs).
fn render_faults(out: &mut String, gauges: &Gauges, retries: &[u64; RetryCause::ALL.len()]) {
    gauge_header(
        out,
        "cuzk_device_in_service",
        "1 while the device takes partitions, 0 once faults took it out of service",
    );
    for (device, in_service, _) in &gauges.device_health {
        let _ = writeln!(
            out,
            "cuzk_device_in_service{{device=\"{device}\"}} {}",
            u8::from(*in_service)
        );
    }
    let _ = writeln!(
        out,
        "# HELP cuzk_device_faults_total backend errors, panics, hung calls and unverified proofs, by device"
    );
    let _ = writeln!(out, "# TYPE cuzk_device_faults_total counter");
    for (device, _, faults) in &gauges.device_health {
        let _ = writeln!(
            out,
            "cuzk_device_faults_total{{device=\"{device}\"}} {faults}"
        );
    }
    let _ = writeln!(
        out,
        "# HELP cuzk_partition_retries_total partitions sent to another device or the CPU, by cause"
    );
    let _ = writeln!(out, "# TYPE cuzk_partition_retries_total counter");
    for (cause, n) in RetryCause::ALL.iter().zip(retries) {
        let _ = writeln!(
            out,
            "cuzk_partition_retries_total{{cause=\"{}\"}} {n}",
            cause.as_str()
        );
    }
}

fn gauge_header(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

fn scalar(out: &mut String, name: &str, help: &str, value: f64) {
    gauge_header(out, name, help);
    let _ = writeln!(out, "{name} {value}");
}

fn histogram(out: &mut String, name: &str, labels: &str, hist: &Histogram) {
    for (bound, count) in BUCKETS_S.iter().zip(hist.counts) {
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{bound}\"}} {count}");
    }
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", hist.count);
    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", hist.sum_s);
    let _ = writeln!(out, "{name}_count{{{labels}}} {}", hist.count);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let metrics = Metrics::new();
        metrics.stage(Stage::Synthesis, Duration::from_millis(3));
        metrics.stage(Stage::Synthesis, Duration::from_millis(300));
        let text = metrics.render(&Gauges::default());
        assert!(
            text.contains("cuzk_stage_seconds_bucket{stage=\"synthesis\",le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cuzk_stage_seconds_bucket{stage=\"synthesis\",le=\"0.5\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("cuzk_stage_seconds_count{stage=\"synthesis\"} 2"),
            "{text}"
        );
    }

    #[test]
    fn endings_are_counted_per_kind() {
        let metrics = Metrics::new();
        metrics.job_ended(
            ProofKindId::Synthetic,
            Ending::Completed,
            Duration::from_secs(1),
        );
        metrics.job_ended(ProofKindId::Synthetic, Ending::Failed, Duration::ZERO);
        let text = metrics.render(&Gauges::default());
        assert!(
            text.contains("cuzk_proofs_completed_total{kind=\"synthetic\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cuzk_proofs_failed_total{kind=\"synthetic\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cuzk_proofs_failed_total{kind=\"winning_post\"} 0"),
            "{text}"
        );
        assert_eq!(metrics.total(Ending::Completed), 1);
    }

    #[test]
    fn refused_submits_are_counted_per_limit() {
        let metrics = Metrics::new();
        metrics.submit_refused(Limit::MaxQueuedBytes);
        let text = metrics.render(&Gauges::default());
        assert!(
            text.contains("cuzk_submits_refused_total{limit=\"max_queued_bytes\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("cuzk_submits_refused_total{limit=\"max_queued_jobs\"} 0"),
            "{text}"
        );
    }
}
