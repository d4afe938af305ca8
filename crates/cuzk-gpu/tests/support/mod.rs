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

mod skip;
pub use skip::skip;

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
