//! Webhook targets: which URLs a subscription may name, and delivery to
//! them (PROTOCOL §6).
//!
//! A webhook makes the server send requests on a client's behalf, so a URL
//! that reaches the server's own network (loopback, private ranges, cloud
//! metadata at 169.254.169.254, …) would let any client probe it. The
//! policy resolves the host once, refuses it when any address it resolves
//! to is not publicly routable (unless an operator's `--webhook-allow`
//! CIDR contains it), and delivery then connects to exactly those
//! addresses: a second lookup could answer differently (DNS rebinding).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use ipnet::IpNet;
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderValue};
use reqwest::redirect::Policy;

/// How long resolving a webhook's host may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The most of a webhook's answer read.
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Which webhook targets are allowed: publicly routable addresses, and
/// any address inside one of the operator's CIDRs (`--webhook-allow`).
#[derive(Debug, Clone, Default)]
pub struct WebhookPolicy {
    allow: Vec<IpNet>,
}

/// A webhook URL the policy accepted, with the addresses its host resolved
/// to; [`deliver`] connects to these and no others.
#[derive(Debug, Clone)]
pub struct CheckedUrl {
    /// The URL, as parsed.
    pub url: Url,
    /// Every address the host resolved to (the literal address for an IP
    /// host), each with the URL's port.
    pub addrs: Vec<SocketAddr>,
}

impl WebhookPolicy {
    /// A policy that also allows targets inside the CIDRs of `allow`.
    pub fn new(allow: Vec<IpNet>) -> Self {
        Self { allow }
    }

    /// Whether a webhook may connect to `ip`: it is publicly routable, or
    /// an allowed CIDR contains it (or its IPv4 form, for an IPv4-mapped
    /// IPv6 address).
    pub fn allows(&self, ip: IpAddr) -> bool {
        let canonical = ip.to_canonical();
        is_public(ip)
            || self
                .allow
                .iter()
                .any(|net| net.contains(&ip) || net.contains(&canonical))
    }

    /// Parses and checks a webhook URL: http or https only, no userinfo, a
    /// host; resolves the host (bounded by a 5 s timeout) and refuses it
    /// when any resolved address is not publicly routable — loopback,
    /// private (10/8, 172.16/12, 192.168/16), link-local (169.254/16,
    /// fe80::/10), unspecified, broadcast, multicast, CGNAT 100.64/10, ULA
    /// fc00::/7, IPv4-mapped forms of these, documentation ranges — unless
    /// an allowed CIDR contains it. The error is a short human reason.
    pub async fn check(&self, url: &str) -> Result<CheckedUrl, String> {
        let url = Url::parse(url).map_err(|e| format!("not a valid URL ({e})"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "scheme `{}` is not allowed (http or https only)",
                url.scheme()
            ));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err("credentials in the URL are not allowed".into());
        }
        let port = url.port_or_known_default().ok_or("the URL has no port")?;
        let host = url.host_str().ok_or("the URL has no host")?;
        let addrs: Vec<SocketAddr> = if let Some(ip) = ip_host(&url) {
            vec![SocketAddr::new(ip, port)]
        } else {
            let lookup = tokio::net::lookup_host((host, port));
            match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                Err(_) => return Err(format!("resolving `{host}` timed out")),
                Ok(Err(e)) => return Err(format!("cannot resolve `{host}` ({e})")),
                Ok(Ok(found)) => {
                    let mut addrs: Vec<SocketAddr> = Vec::new();
                    for addr in found {
                        if !addrs.contains(&addr) {
                            addrs.push(addr);
                        }
                    }
                    addrs
                }
            }
        };
        if addrs.is_empty() {
            return Err("the host resolves to no address".into());
        }
        if let Some(bad) = addrs.iter().find(|addr| !self.allows(addr.ip())) {
            return Err(format!(
                "the host resolves to {}, which is not a publicly routable address",
                bad.ip()
            ));
        }
        Ok(CheckedUrl { url, addrs })
    }
}

