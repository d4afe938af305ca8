//! The shutdown side of [`Engine`]: it stops accepting, lets accepted jobs finish within
//! the drain timeout, fails the rest with a retryable reason (kept by the journal, when
//! there is one, for the next start) and stops the workers.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::state::JobEnd;
use crate::Engine;

/// What a shutdown did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Jobs that finished during the drain.
    pub drained: usize,
    /// Jobs failed because the drain timeout passed.
    pub failed: usize,
}

impl Engine {
    /// Stops accepting jobs at once: every later submit gets
    /// [`EngineError::ShuttingDown`](crate::EngineError::ShuttingDown) and
    /// [`Engine::status`] says `accepting: false` from this call's return, so a front end
    /// that reports readiness from it can flip its own signals after this call and never
    /// answer two ways at once.
    pub fn stop_accepting(&self) {
        self.shared.state.lock().accepting = false;
    }

    /// Stops accepting jobs, waits up to `drain` for accepted ones to finish, fails the
    /// rest with a reason (retryable: another daemon can prove them), and stops the workers (a prove in flight finishes and is
    /// discarded).
    pub async fn shutdown(&self, drain: Duration) -> ShutdownReport {
        self.shutdown_or(drain, &CancellationToken::new()).await
    }

    /// [`Engine::shutdown`], ending the drain early when `early` is cancelled (a second
    /// SIGTERM or SIGINT).
    pub async fn shutdown_or(&self, drain: Duration, early: &CancellationToken) -> ShutdownReport {
        let active_at_start = {
            let mut st = self.shared.state.lock();
            st.accepting = false;
            st.active.len()
        };
        info!(
            active = active_at_start,
            drain_s = drain.as_secs_f64(),
            "draining"
        );
        let deadline = tokio::time::Instant::now() + drain;
        loop {
            if self.shared.state.lock().active.is_empty() || tokio::time::Instant::now() >= deadline
            {
                break;
            }
            tokio::select! {
                _ = early.cancelled() => break,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
        // From here on finishes are not journaled: the jobs failed below stay pending in
        // the journal and are proved again at the next start.
        if let Some(journal) = &self.shared.journal {
            journal.seal();
        }
        let mut st = self.shared.state.lock();
        let remaining: Vec<String> = st.active.keys().cloned().collect();
        let kept = if self.shared.journal.is_some() {
            "; the journal keeps it and the next start proves it again"
        } else {
            ""
        };
        let reason = if early.is_cancelled() {
            format!("daemon shut down: the drain was ended early{kept}")
        } else {
            format!(
                "daemon shut down: drain timeout of {:.1} s passed{kept}",
                drain.as_secs_f64()
            )
        };
        let mut dropped = Vec::new();
        for id in &remaining {
            let end = JobEnd::retryable(reason.clone());
            dropped.extend(self.shared.finish_job(&mut st, id, end));
        }
        st.stopping = true;
        drop(st);
        drop(dropped);
        self.shared.synth_cv.notify_all();
        self.shared.prove_cv.notify_all();
        if !remaining.is_empty() {
            warn!(failed = remaining.len(), "drain timeout: jobs failed");
        }
        ShutdownReport {
            drained: active_at_start.saturating_sub(remaining.len()),
            failed: remaining.len(),
        }
    }
}
