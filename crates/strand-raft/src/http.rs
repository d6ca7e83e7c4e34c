//! The HTTP client of a node's Raft traffic ([`Http`]), shared by its
//! groups, its batcher and its segment fetches, and its typed error.

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::header::CONTENT_TYPE;
use hyper::{Request, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::wire::CLUSTER_TOKEN_HEADER;

/// Why a POST to a peer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum PeerError {
    /// The peer answered with a status other than 200 (404: it has no
    /// such route, an older node).
    #[error("status {status}: {text}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The answer's body, trimmed.
        text: String,
    },
    /// The exchange failed: no connection, a broken or oversized answer,
    /// the timeout.
    #[error("{0}")]
    Failed(String),
}

impl PeerError {
    /// Whether the peer refused for good: the token (401, 403) or the
    /// route (404).
    pub(crate) fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::Status {
                status: 401 | 403 | 404,
                ..
            }
        )
    }
}

/// `host:port` of a peer URL (`http://host:port[/]`).
pub(crate) fn host_port(url: &str) -> &str {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    rest.split('/').next().unwrap_or(rest)
}

/// The largest answer a peer may send (a snapshot install's answer is
/// small; this only bounds a misbehaving peer).
const MAX_ANSWER: usize = 64 << 20;

/// The HTTP client of a node's Raft traffic, shared by all its groups
/// (and by its batcher): hyper-util's pooled client, which keeps the
/// connections to each peer alive and reuses an idle one for the next
/// request (a request finding none idle opens one more; at most 64 idle
/// per peer are kept, each for at most a minute). Cheap to clone.
#[derive(Clone)]
pub(crate) struct Http {
    client: Client<HttpConnector, Full<Bytes>>,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").finish_non_exhaustive()
    }
}

impl Http {
    /// A client with an empty pool (connections open on first use).
    pub(crate) fn new() -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(std::time::Duration::from_secs(2)));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(std::time::Duration::from_secs(60))
            .pool_max_idle_per_host(64)
            .build(connector);
        Self { client }
    }

    /// One POST to the peer at `addr` (`http://host:port`), with the
    /// cluster token when there is one; the answer's body when it is 200
    /// (any other status is [`PeerError::Status`]).
    /// Fails after `timeout` (the connection in use is then dropped, not
    /// reused).
    pub(crate) async fn post(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        token: Option<&str>,
        timeout: std::time::Duration,
    ) -> Result<Bytes, PeerError> {
        self.post_limited(addr, path, (body, token), timeout, MAX_ANSWER)
            .await
    }
}

impl Http {
    /// [`Http::post`] for an answer that streams: hands each piece of a
    /// 200 answer's body to `each` as it arrives (an error from `each`
    /// ends the exchange with it), at most [`MAX_ANSWER`] bytes in all.
    /// Fails after `timeout`, keeping what `each` was given by then.
    pub(crate) async fn post_streaming(
        &self,
        addr: &str,
        path: &str,
        body: Vec<u8>,
        token: Option<&str>,
        timeout: std::time::Duration,
        each: impl FnMut(Bytes) -> Result<(), String>,
    ) -> Result<(), PeerError> {
        self.exchange(addr, path, (body, token), timeout, MAX_ANSWER, each)
            .await
    }

    /// [`Http::post`] for an answer of up to `limit` bytes (a segment
    /// file).
    pub(crate) async fn post_limited(
        &self,
        addr: &str,
        path: &str,
        (body, token): (Vec<u8>, Option<&str>),
        timeout: std::time::Duration,
        limit: usize,
    ) -> Result<Bytes, PeerError> {
        let mut answer = bytes::BytesMut::new();
        self.exchange(addr, path, (body, token), timeout, limit, |piece| {
            answer.extend_from_slice(&piece);
            Ok(())
        })
        .await?;
        Ok(answer.freeze())
    }

    async fn exchange(
        &self,
        addr: &str,
        path: &str,
        (body, token): (Vec<u8>, Option<&str>),
        timeout: std::time::Duration,
        limit: usize,
        mut each: impl FnMut(Bytes) -> Result<(), String>,
    ) -> Result<(), PeerError> {
        let host = host_port(addr);
        let exchange = async {
            let mut request = Request::post(format!("http://{host}{path}"))
                .header(CONTENT_TYPE, "application/msgpack");
            if let Some(token) = token {
                request = request.header(CLUSTER_TOKEN_HEADER, token);
            }
            let request = request
                .body(Full::new(Bytes::from(body)))
                .map_err(|e| PeerError::Failed(format!("{host}: {e}")))?;
            let response = self.client.request(request).await.map_err(|e| {
                PeerError::Failed(match std::error::Error::source(&e) {
                    Some(cause) => format!("{host}: {e}: {cause}"),
                    None => format!("{host}: {e}"),
                })
            })?;
            let status = response.status();
            let mut answer = Limited::new(response.into_body(), limit);
            if status != StatusCode::OK {
                let text = answer
                    .collect()
                    .await
                    .map_err(|e| PeerError::Failed(format!("{host}: {e}")))?
                    .to_bytes();
                return Err(PeerError::Status {
                    status: status.as_u16(),
                    text: String::from_utf8_lossy(&text).trim().to_owned(),
                });
            }
            while let Some(frame) = answer.frame().await {
                let frame = frame.map_err(|e| PeerError::Failed(format!("{host}: {e}")))?;
                if let Ok(data) = frame.into_data() {
                    each(data).map_err(PeerError::Failed)?;
                }
            }
            Ok(())
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| PeerError::Failed(format!("{addr}: timed out")))?
    }
}
