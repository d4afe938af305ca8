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

/// The backend holds no more device memory than its budget.
fn holds_its_budget(b: &GpuBackend) {
    assert!(
        b.vram_used_bytes() <= b.vram_budget_bytes(),
        "used {} of {}",
        b.vram_used_bytes(),
        b.vram_budget_bytes()
    );
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
        holds_its_budget(&b);
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
    holds_its_budget(&b);
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
        holds_its_budget(&b);
        assert_eq!(b.slots_made(), 1);
        // How many calls found their a, b, c sent by the previous prove (timing decides);
        // a full slot never hands over (`handover.rs`).
        if !lean {
            assert_eq!(b.abc_handovers(), 0, "a full slot handed a, b, c over");
        }
        println!(
            "lean {lean}: a, b, c of {} of {} calls handed over",
            b.abc_handovers(),
            asgs.len()
        );
    }
}

// Two kinds on one device (a PoRep beside a WinningPoSt): each shape keeps its own mode,
// a smaller shape proved between the larger one's calls never adds a slot beside it, and
// the larger one's streamed chunk stays the one its budget chose. See: #26, #29.
#[test]
fn a_smaller_shape_between_a_larger_ones_proves_in_its_slot_and_budget() {
    let Some(dev) = device() else { return };
    let seed = seed();
    // 2^21 points: more than one chunk of `half`, so the budget's chunk differs from the
    // configured one (a 2^14 SRS fits in one chunk of either and is held resident).
    let (big_srs, big) = circuit(&dev, 21, seed);
    let (small_srs, small) = circuit(&dev, 9, seed ^ 7);
    let half = cuzk_gpu::backend::MIN_STREAM_CHUNK;
    // Room for the large shape's streamed arena (chunks of `half`) and one lean slot, and
    // the small shape's SRS resident beside them.
    let costs = with_budget(&dev, u64::MAX, half).costs_of(&big_srs);
    let small_costs = with_budget(&dev, u64::MAX, half).costs_of(&small_srs);
    let budget = costs.plan_streamed + costs.slot_lean + small_costs.srs;
    let b = with_budget(&dev, budget, 2 * half);
    let cpu = |asg, srs| {
        CpuBackend::new()
            .compute(asg, srs, &mut ProveReport::default())
            .expect("cpu")
    };
    let (cpu_big, cpu_small) = (cpu(&big, &big_srs), cpu(&small, &small_srs));
    let chosen = |b: &GpuBackend| b.chosen_fit().expect("a mode was chosen");
    let gpu = b
        .compute(&big, &big_srs, &mut ProveReport::default())
        .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    assert!(gpu == cpu_big, "seed {seed}: large sums differ");
    let first = chosen(&b);
    assert!(
        first.lean && first.workers == 1 && !first.srs_resident && first.chunk == half,
        "{first:?} under {budget}"
    );
    std::thread::scope(|s| {
        for t in 0..2 {
            let (b, big, small, big_srs, small_srs) = (&b, &big, &small, &big_srs, &small_srs);
            let (cpu_big, cpu_small) = (&cpu_big, &cpu_small);
            s.spawn(move || {
                for i in 0..3 {
                    let (asg, srs, want) = match (t + i) % 2 {
                        0 => (small, small_srs, cpu_small),
                        _ => (big, big_srs, cpu_big),
                    };
                    let got = b
                        .compute(asg, srs, &mut ProveReport::default())
                        .unwrap_or_else(|e| panic!("seed {seed} thread {t} call {i}: {e}"));
                    assert!(got == *want, "seed {seed} thread {t} call {i}: sums differ");
                }
            });
        }
    });
    assert_eq!(chosen(&b), first, "the large shape's mode stays");
    assert_eq!(b.slots_made(), 1);
    holds_its_budget(&b);
    proves(&b, &big_srs, &big, seed);
    proves(&b, &small_srs, &small, seed);
}

// The ring of a streamed SRS's sums takes one or two more chunk buffers where the budget
// leaves room beside the mode (`deeper_ring`): none with no room (8 slots), two with
// plenty (16), and every prove's sums equal the CPU's. See: #26.
#[test]
fn room_beside_the_mode_deepens_the_ring_and_it_proves_what_the_cpu_proves() {
    let Some(dev) = device() else { return };
    let seed = seed();
    let chunk = cuzk_gpu::backend::MIN_STREAM_CHUNK;
    let (srs, asg) = circuit(&dev, 21, seed);
    let config = |budget| GpuBackendConfig {
        vram_budget_bytes: Some(budget),
        stream_chunk_points: chunk,
        residency: cuzk_gpu::Residency::Streamed,
        ..GpuBackendConfig::default()
    };
    let costs = GpuBackend::with_config(dev.clone(), config(u64::MAX)).costs_of(&srs);
    let buf = (chunk as u64) * 192;
    let cpu = CpuBackend::new()
        .compute(&asg, &srs, &mut ProveReport::default())
        .expect("cpu");
    for (extra, want) in [(0, Some(8)), (buf + buf / 2, None), (40 * buf, Some(16))] {
        let budget = costs.plan_streamed + costs.slot_full + extra;
        let b = GpuBackend::with_config(dev.clone(), config(budget));
        for round in 0..2 {
            let gpu = b
                .compute(&asg, &srs, &mut ProveReport::default())
                .unwrap_or_else(|e| panic!("seed {seed} extra {extra} round {round}: {e}"));
            assert!(
                gpu == cpu,
                "seed {seed} extra {extra} round {round}: sums differ"
            );
        }
        let fit = b.chosen_fit().expect("a mode was chosen");
        assert!(
            !fit.srs_resident && !fit.lean && fit.workers == 1,
            "{fit:?}"
        );
        let slots = b.last_ring_slots();
        // Between the two, the H sum's kept buckets may take the room first.
        match want {
            Some(n) => assert_eq!(slots, n, "extra {extra}"),
            None => assert!(matches!(slots, 8 | 12 | 16), "{slots}"),
        }
        println!("extra {extra} bytes: a ring of {slots} slots");
        assert!(b.vram_used_bytes() <= b.vram_budget_bytes());
        proves(&b, &srs, &asg, seed);
    }
}
