//! Whether this daemon can take proofs now, for load balancers: [`readiness`] decides it
//! from the engine's status, [`watch`] keeps the standard gRPC health service
//! (`grpc.health.v1.Health`, from `tonic-health`) in step with it, and the HTTP port
//! answers `GET /ready` from the same function.

use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{Engine, EngineStatus};
use tokio_util::sync::CancellationToken;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::pb::proving_engine_server::ProvingEngineServer;

/// How often the health service re-reads the engine's status.
const POLL: Duration = Duration::from_millis(250);

/// Serving or not, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The daemon accepts jobs and has a device to prove them on.
    pub ready: bool,
    /// Why it is not ready (empty when ready).
    pub reason: String,
}

/// Readiness from a status snapshot: not ready while draining or stopping, or when no
/// device other than the CPU fallback is in service (a daemon whose GPUs are all out of
/// service still proves on the fallback, but far too slowly to take new work from a
/// balancer).
pub fn readiness(s: &EngineStatus) -> Readiness {
    let regular: Vec<_> = s.devices.iter().filter(|d| !d.fallback).collect();
    let reason = if !s.accepting {
        "draining: not accepting jobs".to_string()
    } else if regular.is_empty() {
        "no device to prove on".to_string()
    } else if !regular.iter().any(|d| d.in_service) {
        let why: Vec<String> = regular
            .iter()
            .map(|d| format!("{} ({})", d.name, d.out_of_service_reason))
            .collect();
        format!("no device in service: {}", why.join(", "))
    } else {
        String::new()
    };
    Readiness {
        ready: reason.is_empty(),
        reason,
    }
}

/// Sets both the whole server's status ("") and `cuzk.v1.ProvingEngine`'s.
pub async fn set(reporter: &HealthReporter, ready: bool) {
    let status = if ready {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    };
    reporter.set_service_status("", status).await;
    reporter
        .set_service_status(
            <ProvingEngineServer<crate::grpc::ProvingService> as tonic::server::NamedService>::NAME,
            status,
        )
        .await;
}

/// Keeps the health service in step with the engine until `stop` is cancelled.
pub async fn watch(engine: Arc<Engine>, reporter: HealthReporter, stop: CancellationToken) {
    let mut last = None;
    loop {
        let ready = readiness(&engine.status()).ready;
        if last != Some(ready) {
            set(&reporter, ready).await;
            tracing::info!(ready, "readiness changed");
            last = Some(ready);
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
