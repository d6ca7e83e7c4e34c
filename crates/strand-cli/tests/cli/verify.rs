//! `strand snapshot verify`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use strand::{SnapshotFormat, StreamSnapshot, StreamStateMachine};
use strand::{decode_json, encode_binary};

use crate::common::*;

fn len(v: &Value) -> u64 {
    v.as_array().map_or(0, |a| a.len() as u64)
}

/// The counts line expected for a snapshot, computed from its JSON value.
fn expected_counts(snapshot: &Value) -> String {
    let streams = snapshot["streams"].as_array().unwrap();
    let hot: u64 = streams.iter().map(|s| len(&s["payload"])).sum();
    let producers: u64 = streams.iter().map(|s| len(&s["producer_states"])).sum();
    format!(
        "{} buckets, {} streams, {hot} bytes hot, {producers} producers, {} pending GC entries",
        len(&snapshot["buckets"]),
        streams.len(),
        len(&snapshot["pending_cold_gc"])
    )
}

/// Runs `verify` on `files` and returns (exit code, stdout lines).
fn verify(files: &[PathBuf]) -> (i32, Vec<String>) {
    let output = strand()
        .args(["snapshot", "verify"])
        .args(files)
        .output()
        .unwrap();
    let lines = stdout_of(&output).lines().map(str::to_owned).collect();
    (output.status.code().unwrap(), lines)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn gives_restores_verdict_on_every_snapshot_the_reference_wrote() {
    // Every `snapshot` step of the corpus holds `machine.snapshot()` as
    // the reference wrote it (keys sorted by the trace writer). Nearly all
    // restore; a few hit spec 07 P3 (a reachable state whose snapshot does
    // not restore) and must be reported with restore's error.
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut expected = Vec::new();
    for (name, trace) in load_traces() {
        for (i, step) in steps(&trace).iter().enumerate() {
            if step["op"] == "snapshot" {
                let text = serde_json::to_vec(&step["snapshot"]).unwrap();
                let path = write(dir.path(), &format!("{name}-{i}.json"), &text);
                let snapshot: StreamSnapshot = serde_json::from_slice(&text).unwrap();
                expected.push(match StreamStateMachine::restore(snapshot) {
                    Ok(_) => Ok(format!(
                        "{}: ok (json): {}",
                        path.display(),
                        expected_counts(&step["snapshot"])
                    )),
                    Err(e) => Err((
                        format!("{}: invalid (json): streams[", path.display()),
                        format!(": snapshot failed validation: {e}"),
                    )),
                });
                files.push(path);
            }
        }
    }
    let valid = expected.iter().filter(|e| e.is_ok()).count();
    assert!(valid > 700, "only {valid} of {} restore", expected.len());
    assert!(valid < expected.len(), "the corpus has P3 snapshots");
    let (code, lines) = verify(&files);
    assert_eq!(lines.len(), files.len() + 1);
    for (line, expected) in lines.iter().zip(&expected) {
        match expected {
            Ok(ok) => assert_eq!(line, ok),
            Err((start, end)) => {
                assert!(
                    line.starts_with(start) && line.ends_with(end),
                    "{line}\n{end}"
                );
            }
        }
    }
    assert_eq!(
        lines.last().unwrap(),
        &format!("{valid} of {} snapshots valid", files.len())
    );
    assert_eq!(code, 1);
}

/// Every `restore` step: the snapshot given to restore and restore's
/// result, `{"Ok": null}` or `{"Err": "<Display>"}`.
fn restore_steps() -> Vec<(String, Value, Option<String>)> {
    let mut cases = Vec::new();
    for (name, trace) in load_traces() {
        for (i, step) in steps(&trace).iter().enumerate() {
            if step["op"] == "restore" {
                let error = step["result"]["Err"].as_str().map(str::to_owned);
                cases.push((format!("{name}-{i}"), step["snapshot"].clone(), error));
            }
        }
    }
    assert!(
        cases.iter().filter(|c| c.2.is_some()).count() > 50,
        "too few failing restores"
    );
    cases
}

/// Checks verify's line for each case against the reference's restore
/// result, in `format`.
fn check_restore_results(format: SnapshotFormat) {
    let dir = tempfile::tempdir().unwrap();
    let cases = restore_steps();
    let mut files = Vec::new();
    for (name, snapshot, _) in &cases {
        let bytes = match format {
            SnapshotFormat::Json => serde_json::to_vec(snapshot).unwrap(),
            SnapshotFormat::Binary => {
                let snapshot: StreamSnapshot = serde_json::from_value(snapshot.clone()).unwrap();
                let mut bytes = Vec::new();
                encode_binary(&mut bytes, &snapshot, &snapshot.streams).unwrap();
                bytes
            }
        };
        files.push(write(dir.path(), &format!("{name}.{format}"), &bytes));
    }
    let (code, lines) = verify(&files);
    assert_eq!(lines.len(), cases.len() + 1);
    for ((path, (_, _, error)), line) in files.iter().zip(&cases).zip(&lines) {
        match error {
            None => {
                let ok = format!("{}: ok ({format}): ", path.display());
                assert!(line.starts_with(&ok), "{line}");
            }
            Some(message) => {
                let invalid = format!("{}: invalid ({format}): ", path.display());
                assert!(line.starts_with(&invalid), "{line}");
                let tail = format!(": snapshot failed validation: {message}");
                assert!(
                    line.ends_with(&tail),
                    "{line}\nexpected the reference's {message:?}"
                );
            }
        }
    }
    assert_eq!(code, 1);
}

#[test]
fn reports_the_reference_restore_error_for_every_json_restore_step() {
    check_restore_results(SnapshotFormat::Json);
}

#[test]
fn reports_the_reference_restore_error_for_every_binary_restore_step() {
    check_restore_results(SnapshotFormat::Binary);
}

#[test]
fn valid_files_in_both_codecs_exit_0() {
    let dir = tempfile::tempdir().unwrap();
    let machine = sample_machine();
    let json = write(
        dir.path(),
        "s.json",
        &snapshot_bytes(&machine, SnapshotFormat::Json),
    );
    let binary = write(
        dir.path(),
        "s.bin",
        &snapshot_bytes(&machine, SnapshotFormat::Binary),
    );
    let (code, lines) = verify(&[json.clone(), binary.clone()]);
    assert_eq!(
        lines,
        [
            format!("{}: ok (json): {SAMPLE_COUNTS}", json.display()),
            format!("{}: ok (binary): {SAMPLE_COUNTS}", binary.display()),
            "2 of 2 snapshots valid".to_owned(),
        ]
    );
    assert_eq!(code, 0);

    // One file: no total line.
    let (code, lines) = verify(std::slice::from_ref(&binary));
    assert_eq!(lines.len(), 1);
    assert_eq!(code, 0);
}

#[test]
fn damaged_binary_files_report_the_exact_decode_error() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = snapshot_bytes(&sample_machine(), SnapshotFormat::Binary);
    // The file header is 12 bytes and frame 0 (buckets) starts right
    // after it; its 25-byte header ends at byte 37 (docs/snapshot-format.md).
    let mut flipped = bytes.clone();
    flipped[40] ^= 0x01;
    let mut trailing = bytes.clone();
    trailing.push(0);
    let cases: [(&str, Vec<u8>, &str); 6] = [
        (
            "header.bin",
            bytes[..10].to_vec(),
            "binary snapshot truncated inside its file header (10 of 12 bytes)",
        ),
        (
            "no-frames.bin",
            bytes[..12].to_vec(),
            "binary snapshot truncated: input ends before frame 0 at byte 12",
        ),
        (
            "frame-header.bin",
            bytes[..20].to_vec(),
            "binary snapshot truncated: input ends inside the header of frame 0 (buckets) at byte 12",
        ),
        (
            "half.bin",
            bytes[..bytes.len() / 2].to_vec(),
            "binary snapshot truncated: input ends inside the ",
        ),
        (
            "flipped.bin",
            flipped,
            "frame 0 (buckets, at byte 12): checksum mismatch",
        ),
        (
            "trailing.bin",
            trailing,
            &format!(
                "binary snapshot has trailing bytes after the footer, at byte {}",
                bytes.len()
            ),
        ),
    ];
    for (name, content, message) in cases {
        let path = write(dir.path(), name, &content);
        let (code, lines) = verify(std::slice::from_ref(&path));
        let prefix = format!("{}: invalid (binary): {message}", path.display());
        assert!(
            lines[0].starts_with(&prefix),
            "{}\nexpected {prefix}",
            lines[0]
        );
        assert_eq!(code, 1, "{name}");
    }
}

