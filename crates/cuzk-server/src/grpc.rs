//! The `cuzk.v1.ProvingEngine` service over an [`Engine`]. Every rpc does real work:
//! `AwaitProof` honours `timeout_ms`, `CancelProof` cancels, `EvictSRS` evicts, `GetStatus`
//! reports what the engine tracks. A job that failed retryably answers `AwaitProof` and
//! `Prove` with UNAVAILABLE, so clients and load balancers retry it. A caller leaving
//! `Prove` early is logged and its job runs on; only `CancelProof` cancels.

use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::Engine;
use tonic::{Request, Response, Status};
use tracing::info;

use crate::convert;
use crate::pb;
use crate::pb::proving_engine_server::ProvingEngine;

/// The gRPC service.
#[derive(Clone)]
pub struct ProvingService {
    engine: Arc<Engine>,
    options: ServiceOptions,
}

/// What the service allows beyond the engine's own checks.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServiceOptions {
    /// Serve the test-only SYNTHETIC kind: one request can make the daemon generate and
    /// write parameters (tens of GB at large sizes), so production daemons refuse it.
    pub allow_synthetic: bool,
}

/// The prefix of the synthetic kind's circuit ids (`synthetic-<log_n>`).
const SYNTHETIC_CIRCUIT_PREFIX: &str = "synthetic-";

impl ProvingService {
    /// Serves `engine`.
    pub fn new(engine: Arc<Engine>, options: ServiceOptions) -> Self {
        ProvingService { engine, options }
    }

    fn synthetic_refused(&self) -> Status {
        Status::failed_precondition(
            "invalid proof_kind: SYNTHETIC is test-only and disabled on this daemon \
             (allow_synthetic = true, or --allow-synthetic, enables it)",
        )
    }

    async fn submit(&self, req: pb::SubmitProofRequest) -> Result<pb::SubmitProofResponse, Status> {
        let spec = convert::job_spec(req)?;
        if spec.kind == cuzk_engine::ProofKindId::Synthetic && !self.options.allow_synthetic {
            return Err(self.synthetic_refused());
        }
        let engine = self.engine.clone();
        // Parsing a request (a C1 output is tens of MB of JSON) is blocking work.
        let out = tokio::task::spawn_blocking(move || engine.submit(spec))
            .await
            .map_err(|e| Status::internal(format!("submit task: {e}")))?
            .map_err(convert::engine_error)?;
        Ok(pb::SubmitProofResponse {
            job_id: out.job_id,
            queue_position: out.queue_position,
            assigned_gpu: out.assigned_device,
        })
    }

    async fn wait(&self, job_id: &str, timeout_ms: u64) -> Result<pb::AwaitProofResponse, Status> {
        let timeout = (timeout_ms > 0).then(|| Duration::from_millis(timeout_ms));
        let outcome = self
            .engine
            .await_job(job_id, timeout)
            .await
            .map_err(convert::engine_error)?;
        if let Some(status) = convert::retryable_failure(&outcome) {
            return Err(status);
        }
        Ok(convert::await_response(job_id, outcome))
    }
}

/// Logs when a `Prove` caller leaves before its answer; the job is not touched.
struct LeftEarly {
    job_id: String,
    armed: bool,
}

impl Drop for LeftEarly {
    fn drop(&mut self) {
        if self.armed {
            info!(job = %self.job_id, "prove caller disconnected; job continues");
        }
    }
}

#[tonic::async_trait]
impl ProvingEngine for ProvingService {
    async fn submit_proof(
        &self,
        request: Request<pb::SubmitProofRequest>,
    ) -> Result<Response<pb::SubmitProofResponse>, Status> {
        self.submit(request.into_inner()).await.map(Response::new)
    }

    async fn await_proof(
        &self,
        request: Request<pb::AwaitProofRequest>,
    ) -> Result<Response<pb::AwaitProofResponse>, Status> {
        let req = request.into_inner();
        self.wait(&req.job_id, req.timeout_ms)
            .await
            .map(Response::new)
    }

    async fn prove(
        &self,
        request: Request<pb::ProveRequest>,
    ) -> Result<Response<pb::ProveResponse>, Status> {
        let submit = request.into_inner().submit.ok_or_else(|| {
            Status::invalid_argument("invalid submit: missing SubmitProofRequest")
        })?;
        let submitted = self.submit(submit).await?;
        let mut guard = LeftEarly {
            job_id: submitted.job_id.clone(),
            armed: true,
        };
        let result = self.wait(&submitted.job_id, 0).await;
        guard.armed = false;
        Ok(Response::new(pb::ProveResponse {
            result: Some(result?),
        }))
    }

    async fn cancel_proof(
        &self,
        request: Request<pb::CancelProofRequest>,
    ) -> Result<Response<pb::CancelProofResponse>, Status> {
        let job_id = request.into_inner().job_id;
        let was_running = self.engine.cancel(&job_id).map_err(convert::engine_error)?;
        info!(job = %job_id, was_running, "cancel requested");
        Ok(Response::new(pb::CancelProofResponse { was_running }))
    }

    async fn get_status(
        &self,
        _request: Request<pb::GetStatusRequest>,
    ) -> Result<Response<pb::GetStatusResponse>, Status> {
        Ok(Response::new(convert::status_response(
            &self.engine.status(),
        )))
    }

    async fn get_metrics(
        &self,
        _request: Request<pb::GetMetricsRequest>,
    ) -> Result<Response<pb::GetMetricsResponse>, Status> {
        Ok(Response::new(pb::GetMetricsResponse {
            prometheus_text: self.engine.metrics_text(),
        }))
    }

    async fn preload_srs(
        &self,
        request: Request<pb::PreloadSrsRequest>,
    ) -> Result<Response<pb::PreloadSrsResponse>, Status> {
        let circuit_id = request.into_inner().circuit_id;
        if circuit_id.is_empty() {
            return Err(Status::invalid_argument("invalid circuit_id: empty"));
        }
        if circuit_id.starts_with(SYNTHETIC_CIRCUIT_PREFIX) && !self.options.allow_synthetic {
            return Err(self.synthetic_refused());
        }
        let engine = self.engine.clone();
        let (already_loaded, load_time) =
            tokio::task::spawn_blocking(move || engine.preload_srs(&circuit_id))
                .await
                .map_err(|e| Status::internal(format!("preload task: {e}")))?
                .map_err(convert::engine_error)?;
        Ok(Response::new(pb::PreloadSrsResponse {
            already_loaded,
            load_time_ms: u64::try_from(load_time.as_millis()).unwrap_or(u64::MAX),
        }))
    }

    async fn evict_srs(
        &self,
        request: Request<pb::EvictSrsRequest>,
    ) -> Result<Response<pb::EvictSrsResponse>, Status> {
        let circuit_id = request.into_inner().circuit_id;
        if circuit_id.is_empty() {
            return Err(Status::invalid_argument("invalid circuit_id: empty"));
        }
        let (was_loaded, freed_bytes) = self
            .engine
            .evict_srs(&circuit_id)
            .map_err(convert::engine_error)?;
        Ok(Response::new(pb::EvictSrsResponse {
            was_loaded,
            freed_bytes,
        }))
    }

    async fn get_timeline(
        &self,
        request: Request<pb::GetTimelineRequest>,
    ) -> Result<Response<pb::GetTimelineResponse>, Status> {
        let (events, now_us) = self.engine.timeline(request.into_inner().since_us);
        Ok(Response::new(pb::GetTimelineResponse {
            events: events.iter().map(convert::timeline_event).collect(),
            now_us,
        }))
    }
}
