//! What the end-to-end tests share with the other test binaries: a skip that `.ci/run`
//! counts.

#[path = "../../../cuzk-gpu/tests/support/skip.rs"]
mod skip_log;
pub use skip_log::skip;