#[test]
fn a_binary_file_that_fails_validation_names_its_frame() {
    let dir = tempfile::tempdir().unwrap();
    let head = StreamSnapshot {
        buckets: vec!["a".into(), "a".into()],
        ..StreamSnapshot::default()
    };
    let mut bytes = Vec::new();
    encode_binary(&mut bytes, &head, &head.streams).unwrap();
    let path = write(dir.path(), "dup.bin", &bytes);
    let (code, lines) = verify(std::slice::from_ref(&path));
    assert_eq!(
        lines,
        [format!(
            "{}: invalid (binary): frame 0 (buckets, at byte 12): snapshot failed validation: \
             snapshot contains duplicate bucket 'a'",
            path.display()
        )]
    );
    assert_eq!(code, 1);
}

#[test]
fn unreadable_and_foreign_files_are_invalid_not_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let text = write(dir.path(), "notes.txt", b"hello");
    let empty = write(dir.path(), "empty", b"");
    let missing = dir.path().join("missing.json");
    // Five bytes of the binary magic are not enough to tell the format.
    let short = write(dir.path(), "short.bin", b"\x89STRS");
    let (code, lines) = verify(&[text.clone(), empty.clone(), short.clone(), missing.clone()]);
    let foreign = "invalid: not a snapshot: neither a JSON object nor the binary snapshot magic";
    assert_eq!(lines[0], format!("{}: {foreign}", text.display()));
    assert_eq!(lines[1], format!("{}: {foreign}", empty.display()));
    assert_eq!(lines[2], format!("{}: {foreign}", short.display()));
    assert!(
        lines[3].starts_with(&format!("{}: invalid: cannot open: ", missing.display())),
        "{}",
        lines[3]
    );
    assert_eq!(lines[4], "0 of 4 snapshots valid");
    assert_eq!(code, 1);
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &["snapshot", "verify"][..],
        &["snapshot", "verify", "--no-such-flag", "x"],
        &["snapshot"],
        &["frobnicate"],
        &[],
    ] {
        let output = strand().args(args).output().unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stdout_of(&output).is_empty(), "{args:?}");
    }
}

