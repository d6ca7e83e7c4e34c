//! The binary snapshot format checked against its documented layout
//! (`docs/snapshot-format.md`) with an independent CRC-64/XZ and an
//! independent MessagePack reading of every frame body; JSON encoder byte
//! identity; format detection; legacy frame bodies.

#![allow(clippy::unwrap_used)]

use crate::common;

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value, json};
use strand_model::{BucketStreamId, ColdGcEntry, ColdGcTarget};
use strand_snapshot::{
    CollectSink, DecodeError, DecodeLimits, FramePart, SharedColdObjectOwnersSnapshot,
    SnapshotFormat, StreamSnapshot, decode_binary, decode_json, decode_snapshot, detect_format,
    encode_binary, encode_json, sniff_format,
};

// ---- independent reference implementations -------------------------------

/// Bitwise CRC-64/XZ: reflected polynomial 0xC96C5795D7870F42, init and
/// xorout all ones.
fn crc64_xz(bytes: &[u8]) -> u64 {
    let mut crc = u64::MAX;
    for b in bytes {
        crc ^= u64::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xC96C_5795_D787_0F42
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn reference_crc_check_value() {
    assert_eq!(crc64_xz(b"123456789"), 0x995D_C9BB_DF19_39FA);
}

/// Any MessagePack value as JSON, byte strings as arrays of numbers (the
/// JSON shape of `Vec<u8>`).
struct Json(Value);

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json(json!(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json(json!(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Json, E> {
        Ok(Json(json!(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json(Value::String(v.to_owned())))
    }
    fn visit_bytes<E>(self, v: &[u8]) -> Result<Json, E> {
        Ok(Json(json!(v)))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        while let Some(Json(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Json(Value::Array(out)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = Map::new();
        while let Some((Json(k), Json(v))) = map.next_entry()? {
            let Value::String(k) = k else {
                return Err(de::Error::custom("non-string key"));
            };
            out.insert(k, v);
        }
        Ok(Json(Value::Object(out)))
    }
}

fn msgpack_to_json(body: &[u8]) -> Value {
    rmp_serde::from_slice::<Json>(body).unwrap().0
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
}

/// One frame as laid out in the file.
#[derive(Debug)]
struct RawFrame {
    kind: u8,
    index: u64,
    crc: u64,
    body: Vec<u8>,
}

/// Splits a binary snapshot per the documented layout, checking the file
/// header and every frame CRC with the reference CRC.
fn parse_layout(bytes: &[u8]) -> Vec<RawFrame> {
    assert_eq!(
        &bytes[..8],
        &[0x89, b'S', b'T', b'R', b'S', b'N', b'A', b'P']
    );
    assert_eq!(&bytes[8..10], &[1, 0], "version 1, little-endian");
    assert_eq!(&bytes[10..12], &[0, 0], "no flags");
    let mut at = 12;
    let mut frames = Vec::new();
    while at < bytes.len() {
        let kind = bytes[at];
        let index = u64_at(bytes, at + 1);
        let len = usize::try_from(u64_at(bytes, at + 9)).unwrap();
        let crc = u64_at(bytes, at + 17);
        let body = bytes[at + 25..at + 25 + len].to_vec();
        assert_eq!(
            crc,
            crc64_xz(
                &bytes[at..at + 17]
                    .iter()
                    .chain(&body)
                    .copied()
                    .collect::<Vec<_>>()
            )
        );
        frames.push(RawFrame {
            kind,
            index,
            crc,
            body,
        });
        at += 25 + len;
    }
    assert_eq!(at, bytes.len());
    frames
}

/// Assembles a binary snapshot from frame bodies (indexes, CRCs and the
/// footer computed with the reference CRC).
fn assemble(frames: &[(u8, Vec<u8>)], streams: u64) -> Vec<u8> {
    let mut out = vec![0x89, b'S', b'T', b'R', b'S', b'N', b'A', b'P', 1, 0, 0, 0];
    let mut crcs = Vec::new();
    let push = |out: &mut Vec<u8>, kind: u8, index: u64, body: &[u8]| {
        let mut head = vec![kind];
        head.extend_from_slice(&index.to_le_bytes());
        head.extend_from_slice(&(body.len() as u64).to_le_bytes());
        let crc = crc64_xz(&[head.as_slice(), body].concat());
        out.extend_from_slice(&head);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(body);
        crc
    };
    for (i, (kind, body)) in frames.iter().enumerate() {
        crcs.extend_from_slice(&push(&mut out, *kind, i as u64, body).to_le_bytes());
    }
    let footer = rmp_serde::to_vec_named(&json!({
        "frames": frames.len(), "streams": streams, "checksum": crc64_xz(&crcs)
    }))
    .unwrap();
    push(&mut out, 7, frames.len() as u64, &footer);
    out
}

fn named(v: &Value) -> Vec<u8> {
    rmp_serde::to_vec_named(v).unwrap()
}

// ---- fixtures ---------------------------------------------------------------

fn sample() -> StreamSnapshot {
    let mut snap: StreamSnapshot =
        serde_json::from_str(include_str!("data/legacy_c.json")).unwrap();
    snap.streams.push(common::full_entry());
    snap.erased_buckets = vec!["old".into()];
    snap.pending_cold_gc.push(ColdGcEntry {
        seq: 5,
        bucket_id: "acme".into(),
        not_before_ms: 9,
        target: ColdGcTarget::Stream(BucketStreamId::new("acme", "gone")),
    });
    snap.next_cold_gc_seq = 6;
    snap.shared_cold_object_owners = vec![SharedColdObjectOwnersSnapshot {
        s3_path: "_packs/p1.bin".into(),
        bucket_ids: vec!["acme".into(), "old".into()],
    }];
    snap
}

fn binary(snap: &StreamSnapshot) -> Vec<u8> {
    let mut out = Vec::new();
    encode_binary(&mut out, snap, &snap.streams).unwrap();
    out
}

fn collect(bytes: &[u8]) -> Result<StreamSnapshot, DecodeError> {
    let mut sink = CollectSink::new();
    decode_binary(bytes, &mut sink, &DecodeLimits::default())?;
    Ok(sink.into_snapshot())
}

// ---- tests --------------------------------------------------------------------

#[test]
fn binary_layout_matches_the_documentation() {
    let snap = sample();
    let frames = parse_layout(&binary(&snap));
    let kinds: Vec<u8> = frames.iter().map(|f| f.kind).collect();
    assert_eq!(kinds, [1, 2, 2, 3, 4, 5, 6, 7]);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.index, i as u64);
    }
    let whole = serde_json::to_value(&snap).unwrap();
    let pick = |keys: &[&str]| {
        Value::Object(
            keys.iter()
                .map(|k| ((*k).to_owned(), whole[*k].clone()))
                .collect(),
        )
    };
    let bodies: Vec<Value> = frames.iter().map(|f| msgpack_to_json(&f.body)).collect();
    assert_eq!(bodies[0], pick(&["buckets", "erased_buckets"]));
    assert_eq!(bodies[1], whole["streams"][0]);
    assert_eq!(bodies[2], whole["streams"][1]);
    assert_eq!(bodies[3], pick(&["pending_cold_gc", "next_cold_gc_seq"]));
    assert_eq!(bodies[4], pick(&["shared_cold_object_owners"]));
    assert_eq!(bodies[5], pick(&["bucket_usage"]));
    assert_eq!(bodies[6], pick(&["bucket_quotas"]));
    let crcs: Vec<u8> = frames[..7]
        .iter()
        .flat_map(|f| f.crc.to_le_bytes())
        .collect();
    assert_eq!(
        bodies[7],
        json!({"frames": 7, "streams": 2, "checksum": crc64_xz(&crcs)})
    );
}

#[test]
fn payloads_are_msgpack_byte_strings() {
    let snap = sample();
    let frames = parse_layout(&binary(&snap));
    // full_entry's payload "xyz": bin8 (0xc4), length 3.
    let body = &frames[2].body;
    assert!(body.windows(5).any(|w| w == [0xc4, 3, b'x', b'y', b'z']));
    // The visible snapshot payload "{}" is a byte string too.
    assert!(body.windows(4).any(|w| w == [0xc4, 2, b'{', b'}']));
}

#[test]
fn binary_round_trips() {
    let snap = sample();
    assert_eq!(collect(&binary(&snap)).unwrap(), snap);
    let empty = StreamSnapshot::default();
    assert_eq!(collect(&binary(&empty)).unwrap(), empty);
}

#[test]
fn json_encoder_is_byte_identical() {
    for snap in [sample(), StreamSnapshot::default()] {
        let mut borrowed = Vec::new();
        encode_json(&mut borrowed, &snap, &snap.streams).unwrap();
        assert_eq!(borrowed, serde_json::to_vec(&snap).unwrap());
        let mut owned = Vec::new();
        let head = StreamSnapshot {
            streams: Vec::new(),
            ..snap.clone()
        };
        encode_json(&mut owned, &head, snap.streams.clone()).unwrap();
        assert_eq!(owned, borrowed);
        assert_eq!(decode_json(borrowed.as_slice()).unwrap(), snap);
    }
}

#[test]
fn formats_are_detected_by_content() {
    let snap = sample();
    let bin = binary(&snap);
    let json = serde_json::to_vec(&snap).unwrap();
    assert_eq!(detect_format(&bin), Some(SnapshotFormat::Binary));
    assert_eq!(detect_format(&bin[..8]), Some(SnapshotFormat::Binary));
    assert_eq!(detect_format(&bin[..7]), None);
    assert_eq!(detect_format(&json), Some(SnapshotFormat::Json));
    assert_eq!(detect_format(b" \r\n\t{"), Some(SnapshotFormat::Json));
    assert_eq!(detect_format(b"[1]"), None);
    assert_eq!(detect_format(b""), None);
    let limits = DecodeLimits::default();
    assert_eq!(decode_snapshot(bin.as_slice(), &limits).unwrap(), snap);
    assert_eq!(decode_snapshot(json.as_slice(), &limits).unwrap(), snap);
    let padded = [b"          \n\n".as_slice(), &json].concat();
    assert_eq!(decode_snapshot(padded.as_slice(), &limits).unwrap(), snap);
    for junk in [b"".as_slice(), b"   ", b"\x89STR", b"nope", b"[]"] {
        assert!(matches!(
            sniff_format(junk),
            Err(DecodeError::UnknownFormat)
        ));
    }
}

/// Frame bodies follow the JSON legacy rules: absent defaulted fields take
/// their defaults, unknown fields are ignored, a payload written as an
/// array of numbers is accepted.
#[test]
fn legacy_and_future_frame_bodies_decode() {
    let legacy: Value = serde_json::from_str(include_str!("data/legacy_a.json")).unwrap();
    let expected: StreamSnapshot = serde_json::from_value(legacy.clone()).unwrap();
    let mut entry = legacy["streams"][0].clone();
    entry["added_in_a_later_version"] = json!({"x": [1, 2]});
    let file = assemble(
        &[
            (1, named(&json!({"buckets": legacy["buckets"]}))),
            (2, named(&entry)),
            (3, named(&json!({}))),
            (4, named(&json!({}))),
            (5, named(&json!({"bucket_usage": []}))),
            (6, named(&json!({"bucket_quotas": [], "unknown": 1}))),
        ],
        1,
    );
    assert_eq!(collect(&file).unwrap(), expected);
}

#[test]
fn required_fields_stay_required() {
    let file = assemble(
        &[
            (1, named(&json!({"erased_buckets": []}))),
            (3, named(&json!({}))),
            (4, named(&json!({}))),
            (5, named(&json!({}))),
            (6, named(&json!({}))),
        ],
        0,
    );
    let err = collect(&file).unwrap_err();
    assert!(
        matches!(&err, DecodeError::Body { frame, .. } if frame.index == 0 && frame.kind == 1),
        "{err}"
    );
    assert!(err.to_string().contains("buckets"), "{err}");
}

fn minimal() -> Vec<(u8, Vec<u8>)> {
    vec![
        (1, named(&json!({"buckets": ["a"]}))),
        (3, named(&json!({}))),
        (4, named(&json!({}))),
        (5, named(&json!({}))),
        (6, named(&json!({}))),
    ]
}

#[test]
fn order_kind_and_body_errors_name_the_frame() {
    assert!(collect(&assemble(&minimal(), 0)).is_ok());

    let mut swapped = minimal();
    swapped.swap(2, 3);
    let err = collect(&assemble(&swapped, 0)).unwrap_err();
    assert!(
        matches!(err, DecodeError::UnexpectedFrame { frame, .. } if frame.index == 2 && frame.kind == 5),
        "{err}"
    );
    // Offset: file header 12 + frame 0 (25 + 12-byte body
    // {"buckets":["a"]}) + frame 1 (25 + 1-byte body {}) = 75.
    assert_eq!(
        err.to_string(),
        "frame 2 (usage, at byte 75): unexpected here, expected a shared-owners frame"
    );

    let mut unknown = minimal();
    unknown.insert(1, (42, named(&json!({}))));
    let err = collect(&assemble(&unknown, 0)).unwrap_err();
    assert!(
        matches!(err, DecodeError::UnknownKind { frame } if frame.index == 1 && frame.kind == 42)
    );
    assert!(err.to_string().contains("unknown kind 0x2a"), "{err}");

    let mut trailing = minimal();
    trailing[1].1.push(0xc0);
    let err = collect(&assemble(&trailing, 0)).unwrap_err();
    assert!(matches!(err, DecodeError::BodyTrailingBytes { frame, extra: 1 } if frame.index == 1));

    let err = collect(&assemble(&minimal(), 3)).unwrap_err();
    assert!(matches!(
        err,
        DecodeError::FooterMismatch {
            field: "streams",
            stored: 3,
            computed: 0,
            ..
        }
    ));
}

#[test]
fn header_errors() {
    let good = assemble(&minimal(), 0);
    let mut v = good.clone();
    v[8] = 2;
    assert!(matches!(
        collect(&v),
        Err(DecodeError::UnsupportedVersion(2))
    ));
    let mut v = good.clone();
    v[11] = 0x80;
    assert!(matches!(
        collect(&v),
        Err(DecodeError::UnsupportedFlags(0x8000))
    ));
    let mut v = good.clone();
    v[0] = b'{';
    assert!(matches!(collect(&v), Err(DecodeError::BadMagic)));
    assert!(matches!(
        collect(&good[..10]),
        Err(DecodeError::TruncatedHeader { len: 10 })
    ));
    assert!(matches!(
        collect(&good[..12]),
        Err(DecodeError::Truncated {
            index: 0,
            kind: None,
            part: FramePart::Missing,
            offset: 12
        })
    ));
    assert!(matches!(collect(b"{}"), Err(DecodeError::BadMagic)));
}

#[test]
fn a_huge_declared_length_is_rejected_before_allocating() {
    let mut v = assemble(&minimal(), 0);
    // Frame 0's length field sits at 12 + 9.
    v[21..29].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = collect(&v).unwrap_err();
    assert!(
        matches!(err, DecodeError::FrameTooLarge { frame, len: u64::MAX, limit } if frame.index == 0 && limit == 256 << 20),
        "{err}"
    );
    // A length within the limit but beyond the input is a truncation.
    let mut v = assemble(&minimal(), 0);
    v[21..29].copy_from_slice(&(1u64 << 20).to_le_bytes());
    assert!(matches!(
        collect(&v),
        Err(DecodeError::Truncated {
            index: 0,
            kind: Some(1),
            part: FramePart::Body,
            ..
        })
    ));
    // A configurable limit.
    let v = assemble(&minimal(), 0);
    let mut sink = CollectSink::new();
    let err = decode_binary(
        v.as_slice(),
        &mut sink,
        &DecodeLimits::default().with_max_frame_len(4),
    )
    .unwrap_err();
    assert!(matches!(err, DecodeError::FrameTooLarge { limit: 4, .. }));
}
