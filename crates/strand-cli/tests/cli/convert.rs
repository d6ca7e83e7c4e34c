//! `strand snapshot convert`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use strand::decode_json;
use strand::{SnapshotFormat, StreamSnapshot, StreamStateMachine};

use crate::common::*;

fn convert(input: &Path, output: &Path, to: &str, extra: &[&str]) -> std::process::Output {
    strand()
        .args(["snapshot", "convert"])
        .arg(input)
        .arg(output)
        .args(["--to", to])
        .args(extra)
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn converts_both_ways_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let machine = sample_machine();
    let json = snapshot_bytes(&machine, SnapshotFormat::Json);
    let binary = snapshot_bytes(&machine, SnapshotFormat::Binary);
    let json_in = write(dir.path(), "in.json", &json);
    let binary_in = write(dir.path(), "in.bin", &binary);

    let to_binary = dir.path().join("out.bin");
    let output = convert(&json_in, &to_binary, "binary", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(std::fs::read(&to_binary).unwrap(), binary);
    assert_eq!(
        stdout_of(&output),
        format!(
            "{} (json) -> {} (binary): {SAMPLE_COUNTS}; {} bytes written\n",
            json_in.display(),
            to_binary.display(),
            binary.len()
        )
    );

    let to_json = dir.path().join("out.json");
    let output = convert(&binary_in, &to_json, "json", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(std::fs::read(&to_json).unwrap(), json);

    // Same format: a re-encoding.
    let again = dir.path().join("again.json");
    assert_eq!(
        convert(&json_in, &again, "json", &[]).status.code(),
        Some(0)
    );
    assert_eq!(std::fs::read(&again).unwrap(), json);
}

#[test]
fn reference_snapshots_convert_to_our_canonical_bytes() {
    // Reference-written snapshots (sorted keys, from the traces) become
    // exactly serde's JSON of the decoded snapshot, and a binary file that
    // converts back to the same bytes. (Snapshots that do not restore,
    // spec 07 P3, are refused, like any invalid input.)
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (name, trace) in load_traces() {
        if !(name.ends_with("-0000") || name.ends_with("-0001")) {
            continue; // two traces per profile
        }
        let Some(step) = steps(&trace).iter().rev().find(|s| s["op"] == "snapshot") else {
            continue;
        };
        let text = serde_json::to_vec(&step["snapshot"]).unwrap();
        let decoded: StreamSnapshot = decode_json(&text[..]).unwrap();
        if StreamStateMachine::restore(decoded.clone()).is_err() {
            continue;
        }
        let canonical = serde_json::to_vec(&decoded).unwrap();
        let input = write(dir.path(), &format!("{name}.json"), &text);
        let binary = dir.path().join(format!("{name}.bin"));
        let back = dir.path().join(format!("{name}.back.json"));
        assert_eq!(
            convert(&input, &binary, "binary", &[]).status.code(),
            Some(0)
        );
        let output = convert(&binary, &back, "json", &[]);
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert_eq!(std::fs::read(&back).unwrap(), canonical, "{name}");
        let as_value: Value = serde_json::from_slice(&std::fs::read(&back).unwrap()).unwrap();
        assert_eq!(as_value, step["snapshot"], "{name}");
        checked += 1;
    }
    assert!(checked >= 10, "only {checked} traces checked");
}

#[test]
fn refuses_to_overwrite_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let machine = sample_machine();
    let input = write(
        dir.path(),
        "in.json",
        &snapshot_bytes(&machine, SnapshotFormat::Json),
    );
    let out = write(dir.path(), "out.bin", b"keep me");
    let output = convert(&input, &out, "binary", &[]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains("already exists (pass --force to overwrite it)"));
    assert_eq!(std::fs::read(&out).unwrap(), b"keep me");

    let output = convert(&input, &out, "binary", &["--force"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        snapshot_bytes(&machine, SnapshotFormat::Binary)
    );
    assert_eq!(dir_names(dir.path()), ["in.json", "out.bin"]);
}

#[test]
fn a_failed_conversion_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let machine = sample_machine();
    let binary = snapshot_bytes(&machine, SnapshotFormat::Binary);
    let json = snapshot_bytes(&machine, SnapshotFormat::Json);
    let cases: [(&str, Vec<u8>, &str, &str); 4] = [
        (
            "truncated.bin",
            binary[..binary.len() - 10].to_vec(),
            "json",
            "binary snapshot truncated",
        ),
        (
            "truncated.json",
            json[..json.len() / 2].to_vec(),
            "binary",
            "invalid JSON snapshot: EOF while parsing",
        ),
        (
            "invalid.json",
            br#"{"buckets":["a"],"erased_buckets":["a"],"streams":[]}"#.to_vec(),
            "binary",
            "snapshot bucket 'a' is both active and erased",
        ),
        (
            "notes.txt",
            b"not a snapshot".to_vec(),
            "json",
            "not a snapshot",
        ),
    ];
    for (name, content, to, message) in cases {
        let input = write(dir.path(), name, &content);
        let out = dir.path().join("out");
        let output = convert(&input, &out, to, &[]);
        assert_eq!(output.status.code(), Some(1), "{name}");
        let stderr = stderr_of(&output);
        assert!(stderr.contains(message), "{name}: {stderr}");
        assert!(
            !out.exists(),
            "{name}: a failed conversion created the output"
        );

        // With --force over an existing file, the old file survives.
        std::fs::write(&out, b"old").unwrap();
        let output = convert(&input, &out, to, &["--force"]);
        assert_eq!(output.status.code(), Some(1), "{name}");
        assert_eq!(std::fs::read(&out).unwrap(), b"old", "{name}");
        std::fs::remove_file(&out).unwrap();
        std::fs::remove_file(&input).unwrap();
        assert!(
            dir_names(dir.path()).is_empty(),
            "{name}: files left behind: {:?}",
            dir_names(dir.path())
        );
    }
}

#[test]
fn json_in_an_unstreamable_field_order_still_converts() {
    let dir = tempfile::tempdir().unwrap();
    let machine = sample_machine();
    let canonical: Value =
        serde_json::from_slice(&snapshot_bytes(&machine, SnapshotFormat::Json)).unwrap();
    // Rebuild the object with `streams` first and `buckets` last.
    let object = canonical.as_object().unwrap();
    let mut text = String::from("{");
    let mut keys: Vec<&String> = object.keys().collect();
    keys.sort_by_key(|k| (k.as_str() != "streams", k.as_str() == "buckets"));
    for (i, key) in keys.iter().enumerate() {
        if i > 0 {
            text.push(',');
        }
        text.push_str(&format!("{:?}:{}", key, object[*key]));
    }
    text.push('}');
    assert!(text.starts_with("{\"streams\""), "{text}");
    let input = write(dir.path(), "reordered.json", text.as_bytes());
    let out = dir.path().join("out.bin");
    let output = convert(&input, &out, "binary", &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(
        std::fs::read(&out).unwrap(),
        snapshot_bytes(&machine, SnapshotFormat::Binary)
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let input = write(dir.path(), "in.json", br#"{"buckets":[],"streams":[]}"#);
    let out = dir.path().join("out");
    for args in [&[][..], &["--to", "yaml"]] {
        let output = strand()
            .args(["snapshot", "convert"])
            .arg(&input)
            .arg(&out)
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
    assert!(!out.exists());
}
