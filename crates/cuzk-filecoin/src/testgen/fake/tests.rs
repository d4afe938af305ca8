//! The true-shape generators' structure at real sizes, checked without synthesizing: the
//! counts and path shapes of `../shared/synthesis-notes.md` §5. See: #17.

use std::time::Instant;

use bincode::Options as _;
use blstrs::Scalar as Fr;
use storage_proofs_core::merkle::MerkleProofTrait;
use storage_proofs_update::{phi, rho, Challenges, PartitionProof, PublicParams};

use super::*;
use crate::registry::Registered;

/// Tree R / tree C of a 32 GiB sector: 9 base levels of 7 siblings, then the sub-tree's 7.
fn tree_r_32g() -> Vec<usize> {
    let mut v = vec![7; 9];
    v.push(7);
    v
}

fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    eprintln!("{what}: {:.2} s", t.elapsed().as_secs_f64());
    out
}

#[test]
fn porep_32gib_fake_has_10_partitions_of_18_challenges_with_real_path_shapes() {
    let registered = crate::testgen::sector::seal_proof(Registered::default_abi(
        FilecoinKind::PoRep,
        SectorSize::S32GiB,
    ))
    .expect("seal proof");
    let (proofs, public) = timed("porep 32GiB fake vanilla proofs", || {
        porep::vanilla::<filecoin_proofs::SectorShape32GiB>(registered, SectorSize::S32GiB, 1)
    })
    .expect("generate");
    let shape = porep::proofs_shape(&proofs);
    assert_eq!((shape.partitions, shape.per_partition), (10, 18));
    assert!(shape.uniform, "every challenge has the same structure");
    assert_eq!(shape.path("tree_d"), Some(&[1; 30][..]));
    assert_eq!(shape.path("tree_r"), Some(&tree_r_32g()[..]));
    assert_eq!(shape.path("tree_c"), Some(&tree_r_32g()[..]));
    for (name, n) in [
        ("drg_parents", 6),
        ("exp_parents", 8),
        ("column_rows", 11),
        ("labeling_proofs", 11),
        ("labeling_parents", 37),
        ("encoding_parents", 37),
    ] {
        assert_eq!(shape.count(name), Some(n), "{name}");
    }
    // One comm_c and one comm_r_last per sector, and comm_r binds them.
    let first = &proofs[0][0];
    assert!(proofs
        .iter()
        .flatten()
        .all(|p| p.comm_c() == first.comm_c() && p.comm_r_last() == first.comm_r_last()));
    assert_ne!(public.comm_r, [0u8; 32]);
    // Each challenge's paths open the challenged node (base and sub-tree are both 8-ary
    // at 32 GiB: the digits read back as the node).
    for p in proofs.iter().flatten() {
        assert_eq!(
            p.comm_r_last_proof.path_index(),
            p.comm_d_proofs.path_index()
        );
    }
}

#[test]
fn porep_64gib_fake_paths_have_the_top_level_and_a_deeper_tree_d() {
    let tree = TreeShape::of(SectorSize::S64GiB);
    let mut rng = item_rng(1, 0, 0);
    let path: Vec<(Vec<filecoin_proofs::DefaultTreeDomain>, usize)> =
        tree.path((1 << 31) - 1, &mut rng);
    let mut expected = tree_r_32g();
    expected.push(1);
    assert_eq!(levels(&path), expected);
    // The last leaf: every digit at its maximum.
    let digits: Vec<usize> = path.iter().map(|(_, i)| *i).collect();
    assert_eq!(digits, [vec![7; 10], vec![1]].concat());
    let d: Vec<(Vec<filecoin_proofs::DefaultPieceDomain>, usize)> = binary_path(31, 5, &mut rng);
    assert_eq!(levels(&d), vec![1; 31]);
}

#[test]
fn window_post_32gib_fake_is_one_full_partition_of_2349_sectors() {
    let req = timed("window-post 32GiB fake", || {
        post::request(FilecoinKind::WindowPoSt, SectorSize::S32GiB, 1)
    })
    .expect("generate");
    let shape = PayloadShape::of(FilecoinKind::WindowPoSt, &req).expect("decode");
    assert_eq!((shape.partitions, shape.per_partition), (1, 2349));
    assert!(shape.uniform);
    assert_eq!(shape.path("tree_r"), Some(&tree_r_32g()[..]));
    assert_eq!(shape.count("challenges"), Some(10));
    assert_eq!(shape.count("sector_proofs"), Some(1));
    let mb = req.vanilla_proofs.iter().map(Vec::len).sum::<usize>() as f64 / 1e6;
    eprintln!("window-post 32GiB fake payload: {mb:.1} MB");
}

