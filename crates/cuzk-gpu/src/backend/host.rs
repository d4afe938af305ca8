//! Where a compute call's host work runs, and how long its host steps took: host pools of
//! a backend's own ([`GpuBackendConfig::host_threads`], a critical lane's), one per call
//! that may run at once, each taken by one call for its whole length
//! ([`GpuBackend::on_host_pool`]: the call and the filler beside its kernels), and the log
//! of host steps slower than the handle allows ([`GpuBackend::note_slow_steps`]).
//!
//! One pool per call, not one for all: a call runs in its pool as one job and blocks there
//! (for the slot, the token, the device), and a worker of a pool that waits for the rest
//! of its own parallel work takes any job of that pool meanwhile. In one shared pool, the
//! worker filling the slot's holder took the next call's job, which blocked on that slot:
//! both calls stopped (a 24 GiB PoRep run with `CUZK_GPU_HOST_THREADS=16`, 2026-12-07).

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::GpuBackend;
#[cfg(doc)]
use super::GpuBackendConfig;

/// A backend's host pools: one per call that may run at once, each of the same threads.
pub(super) struct HostPools {
    pools: Vec<rayon::ThreadPool>,
    /// The pools no call holds.
    free: Mutex<Vec<usize>>,
    freed: Condvar,
}

/// A pool taken by a call, given back on drop.
struct Taken<'a> {
    pools: &'a HostPools,
    k: usize,
}

impl Drop for Taken<'_> {
    fn drop(&mut self) {
        self.pools.free.lock().push(self.k);
        self.pools.freed.notify_one();
    }
}

impl HostPools {
    /// `calls` pools of `threads` threads each (at least two: a call waits on one for the
    /// filler on another) named after the GPU; `None`, logged, when their threads cannot
    /// be made (the caller's pool then serves).
    pub(super) fn new(ordinal: usize, calls: usize, threads: usize) -> Option<HostPools> {
        let pools = (0..calls.max(1))
            .map(|k| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads.max(2))
                    .thread_name(move |i| format!("cuzk-gpu{ordinal}-host{k}-{i}"))
                    .build()
            })
            .collect::<Result<Vec<_>, _>>()
            .inspect_err(|e| {
                tracing::warn!(
                    gpu = ordinal,
                    "no host pools of its own: the caller's serves: {e}"
                )
            })
            .ok()?;
        Some(HostPools {
            free: Mutex::new((0..pools.len()).rev().collect()),
            freed: Condvar::new(),
            pools,
        })
    }

    /// Runs `f` in a pool no other call holds (waiting for one), handing it the pool: the
    /// filler beside the kernels runs in the same one. From a worker of one of these pools
    /// `f` runs at once, in that pool. From a worker of another rayon pool (the engine's
    /// critical pool) the pool is entered from a thread of its own: a worker that installs
    /// into another pool runs its own pool's jobs while it waits, and returns `f`'s result
    /// only once the job it took is done (a next WinningPoSt's synthesis, say).
    pub(super) fn run<R: Send>(&self, f: impl FnOnce(&rayon::ThreadPool) -> R + Send) -> R {
        if let Some(pool) = self
            .pools
            .iter()
            .find(|p| p.current_thread_index().is_some())
        {
            return f(pool);
        }
        let taken = self.take();
        let pool = &self.pools[taken.k];
        match rayon::current_thread_index() {
            Some(_) => std::thread::scope(|s| match s.spawn(|| pool.install(|| f(pool))).join() {
                Ok(r) => r,
                Err(panic) => std::panic::resume_unwind(panic),
            }),
            None => pool.install(|| f(pool)),
        }
    }

    /// A free pool, waiting until one is.
    fn take(&self) -> Taken<'_> {
        let mut free = self.free.lock();
        loop {
            if let Some(k) = free.pop() {
                return Taken { pools: self, k };
            }
            self.freed.wait(&mut free);
        }
    }

    /// Pools in all (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.pools.len()
    }
}

