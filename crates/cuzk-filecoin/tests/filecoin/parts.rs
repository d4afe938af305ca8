//! The witness-only paths on real 2 KiB requests: a partition synthesized the plain way,
//! through the recording with the whole circuit's witness, and through the recording with
//! the witness part by part in parallel (PoRep's challenges; PoSt's sectors through the
//! extensible witness system) gives one and the same assignment, for every partition of
//! every kind; PoRep's shape, recorded by the first call from its prefix and one challenge,
//! is the whole circuit's recording; with a, b, c deferred to the backend, the assignment is
//! the same once evaluated; SnapDeals' mirrored update circuit (its challenges as parts) is
//! the update circuit. The proofs themselves are checked end to end in `prove_2k.rs`.
//! See: #17.

use cuzk_filecoin::params::CircuitShape;
use cuzk_filecoin::snap::{check_mirror, MirrorCheck};
use cuzk_filecoin::testgen::FakeRequest;
use cuzk_filecoin::{parse, FilecoinKind, ParseOptions, SectorSize};
use cuzk_groth16::witness::Counts;
use cuzk_groth16::{CachedPath, Synthesizer};

/// Every partition of `kind`'s 2 KiB request, on every path, against plain synthesis;
/// returns the synthesizer, which holds the shape recorded on the way.
fn paths_agree(kind: FilecoinKind) -> Synthesizer {
    let sector = crate::common::sector_2k();
    let proof = parse(kind, &sector.request(kind).expect("request")).expect("parse");
    let synth = Synthesizer::default();
    let plain_way = synth.with_path(CachedPath::Plain);
    let whole_way = synth.with_path(CachedPath::Whole);
    for k in 0..proof.num_partitions() {
        let plain = proof.synthesize(&plain_way, k).expect("plain");
        // The first call of the circuit id records it; later ones assign.
        for round in 0..2 {
            let parts = proof.synthesize(&synth, k).expect("parts");
            assert!(parts == plain, "{kind} partition {k} round {round}: parts");
            let whole = proof.synthesize(&whole_way, k).expect("whole");
            assert!(whole == plain, "{kind} partition {k} round {round}: whole");
        }
        // The shape is recorded by now: deferred a, b, c evaluate to the plain ones.
        for path in [CachedPath::Parts, CachedPath::Whole] {
            let deferring = synth.with_path(path).with_defer(true);
            let deferred = proof.synthesize(&deferring, k).expect("deferred");
            assert!(deferred.is_deferred(), "{kind} partition {k} {path:?}");
            let evaluated = deferred.evaluated().expect("evaluates");
            assert!(
                *evaluated == plain,
                "{kind} partition {k} {path:?}: deferred"
            );
        }
    }
    synth
}

#[test]
fn porep_challenges_in_parallel_give_the_plain_assignment() {
    let synth = paths_agree(FilecoinKind::PoRep);
    let sector = crate::common::sector_2k();
    let proof = parse(
        FilecoinKind::PoRep,
        &sector.request(FilecoinKind::PoRep).expect("request"),
    )
    .expect("parse");
    let l = synth
        .layout(&proof.circuit_id())
        .expect("PoRep partitions split into challenges");
    // The prefix: replica_id, its 255 bits, comm_d, comm_r, comm_r_last, comm_c and the
    // Poseidon check comm_r = H(comm_c ‖ comm_r_last); inputs ONE, replica_id, comm_d, comm_r.
    assert_eq!(
        l.prefix,
        Counts {
            inputs: 4,
            aux: 571,
            constraints: 571
        }
    );
    assert!(l.n_parts >= 2, "{l:?}");
}

/// A PoRep partition's shape recorded from its prefix and one challenge, the challenges'
/// rows repeated with their columns moved into each challenge's range, is the very
/// recording of the whole partition circuit. See: #17.
#[test]
fn porep_recorded_from_one_challenge_is_the_whole_recording() {
    let sector = crate::common::sector_2k();
    let request = sector.request(FilecoinKind::PoRep).expect("request");
    let proof = parse(FilecoinKind::PoRep, &request).expect("parse");
    for k in 0..proof.num_partitions() {
        let diff = cuzk_filecoin::porep::compare_recordings(
            &request,
            &crate::common::param_dir(),
            cuzk_filecoin::ParseOptions::default(),
            k,
        )
        .expect("both recordings");
        assert_eq!(diff, None, "partition {k}");
    }
}

