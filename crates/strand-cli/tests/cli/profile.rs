//! `strand replay --profile` and the corrected profile (issue 16): the
//! six-command log of spec 07 P3 writes an unrestorable snapshot under the
//! reference profile and a valid one under the corrected profile.

use std::path::{Path, PathBuf};

use serde_json::Value;
use strand::{
    BucketStreamId, ColdChunkRef, ExternalPayloadRef, MachineProfile, StreamCommand,
    StreamReadSegment, restore_from_slice,
};

use crate::common::*;

/// Create, append `abcde`, an external append of 5 bytes, append `xy`, then
/// a `FlushCold` of `[0, 5)`.
fn p3_log(dir: &Path) -> PathBuf {
    let id = BucketStreamId::new("acme", "log");
    let commands = vec![
        StreamCommand::CreateBucket {
            bucket_id: "acme".into(),
        },
        create(&id, "text/plain"),
        append(&id, "text/plain", "abcde", None),
        StreamCommand::AppendExternal {
            stream_id: id.clone(),
            content_type: Some("text/plain".into()),
            payload: ExternalPayloadRef {
                s3_path: "ext/object-1".into(),
                payload_len: 5,
                object_size: 5,
            },
            record_ends: Vec::new(),
            close_after: false,
            stream_seq: None,
            producer: None,
            now_ms: 2_000,
            record_match: None,
        },
        append(&id, "text/plain", "xy", None),
        StreamCommand::FlushCold {
            stream_id: id,
            chunk: ColdChunkRef {
                start_offset: 0,
                end_offset: 5,
                s3_path: "cold/chunk-0".into(),
                object_size: 5,
                object_offset: 0,
                shared_object: false,
                payload_digest: String::new(),
            },
        },
    ];
    let mut text = String::new();
    for c in &commands {
        text.push_str(&serde_json::to_string(c).unwrap());
        text.push('\n');
    }
    let path = dir.join("p3.jsonl");
    std::fs::write(&path, text).unwrap();
    path
}

fn replay_to(log: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    strand()
        .arg("replay")
        .arg(log)
        .arg("--snapshot-out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

fn verify(path: &Path) -> std::process::Output {
    strand()
        .args(["snapshot", "verify"])
        .arg(path)
        .output()
        .unwrap()
}

#[test]
fn reference_replay_of_the_p3_log_writes_a_snapshot_verify_rejects() {
    let dir = tempfile::tempdir().unwrap();
    let log = p3_log(dir.path());
    for extra in [&[][..], &["--profile", "reference"][..]] {
        let out = dir.path().join(format!("ref{}.json", extra.len()));
        let replayed = replay_to(&log, &out, extra);
        assert_eq!(replayed.status.code(), Some(0), "{}", stderr_of(&replayed));
        assert!(stdout_of(&replayed).contains("6 commands, 0 errors"));
        let verified = verify(&out);
        assert_eq!(verified.status.code(), Some(1));
        let text = format!("{}{}", stdout_of(&verified), stderr_of(&verified));
        assert!(
            text.contains("tail offset 12 does not match payload length 2"),
            "{text}"
        );
    }
}

#[test]
fn corrected_replay_of_the_p3_log_restores_and_plans_the_external_object() {
    let dir = tempfile::tempdir().unwrap();
    let log = p3_log(dir.path());
    for format in ["json", "binary"] {
        let out = dir.path().join(format!("corrected.{format}"));
        let replayed = replay_to(
            &log,
            &out,
            &["--profile", "corrected", "--snapshot-format", format],
        );
        assert_eq!(replayed.status.code(), Some(0), "{}", stderr_of(&replayed));
        assert!(stdout_of(&replayed).contains("6 commands, 0 errors"));
        let verified = verify(&out);
        assert_eq!(
            verified.status.code(),
            Some(0),
            "{}{}",
            stdout_of(&verified),
            stderr_of(&verified)
        );
        assert!(stdout_of(&verified).contains(": ok ("));

        let machine = restore_from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(machine.profile(), MachineProfile::Corrected);
        let plan = machine
            .read_plan(&BucketStreamId::new("acme", "log"), 5, 5)
            .unwrap();
        assert_eq!(plan.next_offset, 10);
        assert!(
            matches!(
                plan.segments.as_slice(),
                [StreamReadSegment::Object(o)] if o.object.s3_path == "ext/object-1"
                    && o.read_start_offset == 5 && o.len == 5
            ),
            "{plan:?}"
        );

        let inspected = strand()
            .args(["snapshot", "inspect"])
            .arg(&out)
            .output()
            .unwrap();
        assert_eq!(inspected.status.code(), Some(0));
        assert!(
            stdout_of(&inspected)
                .lines()
                .any(|l| l == "  profile: corrected (producers keep 64 receipts)"),
            "{}",
            stdout_of(&inspected)
        );
        let json = strand()
            .args(["snapshot", "inspect", "--json"])
            .arg(&out)
            .output()
            .unwrap();
        let report: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(report["profile"], "corrected");
        assert_eq!(report["producer_receipt_limit"], 64);
    }
}

#[test]
fn inspect_shows_the_reference_profile_of_a_reference_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let log = p3_log(dir.path());
    let out = dir.path().join("before-flush.json");
    // Without the flush the reference state restores fine.
    let text = std::fs::read_to_string(&log).unwrap();
    let five: Vec<&str> = text.lines().take(5).collect();
    let short = dir.path().join("five.jsonl");
    std::fs::write(&short, five.join("\n")).unwrap();
    let replayed = replay_to(&short, &out, &[]);
    assert_eq!(replayed.status.code(), Some(0), "{}", stderr_of(&replayed));
    let inspected = strand()
        .args(["snapshot", "inspect"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        stdout_of(&inspected)
            .lines()
            .any(|l| l == "  profile: reference")
    );
    // A reference snapshot has no machine_options field at all.
    let snapshot: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    assert!(snapshot.get("machine_options").is_none());
    assert!(
        snapshot["streams"][0]
            .get("cold_raw_frontier_offset")
            .is_none()
    );
}

#[test]
fn profile_must_match_the_from_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let log = p3_log(dir.path());
    let out = dir.path().join("corrected.json");
    let replayed = replay_to(&log, &out, &["--profile", "corrected"]);
    assert_eq!(replayed.status.code(), Some(0));
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let again = strand()
        .arg("replay")
        .arg(&empty)
        .arg("--from")
        .arg(&out)
        .args(["--profile", "reference"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(stderr_of(&again).contains("is a corrected snapshot"));
    let unknown = strand()
        .arg("replay")
        .arg(&empty)
        .args(["--profile", "bogus"])
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(2));
}
