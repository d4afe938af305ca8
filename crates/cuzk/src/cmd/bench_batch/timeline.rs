//! Reading a timeline: per-device busy time and efficiency (time under the compute token
//! ÷ wall time), mean stage times, and an SVG picture with one lane per worker (synthesis
//! workers, then each device's prove workers, then assembly), for `cuzk bench batch`'s
//! report: pure functions over the engine's [`TimelineEvent`]s, no I/O. The engine only
//! records the timeline; reading it is the bench command's.

use std::collections::BTreeMap;
use std::fmt::Write;

use cuzk_engine::{Stage, TimelineEvent};

/// Busy time of one device over a window.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceEfficiency {
    /// Device name.
    pub device: String,
    /// Union of its compute intervals inside the window, seconds.
    pub busy_s: f64,
    /// The window, seconds.
    pub window_s: f64,
    /// From its first compute start to its last compute end, seconds (steady state).
    pub steady_window_s: f64,
    /// Compute intervals (partitions proved) inside the window.
    pub partitions: usize,
}

impl DeviceEfficiency {
    /// busy ÷ window.
    pub fn efficiency(&self) -> f64 {
        if self.window_s > 0.0 {
            self.busy_s / self.window_s
        } else {
            0.0
        }
    }

    /// Steady window ÷ partitions: the device's throughput in seconds per partition.
    pub fn steady_s_per_partition(&self) -> f64 {
        if self.partitions > 0 {
            self.steady_window_s / self.partitions as f64
        } else {
            0.0
        }
    }

    /// busy ÷ steady window.
    pub fn steady_efficiency(&self) -> f64 {
        if self.steady_window_s > 0.0 {
            self.busy_s / self.steady_window_s
        } else {
            0.0
        }
    }
}

/// Per device, the union of `compute` intervals clipped to `[from_us, to_us]`.
pub fn device_efficiency(
    events: &[TimelineEvent],
    from_us: u64,
    to_us: u64,
) -> Vec<DeviceEfficiency> {
    let mut by_device: BTreeMap<&str, Vec<(u64, u64)>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.stage == Stage::Compute) {
        let (s, t) = (e.start_us.max(from_us), e.end_us.min(to_us));
        if t > s {
            by_device.entry(e.device.as_str()).or_default().push((s, t));
        }
    }
    by_device
        .into_iter()
        .map(|(device, mut spans)| {
            spans.sort_unstable();
            let (mut busy, mut cur) = (0u64, None::<(u64, u64)>);
            for (s, t) in &spans {
                cur = match cur {
                    Some((cs, ct)) if *s <= ct => Some((cs, ct.max(*t))),
                    Some((cs, ct)) => {
                        busy += ct - cs;
                        Some((*s, *t))
                    }
                    None => Some((*s, *t)),
                };
            }
            if let Some((cs, ct)) = cur {
                busy += ct - cs;
            }
            let first = spans.first().map(|s| s.0).unwrap_or(0);
            let last = spans.iter().map(|s| s.1).max().unwrap_or(0);
            DeviceEfficiency {
                device: device.to_string(),
                busy_s: busy as f64 / 1e6,
                window_s: to_us.saturating_sub(from_us) as f64 / 1e6,
                steady_window_s: last.saturating_sub(first) as f64 / 1e6,
                partitions: spans.len(),
            }
        })
        .collect()
}

/// Mean duration in ms of each stage (and of each backend sub-stage, as `"backend:<name>"`).
pub fn stage_means_ms(events: &[TimelineEvent]) -> Vec<(String, f64)> {
    stage_totals(events)
        .into_iter()
        .map(|(k, (sum, n))| (k, sum / n as f64))
        .collect()
}

/// Total duration in ms of each stage (and backend sub-stage) over `events`.
pub fn stage_sums_ms<'e>(
    events: impl IntoIterator<Item = &'e TimelineEvent>,
) -> Vec<(String, f64)> {
    stage_totals(events)
        .into_iter()
        .map(|(k, (sum, _))| (k, sum))
        .collect()
}

/// Per stage name: the summed duration in ms and the number of events.
fn stage_totals<'e>(
    events: impl IntoIterator<Item = &'e TimelineEvent>,
) -> BTreeMap<String, (f64, u64)> {
    let mut sums: BTreeMap<String, (f64, u64)> = BTreeMap::new();
    for e in events {
        let name = match e.stage {
            Stage::Backend => format!("backend:{}", e.detail),
            s => s.as_str().to_string(),
        };
        let entry = sums.entry(name).or_default();
        entry.0 += e.end_us.saturating_sub(e.start_us) as f64 / 1e3;
        entry.1 += 1;
    }
    sums
}

