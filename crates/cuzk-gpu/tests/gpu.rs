//! Device kernels against the CPU (blstrs and a reference NTT) on fresh random inputs with
//! edge cases; see `cuzk_gpu::check`. Without a CUDA device each test prints
//! `skipped: no CUDA device` and passes.

use std::sync::Arc;

use cuzk_gpu::check::{check_msm, check_ntt, CheckOutcome};
use cuzk_gpu::Device;

fn device() -> Option<Arc<Device>> {
    match cuzk_gpu::device_count() {
        Ok(n) if n > 0 => match Device::open(0) {
            Ok(d) => Some(d),
            Err(e) => panic!("a device is present but does not open: {e}"),
        },
        _ => {
            println!("skipped: no CUDA device");
            None
        }
    }
}

fn seed() -> u64 {
    std::env::var("CUZK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

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
