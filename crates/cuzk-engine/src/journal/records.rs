//! The journal's file format: each record framed as `[u32 body length][first 4 bytes of
//! SHA-256(body)][body]` (little endian), the frames read back up to the first torn or
//! corrupt one, and the bodies of the three records (`Started`, `Accepted`, `Finished`),
//! each a tag byte then length-prefixed fields. `journal.rs` decides what is written when.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use std::time::Duration;

use cuzk_groth16::ProofRequest;
use sha2::{Digest, Sha256};
use tracing::warn;

use super::{AcceptedRecord, FinishedRecord};
use crate::{JobOutcome, JobState, Priority, ProofKindId};

/// A frame bigger than this is corruption, not a record.
const MAX_RECORD: u64 = 1 << 36;

pub(super) const TAG_STARTED: u8 = 1;
pub(super) const TAG_ACCEPTED: u8 = 2;
pub(super) const TAG_FINISHED: u8 = 3;

pub(super) fn frame_len(body: &[u8]) -> u64 {
    body.len() as u64 + 8
}

pub(super) fn check(body: &[u8]) -> [u8; 4] {
    let h = Sha256::digest(body);
    [h[0], h[1], h[2], h[3]]
}

pub(super) fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&check(body));
    out.extend_from_slice(body);
    out
}

/// The bodies of the file's records up to the first torn or corrupt one.
pub(super) fn read_records(file: File, path: &Path) -> Vec<Vec<u8>> {
    let mut r = BufReader::new(file);
    let mut out = Vec::new();
    let mut offset = 0u64;
    loop {
        let mut head = [0u8; 8];
        match r.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return out,
            Err(e) => {
                warn!(path = %path.display(), offset, cause = %e, "journal: read failed; replaying what came before");
                return out;
            }
        }
        // Both halves are 4 bytes: the slices cannot fail to convert.
        let len = u64::from(u32::from_le_bytes([head[0], head[1], head[2], head[3]]));
        let want = [head[4], head[5], head[6], head[7]];
        if len > MAX_RECORD {
            warn!(path = %path.display(), offset, "journal: corrupt record length; replaying what came before");
            return out;
        }
        let mut body = vec![0u8; len as usize];
        if r.read_exact(&mut body).is_err() || check(&body) != want {
            warn!(path = %path.display(), offset, "journal: torn or corrupt record (a crash mid-write); replaying what came before");
            return out;
        }
        offset += len + 8;
        out.push(body);
    }
}

// Field encoding: u64 little endian; bytes and strings as a u64 length and the bytes.

pub(super) struct Enc(Vec<u8>);

impl Enc {
    fn new(tag: u8) -> Enc {
        Enc(vec![tag])
    }
    fn u64(&mut self, v: u64) -> &mut Enc {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Enc {
        self.u64(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }
    fn str(&mut self, s: &str) -> &mut Enc {
        self.bytes(s.as_bytes())
    }
}

pub(super) struct Dec<'a>(&'a [u8]);

impl Dec<'_> {
    fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.0.split_at_checked(8)?;
        self.0 = rest;
        Some(u64::from_le_bytes(head.try_into().ok()?))
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = usize::try_from(self.u64()?).ok()?;
        let (head, rest) = self.0.split_at_checked(n)?;
        self.0 = rest;
        Some(head.to_vec())
    }
    fn str(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }
}

pub(super) fn encode_started(prefix: &str) -> Vec<u8> {
    let mut e = Enc::new(TAG_STARTED);
    e.str(prefix);
    e.0
}

pub(super) fn decode_started(body: &[u8]) -> Option<String> {
    Dec(body.get(1..)?).str()
}

pub(super) fn encode_accepted(rec: &AcceptedRecord) -> Vec<u8> {
    let r = &rec.request;
    let mut e = Enc::new(TAG_ACCEPTED);
    e.str(&rec.job_id)
        .str(&rec.request_id)
        .str(&rec.kind)
        .str(rec.priority.map(Priority::as_str).unwrap_or(""))
        .u64(r.sector_size)
        .u64(r.registered_proof)
        .bytes(&r.vanilla_proof)
        .u64(r.vanilla_proofs.len() as u64);
    for p in &r.vanilla_proofs {
        e.bytes(p);
    }
    e.u64(r.sector_number)
        .u64(r.miner_id)
        .bytes(&r.randomness)
        .u64(u64::from(r.partition_index))
        .bytes(&r.comm_r_old)
        .bytes(&r.comm_r_new)
        .bytes(&r.comm_d_new);
    e.0
}

pub(super) fn decode_accepted(body: &[u8]) -> Option<AcceptedRecord> {
    let mut d = Dec(body.get(1..)?);
    let job_id = d.str()?;
    let request_id = d.str()?;
    let kind = d.str()?;
    let priority = Priority::from_name(&d.str()?);
    let sector_size = d.u64()?;
    let registered_proof = d.u64()?;
    let vanilla_proof = d.bytes()?;
    let n = d.u64()?;
    let mut vanilla_proofs = Vec::new();
    for _ in 0..n {
        vanilla_proofs.push(d.bytes()?);
    }
    let request = ProofRequest {
        sector_size,
        registered_proof,
        vanilla_proof,
        vanilla_proofs,
        sector_number: d.u64()?,
        miner_id: d.u64()?,
        randomness: d.bytes()?,
        partition_index: u32::try_from(d.u64()?).ok()?,
        comm_r_old: d.bytes()?,
        comm_r_new: d.bytes()?,
        comm_d_new: d.bytes()?,
    };
    Some(AcceptedRecord {
        job_id,
        request_id,
        kind,
        priority,
        request,
    })
}

pub(super) fn state_code(s: JobState) -> u64 {
    match s {
        JobState::Completed => 0,
        JobState::Cancelled => 1,
        _ => 2,
    }
}

pub(super) fn encode_finished(rec: &FinishedRecord) -> Vec<u8> {
    let o = &rec.outcome;
    let mut e = Enc::new(TAG_FINISHED);
    e.str(&o.job_id)
        .str(&o.request_id)
        .str(o.kind.as_str())
        .u64(state_code(o.state))
        .bytes(&o.proof)
        .str(&o.error)
        .u64(u64::from(o.retryable))
        .u64(o.timings.total.as_millis() as u64)
        .bytes(&rec.digest)
        .u64(rec.finished_unix_ms);
    e.0
}

pub(super) fn decode_finished(body: &[u8]) -> Option<FinishedRecord> {
    let mut d = Dec(body.get(1..)?);
    let job_id = d.str()?;
    let request_id = d.str()?;
    let kind = ProofKindId::from_name(&d.str()?)?;
    let state = match d.u64()? {
        0 => JobState::Completed,
        1 => JobState::Cancelled,
        _ => JobState::Failed,
    };
    let proof = d.bytes()?;
    let error = d.str()?;
    let retryable = d.u64()? != 0;
    let total = Duration::from_millis(d.u64()?);
    let digest: [u8; 32] = d.bytes()?.try_into().ok()?;
    let finished_unix_ms = d.u64()?;
    Some(FinishedRecord {
        outcome: JobOutcome {
            job_id,
            request_id,
            kind,
            state,
            proof,
            error,
            retryable,
            timings: crate::JobTimings {
                total,
                ..Default::default()
            },
        },
        digest,
        finished_unix_ms,
    })
}
