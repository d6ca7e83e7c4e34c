//! Legacy and hand-made snapshots (spec 07 §8): every fixture of
//! `tests/fixtures/legacy/` is decoded and restored, and its outcome is
//! pinned as an insta snapshot (`snapshots/legacy__<fixture>.snap`):
//!
//! - restorable: the restored machine's re-snapshot (pretty JSON, arrays of
//!   scalars folded onto one line) plus its hot-payload gauge;
//! - rejected by restore: the exact `StreamSnapshotError` Display text
//!   (spec 07 §4) and the variant;
//! - rejected at JSON decode: the serde message without its position.
//!
//! Every restorable fixture must also be P1-stable (restoring its
//! re-snapshot gives the same snapshot again) and round-trip through both
//! snapshot codecs (`write_snapshot` + `restore_from`, JSON and binary).
//! Every decodable fixture, as written, is also encoded in the binary format
//! and fed to `restore_from`, which must reach the same outcome as `restore`
//! (the same machine, or the same `StreamSnapshotError`).
//! `cargo xtask legacy` runs this file.

#![allow(clippy::unwrap_used)]

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};

use strand::{StreamSnapshot, StreamSnapshotError, StreamStateMachine};
use strand_machine::{RestoreError, restore_from, write_snapshot};
use strand_snapshot::{SnapshotFormat, encode_binary};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/legacy")
}

/// Every `*.json` fixture, sorted by file name: `(stem, text)`.
fn fixtures() -> Vec<(String, String)> {
    let dir = fixtures_dir();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

/// What happened to one fixture.
enum Outcome {
    Restored(Box<StreamStateMachine>),
    Rejected(StreamSnapshotError),
    Undecodable(String),
}

/// Decodes and restores one fixture; also returns the decoded input.
fn outcome(text: &str) -> (Option<StreamSnapshot>, Outcome) {
    let snapshot: StreamSnapshot = match serde_json::from_str(text) {
        Ok(s) => s,
        Err(e) => return (None, Outcome::Undecodable(decode_message(&e))),
    };
    let outcome = match StreamStateMachine::restore(snapshot.clone()) {
        Ok(m) => Outcome::Restored(Box::new(m)),
        Err(e) => Outcome::Rejected(e),
    };
    (Some(snapshot), outcome)
}

/// serde_json's message without the ` at line L column C` suffix, which
/// would make the pinned text depend on the fixture's layout.
fn decode_message(e: &serde_json::Error) -> String {
    let full = e.to_string();
    match full.rfind(" at line ") {
        Some(at) => full[..at].to_owned(),
        None => full,
    }
}

/// Pretty JSON with every array of scalars (payload bytes, ids, offsets)
/// folded onto one line, so the pinned snapshots stay reviewable.
fn folded_pretty(snapshot: &StreamSnapshot) -> String {
    let pretty = serde_json::to_string_pretty(snapshot).unwrap();
    let lines: Vec<&str> = pretty.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.ends_with('[') {
            let mut j = i + 1;
            let mut items = Vec::new();
            while j < lines.len() {
                let t = lines[j].trim();
                if t.starts_with(']') {
                    break;
                }
                if t.starts_with('{') || t.starts_with('[') || t.ends_with('{') || t.ends_with('[')
                {
                    items.clear();
                    j = lines.len();
                    break;
                }
                items.push(t.trim_end_matches(','));
                j += 1;
            }
            if j < lines.len() && !items.is_empty() {
                let close = lines[j].trim();
                out.push(format!("{line}{}{close}", items.join(", ")));
                i = j + 1;
                continue;
            }
        }
        out.push(line.to_owned());
        i += 1;
    }
    let folded = out.join("\n");
    let back: StreamSnapshot = serde_json::from_str(&folded).unwrap();
    assert_eq!(&back, snapshot, "folding changed the JSON");
    folded
}

