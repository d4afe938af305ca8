//! [`Timeline`]: a bounded ring of per-partition stage events (synthesis, queue wait, token
//! wait, compute and its backend sub-stages, assembly), timed in microseconds since the
//! engine started. `cuzk bench batch` turns it into device efficiency and a picture; the
//! engine only records.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A pipeline stage as the timeline names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Stage {
    /// Loading an SRS from disk.
    SrsLoad,
    /// Circuit synthesis on a synthesis worker.
    Synthesis,
    /// Waiting in the hand-off queue for a prover.
    Queue,
    /// Waiting for the device's compute token.
    TokenWait,
    /// The whole prove under the compute token.
    Compute,
    /// A backend sub-stage inside `Compute` (upload, ntt_h, msm_l, ...); see `detail`.
    Backend,
    /// Assembly and verification of the job's proof.
    Assembly,
}

impl Stage {
    /// Lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::SrsLoad => "srs_load",
            Stage::Synthesis => "synthesis",
            Stage::Queue => "queue",
            Stage::TokenWait => "token_wait",
            Stage::Compute => "compute",
            Stage::Backend => "backend",
            Stage::Assembly => "assembly",
        }
    }

    /// Parses [`Stage::as_str`]'s names back.
    pub fn from_name(name: &str) -> Option<Stage> {
        [
            Stage::SrsLoad,
            Stage::Synthesis,
            Stage::Queue,
            Stage::TokenWait,
            Stage::Compute,
            Stage::Backend,
            Stage::Assembly,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }
}

/// One stage of one partition on one worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TimelineEvent {
    /// The job.
    pub job_id: String,
    /// The partition (0 for job-level stages such as assembly).
    pub partition_idx: u32,
    /// The stage.
    pub stage: Stage,
    /// Backend sub-stage name for [`Stage::Backend`], else empty.
    pub detail: String,
    /// The worker lane, e.g. "synth-1", "gpu:0/w0", "cpu/w0", "assembler".
    pub worker: String,
    /// The device for prover stages ("gpu:0", "cpu"), else empty.
    pub device: String,
    /// Start, µs since the engine started.
    pub start_us: u64,
    /// End, µs since the engine started.
    pub end_us: u64,
}

/// A bounded, thread-safe event ring.
pub struct Timeline {
    origin: Instant,
    capacity: usize,
    events: Mutex<VecDeque<TimelineEvent>>,
}

impl Timeline {
    /// An empty timeline keeping at most `capacity` events, timed from now.
    pub fn new(capacity: usize) -> Self {
        Timeline {
            origin: Instant::now(),
            capacity,
            events: Mutex::new(VecDeque::new()),
        }
    }

    /// µs from the origin to `t` (0 for instants before it).
    pub fn us(&self, t: Instant) -> u64 {
        u64::try_from(t.saturating_duration_since(self.origin).as_micros()).unwrap_or(u64::MAX)
    }

    /// µs since the origin now.
    pub fn now_us(&self) -> u64 {
        self.us(Instant::now())
    }

    /// Records an event between two instants.
    pub fn record(&self, mut event: TimelineEvent, start: Instant, end: Instant) {
        if self.capacity == 0 {
            return;
        }
        event.start_us = self.us(start);
        event.end_us = self.us(end).max(event.start_us);
        let mut events = self.events.lock();
        if events.len() == self.capacity {
            events.pop_front();
        }
        events.push_back(event);
    }

    /// Records a backend's sub-stages laid end to end from `start` (they run in order).
    pub fn record_stages(
        &self,
        proto: &TimelineEvent,
        start: Instant,
        stages: &[(String, Duration)],
    ) {
        let mut t = start;
        for (name, wall) in stages {
            let event = TimelineEvent {
                stage: Stage::Backend,
                detail: name.clone(),
                ..proto.clone()
            };
            self.record(event, t, t + *wall);
            t += *wall;
        }
    }

    /// Events that ended at or after `since_us`, oldest first.
    pub fn events_since(&self, since_us: u64) -> Vec<TimelineEvent> {
        self.events
            .lock()
            .iter()
            .filter(|e| e.end_us >= since_us)
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(job: &str) -> TimelineEvent {
        TimelineEvent {
            job_id: job.into(),
            partition_idx: 0,
            stage: Stage::Synthesis,
            detail: String::new(),
            worker: "synth-0".into(),
            device: String::new(),
            start_us: 0,
            end_us: 0,
        }
    }

    #[test]
    fn ring_keeps_the_newest_events() {
        let timeline = Timeline::new(2);
        let t = Instant::now();
        for job in ["a", "b", "c"] {
            timeline.record(event(job), t, t + Duration::from_millis(1));
        }
        let jobs: Vec<_> = timeline
            .events_since(0)
            .into_iter()
            .map(|e| e.job_id)
            .collect();
        assert_eq!(jobs, ["b", "c"]);
    }

    #[test]
    fn stage_names_round_trip() {
        for stage in [
            Stage::SrsLoad,
            Stage::Synthesis,
            Stage::Queue,
            Stage::Compute,
            Stage::Assembly,
        ] {
            assert_eq!(Stage::from_name(stage.as_str()), Some(stage));
        }
        assert_eq!(Stage::from_name("nope"), None);
    }
}