#[test]
fn legacy_fixtures_get_the_library_outcome() {
    // tests/fixtures/legacy: `error-*` fail restore, `decode-*` fail JSON
    // decode, the others restore. The CLI reads JSON with its own
    // streaming reader; the outcome must be the library's.
    let dir = legacy_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() > 30,
        "legacy fixtures not found in {}",
        dir.display()
    );
    let (_, lines) = verify(&files);
    for (path, line) in files.iter().zip(&lines) {
        let name = path.file_name().unwrap().to_string_lossy();
        let bytes = std::fs::read(path).unwrap();
        let expected = match decode_json(&bytes[..]) {
            Err(_) => {
                assert!(name.starts_with("decode-"), "{name}");
                "invalid (json): invalid JSON snapshot: ".to_owned()
            }
            Ok(snapshot) => match StreamStateMachine::restore(snapshot) {
                Ok(_) => {
                    assert!(!name.starts_with("error-"), "{name}");
                    "ok (json): ".to_owned()
                }
                Err(e) => format!("snapshot failed validation: {e}"),
            },
        };
        assert!(line.contains(&expected), "{line}\nexpected {expected}");
    }
}

/// An entry of bucket `zz` (which is not a bucket of the snapshot).
const ENTRY_IN_ZZ: &str = r#"{"metadata":{"stream_id":{"bucket_id":"zz","stream_id":"s"},"content_type":"text/plain","status":"Open","tail_offset":0,"last_stream_seq":null,"stream_ttl_seconds":null,"stream_expires_at_ms":null,"created_at_ms":1,"last_ttl_touch_at_ms":1},"hot_start_offset":0,"payload":[],"hot_segments":[],"cold_chunks":[],"external_segments":[],"message_records":[],"integrity":{"live_setsum":"0000000000000000000000000000000000000000000000000000000000000000","evicted_setsum":"0000000000000000000000000000000000000000000000000000000000000000","total_setsum":"0000000000000000000000000000000000000000000000000000000000000000","live_start_offset":0,"tail_offset":0,"live_records":0,"evicted_records":0,"total_records":0},"visible_snapshot":null,"producer_states":[]}"#;

#[test]
fn json_fields_in_any_order_get_restores_check_order() {
    // restore checks the bucket lists before any stream (spec 07 §5.1), so
    // the bucket error wins even when the lists come after the streams.
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            format!(r#"{{"streams":[{ENTRY_IN_ZZ}],"buckets":["a"],"erased_buckets":["a"]}}"#),
            "buckets: snapshot failed validation: snapshot bucket 'a' is both active and erased",
        ),
        (
            format!(r#"{{"buckets":["a"],"streams":[{ENTRY_IN_ZZ}],"erased_buckets":["a"]}}"#),
            "buckets: snapshot failed validation: snapshot bucket 'a' is both active and erased",
        ),
        (
            format!(r#"{{"buckets":["a"],"streams":[{ENTRY_IN_ZZ}],"erased_buckets":["b"]}}"#),
            "streams[0]: snapshot failed validation: snapshot stream 'zz/s' references a missing bucket",
        ),
        (
            format!(r#"{{"buckets":["zz"],"streams":[{ENTRY_IN_ZZ}],"erased_buckets":["b"]}}"#),
            "",
        ),
    ];
    let files: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, (text, _))| write(dir.path(), &format!("{i}.json"), text.as_bytes()))
        .collect();
    let (_, lines) = verify(&files);
    for ((path, (_, message)), line) in files.iter().zip(&cases).zip(&lines) {
        let expected = if message.is_empty() {
            format!(
                "{}: ok (json): 1 buckets, 1 streams, 0 bytes hot, 0 producers, 0 pending GC entries",
                path.display()
            )
        } else {
            format!("{}: invalid (json): {message}", path.display())
        };
        assert_eq!(line, &expected);
    }
}
