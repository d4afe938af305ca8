//! The verifying key a proof is self-checked against comes from the `.vk` file beside the
//! `.params` file when there is one, and a `.params` whose own key differs from that `.vk`
//! is refused at load, naming both files, so that the engine never completes a job whose
//! proof only verifies against a substituted key. See: #18 (item 4).
//!
//! Uses the 2 KiB WindowPoSt parameters (the smallest circuit) copied into a folder of
//! its own, with the WinningPoSt `.vk` or a `.vk` with one point replaced beside them.

use std::path::{Path, PathBuf};

use cuzk_engine::JobState;
use cuzk_filecoin::{FilecoinKind, SectorSize};
use cuzk_groth16::{Srs, SrsError, SrsOptions, VerifyingKey};

/// A fresh folder holding a copy of the 2 KiB WindowPoSt `.params` (no `.vk`); returns
/// the folder and the copy's path.
fn window_params_alone(tag: &str) -> (PathBuf, PathBuf) {
    let src = crate::common::params_2k(FilecoinKind::WindowPoSt);
    let dir = crate::common::cache_dir().join(format!("vk-beside-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let params = dir.join(src.file_name().expect("a file name"));
    std::fs::copy(&src, &params).expect("copy the parameters");
    (dir, params)
}

fn vk_file(kind: FilecoinKind) -> PathBuf {
    crate::common::params_2k(kind);
    crate::common::param_dir()
        .join(cuzk_filecoin::vk_file_name(kind, SectorSize::S2KiB).expect("name"))
}

fn read_vk(path: &Path) -> VerifyingKey {
    VerifyingKey::read(&std::fs::read(path).expect("read the vk")[..]).expect("a vk")
}

fn write_vk(path: &Path, vk: &VerifyingKey) {
    let mut bytes = Vec::new();
    vk.write(&mut bytes).expect("encode");
    std::fs::write(path, bytes).expect("write the vk");
}

#[test]
fn a_matching_vk_loads_and_is_the_key_used() {
    let (dir, params) = window_params_alone("match");
    let alone = Srs::load(&params, SrsOptions::default()).expect("loads without a .vk");
    let vk_path = Srs::vk_path_beside(&params).expect("a .params name");
    std::fs::copy(vk_file(FilecoinKind::WindowPoSt), &vk_path).expect("copy the vk");
    let with_vk = Srs::load(&params, SrsOptions::default()).expect("loads with its .vk");
    assert_eq!(with_vk.vk, read_vk(&vk_path));
    assert_eq!(with_vk.vk, alone.vk);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_vk_of_another_circuit_is_refused_naming_both_files() {
    let (dir, params) = window_params_alone("other");
    let vk_path = Srs::vk_path_beside(&params).expect("a .params name");
    std::fs::copy(vk_file(FilecoinKind::WinningPoSt), &vk_path).expect("copy the vk");
    match Srs::load(&params, SrsOptions::default()) {
        Err(SrsError::VkMismatch { params: p, vk }) => {
            assert_eq!((p, vk), (params.clone(), vk_path.clone()));
        }
        other => panic!("expected VkMismatch, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_vk_with_one_point_replaced_or_broken_is_refused() {
    let (dir, params) = window_params_alone("point");
    let vk_path = Srs::vk_path_beside(&params).expect("a .params name");
    let good = read_vk(&vk_file(FilecoinKind::WindowPoSt));

    // One valid point swapped for another: a well-formed key, but not this one.
    let mut swapped = good.clone();
    swapped.delta_g1 = good.alpha_g1;
    write_vk(&vk_path, &swapped);
    let err = Srs::load(&params, SrsOptions::default()).expect_err("swapped delta accepted");
    assert!(matches!(err, SrsError::VkMismatch { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains(&*params.to_string_lossy()) && text.contains(&*vk_path.to_string_lossy()),
        "{text}"
    );

    // One flipped bit in a point's encoding: not a point at all.
    let mut bytes = Vec::new();
    good.write(&mut bytes).expect("encode");
    bytes[10] ^= 0x01; // inside alpha_g1's x coordinate
    std::fs::write(&vk_path, &bytes).expect("write");
    let err = Srs::load(&params, SrsOptions::default()).expect_err("flipped bit accepted");
    assert!(matches!(err, SrsError::BadVk { .. }), "{err}");

    // Trailing bytes after a good key.
    let mut trailing = Vec::new();
    good.write(&mut trailing).expect("encode");
    trailing.push(0);
    std::fs::write(&vk_path, &trailing).expect("write");
    let err = Srs::load(&params, SrsOptions::default()).expect_err("trailing bytes accepted");
    assert!(matches!(err, SrsError::BadVk { .. }), "{err}");
    let _ = std::fs::remove_dir_all(dir);
}

/// Through the engine: a WindowPoSt job whose parameters sit beside a foreign `.vk`
/// fails with the mismatch named, instead of completing against the parameters' own key.
#[test]
fn the_engine_fails_a_job_whose_params_disagree_with_their_vk() {
    let kind = FilecoinKind::WindowPoSt;
    let sector = crate::common::sector_2k();
    let (dir, params) = window_params_alone("engine");
    let vk_path = Srs::vk_path_beside(&params).expect("a .params name");
    std::fs::copy(vk_file(FilecoinKind::WinningPoSt), &vk_path).expect("copy the vk");
    let engine = crate::common::engine_in(dir.clone());
    let outcome = crate::common::run_engine(&engine, kind, sector.request(kind).expect("request"));
    assert_ne!(outcome.state, JobState::Completed, "{}", outcome.error);
    assert!(
        outcome.error.contains(&*vk_path.to_string_lossy()),
        "error does not name the .vk: {}",
        outcome.error
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Two generations of one pair into one empty folder at once (two test processes did
/// this and one read another's parameters beside the first's key): one makes the pair,
/// the other waits and finds it made, and the pair loads.
#[test]
fn two_generations_at_once_make_one_matching_pair() {
    let dir = crate::common::cache_dir().join(format!("vk-beside-race-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let generate = || {
        let dir = dir.clone();
        std::thread::spawn(move || {
            cuzk_filecoin::testgen::gen_params_report(
                FilecoinKind::WindowPoSt,
                SectorSize::S2KiB,
                &dir,
                &cuzk_groth16::paramgen::CpuFixedBase::default(),
                &cuzk_filecoin::testgen::ParamsOptions::default(),
            )
            .expect("generate")
        })
    };
    let (a, b) = (generate(), generate());
    let (a, b) = (a.join().expect("thread a"), b.join().expect("thread b"));
    assert_eq!(a.path, b.path);
    let made = [&a, &b].iter().filter(|r| r.made.is_some()).count();
    assert_eq!(made, 1, "both or neither generated the pair");
    let srs = Srs::load(&a.path, SrsOptions::default()).expect("the pair belongs together");
    let vk_path = Srs::vk_path_beside(&a.path).expect("a .params name");
    assert_eq!(srs.vk, read_vk(&vk_path));
    let _ = std::fs::remove_dir_all(dir);
}
