//! Parsing Filecoin requests from a real sealed 2 KiB sector: every kind parses, names its
//! own parameter file and synthesizes a circuit whose public inputs are exactly the ones
//! the verifier will use; every malformed payload fails with an error naming its field.
//! See: #6.

use base64::Engine as _;
use cuzk_filecoin::{parse, FilecoinKind, PoRepVariant, SectorSize};
use cuzk_groth16::{KindError, ProofRequest};

fn field_of(kind: FilecoinKind, req: &ProofRequest) -> &'static str {
    match parse(kind, req) {
        Err(KindError::InvalidField { field, reason }) => {
            eprintln!("{kind}: invalid {field}: {reason}");
            field
        }
        Err(other) => panic!("{kind}: expected InvalidField, got {other}"),
        Ok(_) => panic!("{kind}: a malformed request was accepted"),
    }
}

fn wrapper(req: &ProofRequest) -> serde_json::Value {
    serde_json::from_slice(&req.vanilla_proof).expect("c1.json is JSON")
}

#[test]
fn every_kind_parses_and_names_its_own_parameters() {
    let sector = crate::common::sector_2k();
    let mut files = Vec::new();
    for kind in FilecoinKind::ALL {
        let req = sector.request(kind).expect("request");
        let proof = parse(kind, &req).unwrap_or_else(|e| panic!("{kind}: {e}"));
        assert_eq!(
            proof.circuit_id(),
            cuzk_filecoin::circuit_id(kind, SectorSize::S2KiB)
        );
        assert_eq!(
            proof.num_partitions(),
            1,
            "{kind} at 2 KiB has one partition"
        );
        let path = proof.params_path(std::path::Path::new("/params"));
        let expected = cuzk_filecoin::params_file_name(kind, SectorSize::S2KiB).expect("name");
        assert_eq!(path, std::path::Path::new("/params").join(&expected));
        let shape = cuzk_filecoin::params::CircuitShape::of(kind, SectorSize::S2KiB);
        let inputs = proof.public_inputs(0).expect("public inputs");
        assert_eq!(
            inputs.len() + 1,
            shape.inputs,
            "{kind} public inputs (plus ONE)"
        );
        files.push(expected);
    }
    // The SnapDeals trap: the update circuit has its own file, not PoRep's.
    assert!(
        files[1].starts_with("v28-empty-sector-update-"),
        "{}",
        files[1]
    );
    files.sort();
    files.dedup();
    assert_eq!(files.len(), 4);
}

#[test]
fn post_circuits_take_the_verifiers_public_inputs() {
    let sector = crate::common::sector_2k();
    let synth = cuzk_groth16::Synthesizer::default();
    for kind in [FilecoinKind::WindowPoSt, FilecoinKind::WinningPoSt] {
        let proof = parse(kind, &sector.request(kind).expect("request")).expect("parse");
        let asg = proof.synthesize(&synth, 0).expect("synthesize");
        let shape = cuzk_filecoin::params::CircuitShape::of(kind, SectorSize::S2KiB);
        eprintln!(
            "{kind}: rows {} inputs {} aux {}",
            asg.n_rows(),
            asg.input_assignment.len(),
            asg.aux_assignment.len()
        );
        assert_eq!(
            asg.n_rows(),
            shape.constraints + shape.inputs,
            "{kind} rows"
        );
        assert_eq!(asg.aux_assignment.len(), shape.aux, "{kind} aux");
        let inputs = proof.public_inputs(0).expect("inputs");
        assert_eq!(
            asg.input_assignment[1..],
            inputs[..],
            "{kind}: circuit inputs differ from the verifier's"
        );
        assert!(
            proof.synthesize(&synth, 1).is_err(),
            "{kind} has no partition 1"
        );
    }
}