#[test]
fn post_sectors_through_the_extensible_witness_give_the_plain_assignment() {
    let window = paths_agree(FilecoinKind::WindowPoSt);
    let winning = paths_agree(FilecoinKind::WinningPoSt);
    // Recorded from one sector and the witness made sector by sector (a 32 GiB WindowPoSt
    // partition is 2,349 of them).
    let l = recorded_layout(&window, FilecoinKind::WindowPoSt);
    assert_eq!(l.n_parts, 2, "{l:?}");
    assert_eq!((l.prefix.inputs, l.prefix.aux), (1, 0), "ONE alone: {l:?}");
    // WinningPoSt's circuit is its one sector's 66 challenges as 66 one-challenge sectors.
    let l = recorded_layout(&winning, FilecoinKind::WinningPoSt);
    assert_eq!(l.n_parts, 66, "{l:?}");
    assert_eq!(
        l.stride.inputs, 2,
        "comm_r and the challenge per sector: {l:?}"
    );
}

/// The parts layout `synth` recorded for `kind`'s 2 KiB circuit (in [`paths_agree`]),
/// checked to cover the circuit's measured counts.
fn recorded_layout(synth: &Synthesizer, kind: FilecoinKind) -> cuzk_groth16::sublayout::SubLayout {
    let sector = crate::common::sector_2k();
    let proof = parse(kind, &sector.request(kind).expect("request")).expect("parse");
    let l = synth
        .layout(&proof.circuit_id())
        .unwrap_or_else(|| panic!("{kind}: no parts layout"));
    let shape = CircuitShape::of(kind, SectorSize::S2KiB);
    let total = Counts {
        inputs: shape.inputs,
        aux: shape.aux,
        constraints: shape.constraints,
    };
    assert_eq!(l.total(), total, "{kind}");
    l
}

/// A SnapDeals partition through the mirrored update circuit's challenges
/// (`snap/parts.rs`): after the first call records the update circuit, the witness is
/// computed challenge by challenge and is the plain one. See: #17.
#[test]
fn snap_deals_challenges_in_parallel_give_the_plain_assignment() {
    let synth = paths_agree(FilecoinKind::SnapDeals);
    let l = recorded_layout(&synth, FilecoinKind::SnapDeals);
    // 10 challenges below 16 MiB; the inputs (ONE, k_and_h_select, comm_r_old,
    // comm_d_new, comm_r_new) all sit in the prefix.
    assert_eq!(l.n_parts, 10, "{l:?}");
    assert_eq!((l.prefix.inputs, l.stride.inputs), (5, 0), "{l:?}");
}

/// The mirror of the update circuit, over all its challenges, records as the very
/// constraint system of the circuit: counts, coefficients and every row. See: #17.
#[test]
fn snap_deals_mirror_records_as_the_update_circuit() {
    assert_eq!(snap_2k_mirror(MirrorCheck::Recordings), None);
}

/// At 512 MiB (86 challenges, 128 apex leaves, 16 partitions) a fake request's mirrored
/// prefix and last challenge add up to the update circuit's counts. See: #17.
#[test]
fn snap_deals_512mib_mirror_counts_as_the_update_circuit() {
    assert_eq!(snap_512mib_last_mirror(MirrorCheck::Counts), None);
}

/// The prefix every SnapDeals partition walks once before its parts replay it: with
/// `apex_por` (the apex tree's 127 SHA-256 hashes at 512 MiB and at 32 GiB, and the
/// partition path) through the native mirror, the same values and constraint count as
/// through the gadgets, at 2 KiB and on the last partition of a fake 512 MiB request.
#[test]
fn snap_deals_native_prefix_walks_as_the_gadgets() {
    assert_eq!(snap_2k_mirror(MirrorCheck::NativePrefix), None);
    assert_eq!(snap_512mib_last_mirror(MirrorCheck::NativePrefix), None);
}

/// `check` of the 2 KiB test sector's SnapDeals request, partition 0.
fn snap_2k_mirror(check: MirrorCheck) -> Option<String> {
    let sector = crate::common::sector_2k();
    let request = sector.request(FilecoinKind::SnapDeals).expect("request");
    check_mirror(&request, ParseOptions::default(), 0, check).expect("both sides")
}