fn color(stage: Stage, detail: &str) -> &'static str {
    match stage {
        Stage::SrsLoad => "#e15759",
        Stage::Synthesis => "#4e79a7",
        Stage::Queue => "#bab0ac",
        Stage::TokenWait => "#f28e2b",
        Stage::Compute => "#59a14f",
        Stage::Assembly => "#b07aa1",
        Stage::Backend => match detail {
            d if d.contains("upload") => "#edc948",
            d if d.contains("ntt") || d.contains("h") && !d.contains("msm") => "#76b7b2",
            d if d.contains("g2") => "#9c755f",
            d if d.contains("msm") => "#ff9da7",
            _ => "#d4a6c8",
        },
    }
}

/// Lane order: synthesis workers, device workers (by name), then the rest.
fn lane_rank(worker: &str) -> (u8, String) {
    if worker.starts_with("synth-") {
        (0, format!("{worker:>12}"))
    } else if worker == "assembler" {
        (2, worker.to_string())
    } else {
        (1, worker.to_string())
    }
}

/// An SVG picture of the events between `from_us` and `to_us`: one lane per worker, bars
/// coloured by stage, backend sub-stages in the lower half of compute bars, queue waits
/// as thin grey bars on the prover lane that took the partition.
pub fn render_svg(events: &[TimelineEvent], from_us: u64, to_us: u64, title: &str) -> String {
    let mut lanes: Vec<&str> = events.iter().map(|e| e.worker.as_str()).collect();
    lanes.sort_by_key(|w| lane_rank(w));
    lanes.dedup();
    let (left, top, lane_h, width) = (110.0, 50.0, 34.0, 1400.0);
    let span_us = to_us.saturating_sub(from_us).max(1) as f64;
    let x = |t: u64| left + (t.saturating_sub(from_us) as f64 / span_us) * (width - left - 20.0);
    let height = top + lane_h * lanes.len() as f64 + 80.0;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(svg, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        svg,
        r#"<text x="{left}" y="20" font-size="14">{}</text>"#,
        escape(title)
    );
    // Time axis with about ten ticks at a round step.
    let span_s = span_us / 1e6;
    let step = [
        0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0,
        100.0, 200.0, 500.0,
    ]
    .into_iter()
    .find(|s| span_s / s <= 12.0)
    .unwrap_or(1000.0);
    let axis_y = top + lane_h * lanes.len() as f64;
    let mut t = 0.0;
    while t <= span_s + 1e-9 {
        let xt = x(from_us + (t * 1e6) as u64);
        let _ = writeln!(
            svg,
            r##"<line x1="{xt:.1}" y1="{top}" x2="{xt:.1}" y2="{axis_y}" stroke="#eee"/>"##
        );
        let _ = writeln!(
            svg,
            r#"<text x="{xt:.1}" y="{:.1}" text-anchor="middle">{t:.3} s</text>"#,
            axis_y + 14.0
        );
        t += step;
    }
    for (i, lane) in lanes.iter().enumerate() {
        let y = top + lane_h * i as f64;
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"#,
            left - 6.0,
            y + lane_h / 2.0 + 4.0,
            escape(lane)
        );
        let _ = writeln!(
            svg,
            r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#ccc"/>"##,
            y + lane_h,
            width - 20.0,
            y + lane_h
        );
    }
    let mut ordered: Vec<&TimelineEvent> = events.iter().collect();
    // Compute under its sub-stages, so the sub-stages stay visible.
    ordered.sort_by_key(|e| (e.stage == Stage::Backend, e.start_us));
    for e in ordered {
        let Some(i) = lanes.iter().position(|l| *l == e.worker) else {
            continue;
        };
        let y = top + lane_h * i as f64;
        let (x0, x1) = (x(e.start_us), x(e.end_us));
        let w = (x1 - x0).max(0.5);
        let (by, bh) = match e.stage {
            Stage::Queue => (y + 2.0, 4.0),
            Stage::Backend => (y + lane_h / 2.0 + 1.0, lane_h / 2.0 - 4.0),
            _ => (y + 7.0, lane_h - 10.0),
        };
        // The times (ms since the engine started) let a script read the steps back.
        let label = format!(
            "{} p{} {} {} @{:.1}+{:.1} ms",
            e.job_id,
            e.partition_idx,
            if e.detail.is_empty() {
                e.stage.as_str()
            } else {
                &e.detail
            },
            e.worker,
            e.start_us as f64 / 1e3,
            e.end_us.saturating_sub(e.start_us) as f64 / 1e3,
        );
        let _ = writeln!(
            svg,
            r##"<rect x="{x0:.1}" y="{by:.1}" width="{w:.1}" height="{bh:.1}" fill="{}" stroke="#333" stroke-width="0.3"><title>{}</title></rect>"##,
            color(e.stage, &e.detail),
            escape(&label)
        );
        if matches!(e.stage, Stage::Synthesis | Stage::Compute) && w > 40.0 {
            let short = e.job_id.rsplit('-').next().unwrap_or(&e.job_id);
            let _ = writeln!(
                svg,
                r#"<text x="{:.1}" y="{:.1}" fill="white">j{short}.p{}</text>"#,
                x0 + 3.0,
                y + 19.0,
                e.partition_idx
            );
        }
    }
    let legend = [
        ("synthesis", Stage::Synthesis, ""),
        ("queue (waiting for a prover)", Stage::Queue, ""),
        ("token wait", Stage::TokenWait, ""),
        ("compute (token held)", Stage::Compute, ""),
        ("upload", Stage::Backend, "upload"),
        ("ntt / h", Stage::Backend, "ntt"),
        ("msm g1", Stage::Backend, "msm"),
        ("msm g2", Stage::Backend, "msm_b_g2"),
        ("assembly + verify", Stage::Assembly, ""),
        ("srs load", Stage::SrsLoad, ""),
    ];
    let ly = axis_y + 36.0;
    for (k, (name, stage, detail)) in legend.iter().enumerate() {
        let lx = left + 130.0 * k as f64;
        let _ = writeln!(
            svg,
            r##"<rect x="{lx:.1}" y="{ly:.1}" width="12" height="12" fill="{}" stroke="#333" stroke-width="0.3"/>"##,
            color(*stage, detail)
        );
        let _ = writeln!(
            svg,
            r#"<text x="{:.1}" y="{:.1}">{name}</text>"#,
            lx + 16.0,
            ly + 10.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// An event of `job` on `device`'s first worker, for the tests of this module and its
/// neighbours.
#[cfg(test)]
pub(super) fn test_event(
    job: &str,
    device: &str,
    stage: Stage,
    start_us: u64,
    end_us: u64,
) -> TimelineEvent {
    TimelineEvent {
        job_id: job.into(),
        partition_idx: 0,
        stage,
        detail: String::new(),
        worker: format!("{device}/w0"),
        device: device.into(),
        start_us,
        end_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(device: &str, stage: Stage, start_us: u64, end_us: u64) -> TimelineEvent {
        test_event("j-1", device, stage, start_us, end_us)
    }

    #[test]
    fn efficiency_is_the_union_of_compute_over_the_window() {
        let events = [
            ev("gpu:0", Stage::Compute, 0, 400),
            ev("gpu:0", Stage::Compute, 300, 600), // overlaps the first
            ev("gpu:0", Stage::Synthesis, 0, 1000), // not compute
            ev("gpu:1", Stage::Compute, 900, 1500), // clipped at 1000
        ];
        let eff = device_efficiency(&events, 0, 1000);
        assert_eq!(eff.len(), 2);
        assert!((eff[0].efficiency() - 0.6).abs() < 1e-9, "{eff:?}");
        assert!((eff[0].steady_efficiency() - 1.0).abs() < 1e-9, "{eff:?}");
        assert!((eff[1].efficiency() - 0.1).abs() < 1e-9, "{eff:?}");
        // Two partitions over the 600 us steady window of gpu:0.
        assert_eq!(eff[0].partitions, 2);
        assert!(
            (eff[0].steady_s_per_partition() - 300e-6).abs() < 1e-12,
            "{eff:?}"
        );
    }

    #[test]
    fn svg_has_a_lane_per_worker_and_a_bar_per_event() {
        let events = [
            ev("cpu", Stage::Compute, 0, 400),
            ev("cpu", Stage::Queue, 0, 100),
        ];
        let svg = render_svg(&events, 0, 1000, "t <1>");
        assert!(svg.starts_with("<svg"));
        assert_eq!(svg.matches("<title>").count(), 2);
        assert!(svg.contains("cpu/w0") && svg.contains("t &lt;1&gt;"));
    }
}
