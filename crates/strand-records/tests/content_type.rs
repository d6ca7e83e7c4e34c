//! Spec 02 §7.1, §7.2 and the capability / append cases of §7.9.
#![allow(clippy::unwrap_used)]

use strand_records::{RecordIndexError, canonical_json_record_ends, is_json_record_content_type};

#[test]
fn json_content_types_from_7_1() {
    for content_type in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "APPLICATION/Json",
        "\tapplication/json\t; charset=x",
        "\napplication/json\r\n",
        "\u{a0}application/json",
        "application/json\u{2003};q",
        "application/json;",
    ] {
        assert!(
            is_json_record_content_type(content_type),
            "{content_type:?}"
        );
    }
}

#[test]
fn non_json_content_types_from_7_1() {
    for content_type in [
        "application/x-ndjson",
        "application/vnd.api+json",
        "application/octet-stream",
        "text/plain",
        "application/json,text/plain",
        "application/ json",
        ";application/json",
        "",
        " ",
        "\u{feff}application/json",
        "application/json\0",
    ] {
        assert!(
            !is_json_record_content_type(content_type),
            "{content_type:?}"
        );
    }
}

#[test]
fn parameters_after_the_first_semicolon_are_ignored_whatever_they_hold() {
    assert!(is_json_record_content_type(
        "application/json;;;\u{feff}x;application/xml"
    ));
    // Only ASCII case folds: a Kelvin sign or dotted capital I is not ASCII.
    assert!(!is_json_record_content_type("application/\u{212a}son"));
    assert!(!is_json_record_content_type("appl\u{130}cation/json"));
}

#[test]
fn capability_cases_of_the_coordinate_fixture() {
    for active in [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
    ] {
        assert!(is_json_record_content_type(active), "{active}");
    }
    for inactive in [
        "application/x-ndjson",
        "application/octet-stream",
        "text/plain",
    ] {
        assert!(!is_json_record_content_type(inactive), "{inactive}");
    }
}

#[test]
fn canonical_ends_from_7_2() {
    assert_eq!(
        canonical_json_record_ends("application/json; charset=utf-8", b"{\"a\":1}\n{\"b\":2}\n"),
        Ok(vec![8, 16])
    );
    assert_eq!(
        canonical_json_record_ends("application/octet-stream", b"x"),
        Ok(vec![])
    );
    assert_eq!(
        canonical_json_record_ends("application/jsonx", b"{}"),
        Ok(vec![])
    );
    assert_eq!(
        canonical_json_record_ends(";application/json", b"{}"),
        Ok(vec![])
    );
    assert_eq!(
        canonical_json_record_ends("application/json", b"{}"),
        Err(RecordIndexError::InvalidBoundaries)
    );
    assert_eq!(
        canonical_json_record_ends("application/json", b""),
        Ok(vec![])
    );
    assert_eq!(
        canonical_json_record_ends(" application/json ;x", b"\n"),
        Ok(vec![1])
    );
    assert_eq!(
        canonical_json_record_ends("application/json", b"a\nb\n\n"),
        Ok(vec![2, 4, 5])
    );
}

#[test]
fn canonical_ends_never_parse_json_and_ignore_payload_of_other_types() {
    // `{` followed by a newline is one record; the JSON is never parsed.
    assert_eq!(
        canonical_json_record_ends("application/json", b"{\n"),
        Ok(vec![2])
    );
    assert_eq!(
        canonical_json_record_ends("application/json", b"\n\n"),
        Ok(vec![1, 2])
    );
    // Non-JSON: not even the trailing-newline rule applies.
    assert_eq!(
        canonical_json_record_ends("text/plain", b"a\nb"),
        Ok(vec![])
    );
    assert_eq!(canonical_json_record_ends("", b"\n"), Ok(vec![]));
}

#[test]
fn gateway_canonical_bytes_of_the_append_cases() {
    // (canonical bytes, canonical ends) of each successful fixture case.
    let cases: [(&[u8], &[u64]); 5] = [
        (b"{\"type\":\"navigation_started\"}\n", &[30]),
        (
            b"{\"type\":\"console\"}\n{\"type\":\"network\"}\n",
            &[19, 38],
        ),
        (b"[1,2,3]\n", &[8]),
        (b"42\n", &[3]),
        (b"", &[]),
    ];
    for (bytes, ends) in cases {
        let got = canonical_json_record_ends("application/json", bytes).unwrap();
        assert_eq!(got, ends, "{}", String::from_utf8_lossy(bytes));
        if let Some(&last) = got.last() {
            assert_eq!(last, bytes.len() as u64);
        }
    }
}
