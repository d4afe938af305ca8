//! The journal's own tests: what is written comes back, a torn tail ends the replay
//! without losing what came before, and compaction keeps the file bounded.

use super::*;
use crate::{JobState, ProofKindId};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("cuzk-journal-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn accepted(id: &str, payload: &[u8]) -> AcceptedRecord {
    AcceptedRecord {
        job_id: id.into(),
        request_id: format!("req-{id}"),
        kind: "synthetic".into(),
        priority: Some(Priority::High),
        request: ProofRequest {
            vanilla_proof: payload.to_vec(),
            vanilla_proofs: vec![vec![1, 2], vec![]],
            randomness: vec![7; 32],
            partition_index: 3,
            ..Default::default()
        },
    }
}

fn outcome(id: &str) -> JobOutcome {
    JobOutcome {
        job_id: id.into(),
        request_id: format!("req-{id}"),
        kind: ProofKindId::Synthetic,
        state: JobState::Completed,
        proof: vec![9; 192],
        error: String::new(),
        retryable: false,
        timings: Default::default(),
    }
}

const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn accepted_and_finished_records_come_back_after_reopening() {
    let dir = scratch("roundtrip");
    {
        let (j, replayed) = Journal::open(&dir, HOUR, 10).expect("opens");
        assert!(replayed.pending.is_empty() && replayed.finished.is_empty());
        j.started("run1").expect("started");
        j.accepted(&accepted("run1-0", b"a")).expect("a");
        j.accepted(&accepted("run1-1", b"b")).expect("b");
        j.finished(&outcome("run1-0"), &[5; 32]);
    }
    let (_j, replayed) = Journal::open(&dir, HOUR, 10).expect("reopens");
    assert_eq!(replayed.prefixes, vec!["run1".to_string()]);
    assert_eq!(replayed.pending.len(), 1);
    let p = &replayed.pending[0];
    assert_eq!(p.job_id, "run1-1");
    assert_eq!(p.request_id, "req-run1-1");
    assert_eq!(p.priority, Some(Priority::High));
    assert_eq!(p.request.vanilla_proof, b"b");
    assert_eq!(p.request.vanilla_proofs, vec![vec![1, 2], vec![]]);
    assert_eq!(p.request.partition_index, 3);
    assert_eq!(replayed.finished.len(), 1);
    let f = &replayed.finished[0];
    assert_eq!(f.outcome.job_id, "run1-0");
    assert_eq!(f.outcome.state, JobState::Completed);
    assert_eq!(f.outcome.proof, vec![9; 192]);
    assert_eq!(f.digest, [5; 32]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_torn_tail_ends_the_replay_and_keeps_what_came_before() {
    let dir = scratch("torn");
    {
        let (j, _) = Journal::open(&dir, HOUR, 10).expect("opens");
        j.accepted(&accepted("x-0", b"first")).expect("first");
        j.accepted(&accepted("x-1", &[3; 1000])).expect("second");
    }
    // A crash mid-write: the second record loses its last bytes.
    let path = dir.join(FILE_NAME);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 10).unwrap();
    drop(f);
    let (_j, replayed) = Journal::open(&dir, HOUR, 10).expect("reopens");
    let ids: Vec<_> = replayed.pending.iter().map(|p| p.job_id.as_str()).collect();
    assert_eq!(ids, vec!["x-0"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_flipped_byte_is_caught_by_the_checksum() {
    let dir = scratch("flip");
    {
        let (j, _) = Journal::open(&dir, HOUR, 10).expect("opens");
        j.accepted(&accepted("y-0", b"payload")).expect("one");
    }
    let path = dir.join(FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&path, bytes).unwrap();
    let (_j, replayed) = Journal::open(&dir, HOUR, 10).expect("reopens");
    assert!(replayed.pending.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn finished_results_beyond_retention_are_compacted_away() {
    let dir = scratch("compact");
    let path = dir.join(FILE_NAME);
    {
        let (j, _) = Journal::open(&dir, HOUR, 3).expect("opens");
        for i in 0..200 {
            let id = format!("z-{i}");
            j.accepted(&accepted(&id, &[1; 4096])).expect("accepted");
            j.finished(&outcome(&id), &[0; 32]);
        }
    }
    let (_j, replayed) = Journal::open(&dir, HOUR, 3).expect("reopens");
    assert!(replayed.pending.is_empty());
    let ids: Vec<_> = replayed
        .finished
        .iter()
        .map(|f| f.outcome.job_id.as_str())
        .collect();
    assert_eq!(ids, vec!["z-197", "z-198", "z-199"]);
    // Three results of ~300 bytes each, not 200 payloads of 4 KiB.
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len < 4096, "journal is {len} bytes after compaction");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_journal_directory_is_created_0750_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("mode").join("sub");
    let _j = Journal::open(&dir, HOUR, 3).expect("opens");
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}
