//! Hand-written mapping between protobuf messages and engine types, both ways, and from
//! [`EngineError`] to a gRPC status. Enum values the engine does not know are refused here
//! with INVALID_ARGUMENT naming the field.

use cuzk_engine::{
    AwaitOutcome, EngineError, EngineStatus, JobOutcome, JobSpec, JobState, Priority, ProofKindId,
    ProofRequest, SrsTier, TimelineEvent,
};
use tonic::Status;

use crate::pb;

/// Maps a submit request to a job spec.
///
/// # Errors
/// INVALID_ARGUMENT naming `proof_kind` or `priority` when the enum value is unknown or
/// unspecified.
pub fn job_spec(req: pb::SubmitProofRequest) -> Result<JobSpec, Status> {
    let kind = match pb::ProofKind::try_from(req.proof_kind) {
        Ok(pb::ProofKind::PorepSealCommit) => ProofKindId::PorepSealCommit,
        Ok(pb::ProofKind::SnapDealsUpdate) => ProofKindId::SnapDealsUpdate,
        Ok(pb::ProofKind::WindowPostPartition) => ProofKindId::WindowPostPartition,
        Ok(pb::ProofKind::WinningPost) => ProofKindId::WinningPost,
        Ok(pb::ProofKind::Synthetic) => ProofKindId::Synthetic,
        Ok(pb::ProofKind::Unspecified) => {
            return Err(Status::invalid_argument(
                "invalid proof_kind: PROOF_KIND_UNSPECIFIED",
            ))
        }
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "invalid proof_kind: unknown value {}",
                req.proof_kind
            )))
        }
    };
    let priority = match pb::Priority::try_from(req.priority) {
        Ok(pb::Priority::Unspecified) => None,
        Ok(pb::Priority::Low) => Some(Priority::Low),
        Ok(pb::Priority::Normal) => Some(Priority::Normal),
        Ok(pb::Priority::High) => Some(Priority::High),
        Ok(pb::Priority::Critical) => Some(Priority::Critical),
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "invalid priority: unknown value {}",
                req.priority
            )))
        }
    };
    Ok(JobSpec {
        request_id: req.request_id,
        kind,
        priority,
        request: ProofRequest {
            sector_size: req.sector_size,
            registered_proof: req.registered_proof,
            vanilla_proof: req.vanilla_proof,
            vanilla_proofs: req.vanilla_proofs,
            sector_number: req.sector_number,
            miner_id: req.miner_id,
            randomness: req.randomness,
            partition_index: req.partition_index,
            comm_r_old: req.comm_r_old,
            comm_r_new: req.comm_r_new,
            comm_d_new: req.comm_d_new,
        },
    })
}

/// The wire enum of a kind.
pub fn proof_kind(kind: ProofKindId) -> pb::ProofKind {
    match kind {
        ProofKindId::PorepSealCommit => pb::ProofKind::PorepSealCommit,
        ProofKindId::SnapDealsUpdate => pb::ProofKind::SnapDealsUpdate,
        ProofKindId::WindowPostPartition => pb::ProofKind::WindowPostPartition,
        ProofKindId::WinningPost => pb::ProofKind::WinningPost,
        ProofKindId::Synthetic => pb::ProofKind::Synthetic,
    }
}

/// A finished job whose failure a retry elsewhere or later may fix (drain timeout,
/// parameters that cannot load, no healthy device) as UNAVAILABLE: the status that load
/// balancers and Curio's client retry on. OK with status FAILED would let a daemon that
/// fails every job fast attract the load.
pub fn retryable_failure(outcome: &AwaitOutcome) -> Option<Status> {
    match outcome {
        AwaitOutcome::Finished(o) if o.state == JobState::Failed && o.retryable => {
            Some(Status::unavailable(format!(
                "job {} failed, a retry may succeed: {}",
                o.job_id, o.error
            )))
        }
        _ => None,
    }
}

/// An await result as the wire carries it.
pub fn await_response(job_id: &str, outcome: AwaitOutcome) -> pb::AwaitProofResponse {
    match outcome {
        AwaitOutcome::Timeout => pb::AwaitProofResponse {
            job_id: job_id.to_string(),
            status: pb::await_proof_response::Status::Timeout as i32,
            ..Default::default()
        },
        AwaitOutcome::Finished(outcome) => finished(&outcome),
    }
}

fn finished(o: &JobOutcome) -> pb::AwaitProofResponse {
    use pb::await_proof_response::Status as S;
    let status = match o.state {
        JobState::Completed => S::Completed,
        JobState::Failed => S::Failed,
        JobState::Cancelled => S::Cancelled,
        _ => S::Unknown,
    };
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    pb::AwaitProofResponse {
        job_id: o.job_id.clone(),
        status: status as i32,
        proof: o.proof.clone(),
        error_message: o.error.clone(),
        queue_wait_ms: ms(o.timings.queue_wait),
        srs_load_ms: ms(o.timings.srs_load),
        synthesis_ms: ms(o.timings.synthesis),
        gpu_compute_ms: ms(o.timings.compute),
        total_ms: ms(o.timings.total),
    }
}

