//! [`Daemon`]: the engine behind its listeners. Binds the gRPC listeners (`listen` and
//! `listen_also`: unix sockets and TCP) and the HTTP listener, serves until asked to stop,
//! then drains: the engine stops accepting (submits get UNAVAILABLE, health NOT_SERVING,
//! `/ready` 503) while every listener keeps answering AwaitProof, GetStatus, health and
//! HTTP, so a job that finishes during the drain is collected; when the drain ends (all
//! jobs done, the timeout, or [`Daemon::end_drain_token`]) the listeners close and it
//! returns. The binary's `cuzk daemon` and the end-to-end tests both run it.
//!
//! What it refuses before the engine starts: a unix socket a live daemon answers on (see
//! [`crate::socket`]), and a non-loopback TCP address without a token unless
//! `allow_unauthenticated_remote` says so. Auth is per listener: TCP listeners require the
//! token when one is configured; unix sockets too unless `token_on_unix_sockets = false`,
//! when the socket's file mode (0660) is their only check. What the gRPC server
//! enforces: the token ([`crate::auth`]), message sizes (a request over `max_request_bytes` gets
//! RESOURCE_EXHAUSTED), and `max_concurrent_streams` per connection. In front of it all,
//! [`crate::gate`] names the daemon (`name`) on every response and refuses work with HTTP
//! 503 while the daemon is not ready, for load balancers.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{DeviceSpec, Engine, EngineError, KindRegistry, ShutdownReport};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_stream::StreamExt;
use tokio_util::sync::CancellationToken;
use tonic::codegen::http;
use tonic::service::interceptor::InterceptedService;
use tracing::{info, warn};

use crate::auth::BearerAuth;
use crate::authority::AuthorityFix;
use crate::config::{ConfigError, DaemonConfig, ListenAddr};
use crate::gate::{GateError, GateLayer};
use crate::grpc::{ProvingService, ServiceOptions};
use crate::health::Readiness;
use crate::pb::proving_engine_server::ProvingEngineServer;
use crate::socket::SocketError;

/// Why the daemon could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Bad config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The engine refused to start.
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    /// The unix socket could not be bound.
    #[error(transparent)]
    Socket(#[from] SocketError),
    /// The daemon's name cannot be sent on responses.
    #[error(transparent)]
    Gate(#[from] GateError),
    /// A listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// gRPC on a non-loopback address with nothing to tell callers apart.
    #[error(
        "refusing to serve gRPC on {addr} without a token: anyone who reaches it could \
         submit, cancel and evict; set auth_token_file, listen on a unix socket or loopback, \
         or set allow_unauthenticated_remote = true"
    )]
    Unprotected {
        /// The bound address.
        addr: std::net::SocketAddr,
    },
    /// The gRPC server failed.
    #[error("grpc server: {0}")]
    Grpc(#[from] tonic::transport::Error),
}

/// A running daemon.
pub struct Daemon {
    engine: Arc<Engine>,
    grpc_addrs: Vec<ListenAddr>,
    http_addr: Option<std::net::SocketAddr>,
    /// Cancelled to ask for a drain (a signal handler, a test).
    stop: CancellationToken,
    /// Cancelled to end a drain early (a second signal).
    early: CancellationToken,
    /// Cancelled when the drain is over: the listeners close.
    close: CancellationToken,
    grpc_tasks: Vec<JoinHandle<Result<(), tonic::transport::Error>>>,
    http_task: Option<JoinHandle<()>>,
    health: tonic_health::server::HealthReporter,
    /// What the gate refuses work by ([`crate::gate`]).
    ready: watch::Sender<Readiness>,
    socket_paths: Vec<PathBuf>,
    drain: Duration,
}

/// A bound gRPC listener and whether its calls must carry the token.
enum Bound {
    Unix(tokio::net::UnixListener, PathBuf),
    Tcp(TcpListener),
}