/// `check` of a fake 512 MiB SnapDeals request's last partition (its bits and digest
/// indices are not zero).
fn snap_512mib_last_mirror(check: MirrorCheck) -> Option<String> {
    let fake = FakeRequest::generate(FilecoinKind::SnapDeals, SectorSize::S512MiB, 7)
        .expect("a fake 512 MiB request");
    let opts = ParseOptions { fake_ok: true };
    check_mirror(&fake.request, opts, 15, check).expect("both sides")
}

/// Every challenge of every partition of the 2 KiB PoRep request: the native witness (its
/// SHA-256 parts without linear combinations) is the real one-challenge circuit's, value
/// for value and constraint for constraint. See: #17.
#[test]
fn porep_native_witness_is_the_circuits_on_every_2k_challenge() {
    let sector = crate::common::sector_2k();
    let request = sector.request(FilecoinKind::PoRep).expect("request");
    let proof = parse(FilecoinKind::PoRep, &request).expect("parse");
    for k in 0..proof.num_partitions() {
        let diff = cuzk_filecoin::porep::compare_native_witness(
            &request,
            &crate::common::param_dir(),
            cuzk_filecoin::ParseOptions::default(),
            k,
            None,
        )
        .expect("both witnesses");
        assert_eq!(diff, None, "partition {k}");
    }
}

/// A challenge of a fake 32 GiB request (11 layers, 14 parents, 30 tree-D levels, trees C
/// and R of 8-ary Poseidon): the native witness is the real circuit's. Witness generation
/// checks no constraint, so a fake serves. See: #17.
#[test]
fn porep_native_witness_is_the_circuits_on_a_32g_challenge() {
    use cuzk_filecoin::testgen::FakeRequest;
    let fake = FakeRequest::generate(FilecoinKind::PoRep, cuzk_filecoin::SectorSize::S32GiB, 3)
        .expect("a fake 32 GiB request");
    let diff = cuzk_filecoin::porep::compare_native_witness(
        &fake.request,
        &cuzk_filecoin::default_param_dir(),
        cuzk_filecoin::ParseOptions { fake_ok: true },
        9,
        Some(17),
    )
    .expect("both witnesses");
    assert_eq!(diff, None);
}

/// Every sector of the 2 KiB WindowPoSt and WinningPoSt requests (2 sectors; 66
/// one-challenge sectors): the native witness (its Poseidon hashes without linear
/// combinations) is the real one-sector circuit's, value for value and constraint for
/// constraint, and it checks its hashes against the verified vanilla proofs. See: #17.
#[test]
fn post_native_witness_is_the_circuits_on_every_2k_sector() {
    let sector = crate::common::sector_2k();
    for (kind, n_sectors) in [
        (FilecoinKind::WindowPoSt, 2),
        (FilecoinKind::WinningPoSt, 66),
    ] {
        let request = sector.request(kind).expect("request");
        let found = cuzk_filecoin::post::compare_native_witness(
            kind,
            &request,
            ParseOptions::default(),
            None,
        )
        .expect("both witnesses");
        assert_eq!(found.difference, None, "{kind}");
        assert_eq!(found.n_sectors, n_sectors, "{kind}");
    }
}

/// Sectors of a fake 32 GiB WindowPoSt request (10 challenges, tree R of 8-ary Poseidon
/// with an 8-ary sub-tree), the first two and the last of its 2,349: the native witness is
/// the real circuit's. Witness generation checks no constraint, so a fake serves. See: #17.
#[test]
fn post_native_witness_is_the_circuits_on_32g_window_sectors() {
    let fake = FakeRequest::generate(FilecoinKind::WindowPoSt, SectorSize::S32GiB, 3)
        .expect("a fake 32 GiB WindowPoSt request");
    let opts = ParseOptions { fake_ok: true };
    for sectors in [0..2, 2348..2349] {
        let found = cuzk_filecoin::post::compare_native_witness(
            FilecoinKind::WindowPoSt,
            &fake.request,
            opts,
            Some(sectors.clone()),
        )
        .expect("both witnesses");
        assert_eq!(found.difference, None, "sectors {sectors:?}");
        assert_eq!(found.n_sectors, sectors.len());
    }
    let beyond = cuzk_filecoin::post::compare_native_witness(
        FilecoinKind::WindowPoSt,
        &fake.request,
        opts,
        Some(2349..2350),
    );
    let Err(err) = beyond else {
        panic!("a sector beyond the partition's 2,349 was compared");
    };
    assert!(err.to_string().contains("sector 2349"), "{err}");
}