/// The status snapshot as the wire carries it.
pub fn status_response(s: &EngineStatus) -> pb::GetStatusResponse {
    let ms = |d: std::time::Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let readiness = crate::health::readiness(s);
    pb::GetStatusResponse {
        gpus: s
            .devices
            .iter()
            // One entry per card, as Curio counts them: a critical lane is a second
            // prover on a card already listed (it is in `devices`).
            .filter(|d| d.is_gpu && !d.critical_only)
            .map(|d| pb::GpuStatus {
                ordinal: d.ordinal,
                name: d.hardware.clone(),
                vram_total_bytes: d.vram_total_bytes,
                // The engine tracks its reservations, not the driver's free memory; report
                // nothing rather than a guess.
                vram_free_bytes: 0,
                current_job_id: d.current_job_id.clone(),
                current_proof_kind: d
                    .current_kind
                    .map(|k| k.as_str().to_string())
                    .unwrap_or_default(),
            })
            .collect(),
        loaded_srs: s
            .srs
            .iter()
            .map(|e| pb::SrsStatus {
                circuit_id: e.circuit_id.clone(),
                tier: match e.tier {
                    SrsTier::Vram => pb::srs_status::Tier::Hot,
                    SrsTier::Host => pb::srs_status::Tier::Warm,
                    // Streamed from the file: read from disk (through the page cache).
                    SrsTier::Disk | SrsTier::File => pb::srs_status::Tier::Cold,
                } as i32,
                size_bytes: e.size_bytes,
                ref_count: e.ref_count,
                path: e.path.display().to_string(),
                load_time_ms: ms(e.load_time),
            })
            .collect(),
        queues: s
            .queues
            .iter()
            .map(|q| pb::QueueStatus {
                proof_kind: proof_kind(q.kind).as_str_name().to_string(),
                pending: q.pending,
                in_progress: q.in_progress,
            })
            .collect(),
        total_proofs_completed: s.total_completed,
        total_proofs_failed: s.total_failed,
        uptime_seconds: s.uptime.as_secs(),
        pinned_memory_bytes: s.memory_reserved_bytes,
        pinned_memory_limit_bytes: s.memory_limit_bytes,
        total_proofs_cancelled: s.total_cancelled,
        active_jobs: s.active_jobs,
        accepting: s.accepting,
        ready: readiness.ready,
        not_ready_reason: readiness.reason,
        partitions: s
            .partitions_by_stage
            .iter()
            .map(|(stage, count)| pb::PartitionStage {
                stage: stage.to_string(),
                count: *count,
            })
            .collect(),
        devices: s
            .devices
            .iter()
            .map(|d| pb::DeviceStatus {
                name: d.name.clone(),
                hardware: d.hardware.clone(),
                is_gpu: d.is_gpu,
                workers: d.workers as u32,
                busy_ms: ms(d.busy),
                current_job_id: d.current_job_id.clone(),
                fallback: d.fallback,
                critical_only: d.critical_only,
                in_service: d.in_service,
                out_of_service_reason: d.out_of_service_reason.clone(),
                faults_total: d.faults_total,
                last_fault: d.last_fault.clone(),
                vram_budget_bytes: d.vram_budget_bytes,
                vram_used_bytes: d.vram_used_bytes,
                proving_mode: d.proving_mode.clone(),
            })
            .collect(),
    }
}

/// A timeline event as the wire carries it.
pub fn timeline_event(e: &TimelineEvent) -> pb::TimelineEvent {
    pb::TimelineEvent {
        job_id: e.job_id.clone(),
        partition_idx: e.partition_idx,
        stage: e.stage.as_str().to_string(),
        detail: e.detail.clone(),
        worker: e.worker.clone(),
        device: e.device.clone(),
        start_us: e.start_us,
        end_us: e.end_us,
    }
}

/// The gRPC status of an engine refusal.
pub fn engine_error(err: EngineError) -> Status {
    let message = err.to_string();
    match err {
        EngineError::InvalidRequest(_)
        | EngineError::UnsupportedKind { .. }
        | EngineError::UnknownSrs { .. } => Status::invalid_argument(message),
        EngineError::ResourceExhausted(_) => Status::resource_exhausted(message),
        EngineError::SrsInUse { .. } => Status::failed_precondition(message),
        EngineError::UnknownJob(_) | EngineError::ExpiredJob(_) => Status::not_found(message),
        // The journal could not be written: nothing was accepted; another daemon may take it.
        EngineError::Journal(_) => Status::unavailable(message),
        EngineError::ShuttingDown => Status::unavailable(message),
        // Parameters that cannot load here may load on another daemon.
        EngineError::SrsLoad { .. } => Status::unavailable(message),
        EngineError::Config(_) => Status::internal(message),
    }
}
