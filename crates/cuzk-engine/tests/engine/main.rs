//! cuzk-engine's integration tests as one binary (each module was its own, and every
//! binary links the proving stack again).

mod admission;
mod critical_lane;
mod device_backend;
mod device_faults;
mod engine_jobs;
mod gpu_lanes;
mod support;
mod synthesizers;
