//! The seeds of the `http_request` target: request sequences in its input
//! layout (`fuzz/checks/http_request.rs`), raw HTTP/1.1 requests between
//! `~~~` lines. The target's setup has already created `/v1/stream/a`
//! (`application/octet-stream`, `hello`), `/v1/stream/j` (JSON, `[1,
//! {"x":2}]`), the bucket `bkt1` and `/bkt1/s` (`text/plain`, `x`).

use std::collections::BTreeSet;

/// The line between two requests (the target's `SEPARATOR`).
const SEPARATOR: &str = "\n~~~\n";

const OCTET: &str = "Content-Type: application/octet-stream";
const JSON: &str = "Content-Type: application/json";
const TEXT: &str = "Content-Type: text/plain";

/// One request: request line, header lines, blank line, body.
fn request(line: &str, headers: &[&str], body: &str) -> String {
    let mut out = format!("{line} HTTP/1.1\n");
    for header in headers {
        out.push_str(header);
        out.push('\n');
    }
    out.push('\n');
    out.push_str(body);
    out
}

fn get(target: &str) -> String {
    request(&format!("GET {target}"), &[], "")
}

fn put(target: &str, headers: &[&str], body: &str) -> String {
    request(&format!("PUT {target}"), headers, body)
}

fn post(target: &str, headers: &[&str], body: &str) -> String {
    request(&format!("POST {target}"), headers, body)
}

/// `n` JSON strings of 20 characters as one array (about 22 bytes each
/// stored), to cross the target's 1025-byte read pages.
fn json_strings(n: usize, tag: char) -> String {
    let items: Vec<String> = (0..n).map(|i| format!("\"{tag}{i:019}\"")).collect();
    format!("[{}]", items.join(", "))
}

/// An append to `/v1/stream/a` as producer `id`.
fn p(id: &str, epoch: &str, seq: &str, body: &str) -> String {
    let headers = [
        OCTET.to_owned(),
        format!("Producer-Id: {id}"),
        format!("Producer-Epoch: {epoch}"),
        format!("Producer-Seq: {seq}"),
    ];
    let headers: Vec<&str> = headers.iter().map(String::as_str).collect();
    post("/v1/stream/a", &headers, body)
}

