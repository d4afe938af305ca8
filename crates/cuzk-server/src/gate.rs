//! [`GateLayer`]: what a load balancer in front of several daemons needs from each one's
//! gRPC server. Every response names the daemon that answered (`x-cuzk-daemon: NAME`), so
//! a client can send its `AwaitProof` and `CancelProof` back to the daemon that holds its
//! job; and while [`crate::health::readiness`] says no, the calls that start work
//! ([`GATED_PATHS`]: `Prove`, `SubmitProof`) are refused without acting on them:
//! HTTP 503 and `grpc-status: 14` (UNAVAILABLE) and the reason, as a trailers-only
//! response, after [`REFUSAL_DELAY`].
//!
//! Why HTTP 503: open-source nginx has no active health checks, and a gRPC error inside an
//! HTTP 200 response is invisible to it, so a daemon that fails fast (no parameters, no
//! device) would draw most of the work under `least_conn`. A 503 is what
//! `grpc_next_upstream http_503` acts on: nginx passes the call to another daemon and
//! counts a failure against this one (`max_fails`, `fail_timeout`). nginx 1.22 needs three
//! things for it, each measured behind it: it must have read the whole request first (it
//! streams gRPC bodies, and never re-sends one it streamed; `deploy/nginx/gen.sh` makes
//! it buffer them with a `mirror`), the refusal must come after the daemon has read the
//! request to its end ([`DRAIN_LIMIT`]) and must not arrive together with the
//! connection's SETTINGS ([`REFUSAL_DELAY`]); otherwise the call's next try breaks the
//! next daemon's connection. Direct clients see
//! what the engine already answers while draining, UNAVAILABLE with the reason: tonic
//! reads `grpc-status` before the HTTP status, and the gRPC spec's HTTP mapping (grpc-go,
//! Curio's client) turns 503 into UNAVAILABLE too. Reads (`AwaitProof`, `GetStatus`,
//! health, everything else) always pass, so a draining daemon still hands out its results.
//!
//! The readiness is read from a [`watch`] channel that [`crate::health::watch`] keeps current
//! (and [`crate::serve::Daemon`] updates at once when a drain begins), not recomputed per
//! call. The token check ([`crate::auth`]) sits inside the gate: a daemon that is not
//! ready says so to any caller, as its health service does.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::sync::watch;
use tonic::codegen::{http, Body};
use tower::{Layer, Service};

use crate::health::Readiness;

/// The response header that names the daemon.
pub const DAEMON_HEADER: &str = "x-cuzk-daemon";

/// The gRPC paths that start work, refused with HTTP 503 while the daemon is not ready.
pub const GATED_PATHS: [&str; 2] = [
    "/cuzk.v1.ProvingEngine/Prove",
    "/cuzk.v1.ProvingEngine/SubmitProof",
];

/// How long a refusal waits before it is sent. nginx 1.22 acknowledges a new upstream
/// connection's SETTINGS only after reading them; when the 503 arrives in the same read,
/// the acknowledgement is still queued when nginx passes the call on, and it sends it on
/// the next daemon's connection, whose HTTP/2 server closes it ("received unexpected
/// settings ack", PROTOCOL_ERROR): that call fails too and a healthy daemon leaves
/// rotation. Seen on every refusal from a fresh connection in the scale-out test; with
/// the wait, nginx reads the SETTINGS alone and acknowledges them before the answer. A
/// refusal happens once per `fail_timeout` per balancer, so the wait costs nothing.
pub const REFUSAL_DELAY: Duration = Duration::from_millis(50);

/// How long a refusal reads the request before it answers anyway. The body is read to its
/// end first: nginx 1.22, cut off while it still sends a large body, re-sent it to the
/// next daemon with broken framing (h2: "recv_data: stream not found"), and that daemon
/// failed the call and left rotation too. Reading 100+ MB takes about a second on a LAN,
/// once per `fail_timeout`.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(30);

