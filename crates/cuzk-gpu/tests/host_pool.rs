//! A GPU backend with host pools of its own (`GpuBackendConfig::host_threads`, the
//! critical lane's) proves while every thread of the process-wide rayon pool is held:
//! none of its host work (the staging's fill, the filler beside the kernels) waits for
//! that pool. Under a PoRep load the lane's fill queued there behind synthesis for 0.8 s
//! (docs/runs/2026-12-06.md, seventh session; #29). Its own binary: holding the
//! process-wide pool would stall the other device tests. Without a CUDA device the test
//! prints `skipped: no CUDA device` and passes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use cuzk_gpu::{Device, GpuBackend, GpuBackendConfig};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{
    paramgen, synthesize, Assignment, Backend, BackendError, CpuBackend, MsmOutputs, ProveReport,
    Srs,
};
use rand_chacha::rand_core::SeedableRng;

mod support;
use support::{device, seed};

/// Holds every thread of the process-wide rayon pool until dropped.
struct HeldPool {
    released: Arc<(Mutex<bool>, Condvar)>,
}

impl HeldPool {
    fn hold() -> HeldPool {
        let released = Arc::new((Mutex::new(false), Condvar::new()));
        let running = Arc::new(AtomicUsize::new(0));
        let n = rayon::current_num_threads();
        for _ in 0..n {
            let (released, running) = (released.clone(), running.clone());
            rayon::spawn(move || {
                running.fetch_add(1, Ordering::SeqCst);
                let (lock, cv) = &*released;
                let mut done = lock.lock().expect("hold lock");
                while !*done {
                    done = cv.wait(done).expect("hold wait");
                }
            });
        }
        // Made before the wait, so that a failed wait releases what did start.
        let held = HeldPool { released };
        let t = Instant::now();
        while running.load(Ordering::SeqCst) < n {
            assert!(
                t.elapsed() < Duration::from_secs(60),
                "the pool's threads did not start"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        held
    }
}

impl Drop for HeldPool {
    fn drop(&mut self) {
        let (lock, cv) = &*self.released;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
}

/// One test at a time: the first holds the process-wide pool that the other's set-up uses.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// What both tests prove with: parameters and a witness of a synthetic circuit of 2^lg
/// rows, the CPU backend's sums, and a one-worker backend with a host pool of 2 threads
/// that has proved once (the first call loads the kernels and makes the slot).
struct Lane {
    srs: Srs,
    asg: Assignment,
    want: MsmOutputs,
    lane: GpuBackend,
}

impl Lane {
    fn new(dev: &Arc<Device>, lg: u32, seed: u64) -> Lane {
        Lane::with_workers(dev, lg, seed, 1)
    }

    /// As [`Lane::new`], with `workers` workers (and as many host pools).
    fn with_workers(dev: &Arc<Device>, lg: u32, seed: u64, workers: usize) -> Lane {
        let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("circuit");
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
        let fb = cuzk_gpu::GpuFixedBase::new(dev.clone());
        let srs = paramgen::generate(c, &mut rng, &fb).expect("paramgen").srs;
        let asg = synthesize(c.with_witness_seed(seed ^ 1)).expect("synthesis");
        let want = CpuBackend::new()
            .compute(&asg, &srs, &mut ProveReport::default())
            .expect("cpu");
        let lane = GpuBackend::with_config(
            dev.clone(),
            GpuBackendConfig {
                workers,
                host_threads: Some(2),
                ..GpuBackendConfig::default()
            },
        );
        let l = Lane {
            srs,
            asg,
            want,
            lane,
        };
        let first = l
            .compute()
            .unwrap_or_else(|e| panic!("seed {seed}: first prove: {e}"));
        assert_eq!(first, l.want, "seed {seed}: first prove");
        l
    }

    fn compute(&self) -> Result<MsmOutputs, BackendError> {
        self.lane
            .compute(&self.asg, &self.srs, &mut ProveReport::default())
    }
}

#[test]
fn a_backend_with_its_own_host_pool_proves_while_the_process_pool_is_held() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dev) = device() else { return };
    let seed = seed();
    // 2^17 rows: a, b, c and the witness each span several fill pieces (2^16 scalars), so
    // the fill splits its work across threads (one piece would run inline).
    let l = Lane::new(&dev, 17, seed);

    let held = HeldPool::hold();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let _ = tx.send(l.compute());
        });
        let got = rx.recv_timeout(Duration::from_secs(60));
        // Released before any assertion, so that a failure does not leave the prove
        // waiting for the pool (the scope joins it).
        drop(held);
        let got = got
            .unwrap_or_else(|_| panic!("seed {seed}: the prove waited for the process-wide pool"));
        let got = got.unwrap_or_else(|e| panic!("seed {seed}: prove: {e}"));
        assert_eq!(got, l.want, "seed {seed}: prove beside the held pool");
    });
}

/// Called from a worker of another pool (the engine runs a CRITICAL call in its critical
/// pool) whose queue holds a long job, the call returns without running that job first: a
/// worker installing into another pool would take its own pool's jobs while it waits.
#[test]
fn a_call_from_another_pools_worker_does_not_wait_for_that_pools_jobs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dev) = device() else { return };
    let seed = seed();
    let l = Lane::new(&dev, 12, seed);

    let other = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("a one-thread pool");
    let long = Duration::from_secs(5);
    let (got, took) = other.install(|| {
        // Queued on this worker's own deque: only this worker can run it.
        rayon::spawn(move || std::thread::sleep(long));
        let t = Instant::now();
        let got = l.compute();
        (got, t.elapsed())
    });
    let got = got.unwrap_or_else(|e| panic!("seed {seed}: prove: {e}"));
    assert_eq!(got, l.want, "seed {seed}: prove from another pool's worker");
    assert!(
        took < long,
        "seed {seed}: the call took {took:?}: its thread ran the other pool's job first"
    );
}

/// A two-worker backend with host pools of its own proves calls from four threads at once:
/// each call runs in a pool of its own. With one pool for all, a worker filling one call's
/// staging took the next call's job, which waited there for the slot or the token the
/// first call held: both stopped (a 24 GiB PoRep run with `CUZK_GPU_HOST_THREADS=16`,
/// 2026-12-07). The callers are threads of their own, so that a stop fails the test.
#[test]
fn concurrent_calls_on_a_backend_with_host_pools_all_finish() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let Some(dev) = device() else { return };
    let seed = seed();
    let l = Arc::new(Lane::with_workers(&dev, 17, seed, 2));
    let (tx, rx) = std::sync::mpsc::channel();
    let (callers, calls) = (4, 3);
    for _ in 0..callers {
        let (l, tx) = (l.clone(), tx.clone());
        std::thread::spawn(move || {
            for _ in 0..calls {
                let _ = tx.send(l.compute());
            }
        });
    }
    drop(tx);
    let t = Instant::now();
    for k in 0..callers * calls {
        let left = Duration::from_secs(120).saturating_sub(t.elapsed());
        let got = rx.recv_timeout(left).unwrap_or_else(|_| {
            panic!(
                "seed {seed}: {k} of {} calls returned: the rest stopped",
                callers * calls
            )
        });
        let got = got.unwrap_or_else(|e| panic!("seed {seed}: prove: {e}"));
        assert_eq!(got, l.want, "seed {seed}: prove {k}");
    }
}
