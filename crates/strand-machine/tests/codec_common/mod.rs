//! Machines and helpers shared by the `codec_*` tests.

#![allow(dead_code, clippy::unwrap_used)]

use std::fmt::Write as _;

use serde_json::{Value, json};
use strand_machine::{StreamCommand, StreamResponse, StreamStateMachine};

/// Applies a command given as its serde JSON and panics on an error
/// response.
pub(crate) fn apply(machine: &mut StreamStateMachine, command: Value) -> StreamResponse {
    let command: StreamCommand = serde_json::from_value(command).unwrap();
    let shown = command.to_string();
    let response = machine.apply(command);
    assert!(
        !matches!(response, StreamResponse::Error { .. }),
        "{shown} failed: {response:?}"
    );
    response
}

fn sid(bucket: &str, stream: &str) -> Value {
    json!({"bucket_id": bucket, "stream_id": stream})
}

fn create(
    bucket: &str,
    stream: &str,
    content_type: &str,
    payload: &[u8],
    producer: Value,
) -> Value {
    json!({"CreateStream": {
        "stream_id": sid(bucket, stream), "content_type": content_type,
        "initial_payload": payload, "close_after": false, "stream_seq": null,
        "producer": producer, "stream_ttl_seconds": null,
        "stream_expires_at_ms": null, "attrs": null, "now_ms": 1_700_000_000_000u64
    }})
}

fn append(
    bucket: &str,
    stream: &str,
    content_type: &str,
    payload: &[u8],
    producer: Value,
) -> Value {
    json!({"Append": {
        "stream_id": sid(bucket, stream), "content_type": content_type,
        "payload": payload, "close_after": false, "stream_seq": null,
        "producer": producer, "now_ms": 1_700_000_000_500u64
    }})
}

/// The small machine of the format snapshots: buckets `alpha` and `beta`;
/// `alpha/events` (octet stream, one idempotent producer), `beta/records`
/// (a JSON stream); a deleted cold stream left one GC entry; `alpha` has a
/// quota.
pub(crate) fn small_machine() -> StreamStateMachine {
    let mut m = StreamStateMachine::new();
    apply(&mut m, json!({"CreateBucket": {"bucket_id": "alpha"}}));
    apply(&mut m, json!({"CreateBucket": {"bucket_id": "beta"}}));
    let producer = json!({"producer_id": "p1", "producer_epoch": 0, "producer_seq": 0});
    apply(
        &mut m,
        create(
            "alpha",
            "events",
            "application/octet-stream",
            b"\x00\x01\xff",
            Value::Null,
        ),
    );
    apply(
        &mut m,
        append(
            "alpha",
            "events",
            "application/octet-stream",
            b"hi",
            producer,
        ),
    );
    apply(
        &mut m,
        create(
            "beta",
            "records",
            "application/json",
            b"{\"a\":1}\n",
            Value::Null,
        ),
    );
    apply(
        &mut m,
        create("beta", "cold", "text/plain", b"old!", Value::Null),
    );
    apply(
        &mut m,
        json!({"FlushCold": {"stream_id": sid("beta", "cold"), "chunk": {
            "start_offset": 0, "end_offset": 4, "s3_path": "s3://c/beta/cold/1",
            "object_size": 4, "object_offset": 0, "shared_object": false,
            "payload_digest": ""
        }}}),
    );
    apply(
        &mut m,
        json!({"DeleteStream": {"stream_id": sid("beta", "cold")}}),
    );
    apply(
        &mut m,
        json!({"SetBucketQuota": {"bucket_id": "alpha", "max_streams": 5, "max_retained_bytes": null}}),
    );
    m
}

/// A payload-heavy machine: `streams` streams over 4 buckets, each with
/// `bytes` hot bytes of pseudo-random data appended by 3 producers.
pub(crate) fn heavy_machine(streams: usize, bytes: usize) -> StreamStateMachine {
    let mut m = StreamStateMachine::new();
    for b in 0..4 {
        apply(
            &mut m,
            json!({"CreateBucket": {"bucket_id": format!("bucket{b}")}}),
        );
    }
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let chunk = bytes / 3;
    for s in 0..streams {
        let bucket = format!("bucket{}", s % 4);
        let stream = format!("s{s:05}");
        apply(
            &mut m,
            create(
                &bucket,
                &stream,
                "application/octet-stream",
                b"",
                Value::Null,
            ),
        );
        for p in 0..3 {
            let len = if p == 2 { bytes - 2 * chunk } else { chunk };
            let payload: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let producer =
                json!({"producer_id": format!("p{p}"), "producer_epoch": 1, "producer_seq": 0});
            apply(
                &mut m,
                append(
                    &bucket,
                    &stream,
                    "application/octet-stream",
                    &payload,
                    producer,
                ),
            );
        }
    }
    m
}

/// `bytes` as a hex dump: offset, 16 bytes per line, ASCII column.
pub(crate) fn hexdump(bytes: &[u8]) -> String {
    let mut out = String::new();
    for (i, line) in bytes.chunks(16).enumerate() {
        write!(out, "{:08x} ", i * 16).unwrap();
        for j in 0..16 {
            match line.get(j) {
                Some(b) => write!(out, " {b:02x}").unwrap(),
                None => out.push_str("   "),
            }
            if j == 7 {
                out.push(' ');
            }
        }
        out.push_str("  |");
        for b in line {
            out.push(if b.is_ascii_graphic() || *b == b' ' {
                char::from(*b)
            } else {
                '.'
            });
        }
        out.push_str("|\n");
    }
    out
}