/// The checks of one restorable fixture besides its insta snapshot.
fn check_restored(name: &str, machine: &StreamStateMachine) -> StreamSnapshot {
    let snapshot = machine.snapshot();

    // P1: the re-snapshot restores to itself (spec 07 §7).
    let again = StreamStateMachine::restore(snapshot.clone())
        .unwrap_or_else(|e| panic!("{name}: re-snapshot does not restore: {e}"));
    assert_eq!(again.snapshot(), snapshot, "{name}: re-snapshot not stable");
    assert_eq!(
        again.total_hot_payload_bytes(),
        machine.total_hot_payload_bytes(),
        "{name}: hot gauge not stable"
    );

    // JSON round trip of the re-snapshot.
    let json = serde_json::to_string(&snapshot).unwrap();
    let decoded: StreamSnapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(decoded, snapshot, "{name}: JSON round trip");

    // Both codecs: write the machine, restore it, compare.
    for format in [SnapshotFormat::Binary, SnapshotFormat::Json] {
        let mut buf = Vec::new();
        write_snapshot(machine, format, &mut buf)
            .unwrap_or_else(|e| panic!("{name}: write_snapshot({format}): {e}"));
        if format == SnapshotFormat::Json {
            assert_eq!(buf, json.as_bytes(), "{name}: write_snapshot(json) bytes");
        }
        let back = restore_from(&buf[..])
            .unwrap_or_else(|e| panic!("{name}: restore_from({format}): {e}"));
        assert_eq!(back.snapshot(), snapshot, "{name}: {format} round trip");
        assert_eq!(
            back.total_hot_payload_bytes(),
            machine.total_hot_payload_bytes(),
            "{name}: {format} round trip hot gauge"
        );
    }
    snapshot
}

/// The fixture as written (legacy shape included), encoded in the binary
/// format and restored by the streaming `restore_from`: it must agree with
/// `StreamStateMachine::restore` on the same input.
fn check_binary_restore_agrees(name: &str, input: &StreamSnapshot, outcome: &Outcome) {
    let head = StreamSnapshot {
        streams: Vec::new(),
        ..input.clone()
    };
    let mut buf = Vec::new();
    encode_binary(&mut buf, &head, &input.streams)
        .unwrap_or_else(|e| panic!("{name}: encode_binary: {e}"));
    match (restore_from(&buf[..]), outcome) {
        (Ok(back), Outcome::Restored(machine)) => {
            assert_eq!(
                back.snapshot(),
                machine.snapshot(),
                "{name}: binary restore"
            );
        }
        (Err(RestoreError::Invalid(got)), Outcome::Rejected(want)) => {
            assert_eq!(&got, want, "{name}: binary restore error");
        }
        (Ok(_), _) => panic!("{name}: binary restore succeeded, restore did not"),
        (Err(e), _) => panic!("{name}: binary restore failed: {e}"),
    }
}

fn pinned_text(name: &str, outcome: &Outcome) -> String {
    match outcome {
        Outcome::Restored(machine) => {
            let snapshot = check_restored(name, machine);
            format!(
                "restored; total_hot_payload_bytes {}\n{}",
                machine.total_hot_payload_bytes(),
                folded_pretty(&snapshot)
            )
        }
        Outcome::Rejected(e) => format!("restore error: {e}\nvariant: {e:?}"),
        Outcome::Undecodable(message) => format!("decode error: {message}"),
    }
}

#[test]
fn legacy_fixtures() {
    let fixtures = fixtures();
    assert!(
        !fixtures.is_empty(),
        "no fixtures in {}",
        fixtures_dir().display()
    );
    let (mut restored, mut rejected, mut undecodable) = (0usize, 0usize, 0usize);
    let mut failed = Vec::new();
    for (name, text) in &fixtures {
        let (input, outcome) = outcome(text);
        match &outcome {
            Outcome::Restored(_) => restored += 1,
            Outcome::Rejected(_) => rejected += 1,
            Outcome::Undecodable(_) => undecodable += 1,
        }
        let checked = catch_unwind(AssertUnwindSafe(|| {
            // The file-name prefix states the expected kind of outcome.
            if name.starts_with("error-") {
                assert!(
                    matches!(outcome, Outcome::Rejected(_)),
                    "{name}: expected a restore error"
                );
            } else if name.starts_with("decode-") {
                assert!(
                    matches!(outcome, Outcome::Undecodable(_)),
                    "{name}: expected a decode error"
                );
            }
            if let Some(input) = &input {
                check_binary_restore_agrees(name, input, &outcome);
            }
            let text = pinned_text(name, &outcome);
            let mut settings = insta::Settings::clone_current();
            settings.set_description(format!("tests/fixtures/legacy/{name}.json"));
            settings.set_omit_expression(true);
            settings.bind(|| insta::assert_snapshot!(name.as_str(), text));
        }));
        if checked.is_err() {
            failed.push(name.clone());
        }
    }
    println!(
        "legacy: {} fixtures checked ({restored} restorable, {rejected} errors, {undecodable} decode failures)",
        fixtures.len()
    );
    assert!(failed.is_empty(), "legacy fixtures failed: {failed:?}");
}

