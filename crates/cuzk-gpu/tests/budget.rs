//! The device's memory budget (issue #26): a budget that admits only a streamed SRS and
//! one lean worker still proves, and its sums equal the CPU backend's; a budget below
//! that is refused with both figures; a released SRS proves on the device that holds it
//! and is refused by one that does not; the backend never holds more than its budget.
//! A partition too large for the budget is `BackendError::TooLarge`: the engine fails its
//! job with both figures instead of taking the device out of service (a 16 GiB run at
//! 902540e sent 2^27 partitions to the CPU fallback, 128 GB of host memory in use).
//! Without a CUDA device each test prints `skipped: no CUDA device` and passes.

use std::sync::Arc;

use cuzk_gpu::{Device, GpuBackend, GpuBackendConfig, GpuError};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{
    paramgen, prove, synthesize, verify, Assignment, Backend, BackendError, CpuBackend, ProveError,
    ProveReport, Scalar, Srs,
};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;

mod support;
use support::{device, seed};

/// Parameters (made on the device) and a witness for a synthetic circuit of 2^lg rows.
fn circuit(dev: &Arc<Device>, lg: u32, seed: u64) -> (Srs, Assignment) {
    let c = SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("circuit");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let fb = cuzk_gpu::GpuFixedBase::new(dev.clone());
    let srs = paramgen::generate(c, &mut rng, &fb).expect("paramgen").srs;
    let asg = synthesize(c.with_witness_seed(seed ^ 1)).expect("synthesis");
    (srs, asg)
}

fn with_budget(dev: &Arc<Device>, budget: u64, chunk: usize) -> GpuBackend {
    GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            vram_budget_bytes: Some(budget),
            stream_chunk_points: chunk,
            ..GpuBackendConfig::default()
        },
    )
}

/// A proof with random r, s through `b`, checked by bellperson's verifier.
fn proves(b: &dyn Backend, srs: &Srs, asg: &Assignment, seed: u64) {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed ^ 0x5eed);
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let (proof, _) =
        prove(asg, srs, r, s, b).unwrap_or_else(|e| panic!("seed {seed}: prove failed: {e}"));
    let ok = verify(&srs.vk, &proof, &asg.input_assignment[1..]).expect("verifier input");
    assert!(ok, "seed {seed}: {} proof rejected", b.name());
}

// See: #26.
#[test]
fn a_budget_for_one_lean_worker_proves_what_the_cpu_proves() {
    let Some(dev) = device() else { return };
    let seed = seed();
    for (lg, chunk) in [(10u32, 300usize), (14, 5_001)] {
        let (srs, asg) = circuit(&dev, lg, seed);
        let costs = with_budget(&dev, u64::MAX, chunk).costs_of(&srs);
        // Room for the streamed arena and a lean slot, not a full one.
        assert!(costs.slot_lean < costs.slot_full, "{costs:?}");
        let budget = costs.plan_streamed + costs.slot_lean;
        let b = with_budget(&dev, budget, chunk);
        let cpu = CpuBackend::new()
            .compute(&asg, &srs, &mut ProveReport::default())
            .expect("cpu");
        for round in 0..2 {
            let gpu = b
                .compute(&asg, &srs, &mut ProveReport::default())
                .unwrap_or_else(|e| panic!("seed {seed} 2^{lg} round {round}: {e}"));
            assert!(
                gpu == cpu,
                "seed {seed} 2^{lg} round {round}: sums differ from the cpu"
            );
        }
        let fit = b.chosen_fit().expect("a mode was chosen");
        assert!(fit.lean && !fit.srs_resident && fit.workers == 1, "{fit:?}");
        assert!(
            b.vram_used_bytes() <= b.vram_budget_bytes(),
            "used {} of {}",
            b.vram_used_bytes(),
            b.vram_budget_bytes()
        );
        proves(&b, &srs, &asg, seed);
    }
}

