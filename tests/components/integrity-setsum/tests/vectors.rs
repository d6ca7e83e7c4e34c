//! `strand-integrity` alone against the integrity vectors of spec 02 §7.7
//! (hex values produced by the reference implementation, not by strand).

#![allow(clippy::unwrap_used)]

use component_integrity_setsum::{Append, StreamName, recompute};

fn name<'a>(bucket: &'a str, affinity: Option<&'a str>, stream: &'a str) -> StreamName<'a> {
    StreamName {
        bucket,
        affinity,
        stream,
    }
}

#[test]
fn two_inline_appends() {
    // §7.7 vector 2: `bench/s`, `abc` at [0,3) then `de` at [3,5).
    let (setsum, records) = recompute(
        name("bench", None, "s"),
        &[Append::Inline(b"abc"), Append::Inline(b"de")],
    );
    assert_eq!(
        setsum,
        "edee1747b72313c7ae781949b0c44ca1904d18f24c07a65bea0aa59789086714"
    );
    assert_eq!(records, 2);
    // One item alone: the item's SHA3-256 (§7.7 vector 2).
    let (setsum, _) = recompute(name("bench", None, "s"), &[Append::Inline(b"abc")]);
    assert_eq!(
        setsum,
        "daa92f5af4135f2c54bd39f22423ce87cf6a057bd5fc42a67e610c1c9e6ff935"
    );
}

#[test]
fn a_stream_with_an_affinity_key() {
    // §7.7 vector 3: `bench/run-1/q` created with `hello`.
    let (setsum, records) = recompute(
        name("bench", Some("run-1"), "q"),
        &[Append::Inline(b"hello")],
    );
    assert_eq!(
        setsum,
        "9be26d3c0ad4c279f0a75d06ebea60aa1881353652e2f28718459873eaead217"
    );
    assert_eq!(records, 1);
}

#[test]
fn an_external_append() {
    // §7.7 vector 4: `bench/ext`, object `obj/1`, 4 bytes of a 10-byte object.
    let (setsum, records) = recompute(
        name("bench", None, "ext"),
        &[Append::External {
            s3_path: "obj/1",
            payload_len: 4,
            object_size: 10,
        }],
    );
    assert_eq!(
        setsum,
        "4a99f36b1746c3c669ad57abfa72eff262b779b801e4adc033cd31ea5c391912"
    );
    assert_eq!(records, 1);
}

#[test]
fn a_json_create_is_one_item() {
    // §7.7 vector 5: `bench/j` created with two JSON lines in one payload.
    let (setsum, records) = recompute(
        name("bench", None, "j"),
        &[Append::Inline(b"{\"a\":1}\n{\"b\":2}\n")],
    );
    assert_eq!(
        setsum,
        "4b0c8e76d2b7efbe6a458e9adb1699c9e6a8c8e9633b460f5e345b96fba1f0d5"
    );
    assert_eq!(records, 1);
}

#[test]
fn the_stream_name_enters_the_setsum() {
    let appends = [Append::Inline(b"abc"), Append::Inline(b"de")];
    let (forward, _) = recompute(name("bench", None, "s"), &appends);
    let (other_stream, _) = recompute(name("bench", None, "t"), &appends);
    assert_ne!(forward, other_stream);
    let (empty, records) = recompute(name("bench", None, "s"), &[]);
    assert_eq!(empty, "0".repeat(64));
    assert_eq!(records, 0);
}