/// Adds [`Gate`] around a gRPC server's services.
#[derive(Clone)]
pub struct GateLayer {
    name: http::HeaderValue,
    ready: watch::Receiver<Readiness>,
    on_refuse: Option<Arc<dyn Fn() + Send + Sync>>,
}

impl GateLayer {
    /// A gate for the daemon `name` whose readiness `ready` follows.
    ///
    /// # Errors
    /// [`GateError::BadName`] when `name` cannot be an HTTP header value.
    pub fn new(name: &str, ready: watch::Receiver<Readiness>) -> Result<Self, GateError> {
        let name = http::HeaderValue::from_str(name).map_err(|_| GateError::BadName {
            name: name.to_string(),
        })?;
        Ok(GateLayer {
            name,
            ready,
            on_refuse: None,
        })
    }

    /// The same gate, calling `count` for every call it refuses (the daemon counts them
    /// in `/metrics`).
    pub fn counting(self, count: impl Fn() + Send + Sync + 'static) -> Self {
        GateLayer {
            on_refuse: Some(Arc::new(count)),
            ..self
        }
    }
}

/// Why a gate could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    /// The daemon's name is not a valid header value.
    #[error("daemon name {name:?} cannot be sent as the {DAEMON_HEADER} header")]
    BadName {
        /// The name.
        name: String,
    },
}

impl<S> Layer<S> for GateLayer {
    type Service = Gate<S>;

    fn layer(&self, inner: S) -> Gate<S> {
        Gate {
            inner,
            name: self.name.clone(),
            ready: self.ready.clone(),
            on_refuse: self.on_refuse.clone(),
        }
    }
}

/// The service [`GateLayer`] makes: names the daemon on every response and refuses
/// [`GATED_PATHS`] with HTTP 503 while not ready.
#[derive(Clone)]
pub struct Gate<S> {
    inner: S,
    name: http::HeaderValue,
    ready: watch::Receiver<Readiness>,
    on_refuse: Option<Arc<dyn Fn() + Send + Sync>>,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, B> Service<http::Request<B>> for Gate<S>
where
    S: Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Body + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let name = self.name.clone();
        if GATED_PATHS.contains(&request.uri().path()) {
            let refusal = {
                let ready = self.ready.borrow();
                (!ready.ready).then(|| ready.reason.clone())
            };
            if let Some(reason) = refusal {
                if let Some(count) = &self.on_refuse {
                    count();
                }
                return Box::pin(async move {
                    let started = tokio::time::Instant::now();
                    let _ = tokio::time::timeout(DRAIN_LIMIT, drain(request.into_body())).await;
                    tokio::time::sleep_until(started + REFUSAL_DELAY).await;
                    Ok(refused(&reason, name))
                });
            }
        }
        let call = self.inner.call(request);
        Box::pin(async move {
            let mut response = call.await?;
            response.headers_mut().insert(DAEMON_HEADER, name);
            Ok(response)
        })
    }
}

/// Reads `body` to its end (or its first error), dropping what it reads.
async fn drain<B: Body>(body: B) {
    let mut body = std::pin::pin!(body);
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        if frame.is_err() {
            return;
        }
    }
}

