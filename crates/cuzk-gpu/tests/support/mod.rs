//! What the device test binaries share: the device, or a recorded skip without one (see
//! [`skip`]), and the random seed (`CUZK_TEST_SEED` to repeat a run).

#![allow(dead_code)] // each binary uses its own subset

use std::sync::Arc;

use cuzk_gpu::Device;

/// Device 0, or `None` after [`skip`]ping with `no CUDA device`; a device that is present
/// but does not open fails the test.
pub fn device() -> Option<Arc<Device>> {
    match cuzk_gpu::device_count() {
        Ok(n) if n > 0 => match Device::open(0) {
            Ok(d) => Some(d),
            Err(e) => panic!("a device is present but does not open: {e}"),
        },
        _ => {
            skip("no CUDA device");
            None
        }
    }
}

/// Prints `skipped: {reason}` (cargo's capture hides it, and the test counts as passed) and,
/// when `CUZK_SKIP_LOG` names a file, as `.ci/run` sets it, appends `{test}\t{reason}` to
/// it in one write, so that the run can say what did not run and why. Keep `reason` the
/// same at every site that skips for the same cause: `.ci/run` counts per reason.
pub fn skip(reason: &str) {
    println!("skipped: {reason}");
    let Some(log) = std::env::var_os("CUZK_SKIP_LOG") else {
        return;
    };
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!("{test}\t{reason}\n");
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
    // A skip that cannot be counted must not pass unseen either.
    if let Err(e) = written {
        panic!(
            "CUZK_SKIP_LOG {}: {e}",
            std::path::Path::new(&log).display()
        );
    }
}

/// `CUZK_TEST_SEED` when set, else fresh from the clock.
pub fn seed() -> u64 {
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