impl Daemon {
    /// Binds the listeners, starts the engine and serves.
    ///
    /// # Errors
    /// [`ServeError`] naming the address, the refusal or the engine's error.
    pub async fn start(
        cfg: &DaemonConfig,
        registry: KindRegistry,
        devices: Vec<DeviceSpec>,
    ) -> Result<Daemon, ServeError> {
        let token = cfg.auth_token()?;
        // Not ready until the engine has started; checked before anything is bound.
        let (ready, ready_rx) = watch::channel(Readiness {
            ready: false,
            reason: "starting".into(),
        });
        let gate = GateLayer::new(&cfg.daemon_name(), ready_rx)?;
        let bind_err = |addr: &str, source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        };
        // Bound before the engine starts: a refusal costs nothing.
        let mut bound = Vec::new();
        for addr in std::iter::once(&cfg.listen).chain(&cfg.listen_also) {
            let listen = ListenAddr::parse(addr)?;
            match &listen {
                ListenAddr::Unix(path) => {
                    let listener = crate::socket::bind(path).await?;
                    let check = cfg.token_on_unix_sockets;
                    bound.push((Bound::Unix(listener, path.clone()), listen.clone(), check));
                }
                ListenAddr::Tcp(addr) => {
                    let listener = TcpListener::bind(addr)
                        .await
                        .map_err(|e| bind_err(addr, e))?;
                    let local = listener.local_addr().map_err(|e| bind_err(addr, e))?;
                    let open = !local.ip().is_loopback() && token.is_none();
                    if open && !cfg.allow_unauthenticated_remote {
                        return Err(ServeError::Unprotected { addr: local });
                    }
                    if open {
                        warn!(listen = %local, "serving gRPC without a token on a non-loopback address (allow_unauthenticated_remote)");
                    }
                    bound.push((
                        Bound::Tcp(listener),
                        ListenAddr::Tcp(local.to_string()),
                        true,
                    ));
                }
            }
        }
        let http_listener = if cfg.http_listen.is_empty() {
            None
        } else {
            let listener = TcpListener::bind(&cfg.http_listen)
                .await
                .map_err(|e| bind_err(&cfg.http_listen, e))?;
            if listener.local_addr().is_ok_and(|a| a.ip().is_unspecified()) {
                warn!(listen = %cfg.http_listen, "the HTTP port listens on every interface: /status names job ids; prefer loopback or a monitoring network");
            }
            Some(listener)
        };