impl GpuBackend {
    /// Runs `f` in one of the backend's host pools ([`HostPools::run`]), handing it the
    /// pool, or here with none ([`GpuBackendConfig::host_threads`] unset).
    pub(super) fn on_host_pool<R: Send>(
        &self,
        f: impl FnOnce(Option<&rayon::ThreadPool>) -> R + Send,
    ) -> R {
        match &self.host_pools {
            Some(pools) => pools.run(|p| f(Some(p))),
            None => f(None),
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

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;
    use std::sync::{mpsc, Arc};
    use std::time::Instant;

    /// A pool's identity, to tell pools apart.
    fn addr(p: &rayon::ThreadPool) -> usize {
        p as *const _ as usize
    }

    /// A call on a thread of `s` that holds one of `pools` until the returned sender
    /// sends or is dropped; the pool it holds.
    fn hold<'s, 'e>(
        s: &'s std::thread::Scope<'s, 'e>,
        pools: &'e HostPools,
    ) -> (usize, mpsc::Sender<()>) {
        let (entered, inside) = mpsc::channel();
        let (release, released) = mpsc::channel::<()>();
        s.spawn(move || {
            pools.run(move |p| {
                entered.send(addr(p)).expect("send");
                let _ = released.recv();
            })
        });
        (inside.recv().expect("the holder's pool"), release)
    }

    /// Two calls at once run in two pools; with one pool the second waits for the first.
    #[test]
    fn each_call_holds_a_pool_of_its_own() {
        let pools = HostPools::new(0, 2, 2).expect("pools");
        assert_eq!(pools.len(), 2);
        std::thread::scope(|s| {
            let (first, release) = hold(s, &pools);
            let second = pools.run(addr);
            assert_ne!(
                first, second,
                "the second call ran in the first call's pool"
            );
            // From a worker of a pool, a call runs in that pool without taking another.
            let nested = pools.run(|p| p.install(|| pools.run(addr)) == addr(p));
            assert!(nested, "a call from a pool's worker left its pool");
            release.send(()).expect("release");
        });

        let one = HostPools::new(0, 1, 2).expect("pool");
        std::thread::scope(|s| {
            let (_, release) = hold(s, &one);
            let (done_tx, done) = mpsc::channel();
            let one = &one;
            s.spawn(move || one.run(|_| done_tx.send(()).expect("send")));
            assert!(
                done.recv_timeout(Duration::from_millis(200)).is_err(),
                "the second call ran while the one pool was held"
            );
            release.send(()).expect("release");
            done.recv_timeout(Duration::from_secs(60))
                .expect("the second call ran once the pool was free");
        });
    }

    /// Calls that hold a shared slot while their parallel work runs, and wait for it in
    /// their pool, all finish: no call's worker takes another call's job, which would
    /// wait on the slot that worker's call holds (the deadlock of one shared pool: with
    /// every call in the first pool, this stopped in each of six runs; with a tenth of
    /// the work a round, in only two of four, as the callers seldom overlapped). The calls
    /// run on threads of their own, so that a stop fails the test instead of hanging it.
    #[test]
    fn calls_waiting_for_each_others_slot_all_finish() {
        let pools = Arc::new(HostPools::new(0, 2, 4).expect("pools"));
        let slot = Arc::new(std::sync::Mutex::new(()));
        let (done_tx, done) = mpsc::channel();
        let rounds = 40;
        for c in 0..2u64 {
            let (pools, slot, done_tx) = (pools.clone(), slot.clone(), done_tx.clone());
            std::thread::spawn(move || {
                for r in 0..rounds {
                    let sum = pools.run(|_| {
                        let _held = slot.lock().expect("slot");
                        (0..2_000_000usize)
                            .into_par_iter()
                            .with_max_len(1_000)
                            .map(|x| (x as u64).wrapping_mul(c + r + 1))
                            .sum::<u64>()
                    });
                    done_tx.send(sum).expect("send");
                }
            });
        }
        drop(done_tx);
        let t = Instant::now();
        for _ in 0..2 * rounds {
            let left = Duration::from_secs(60).saturating_sub(t.elapsed());
            done.recv_timeout(left)
                .expect("the calls stopped: one waits on a slot another's worker holds");
        }
    }
}
