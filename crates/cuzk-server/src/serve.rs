//! [`Daemon`]: the engine behind its listeners. Binds the gRPC listener (unix socket or
//! TCP) and the HTTP listener, serves until asked to stop, then stops accepting
//! connections, drains the engine with a timeout and returns. The binary's `cuzk daemon`
//! and the end-to-end tests both run the daemon through this type.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cuzk_engine::{DeviceSpec, Engine, EngineError, KindRegistry, ShutdownReport};
use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinHandle;
use tokio_stream::wrappers::{TcpListenerStream, UnixListenerStream};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{ConfigError, DaemonConfig, ListenAddr};
use crate::grpc::ProvingService;
use crate::pb::proving_engine_server::ProvingEngineServer;

/// Why the daemon could not start or serve.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Bad config.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The engine refused to start.
    #[error("engine: {0}")]
    Engine(#[from] EngineError),
    /// A listener could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The OS error.
        source: std::io::Error,
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
    socket_path: Option<PathBuf>,
    drain: Duration,
}

impl Daemon {
    /// Starts the engine and binds both listeners. A stale unix socket file is replaced.
    ///
    /// # Errors
    /// [`ServeError`] naming the address or the engine's refusal.
    pub async fn start(
        cfg: &DaemonConfig,
        registry: KindRegistry,
        devices: Vec<DeviceSpec>,
    ) -> Result<Daemon, ServeError> {
        let grpc_addr = ListenAddr::parse(&cfg.listen)?;
        let engine = Arc::new(Engine::start(cfg.engine_config(), registry, devices)?);
        let stop = CancellationToken::new();
        let service = ProvingEngineServer::new(ProvingService::new(engine.clone()))
            .max_decoding_message_size(1 << 30)
            .max_encoding_message_size(1 << 30);
        let router = tonic::transport::Server::builder().add_service(service);
        let signal = stop.clone().cancelled_owned();
        let bind_err = |addr: &ListenAddr, source| ServeError::Bind {
            addr: addr.to_string(),
            source,
        };
        let (grpc_task, socket_path) = match &grpc_addr {
            ListenAddr::Unix(path) => {
                if path.exists() {
                    let _ = std::fs::remove_file(path);
                }
                if let Some(dir) = path.parent() {
                    let _ = std::fs::create_dir_all(dir);
                }
                let listener = UnixListener::bind(path).map_err(|e| bind_err(&grpc_addr, e))?;
                let incoming = UnixListenerStream::new(listener);
                (
                    tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal)),
                    Some(path.clone()),
                )
            }
            ListenAddr::Tcp(addr) => {
                let listener = TcpListener::bind(addr)
                    .await
                    .map_err(|e| bind_err(&grpc_addr, e))?;
                let incoming = TcpListenerStream::new(listener);
                (
                    tokio::spawn(router.serve_with_incoming_shutdown(incoming, signal)),
                    None,
                )
            }
        };
        info!(listen = %grpc_addr, "grpc listening");

        let (http_task, http_addr) = if cfg.http_listen.is_empty() {
            (None, None)
        } else {
            let listener = TcpListener::bind(&cfg.http_listen)
                .await
                .map_err(|source| ServeError::Bind {
                    addr: cfg.http_listen.clone(),
                    source,
                })?;
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
            info!(listen = ?local, "http listening (/metrics, /status)");
            (Some(task), local)
        };

        Ok(Daemon {
            engine,
            grpc_addr,
            http_addr,
            stop,
            grpc_task,
            http_task,
            socket_path,
            drain: Duration::from_secs(cfg.drain_timeout_secs),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// The gRPC address.
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
