//! Device-side timing on the compute stream: [`StageTimer`] (always on: an event at the end
//! of each prove stage, read into the `ProveReport` once the stream is synchronized) and
//! [`PhaseTimer`] (per kernel phase, on request with `CUZK_GPU_PROFILE=1`, printed as one
//! JSON line).

use cudarc::driver::CudaEvent;
use cuzk_groth16::ProveStage;

use super::Device;
use crate::error::{drv, Result};

/// Optional per-phase device timing (set `CUZK_GPU_PROFILE=1`): events recorded on the
/// compute stream between phases, printed as one JSON line on stderr by [`PhaseTimer::report`].
/// Off by default because reporting synchronizes the stream.
pub struct PhaseTimer<'d> {
    dev: &'d Device,
    what: String,
    marks: Vec<(&'static str, CudaEvent)>,
}

impl<'d> PhaseTimer<'d> {
    /// A timer for `what` when profiling is on, else `None`.
    ///
    /// # Errors
    /// Driver errors creating the first event.
    pub fn start(dev: &'d Device, what: impl FnOnce() -> String) -> Result<Option<PhaseTimer<'d>>> {
        if !crate::tuning::tuning().profile {
            return Ok(None);
        }
        let mut t = PhaseTimer {
            dev,
            what: what(),
            marks: Vec::new(),
        };
        t.mark("start")?;
        Ok(Some(t))
    }

    /// Records the end of phase `name`.
    ///
    /// # Errors
    /// Driver errors.
    pub fn mark(&mut self, name: &'static str) -> Result<()> {
        let ev = self.dev.timing_event()?;
        self.dev.record(&ev)?;
        self.marks.push((name, ev));
        Ok(())
    }

    /// Waits for the stream and prints `{"profile": what, "phases_ms": {...}}` on stderr.
    ///
    /// # Errors
    /// Driver errors.
    pub fn report(self) -> Result<()> {
        self.dev.sync_compute()?;
        // A phase marked more than once (per window group) is reported as its total.
        let mut phases: Vec<(&'static str, f32)> = Vec::new();
        for w in self.marks.windows(2) {
            let ms = drv(
                self.dev.ordinal(),
                || "event timing".into(),
                w[0].1.elapsed_ms(&w[1].1),
            )?;
            match phases.iter_mut().find(|(name, _)| *name == w[1].0) {
                Some((_, total)) => *total += ms,
                None => phases.push((w[1].0, ms)),
            }
        }
        let parts: Vec<String> = phases
            .iter()
            .map(|(name, ms)| format!("\"{name}\":{ms:.3}"))
            .collect();
        eprintln!(
            "{{\"profile\":\"{}\",\"phases_ms\":{{{}}}}}",
            self.what,
            parts.join(",")
        );
        Ok(())
    }
}

/// Device-timed stages on the compute stream: an event at each stage's end, read back into
/// a `ProveReport` once the stream has been synchronized (always on, unlike
/// [`PhaseTimer`]: events cost microseconds).
pub struct StageTimer<'d> {
    dev: &'d Device,
    start: CudaEvent,
    last: std::time::Instant,
    marks: Vec<(ProveStage, CudaEvent, std::time::Duration)>,
}

impl<'d> StageTimer<'d> {
    /// Records the start event on the compute stream.
    ///
    /// # Errors
    /// Driver errors.
    pub fn start(dev: &'d Device) -> Result<StageTimer<'d>> {
        let start = dev.timing_event()?;
        dev.record(&start)?;
        Ok(StageTimer {
            dev,
            start,
            last: std::time::Instant::now(),
            marks: Vec::new(),
        })
    }

    /// Records the end of `stage` on the compute stream.
    ///
    /// # Errors
    /// Driver errors.
    pub fn mark(&mut self, stage: ProveStage) -> Result<()> {
        let ev = self.dev.timing_event()?;
        self.dev.record(&ev)?;
        let now = std::time::Instant::now();
        self.marks.push((stage, ev, now - self.last));
        self.last = now;
        Ok(())
    }

    /// After the stream is synchronized: each stage's host wall and device time.
    ///
    /// # Errors
    /// Driver errors (an event not yet complete).
    pub fn finish(self, report: &mut cuzk_groth16::ProveReport) -> Result<()> {
        let mut prev = &self.start;
        for (stage, ev, wall) in &self.marks {
            report.push_device(*stage, *wall, self.dev.elapsed(prev, ev)?);
            prev = ev;
        }
        Ok(())
    }
}