/// POSTs `body` (JSON) to a checked URL, connecting only to
/// `checked.addrs` (no second DNS lookup), with the headers
/// `webhook-signature: <signature>` and `content-type: application/json`.
/// Redirects are not followed and no proxy is used; `timeout` bounds the
/// whole exchange, and at most 64 KiB of the answer is read.
///
/// A 2xx answer gives its JSON body (`Null` when the body is empty, not
/// JSON or longer than 64 KiB); any other answer or a failure to connect
/// is an error with a short reason.
pub async fn deliver(
    checked: &CheckedUrl,
    body: Vec<u8>,
    signature: &str,
    timeout: Duration,
) -> Result<serde_json::Value, String> {
    let signature = HeaderValue::from_str(signature)
        .map_err(|_| "the signature is not a valid header value".to_owned())?;
    let mut builder = reqwest::Client::builder()
        .redirect(Policy::none())
        .no_proxy()
        .timeout(timeout)
        .connect_timeout(timeout);
    // An IP host is connected to as it is; a name is pinned to the
    // addresses the check resolved.
    if let (None, Some(host)) = (ip_host(&checked.url), checked.url.host_str()) {
        builder = builder.resolve_to_addrs(host, &checked.addrs);
    }
    let client = builder
        .build()
        .map_err(|e| format!("cannot build an HTTP client ({e})"))?;
    let exchange = async {
        let mut response = client
            .post(checked.url.clone())
            .header("webhook-signature", signature)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(body)
            .send()
            .await
            .map_err(|e| format!("delivery failed ({})", e.without_url()))?;
        let status = response.status();
        if !status.is_success() {
            let note = if status.is_redirection() {
                " (redirects are not followed)"
            } else {
                ""
            };
            return Err(format!("the webhook answered {status}{note}"));
        }
        let mut answer = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| format!("reading the answer failed ({})", e.without_url()))?
        {
            if answer.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Ok(serde_json::Value::Null);
            }
            answer.extend_from_slice(&chunk);
        }
        Ok(serde_json::from_slice(&answer).unwrap_or(serde_json::Value::Null))
    };
    // reqwest's timeout covers the body too; this one also bounds a
    // connection attempt per address.
    tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| format!("the webhook did not answer within {timeout:?}"))?
}

/// The URL's host when it is an IP address (the URL parser has already
/// normalised forms such as `0x7f.1` and put IPv6 in brackets).
fn ip_host(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

/// Whether `ip` is publicly routable: not loopback, private, link-local,
/// unspecified, broadcast, multicast, shared (CGNAT), reserved or for
/// documentation; IPv6 forms that embed an IPv4 address (mapped, NAT64,
/// 6to4) are judged by that address.
fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    let refused = a == 0 // "this network", with 0.0.0.0
        || a == 10 // private
        || (a == 100 && (64..128).contains(&b)) // shared address space (CGNAT)
        || a == 127 // loopback
        || (a == 169 && b == 254) // link-local
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0) // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2) // TEST-NET-1
        || (a == 192 && b == 88 && c == 99) // 6to4 relay anycast (deprecated)
        || (a == 192 && b == 168) // private
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100) // TEST-NET-2
        || (a == 203 && b == 0 && c == 113) // TEST-NET-3
        || a >= 224; // multicast, reserved, broadcast
    !refused
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    // IPv4-mapped ::ffff:a.b.c.d and the NAT64 prefix 64:ff9b::/96.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return is_public_v4(embedded_v4(s[6], s[7]));
    }
    // 6to4 2002::/16 carries an IPv4 address in its next 32 bits.
    if s[0] == 0x2002 {
        return is_public_v4(embedded_v4(s[1], s[2]));
    }
    // Only global unicast 2000::/3 is routable; that excludes ::, ::1,
    // IPv4-compatible ::/96, discard 100::/64, ULA fc00::/7, link-local
    // fe80::/10, site-local fec0::/10 and multicast ff00::/8.
    let global_unicast = s[0] & 0xe000 == 0x2000;
    let refused = !global_unicast
        || s[0] == 0x2001 && s[1] < 0x0200 // IETF protocol assignments 2001::/23 (Teredo, …)
        || s[0] == 0x2001 && s[1] == 0x0db8 // documentation 2001:db8::/32
        || s[0] & 0xfff0 == 0x3ff0; // documentation 3fff::/20
    !refused
}

