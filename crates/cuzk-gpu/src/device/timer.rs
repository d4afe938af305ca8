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

/// One span of a [`Trace`]: what ran, which chunk, on which stream, between two events.
struct Span {
    what: &'static str,
    index: usize,
    copy: bool,
    start: CudaEvent,
    end: Option<CudaEvent>,
}

/// Device-timed spans of one prove's copies and kernels on both streams
/// (`CUZK_GPU_TRACE=FILE`): a start and an end event per span, all timed from the device's
/// trace base (`Device::trace_base`), so that the spans of successive proves lie on one
/// clock. Nothing waits; [`Trace::write`] reads the events once the prove is done and
/// appends one JSON line to the file, which `bench/trace.py` summarizes (how busy each
/// stream is, and where one waits for the other).
pub struct Trace {
    spans: Vec<Span>,
}

impl Trace {
    /// A trace when `CUZK_GPU_TRACE` names a file, else `None`.
    ///
    /// # Errors
    /// Driver errors recording the trace base.
    pub fn start(dev: &Device) -> Result<Option<Trace>> {
        if crate::tuning::tuning().trace.is_none() {
            return Ok(None);
        }
        dev.trace_base()?;
        Ok(Some(Trace { spans: Vec::new() }))
    }

    /// Records the start of span `what` (chunk `index`) on the copy stream (`copy`) or the
    /// compute stream; returns its id for [`Trace::end`].
    ///
    /// # Errors
    /// Driver errors.
    pub fn begin(
        &mut self,
        dev: &Device,
        what: &'static str,
        index: usize,
        copy: bool,
    ) -> Result<usize> {
        let start = dev.timing_event()?;
        match copy {
            true => dev.record_on_copy(&start)?,
            false => dev.record(&start)?,
        }
        self.spans.push(Span {
            what,
            index,
            copy,
            start,
            end: None,
        });
        Ok(self.spans.len() - 1)
    }

    /// Records the end of span `id` on its stream.
    ///
    /// # Errors
    /// Driver errors.
    pub fn end(&mut self, dev: &Device, id: usize) -> Result<()> {
        let Some(span) = self.spans.get_mut(id) else {
            return Ok(());
        };
        let end = dev.timing_event()?;
        match span.copy {
            true => dev.record_on_copy(&end)?,
            false => dev.record(&end)?,
        }
        span.end = Some(end);
        Ok(())
    }

    /// Once every span's work is done: appends `{"op":"gpu_trace","gpu":…,"lg":…,"spans":
    /// [[what, index, "copy"|"compute", start_ms, end_ms], …],"host":[[what, ms], …]}` to
    /// the trace file (`host`: events the caller recorded at its host steps): its own
    /// spans (one never ended is left out) and `compute`, spans on the compute stream timed
    /// by their owner (a streamed prove's sums, which it times anyway). A failed write is
    /// logged, not returned: tracing never fails a prove.
    ///
    /// # Errors
    /// Driver errors reading the events.
    pub fn write<'e>(
        self,
        dev: &Device,
        lg: u32,
        compute: impl IntoIterator<Item = (&'static str, usize, &'e CudaEvent, &'e CudaEvent)>,
        host: &[(&'static str, CudaEvent)],
    ) -> Result<()> {
        let base = dev.trace_base()?;
        let ms = |ev: &CudaEvent| drv(dev.ordinal(), || "trace timing".into(), base.elapsed_ms(ev));
        let own = self.spans.iter().filter_map(|s| {
            let stream = if s.copy { "copy" } else { "compute" };
            s.end
                .as_ref()
                .map(|end| (s.what, s.index, stream, &s.start, end))
        });
        let timed = compute
            .into_iter()
            .map(|(what, index, start, end)| (what, index, "compute", start, end));
        let mut parts = Vec::with_capacity(self.spans.len());
        for (what, index, stream, start, end) in own.chain(timed) {
            parts.push(format!(
                "[\"{what}\",{index},\"{stream}\",{:.3},{:.3}]",
                ms(start)?,
                ms(end)?
            ));
        }
        let marks = host
            .iter()
            .map(|(what, ev)| Ok(format!("[\"{what}\",{:.3}]", ms(ev)?)))
            .collect::<Result<Vec<_>>>()?;
        let line = format!(
            "{{\"op\":\"gpu_trace\",\"gpu\":{},\"lg\":{lg},\"spans\":[{}],\"host\":[{}]}}\n",
            dev.ordinal(),
            parts.join(","),
            marks.join(",")
        );
        if let Some(path) = &crate::tuning::tuning().trace {
            use std::io::Write;
            let wrote = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| f.write_all(line.as_bytes()));
            if let Err(e) = wrote {
                tracing::warn!(path = %path.display(), "trace not written: {e}");
            }
        }
        Ok(())
    }
}