        // Only the daemon journals; an in-process engine (bench batch) does not.
        let mut engine_cfg = cfg.engine_config();
        engine_cfg.journal_dir = cfg.journal_dir.clone();
        let engine = Arc::new(Engine::start(engine_cfg, registry, devices)?);
        let gate = gate.counting({
            let engine = engine.clone();
            move || engine.count_refused_not_ready()
        });
        let (stop, early, close) = (
            CancellationToken::new(),
            CancellationToken::new(),
            CancellationToken::new(),
        );
        let limit = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
        let (health, health_service) = tonic_health::server::health_reporter();
        // Set before the listeners serve, so the first probe already has the answer.
        let first = crate::health::readiness(&engine.status());
        crate::health::set(&health, first.ready).await;
        ready.send_replace(first);
        tokio::spawn(crate::health::watch(
            engine.clone(),
            health.clone(),
            ready.clone(),
            close.clone(),
        ));
        let mut grpc_tasks = Vec::new();
        let mut grpc_addrs = Vec::new();
        let mut socket_paths = Vec::new();
        for (listener, addr, check_token) in bound {
            let service = ProvingEngineServer::new(ProvingService::new(
                engine.clone(),
                ServiceOptions {
                    allow_synthetic: cfg.allow_synthetic,
                },
            ))
            .max_decoding_message_size(limit(cfg.max_request_bytes))
            .max_encoding_message_size(limit(cfg.max_response_bytes));
            let required = if check_token { token.clone() } else { None };
            let auth = required.is_some();
            let service = InterceptedService::new(service, BearerAuth::new(required));
            let router = tonic::transport::Server::builder()
                .max_concurrent_streams(cfg.max_concurrent_streams)
                .layer(tower::util::MapResponseLayer::new(
                    too_large_is_resource_exhausted,
                ))
                .layer(gate.clone())
                .add_service(health_service.clone())
                .add_service(service);
            let signal = close.clone().cancelled_owned();
            let task = match listener {
                Bound::Unix(listener, path) => {
                    socket_paths.push(path);
                    let incoming =
                        UnixListenerStream::new(listener).map(|conn| conn.map(AuthorityFix::new));
                    tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal))
                }
                Bound::Tcp(listener) => {
                    // No Nagle: a unary answer is several small writes (headers, message,
                    // trailers), and with Nagle and the client's delayed ACK each call
                    // waited ~40 ms (44 ms GetStatus round trips, docs/benchmarks.md
                    // 2026-12-04). tonic sets it only on listeners it binds itself.
                    let incoming = TcpListenerStream::new(listener).map(|conn| {
                        conn.inspect(|stream| {
                            if let Err(err) = stream.set_nodelay(true) {
                                warn!(cause = %err, "TCP_NODELAY not set on a connection");
                            }
                        })
                    });
                    tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal))
                }
            };
            info!(listen = %addr, auth, "grpc listening");
            grpc_tasks.push(task);
            grpc_addrs.push(addr);
        }

        let (http_task, http_addr) = match http_listener {
            None => (None, None),
            Some(listener) => {
                let local = listener.local_addr().ok();
                let app = crate::http::router(engine.clone());
                let http_stop = close.clone();
                let task = tokio::spawn(async move {
                    let served = axum::serve(listener, app)
                        .with_graceful_shutdown(http_stop.cancelled_owned())
                        .await;
                    if let Err(err) = served {
                        warn!(cause = %err, "http server stopped");
                    }
                });
                info!(listen = ?local, "http listening (/metrics, /status, /ready)");
                (Some(task), local)
            }
        };

        Ok(Daemon {
            engine,
            grpc_addrs,
            http_addr,
            stop,
            early,
            close,
            grpc_tasks,
            http_task,
            health,
            ready,
            socket_paths,
            drain: Duration::from_secs(cfg.drain_timeout_secs),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The first gRPC address, `listen` (for TCP, the bound address: port 0 becomes the
    /// real port).
    pub fn grpc_addr(&self) -> &ListenAddr {
        &self.grpc_addrs[0]
    }

    /// Every gRPC address: `listen`, then `listen_also` in order.
    pub fn grpc_addrs(&self) -> &[ListenAddr] {
        &self.grpc_addrs
    }

    /// The bound HTTP address, when HTTP is enabled.
    pub fn http_addr(&self) -> Option<std::net::SocketAddr> {
        self.http_addr
    }

    /// A token that starts the drain when cancelled (e.g. from a signal handler); the
    /// listeners stay up until the drain ends.
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// A token that ends a drain early when cancelled (a second SIGTERM or SIGINT). The
    /// jobs still running are failed for the callers present; with a journal they stay
    /// pending in it, and the next start proves them again.
    pub fn end_drain_token(&self) -> CancellationToken {
        self.early.clone()
    }

    /// Runs until the stop token is cancelled, then shuts down as [`Daemon::shutdown`].
    ///
    /// # Errors
    /// [`ServeError::Grpc`] when the gRPC server failed.
    pub async fn run_until_stopped(self) -> Result<ShutdownReport, ServeError> {
        self.stop.cancelled().await;
        self.shutdown().await
    }

    /// Drains the engine (accepted jobs finish within the drain timeout, the rest fail
    /// with a reason) while the listeners keep answering reads, then stops the
    /// listeners; in-flight calls get their answers first.
    ///
    /// # Errors
    /// [`ServeError::Grpc`] when the gRPC server failed.
    pub async fn shutdown(self) -> Result<ShutdownReport, ServeError> {
        // One draining state for every signal: the engine stops accepting first (so
        // `/ready`, status and submits all see it), then the gRPC health service follows.
        // In the other order a probe could see NOT_SERVING while `/ready` still said 200.
        // See: #33.
        self.engine.stop_accepting();
        // The gate too, at once rather than at its next poll: a balancer's submit in
        // between would get UNAVAILABLE inside a 200, which it cannot move elsewhere.
        self.ready
            .send_replace(crate::health::readiness(&self.engine.status()));
        crate::health::set(&self.health, false).await;
        let report = self.engine.shutdown_or(self.drain, &self.early).await;
        self.close.cancel();
        let mut failed = None;
        for task in self.grpc_tasks {
            match task.await {
                Ok(Ok(())) => {}
                Ok(Err(err)) => failed = Some(err),
                Err(join) => warn!(cause = %join, "grpc task ended abnormally"),
            }
        }
        if let Some(task) = self.http_task {
            let _ = task.await;
        }
        for path in &self.socket_paths {
            let _ = std::fs::remove_file(path);
        }
        info!(
            drained = report.drained,
            failed = report.failed,
            "daemon stopped"
        );
        match failed {
            None => Ok(report),
            Some(err) => Err(ServeError::Grpc(err)),
        }
    }
}

/// gRPC's status-code table names RESOURCE_EXHAUSTED for a message over the receiver's
/// limit; tonic answers OUT_OF_RANGE ("decoded message length too large", tonic 0.14
/// `codec/decode.rs`). The refusal comes as a trailers-only response, so its headers carry
/// the status and this rewrites it there.
fn too_large_is_resource_exhausted<B>(mut response: http::Response<B>) -> http::Response<B> {
    let headers = response.headers_mut();
    let out_of_range = headers
        .get("grpc-status")
        .is_some_and(|v| v.as_bytes() == b"11");
    let too_large = headers.get("grpc-message").is_some_and(|v| {
        let m = v.as_bytes();
        m.starts_with(b"Error, decoded message length too large")
            || m.starts_with(b"Error,%20decoded%20message%20length%20too%20large")
    });
    if out_of_range && too_large {
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
    }
    response
}
