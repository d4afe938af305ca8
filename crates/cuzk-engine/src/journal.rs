//! `Journal`: the on-disk record of accepted jobs and finished results that makes jobs
//! survive a `kill -9`. An append-only file, `journal_dir/jobs.journal`, of framed
//! records (`[u32 body length][first 4 bytes of SHA-256(body)][body]`, little endian):
//! an `Accepted` record (job id, request id, kind, priority and the whole request) is
//! written and fsynced before the submit is answered; a `Finished` record (the outcome)
//! is written when the job ends (a `write(2)`, which survives the process; it is fsynced
//! with the next accepted record and at shutdown). A `Started` record names each run's
//! job-id prefix, so an id this daemon issued and whose result expired is told apart from
//! one it never issued.
//!
//! At start `Journal::open` replays the file: jobs accepted and not finished come back
//! to be proved again under their ids, finished results within retention come back to be
//! answered; a torn or corrupt tail (a crash mid-write) ends the replay there. The file is
//! then compacted (only the live records rewritten to a new file, fsynced and renamed over
//! the old one), and again whenever dead records outweigh live ones, so it stays bounded
//! by the queue's payload limit plus the retained results.
//!
//! Why a hand-framed file rather than an embedded store (SQLite, redb): the records are
//! written once and read only at start, there are no queries, and the engine's crates
//! take no new dependency. The engine calls in from two places only: `Engine::submit`
//! (accepted) and `Shared::finish_job` (finished).

use std::collections::{HashMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cuzk_groth16::ProofRequest;
use parking_lot::Mutex;
use tracing::{info, warn};

use crate::{JobOutcome, Priority};
use records::{
    decode_accepted, decode_finished, decode_started, encode_accepted, encode_finished,
    encode_started, frame, frame_len, read_records, TAG_ACCEPTED, TAG_FINISHED, TAG_STARTED,
};

mod records;

/// The journal's file name inside `journal_dir`.
pub const FILE_NAME: &str = "jobs.journal";
/// The lock file that keeps two daemons off one journal.
const LOCK_NAME: &str = "jobs.lock";
/// Run prefixes remembered for "expired" answers.
const PREFIXES_KEPT: usize = 64;
/// How long [`Journal::open`] waits for a previous daemon (just killed, still exiting) to
/// release the lock.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// Why the journal cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The directory or a file in it cannot be created, read or written.
    #[error("journal {path}: {source}; fix its permissions, or set journal_dir = \"\" to run without one")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Another daemon holds the journal.
    #[error("journal {0} is in use by another daemon; give each daemon its own journal_dir")]
    Locked(PathBuf),
}

/// A job accepted and not finished, as journaled.
#[derive(Clone, Debug)]
pub(crate) struct AcceptedRecord {
    pub job_id: String,
    pub request_id: String,
    /// [`ProofKindId::as_str`], kept as text so that an unknown name fails one job at
    /// replay, not the whole journal.
    pub kind: String,
    pub priority: Option<Priority>,
    pub request: ProofRequest,
}

/// A finished result, as journaled.
#[derive(Clone, Debug)]
pub(crate) struct FinishedRecord {
    pub outcome: JobOutcome,
    pub digest: [u8; 32],
    pub finished_unix_ms: u64,
}

/// What the journal held at start.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// Jobs to prove again, in the order they were accepted.
    pub pending: Vec<AcceptedRecord>,
    /// Results still within retention, oldest first.
    pub finished: Vec<FinishedRecord>,
    /// Job-id prefixes of earlier runs, oldest first.
    pub prefixes: Vec<String>,
}

/// The open journal.
pub(crate) struct Journal {
    dir: PathBuf,
    inner: Mutex<Inner>,
    retention: Duration,
    retention_count: usize,
    /// Held (locked) while the journal is open.
    _lock: File,
}

struct Inner {
    file: File,
    /// Encoded live records by job id; kept so compaction rewrites without re-reading.
    accepted: HashMap<String, Vec<u8>>,
    finished: VecDeque<(String, u64, Vec<u8>)>,
    prefixes: VecDeque<Vec<u8>>,
    live_bytes: u64,
    dead_bytes: u64,
    /// Once sealed (at shutdown), finishes are no longer recorded: jobs failed by the drain
    /// stay pending for the next start.
    sealed: bool,
}