/// The trailers-only answer to a call that would start work on a daemon that cannot
/// take it: HTTP 503, `grpc-status: 14`, the reason in `grpc-message`.
fn refused(reason: &str, name: http::HeaderValue) -> http::Response<tonic::body::Body> {
    let status = tonic::Status::unavailable(format!(
        "not ready: {reason}; retry with the same request_id (elsewhere)"
    ));
    let mut response: http::Response<tonic::body::Body> = status.into_http();
    *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    response.headers_mut().insert(DAEMON_HEADER, name);
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// A service that answers every call with 200 and counts the calls.
    #[derive(Clone, Default)]
    struct Counting(Arc<std::sync::atomic::AtomicU32>);

    impl Counting {
        fn calls(&self) -> u32 {
            self.0.load(std::sync::atomic::Ordering::Relaxed)
        }
    }

    impl Service<http::Request<tonic::body::Body>> for Counting {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _request: http::Request<tonic::body::Body>) -> Self::Future {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            std::future::ready(Ok(http::Response::new(tonic::body::Body::empty())))
        }
    }

    fn gated(ready: &watch::Sender<Readiness>) -> (Gate<Counting>, Counting) {
        let inner = Counting::default();
        let layer = GateLayer::new("d1", ready.subscribe()).unwrap();
        (layer.layer(inner.clone()), inner)
    }

    fn call(path: &str) -> http::Request<tonic::body::Body> {
        http::Request::builder()
            .uri(path)
            .body(tonic::body::Body::new(String::from("a request")))
            .unwrap()
    }

    fn not_ready(reason: &str) -> Readiness {
        Readiness {
            ready: false,
            reason: reason.into(),
        }
    }

    #[tokio::test]
    async fn a_ready_daemon_passes_every_call_and_names_itself() {
        let (tx, _) = watch::channel(Readiness {
            ready: true,
            reason: String::new(),
        });
        let (gate, calls) = gated(&tx);
        for path in GATED_PATHS
            .iter()
            .chain(&["/cuzk.v1.ProvingEngine/GetStatus"])
        {
            let r = gate.clone().oneshot(call(path)).await.unwrap();
            assert_eq!(r.status(), http::StatusCode::OK, "{path}");
            assert_eq!(r.headers()[DAEMON_HEADER], "d1", "{path}");
        }
        assert_eq!(calls.calls(), 3);
    }

    #[tokio::test]
    async fn a_daemon_that_is_not_ready_refuses_work_with_503_and_serves_reads() {
        let (tx, _) = watch::channel(not_ready("no parameters"));
        let (gate, calls) = gated(&tx);
        let refused = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let gate = {
            let refused = refused.clone();
            let layer = GateLayer::new("d1", tx.subscribe())
                .unwrap()
                .counting(move || {
                    refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                });
            layer.layer(gate.inner)
        };
        for path in GATED_PATHS {
            let r = gate.clone().oneshot(call(path)).await.unwrap();
            assert_eq!(r.status(), http::StatusCode::SERVICE_UNAVAILABLE, "{path}");
            assert_eq!(r.headers()["grpc-status"], "14", "{path}");
            assert_eq!(r.headers()["content-type"], "application/grpc");
            assert_eq!(r.headers()[DAEMON_HEADER], "d1");
            // What a client reads from it: UNAVAILABLE with the reason.
            let status = tonic::Status::from_header_map(r.headers()).expect("a status");
            assert_eq!(status.code(), tonic::Code::Unavailable);
            assert!(status.message().contains("no parameters"), "{status}");
        }
        assert_eq!(calls.calls(), 0);
        let refusals = refused.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(refusals as usize, GATED_PATHS.len(), "each refusal counted");
        for path in [
            "/cuzk.v1.ProvingEngine/AwaitProof",
            "/cuzk.v1.ProvingEngine/CancelProof",
            "/cuzk.v1.ProvingEngine/GetStatus",
            "/grpc.health.v1.Health/Check",
        ] {
            let r = gate.clone().oneshot(call(path)).await.unwrap();
            assert_eq!(r.status(), http::StatusCode::OK, "{path}");
            assert_eq!(r.headers()[DAEMON_HEADER], "d1");
        }
        assert_eq!(calls.calls(), 4);

        // Readiness comes back: work passes again.
        tx.send_replace(Readiness {
            ready: true,
            reason: String::new(),
        });
        let r = gate.oneshot(call(GATED_PATHS[0])).await.unwrap();
        assert_eq!(r.status(), http::StatusCode::OK);
    }

    #[test]
    fn a_name_that_cannot_be_a_header_is_refused() {
        let (tx, _) = watch::channel(not_ready(""));
        let err = GateLayer::new("bad\nname", tx.subscribe())
            .err()
            .expect("refused");
        assert!(matches!(err, GateError::BadName { .. }), "{err}");
    }
}
