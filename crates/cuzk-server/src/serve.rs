//! [`Daemon`]: the engine behind its listeners. Binds the gRPC listener (unix socket or
//! TCP) and the HTTP listener, serves until asked to stop, then stops accepting
//! connections, drains the engine with a timeout and returns. The binary's `cuzk daemon`
//! and the end-to-end tests both run the daemon through this type.
//!
//! What it refuses before the engine starts: a unix socket a live daemon answers on (see
//! [`crate::socket`]), and a non-loopback TCP address without a token unless
//! `allow_unauthenticated_remote` says so. What the gRPC server enforces: the token
//! ([`crate::auth`]), message sizes (a request over `max_request_bytes` gets
//! RESOURCE_EXHAUSTED), and `max_concurrent_streams` per connection.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{DeviceSpec, Engine, EngineError, KindRegistry, ShutdownReport};
use tokio::net::TcpListener;
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
use crate::grpc::{ProvingService, ServiceOptions};
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
    grpc_addr: ListenAddr,
    http_addr: Option<std::net::SocketAddr>,
    stop: CancellationToken,
    grpc_task: JoinHandle<Result<(), tonic::transport::Error>>,
    http_task: Option<JoinHandle<()>>,
    health: tonic_health::server::HealthReporter,
    socket_path: Option<PathBuf>,
    drain: Duration,
}

/// The bound gRPC listener.
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
        let listen = ListenAddr::parse(&cfg.listen)?;
        let token = cfg.auth_token()?;
        let bind_err = |addr: &str, source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        };
        // Bound before the engine starts: a refusal costs nothing.
        let (bound, grpc_addr) = match &listen {
            ListenAddr::Unix(path) => (
                Bound::Unix(crate::socket::bind(path).await?, path.clone()),
                listen.clone(),
            ),
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
                (Bound::Tcp(listener), ListenAddr::Tcp(local.to_string()))
            }
        };
        let http_listener = if cfg.http_listen.is_empty() {
            None
        } else {
            Some(
                TcpListener::bind(&cfg.http_listen)
                    .await
                    .map_err(|e| bind_err(&cfg.http_listen, e))?,
            )
        };

        let engine = Arc::new(Engine::start(cfg.engine_config(), registry, devices)?);
        let stop = CancellationToken::new();
        let limit = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
        let service = ProvingEngineServer::new(ProvingService::new(
            engine.clone(),
            ServiceOptions {
                allow_synthetic: cfg.allow_synthetic,
            },
        ))
        .max_decoding_message_size(limit(cfg.max_request_bytes))
        .max_encoding_message_size(limit(cfg.max_response_bytes));
        let service = InterceptedService::new(service, BearerAuth::new(token.clone()));
        let (health, health_service) = tonic_health::server::health_reporter();
        // Set before the listener serves, so the first probe already has the answer.
        crate::health::set(&health, crate::health::readiness(&engine.status()).ready).await;
        tokio::spawn(crate::health::watch(
            engine.clone(),
            health.clone(),
            stop.clone(),
        ));
        let router = tonic::transport::Server::builder()
            .max_concurrent_streams(cfg.max_concurrent_streams)
            .layer(tower::util::MapResponseLayer::new(
                too_large_is_resource_exhausted,
            ))
            .add_service(health_service)
            .add_service(service);
        let signal = stop.clone().cancelled_owned();
        let (grpc_task, socket_path) = match bound {
            Bound::Unix(listener, path) => {
                let incoming =
                    UnixListenerStream::new(listener).map(|conn| conn.map(AuthorityFix::new));
                (
                    tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal)),
                    Some(path),
                )
            }
            Bound::Tcp(listener) => {
                let incoming = TcpListenerStream::new(listener);
                (
                    tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal)),
                    None,
                )
            }
        };
        info!(listen = %grpc_addr, auth = token.is_some(), "grpc listening");

        let (http_task, http_addr) = match http_listener {
            None => (None, None),
            Some(listener) => {
                let local = listener.local_addr().ok();
                let app = crate::http::router(engine.clone());
                let http_stop = stop.clone();
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
            grpc_addr,
            http_addr,
            stop,
            grpc_task,
            http_task,
            health,
            socket_path,
            drain: Duration::from_secs(cfg.drain_timeout_secs),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The gRPC address (for TCP, the bound address: port 0 becomes the real port).
    pub fn grpc_addr(&self) -> &ListenAddr {
        &self.grpc_addr
    }

    /// The bound HTTP address, when HTTP is enabled.
    pub fn http_addr(&self) -> Option<std::net::SocketAddr> {
        self.http_addr
    }

    /// A token that stops the daemon when cancelled (e.g. from a signal handler).
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
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
    /// with a reason), then stops the listeners; in-flight calls get their answers first.
    ///
    /// # Errors
    /// [`ServeError::Grpc`] when the gRPC server failed.
    pub async fn shutdown(self) -> Result<ShutdownReport, ServeError> {
        // One draining state for every signal: the engine stops accepting first (so
        // `/ready`, status and submits all see it), then the gRPC health service follows.
        // In the other order a probe could see NOT_SERVING while `/ready` still said 200.
        // See: #33.
        self.engine.stop_accepting();
        crate::health::set(&self.health, false).await;
        let report = self.engine.shutdown(self.drain).await;
        self.stop.cancel();
        let grpc = self.grpc_task.await;
        if let Some(task) = self.http_task {
            let _ = task.await;
        }
        if let Some(path) = &self.socket_path {
            let _ = std::fs::remove_file(path);
        }
        info!(
            drained = report.drained,
            failed = report.failed,
            "daemon stopped"
        );
        match grpc {
            Ok(Ok(())) => Ok(report),
            Ok(Err(err)) => Err(ServeError::Grpc(err)),
            Err(join) => {
                warn!(cause = %join, "grpc task ended abnormally");
                Ok(report)
            }
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
