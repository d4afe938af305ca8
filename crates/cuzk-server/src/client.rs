//! Connecting to a daemon as a client (for `cuzk status`, `cuzk bench batch --connect` and
//! tests) over a unix socket or TCP.

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint, Uri};

use crate::config::ListenAddr;
use crate::pb::proving_engine_client::ProvingEngineClient;

/// A gRPC client of `cuzk.v1.ProvingEngine`.
pub type Client = ProvingEngineClient<Channel>;

/// Connects to `addr`.
///
/// # Errors
/// The transport's error when the daemon cannot be reached.
pub async fn connect(addr: &ListenAddr) -> Result<Client, tonic::transport::Error> {
    Ok(ProvingEngineClient::new(channel(addr).await?)
        .max_decoding_message_size(1 << 30)
        .max_encoding_message_size(1 << 30))
}

/// A channel to `addr`, for any service the daemon serves (e.g. `grpc.health.v1.Health`).
///
/// # Errors
/// The transport's error when the daemon cannot be reached.
pub async fn channel(addr: &ListenAddr) -> Result<Channel, tonic::transport::Error> {
    Ok(match addr {
        ListenAddr::Tcp(hostport) => {
            Endpoint::from_shared(format!("http://{hostport}"))?
                .connect()
                .await?
        }
        ListenAddr::Unix(path) => {
            let path = path.clone();
            // The URI is required by the API but unused: the connector dials the socket.
            Endpoint::from_static("http://localhost")
                .connect_with_connector(tower::service_fn(move |_: Uri| {
                    let path = path.clone();
                    async move {
                        tokio::net::UnixStream::connect(path)
                            .await
                            .map(TokioIo::new)
                    }
                }))
                .await?
        }
    })
}
