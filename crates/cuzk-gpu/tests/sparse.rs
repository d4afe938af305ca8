//! a, b, c on the device (`cuzk_gpu::ops::sparse`) against the CPU products
//! (`Assignment::abc`, the oracle) on fresh random matrices and witnesses — sizes 0, 1,
//! powers of two and not, empty rows, rows on both sides of the long-row split, zero
//! coefficients, zero and one values — and on a recorded synthetic circuit. Without a CUDA
//! device each test prints `skipped: no CUDA device` and passes. Each case prints one JSON
//! line with the matrices' device bytes and the products' device time; with
//! `CUZK_SPARSE_BENCH_LG=k,…` recorded synthetic circuits of 2^k rows are timed too.

use std::sync::Arc;

use cuzk_gpu::device::layout::{as_bytes, as_bytes_mut, FR_BYTES};
use cuzk_gpu::ops::sparse::{products_enqueue, MatricesLayout, LONG_ROW};
use cuzk_gpu::{Device, VramArena};
use cuzk_groth16::recorded::{R1cs, INPUT_COLUMN};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{synthesize, Assignment, Scalar};
use ff::Field;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

mod support;
use support::{device, seed};

/// A value that is 0, 1 or random, mostly bits as in the Filecoin circuits.
fn value(rng: &mut ChaCha20Rng) -> Scalar {
    match rng.gen_range(0..10) {
        0..=3 => Scalar::ZERO,
        4..=7 => Scalar::ONE,
        _ => Scalar::random(&mut *rng),
    }
}

/// A random recording of `rows` constraints over `n_inputs` inputs (ONE included) and
/// `n_aux` aux, with a deferred assignment of a random witness. Rows are mostly 0 to 3
/// entries; some sit at the long-row split (LONG_ROW and LONG_ROW + 1) and some are long
/// (up to 1,500). The coefficient table holds ONE, zero, small powers of two and randoms.
fn random_case(rng: &mut ChaCha20Rng, rows: usize, n_inputs: usize, n_aux: usize) -> Assignment {
    let mut coeffs = vec![Scalar::ONE, Scalar::ZERO];
    coeffs.extend((0..20).map(|k| Scalar::from(1u64 << k)));
    coeffs.extend((0..10).map(|_| Scalar::random(&mut *rng)));
    let matrices = [0, 1, 2].map(|_| {
        let (mut row_start, mut col, mut coeff) = (vec![0u32], Vec::new(), Vec::new());
        for _ in 0..rows {
            let len = match rng.gen_range(0..1000) {
                0..=4 => rng.gen_range(LONG_ROW as usize + 2..1500),
                5..=9 => LONG_ROW as usize,
                10..=14 => LONG_ROW as usize + 1,
                _ => rng.gen_range(0..4),
            };
            for _ in 0..len {
                let c = if n_aux == 0 || rng.gen_range(0..8) == 0 {
                    rng.gen_range(0..n_inputs) as u32 | INPUT_COLUMN
                } else {
                    rng.gen_range(0..n_aux) as u32
                };
                col.push(c);
                coeff.push(match rng.gen_range(0..4) {
                    0 => 0,
                    _ => rng.gen_range(0..coeffs.len()) as u32,
                });
            }
            row_start.push(col.len() as u32);
        }
        (row_start, col, coeff)
    });
    let r1cs = Arc::new(R1cs::from_csr(n_inputs, n_aux, coeffs, matrices).expect("consistent"));
    let mut inputs = vec![Scalar::ONE];
    inputs.extend((1..n_inputs).map(|_| value(rng)));
    let aux = (0..n_aux).map(|_| value(rng)).collect();
    r1cs.with_witness(inputs, aux).expect("fits")
}

