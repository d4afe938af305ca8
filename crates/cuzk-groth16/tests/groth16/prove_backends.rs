//! The prove tests of `cuzk_groth16::testkit::backend_tests` on the CPU backend (cuzk-gpu's
//! tests run them on the GPU backend too), and what only the CPU backend checks.

use cuzk_groth16::testkit::{bellperson_params, srs_from_params, TestCircuit};
use cuzk_groth16::{prove, synthesize, BackendError, ProveError, Scalar};
use ff::Field;

cuzk_groth16::for_each_backend_test!(backend_test);

// See: #26.
#[test]
fn a_released_srs_keeps_its_identity_and_the_cpu_backend_refuses_it() {
    let small = TestCircuit::new(100, 2, false, 53);
    let srs = srs_from_params(&bellperson_params(&small, 9));
    let released = srs.released();
    assert!(released.is_released() && !srs.is_released());
    assert_eq!(released.host_bytes(), 0);
    assert_eq!(released.lens(), srs.lens());
    assert_eq!(released.fingerprint(), srs.fingerprint());
    assert_eq!(
        (released.n_aux(), released.lg_domain()),
        (srs.n_aux(), srs.lg_domain())
    );
    assert_eq!(released.vk, srs.vk);
    // Another SRS of the same circuit has another identity.
    let other = srs_from_params(&bellperson_params(&small, 10));
    assert_ne!(other.fingerprint(), srs.fingerprint());
    let asg = synthesize(small).unwrap();
    assert!(matches!(
        prove(
            &asg,
            &released,
            Scalar::ONE,
            Scalar::ONE,
            &cuzk_groth16::CpuBackend::new()
        ),
        Err(ProveError::Backend(BackendError::SrsReleased))
    ));
}
