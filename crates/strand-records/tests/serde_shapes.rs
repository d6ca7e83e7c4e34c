//! Serde shapes of spec 01 §11.1 / 02 §2.1, with insta snapshots.
#![allow(clippy::unwrap_used)]

use strand_records::{RecordIndexError, StreamRecordIndex, StreamRecordRange};

fn json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap()
}

#[test]
fn empty_index_shape() {
    let text = json(&StreamRecordIndex::new());
    assert_eq!(text, r#"{"first_record":0,"record_offsets":[]}"#);
    insta::assert_snapshot!("index_empty", text);
}

#[test]
fn non_empty_index_shape() {
    let index = StreamRecordIndex::restore(2, vec![18], 18, 27).unwrap();
    let text = json(&index);
    assert_eq!(text, r#"{"first_record":2,"record_offsets":[18]}"#);
    insta::assert_snapshot!("index_non_empty", text);
    let large = StreamRecordIndex::restore(u64::MAX - 3, vec![0, 8, 16], 0, 24).unwrap();
    insta::assert_snapshot!("index_large", json(&large));
}

#[test]
fn index_decoding_requires_both_fields_and_ignores_unknown_ones() {
    let index: StreamRecordIndex =
        serde_json::from_str(r#"{"extra":true,"record_offsets":[18],"first_record":2}"#).unwrap();
    assert_eq!(
        index,
        StreamRecordIndex::restore(2, vec![18], 18, 27).unwrap()
    );
    assert!(serde_json::from_str::<StreamRecordIndex>(r#"{"first_record":0}"#).is_err());
    assert!(serde_json::from_str::<StreamRecordIndex>(r#"{"record_offsets":[]}"#).is_err());
    assert!(
        serde_json::from_str::<StreamRecordIndex>(r#"{"first_record":-1,"record_offsets":[]}"#)
            .is_err()
    );
    assert!(
        serde_json::from_str::<StreamRecordIndex>(r#"{"first_record":"1","record_offsets":[]}"#)
            .is_err()
    );
    // Decoding does not validate.
    let unsorted: StreamRecordIndex =
        serde_json::from_str(r#"{"first_record":0,"record_offsets":[9,3]}"#).unwrap();
    assert_eq!(unsorted.record_offsets(), &[9, 3]);
}

#[test]
fn record_index_error_shapes() {
    let cases = [
        (
            RecordIndexError::InvalidBoundaries,
            r#""InvalidBoundaries""#,
        ),
        (
            RecordIndexError::ArithmeticOverflow,
            r#""ArithmeticOverflow""#,
        ),
        (
            RecordIndexError::RecordGone {
                first_record: 1,
                next_record: 2,
            },
            r#"{"RecordGone":{"first_record":1,"next_record":2}}"#,
        ),
        (
            RecordIndexError::RecordBeyondTail { next_record: 2 },
            r#"{"RecordBeyondTail":{"next_record":2}}"#,
        ),
        (
            RecordIndexError::OffsetNotRecordBoundary,
            r#""OffsetNotRecordBoundary""#,
        ),
    ];
    let mut all = Vec::new();
    for (error, expected) in cases {
        let text = json(&error);
        assert_eq!(text, expected);
        assert_eq!(
            serde_json::from_str::<RecordIndexError>(&text).unwrap(),
            error
        );
        all.push(text);
    }
    insta::assert_snapshot!("record_index_error_variants", all.join("\n"));
}

#[test]
fn record_index_error_decoding_forms() {
    assert_eq!(
        serde_json::from_str::<RecordIndexError>(r#"{"InvalidBoundaries":null}"#).unwrap(),
        RecordIndexError::InvalidBoundaries
    );
    assert!(serde_json::from_str::<RecordIndexError>(r#""RecordGone""#).is_err());
    assert!(serde_json::from_str::<RecordIndexError>(r#""Unknown""#).is_err());
}

#[test]
fn record_range_is_the_model_type() {
    let range = StreamRecordRange {
        first_record: 1,
        next_record: 2,
    };
    assert_eq!(json(&range), r#"{"first_record":1,"next_record":2}"#);
}
