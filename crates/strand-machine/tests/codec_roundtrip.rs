//! Machine → snapshot codec → machine, in both formats, through the
//! streaming paths (`write_snapshot`, `restore_from`).

#![allow(clippy::unwrap_used)]

use crate::codec_common;

use codec_common::{heavy_machine, small_machine};
use strand_machine::{
    RestoreError, StreamStateMachine, restore_from, restore_from_with_limits, write_snapshot,
};
use strand_snapshot::{
    CollectSink, DecodeError, DecodeLimits, SnapshotFormat, StreamSnapshotError, decode_binary,
    encode_binary,
};

fn written(machine: &StreamStateMachine, format: SnapshotFormat) -> Vec<u8> {
    let mut out = Vec::new();
    write_snapshot(machine, format, &mut out).unwrap();
    out
}

fn machines() -> Vec<StreamStateMachine> {
    vec![
        StreamStateMachine::new(),
        small_machine(),
        heavy_machine(9, 3000),
    ]
}

#[test]
fn binary_round_trip_gives_the_same_snapshot() {
    for machine in machines() {
        let bytes = written(&machine, SnapshotFormat::Binary);
        let restored = restore_from(bytes.as_slice()).unwrap();
        assert_eq!(restored.snapshot(), machine.snapshot());
        // And the restored machine writes the same bytes again.
        assert_eq!(written(&restored, SnapshotFormat::Binary), bytes);
    }
}

#[test]
fn json_round_trip_gives_the_same_snapshot() {
    for machine in machines() {
        let bytes = written(&machine, SnapshotFormat::Json);
        assert_eq!(bytes, serde_json::to_vec(&machine.snapshot()).unwrap());
        let restored = restore_from(bytes.as_slice()).unwrap();
        assert_eq!(restored.snapshot(), machine.snapshot());
    }
}

#[test]
fn restored_machines_behave_alike() {
    let machine = small_machine();
    let mut from_binary =
        restore_from(written(&machine, SnapshotFormat::Binary).as_slice()).unwrap();
    let mut from_json = restore_from(written(&machine, SnapshotFormat::Json).as_slice()).unwrap();
    let command = || -> strand_machine::StreamCommand {
        serde_json::from_value(serde_json::json!({"Append": {
            "stream_id": {"bucket_id": "alpha", "stream_id": "events"},
            "content_type": "application/octet-stream", "payload": [7],
            "close_after": false, "stream_seq": null,
            "producer": {"producer_id": "p1", "producer_epoch": 0, "producer_seq": 0},
            "now_ms": 1_700_000_001_000u64
        }}))
        .unwrap()
    };
    // A duplicate of the producer's last append: deduplicated by both.
    let a = from_binary.apply(command());
    let b = from_json.apply(command());
    assert_eq!(a, b);
    assert_eq!(from_binary.snapshot(), from_json.snapshot());
}

#[test]
fn binary_of_a_snapshot_matches_binary_of_the_machine() {
    // `write_snapshot` refills one entry per stream; each machine's
    // streams differ in producers, receipts, records, attrs and sizes, so
    // anything left over from the previous stream shows here.
    for machine in machines() {
        let snap = machine.snapshot();
        let mut from_snapshot = Vec::new();
        encode_binary(&mut from_snapshot, &snap, &snap.streams).unwrap();
        assert!(from_snapshot == written(&machine, SnapshotFormat::Binary));
    }
    let machine = small_machine();
    let snap = machine.snapshot();
    let mut from_snapshot = Vec::new();
    encode_binary(&mut from_snapshot, &snap, &snap.streams).unwrap();
    assert_eq!(from_snapshot, written(&machine, SnapshotFormat::Binary));
    let mut sink = CollectSink::new();
    decode_binary(
        from_snapshot.as_slice(),
        &mut sink,
        &DecodeLimits::default(),
    )
    .unwrap();
    assert_eq!(sink.into_snapshot(), snap);
}

#[test]
fn validation_errors_are_not_decode_errors() {
    let machine = small_machine();
    let mut snap = machine.snapshot();
    snap.buckets.push("alpha".into());
    let expected = StreamSnapshotError::DuplicateBucket("alpha".into());
    assert_eq!(
        StreamStateMachine::restore(snap.clone()).unwrap_err(),
        expected
    );

    let mut bin = Vec::new();
    encode_binary(&mut bin, &snap, &snap.streams).unwrap();
    let json = serde_json::to_vec(&snap).unwrap();
    for bytes in [bin, json] {
        match restore_from(bytes.as_slice()) {
            Err(RestoreError::Invalid(e)) => assert_eq!(e, expected),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    // A stream whose bucket is missing fails on its own frame.
    let mut snap = machine.snapshot();
    snap.buckets.retain(|b| b != "beta");
    let mut bin = Vec::new();
    encode_binary(&mut bin, &snap, &snap.streams).unwrap();
    let err = restore_from(bin.as_slice()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "snapshot failed validation: snapshot stream 'beta/records' references a missing bucket"
    );
}

#[test]
fn decode_errors_are_decode_errors() {
    assert!(matches!(
        restore_from(b"not a snapshot".as_slice()),
        Err(RestoreError::Decode(DecodeError::UnknownFormat))
    ));
    assert!(matches!(
        restore_from(b"{\"buckets\": 3}".as_slice()),
        Err(RestoreError::Decode(DecodeError::Json(_)))
    ));
    let bytes = written(&small_machine(), SnapshotFormat::Binary);
    let cut = &bytes[..bytes.len() - 1];
    assert!(matches!(
        restore_from(cut),
        Err(RestoreError::Decode(DecodeError::Truncated { .. }))
    ));
    let limits = DecodeLimits::default().with_max_frame_len(100);
    match restore_from_with_limits(bytes.as_slice(), &limits) {
        Err(RestoreError::Decode(DecodeError::FrameTooLarge {
            frame, limit: 100, ..
        })) => {
            assert_eq!(
                frame.index, 1,
                "frame 0 (buckets) fits, the first stream does not"
            );
        }
        other => panic!("expected FrameTooLarge, got {other:?}"),
    }
}

#[test]
fn restore_from_slice_agrees_with_restore_from() {
    for machine in machines() {
        for format in [SnapshotFormat::Json, SnapshotFormat::Binary] {
            let bytes = written(&machine, format);
            let restored = strand_machine::restore_from_slice(&bytes).unwrap();
            assert_eq!(restored.snapshot(), machine.snapshot(), "{format:?}");
        }
    }
    // Errors keep their kind.
    assert!(matches!(
        strand_machine::restore_from_slice(b"not a snapshot"),
        Err(RestoreError::Decode(DecodeError::UnknownFormat))
    ));
    assert!(matches!(
        strand_machine::restore_from_slice(b" {\"buckets\": 3}"),
        Err(RestoreError::Decode(DecodeError::Json(_)))
    ));
    let json = written(&small_machine(), SnapshotFormat::Json);
    let text = String::from_utf8(json).unwrap();
    let missing_bucket = text.replacen("\"buckets\":[\"alpha\",", "\"buckets\":[", 1);
    assert_ne!(missing_bucket, text, "the small machine has bucket alpha");
    assert!(matches!(
        strand_machine::restore_from_slice(missing_bucket.as_bytes()),
        Err(RestoreError::Invalid(_))
    ));
}