#[test]
fn malformed_porep_payloads_name_their_field() {
    let sector = crate::common::sector_2k();
    let good = sector.request(FilecoinKind::PoRep).expect("request");
    let k = FilecoinKind::PoRep;
    let with = |f: &dyn Fn(&mut ProofRequest)| {
        let mut r = good.clone();
        f(&mut r);
        r
    };
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proof.clear())),
        "vanilla_proof"
    );
    let half = good.vanilla_proof.len() / 2;
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proof.truncate(half))),
        "vanilla_proof"
    );
    // Bad base64 in Phase1Out.
    let mut w = wrapper(&good);
    w["Phase1Out"] = serde_json::json!("not base64 at all!");
    let bad_b64 = serde_json::to_vec(&w).expect("json");
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proof = bad_b64.clone())),
        "vanilla_proof.Phase1Out"
    );
    // Truncated C1 output inside valid base64.
    let b64 = base64::engine::general_purpose::STANDARD;
    let inner = b64
        .decode(w_str(&wrapper(&good), "Phase1Out"))
        .expect("base64");
    let mut w = wrapper(&good);
    w["Phase1Out"] = serde_json::json!(b64.encode(&inner[..inner.len() / 2]));
    let truncated = serde_json::to_vec(&w).expect("json");
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proof = truncated.clone())),
        "vanilla_proof.Phase1Out"
    );
    // A 2 KiB C1 sent as an 8 MiB proof (registered_proof 6 = StackedDrg8MiBV1_1).
    assert_eq!(
        field_of(k, &with(&|r| r.registered_proof = 6)),
        "sector_size"
    );
    assert_eq!(
        field_of(
            k,
            &with(&|r| {
                r.registered_proof = 6;
                r.sector_size = 8 << 20;
            })
        ),
        "vanilla_proof"
    );
    let mut w = wrapper(&good);
    w["SectorSize"] = serde_json::json!(8u64 << 20);
    let claims_8m = serde_json::to_vec(&w).expect("json");
    assert_eq!(
        field_of(
            k,
            &with(&|r| {
                r.registered_proof = 6;
                r.sector_size = 8 << 20;
                r.vanilla_proof = claims_8m.clone();
            })
        ),
        "vanilla_proof"
    );
    // Same size, other version (V1 instead of V1_1), and unknown numbers.
    assert_eq!(
        field_of(k, &with(&|r| r.registered_proof = 0)),
        "registered_proof"
    );
    assert_eq!(
        field_of(k, &with(&|r| r.registered_proof = 99)),
        "registered_proof"
    );
    // 10 and 15 are the 2 KiB synthetic and non-interactive proofs; this C1 is neither.
    for other_variant in [10, 15] {
        assert_eq!(
            field_of(k, &with(&|r| r.registered_proof = other_variant)),
            "registered_proof"
        );
    }
    assert_eq!(
        field_of(k, &with(&|r| r.sector_size = 8 << 20)),
        "sector_size"
    );
    assert_eq!(field_of(k, &with(&|r| r.miner_id += 1)), "miner_id");
    assert_eq!(
        field_of(k, &with(&|r| r.sector_number += 1)),
        "sector_number"
    );
    // A PoSt vanilla proof sent as a C1.
    let post = sector
        .request(FilecoinKind::WindowPoSt)
        .expect("request")
        .vanilla_proofs[0]
        .clone();
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proof = post.clone())),
        "vanilla_proof"
    );
}

fn w_str<'a>(v: &'a serde_json::Value, key: &str) -> &'a str {
    v[key].as_str().expect("string field")
}

#[test]
fn malformed_post_payloads_name_their_field() {
    let sector = crate::common::sector_2k();
    let snap = sector
        .request(FilecoinKind::SnapDeals)
        .expect("request")
        .vanilla_proofs[0]
        .clone();
    for kind in [FilecoinKind::WindowPoSt, FilecoinKind::WinningPoSt] {
        let good = sector.request(kind).expect("request");
        let other = if kind == FilecoinKind::WindowPoSt {
            FilecoinKind::WinningPoSt
        } else {
            FilecoinKind::WindowPoSt
        };
        let other_vanilla = sector.request(other).expect("request").vanilla_proofs;
        let with = |f: &dyn Fn(&mut ProofRequest)| {
            let mut r = good.clone();
            f(&mut r);
            r
        };
        assert_eq!(
            field_of(kind, &with(&|r| r.randomness.truncate(31))),
            "randomness"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.randomness.push(0))),
            "randomness"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.randomness = vec![0xff; 32])),
            "randomness"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.vanilla_proofs.clear())),
            "vanilla_proofs"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.vanilla_proofs[0].truncate(100))),
            "vanilla_proofs"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.vanilla_proofs = other_vanilla.clone())),
            "vanilla_proofs"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.vanilla_proofs = vec![snap.clone()])),
            "vanilla_proofs"
        );
        // Valid-looking values the vanilla proofs were not made for.
        assert_eq!(
            field_of(kind, &with(&|r| r.randomness[0] ^= 1)),
            "vanilla_proofs"
        );
        assert_eq!(
            field_of(kind, &with(&|r| r.sector_size = 2048 * 2)),
            "sector_size"
        );
    }
    let window = sector.request(FilecoinKind::WindowPoSt).expect("request");
    let mut r = window.clone();
    r.registered_proof = 0; // a WinningPoSt number
    assert_eq!(field_of(FilecoinKind::WindowPoSt, &r), "registered_proof");
    let mut r = window;
    r.vanilla_proofs = vec![r.vanilla_proofs[0].clone(); 2]; // the same sector twice
    assert_eq!(field_of(FilecoinKind::WindowPoSt, &r), "vanilla_proofs");
}

