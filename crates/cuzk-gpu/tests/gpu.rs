//! Device kernels against the CPU (blstrs and a reference NTT) on fresh random inputs with
//! edge cases (see `cuzk_gpu::diag::check`), the GPU backend's own tests, and cuzk-groth16's
//! shared prove tests (`backend_test!` bodies) on the CPU and the GPU backends. Without a
//! CUDA device each GPU test prints `skipped: no CUDA device` and passes.

use std::sync::Arc;

use cuzk_gpu::diag::check::{check_msm, check_ntt, CheckOutcome};
use cuzk_gpu::Device;

mod support;
use support::{device, seed};

fn assert_all(results: &[CheckOutcome]) {
    let bad: Vec<_> = results.iter().filter(|r| !r.ok).collect();
    assert!(!results.is_empty());
    assert!(
        bad.is_empty(),
        "{} of {} checks failed: {bad:#?}",
        bad.len(),
        results.len()
    );
}

#[test]
fn ntt_matches_cpu() {
    let Some(dev) = device() else { return };
    assert_all(&check_ntt(&dev, seed(), 12).expect("device error"));
}

#[test]
fn msm_classify_batch_add_match_blstrs() {
    let Some(dev) = device() else { return };
    assert_all(&check_msm(&dev, seed(), 10007).expect("device error"));
}

// ---- The GPU backend (issue #4): whole proofs, residency, faults, concurrency. ----

use cuzk_gpu::{GpuBackend, GpuBackendConfig, Residency};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{
    paramgen, prove, synthesize, verify, Assignment, Backend, BackendError, CpuBackend,
    ProveReport, ProveStage, Scalar, Srs,
};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;

/// Parameters (made on the device) and a witness for a synthetic circuit of 2^lg rows.
fn circuit(dev: &Arc<Device>, lg: u32, seed: u64) -> (Srs, Assignment) {
    let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("circuit");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let fb = cuzk_gpu::GpuFixedBase::new(dev.clone());
    let srs = paramgen::generate(c, &mut rng, &fb).expect("paramgen").srs;
    let asg = synthesize(c.with_witness_seed(seed ^ 1)).expect("synthesis");
    (srs, asg)
}

/// A proof with random r, s through `b`, checked by bellperson's verifier.
fn proves(b: &dyn Backend, srs: &Srs, asg: &Assignment, seed: u64) -> ProveReport {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let (proof, report) =
        prove(asg, srs, r, s, b).unwrap_or_else(|e| panic!("seed {seed}: prove failed: {e}"));
    let ok = verify(&srs.vk, &proof, &asg.input_assignment[1..]).expect("verifier input");
    assert!(ok, "seed {seed}: {} proof rejected", b.name());
    report
}

fn backend(dev: &Arc<Device>, residency: Residency, chunk: usize, acc: Option<bool>) -> GpuBackend {
    GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            residency,
            stream_chunk_points: chunk,
            stream_accumulators: acc,
            ..GpuBackendConfig::default()
        },
    )
}

/// A backend whose resident proves run the witness sums beside the H sum or not.
fn lanes(dev: &Arc<Device>, concurrent: bool) -> GpuBackend {
    GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            concurrent_sums: Some(concurrent),
            ..GpuBackendConfig::default()
        },
    )
}

#[test]
fn gpu_proofs_verify_resident_and_streamed() {
    let Some(dev) = device() else { return };
    let seed = seed();
    for lg in [10u32, 16] {
        let (srs, asg) = circuit(&dev, lg, seed);
        // Odd chunk sizes: several chunks and a short last one.
        let chunk = if lg == 10 { 300 } else { 20_011 };
        // Streamed with and without the accumulators kept across chunks (by default
        // chunks this small reduce per chunk).
        for (residency, acc) in [
            (Residency::Resident, None),
            (Residency::Streamed, None),
            (Residency::Streamed, Some(true)),
        ] {
            let b = backend(&dev, residency, chunk, acc);
            let rep = proves(&b, &srs, &asg, seed);
            assert!(rep.token.is_some());
            assert!(rep.stage(ProveStage::TokenWait).is_some());
            assert!(rep.stage(ProveStage::MsmBG2).is_some());
            let want = u64::from(residency == Residency::Resident);
            assert_eq!(b.srs_uploads(), want, "2^{lg} {residency:?} {acc:?}");
        }
    }
}

