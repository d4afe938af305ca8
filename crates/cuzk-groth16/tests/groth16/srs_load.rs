//! `Srs::load` against files written by bellperson's own `Parameters::write`, and every
//! malformed-file case pinned to its `SrsError` variant, section and offset.

use std::path::PathBuf;

use bellperson::groth16::{generate_random_parameters, Parameters};
use blstrs::{Bls12, Fp, G1Affine};
use cuzk_groth16::synthetic::{SyntheticCircuit, SyntheticShape};
use cuzk_groth16::{Srs, SrsError, SrsOptions};
use ff::Field;
use rand_chacha::rand_core::SeedableRng;

/// Section offsets of a params file, computed from bellperson's lengths.
struct Offsets {
    ic_prefix: usize,
    h_prefix: usize,
    l_prefix: usize,
    a_prefix: usize,
    b_g1_prefix: usize,
    b_g2_prefix: usize,
    end: usize,
}

fn offsets(p: &Parameters<Bls12>) -> Offsets {
    let ic_prefix = 864;
    let h_prefix = ic_prefix + 4 + 96 * p.vk.ic.len();
    let l_prefix = h_prefix + 4 + 96 * p.h.len();
    let a_prefix = l_prefix + 4 + 96 * p.l.len();
    let b_g1_prefix = a_prefix + 4 + 96 * p.a.len();
    let b_g2_prefix = b_g1_prefix + 4 + 96 * p.b_g1.len();
    let end = b_g2_prefix + 4 + 192 * p.b_g2.len();
    Offsets {
        ic_prefix,
        h_prefix,
        l_prefix,
        a_prefix,
        b_g1_prefix,
        b_g2_prefix,
        end,
    }
}

/// bellperson parameters for a small synthetic circuit, and their bytes.
fn bellperson_params(lg: u32, seed: u64) -> (Parameters<Bls12>, Vec<u8>) {
    let circuit =
        SyntheticCircuit::with_log_n(lg, seed, SyntheticShape::default()).expect("valid size");
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let params =
        generate_random_parameters::<Bls12, _, _>(circuit, &mut rng).expect("bellperson generates");
    let mut bytes = Vec::new();
    params.write(&mut bytes).expect("write to memory");
    (params, bytes)
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("cuzk-srs-{}-{name}.params", std::process::id()));
    std::fs::write(&path, bytes).expect("temp dir is writable");
    path
}

fn load(name: &str, bytes: &[u8], check_points: bool) -> Result<Srs, SrsError> {
    let path = temp_file(name, bytes);
    let result = Srs::load(&path, SrsOptions { check_points });
    let _ = std::fs::remove_file(&path);
    result
}

/// An affine G1 point on the curve but outside the prime-order subgroup, uncompressed.
fn off_subgroup_g1() -> [u8; 96] {
    for i in 1u64.. {
        let x = Fp::from(i);
        let rhs = x.square() * x + Fp::from(4u64);
        if let Some(y) = Option::<Fp>::from(rhs.sqrt()) {
            let mut raw = [0u8; 96];
            raw[..48].copy_from_slice(&x.to_bytes_be());
            raw[48..].copy_from_slice(&y.to_bytes_be());
            let p: Option<G1Affine> = G1Affine::from_uncompressed_unchecked(&raw).into();
            if p.is_some_and(|p| !bool::from(p.is_torsion_free())) {
                return raw;
            }
        }
    }
    unreachable!("the cofactor is large: most curve points lie outside the subgroup")
}

