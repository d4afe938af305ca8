//! Non-interactive PoRep without proving its 13 partitions of 2^22 (minutes each on the
//! CPU): cuzk's public inputs of every partition of every PoRep variant are exactly the
//! ones filecoin-proofs' `verify_seal` checks (`get_seal_inputs`), and cuzk's SnarkPack
//! aggregate of 13 proofs verifies with the verifier key filecoin-proofs derives from the
//! same key file, under the transcript and padding `verify_seal` uses for NI-PoRep. The
//! full NI-PoRep proof through the engine is in `prove_2k.rs`. See: #18.

use bellperson::groth16::aggregate::{verify_aggregate_proof, AggregateProof, AggregateVersion};
use bellperson::groth16::{create_random_proof, generate_random_parameters, prepare_verifying_key};
use bellperson::{Circuit, ConstraintSystem, SynthesisError};
use blstrs::{Bls12, Scalar};
use cuzk_filecoin::testgen::{hex32, TestSector};
use cuzk_filecoin::{parse, FilecoinKind, PoRepVariant};
use ff::Field;
use filecoin_proofs_api::{seal, RegisteredSealProof, SectorId};
use sha2::{Digest, Sha256};

fn seal_inputs(sector: &TestSector, proof: RegisteredSealProof) -> Vec<Vec<Scalar>> {
    let m = &sector.manifest;
    let hex = |h: &str| hex32(h).expect("hex");
    seal::get_seal_inputs(
        proof,
        hex(&m.comm_r),
        hex(&m.comm_d),
        cuzk_filecoin::prover_id(m.miner_id),
        SectorId::from(m.sector_number),
        hex(&m.ticket),
        hex(&m.seed),
    )
    .expect("filecoin-proofs derives the seal inputs")
}

#[test]
fn every_porep_variant_proves_the_public_inputs_verify_seal_checks() {
    let k = FilecoinKind::PoRep;
    crate::common::params_2k(k); // the SnarkPack key NI-PoRep parsing looks for
    for variant in PoRepVariant::ALL {
        let sector = crate::common::sector_2k_of(variant);
        let registered =
            match cuzk_filecoin::Registered::from_abi(k, sector.manifest.porep_registered_proof) {
                Ok(cuzk_filecoin::Registered::Seal(p)) => p,
                other => panic!("{variant}: {other:?}"),
            };
        let proof = parse(k, &sector.request(k).expect("request")).expect("parse");
        let expected = seal_inputs(&sector, registered);
        assert_eq!(
            proof.num_partitions(),
            expected.len(),
            "{variant} partitions"
        );
        for (idx, want) in expected.iter().enumerate() {
            let ours = proof.public_inputs(idx).expect("public inputs");
            assert!(
                &ours == want,
                "{variant}: partition {idx} public inputs differ"
            );
        }
    }
}

/// `a · b = c` with `c` public: a circuit small enough to prove 13 times in milliseconds.
#[derive(Clone)]
struct Product {
    a: Option<Scalar>,
    b: Option<Scalar>,
}

impl Circuit<Scalar> for Product {
    fn synthesize<CS: ConstraintSystem<Scalar>>(self, cs: &mut CS) -> Result<(), SynthesisError> {
        let a = cs.alloc(|| "a", || self.a.ok_or(SynthesisError::AssignmentMissing))?;
        let b = cs.alloc(|| "b", || self.b.ok_or(SynthesisError::AssignmentMissing))?;
        let c = cs.alloc_input(
            || "c",
            || {
                Ok(self.a.ok_or(SynthesisError::AssignmentMissing)?
                    * self.b.ok_or(SynthesisError::AssignmentMissing)?)
            },
        )?;
        cs.enforce(|| "a * b = c", |lc| lc + a, |lc| lc + b, |lc| lc + c);
        Ok(())
    }
}

#[test]
fn snarkpack_aggregates_verify_with_filecoin_proofs_key_and_transcript() {
    let param_dir = crate::common::param_dir();
    let srs = cuzk_filecoin::testgen::gen_aggregation_key(&param_dir).expect("test key");
    let rng = &mut rand::rngs::OsRng;
    let params = generate_random_parameters::<Bls12, _, _>(Product { a: None, b: None }, rng)
        .expect("parameters");
    // 13 proofs: an NI-PoRep's partition count at 2 KiB, padded to 16.
    let mut proofs = Vec::new();
    let mut inputs = Vec::new();
    for i in 1..=13u64 {
        let (a, b) = (Scalar::from(i), Scalar::from(i + 100));
        let c = Product {
            a: Some(a),
            b: Some(b),
        };
        proofs.push(create_random_proof(c, &params, rng).expect("prove"));
        inputs.push(vec![a * b]);
    }
    let comm_r = [7u8; 32];
    let bytes =
        cuzk_filecoin::snarkpack::aggregate_and_verify(&srs, &proofs, &inputs, &params.vk, &comm_r)
            .expect("cuzk aggregates and its own check passes");

    // filecoin-proofs' verifier key for 16 proofs, from the same file.
    let config = RegisteredSealProof::StackedDrg2KiBV1_2_Feat_NonInteractivePoRep.as_v1_config();
    let srs_vk = filecoin_proofs::caches::get_stacked_srs_verifier_key::<
        filecoin_proofs::SectorShape2KiB,
    >(&config, 16)
    .expect("filecoin-proofs reads the key");
    let aggregate = AggregateProof::<Bls12>::read(std::io::Cursor::new(&bytes)).expect("decode");
    let pvk = prepare_verifying_key(&params.vk);
    let mut padded = inputs.clone();
    while padded.len() < 16 {
        padded.push(inputs[12].clone());
    }
    let transcript: [u8; 32] = Sha256::digest(comm_r).into();
    let verify = |inputs: &[Vec<Scalar>], transcript: &[u8]| {
        verify_aggregate_proof(
            &srs_vk,
            &pvk,
            rand::rngs::OsRng,
            inputs,
            &aggregate,
            transcript,
            AggregateVersion::V2,
        )
        .unwrap_or(false)
    };
    assert!(
        verify(&padded, &transcript),
        "filecoin-proofs' key rejects cuzk's aggregate"
    );
    let other: [u8; 32] = Sha256::digest([8u8; 32]).into();
    assert!(
        !verify(&padded, &other),
        "aggregate accepted under another comm_r"
    );
    let mut wrong = padded.clone();
    wrong[3][0] += Scalar::ONE;
    assert!(
        !verify(&wrong, &transcript),
        "aggregate accepted with wrong inputs"
    );

    // cuzk's own check refuses a proof that does not match its inputs.
    let mut bad_inputs = inputs.clone();
    bad_inputs[0][0] += Scalar::ONE;
    assert!(cuzk_filecoin::snarkpack::aggregate_and_verify(
        &srs,
        &proofs,
        &bad_inputs,
        &params.vk,
        &comm_r
    )
    .is_err());
}