/// The device's a, b, c of deferred `asg` equal the CPU's; prints the case's figures.
fn check(dev: &Arc<Device>, what: &str, asg: &Assignment) {
    let r1cs = asg.deferred().expect("a deferred assignment");
    let layout = MatricesLayout::of(r1cs).expect("fits 32-bit indices");
    let rows = asg.n_rows();
    assert_eq!(layout.n_rows(), rows);
    let (n_in, n_aux) = (asg.input_assignment.len(), asg.aux_assignment.len());
    let slack = 8 * 256;
    let bytes = layout.bytes() + (n_in + n_aux + 3 * rows + 4) * FR_BYTES + slack;
    let arena = VramArena::new(dev.clone(), bytes).expect("arena");
    let mats = arena.alloc(layout.bytes()).expect("matrices region");
    let inputs = arena.alloc(n_in * FR_BYTES).expect("inputs");
    let aux = arena.alloc(n_aux.max(1) * FR_BYTES).expect("aux");
    // One spare row past the end: the products must leave it alone.
    let out = [0, 1, 2].map(|_| arena.alloc((rows + 1) * FR_BYTES).expect("out"));
    let t = std::time::Instant::now();
    layout.upload(dev, r1cs, &mats).expect("upload matrices");
    let upload_ms = t.elapsed().as_secs_f64() * 1e3;
    dev.upload(&inputs, as_bytes(&asg.input_assignment))
        .expect("upload inputs");
    if n_aux > 0 {
        dev.upload(&aux, as_bytes(&asg.aux_assignment))
            .expect("upload aux");
    }
    let junk = vec![0x5au8; (rows + 1) * FR_BYTES];
    for o in &out {
        dev.upload(o, &junk).expect("fill out");
    }
    let outs = [&out[0], &out[1], &out[2]];
    // Once untimed (the first launch loads the module), then timed.
    products_enqueue(dev, &layout, &mats, &inputs, &aux, outs).expect("products");
    let (start, end) = (dev.timing_event().unwrap(), dev.timing_event().unwrap());
    dev.record(&start).unwrap();
    products_enqueue(dev, &layout, &mats, &inputs, &aux, outs).expect("products");
    dev.record(&end).unwrap();
    dev.sync_compute().expect("products ran");
    let ms = dev.elapsed(&start, &end).unwrap().as_secs_f64() * 1e3;
    let want = asg.abc_values().expect("cpu products");
    for (name, (o, want)) in ["a", "b", "c"]
        .iter()
        .zip(out.iter().zip([&want.a, &want.b, &want.c]))
    {
        let mut got = vec![Scalar::ZERO; rows + 1];
        dev.download(as_bytes_mut(&mut got), o).expect("download");
        let bad = (0..rows).find(|&i| got[i] != want[i]);
        assert!(
            bad.is_none(),
            "{what}: {name}[{}] differs of {rows} rows",
            bad.unwrap_or(0)
        );
        assert!(
            as_bytes(&got[rows..]).iter().all(|&b| b == 0x5a),
            "{what}: {name} was written past its {rows} rows"
        );
    }
    println!(
        "{{\"op\":\"sparse_products\",\"case\":\"{what}\",\"rows\":{rows},\"entries\":{},\"coeffs\":{},\"matrices_bytes\":{},\"upload_ms\":{upload_ms:.1},\"gpu\":\"{}\",\"ms\":{ms:.3}}}",
        r1cs.entries(),
        r1cs.coeffs().len(),
        layout.bytes(),
        dev.name(),
    );
}

#[test]
fn products_match_the_cpu_on_random_matrices() {
    let Some(dev) = device() else { return };
    let seed = seed();
    println!("seed {seed} (CUZK_TEST_SEED)");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    for (rows, n_inputs, n_aux) in [
        (0, 1, 0),
        (1, 1, 1),
        (1, 3, 0),
        (2, 2, 5),
        (1 << 10, 4, 1 << 10),
        ((1 << 10) + 1, 9, 777),
        ((1 << 12) - 1, 1, 5000),
        (30_011, 33, 40_000),
        (1 << 16, 300, 1 << 16),
    ] {
        let asg = random_case(&mut rng, rows, n_inputs, n_aux);
        check(
            &dev,
            &format!("random {rows}x({n_inputs}+{n_aux}) seed {seed}"),
            &asg,
        );
    }
}