#[test]
fn loads_the_points_bellperson_reads() {
    let (params, bytes) = bellperson_params(7, 1);
    let reread =
        Parameters::<Bls12>::read(&bytes[..], true).expect("bellperson reads its own file");
    for check_points in [false, true] {
        let srs = load("roundtrip", &bytes, check_points).expect("a bellperson file loads");
        assert_eq!(srs.vk, reread.vk);
        assert_eq!(srs.h, *reread.h);
        assert_eq!(srs.l, *reread.l);
        assert_eq!(srs.a, *reread.a);
        assert_eq!(srs.b_g1, *reread.b_g1);
        assert_eq!(srs.b_g2, *reread.b_g2);
        assert_eq!(srs.h.len() + 1, 1 << 7);
        assert_eq!(srs.lg_domain(), 7);
    }
    // Our writer gives bellperson's bytes back.
    let mut ours = Vec::new();
    Srs::from_bellperson(&params)
        .write_to(&mut ours)
        .expect("write to memory");
    assert!(
        ours == bytes,
        "Srs::write_to differs from Parameters::write"
    );
}

#[test]
fn save_then_load_round_trips() {
    let (params, bytes) = bellperson_params(6, 2);
    let path = std::env::temp_dir().join(format!("cuzk-srs-{}-save.params", std::process::id()));
    Srs::from_bellperson(&params)
        .save(&path)
        .expect("temp dir is writable");
    let on_disk = std::fs::read(&path).expect("just written");
    let srs = Srs::load(&path, SrsOptions::default()).expect("loads");
    let _ = std::fs::remove_file(&path);
    assert!(on_disk == bytes);
    assert_eq!(srs.path, path);
    assert_eq!(srs.n_inputs(), params.vk.ic.len());
    assert_eq!(srs.n_aux(), params.l.len());
}

#[test]
fn truncated_files_name_section_and_offset() {
    let (params, bytes) = bellperson_params(6, 3);
    let o = offsets(&params);
    assert_eq!(o.end, bytes.len(), "layout arithmetic matches the file");
    // (cut at, section, offset reported, bytes expected)
    let cases = [
        (0, "vk", 0, 864),
        (500, "vk", 0, 864),
        (o.ic_prefix + 2, "ic", o.ic_prefix as u64, 4),
        (
            o.ic_prefix + 4 + 10,
            "ic",
            o.ic_prefix as u64 + 4,
            96 * params.vk.ic.len() as u64,
        ),
        (
            o.h_prefix + 4 + 96 * 5 + 7,
            "h",
            o.h_prefix as u64 + 4,
            96 * params.h.len() as u64,
        ),
        (o.l_prefix, "l", o.l_prefix as u64, 4),
        (
            o.b_g2_prefix + 4 + 191,
            "b_g2",
            o.b_g2_prefix as u64 + 4,
            192 * params.b_g2.len() as u64,
        ),
        (
            o.end - 1,
            "b_g2",
            o.b_g2_prefix as u64 + 4,
            192 * params.b_g2.len() as u64,
        ),
    ];
    for (cut, want_section, want_offset, want_expected) in cases {
        match load("trunc", &bytes[..cut], false) {
            Err(SrsError::Truncated {
                section,
                offset,
                expected,
                got,
                ..
            }) => {
                assert_eq!(
                    (section, offset, expected),
                    (want_section, want_offset, want_expected),
                    "cut at {cut}"
                );
                assert!(got < expected, "cut at {cut}: got {got} of {expected}");
            }
            other => panic!("cut at {cut}: expected Truncated, got {other:?}"),
        }
        // The cheap check (readiness) finds the same cut without decoding a point.
        let path = temp_file("trunc-check", &bytes[..cut]);
        let checked = Srs::check_file(&path);
        let _ = std::fs::remove_file(&path);
        match checked {
            Err(SrsError::Truncated { section, .. }) => {
                assert_eq!(section, want_section, "check_file, cut at {cut}")
            }
            other => panic!("check_file, cut at {cut}: expected Truncated, got {other:?}"),
        }
    }
    let path = temp_file("whole-check", &bytes);
    let lens = Srs::check_file(&path).expect("a whole file passes");
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        (lens.h, lens.l, lens.a, lens.b),
        (
            params.h.len(),
            params.l.len(),
            params.a.len(),
            params.b_g1.len()
        )
    );
}

