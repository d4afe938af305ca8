//! Whether this daemon can take proofs now, for load balancers: [`readiness`] decides it
//! from the engine's status, [`watch()`] keeps the standard gRPC health service
//! (`grpc.health.v1.Health`, from `tonic-health`) and the gate's readiness in step with
//! it, and the HTTP port answers `GET /ready` from the same function.

use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{Engine, EngineStatus, ParamsState};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tonic_health::server::HealthReporter;
use tonic_health::ServingStatus;

use crate::pb::proving_engine_server::ProvingEngineServer;

/// `cuzk.v1.ProvingEngine`, the service name health reports beside "".
const SERVICE: &str =
    <ProvingEngineServer<crate::grpc::ProvingService> as tonic::server::NamedService>::NAME;

/// How often the health service and the gate re-read the engine's status.
const POLL: Duration = Duration::from_millis(250);

/// Serving or not, and why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Readiness {
    /// The daemon accepts jobs and has a device to prove them on.
    pub ready: bool,
    /// Why it is not ready (empty when ready).
    pub reason: String,
}

/// Readiness from a status snapshot: not ready while draining or stopping, when no
/// device other than the CPU fallback and the critical lanes is in service (a daemon whose
/// GPUs are all out of service still proves on the fallback, but far too slowly to take
/// new work from a balancer, and a lane proves only CRITICAL work), when a parameters file is there and broken (its jobs would fail at once,
/// and a balancer would send this daemon more of them for finishing fast), or when there
/// are no parameters to prove anything with.
pub fn readiness(s: &EngineStatus) -> Readiness {
    let regular: Vec<_> = s
        .devices
        .iter()
        .filter(|d| !d.fallback && !d.critical_only)
        .collect();
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
        s.params.not_ready_reason().unwrap_or_default()
    };
    Readiness {
        ready: reason.is_empty(),
        reason,
    }
}

/// The health service name that reports one circuit's readiness:
/// `cuzk.v1.ProvingEngine/porep-32g`.
pub fn circuit_service(circuit_id: &str) -> String {
    format!("{SERVICE}/{circuit_id}")
}

/// Readiness for proofs of one circuit (`porep-32g`): the daemon's, and its parameters
/// file there and whole. A circuit the providers do not list (a synthetic one, made on
/// demand) is ready when the daemon is.
pub fn circuit_readiness(s: &EngineStatus, circuit_id: &str) -> Readiness {
    match circuit_own_reason(s, circuit_id) {
        Some(reason) => Readiness {
            ready: false,
            reason,
        },
        None => readiness(s),
    }
}

/// Why `circuit_id`'s own parameters cannot be proved with, or `None`.
fn circuit_own_reason(s: &EngineStatus, circuit_id: &str) -> Option<String> {
    match s.params.state_of(circuit_id) {
        Some(ParamsState::Missing) => Some(format!(
            "{circuit_id}: no parameters file in {}",
            s.params.param_dir.display()
        )),
        Some(ParamsState::Broken(why)) => Some(format!("{circuit_id}: {why}")),
        Some(ParamsState::Ready) | None => None,
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
    reporter.set_service_status(SERVICE, status).await;
}

/// Keeps the health service and the gate ([`crate::gate`], through `gate`) in step with
/// the engine until `stop` is cancelled, from one status read per poll: the whole
/// daemon's status, and each listed circuit's under [`circuit_service`].
pub async fn watch(
    engine: Arc<Engine>,
    reporter: HealthReporter,
    gate: watch::Sender<Readiness>,
    stop: CancellationToken,
) {
    let mut last = None;
    let mut last_circuit: std::collections::HashMap<String, bool> = Default::default();
    loop {
        let status = engine.status();
        let r = readiness(&status);
        gate.send_if_modified(|old| {
            let changed = *old != r;
            if changed {
                *old = r.clone();
            }
            changed
        });
        if last != Some(r.ready) {
            set(&reporter, r.ready).await;
            // The first reading at info: a reason the daemon starts with was logged by the
            // engine already (say each cause once); a change later is worth a warning.
            if r.ready || last.is_none() {
                tracing::info!(ready = r.ready, reason = %r.reason, "readiness");
            } else {
                tracing::warn!(ready = false, reason = %r.reason, "readiness changed");
            }
            last = Some(r.ready);
        }
        for c in &status.params.circuits {
            let ready = r.ready && circuit_own_reason(&status, &c.circuit_id).is_none();
            if last_circuit.get(&c.circuit_id) != Some(&ready) {
                let serving = if ready {
                    ServingStatus::Serving
                } else {
                    ServingStatus::NotServing
                };
                reporter
                    .set_service_status(circuit_service(&c.circuit_id), serving)
                    .await;
                last_circuit.insert(c.circuit_id.clone(), ready);
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}