#[test]
fn products_match_the_cpu_on_a_recorded_circuit() {
    let Some(dev) = device() else { return };
    let mut sizes = vec![
        (10u32, SyntheticShape::default()),
        (
            13,
            SyntheticShape {
                bit_fraction: 0.5,
                b_aux_fraction: 0.6,
                ..SyntheticShape::default()
            },
        ),
    ];
    let bench = std::env::var("CUZK_SPARSE_BENCH_LG").unwrap_or_default();
    for lg in bench.split(',').filter_map(|s| s.trim().parse().ok()) {
        sizes.push((lg, SyntheticShape::default()));
    }
    for (lg, shape) in sizes {
        let c = SyntheticCircuit::with_log_n(lg, 7, shape).expect("valid size");
        let r1cs = Arc::new(R1cs::record(c).expect("records"));
        let inst = c.with_witness_seed(99);
        let asg = r1cs.assign_deferred(inst).expect("assigns");
        if lg <= 13 {
            // The oracle itself: the recorded products are synthesize's a, b, c.
            let plain = synthesize(inst).expect("synthesizes");
            assert_eq!(*asg.evaluated().expect("evaluates"), plain);
        }
        check(&dev, &format!("synthetic 2^{lg}"), &asg);
    }
}

/// The GPU backend proves a deferred assignment to the proof of the evaluated one (same r,
/// s): with room, a, b, c on the device from matrices uploaded once and kept; without
/// room (a VRAM budget of 0, the SRS streamed), a, b, c on the CPU; with the SRS streamed
/// and room, on the CPU too (`AbcBy::Host`: its staging holds them anyway), alone or
/// beside other calls; the proofs the same either way. See: #17, #26.
/// A 2^12 synthetic circuit of a fresh seed, its parameters (made on the GPU) and its
/// recorded shape.
struct Recorded {
    seed: u64,
    c: SyntheticCircuit,
    rng: ChaCha20Rng,
    srs: cuzk_groth16::Srs,
    r1cs: Arc<R1cs>,
}

fn recorded(dev: &Arc<Device>) -> Recorded {
    let seed = seed();
    let c = SyntheticCircuit::with_log_n(12, seed, SyntheticShape::default()).expect("valid");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let fb = cuzk_gpu::GpuFixedBase::new(dev.clone());
    let srs = cuzk_groth16::paramgen::generate(c, &mut rng, &fb)
        .expect("paramgen")
        .srs;
    let r1cs = Arc::new(R1cs::record(c).expect("records"));
    Recorded {
        seed,
        c,
        rng,
        srs,
        r1cs,
    }
}

/// A backend config that streams the SRS within a VRAM budget of `budget` bytes.
fn streamed_within(budget: u64) -> cuzk_gpu::GpuBackendConfig {
    cuzk_gpu::GpuBackendConfig {
        residency: cuzk_gpu::Residency::Streamed,
        vram_budget_bytes: Some(budget),
        ..cuzk_gpu::GpuBackendConfig::default()
    }
}

