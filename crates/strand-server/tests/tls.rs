//! TLS over real sockets: a handshake against a test CA, HTTP/1.1 and
//! HTTP/2 (ALPN), and client certificates required by `--tls-client-ca`.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use common::TestServer;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

struct Pki {
    ca: CertificateDer<'static>,
    client_cert: CertificateDer<'static>,
    client_key: PrivateKeyDer<'static>,
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate,
/// written as PEM files into `dir`.
fn pki(dir: &Path) -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let client_key = KeyPair::generate().unwrap();
    let client = CertificateParams::new(vec!["client.test".to_owned()])
        .unwrap()
        .signed_by(&client_key, &ca)
        .unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    std::fs::write(dir.join("server.pem"), server.pem()).unwrap();
    std::fs::write(dir.join("server.key"), server_key.serialize_pem()).unwrap();
    Pki {
        ca: ca.der().clone(),
        client_cert: client.der().clone(),
        client_key: PrivateKeyDer::try_from(client_key.serialize_der()).unwrap(),
    }
}

fn connector(pki: &Pki, with_client_cert: bool, alpn: &[&[u8]]) -> TlsConnector {
    let mut roots = RootCertStore::empty();
    roots.add(pki.ca.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = if with_client_cert {
        builder
            .with_client_auth_cert(vec![pki.client_cert.clone()], pki.client_key.clone_key())
            .unwrap()
    } else {
        builder.with_no_client_auth()
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    TlsConnector::from(Arc::new(config))
}

/// Connects over TLS (asserting the protocol ALPN chose) and sends one
/// request over HTTP/2 or HTTP/1.1.
async fn send_tls(
    addr: SocketAddr,
    connector: &TlsConnector,
    h2: bool,
    request: Request<Empty<Bytes>>,
) -> Result<hyper::Response<hyper::body::Incoming>, String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let tls = connector
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    let negotiated_h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    assert_eq!(negotiated_h2, h2, "ALPN");
    if h2 {
        let (mut sender, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        sender
            .send_request(request)
            .await
            .map_err(|e| e.to_string())
    }
}

/// GET /__strand/health over TLS; the status, or the error text.
async fn health(addr: SocketAddr, connector: &TlsConnector, h2: bool) -> Result<u16, String> {
    let request = Request::builder()
        .uri(format!("https://{addr}/__strand/health"))
        .header("host", addr.to_string())
        .body(Empty::<Bytes>::new())
        .unwrap();
    let response = send_tls(addr, connector, h2, request).await?;
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    // The health report (JSON since the durable mode).
    assert!(body.starts_with(b"{") && body.ends_with(b"\"status\":\"ok\"}\n"));
    Ok(status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_http1_and_http2() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let s = TestServer::start_with(|c| {
        c.tls_cert = Some(dir.path().join("server.pem"));
        c.tls_key = Some(dir.path().join("server.key"));
    })
    .await;
    assert_eq!(
        health(s.addr, &connector(&pki, false, &[b"http/1.1"]), false).await,
        Ok(200)
    );
    assert_eq!(
        health(s.addr, &connector(&pki, false, &[b"h2", b"http/1.1"]), true).await,
        Ok(200)
    );
    // A plain-text request to the TLS port gets no HTTP answer.
    let plain = s.get("/__strand/health");
    let attempt = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tokio::spawn(async move { plain.send().await }),
    )
    .await;
    assert!(!matches!(attempt, Ok(Ok(ref r)) if r.status.is_success()));
    s.stop().await;
}

/// `PUT` of a new stream over TLS, HTTP/2 (no `Host` header: the
/// authority travels in the request target) or HTTP/1.1 with `Host`; the
/// answer's `Location`.
async fn created_location(
    addr: SocketAddr,
    connector: &TlsConnector,
    h2: bool,
    path: &str,
) -> String {
    let mut request = Request::builder()
        .method("PUT")
        .uri(format!("https://{addr}{path}"))
        .header("content-type", "text/plain");
    if !h2 {
        request = request.header("host", addr.to_string());
    }
    let request = request.body(Empty::<Bytes>::new()).unwrap();
    let response = send_tls(addr, connector, h2, request).await.unwrap();
    assert_eq!(response.status(), hyper::StatusCode::CREATED);
    assert!(
        response.headers().get("host").is_none(),
        "a response has no Host"
    );
    response.headers()["location"].to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locations_name_https_and_the_http2_authority() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let s = TestServer::start_with(|c| {
        c.tls_cert = Some(dir.path().join("server.pem"));
        c.tls_key = Some(dir.path().join("server.key"));
    })
    .await;
    let h2 = connector(&pki, false, &[b"h2"]);
    let h1 = connector(&pki, false, &[b"http/1.1"]);
    assert_eq!(
        created_location(s.addr, &h2, true, "/v1/stream/over-h2").await,
        format!("https://{}/v1/stream/over-h2", s.addr)
    );
    assert_eq!(
        created_location(s.addr, &h1, false, "/v1/stream/over-h1").await,
        format!("https://{}/v1/stream/over-h1", s.addr)
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_required_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let s = TestServer::start_with(|c| {
        c.tls_cert = Some(dir.path().join("server.pem"));
        c.tls_key = Some(dir.path().join("server.key"));
        c.tls_client_ca = Some(dir.path().join("ca.pem"));
    })
    .await;
    assert_eq!(
        health(s.addr, &connector(&pki, true, &[b"http/1.1"]), false).await,
        Ok(200)
    );
    // Without a client certificate the connection fails (the TLS 1.3
    // alert may arrive only once the client sends its request).
    assert!(
        health(s.addr, &connector(&pki, false, &[b"http/1.1"]), false)
            .await
            .is_err()
    );
    s.stop().await;
}

#[test]
fn tls_options_are_checked() {
    let mut c = strand_server::Config::for_listen("127.0.0.1:0".parse().unwrap());
    c.tls_cert = Some("/nonexistent/cert.pem".into());
    let err = |c: &strand_server::Config| strand_server::tls::acceptor(c).err().unwrap_or_default();
    assert!(err(&c).contains("go together"));
    c.tls_key = Some("/nonexistent/key.pem".into());
    assert!(err(&c).contains("/nonexistent/cert.pem"));
    let mut ca_only = strand_server::Config::for_listen("127.0.0.1:0".parse().unwrap());
    ca_only.tls_client_ca = Some("/x.pem".into());
    assert!(strand_server::tls::acceptor(&ca_only).is_err());
}