#[test]
fn cpu_and_gpu_proofs_both_verify_with_equal_sums() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 12, seed);
    proves(&CpuBackend::new(), &srs, &asg, seed);
    let c = CpuBackend::new()
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect("cpu");
    // The witness sums beside the H sum on a second stream, and all five on one.
    for concurrent in [true, false] {
        let gpu = lanes(&dev, concurrent);
        proves(&gpu, &srs, &asg, seed);
        let g = gpu
            .compute(&asg, &srs, &mut ProveReport::default())
            .expect("gpu");
        assert_eq!(c, g, "seed {seed}, concurrent sums {concurrent}");
    }
    // Streamed in chunks that cross page boundaries (96-byte points, 1000 to a chunk):
    // straight from the registered host points with accumulators kept across chunks,
    // then through pinned bounce buffers reducing each chunk.
    for register in [true, false] {
        let streamed = GpuBackend::with_config(
            dev.clone(),
            GpuBackendConfig {
                residency: Residency::Streamed,
                stream_chunk_points: 1000,
                register_streamed_srs: register,
                stream_accumulators: Some(register),
                ..GpuBackendConfig::default()
            },
        );
        let s = streamed
            .compute(&asg, &srs, &mut ProveReport::default())
            .expect("gpu streamed");
        assert_eq!(c, s, "seed {seed}: streamed, registered {register}");
        assert_eq!(srs.host_pins.len(), 1, "registered once, kept with the srs");
    }
    srs.host_pins.clear();
}

// See: #4 (fixed-base precomputation on the resident SRS).
#[test]
fn h_window_table_is_built_once_and_gives_the_same_sums() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 13, seed);
    let plain_bytes = cuzk_gpu::backend::residency::resident_size(&srs);
    let with = GpuBackend::new(dev.clone());
    let without = GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            h_table_max_bytes: Some(0),
            ..GpuBackendConfig::default()
        },
    );
    if std::env::var_os("CUZK_GPU_H_TABLE").is_some()
        || std::env::var_os("CUZK_GPU_MSM_C").is_some()
    {
        support::skip("CUZK_GPU_H_TABLE or CUZK_GPU_MSM_C is set");
        return;
    }
    // Preloading builds the table (H has 2^13 - 1 points: a table of several rows pays).
    assert!(with.preload(&srs).expect("preload") > plain_bytes);
    assert_eq!(without.preload(&srs).expect("preload"), plain_bytes);
    proves(&with, &srs, &asg, seed);
    proves(&without, &srs, &asg, seed);
    let a = with
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect("gpu with table");
    let b = without
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect("gpu without table");
    let c = CpuBackend::new()
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect("cpu");
    assert_eq!(a, c, "seed {seed}: with the table");
    assert_eq!(b, c, "seed {seed}: without the table");
    assert_eq!(with.srs_uploads(), 1);
    assert!(with.h_table(&srs).is_some_and(|t| t.rows() > 1));
    assert_eq!(without.h_table(&srs), None);
    // A build that fails (an injected launch error) leaves the table unbuilt for good and
    // the proves going without it.
    let failing = GpuBackend::new(dev.clone());
    failing.inject_fault(ProveStage::HTable);
    proves(&failing, &srs, &asg, seed);
    assert_eq!(failing.h_table(&srs), None);
    proves(&failing, &srs, &asg, seed + 1);
    assert_eq!(failing.h_table(&srs), None);
}

#[test]
fn srs_stays_resident_across_proofs() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 11, seed);
    let b = GpuBackend::new(dev.clone());
    proves(&b, &srs, &asg, seed);
    proves(&b, &srs, &asg, seed + 1);
    assert_eq!(b.srs_uploads(), 1);
    assert!(b.resident_bytes() > 0);
    let before = b.resident_bytes();
    assert_eq!(b.evict_all(), before);
    assert_eq!(b.resident_bytes(), 0);
    let bytes = b.preload(&srs).expect("preload");
    assert_eq!(bytes, b.resident_bytes());
    assert_eq!(b.srs_uploads(), 2);
    proves(&b, &srs, &asg, seed + 2);
    assert_eq!(b.srs_uploads(), 2);
}

