//! The live commands: `strand status`, `strand streams list`, `strand
//! append` and `strand tail`
//! speak HTTP to a running strand-server. This module holds what they
//! share: the server arguments (`--url`, `--token`), the HTTP client
//! (reqwest, blocking), stream URLs, and the errors a person reads (the
//! server's status and message, or why it could not be reached).
//!
//! These commands are thin clients: they know the server's routes and
//! JSON shapes, not its code.

pub(crate) mod append;
pub(crate) mod cluster;
pub(crate) mod status;
pub(crate) mod streams;
pub(crate) mod tail;

use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use reqwest::blocking::{Client, RequestBuilder, Response};
use reqwest::header::{AUTHORIZATION, HeaderValue};
use reqwest::{Method, Url};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request (not a live read) may take in all.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);
/// At most this much of an error body is shown.
const MAX_MESSAGE_CHARS: usize = 2_000;

/// Where the server is and who is asking: shared by the live commands.
#[derive(Debug, clap::Args)]
pub(crate) struct ServerArgs {
    /// The server's base URL, e.g. `http://127.0.0.1:4437` (a path prefix
    /// is kept: `https://host/strand`).
    #[arg(long, value_name = "URL", env = "STRAND_URL", hide_env_values = true)]
    pub(crate) url: String,
    /// A bearer token, sent as `Authorization: Bearer TOKEN`.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "STRAND_TOKEN",
        hide_env_values = true
    )]
    pub(crate) token: Option<String>,
}

/// A server to send requests to.
#[derive(Debug)]
pub(crate) struct Server {
    client: Client,
    /// The base URL without a trailing `/`.
    base: String,
    token: Option<HeaderValue>,
}

impl Server {
    /// A client for requests that end (a bounded total time).
    pub(crate) fn new(args: &ServerArgs) -> anyhow::Result<Self> {
        Self::build(args, Some(REQUEST_TIMEOUT))
    }

    /// A client for live reads, which may last as long as the stream
    /// does: only connecting is bounded.
    pub(crate) fn live(args: &ServerArgs) -> anyhow::Result<Self> {
        Self::build(args, None)
    }

    fn build(args: &ServerArgs, timeout: Option<Duration>) -> anyhow::Result<Self> {
        let base = base_url(&args.url)?;
        let token = match args.token.as_deref().map(str::trim) {
            None | Some("") => None,
            Some(token) => {
                let mut value =
                    HeaderValue::from_str(&format!("Bearer {token}")).map_err(|_| {
                        anyhow!("the token holds characters an HTTP header cannot carry")
                    })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let mut builder = Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("strand/", env!("CARGO_PKG_VERSION")));
        builder = match timeout {
            Some(timeout) => builder.timeout(timeout),
            None => builder.timeout(None::<Duration>),
        };
        let client = builder.build().context("cannot set up the HTTP client")?;
        Ok(Self {
            client,
            base,
            token,
        })
    }

    /// The URL of `path` (which starts with `/`) on this server.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A request to `url`, with the token if there is one.
    pub(crate) fn request(&self, method: Method, url: &str) -> RequestBuilder {
        let request = self.client.request(method, url);
        match &self.token {
            Some(token) => request.header(AUTHORIZATION, token.clone()),
            None => request,
        }
    }

    /// Sends a request; a transport failure becomes an error that says
    /// what could not be reached. The answer may be any status.
    pub(crate) fn send(&self, request: RequestBuilder, what: &str) -> anyhow::Result<Response> {
        request.send().map_err(|e| self.transport_error(&e, what))
    }

    /// Sends a request and insists on a 2xx answer
    /// ([`ensure_success`]).
    pub(crate) fn send_ok(&self, request: RequestBuilder, what: &str) -> anyhow::Result<Response> {
        ensure_success(self.send(request, what)?, what)
    }

    /// The error for a request that got no answer.
    pub(crate) fn transport_error(&self, error: &reqwest::Error, what: &str) -> anyhow::Error {
        let cause = root_cause(error);
        if error.is_connect() {
            anyhow!("cannot reach the server at {}: {cause}", self.base)
        } else if error.is_timeout() {
            anyhow!("{what}: the server did not answer in time ({cause})")
        } else {
            anyhow!("{what}: {cause}")
        }
    }
}

/// The innermost cause of an error (the OS error behind a refused
/// connection, rather than reqwest's wrapping of it).
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

/// Checks `--url`: an absolute `http://` or `https://` URL without a query
/// or fragment; returned without its trailing `/`.
fn base_url(text: &str) -> anyhow::Result<String> {
    let url = Url::parse(text.trim()).with_context(|| format!("--url {text:?} is not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("--url {text:?}: only http:// and https:// are supported");
    }
    if url.query().is_some() || url.fragment().is_some() {
        bail!("--url {text:?}: the base URL takes no query or fragment");
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// Fails with the server's status and message unless the answer is 2xx.
pub(crate) fn ensure_success(response: Response, what: &str) -> anyhow::Result<Response> {
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let body = response.text().unwrap_or_default();
    let message = body.trim();
    if message.is_empty() {
        bail!("{what}: {status}");
    }
    let message: String = if message.chars().count() > MAX_MESSAGE_CHARS {
        let cut: String = message.chars().take(MAX_MESSAGE_CHARS).collect();
        format!("{cut}…")
    } else {
        message.to_owned()
    };
    bail!("{what}: {status}: {message}")
}

/// The path of a stream on the protocol's mount: `/v1/stream/` and the
/// name's segments (split on `/`), each percent-encoded.
///
/// # Errors
/// An empty name, an empty segment (`a//b`, a leading or trailing `/`)
/// or a `.` / `..` segment: the server refuses them, and URL handling
/// would resolve the dots before sending.
pub(crate) fn stream_path(name: &str) -> anyhow::Result<String> {
    if name.is_empty() {
        bail!("the stream name is empty");
    }
    let mut path = String::from("/v1/stream");
    for segment in name.split('/') {
        match segment {
            "" => bail!(
                "stream {name:?}: empty segment (a leading, trailing or doubled '/' names no stream)"
            ),
            "." | ".." => bail!("stream {name:?}: a segment cannot be '.' or '..'"),
            _ => {
                path.push('/');
                path.push_str(&percent_encode(segment));
            }
        }
    }
    Ok(path)
}

/// Percent-encodes every byte of `text` but RFC 3986's unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`).
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for &byte in text.as_bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `METHOD URL`, to name a request in messages.
pub(crate) fn describe(method: &Method, url: &str) -> String {
    format!("{method} {url}")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn stream_paths_encode_each_segment() {
        assert_eq!(stream_path("x").unwrap(), "/v1/stream/x");
        assert_eq!(stream_path("chat/42").unwrap(), "/v1/stream/chat/42");
        assert_eq!(
            stream_path("yjs/docs/doc 1/.updates").unwrap(),
            "/v1/stream/yjs/docs/doc%201/.updates"
        );
        assert_eq!(
            stream_path("a?b#c%d/é").unwrap(),
            "/v1/stream/a%3Fb%23c%25d/%C3%A9"
        );
        for bad in ["", "/a", "a/", "a//b", ".", "a/../b", "./a"] {
            assert!(stream_path(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn base_urls_are_checked() {
        assert_eq!(
            base_url("http://127.0.0.1:4437/").unwrap(),
            "http://127.0.0.1:4437"
        );
        assert_eq!(
            base_url("https://host/strand/").unwrap(),
            "https://host/strand"
        );
        for bad in ["127.0.0.1:4437", "ftp://host", "http://h/?a=1", "nonsense"] {
            assert!(base_url(bad).is_err(), "{bad:?}");
        }
    }
}
