use super::*;

#[test]
fn args_and_scalars() {
    let a: Vec<String> = "--params p --log-n 10 --seed=3"
        .split(' ')
        .map(String::from)
        .collect();
    let o = parse_args(&a).unwrap();
    assert_eq!((o.log_n, o.seed, o.witness_seed), (10, 3, None));
    assert!(parse_args(&a[..2]).is_err());
    let one = Scalar::ONE.to_bytes_le();
    assert_eq!(parse_scalar(&hex::encode(one), "r").unwrap(), Scalar::ONE);
    assert!(parse_scalar(&"ff".repeat(32), "r").is_err());
    assert!(parse_scalar("00", "r").is_err());
}

/// The parts that run without a GPU, against cuzk's own parameters and CPU prover:
/// the point-count check, the verifying key read from the file, the public inputs.
#[test]
fn cuzk_params_and_cpu_proof() {
    use cuzk_groth16::paramgen::{self, CpuFixedBase};
    use rand_chacha::rand_core::SeedableRng;
    let o = parse_args(
        &[
            "--params",
            "unused",
            "--log-n",
            "10",
            "--seed",
            "1",
            "--witness-seed",
            "9",
        ]
        .map(String::from),
    )
    .unwrap();
    let c = circuit(&o).unwrap();
    assert_eq!((c.seed, c.witness_seed), (1, 9));
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
    let g = paramgen::generate(c, &mut rng, &CpuFixedBase::default()).unwrap();
    let path = std::env::temp_dir().join(format!("ss-bench-test-{}.params", std::process::id()));
    g.srs.save(&path).unwrap();
    let syn = synthesize(c).unwrap();
    assert_eq!(params_counts(&path).unwrap(), syn.counts);
    let other = SyntheticCircuit::with_log_n(10, 2, SyntheticShape::default()).unwrap();
    assert_ne!(
        params_counts(&path).unwrap(),
        synthesize(other).unwrap().counts
    );
    let vk = VerifyingKey::<Bls12>::read(BufReader::new(File::open(&path).unwrap())).unwrap();
    std::fs::remove_file(&path).unwrap();
    let pvk = prepare_verifying_key(&vk);
    let asg = cuzk_groth16::synthesize(c).unwrap();
    let backend = cuzk_groth16::CpuBackend::new();
    let (r, s) = (Scalar::from(3u64), Scalar::from(4u64));
    let (proof, _) = cuzk_groth16::prove(&asg, &g.srs, r, s, &backend).unwrap();
    assert!(verify_proof(&pvk, &proof, &syn.inputs).unwrap());
    assert_eq!(syn.inputs, asg.input_assignment[1..].to_vec());
}