#[test]
fn impossible_lengths_are_bad_lengths() {
    let (params, bytes) = bellperson_params(6, 4);
    let o = offsets(&params);
    let set_len = |at: usize, len: u32| {
        let mut b = bytes.clone();
        b[at..at + 4].copy_from_slice(&len.to_be_bytes());
        b
    };
    let n_vars = (params.vk.ic.len() + params.l.len()) as u32;
    let cases = [
        (set_len(o.ic_prefix, 0), "ic", o.ic_prefix),
        (
            set_len(o.h_prefix, params.h.len() as u32 + 1),
            "h",
            o.h_prefix,
        ),
        (set_len(o.a_prefix, n_vars + 1), "a", o.a_prefix),
        (
            set_len(o.a_prefix, params.vk.ic.len() as u32 - 1),
            "a",
            o.a_prefix,
        ),
        (set_len(o.b_g1_prefix, u32::MAX), "b_g1", o.b_g1_prefix),
        (
            set_len(o.b_g2_prefix, params.b_g1.len() as u32 - 1),
            "b_g2",
            o.b_g2_prefix,
        ),
        // One point too many in l shifts every later prefix: a's is read from point bytes.
        (
            set_len(o.l_prefix, params.l.len() as u32 + 1),
            "a",
            o.a_prefix + 96,
        ),
    ];
    for (i, (b, want_section, want_offset)) in cases.iter().enumerate() {
        match load("badlen", b, false) {
            Err(SrsError::BadLength {
                section, offset, ..
            }) => {
                assert_eq!(
                    (section, offset),
                    (*want_section, *want_offset as u64),
                    "case {i}"
                );
            }
            other => panic!("case {i}: expected BadLength, got {other:?}"),
        }
    }
    // A huge but plausible length (2^32 − 1 points of H) must not allocate: it is
    // reported as a truncated section.
    let huge = set_len(o.h_prefix, u32::MAX);
    assert!(matches!(
        load("huge", &huge, false),
        Err(SrsError::Truncated { section: "h", .. })
    ));
}

