//! cuzk-groth16's integration tests as one binary (each module was its own, and every
//! binary links bellperson and blst again).

#[macro_use]
mod common;
mod paramgen_bellperson;
#[cfg(feature = "bellperson-native")]
mod prove_cpu;
mod srs_load;
mod synthesis;