impl Journal {
    /// Opens (creating) the journal in `dir`, replays it and compacts it; the caller then
    /// records its run with [`Journal::started`].
    ///
    /// # Errors
    /// [`JournalError`] naming the path.
    pub fn open(
        dir: &Path,
        retention: Duration,
        retention_count: usize,
    ) -> Result<(Journal, Replayed), JournalError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| JournalError::Io { path, source }
        };
        create_private_dir(dir).map_err(io(dir))?;
        let lock_path = dir.join(LOCK_NAME);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(JournalError::Locked(dir.to_path_buf()))
                }
                Err(std::fs::TryLockError::Error(e)) => return Err(io(&lock_path)(e)),
            }
        }
        let path = dir.join(FILE_NAME);
        let records = match File::open(&path) {
            Ok(f) => read_records(f, &path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(io(&path)(e)),
        };
        let mut inner = Inner {
            file: File::open(dir).map_err(io(dir))?, // replaced by compact() below
            accepted: HashMap::new(),
            finished: VecDeque::new(),
            prefixes: VecDeque::new(),
            live_bytes: 0,
            dead_bytes: 0,
            sealed: false,
        };
        let mut order: Vec<String> = Vec::new();
        for body in records {
            match body.first() {
                Some(&TAG_STARTED) => inner.prefixes.push_back(body),
                Some(&TAG_ACCEPTED) => match decode_accepted(&body) {
                    Some(rec) => {
                        order.push(rec.job_id.clone());
                        inner.accepted.insert(rec.job_id, body);
                    }
                    None => {
                        warn!(path = %path.display(), "skipping an accepted record that does not decode")
                    }
                },
                Some(&TAG_FINISHED) => match decode_finished(&body) {
                    Some(rec) => {
                        inner.accepted.remove(&rec.outcome.job_id);
                        inner
                            .finished
                            .push_back((rec.outcome.job_id, rec.finished_unix_ms, body));
                    }
                    None => {
                        warn!(path = %path.display(), "skipping a finished record that does not decode")
                    }
                },
                _ => warn!(path = %path.display(), "skipping a record of unknown type"),
            }
        }
        while inner.prefixes.len() > PREFIXES_KEPT {
            inner.prefixes.pop_front();
        }
        let journal = Journal {
            dir: dir.to_path_buf(),
            inner: Mutex::new(inner),
            retention,
            retention_count,
            _lock: lock,
        };
        let replayed = {
            let mut inner = journal.inner.lock();
            journal.prune(&mut inner, unix_ms());
            let replayed = Replayed {
                pending: order
                    .iter()
                    .filter_map(|id| inner.accepted.get(id))
                    .filter_map(|b| decode_accepted(b))
                    .collect(),
                finished: inner
                    .finished
                    .iter()
                    .filter_map(|(_, _, b)| decode_finished(b))
                    .collect(),
                prefixes: inner
                    .prefixes
                    .iter()
                    .filter_map(|b| decode_started(b))
                    .collect(),
            };
            journal.compact(&mut inner)?;
            replayed
        };
        info!(
            path = %path.display(),
            pending = replayed.pending.len(),
            finished = replayed.finished.len(),
            "journal replayed"
        );
        Ok((journal, replayed))
    }

    /// Records this run's job-id prefix (fsynced), so that after a restart an id of this
    /// run whose result expired is answered "expired", not "unknown".
    ///
    /// # Errors
    /// [`JournalError::Io`].
    pub fn started(&self, prefix: &str) -> Result<(), JournalError> {
        let body = encode_started(prefix);
        let mut inner = self.inner.lock();
        self.append(&mut inner, &body)?;
        inner.file.sync_data().map_err(|e| self.io_err(e))?;
        inner.live_bytes += frame_len(&body);
        inner.prefixes.push_back(body);
        if inner.prefixes.len() > PREFIXES_KEPT {
            if let Some(old) = inner.prefixes.pop_front() {
                inner.live_bytes = inner.live_bytes.saturating_sub(frame_len(&old));
                inner.dead_bytes += frame_len(&old);
            }
        }
        Ok(())
    }

    /// Records an accepted job and fsyncs: after this returns the job survives a crash.
    ///
    /// # Errors
    /// [`JournalError::Io`].
    pub fn accepted(&self, rec: &AcceptedRecord) -> Result<(), JournalError> {
        let body = encode_accepted(rec);
        let mut inner = self.inner.lock();
        self.append(&mut inner, &body)?;
        inner.file.sync_data().map_err(|e| self.io_err(e))?;
        inner.live_bytes += frame_len(&body);
        inner.accepted.insert(rec.job_id.clone(), body);
        if inner.dead_bytes > inner.live_bytes.max(16 << 20) {
            self.compact(&mut inner)?;
        }
        Ok(())
    }

    /// Records a finished job (not fsynced: a `write(2)` outlives the process). Errors are
    /// logged, not returned: the job's callers get their answer either way.
    pub fn finished(&self, outcome: &JobOutcome, digest: &[u8; 32]) {
        let mut inner = self.inner.lock();
        if inner.sealed {
            return;
        }
        let now = unix_ms();
        let body = encode_finished(&FinishedRecord {
            outcome: outcome.clone(),
            digest: *digest,
            finished_unix_ms: now,
        });
        if let Err(err) = self.append(&mut inner, &body) {
            warn!(job = %outcome.job_id, cause = %err, "journal: finished record not written");
            return;
        }
        if let Some(old) = inner.accepted.remove(&outcome.job_id) {
            let n = frame_len(&old);
            inner.live_bytes = inner.live_bytes.saturating_sub(n);
            inner.dead_bytes += n;
        }
        inner.live_bytes += frame_len(&body);
        inner
            .finished
            .push_back((outcome.job_id.clone(), now, body));
        self.prune(&mut inner, now);
    }

    /// Stops recording finishes and fsyncs: called when the drain ends, so jobs the drain
    /// fails stay pending for the next start.
    pub fn seal(&self) {
        let mut inner = self.inner.lock();
        inner.sealed = true;
        if let Err(e) = inner.file.sync_all() {
            warn!(cause = %e, "journal: final fsync failed");
        }
    }

    /// Drops finished records beyond retention (count or age) from the live set.
    fn prune(&self, inner: &mut Inner, now_ms: u64) {
        let max_age = self.retention.as_millis() as u64;
        while let Some((_, at, body)) = inner.finished.front() {
            let too_many = inner.finished.len() > self.retention_count;
            let too_old = now_ms.saturating_sub(*at) > max_age;
            if !(too_many || too_old) {
                break;
            }
            let n = frame_len(body);
            inner.live_bytes = inner.live_bytes.saturating_sub(n);
            inner.dead_bytes += n;
            inner.finished.pop_front();
        }
    }

    fn append(&self, inner: &mut Inner, body: &[u8]) -> Result<(), JournalError> {
        inner
            .file
            .write_all(&frame(body))
            .map_err(|e| self.io_err(e))
    }

    /// Rewrites the live records to a new file, fsyncs it and renames it into place.
    fn compact(&self, inner: &mut Inner) -> Result<(), JournalError> {
        let path = self.dir.join(FILE_NAME);
        let tmp = self.dir.join(format!("{FILE_NAME}.new"));
        let io = |p: &Path| {
            let p = p.to_path_buf();
            move |source| JournalError::Io { path: p, source }
        };
        let mut out = std::io::BufWriter::new(File::create(&tmp).map_err(io(&tmp))?);
        let mut live = 0;
        let bodies = inner
            .prefixes
            .iter()
            .chain(inner.accepted.values())
            .chain(inner.finished.iter().map(|(_, _, b)| b));
        for body in bodies {
            out.write_all(&frame(body)).map_err(io(&tmp))?;
            live += frame_len(body);
        }
        let file = out.into_inner().map_err(|e| io(&tmp)(e.into_error()))?;
        file.sync_all().map_err(io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        // The rename is durable once the directory is.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        let mut file = OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(io(&path))?;
        file.seek(SeekFrom::End(0)).map_err(io(&path))?;
        inner.file = file;
        inner.live_bytes = live;
        inner.dead_bytes = 0;
        Ok(())
    }

    fn io_err(&self, source: std::io::Error) -> JournalError {
        JournalError::Io {
            path: self.dir.join(FILE_NAME),
            source,
        }
    }
}

/// Milliseconds since the Unix epoch.
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The journal directory, created 0750 whatever the umask.
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o750)
        .create(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o750))
}

#[cfg(test)]
mod tests;