/// Every seed, each a sequence of requests in the target's layout.
pub(super) fn seeds() -> BTreeSet<Vec<u8>> {
    let sequences: Vec<Vec<String>> = vec![
        // Plain text: create, append, reads from the start and a position.
        vec![
            put("/v1/stream/t1", &[TEXT], "hello"),
            post("/v1/stream/t1", &[TEXT], " world"),
            get("/v1/stream/t1?offset=-1"),
            get("/v1/stream/t1?offset=0000000000000000_0000000000000005"),
            request("HEAD /v1/stream/t1", &[], ""),
        ],
        // JSON mode: arrays flatten one level, whitespace goes, an empty
        // array and broken JSON are refused.
        vec![
            put("/v1/stream/js", &[JSON], "[{\"a\": 1}, 2]"),
            post("/v1/stream/js", &[JSON], "{\"b\": [1, 2], \"c\": \"x\\ny\"}"),
            post("/v1/stream/js", &[JSON], "[3, 4, \"five\"]"),
            post("/v1/stream/js", &[JSON], "[]"),
            post("/v1/stream/js", &[JSON], "{bad"),
            get("/v1/stream/js?offset=-1"),
            get("/v1/stream/js?offset=0000000000000000_0000000000000008"),
        ],
        vec![
            post("/v1/stream/j", &[JSON], "[true, null, 1.5e3, -0, 1e400]"),
            post("/v1/stream/j", &[TEXT], "not json"),
            post("/v1/stream/j", &["Content-Type: application/json; charset=utf-8"], " \"\\u00e9\" "),
            get("/v1/stream/j?offset=-1"),
            get("/v1/stream/j?offset=0000000000000000_0000000000000002"),
        ],
        // JSON values across the read page.
        vec![
            put("/v1/stream/big", &[JSON], &json_strings(40, 'a')),
            post("/v1/stream/big", &[JSON], &json_strings(40, 'b')),
            get("/v1/stream/big?offset=-1"),
            get("/v1/stream/big?offset=0000000000000000_0000000000001012"),
            get("/v1/stream/big?offset=-1&live=long-poll"),
        ],
        // Idempotent producers: in order, duplicate, gap, new epoch, stale.
        vec![
            p("p1", "0", "0", "a"),
            p("p1", "0", "1", "b"),
            p("p1", "0", "1", "b"),
            p("p1", "0", "3", "d"),
            p("p1", "1", "0", "e"),
            p("p1", "0", "2", "c"),
            get("/v1/stream/a?offset=-1"),
        ],
        // Producer headers refused.
        vec![
            p("p1", "-1", "0", "x"),
            p("p1", "0", "9007199254740992", "x"),
            p("  ", "0", "0", "x"),
            p("p1", "0", "1e3", "x"),
            p("p1", "0", "007", "x"),
            post("/v1/stream/a", &[OCTET, "Producer-Id: p1", "Producer-Epoch: 0"], "x"),
            post(
                "/v1/stream/a",
                &[OCTET, "Producer-Id: p1", "Producer-Id: p2", "Producer-Epoch: 0", "Producer-Seq: 0"],
                "x",
            ),
        ],
        // Producers on a JSON stream and with closing.
        vec![
            post(
                "/v1/stream/j",
                &[JSON, "Producer-Id: w", "Producer-Epoch: 2", "Producer-Seq: 0"],
                "[5, 6]",
            ),
            post(
                "/v1/stream/j",
                &["Producer-Id: w", "Producer-Epoch: 2", "Producer-Seq: 1", "Stream-Closed: true"],
                "",
            ),
            post(
                "/v1/stream/j",
                &["Producer-Id: w", "Producer-Epoch: 2", "Producer-Seq: 1", "Stream-Closed: true"],
                "",
            ),
            get("/v1/stream/j?offset=-1"),
        ],
        // TTL: a stream that expires after a second, one that does not.
        vec![
            put("/v1/stream/ttl", &[TEXT, "Stream-TTL: 1"], "x"),
            get("/v1/stream/ttl?offset=-1"),
            request("HEAD /v1/stream/ttl", &[], ""),
            put("/v1/stream/ttl2", &[TEXT, "Stream-TTL: 3600"], ""),
            request("HEAD /v1/stream/ttl2", &[], ""),
            put("/v1/stream/ttl2", &[TEXT, "Stream-TTL: 60"], ""),
        ],
        // Expiry times, and the refused expiry headers.
        vec![
            put("/v1/stream/ex", &[TEXT, "Stream-Expires-At: 2026-01-01T00:00:03Z"], "x"),
            request("HEAD /v1/stream/ex", &[], ""),
            request("HEAD /v1/stream/ex", &[], ""),
            request("HEAD /v1/stream/ex", &[], ""),
            put(
                "/v1/stream/ex2",
                &[OCTET, "Stream-Expires-At: 2030-06-01T12:00:00.123+02:00"],
                "",
            ),
            request("HEAD /v1/stream/ex2", &[], ""),
            put(
                "/v1/stream/ex3",
                &[TEXT, "Stream-TTL: 10", "Stream-Expires-At: 2030-01-01T00:00:00Z"],
                "",
            ),
            put("/v1/stream/ex4", &[TEXT, "Stream-TTL: 01"], ""),
            put("/v1/stream/ex5", &[TEXT, "Stream-Expires-At: not-a-time"], ""),
            put("/v1/stream/ex6", &[TEXT, "Stream-Expires-At: 1969-12-31T23:59:60-00:30"], ""),
        ],
        // Stream-Seq: increasing tokens, then a repeat.
        vec![
            post("/v1/stream/a", &[OCTET, "Stream-Seq: 001"], "x"),
            post("/v1/stream/a", &[OCTET, "Stream-Seq: 002"], "y"),
            post("/v1/stream/a", &[OCTET, "Stream-Seq: 002"], "z"),
            post("/v1/stream/a", &[OCTET, "Stream-Seq: 010"], "z"),
            get("/v1/stream/a?offset=-1"),
        ],
        // Closing: an append after it, reads of a closed stream.
        vec![
            post("/v1/stream/a", &["Stream-Closed: true"], ""),
            post("/v1/stream/a", &[OCTET], "more"),
            get("/v1/stream/a?offset=-1"),
            get("/v1/stream/a?offset=now&live=long-poll"),
            request("HEAD /v1/stream/a", &[], ""),
            put("/v1/stream/c", &[TEXT, "Stream-Closed: true"], "done"),
            get("/v1/stream/c?offset=0000000000000000_0000000000000004&live=sse"),
        ],
        // A long-poll woken by an append, one that times out.
        vec![
            get("/v1/stream/a?offset=0000000000000000_0000000000000005&live=long-poll"),
            post("/v1/stream/a", &[OCTET], "!"),
            get("/v1/stream/a?offset=now&live=long-poll&cursor=123"),
            get("/v1/stream/a?offset=0000000000000000_0000000000000006&live=long-poll"),
        ],
        // SSE on a JSON stream, a binary one (base64) and a text one.
        vec![
            get("/v1/stream/j?offset=-1&live=sse"),
            post("/v1/stream/j", &[JSON], "{\"k\": \"v\"}"),
            get("/v1/stream/a?offset=-1&live=sse"),
            get("/bkt1/s?offset=now&live=sse&cursor=5"),
            post("/bkt1/s", &[TEXT], "line1\r\nline2\rline3\n"),
        ],
        // Reads refused.
        vec![
            get("/v1/stream/a?offset=abc"),
            get("/v1/stream/a?offset="),
            get("/v1/stream/a?offset=1_2&offset=3_4"),
            get("/v1/stream/a?offset=%zz"),
            get("/v1/stream/a?offset=9999999999999999_9999999999999999"),
            get("/v1/stream/a?offset=-1&live=forever"),
            get("/v1/stream/a?live=long-poll"),
            get("/v1/stream/missing?offset=-1"),
            get("/v1/stream/a?offset=0000000000000000_0000000000009999"),
            get("/v1/stream/a?offset=%2D1&x=%FF&cursor=a+b"),
        ],
        // Paths and methods refused; delete, then what follows it.
        vec![
            request("PATCH /v1/stream/a", &[OCTET], "x"),
            get("/v1/stream/"),
            get("/v1/stream/%2e%2e"),
            get("/v1/stream/a%00b"),
            get("/v1/stream/%ff"),
            request("DELETE /v1/stream/a", &[], ""),
            get("/v1/stream/a?offset=-1"),
            put("/v1/stream/a", &[OCTET], ""),
            request("DELETE /v1/stream/a", &[], ""),
        ],
        // Appends and creates with odd content types.
        vec![
            post("/v1/stream/a", &[], "x"),
            post("/v1/stream/a", &[OCTET], ""),
            put("/v1/stream/w", &["Content-Type: weird"], "x"),
            put("/v1/stream/w", &[TEXT], ""),
            put("/v1/stream/a", &[TEXT], ""),
            post("/v1/stream/a", &["Content-Type: APPLICATION/OCTET-STREAM; x=1"], "y"),
            post("/v1/stream/a", &[TEXT], "y"),
        ],
        // The bucketed layout: a bucket, an affinity stream, a transaction.
        vec![
            put("/bkt2", &[], ""),
            put("/bkt2/k/s1", &[JSON], "[1]"),
            post("/bkt2/k/s1", &[JSON], "[2, 3]"),
            get("/bkt2/k/s1?offset=-1"),
            post(
                "/bkt2/k/$transaction",
                &[JSON],
                "[{\"stream\": \"s1\", \"content_type\": \"application/json\", \"body\": \"4\\n\"}]",
            ),
            put("/bkt2/k/s2", &[OCTET], ""),
            post(
                "/bkt2/k/$transaction",
                &[JSON],
                "[{\"stream\": \"s2\", \"content_type\": \"application/octet-stream\", \"body_base64\": \"AAEC\", \"producer\": {\"producer_id\": \"t\", \"producer_epoch\": 0, \"producer_seq\": 0}}]",
            ),
            get("/bkt2"),
            request("HEAD /bkt2/k/s1", &[], ""),
            get("/bkt2/k/s2?offset=0000000000000000_0000000000000001"),
            get("/bkt3/s?offset=-1"),
        ],
        // append-batch frames, a record precondition.
        vec![
            post("/bkt1/s/append-batch", &[TEXT], "\0\0\0\x03abc\0\0\0\x02de"),
            post(
                "/bkt1/s/append-batch",
                &[TEXT, "Prefer: return=minimal"],
                "\0\0\0\x01f",
            ),
            post("/bkt1/s/append-batch", &[TEXT], "\0\0\0\x09short"),
            post("/bkt1/s", &[TEXT, "Stream-Record-Match: 4"], "y"),
            post("/bkt1/s", &[TEXT, "Stream-Record-Match: 99"], "y"),
            get("/bkt1/s?offset=-1"),
        ],
        // Forks: at an offset, of a JSON stream, refused ones.
        vec![
            put(
                "/v1/stream/f",
                &["Stream-Forked-From: /v1/stream/a", "Stream-Fork-Offset: 0000000000000000_0000000000000002"],
                "",
            ),
            get("/v1/stream/f?offset=-1"),
            post("/v1/stream/f", &[OCTET], "zz"),
            put("/v1/stream/f2", &["Stream-Forked-From: /v1/stream/j", JSON], "[9]"),
            get("/v1/stream/f2?offset=-1"),
            put("/v1/stream/f3", &["Stream-Fork-Sub-Offset: 1"], ""),
            put("/v1/stream/f4", &["Stream-Forked-From: /v1/stream/nope"], ""),
            put("/bkt1/f5", &["Stream-Forked-From: /bkt1/s?offset=1", "Stream-Fork-Sub-Offset: 0"], ""),
            request("DELETE /v1/stream/a", &[], ""),
            get("/v1/stream/f?offset=-1"),
        ],
        // Snapshots, retention, attrs, bootstrap.
        vec![
            post("/bkt1/s", &[TEXT], "abcdef"),
            put("/bkt1/s/snapshot/3", &[OCTET], "snap"),
            get("/bkt1/s/snapshot"),
            get("/bkt1/s/snapshot/3"),
            put("/bkt1/s/retention/0000000000000000_0000000000000002", &[], ""),
            get("/bkt1/s?offset=-1"),
            get("/bkt1/s/attrs"),
            put("/bkt1/s/attrs", &[JSON], "{\"title\": \"t\", \"metadata\": {\"k\": [1]}}"),
            get("/bkt1/s/bootstrap"),
            put("/bkt1/at", &[TEXT, "Stream-Attrs: {\"title\": \"x\"}"], ""),
            put("/bkt1/at2", &[TEXT, "Stream-Attrs: [1]"], ""),
        ],
        // Conditional reads.
        vec![
            get("/v1/stream/a?offset=-1"),
            request("GET /v1/stream/a?offset=-1", &["If-None-Match: *"], ""),
            request(
                "GET /v1/stream/a?offset=-1",
                &["If-None-Match: \"0000000000000000_0000000000000000:0000000000000000_0000000000000005\""],
                "",
            ),
        ],
        // CORS preflight, health, the server's own routes, the root.
        vec![
            request(
                "OPTIONS /v1/stream/a",
                &["Origin: http://example.com", "Access-Control-Request-Method: POST"],
                "",
            ),
            request("GET /v1/stream/a?offset=-1", &["Origin: http://example.com"], ""),
            get("/__strand/health"),
            request("HEAD /__strand/health", &[], ""),
            get("/"),
            get("/__strand/nope"),
            get("/__strand/integrity/default/a"),
        ],
        // CRLF heads, HTTP/1.0, absolute form, a head without its blank line.
        vec![
            "GET http://localhost/v1/stream/a?offset=-1 HTTP/1.1\r\nHost: localhost\r\n\r\n".to_owned(),
            "GET /v1/stream/j HTTP/1.0\r\n\r\n".to_owned(),
            "POST /v1/stream/a HTTP/1.1\r\nContent-Type: application/octet-stream\r\nContent-Length: 3\r\n\r\nabc".to_owned(),
            "HEAD /v1/stream/a HTTP/1.1\r\nHost: x".to_owned(),
        ],
        // A body over the limit, names that need percent-encoding.
        vec![
            post("/v1/stream/a", &[OCTET], &"z".repeat(1100)),
            put("/v1/stream/a%2Fb", &[TEXT], "slash"),
            put("/v1/stream/x%20y", &[TEXT], "space"),
            get("/v1/stream/x+y?offset=-1"),
            get("/v1/stream/x%20y?offset=-1"),
        ],
        // Cursors at the edges.
        vec![
            get("/v1/stream/a?offset=now&live=long-poll&cursor=99999999999"),
            get("/v1/stream/a?offset=now&live=long-poll&cursor=18446744073709551615"),
            get("/v1/stream/a?offset=now&live=sse&cursor=-3"),
        ],
    ];
    sequences
        .iter()
        .map(|requests| requests.join(SEPARATOR).into_bytes())
        .collect()
}