/// Preloading makes every worker's slot, staging the witness only, so the first proves
/// make no device or pinned buffer: a deferred assignment (a, b, c on the device) proves
/// in them and the pinned bytes stay what preload made. See: #17.
#[test]
fn preload_makes_the_worker_slots_that_proves_use() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let lg = 11;
    let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("circuit");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let fb = cuzk_gpu::GpuFixedBase::new(dev.clone());
    let srs = paramgen::generate(c, &mut rng, &fb).expect("paramgen").srs;
    let r1cs = Arc::new(cuzk_groth16::recorded::R1cs::record(c).expect("records"));
    let b = GpuBackend::new(dev.clone());
    assert_eq!((b.slots_made(), b.host_pinned_bytes()), (0, 0));
    b.preload(&srs).expect("preload");
    let workers = GpuBackendConfig::default().workers;
    assert_eq!(b.slots_made(), workers);
    let pinned = b.host_pinned_bytes();
    assert!(pinned > 0);
    for k in 0..3 {
        let asg = r1cs
            .assign_deferred(c.with_witness_seed(seed ^ k))
            .expect("assigns");
        proves(&b, &srs, &asg, seed + k);
    }
    assert_eq!(b.slots_made(), workers);
    assert_eq!(
        b.host_pinned_bytes(),
        pinned,
        "no buffer made by the proves"
    );
}

#[test]
fn srs_over_budget_is_streamed() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 10, seed);
    let config = |budget| GpuBackendConfig {
        vram_budget_bytes: Some(budget),
        stream_chunk_points: 257,
        ..GpuBackendConfig::default()
    };
    // Room for the streamed arena and one full slot, not for the SRS.
    let costs = GpuBackend::with_config(dev.clone(), config(u64::MAX)).costs_of(&srs);
    let b = GpuBackend::with_config(dev.clone(), config(costs.plan_streamed + costs.slot_full));
    proves(&b, &srs, &asg, seed);
    assert_eq!(b.srs_uploads(), 0);
    assert_eq!(b.preload(&srs).expect("streamed"), 0);
    let fit = b.chosen_fit().expect("chosen");
    assert!(
        !fit.srs_resident && !fit.lean && fit.workers == 1,
        "{fit:?}"
    );
    assert!(b.vram_used_bytes() <= b.vram_budget_bytes());
}

// See: #4 (a device error fails the partition, not the device).
#[test]
fn injected_fault_fails_one_prove_then_device_recovers() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 10, seed);
    // Resident proves of 2^10 run the witness sums on a second stream by default: a fault
    // in either stream's sums, and in the sums on one stream.
    for (residency, stage, concurrent) in [
        (Residency::Resident, ProveStage::MsmL, None),
        (Residency::Resident, ProveStage::MsmH, None),
        (Residency::Resident, ProveStage::MsmBG2, Some(false)),
        (Residency::Resident, ProveStage::NttH, None),
        (Residency::Streamed, ProveStage::MsmBG2, None),
        (Residency::Auto, ProveStage::Upload, None),
    ] {
        let b = GpuBackend::with_config(
            dev.clone(),
            GpuBackendConfig {
                residency,
                stream_chunk_points: 300,
                concurrent_sums: concurrent,
                ..GpuBackendConfig::default()
            },
        );
        b.inject_fault(stage);
        let err = b
            .compute(&asg, &srs, &mut ProveReport::default())
            .expect_err("fault injected");
        match err {
            BackendError::Device { stage: s, .. } => assert_eq!(s, stage),
            other => panic!("{stage}: expected a device error, got {other:?}"),
        }
        // Token and slot were released: two more proves (both slots) succeed.
        proves(&b, &srs, &asg, seed);
        proves(&b, &srs, &asg, seed + 1);
    }
}

#[test]
fn two_threads_prove_concurrently_on_one_backend() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 14, seed);
    let asg2 = synthesize(
        SyntheticCircuit::with_log_n(14, seed, SyntheticShape::default())
            .expect("circuit")
            .with_witness_seed(seed ^ 7),
    )
    .expect("synthesis");
    let b = GpuBackend::new(dev.clone());
    assert!(b.owns_compute_token());
    std::thread::scope(|s| {
        let t1 = s.spawn(|| {
            for i in 0..3 {
                proves(&b, &srs, &asg, seed + i);
            }
        });
        let t2 = s.spawn(|| {
            for i in 0..3 {
                proves(&b, &srs, &asg2, seed + 10 + i);
            }
        });
        t1.join().expect("thread 1");
        t2.join().expect("thread 2");
    });
    assert_eq!(b.srs_uploads(), 1);
}