#[test]
fn snap_32gib_fake_satisfies_the_update_circuits_asserts() {
    let req = timed("snap 32GiB fake", || snap::request(SectorSize::S32GiB, 1)).expect("gen");
    let shape = PayloadShape::of(FilecoinKind::SnapDeals, &req).expect("decode");
    assert_eq!((shape.partitions, shape.per_partition), (16, 86));
    assert!(shape.uniform);
    assert_eq!(shape.path("tree_d_new"), Some(&[1; 30][..]));
    assert_eq!(shape.path("tree_r_old"), Some(&tree_r_32g()[..]));
    assert_eq!(shape.path("tree_r_new"), Some(&tree_r_32g()[..]));
    assert_eq!(shape.count("apex_leafs"), Some(128));

    // What storage-proofs-update's circuit.rs asserts, checked here the way it reads it.
    let pp = PublicParams::from_sector_size(SectorSize::S32GiB.bytes());
    let domain = |b: &[u8]| -> storage_proofs_update::constants::TreeRDomain {
        filecoin_hashers::Domain::try_from_bytes(b).expect("domain")
    };
    let (comm_r_old, comm_r_new) = (domain(&req.comm_r_old), domain(&req.comm_r_new));
    let comm_d_new: storage_proofs_update::constants::TreeDDomain =
        filecoin_hashers::Domain::try_from_bytes(&req.comm_d_new).expect("domain");
    let phi = phi(&comm_d_new, &comm_r_old);
    for (k, bytes) in req.vanilla_proofs.iter().enumerate() {
        let p: PartitionProof<filecoin_proofs::SectorShape32GiB> = bincode::options()
            .with_fixint_encoding()
            .deserialize(bytes)
            .expect("decode");
        let challenges: Vec<u32> = Challenges::new(pp.sector_nodes, comm_r_new, k).collect();
        let top = |c: &storage_proofs_update::ChallengeProof<_>| {
            c.proof_d_new.path()[pp.challenge_bit_len - pp.partition_bit_len..].to_vec()
        };
        let partition_path = top(&p.challenge_proofs[0]);
        for (c, proof) in challenges.iter().zip(&p.challenge_proofs) {
            assert_eq!(proof.proof_d_new.path_index(), *c as usize);
            assert_eq!(
                top(proof),
                partition_path,
                "partition {k}: one tree-D top path"
            );
            let high = c >> (pp.challenge_bit_len - 10);
            let (old, data, new): (Fr, Fr, Fr) = (
                proof.proof_r_old.leaf().into(),
                proof.proof_d_new.leaf().into(),
                proof.proof_r_new.leaf().into(),
            );
            assert_eq!(
                new,
                old + data * rho(&phi, high),
                "partition {k} challenge {c}"
            );
        }
    }
}

#[test]
fn the_same_seed_makes_the_same_bytes_and_another_seed_others() {
    let a = FakeRequest::generate(FilecoinKind::PoRep, SectorSize::S2KiB, 3).expect("a");
    let b = FakeRequest::generate(FilecoinKind::PoRep, SectorSize::S2KiB, 3).expect("b");
    let c = FakeRequest::generate(FilecoinKind::PoRep, SectorSize::S2KiB, 4).expect("c");
    assert_eq!(a, b);
    assert_ne!(a.request.vanilla_proof, c.request.vanilla_proof);
    let text = String::from_utf8_lossy(&a.request.vanilla_proof);
    assert!(text.contains(FAKE_NOTE), "the C1 wrapper says it is fake");
}

#[test]
fn request_files_round_trip_and_other_files_are_refused() {
    let dir = std::env::temp_dir().join(format!("cuzk-fake-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let fake = FakeRequest::generate(FilecoinKind::SnapDeals, SectorSize::S2KiB, 9).expect("gen");
    let path = dir.join(FakeRequest::default_file_name(
        fake.kind, fake.size, fake.seed,
    ));
    assert!(path.to_string_lossy().contains("fake-snap-2KiB"));
    fake.write(&path).expect("write");
    let first_line = std::fs::read(&path).expect("read")[..FAKE_NOTE.len()].to_vec();
    assert_eq!(first_line, FAKE_NOTE.as_bytes());
    assert_eq!(FakeRequest::read(&path).expect("read back"), fake);

    let other = dir.join("c1.json");
    std::fs::write(&other, b"{\"SectorNum\":1}").expect("write");
    match FakeRequest::read(&other) {
        Err(TestgenError::Encode(msg)) => assert!(msg.contains("not a fake request file"), "{msg}"),
        other => panic!("expected Encode, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

// See: #29 (a 32 GiB WinningPoSt measured under a PoRep load).
#[test]
fn winning_post_32gib_fake_is_one_sector_of_66_challenges() {
    let req = timed("winning-post 32GiB fake", || {
        post::request(FilecoinKind::WinningPoSt, SectorSize::S32GiB, 1)
    })
    .expect("generate");
    let shape = PayloadShape::of(FilecoinKind::WinningPoSt, &req).expect("decode");
    assert_eq!((shape.partitions, shape.per_partition), (1, 1));
    assert!(shape.uniform);
    assert_eq!(shape.path("tree_r"), Some(&tree_r_32g()[..]));
    assert_eq!(shape.count("challenges"), Some(66));
    assert_eq!(shape.count("sector_proofs"), Some(1));
}
