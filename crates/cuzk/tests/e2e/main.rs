//! The `cuzk` binary and its daemon end to end, as one test binary: each of these modules
//! was its own binary, and linking the whole proving stack four times cost CI minutes.
//! Tests here run in parallel within the binary; each daemon has its own socket, and the
//! shared parameter cache is written atomically.

mod bench_proof;
mod cli_messages;
mod cli_prove;
mod daemon_access;
mod daemon_common;
mod daemon_durable;
mod daemon_health;
mod daemon_interop;
mod daemon_load;
mod daemon_rpc;
mod daemon_shutdown;
mod scaleout;
// The skip that `.ci/run` counts, shared with the other test binaries.
#[path = "../../../cuzk-gpu/tests/support/skip.rs"]
mod support;