// See: #29. A critical lane is a second backend on the card's high-priority streams with
// a token and budget of its own: it proves while the main backend's token is held and
// while the main backend proves a larger circuit, and both give the CPU's sums.
#[test]
fn critical_lane_proves_beside_the_main_backend_with_the_cpus_sums() {
    let Some(dev) = device() else { return };
    critical_lane_beside_main(&dev, dev.critical().expect("critical streams"));
}

// See: #29. The same with the main backend yielding to the lane (`device/gate.rs`): its
// streams wait at their yield points while the lane proves, and the sums stay the CPU's.
#[test]
fn a_yielding_critical_lane_proves_beside_the_main_backend_with_the_cpus_sums() {
    let Some(dev) = device() else { return };
    let critical = dev.critical_yielding().expect("critical streams and gate");
    critical_lane_beside_main(&dev, critical);
}

// See: #29. A held gate stops the main stream at its yield point, and lowering it (from
// the host on drop, or from the critical stream) lets it go on.
#[test]
fn a_held_yield_gate_stops_the_main_stream_until_it_is_lowered() {
    let Some(dev) = device() else { return };
    let critical = dev.critical_yielding().expect("critical streams and gate");
    assert!(
        dev.hold_gate().is_none(),
        "only a critical handle holds the gate"
    );
    use cuzk_gpu::device::gate::GateHold;
    // Raises the gate, checks that the main stream waits at its yield point while the
    // critical stream runs on, lowers it with `lower` (which keeps the hold or drops it),
    // and checks that the main stream goes on within a second.
    let passed = |lower: &dyn Fn(GateHold) -> Option<GateHold>| {
        let hold = critical.hold_gate().expect("a gate");
        dev.yield_point().expect("yield point");
        let ev = dev.timing_event().expect("event");
        dev.record(&ev).expect("record");
        critical
            .yield_point()
            .expect("a critical handle never waits");
        let crit_ev = critical.timing_event().expect("event");
        critical.record(&crit_ev).expect("record");
        critical
            .wait_event(&crit_ev)
            .expect("the critical stream runs on");
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert!(
            !dev.event_done(&ev).expect("query"),
            "the main stream passed a raised gate"
        );
        let kept = lower(hold);
        let t = std::time::Instant::now();
        while !dev.event_done(&ev).expect("query") {
            assert!(
                t.elapsed() < std::time::Duration::from_secs(1),
                "the main stream still waits a second after the gate was lowered"
            );
            std::thread::yield_now();
        }
        drop(kept);
    };
    // Lowered by dropping the hold (the host).
    passed(&|h| {
        drop(h);
        None
    });
    // Lowered by the critical stream, the hold still alive.
    passed(&|h| {
        critical.lower_gate_after(&h).expect("lower on the stream");
        Some(h)
    });
    // A lowered gate does not stop the main stream.
    dev.yield_point().expect("yield point");
    dev.sync_compute().expect("the main stream runs on");
    // A hold kept too long is lowered by the watchdog: the main stream waits about
    // HOLD_LIMIT, then goes on.
    let limit = cuzk_gpu::device::gate::HOLD_LIMIT;
    let hold = critical.hold_gate().expect("a gate");
    let t = std::time::Instant::now();
    dev.yield_point().expect("yield point");
    let ev = dev.timing_event().expect("event");
    dev.record(&ev).expect("record");
    while !dev.event_done(&ev).expect("query") {
        assert!(
            t.elapsed() < limit + std::time::Duration::from_secs(1),
            "the watchdog did not lower a stale hold"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(
        t.elapsed() + std::time::Duration::from_millis(100) >= limit,
        "the main stream went on after {:?}, before the hold was stale",
        t.elapsed()
    );
    drop(hold);
}

fn critical_lane_beside_main(dev: &Arc<Device>, critical: Arc<Device>) {
    let dev = dev.clone();
    let seed = seed();
    assert!(
        critical.priority() <= dev.priority(),
        "critical priority {} is not above the main {}",
        critical.priority(),
        dev.priority()
    );
    let second = critical.lane().expect("a second critical stream");
    assert_eq!(
        second.priority(),
        critical.priority(),
        "lanes keep the priority"
    );
    let (big_srs, big_asg) = circuit(&dev, 17, seed);
    let (small_srs, small_asg) = circuit(&dev, 11, seed ^ 3);
    let cpu = CpuBackend::new();
    let want_big = cpu
        .compute(&big_asg, &big_srs, &mut ProveReport::default())
        .expect("cpu");
    let want_small = cpu
        .compute(&small_asg, &small_srs, &mut ProveReport::default())
        .expect("cpu");
    let main = GpuBackend::new(dev.clone());
    let lane = GpuBackend::with_config(
        critical,
        GpuBackendConfig {
            workers: 1,
            vram_budget_bytes: Some(256 << 20),
            ..GpuBackendConfig::default()
        },
    );

    // The main backend's token held: the lane does not wait for it.
    {
        let _held = main.compute_token().acquire();
        proves(&lane, &small_srs, &small_asg, seed);
    }
    let compute = |b: &GpuBackend, srs: &Srs, asg: &Assignment| {
        b.compute(asg, srs, &mut ProveReport::default())
            .unwrap_or_else(|e| panic!("seed {seed}: {} failed: {e}", b.name()))
    };
    let start = std::sync::Barrier::new(2);
    std::thread::scope(|s| {
        let big = s.spawn(|| {
            start.wait();
            (0..3)
                .map(|_| compute(&main, &big_srs, &big_asg))
                .collect::<Vec<_>>()
        });
        let small = s.spawn(|| {
            start.wait();
            (0..6)
                .map(|_| compute(&lane, &small_srs, &small_asg))
                .collect::<Vec<_>>()
        });
        for got in big.join().expect("main thread") {
            assert_eq!(got, want_big, "seed {seed}: main backend");
        }
        for got in small.join().expect("lane thread") {
            assert_eq!(got, want_small, "seed {seed}: critical lane");
        }
    });
    proves(&main, &big_srs, &big_asg, seed);
    assert!(
        lane.vram_used_bytes() <= 256 << 20,
        "the lane kept to its budget"
    );
}

#[test]
fn assignment_of_another_circuit_is_a_mismatch() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, _) = circuit(&dev, 10, seed);
    let other = synthesize(
        SyntheticCircuit::with_log_n(11, seed, SyntheticShape::default())
            .expect("circuit")
            .with_witness_seed(seed),
    )
    .expect("synthesis");
    let err = GpuBackend::new(dev.clone())
        .compute(&other, &srs, &mut ProveReport::default())
        .expect_err("2^11 witness against 2^10 parameters");
    assert!(matches!(err, BackendError::Mismatch { .. }), "{err:?}");
}

