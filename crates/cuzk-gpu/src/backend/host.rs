//! Where a compute call's host work runs, and how long its host steps took: a backend's
//! host pool of its own ([`GpuBackendConfig::host_threads`], a critical lane's), entered
//! once per call ([`GpuBackend::on_host_pool`]: the call and the filler beside its
//! kernels), and the log of host steps slower than the handle allows
//! ([`GpuBackend::note_slow_steps`]).

use std::time::Duration;

use super::GpuBackend;
#[cfg(doc)]
use super::GpuBackendConfig;

/// A host pool of `n` threads (at least two: a call waits on one for the filler on
/// another) named after the GPU; `None`, logged, when its threads cannot be made (the
/// caller's pool then serves).
pub(super) fn host_pool(ordinal: usize, n: usize) -> Option<rayon::ThreadPool> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n.max(2))
        .thread_name(move |i| format!("cuzk-gpu{ordinal}-host-{i}"))
        .build()
        .inspect_err(|e| {
            tracing::warn!(
                gpu = ordinal,
                "no host pool of its own: the caller's serves: {e}"
            )
        })
        .ok()
}

impl GpuBackend {
    /// Runs `f` in the backend's host pool ([`GpuBackendConfig::host_threads`]), or here.
    /// From a worker of another rayon pool (the engine's critical pool) it is installed
    /// from a thread of its own: a worker that installs into another pool runs its own
    /// pool's jobs while it waits, and returns `f`'s result only once the job it took is
    /// done (a next WinningPoSt's synthesis, say).
    pub(super) fn on_host_pool<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.host_pool {
            Some(pool) if pool.current_thread_index().is_some() => f(),
            Some(pool) if rayon::current_thread_index().is_some() => {
                std::thread::scope(|s| match s.spawn(|| pool.install(f)).join() {
                    Ok(r) => r,
                    Err(panic) => std::panic::resume_unwind(panic),
                })
            }
            Some(pool) => pool.install(f),
            None => f(),
        }
    }

    /// Logs the host steps of a call that took longer than they should on this handle:
    /// the critical lane's prepare took 0.3–0.9 s under a PoRep load in two of five calls
    /// (1 ms in the others), and one call spent 1.1 s outside every stage
    /// (docs/runs/2026-12-06.md, seventh session); which step did is what the next run on
    /// a device must tell. `what` names the steps' span, `steps` each step's time.
    pub(super) fn note_slow_steps(&self, what: &str, steps: &[(&str, Duration)]) {
        let slow = match self.dev.is_critical() {
            true => Duration::from_millis(20),
            false => Duration::from_secs(1),
        };
        if steps.iter().map(|(_, d)| *d).sum::<Duration>() > slow {
            let steps: Vec<String> = steps
                .iter()
                .map(|(name, d)| format!("{name} {:.1} ms", d.as_secs_f64() * 1e3))
                .collect();
            tracing::info!(
                gpu = self.dev.ordinal(),
                priority = self.dev.priority(),
                "slow {what}: {}",
                steps.join(", ")
            );
        }
    }
}