#[test]
fn bad_points_name_section_index_and_reason() {
    let (params, bytes) = bellperson_params(6, 5);
    let o = offsets(&params);
    let l0 = o.l_prefix + 4;
    let a3 = o.a_prefix + 4 + 3 * 96;
    let bg2_1 = o.b_g2_prefix + 4 + 192;
    let mut off_curve = bytes.clone();
    off_curve[l0 + 95] ^= 1; // last byte of y
    let mut big_x = bytes.clone();
    big_x[a3..a3 + 8].copy_from_slice(&[0x1f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
    let mut g2_off_curve = bytes.clone();
    g2_off_curve[bg2_1 + 191] ^= 1;
    let mut infinity = bytes.clone();
    infinity[l0..l0 + 96].fill(0);
    infinity[l0] = 0x40;
    let mut compressed = bytes.clone();
    compressed[a3] |= 0x80;
    let mut vk_off_curve = bytes.clone();
    vk_off_curve[96 + 95] ^= 1; // beta_g1
    let cases: [(&[u8], &str, u64, u64, &str); 6] = [
        (&off_curve, "l", 0, l0 as u64, "not on the curve"),
        (
            &big_x,
            "a",
            3,
            a3 as u64,
            "coordinate not below the field modulus",
        ),
        (&g2_off_curve, "b_g2", 1, bg2_1 as u64, "not on the curve"),
        (&infinity, "l", 0, l0 as u64, "point at infinity"),
        (
            &compressed,
            "a",
            3,
            a3 as u64,
            "compressed flag set in an uncompressed point",
        ),
        (&vk_off_curve, "vk", 1, 96, "not on the curve"),
    ];
    for (i, (b, want_section, want_index, want_offset, want_reason)) in
        cases.into_iter().enumerate()
    {
        match load("badpoint", b, false) {
            Err(SrsError::BadPoint {
                section,
                index,
                offset,
                reason,
                ..
            }) => {
                assert_eq!(
                    (section, index, offset, reason),
                    (want_section, want_index, want_offset, want_reason),
                    "case {i}"
                );
            }
            other => panic!("case {i}: expected BadPoint, got {other:?}"),
        }
    }
}

#[test]
fn subgroup_check_is_an_option_except_for_the_vk() {
    let (params, bytes) = bellperson_params(6, 6);
    let o = offsets(&params);
    let bad = off_subgroup_g1();
    let h2 = o.h_prefix + 4 + 2 * 96;
    let mut in_h = bytes.clone();
    in_h[h2..h2 + 96].copy_from_slice(&bad);
    let srs = load("subgroup-unchecked", &in_h, false)
        .expect("on-curve points load without check_points");
    assert_eq!(srs.h[2].to_uncompressed(), bad);
    match load("subgroup-checked", &in_h, true) {
        Err(SrsError::BadPoint {
            section: "h",
            index: 2,
            offset,
            reason,
            ..
        }) => {
            assert_eq!(offset, h2 as u64);
            assert_eq!(reason, "not in the prime-order subgroup");
        }
        other => panic!("expected BadPoint in h, got {other:?}"),
    }
    let ic1 = o.ic_prefix + 4 + 96;
    let mut in_ic = bytes.clone();
    in_ic[ic1..ic1 + 96].copy_from_slice(&bad);
    match load("subgroup-ic", &in_ic, false) {
        Err(SrsError::BadPoint {
            section: "ic",
            index: 1,
            reason,
            ..
        }) => {
            assert_eq!(reason, "not in the prime-order subgroup");
        }
        other => panic!("expected BadPoint in ic, got {other:?}"),
    }
}

#[test]
fn trailing_bytes_and_missing_files() {
    let (_, bytes) = bellperson_params(6, 7);
    let mut longer = bytes.clone();
    longer.extend_from_slice(&[0u8; 5]);
    match load("trailing", &longer, false) {
        Err(SrsError::TrailingBytes { offset, extra, .. }) => {
            assert_eq!((offset, extra), (bytes.len() as u64, 5));
        }
        other => panic!("expected TrailingBytes, got {other:?}"),
    }
    let missing = std::env::temp_dir().join("cuzk-srs-does-not-exist.params");
    assert!(matches!(
        Srs::load(&missing, SrsOptions::default()),
        Err(SrsError::Io { .. })
    ));
}

#[test]
fn a_released_srs_reads_its_points_from_the_file_in_memory_layout() {
    use cuzk_groth16::testkit::{g1_from_blst_bytes, g2_from_blst_bytes};
    use cuzk_groth16::{point_bytes, SrsQuery};
    let (_, bytes) = bellperson_params(9, 3);
    let path = temp_file("stream", &bytes);
    let srs = Srs::load(&path, SrsOptions::default()).expect("loads");
    let released = srs.released();
    assert!(released.is_released() && released.host_bytes() == 0);
    assert_eq!(released.fingerprint(), srs.fingerprint());
    let file = released
        .file
        .clone()
        .expect("the file still holds the points");
    let g1 = |q: SrsQuery, pts: &[G1Affine]| {
        assert_eq!(file.len(q), pts.len());
        // The whole query, one point, and a range that starts and ends inside it.
        for (first, n) in [(0, pts.len()), (pts.len() - 1, 1), (3, pts.len() / 2 + 1)] {
            let mut dst = vec![0u8; n * point_bytes(q)];
            file.read_into(q, first, &mut dst).expect("reads");
            for (i, got) in g1_from_blst_bytes(&dst).into_iter().enumerate() {
                assert_eq!(got, pts[first + i], "{q:?} point {}", first + i);
            }
        }
    };
    g1(SrsQuery::H, &srs.h);
    g1(SrsQuery::L, &srs.l);
    g1(SrsQuery::A, &srs.a);
    g1(SrsQuery::BG1, &srs.b_g1);
    // Reads that drop what they read from the page cache give the same points.
    file.set_cache_share(0);
    g1(SrsQuery::H, &srs.h);
    let n = srs.b_g2.len();
    let mut dst = vec![0u8; n * 192];
    file.read_into(SrsQuery::BG2, 0, &mut dst).expect("reads");
    for (i, got) in g2_from_blst_bytes(&dst).into_iter().enumerate() {
        assert_eq!(got, srs.b_g2[i], "b_g2 point {i}");
    }
    // A range past the query's end is an error, not a short read.
    let mut past = vec![0u8; 2 * 96];
    let e = file
        .read_into(SrsQuery::H, srs.h.len() - 1, &mut past)
        .expect_err("past the end");
    assert!(matches!(e, SrsError::BadLength { section: "h", .. }), "{e}");

    // The file truncated under the daemon: a read fails with an error.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .expect("opens");
    f.set_len(bytes.len() as u64 - 100).expect("truncates");
    let mut last = vec![0u8; 192];
    let e = file
        .read_into(SrsQuery::BG2, n - 1, &mut last)
        .expect_err("truncated");
    assert!(matches!(e, SrsError::Io { .. }), "{e}");

    // Another file under the same name is not streamed from.
    let (_, other) = bellperson_params(9, 4);
    std::fs::write(&path, &other).expect("rewrites");
    assert!(
        srs.released().file.is_none(),
        "a replaced file is not streamed from"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_file_opened_to_stream_holds_no_points_and_checks_them_as_a_load_does() {
    use cuzk_groth16::SrsQuery;
    let (params, bytes) = bellperson_params(8, 5);
    let path = temp_file("open-streamed", &bytes);
    let loaded = Srs::load(&path, SrsOptions::default()).expect("loads");
    let opened = Srs::open_streamed(&path).expect("opens");
    assert!(opened.is_released() && opened.host_bytes() == 0);
    assert_eq!(opened.lens(), loaded.lens());
    assert_eq!(opened.fingerprint(), loaded.fingerprint());
    assert_eq!(opened.vk, loaded.vk);
    assert_eq!(opened.points_bytes(), loaded.host_bytes() as u64);
    let file = opened.file.clone().expect("its file");
    for check in [false, true] {
        file.check_points(check).expect("every point is good");
    }
    let mut h = vec![0u8; 96];
    file.read_into(SrsQuery::H, 5, &mut h).expect("reads");
    let got = cuzk_groth16::testkit::g1_from_blst_bytes(&h);
    assert_eq!(got, [loaded.h[5]]);

    // A point off the curve in A: found by the check, named as a load names it.
    let o = offsets(&params);
    let mut bad = bytes.clone();
    let at = o.a_prefix + 4 + 96 * 3;
    bad[at + 95] ^= 1;
    let path_bad = temp_file("open-streamed-bad", &bad);
    let want = Srs::load(&path_bad, SrsOptions::default()).expect_err("bad point");
    let got = Srs::open_streamed(&path_bad)
        .expect("the key is good")
        .file
        .expect("its file")
        .check_points(false)
        .expect_err("bad point");
    assert_eq!(got.to_string(), want.to_string());
    assert!(
        matches!(
            got,
            SrsError::BadPoint {
                section: "a",
                index: 3,
                ..
            }
        ),
        "{got}"
    );
    // A truncated file does not open.
    let path_short = temp_file("open-streamed-short", &bytes[..o.end - 10]);
    assert!(matches!(
        Srs::open_streamed(&path_short),
        Err(SrsError::Truncated {
            section: "b_g2",
            ..
        })
    ));
    for p in [&path, &path_bad, &path_short] {
        let _ = std::fs::remove_file(p);
    }
}