#[test]
fn the_gpu_backend_proves_deferred_assignments_as_evaluated() {
    use cuzk_gpu::GpuBackend;
    use cuzk_groth16::{prove, verify, Backend};
    let Some(dev) = device() else { return };
    let Recorded {
        seed,
        c,
        mut rng,
        srs,
        r1cs,
    } = recorded(&dev);
    let roomy = GpuBackend::new(dev.clone());
    // Room for one full worker with a streamed SRS, none for the matrices.
    let costs = GpuBackend::with_config(dev.clone(), streamed_within(u64::MAX)).costs_of(&srs);
    let tight = GpuBackend::with_config(
        dev.clone(),
        streamed_within(costs.plan_streamed + costs.slot_full),
    );
    // Room for everything but a resident SRS (which `Residency::Streamed` costs at
    // u64::MAX / 4): with u64::MAX it would be chosen resident, a, b, c on the device.
    let streamed = GpuBackend::with_config(dev.clone(), streamed_within(u64::MAX / 8));
    let mut cases = Vec::new();
    for w in [1u64, 2] {
        let inst = c.with_witness_seed(seed ^ w);
        let evaluated = synthesize(inst).expect("synthesizes");
        let deferred = r1cs.assign_deferred(inst).expect("assigns");
        let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
        for b in [&roomy, &tight, &streamed] {
            let (want, _) = prove(&evaluated, &srs, r, s, b).expect("proves evaluated");
            let (got, _) = prove(&deferred, &srs, r, s, b).expect("proves deferred");
            assert_eq!(got, want, "seed {seed} witness {w} {}", b.name());
            let ok = verify(&srs.vk, &got, &deferred.input_assignment[1..]).expect("verifier");
            assert!(ok, "seed {seed} witness {w}: proof rejected");
        }
        cases.push((deferred, r, s));
    }
    assert_eq!(roomy.matrices_uploads(), 1, "uploaded once, then kept");
    assert!(roomy.matrices_device_bytes() > 0);
    assert_eq!(
        roomy.host_abc_calls(),
        0,
        "a resident srs: a, b, c on the device"
    );
    assert_eq!(tight.matrices_uploads(), 0, "no room: evaluated on the cpu");
    assert_eq!(tight.matrices_device_bytes(), 0);
    assert_eq!(tight.host_abc_calls(), 2);
    let mode = streamed.chosen_fit().expect("a mode chosen");
    assert!(!mode.srs_resident && !mode.lean, "{mode}");
    assert_eq!(
        streamed.matrices_uploads(),
        0,
        "streamed srs: a, b, c on the cpu"
    );
    assert_eq!(streamed.host_abc_calls(), 2);
    // Four threads at once, each call's a, b, c by the cpu.
    let want: Vec<_> = cases
        .iter()
        .map(|(d, r, s)| prove(d, &srs, *r, *s, &roomy).expect("proves").0)
        .collect();
    std::thread::scope(|sc| {
        for t in 0..4 {
            let (cases, want, streamed, srs) = (&cases, &want, &streamed, &srs);
            sc.spawn(move || {
                for i in 0..3 {
                    let k = (t + i) % cases.len();
                    let (d, r, s) = &cases[k];
                    let (got, _) = prove(d, srs, *r, *s, streamed)
                        .unwrap_or_else(|e| panic!("seed {seed} thread {t} call {i}: {e}"));
                    assert_eq!(got, want[k], "seed {seed} thread {t} call {i}");
                }
            });
        }
    });
    assert_eq!(streamed.host_abc_calls(), 2 + 12);
    assert_eq!(streamed.matrices_uploads(), 0);
}

/// Matrices handed to the backend at preload (the engine does so with the shape it records
/// then) are loaded then, once, and the first prove of a deferred assignment loads none;
/// with the SRS streamed the host evaluates a, b, c, so preload loads nothing. See: #26
/// (the first call's load held a 32 GiB PoRep's slot for ~15.7 s).
#[test]
fn matrices_loaded_at_preload_serve_the_first_prove() {
    use cuzk_gpu::GpuBackend;
    use cuzk_groth16::{prove, Backend};
    let Some(dev) = device() else { return };
    let Recorded {
        seed,
        c,
        mut rng,
        srs,
        r1cs,
    } = recorded(&dev);
    let resident = GpuBackend::new(dev.clone());
    resident.preload_srs(&srs).expect("srs preloaded");
    let bytes = resident
        .preload_matrices(&srs, &r1cs)
        .expect("matrices preloaded");
    assert!(bytes > 0);
    assert_eq!(resident.matrices_uploads(), 1);
    let inst = c.with_witness_seed(seed ^ 5);
    let evaluated = synthesize(inst).expect("synthesizes");
    let deferred = r1cs.assign_deferred(inst).expect("assigns");
    let (r, s) = (Scalar::random(&mut rng), Scalar::random(&mut rng));
    let (want, _) = prove(&evaluated, &srs, r, s, &resident).expect("proves evaluated");
    let (got, _) = prove(&deferred, &srs, r, s, &resident).expect("proves deferred");
    assert_eq!(got, want, "seed {seed}");
    assert_eq!(resident.matrices_uploads(), 1, "loaded once, at preload");
    assert_eq!(resident.host_abc_calls(), 0);

    let streamed = GpuBackend::with_config(dev.clone(), streamed_within(u64::MAX / 8));
    streamed.preload_srs(&srs).expect("srs preloaded");
    let bytes = streamed
        .preload_matrices(&srs, &r1cs)
        .expect("nothing to load");
    assert_eq!(bytes, 0);
    assert_eq!(streamed.matrices_uploads(), 0);
}