/// The IPv4 address in two IPv6 segments.
fn embedded_v4(high: u16, low: u16) -> Ipv4Addr {
    let [a, b] = high.to_be_bytes();
    let [c, d] = low.to_be_bytes();
    Ipv4Addr::new(a, b, c, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    fn ip(text: &str) -> IpAddr {
        text.parse().expect("an IP address")
    }

    fn net(text: &str) -> IpNet {
        text.parse().expect("a CIDR")
    }

    #[test]
    fn address_classification() {
        let refused = [
            "0.0.0.0",
            "0.1.2.3",
            "10.0.0.1",
            "10.255.255.255",
            "100.64.0.1",
            "100.127.255.254",
            "127.0.0.1",
            "127.1.2.3",
            "169.254.169.254",
            "172.16.0.1",
            "172.31.255.255",
            "192.0.0.8",
            "192.0.2.1",
            "192.168.1.1",
            "198.18.0.1",
            "198.19.255.1",
            "198.51.100.7",
            "203.0.113.9",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "::",
            "::1",
            "::10.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:0.0.0.0",
            "64:ff9b::7f00:1",
            "64:ff9b::192.168.0.1",
            "64:ff9b:1::1",
            "100::1",
            "2001::1",
            "2001:db8::1",
            "2002:0a00:0001::1",
            "2002:7f00:0001::1",
            "3fff::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "febf::1",
            "fec0::1",
            "ff02::1",
            "ff0e::1",
        ];
        let public = [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.1",
            "100.63.255.255",
            "100.128.0.1",
            "172.15.255.255",
            "172.32.0.1",
            "169.253.1.1",
            "192.0.1.1",
            "192.167.1.1",
            "198.17.1.1",
            "198.20.1.1",
            "203.0.114.1",
            "223.255.255.254",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:0808:0808::1",
            "2001:4860:4860::8888",
            "2606:4700::1111",
            "2a00:1450::1",
        ];
        let policy = WebhookPolicy::new(Vec::new());
        for text in refused {
            assert!(!policy.allows(ip(text)), "{text} should be refused");
        }
        for text in public {
            assert!(policy.allows(ip(text)), "{text} should be allowed");
        }
    }

    #[test]
    fn allow_list_overrides() {
        let policy = WebhookPolicy::new(vec![net("127.0.0.0/8"), net("fd00::/8")]);
        assert!(policy.allows(ip("127.0.0.1")));
        assert!(policy.allows(ip("127.200.0.1")));
        assert!(policy.allows(ip("::ffff:127.0.0.1")));
        assert!(policy.allows(ip("fd12::1")));
        assert!(policy.allows(ip("8.8.8.8")));
        assert!(!policy.allows(ip("10.0.0.1")));
        assert!(!policy.allows(ip("::1")));
        assert!(!policy.allows(ip("fc00::1")));
        let exact = WebhookPolicy::new(vec![net("10.1.2.3/32")]);
        assert!(exact.allows(ip("10.1.2.3")));
        assert!(!exact.allows(ip("10.1.2.4")));
    }

    #[tokio::test]
    async fn url_refusals() {
        let none = WebhookPolicy::new(Vec::new());
        let loopback = WebhookPolicy::new(vec![net("127.0.0.0/8")]);
        for url in [
            "ftp://example.com/hook",
            "file:///etc/passwd",
            "http://user:pw@127.0.0.1:1/x",
            "http://user@127.0.0.1:1/x",
            "http://",
            "http:///x",
            "not a url",
            "unix:/run/x.sock",
            "http://10.0.0.1/hook",
            "http://[::1]:1/x",
            "http://[fe80::1]/x",
            "http://0.0.0.0:1/x",
            "http://0x7f.0.0.1:1/x",
            "http://2130706433:1/x",
            "http://127.0.0.1:1/x",
            "http://localhost:1/x",
        ] {
            let reason = none.check(url).await.expect_err(url);
            assert!(!reason.is_empty());
            if url.contains('@') || url.starts_with("ftp") || url.starts_with("http://10.") {
                assert!(loopback.check(url).await.is_err(), "{url}");
            }
        }
        let checked = loopback
            .check("http://127.0.0.1:1/x")
            .await
            .expect("allowed by 127.0.0.0/8");
        assert_eq!(checked.addrs, [SocketAddr::from(([127, 0, 0, 1], 1))]);
        assert_eq!(checked.url.as_str(), "http://127.0.0.1:1/x");
        let https = loopback
            .check("https://127.0.0.1/x")
            .await
            .expect("allowed by 127.0.0.0/8");
        assert_eq!(https.addrs[0].port(), 443);
        // `localhost` resolves locally; its IPv6 loopback is not allowed.
        let reason = none
            .check("http://localhost:1/x")
            .await
            .expect_err("localhost");
        assert!(reason.contains("not a publicly routable"), "{reason}");
    }

    /// Accepts one request on `listener`, answers it with `status` and
    /// `answer`, and returns the request's head and body.
    async fn serve_one(listener: TcpListener, status: &str, answer: &str) -> (String, Vec<u8>) {
        let (mut socket, _) = listener.accept().await.expect("a connection");
        let mut data = Vec::new();
        let mut buf = [0u8; 4096];
        let (head, body_start) = loop {
            let n = socket.read(&mut buf).await.expect("read");
            assert!(n > 0, "the request ended early");
            data.extend_from_slice(&buf[..n]);
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                break (String::from_utf8_lossy(&data[..end]).into_owned(), end + 4);
            }
        };
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .expect("a content-length");
        while data.len() < body_start + length {
            let n = socket.read(&mut buf).await.expect("read");
            assert!(n > 0, "the body ended early");
            data.extend_from_slice(&buf[..n]);
        }
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\nlocation: http://10.0.0.1/\r\n\
             content-length: {}\r\nconnection: close\r\n\r\n{answer}",
            answer.len()
        );
        socket.write_all(response.as_bytes()).await.expect("write");
        (head, data[body_start..body_start + length].to_vec())
    }

    #[tokio::test]
    async fn delivers_to_a_loopback_receiver() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let server = tokio::spawn(serve_one(listener, "200 OK", r#"{"done":true}"#));
        let policy = WebhookPolicy::new(vec![net("127.0.0.0/8")]);
        let checked = policy
            .check(&format!("http://127.0.0.1:{port}/hook?x=1"))
            .await
            .expect("allowed");
        let body = br#"{"subscription_id":"sub-1"}"#.to_vec();
        let answer = deliver(
            &checked,
            body.clone(),
            "t=1,kid=ds_x,ed25519=AbC-_",
            Duration::from_secs(10),
        )
        .await
        .expect("delivered");
        assert_eq!(answer, serde_json::json!({"done": true}));
        let (head, received) = server.await.expect("the receiver");
        assert!(head.starts_with("POST /hook?x=1 HTTP/1.1\r\n"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(
            lower.contains("\r\nwebhook-signature: t=1,kid=ds_x,ed25519=abc-_"),
            "{head}"
        );
        assert!(
            lower.contains("\r\ncontent-type: application/json"),
            "{head}"
        );
        assert_eq!(received, body);
    }

    #[tokio::test]
    async fn delivery_connects_only_to_the_checked_addresses() {
        // `localhost` would resolve to 127.0.0.1 or ::1; the receiver
        // listens on 127.0.0.2 only, so the request arrives only if the
        // checked addresses are used as they are.
        let listener = TcpListener::bind("127.0.0.2:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(serve_one(listener, "204 No Content", ""));
        let checked = CheckedUrl {
            url: Url::parse(&format!("http://localhost:{}/pinned", addr.port())).expect("URL"),
            addrs: vec![addr],
        };
        let answer = deliver(&checked, b"{}".to_vec(), "sig", Duration::from_secs(10))
            .await
            .expect("delivered");
        assert_eq!(answer, serde_json::Value::Null);
        let (head, _) = server.await.expect("the receiver");
        assert!(head.starts_with("POST /pinned "), "{head}");
    }

    #[tokio::test]
    async fn non_success_answers_are_errors() {
        for (status, want) in [
            ("302 Found", "redirects are not followed"),
            ("500 Internal Server Error", "500"),
        ] {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            let addr = listener.local_addr().expect("address");
            let server = tokio::spawn(serve_one(listener, status, "{}"));
            let checked = CheckedUrl {
                url: Url::parse(&format!("http://{addr}/x")).expect("URL"),
                addrs: vec![addr],
            };
            let reason = deliver(&checked, b"{}".to_vec(), "sig", Duration::from_secs(10))
                .await
                .expect_err(status);
            assert!(reason.contains(want), "{reason}");
            server.await.expect("the receiver");
        }
    }

    #[tokio::test]
    async fn a_silent_receiver_times_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let checked = CheckedUrl {
            url: Url::parse(&format!("http://{addr}/x")).expect("URL"),
            addrs: vec![addr],
        };
        // The listener accepts (the kernel's backlog) but never answers.
        let reason = deliver(&checked, b"{}".to_vec(), "sig", Duration::from_millis(200))
            .await
            .expect_err("no answer");
        assert!(!reason.is_empty());
        drop(listener);
    }
}
