//! `strand snapshot inspect`.

use std::path::PathBuf;

use serde_json::{Value, json};
use strand::SnapshotFormat;

use crate::common::*;

fn sample_file(dir: &tempfile::TempDir, format: SnapshotFormat) -> PathBuf {
    let path = dir.path().join(format!("sample.{format}"));
    std::fs::write(&path, snapshot_bytes(&sample_machine(), format)).unwrap();
    path
}

fn inspect(args: &[&str], path: &PathBuf) -> std::process::Output {
    strand()
        .args(["snapshot", "inspect"])
        .arg(path)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn text_summary_per_bucket_and_stream() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_file(&dir, SnapshotFormat::Binary);
    let output = inspect(&[], &path);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout_of(&output);
    // Values known from the sample workload (see `sample_commands`).
    for expected in [
        format!("{} (binary snapshot)", path.display()),
        "  2 buckets (1 erased), 3 streams, 30 bytes hot, 1 producers".to_owned(),
        "  cold GC: 0 pending (next seq 0); 0 shared cold objects".to_owned(),
        "  erased buckets: gone".to_owned(),
        "bucket acme: 2 streams, 27 retained bytes".to_owned(),
        // 6 + 5 + 16 bytes committed by 3 appends (the retry is free),
        // one write unit each, plus one per create.
        "  usage: 27 bytes committed, 4 records, 5 write units".to_owned(),
        "  quota: none".to_owned(),
        "bucket beta: 1 streams, 3 retained bytes".to_owned(),
        "  quota: 5 streams, unlimited retained bytes".to_owned(),
        "  stream acme/events".to_owned(),
        "    records       0..2 (2 message records)".to_owned(),
        "    offsets       tail 11, retained 0, hot start 0, cold frontier 0".to_owned(),
        "    producer      p epoch 0 seq 0: last append 0..6, 1 receipts".to_owned(),
        "  stream beta/sess_1/inbox.sess_1".to_owned(),
    ] {
        assert!(
            text.lines().any(|l| l == expected),
            "missing line {expected:?} in\n{text}"
        );
    }
    // Streams in snapshot order: events before log.
    let events = text.find("stream acme/events").unwrap();
    let log = text.find("stream acme/log").unwrap();
    assert!(events < log);
}

#[test]
fn json_report_is_machine_readable_and_the_same_for_both_codecs() {
    let dir = tempfile::tempdir().unwrap();
    let mut reports = Vec::new();
    for format in [SnapshotFormat::Json, SnapshotFormat::Binary] {
        let path = sample_file(&dir, format);
        let output = inspect(&["--json"], &path);
        assert_eq!(output.status.code(), Some(0));
        let mut report: Value = serde_json::from_slice(&output.stdout).unwrap();
        assert_eq!(report["format"], format.to_string());
        assert_eq!(report["file"], path.display().to_string());
        report["format"] = Value::Null;
        report["file"] = Value::Null;
        reports.push(report);
    }
    assert_eq!(reports[0], reports[1]);
    let report = &reports[0];
    assert_eq!(
        report["totals"],
        json!({"buckets": 2, "erased_buckets": 1, "streams": 3, "hot_bytes": 30,
               "producers": 1, "pending_cold_gc": 0})
    );
    assert_eq!(report["erased_buckets"], json!(["gone"]));
    let buckets = report["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 2);
    assert_eq!(buckets[0]["bucket_id"], "acme");
    assert_eq!(buckets[0]["quota"], Value::Null);
    assert_eq!(
        buckets[1]["quota"],
        json!({"max_streams": 5, "max_retained_bytes": null})
    );
    assert_eq!(buckets[1]["usage"]["retained_bytes"], 3);
    assert_eq!(buckets[1]["usage"]["stream_count"], 1);
    let streams: Vec<&str> = buckets
        .iter()
        .flat_map(|b| b["streams"].as_array().unwrap())
        .map(|s| s["stream"].as_str().unwrap())
        .collect();
    assert_eq!(
        streams,
        ["acme/events", "acme/log", "beta/sess_1/inbox.sess_1"]
    );
    let events = &buckets[0]["streams"][0];
    assert_eq!(
        events["record_range"],
        json!({"first_record": 0, "next_record": 2})
    );
    assert_eq!(events["content_type"], "application/json");
    assert_eq!(events["status"], "Open");
    assert_eq!(events["tail_offset"], 16);
    let log = &buckets[0]["streams"][1];
    assert_eq!(log["record_range"], Value::Null);
    assert_eq!(log["producers"][0]["producer_id"], "p");
    assert_eq!(log["producers"][0]["last_next_offset"], 6);
}

#[test]
fn one_stream_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let path = sample_file(&dir, SnapshotFormat::Json);

    let output = inspect(&["--stream", "beta/sess_1/inbox.sess_1", "--json"], &path);
    assert_eq!(output.status.code(), Some(0));
    let stream: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        stream["stream_id"],
        json!({"bucket_id": "beta", "stream_id": "inbox.sess_1", "affinity_key": "sess_1"})
    );
    assert_eq!(stream["tail_offset"], 3);
    assert_eq!(stream["hot_bytes"], 3);

    let output = inspect(&["--stream", "acme/log"], &path);
    assert_eq!(output.status.code(), Some(0));
    let text = stdout_of(&output);
    assert!(text.starts_with("stream acme/log\n"), "{text}");
    assert!(!text.contains("acme/events"), "{text}");

    let output = inspect(&["--stream", "acme/nope"], &path);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(
        stderr_of(&output).contains("no stream 'acme/nope' in this snapshot"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn an_invalid_snapshot_is_not_inspected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, br#"{"buckets":["a","a"],"streams":[]}"#).unwrap();
    let output = inspect(&[], &path);
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    assert!(
        stderr_of(&output).contains(
            "buckets: snapshot failed validation: snapshot contains duplicate bucket 'a'"
        ),
        "{}",
        stderr_of(&output)
    );
}
