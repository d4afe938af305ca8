//! HTTP front end with axum: `GET /metrics` (Prometheus text exposition 0.0.4),
//! `GET /status` (the engine status as JSON, built here by hand: engine types do not
//! derive `Serialize`) and `GET /ready` (200 when the daemon can take proofs, else 503 with
//! the reason, for load balancers' HTTP checks).

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use cuzk_engine::{Engine, EngineStatus, ParamsState, SrsTier};
use serde_json::{json, Value};

/// The router serving `/metrics` and `/status`.
pub fn router(engine: Arc<Engine>) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/ready", get(ready))
        .with_state(engine)
}

async fn metrics(State(engine): State<Arc<Engine>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        engine.metrics_text(),
    )
}

async fn status(State(engine): State<Arc<Engine>>) -> impl IntoResponse {
    axum::Json(status_json(&engine.status()))
}

/// `GET /ready`: the daemon's readiness; `GET /ready?circuit=porep-32g`: for proofs of
/// that circuit (its parameters file there and whole too).
async fn ready(
    State(engine): State<Arc<Engine>>,
    Query(q): Query<HashMap<String, String>>,
) -> impl IntoResponse {
    let status = engine.status();
    let r = match q.get("circuit") {
        Some(id) => crate::health::circuit_readiness(&status, id),
        None => crate::health::readiness(&status),
    };
    if r.ready {
        (StatusCode::OK, "ready\n".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {}\n", r.reason),
        )
    }
}

/// The status snapshot as JSON.
pub fn status_json(s: &EngineStatus) -> Value {
    let readiness = crate::health::readiness(s);
    json!({
        "ready": readiness.ready,
        "not_ready_reason": readiness.reason,
        "uptime_seconds": s.uptime.as_secs(),
        "accepting": s.accepting,
        "active_jobs": s.active_jobs,
        "retained_results": s.retained_results,
        "total_proofs_completed": s.total_completed,
        "total_proofs_failed": s.total_failed,
        "total_proofs_cancelled": s.total_cancelled,
        "memory_reserved_bytes": s.memory_reserved_bytes,
        "memory_limit_bytes": s.memory_limit_bytes,
        "memory_ledger": {
            "budget_bytes": s.memory_ledger.budget_bytes,
            "total_bytes": s.memory_ledger.total_bytes(),
            "srs_bytes": s.memory_ledger.srs_bytes,
            "recorded_shapes_bytes": s.memory_ledger.recorded_bytes,
            "pinned_staging_bytes": s.memory_ledger.pinned_bytes,
            "device_compute_bytes": s.memory_ledger.device_compute_bytes,
            "partitions_bytes": s.memory_ledger.partitions_bytes,
        },
        "devices": s.devices.iter().map(|d| json!({
            "name": d.name,
            "hardware": d.hardware,
            "is_gpu": d.is_gpu,
            "ordinal": d.ordinal,
            "vram_total_bytes": d.vram_total_bytes,
            "matrices_vram_bytes": d.matrices_vram_bytes,
            "vram_budget_bytes": d.vram_budget_bytes,
            "vram_used_bytes": d.vram_used_bytes,
            "proving_mode": d.proving_mode,
            "workers": d.workers,
            "busy_seconds": d.busy.as_secs_f64(),
            "current_job_id": d.current_job_id,
            "current_proof_kind": d.current_kind.map(|k| k.as_str()),
            "fallback": d.fallback,
            "critical_only": d.critical_only,
            "in_service": d.in_service,
            "out_of_service_reason": d.out_of_service_reason,
            "faults_total": d.faults_total,
            "last_fault": d.last_fault,
        })).collect::<Vec<_>>(),
        "srs": s.srs.iter().map(|e| json!({
            "circuit_id": e.circuit_id,
            "tier": match e.tier { SrsTier::Vram => "vram", SrsTier::Host => "host", SrsTier::Disk => "disk", SrsTier::File => "file" },
            "size_bytes": e.size_bytes,
            "ref_count": e.ref_count,
            "path": e.path.display().to_string(),
            "load_time_ms": e.load_time.as_millis() as u64,
        })).collect::<Vec<_>>(),
        "params": {
            "param_dir": s.params.param_dir.display().to_string(),
            "generated": s.params.generated,
            "circuits": s.params.circuits.iter().map(|c| json!({
                "circuit_id": c.circuit_id,
                "path": c.path.display().to_string(),
                "state": match c.state {
                    ParamsState::Ready => "ready",
                    ParamsState::Missing => "missing",
                    ParamsState::Broken(_) => "broken",
                },
                "reason": match &c.state { ParamsState::Broken(why) => why.as_str(), _ => "" },
            })).collect::<Vec<_>>(),
        },
        "queues": s.queues.iter().map(|q| json!({
            "proof_kind": q.kind.as_str(),
            "pending": q.pending,
            "in_progress": q.in_progress,
        })).collect::<Vec<_>>(),
        "queued_partitions_by_priority": s.queued_by_priority.iter()
            .map(|(p, n)| (p.as_str().to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
        "partitions_by_stage": s.partitions_by_stage.iter()
            .map(|(stage, n)| (stage.to_string(), json!(n))).collect::<serde_json::Map<_, _>>(),
    })
}