// A budget that one lean slot fits only with the SRS streamed in half the configured
// chunk: the backend streams with that chunk, and proves what the CPU proves. See: #26.
#[test]
fn a_budget_that_fits_only_a_smaller_chunk_streams_with_it() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let half = cuzk_gpu::backend::MIN_STREAM_CHUNK;
    let (srs, asg) = circuit(&dev, 21, seed);
    let costs = with_budget(&dev, u64::MAX, half).costs_of(&srs);
    let budget = costs.plan_streamed + costs.slot_lean;
    let b = with_budget(&dev, budget, 2 * half);
    assert!(
        b.costs_of(&srs).plan_streamed > costs.plan_streamed,
        "a larger chunk needs a larger arena"
    );
    let gpu = b
        .compute(&asg, &srs, &mut ProveReport::default())
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    let fit = b.chosen_fit().expect("a mode was chosen");
    assert!(
        fit.lean && !fit.srs_resident && fit.chunk == half,
        "{fit:?} under {budget}"
    );
    let cpu = CpuBackend::new()
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect("cpu");
    assert!(gpu == cpu, "seed {seed}: sums differ from the cpu");
    assert!(b.vram_used_bytes() <= b.vram_budget_bytes());
    proves(&b, &srs, &asg, seed);
}

// See: #26.
#[test]
fn a_budget_below_one_lean_worker_is_refused_with_both_figures() {
    let Some(dev) = device() else { return };
    let (srs, asg) = circuit(&dev, 10, seed());
    let b = with_budget(&dev, 4096, 300);
    let err = b.preload(&srs).expect_err("no mode fits 4 KiB");
    assert!(
        matches!(err, GpuError::OverBudget { budget: 4096, .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains("needs at least") && text.contains("4096"),
        "{text}"
    );
    // A prove says the same, as a device error of that partition, not a panic.
    let err = b
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect_err("nothing fits");
    assert!(matches!(err, BackendError::TooLarge { .. }), "{err:?}");
    assert!(err.to_string().contains("needs at least"), "{err}");
    assert_eq!(b.vram_used_bytes(), 0);
}

// See: #26.
#[test]
fn a_released_srs_proves_only_where_it_is_resident() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let (srs, asg) = circuit(&dev, 12, seed);
    let released = srs.released();
    assert!(released.is_released() && released.host_bytes() == 0);
    assert_eq!(released.fingerprint(), srs.fingerprint());
    let holder = GpuBackend::new(dev.clone());
    assert!(holder.preload(&srs).expect("preload") > 0);
    assert!(holder.srs_device_bytes(&released) > 0);
    proves(&holder, &released, &asg, seed);
    // A device without the points cannot stream what is not there.
    let other = GpuBackend::with_config(
        dev.clone(),
        GpuBackendConfig {
            residency: cuzk_gpu::Residency::Streamed,
            ..GpuBackendConfig::default()
        },
    );
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let err = prove(
        &asg,
        &released,
        Scalar::random(&mut rng),
        Scalar::random(&mut rng),
        &other,
    )
    .expect_err("released points");
    assert!(
        matches!(err, ProveError::Backend(BackendError::SrsReleased)),
        "{err:?}"
    );
}

// A released SRS with its file streams its points from the file (read and decoded into
// the bounce buffers chunk by chunk, `SrsFile`), on the single-call path and with two
// workers staging ahead of one slot, and proves what the CPU proves; the file truncated
// under it fails the prove with `SrsReleased` (the engine then reads the points back),
// not a panic. See: #26.
#[test]
fn a_released_srs_streams_from_its_file_and_proves_what_the_cpu_proves() {
    let Some(dev) = device() else { return };
    let seed = seed();
    for (lg, chunk, workers) in [(10u32, 300usize, 1usize), (14, 5_001, 2)] {
        let (srs, asg) = circuit(&dev, lg, seed);
        let path =
            std::env::temp_dir().join(format!("cuzk-stream-{}-{lg}.params", std::process::id()));
        srs.save(&path).expect("temp dir is writable");
        let loaded = Srs::load(&path, cuzk_groth16::SrsOptions::default()).expect("loads");
        let released = loaded.released();
        drop(loaded);
        assert!(released.file.is_some(), "the file holds the points");
        let b = GpuBackend::with_config(
            dev.clone(),
            GpuBackendConfig {
                residency: cuzk_gpu::Residency::Streamed,
                stream_chunk_points: chunk,
                workers,
                ..GpuBackendConfig::default()
            },
        );
        assert!(b.streams_srs_from_file(&released));
        let cpu = CpuBackend::new()
            .compute(&asg, &srs, &mut ProveReport::default())
            .expect("cpu");
        std::thread::scope(|s| {
            let calls: Vec<_> = (0..workers)
                .map(|_| s.spawn(|| b.compute(&asg, &released, &mut ProveReport::default())))
                .collect();
            for (w, c) in calls.into_iter().enumerate() {
                let gpu = c
                    .join()
                    .expect("no panic")
                    .unwrap_or_else(|e| panic!("seed {seed} 2^{lg} call {w}: {e}"));
                assert!(
                    gpu == cpu,
                    "seed {seed} 2^{lg} call {w}: sums differ from the cpu"
                );
            }
        });
        proves(&b, &released, &asg, seed);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .expect("opens");
        f.set_len(f.metadata().expect("stat").len() / 2)
            .expect("truncates");
        let err = b
            .compute(&asg, &released, &mut ProveReport::default())
            .expect_err("half the file is gone");
        assert!(matches!(err, BackendError::SrsReleased), "{err:?}");
        let _ = std::fs::remove_file(&path);
    }
}

// Two workers on one slot stage ahead of it (`ahead.rs`): calls from two threads at once,
// deferred assignments whose a, b, c the host evaluates into the stagings, in a lean slot
// and in a full one, every prove equal to the CPU's. See: #26.
#[test]
fn two_workers_on_one_slot_stage_ahead_and_prove_what_the_cpu_proves() {
    use cuzk_groth16::recorded::R1cs;
    let Some(dev) = device() else { return };
    let seed = seed();
    let chunk = 1_000;
    let c = SyntheticCircuit::with_log_n(13, seed, SyntheticShape::default()).expect("circuit");
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(seed);
    let fb = cuzk_gpu::GpuFixedBase::new(dev.clone());
    let srs = paramgen::generate(c, &mut rng, &fb).expect("paramgen").srs;
    let r1cs = Arc::new(R1cs::record(c).expect("records"));
    let asgs: Vec<Assignment> = (0..4u64)
        .map(|w| r1cs.assign_deferred(c.with_witness_seed(seed ^ (w + 3))))
        .collect::<Result<_, _>>()
        .expect("assigns");
    let cpu: Vec<_> = asgs
        .iter()
        .map(|a| {
            CpuBackend::new()
                .compute(a, &srs, &mut ProveReport::default())
                .expect("cpu")
        })
        .collect();
    let streamed = |budget| {
        GpuBackend::with_config(
            dev.clone(),
            GpuBackendConfig {
                vram_budget_bytes: Some(budget),
                stream_chunk_points: chunk,
                residency: cuzk_gpu::Residency::Streamed,
                ..GpuBackendConfig::default()
            },
        )
    };
    let costs = streamed(u64::MAX).costs_of(&srs);
    for (lean, budget) in [
        (true, costs.plan_streamed + costs.slot_lean),
        (false, costs.plan_streamed + costs.slot_full),
    ] {
        let b = streamed(budget);
        std::thread::scope(|s| {
            for t in 0..2 {
                let (b, asgs, cpu, srs) = (&b, &asgs, &cpu, &srs);
                s.spawn(move || {
                    for i in (t..asgs.len()).step_by(2) {
                        let gpu = b
                            .compute(&asgs[i], srs, &mut ProveReport::default())
                            .unwrap_or_else(|e| panic!("seed {seed} lean {lean} #{i}: {e}"));
                        assert!(gpu == cpu[i], "seed {seed} lean {lean} #{i}: sums differ");
                    }
                });
            }
        });
        let fit = b.chosen_fit().expect("a mode was chosen");
        assert!(
            fit.workers == 1 && fit.lean == lean && !fit.srs_resident,
            "{fit:?} under {budget}"
        );
        assert!(b.vram_used_bytes() <= b.vram_budget_bytes());
        assert_eq!(b.slots_made(), 1);
        // How many calls found their a, b, c sent by the previous prove (timing decides).
        println!(
            "lean {lean}: a, b, c of {} of {} calls handed over",
            b.abc_handovers(),
            asgs.len()
        );
    }
}