// ---- cuzk-groth16's shared prove tests on every backend present (issue #19). ----

/// One GPU backend for the shared prove tests (they run at once on its two slots), or
/// `None` without a device.
fn shared_gpu() -> Option<&'static GpuBackend> {
    static GPU: std::sync::OnceLock<Option<GpuBackend>> = std::sync::OnceLock::new();
    GPU.get_or_init(|| match cuzk_gpu::device_count() {
        Ok(n) if n > 0 => Some(GpuBackend::new(
            Device::open(0).expect("a device is present but does not open"),
        )),
        _ => None,
    })
    .as_ref()
}

/// Runs one body on the CPU backend and, with a CUDA device, on the GPU backend:
/// `backend_test!(name, |b: &dyn Backend| …)`, as cuzk-groth16's own macro does for the CPU.
macro_rules! backend_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cpu() {
                let backend = cuzk_groth16::CpuBackend::new();
                ($body)(&backend as &dyn cuzk_groth16::Backend);
            }
            #[test]
            fn gpu() {
                let Some(backend) = crate::shared_gpu() else {
                    crate::support::skip("no CUDA device");
                    return;
                };
                ($body)(backend as &dyn cuzk_groth16::Backend);
            }
        }
    };
}

/// The prove tests every backend must pass (cuzk-groth16's testkit), on both backends.
mod prove_backends {
    cuzk_groth16::for_each_backend_test!(backend_test);
}
