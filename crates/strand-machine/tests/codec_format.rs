//! The exact bytes of both snapshot encodings of a small machine, as
//! reviewed snapshots: any format change shows up as a diff here.

#![allow(clippy::unwrap_used)]

use crate::codec_common;

use codec_common::{hexdump, small_machine};
use strand_machine::write_snapshot;
use strand_snapshot::SnapshotFormat;

#[test]
fn small_machine_binary_hexdump() {
    let machine = small_machine();
    let snap = machine.snapshot();
    // The shape the snapshot is meant to have (2 buckets, 2 streams, a
    // producer, a JSON stream with a record index, a GC entry, a quota).
    assert_eq!(snap.buckets, ["alpha", "beta"]);
    assert_eq!(snap.streams.len(), 2);
    assert_eq!(snap.streams[0].producer_states.len(), 1);
    assert!(snap.streams[1].record_index.is_some());
    assert_eq!(snap.pending_cold_gc.len(), 1);
    assert_eq!(snap.bucket_quotas.len(), 1);

    let mut bytes = Vec::new();
    write_snapshot(&machine, SnapshotFormat::Binary, &mut bytes).unwrap();
    insta::assert_snapshot!(hexdump(&bytes));
}

#[test]
fn small_machine_json_text() {
    let machine = small_machine();
    let mut bytes = Vec::new();
    write_snapshot(&machine, SnapshotFormat::Json, &mut bytes).unwrap();
    assert_eq!(bytes, serde_json::to_vec(&machine.snapshot()).unwrap());
    insta::assert_snapshot!(String::from_utf8(bytes).unwrap());
}

#[test]
fn hexdump_layout() {
    let dump = hexdump(b"\x89STRSNAP\x01\x00\x00\x00\x02abcdefghijklmnopq");
    assert_eq!(
        dump,
        "00000000  89 53 54 52 53 4e 41 50  01 00 00 00 02 61 62 63  |.STRSNAP.....abc|\n\
         00000010  64 65 66 67 68 69 6a 6b  6c 6d 6e 6f 70 71        |defghijklmnopq|\n"
    );
}

/// The bytes of a hexdump made by [`hexdump`].
fn unhex(dump: &str) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in dump.lines() {
        let Some(hex) = line.get(10..58) else {
            continue;
        };
        if !line.as_bytes()[..8].iter().all(u8::is_ascii_hexdigit) {
            continue;
        }
        for pair in hex.split_whitespace() {
            bytes.push(u8::from_str_radix(pair, 16).unwrap());
        }
    }
    bytes
}

/// The reviewed binary snapshot above was recorded before machine profiles
/// existed (commit 0a98b59): it must still decode, as the reference profile,
/// into the same state; and re-encoding it gives the same bytes.
#[test]
fn a_binary_file_from_before_profiles_still_reads() {
    let recorded =
        include_str!("snapshots/machine__codec_format__small_machine_binary_hexdump.snap");
    let body = recorded.splitn(3, "---\n").nth(2).unwrap();
    let bytes = unhex(body);
    assert_eq!(hexdump(&bytes), body);
    let machine = strand_machine::restore_from_slice(&bytes).unwrap();
    assert_eq!(machine.profile(), strand_model::MachineProfile::Reference);
    assert_eq!(machine.snapshot(), small_machine().snapshot());
    let mut again = Vec::new();
    write_snapshot(&machine, SnapshotFormat::Binary, &mut again).unwrap();
    assert_eq!(again, bytes);
}