fn restore_fixture(name: &str) -> Result<StreamStateMachine, StreamSnapshotError> {
    let path = fixtures_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    let snapshot: StreamSnapshot = serde_json::from_str(&text).unwrap();
    StreamStateMachine::restore(snapshot)
}

/// Each error fixture gives exactly the §4 Display text of its variant;
/// the expected texts are written from the spec, not from the output.
#[test]
fn error_fixtures_give_the_spec_display_texts() {
    let expected = [
        (
            "error-duplicate-bucket",
            "snapshot contains duplicate bucket 'acme'",
        ),
        (
            "error-duplicate-erased-bucket",
            "snapshot contains duplicate erased bucket 'gone'",
        ),
        (
            "error-active-bucket-erased",
            "snapshot bucket 'beta' is both active and erased",
        ),
        (
            "error-duplicate-stream",
            "snapshot contains duplicate stream 'acme/s'",
        ),
        (
            "error-duplicate-producer",
            "snapshot stream 'acme/s' contains duplicate producer 'writer-1'",
        ),
        (
            "error-missing-bucket",
            "snapshot stream 'gone/s' references a missing bucket",
        ),
        (
            "error-payload-length-mismatch",
            "snapshot stream 'acme/s' tail offset 2 does not match payload length 1",
        ),
        (
            "error-message-boundary-mismatch",
            "snapshot stream 'acme/s' has inconsistent message boundaries",
        ),
        (
            "error-record-boundary-mismatch",
            "snapshot stream 'acme/s' has inconsistent record boundaries",
        ),
        (
            "error-integrity-mismatch",
            "snapshot stream 'acme/s' has inconsistent integrity setsums",
        ),
        (
            "error-snapshot-offset-out-of-range",
            "snapshot stream 'acme/s' visible snapshot offset 3 is beyond tail offset 2",
        ),
        (
            "error-snapshot-offset-out-of-range-retained",
            "snapshot stream 'acme/s' visible snapshot offset 9 is beyond tail offset 2",
        ),
    ];
    let mut on_disk: Vec<String> = fixtures()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|n| n.starts_with("error-"))
        .collect();
    on_disk.sort();
    let listed: Vec<String> = expected.iter().map(|(n, _)| (*n).to_owned()).collect();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(on_disk, sorted, "every error fixture has an expected text");
    for (name, text) in expected {
        match restore_fixture(name) {
            Ok(_) => panic!("{name}: restored, expected `{text}`"),
            Err(e) => assert_eq!(e.to_string(), text, "{name}"),
        }
    }
}

