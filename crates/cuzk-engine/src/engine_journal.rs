//! The engine's side of the job journal (`journal.rs`): replaying it at start (jobs
//! accepted before a restart are proved again under their ids, or failed with a reason
//! when their request no longer parses; finished results come back to be answered), the
//! record of each accepted job, and telling an expired job id from one never issued.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::journal::{unix_ms, AcceptedRecord, Replayed};
use crate::state::{Retained, State};
use crate::{Engine, EngineError, JobOutcome, JobSpec, JobState, ProofKindId};

impl Engine {
    /// Puts a replayed journal back: retained results first (so a replayed job that
    /// attaches finds them), then the pending jobs in their original order.
    pub(crate) fn replay(&self, replayed: Replayed) {
        let now_ms = unix_ms();
        {
            let mut st = self.shared.state.lock();
            let now = Instant::now();
            for rec in replayed.finished {
                let age = Duration::from_millis(now_ms.saturating_sub(rec.finished_unix_ms));
                let at = now.checked_sub(age).unwrap_or(now);
                let o = rec.outcome;
                let id = o.job_id.clone();
                if !o.request_id.is_empty() {
                    st.by_request.insert(o.request_id.clone(), id.clone());
                    st.by_identity
                        .insert((o.request_id.clone(), rec.digest), id.clone());
                }
                st.finished.push_back((id.clone(), at));
                st.results.insert(
                    id,
                    Retained {
                        outcome: Arc::new(o),
                        digest: rec.digest,
                    },
                );
            }
            self.shared.prune_finished(&mut st, now);
        }
        let (mut resumed, mut failed) = (0, 0);
        for rec in replayed.pending {
            let id = rec.job_id.clone();
            match self.resubmit(rec.clone()) {
                Ok(()) => resumed += 1,
                Err(err) => {
                    failed += 1;
                    warn!(job = %id, cause = %err, "journal: a job accepted before the restart cannot be replayed");
                    self.fail_unreplayable(rec, &err.to_string());
                }
            }
        }
        if resumed + failed > 0 {
            info!(resumed, failed, "journal: jobs accepted before the restart");
        }
    }

    fn resubmit(&self, rec: AcceptedRecord) -> Result<(), EngineError> {
        let kind =
            ProofKindId::from_name(&rec.kind).ok_or_else(|| EngineError::UnsupportedKind {
                kind: rec.kind.clone(),
            })?;
        let spec = JobSpec {
            request_id: rec.request_id,
            kind,
            priority: rec.priority,
            request: rec.request,
        };
        self.submit_as(spec, Some(rec.job_id)).map(|_| ())
    }

    /// A replayed job whose request no longer parses (a kind this daemon no longer
    /// serves, parameters gone) is answered FAILED with the reason, and journaled so.
    fn fail_unreplayable(&self, rec: AcceptedRecord, cause: &str) {
        let outcome = JobOutcome {
            job_id: rec.job_id.clone(),
            request_id: rec.request_id.clone(),
            kind: ProofKindId::from_name(&rec.kind).unwrap_or(ProofKindId::Synthetic),
            state: JobState::Failed,
            proof: Vec::new(),
            error: format!("accepted before a restart, but cannot be proved after it: {cause}"),
            retryable: false,
            timings: Default::default(),
        };
        let digest = [0u8; 32];
        if let Some(journal) = &self.shared.journal {
            journal.finished(&outcome, &digest);
        }
        let mut st = self.shared.state.lock();
        st.finished.push_back((rec.job_id.clone(), Instant::now()));
        st.results.insert(
            rec.job_id,
            Retained {
                outcome: Arc::new(outcome),
                digest,
            },
        );
    }

    /// Journals an accepted job before its submit is answered; when that fails the job
    /// is taken back and the submit refused (an answer would promise what a crash loses).
    pub(crate) fn journal_accepted(&self, id: &str, spec: &JobSpec) -> Result<(), EngineError> {
        let Some(journal) = &self.shared.journal else {
            return Ok(());
        };
        let rec = AcceptedRecord {
            job_id: id.to_string(),
            request_id: spec.request_id.clone(),
            kind: spec.kind.as_str().to_string(),
            priority: spec.priority,
            request: spec.request.clone(),
        };
        if let Err(err) = journal.accepted(&rec) {
            let mut st = self.shared.state.lock();
            let end = crate::state::JobEnd::Failed {
                reason: format!("not journaled: {err}"),
                retryable: true,
            };
            let dropped = self.shared.finish_job(&mut st, id, end);
            drop(st);
            drop(dropped);
            return Err(err.into());
        }
        Ok(())
    }

    /// The refusal for an id that is neither active nor retained: expired when this
    /// daemon (this run, or an earlier one its journal remembers) issued it.
    pub(crate) fn unknown(&self, st: &State, job_id: &str) -> EngineError {
        let issued = job_id.rsplit_once('-').is_some_and(|(prefix, seq)| {
            let Ok(seq) = seq.parse::<u64>() else {
                return false;
            };
            (prefix == self.shared.id_prefix && seq < st.next_seq)
                || self.shared.prior_prefixes.iter().any(|p| p == prefix)
        });
        if issued {
            EngineError::ExpiredJob(job_id.to_string())
        } else {
            EngineError::UnknownJob(job_id.to_string())
        }
    }
}
