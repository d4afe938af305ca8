//! Fake requests (`cuzk gen request --fake`) at 2 KiB against a real sealed sector's: the
//! same payload structure, circuits of exactly the real shape with the verifier's public
//! inputs, accepted only with `ParseOptions::fake_ok` and refused by the production parse
//! with an error naming the payload. Their proofs cannot verify. See: #17.

use cuzk_filecoin::params::CircuitShape;
use cuzk_filecoin::testgen::{FakeRequest, PayloadShape};
use cuzk_filecoin::{parse, parse_with, FilecoinKind, ParseOptions, SectorSize};
use cuzk_groth16::KindError;

const KINDS: [FilecoinKind; 4] = [
    FilecoinKind::PoRep,
    FilecoinKind::WindowPoSt,
    FilecoinKind::WinningPoSt,
    FilecoinKind::SnapDeals,
];

const FAKE_OK: ParseOptions = ParseOptions { fake_ok: true };

fn fake(kind: FilecoinKind) -> FakeRequest {
    FakeRequest::generate(kind, SectorSize::S2KiB, 5).expect("generate a fake")
}

#[test]
fn fake_2kib_payloads_have_the_real_sectors_structure() {
    let sector = crate::common::sector_2k();
    for kind in KINDS {
        let real = PayloadShape::of(kind, &sector.request(kind).expect("request")).expect("real");
        let ours = PayloadShape::of(kind, &fake(kind).request).expect("fake");
        eprintln!("{kind}: real {real:?}\n{kind}: fake {ours:?}");
        assert_eq!(ours.paths, real.paths, "{kind} Merkle paths");
        assert_eq!(ours.counts, real.counts, "{kind} counts");
        assert_eq!(ours.partitions, real.partitions, "{kind} partitions");
        assert!(ours.uniform && real.uniform, "{kind}");
        // The test sector's WindowPoSt request proves its one sector (the circuit pads the
        // partition with copies); the fake fills the partition, as a real deadline does.
        if kind != FilecoinKind::WindowPoSt {
            assert_eq!(ours.per_partition, real.per_partition, "{kind} challenges");
        }
    }
}

#[test]
fn fake_2kib_partitions_synthesize_to_the_real_circuit_with_the_verifiers_inputs() {
    for kind in KINDS {
        let proof = parse_with(
            kind,
            &fake(kind).request,
            &cuzk_filecoin::default_param_dir(),
            FAKE_OK,
        )
        .unwrap_or_else(|e| panic!("{kind}: the fake does not parse with fake_ok: {e}"));
        assert_eq!(
            proof.circuit_id(),
            cuzk_filecoin::circuit_id(kind, SectorSize::S2KiB)
        );
        let asg = proof
            .synthesize(&cuzk_groth16::Synthesizer::default(), 0)
            .expect("synthesize");
        let shape = CircuitShape::of(kind, SectorSize::S2KiB);
        assert_eq!(
            asg.n_rows(),
            shape.constraints + shape.inputs,
            "{kind} rows"
        );
        assert_eq!(asg.aux_assignment.len(), shape.aux, "{kind} aux");
        assert_eq!(asg.input_assignment.len(), shape.inputs, "{kind} inputs");
        // The challenge positions are the real ones: the packed path bits the circuit
        // computes from the fake's paths are the inputs the verifier derives.
        let inputs = proof.public_inputs(0).expect("inputs");
        assert_eq!(
            asg.input_assignment[1..],
            inputs[..],
            "{kind} public inputs"
        );
    }
}

// See: #29. The 32 GiB WinningPoSt fake synthesizes to the production circuit's counts
// (filecoin-facts: 370,590 constraints, 133 inputs, 375,210 aux), which the GPU's critical
// lane is measured with.
#[test]
fn fake_32gib_winning_post_synthesizes_to_the_real_circuit() {
    let kind = FilecoinKind::WinningPoSt;
    let fake = FakeRequest::generate(kind, SectorSize::S32GiB, 5).expect("generate");
    let proof = parse_with(
        kind,
        &fake.request,
        &cuzk_filecoin::default_param_dir(),
        FAKE_OK,
    )
    .expect("the fake parses with fake_ok");
    let asg = proof
        .synthesize(&cuzk_groth16::Synthesizer::default(), 0)
        .expect("synthesize");
    let shape = CircuitShape::of(kind, SectorSize::S32GiB);
    assert_eq!((shape.constraints, shape.aux), (370_590, 375_210));
    assert_eq!(asg.n_rows(), shape.constraints + shape.inputs, "rows");
    assert_eq!(asg.aux_assignment.len(), shape.aux, "aux");
    let inputs = proof.public_inputs(0).expect("inputs");
    assert_eq!(asg.input_assignment[1..], inputs[..], "public inputs");
}

#[test]
fn the_production_parse_refuses_fakes_naming_the_payload() {
    for kind in KINDS {
        let field = match parse(kind, &fake(kind).request) {
            Err(KindError::InvalidField { field, reason }) => {
                eprintln!("{kind}: invalid {field}: {reason}");
                if kind == FilecoinKind::PoRep {
                    assert!(
                        reason.contains("FAKE"),
                        "the porep error says fake: {reason}"
                    );
                }
                field
            }
            Err(other) => panic!("{kind}: expected InvalidField, got {other}"),
            Ok(_) => panic!("{kind}: the production parse accepted a fake"),
        };
        let expected = match kind {
            FilecoinKind::PoRep => "vanilla_proof",
            _ => "vanilla_proofs",
        };
        assert_eq!(field, expected, "{kind}");
    }
}