/// The restored state of spec 07 §8.2–§8.4, checked field by field against
/// the spec's text (independently of the pinned snapshots).
#[test]
fn spec_examples_restore_as_section_8_says() {
    use strand::{BucketUsage, HotPayloadSegment, ProducerReceipt};

    // Example A: oldest accepted shape.
    let a = restore_fixture("spec-example-a").unwrap();
    assert_eq!(a.total_hot_payload_bytes(), 5);
    let snap = a.snapshot();
    assert!(snap.erased_buckets.is_empty());
    let e = &snap.streams[0];
    assert_eq!(
        e.hot_segments,
        vec![HotPayloadSegment {
            start_offset: 0,
            end_offset: 5,
            payload_start: 0,
            payload_end: 5
        }]
    );
    assert_eq!(e.payload, b"hello");
    assert_eq!(e.retained_offset, Some(0));
    assert_eq!(e.cold_frontier_offset, 0);
    assert_eq!(e.attrs, None);
    assert_eq!(e.record_index, None);
    assert_eq!(e.visible_snapshot, None);
    let p1 = &e.producer_states[0];
    assert_eq!(
        p1.receipts,
        vec![ProducerReceipt {
            producer_seq: 7,
            start_offset: 2,
            next_offset: 5,
            closed: false,
            items: p1.last_items.clone(),
        }]
    );
    assert_eq!(p1.last_items[0].record_start, None);
    assert_eq!(p1.last_items[0].record_next, None);
    assert_eq!(snap.bucket_usage.len(), 1);
    assert_eq!(
        snap.bucket_usage[0].usage,
        BucketUsage {
            committed_append_bytes: 5,
            committed_records: 0,
            committed_write_units: 0,
            retained_bytes: 5,
            stream_count: 1,
        }
    );
    assert!(snap.pending_cold_gc.is_empty());
    assert_eq!(snap.next_cold_gc_seq, 0);
    assert!(snap.bucket_quotas.is_empty());
    assert!(snap.shared_cold_object_owners.is_empty());

    // Example B: retained offset from the visible snapshot, digest filled.
    let b = restore_fixture("spec-example-b").unwrap();
    let snap = b.snapshot();
    let e = &snap.streams[0];
    assert_eq!(e.retained_offset, Some(3));
    assert_eq!(e.cold_frontier_offset, 3);
    assert_eq!(e.integrity.live_start_offset, 3);
    assert_eq!(
        e.hot_segments,
        vec![HotPayloadSegment {
            start_offset: 3,
            end_offset: 5,
            payload_start: 0,
            payload_end: 2
        }]
    );
    assert_eq!(
        e.visible_snapshot.as_ref().unwrap().digest,
        "a8e77ad0200c3d91cb1062a5ee44d523f5b458efa4639a671b4c1421a3f27f37"
    );
    assert_eq!(
        snap.bucket_usage[0].usage,
        BucketUsage {
            committed_append_bytes: 2,
            committed_records: 0,
            committed_write_units: 0,
            retained_bytes: 2,
            stream_count: 1,
        }
    );

    // Example C: tiered legacy stream.
    let c = restore_fixture("spec-example-c").unwrap();
    assert_eq!(c.total_hot_payload_bytes(), 3);
    let snap = c.snapshot();
    let e = &snap.streams[0];
    assert_eq!(e.cold_frontier_offset, 3);
    assert_eq!(e.retained_offset, Some(0));
    assert_eq!(e.cold_chunks[0].payload_digest, "");
    assert_eq!(e.external_segments[0].object_offset, 0);
    assert_eq!(snap.shared_cold_object_owners.len(), 1);
    assert_eq!(snap.shared_cold_object_owners[0].s3_path, "_packs/p1.bin");
    assert_eq!(snap.shared_cold_object_owners[0].bucket_ids, ["acme"]);
    assert_eq!(snap.pending_cold_gc.len(), 1);
    assert_eq!(snap.pending_cold_gc[0].seq, 4);
    assert_eq!(snap.pending_cold_gc[0].bucket_id, "");
    assert_eq!(snap.pending_cold_gc[0].not_before_ms, 0);
    assert_eq!(snap.next_cold_gc_seq, 5);
    assert_eq!(
        snap.bucket_usage[0].usage,
        BucketUsage {
            committed_append_bytes: 12,
            committed_records: 9,
            committed_write_units: 3,
            retained_bytes: 12,
            stream_count: 1,
        }
    );
    assert_eq!(snap.bucket_quotas.len(), 1);
    assert_eq!(snap.bucket_quotas[0].bucket_id, "ghost");
    assert_eq!(snap.bucket_quotas[0].quota.max_streams, Some(4));
    assert_eq!(snap.bucket_quotas[0].quota.max_retained_bytes, None);
}

/// The complete modern fixture is a fixed point: restoring it and taking a
/// snapshot gives the input back exactly (spec 07 §7 P1), so every
/// `absent-*` fixture differs from a known-good state by its one field.
#[test]
fn modern_fixture_is_a_fixed_point() {
    let path = fixtures_dir().join("modern-complete.json");
    let text = std::fs::read_to_string(path).unwrap();
    let input: StreamSnapshot = serde_json::from_str(&text).unwrap();
    let restored = StreamStateMachine::restore(input.clone()).unwrap();
    assert_eq!(restored.snapshot(), input);
}
