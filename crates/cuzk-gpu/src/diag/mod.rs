//! Diagnostics, behind the `diag` feature: the device self-checks against the CPU
//! ([`check`]), the kernel microbenchmarks ([`bench`](mod@bench)), whole GPU proves
//! timed, checked and fault-injected ([`backend_bench`]), the host side of a prove
//! without a device ([`staging`]), and the random inputs they share ([`testdata`]). `cuzk
//! bench msm|ntt|gpu` and the GPU tests call them; a prove never does.

pub mod backend_bench;
pub mod bench;
pub mod check;
pub mod staging;
pub mod testdata;
