//! One keep-alive HTTP/1.1 connection per simulated client, on hyper's
//! low-level client (no pool: every writer and subscriber owns its socket,
//! as a real client would).

use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// A connection to the server under test.
pub(crate) struct Conn {
    addr: SocketAddr,
    host: String,
    sender: SendRequest<Full<Bytes>>,
}

/// A response read whole.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) next_offset: Option<String>,
    pub(crate) up_to_date: bool,
    /// Whether the answer carried `Retry-After`.
    pub(crate) retry_after: bool,
    pub(crate) body: Bytes,
}

impl Conn {
    /// Opens a connection.
    pub(crate) async fn open(addr: SocketAddr) -> Result<Self, String> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect {addr}: {e}"))?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Self {
            addr,
            host: addr.to_string(),
            sender,
        })
    }

    /// Sends a request and returns the response head, body unread.
    pub(crate) async fn start(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response<Incoming>, String> {
        if self.sender.ready().await.is_err() {
            *self = Self::open(self.addr).await?;
        }
        let mut builder = Request::builder()
            .method(method)
            .uri(path)
            .header("host", &self.host);
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(body))
            .map_err(|e| format!("request: {e}"))?;
        self.sender
            .send_request(request)
            .await
            .map_err(|e| format!("send: {e}"))
    }

    /// Sends a request and reads the whole response.
    pub(crate) async fn send(
        &mut self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Reply, String> {
        let response = self.start(method, path, headers, body).await?;
        let status = response.status();
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let next_offset = header("stream-next-offset");
        let up_to_date = header("stream-up-to-date").as_deref() == Some("true");
        let retry_after = response.headers().contains_key("retry-after");
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("body: {e}"))?
            .to_bytes();
        Ok(Reply {
            status,
            next_offset,
            up_to_date,
            retry_after,
            body,
        })
    }
}