#[test]
fn malformed_snap_payloads_name_their_field() {
    let sector = crate::common::sector_2k();
    let good = sector.request(FilecoinKind::SnapDeals).expect("request");
    let k = FilecoinKind::SnapDeals;
    let post = sector
        .request(FilecoinKind::WindowPoSt)
        .expect("request")
        .vanilla_proofs;
    let with = |f: &dyn Fn(&mut ProofRequest)| {
        let mut r = good.clone();
        f(&mut r);
        r
    };
    assert_eq!(
        field_of(k, &with(&|r| r.comm_r_old.truncate(31))),
        "comm_r_old"
    );
    assert_eq!(
        field_of(k, &with(&|r| r.comm_r_new = vec![0; 32])),
        "comm_r_new"
    );
    assert_eq!(
        field_of(k, &with(&|r| r.comm_d_new = vec![0xff; 32])),
        "comm_d_new"
    );
    assert_eq!(field_of(k, &with(&|r| r.comm_d_new.clear())), "comm_d_new");
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proofs.clear())),
        "vanilla_proofs"
    );
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proofs = post.clone())),
        "vanilla_proofs"
    );
    assert_eq!(
        field_of(k, &with(&|r| r.vanilla_proofs[0].truncate(64))),
        "vanilla_proofs"
    );
    // Commitments the vanilla proofs do not open.
    assert_eq!(
        field_of(k, &with(&|r| r.comm_r_new[0] ^= 1)),
        "vanilla_proofs"
    );
    assert_eq!(
        field_of(k, &with(&|r| r.registered_proof = 5)),
        "registered_proof"
    );
}

/// Synthetic and non-interactive C1 outputs parse into their own partition counts (1 and
/// 13 at 2 KiB) over the same circuit and parameter file as interactive PoRep, and their
/// public inputs have the circuit's shape. See: #18.
#[test]
fn every_porep_variant_parses_onto_the_one_porep_circuit() {
    let k = FilecoinKind::PoRep;
    crate::common::params_2k(k); // the SnarkPack key beside the parameters
    let expected_file = cuzk_filecoin::params_file_name(k, SectorSize::S2KiB).expect("name");
    let shape = cuzk_filecoin::params::CircuitShape::of(k, SectorSize::S2KiB);
    for (variant, partitions) in [
        (PoRepVariant::Interactive, 1),
        (PoRepVariant::Synthetic, 1),
        (PoRepVariant::NonInteractive, 13),
    ] {
        let sector = crate::common::sector_2k_of(variant);
        let proof = parse(k, &sector.request(k).expect("request"))
            .unwrap_or_else(|e| panic!("{variant}: {e}"));
        assert_eq!(proof.num_partitions(), partitions, "{variant}");
        assert_eq!(proof.circuit_id(), "porep-2k", "{variant}");
        let path = proof.params_path(std::path::Path::new("/p"));
        assert_eq!(path, std::path::Path::new("/p").join(&expected_file));
        let last = proof.public_inputs(partitions - 1).expect("public inputs");
        assert_eq!(last.len() + 1, shape.inputs, "{variant} public inputs");
    }
    // Partitions draw distinct challenges.
    let ni = crate::common::sector_2k_of(PoRepVariant::NonInteractive);
    let proof = parse(k, &ni.request(k).expect("request")).expect("parse");
    assert_ne!(proof.public_inputs(0).ok(), proof.public_inputs(1).ok());
}

/// A non-interactive C1 sent under another seal proof names `registered_proof`; without
/// the SnarkPack key in the parameter directory it is refused at parse, naming the file.
/// See: #18.
#[test]
fn non_interactive_porep_needs_its_snarkpack_key() {
    let k = FilecoinKind::PoRep;
    let sector = crate::common::sector_2k_of(PoRepVariant::NonInteractive);
    let good = sector.request(k).expect("request");
    for other in [0, 5, 10] {
        let mut r = good.clone();
        r.registered_proof = other;
        r.sector_size = 0;
        assert_eq!(
            field_of(k, &r),
            "registered_proof",
            "registered_proof {other}"
        );
    }
    let empty = crate::common::cache_dir().join(format!("no-params-{}", std::process::id()));
    std::fs::create_dir_all(&empty).expect("mkdir");
    let err = cuzk_filecoin::parse_in(k, &good, &empty)
        .err()
        .expect("refused without the key");
    let _ = std::fs::remove_dir(&empty);
    let text = err.to_string();
    assert!(
        matches!(err, KindError::Other(_)) && text.contains("v28-fil-inner-product-v1.srs"),
        "{text}"
    );
}
