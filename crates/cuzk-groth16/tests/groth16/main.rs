//! cuzk-groth16's integration tests as one binary (each module was its own, and every
//! binary links bellperson and blst again).

/// Runs one test body on every backend this crate has, the CPU's:
/// `backend_test!(name, |b: &dyn Backend| …)`. cuzk-gpu's tests run the testkit's prove
/// tests with their own `backend_test!`, which adds the GPU backend.
macro_rules! backend_test {
    ($name:ident, $body:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[test]
            fn cpu() {
                let backend = cuzk_groth16::CpuBackend::new();
                ($body)(&backend as &dyn cuzk_groth16::Backend);
            }
        }
    };
}

mod paramgen_bellperson;
#[cfg(feature = "bellperson-native")]
mod prove_backends;
mod srs_load;
mod synthesis;
