//! `strand replay`.

use std::path::{Path, PathBuf};

use serde_json::Value;
use strand::{SnapshotFormat, StreamCommand, StreamStateMachine};

use crate::common::*;

fn write_log(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let path = dir.join(name);
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(&path, text).unwrap();
    path
}

fn command_lines(commands: &[StreamCommand]) -> Vec<String> {
    commands
        .iter()
        .map(|c| serde_json::to_string(c).unwrap())
        .collect()
}

fn replay(log: &Path, args: &[&str]) -> std::process::Output {
    strand().arg("replay").arg(log).args(args).output().unwrap()
}

/// The sample workload plus two commands that fail.
fn commands_with_errors() -> Vec<StreamCommand> {
    let mut commands = sample_commands();
    commands.push(StreamCommand::CreateBucket {
        bucket_id: "acme".into(),
    });
    commands.push(StreamCommand::DeleteStream {
        stream_id: strand::BucketStreamId::new("acme", "nope"),
    });
    commands.push(StreamCommand::CreateBucket {
        bucket_id: "gone".into(),
    });
    commands
}

#[test]
fn summary_counts_commands_by_kind_and_errors_by_code() {
    let dir = tempfile::tempdir().unwrap();
    let log = write_log(
        dir.path(),
        "log.jsonl",
        &command_lines(&commands_with_errors()),
    );
    let output = replay(&log, &[]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    // 13 sample commands + 3 more; `CreateBucket acme` answers
    // BucketAlreadyExists (not an error), the other two fail.
    let expected = format!(
        "replayed {}: 16 commands, 2 errors
commands by kind:
  Append          5
  CreateBucket    5
  CreateStream    3
  DeleteStream    1
  PurgeBucket     1
  SetBucketQuota  1
errors by code:
  BucketErased    1
  StreamNotFound  1
",
        log.display()
    );
    assert_eq!(stdout_of(&output), expected);
    assert!(output.stderr.is_empty());
}

#[test]
fn responses_and_final_snapshot_match_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let commands = commands_with_errors();
    let log = write_log(dir.path(), "log.jsonl", &command_lines(&commands));
    let mut machine = StreamStateMachine::new();
    let expected: String = commands
        .into_iter()
        .map(|c| serde_json::to_string(&machine.apply(c)).unwrap() + "\n")
        .collect();

    for (format, name) in [("json", "final.json"), ("binary", "final.bin")] {
        let out = dir.path().join(name);
        let output = replay(
            &log,
            &[
                "--responses",
                "--snapshot-out",
                out.to_str().unwrap(),
                "--snapshot-format",
                format,
            ],
        );
        assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
        assert_eq!(stdout_of(&output), expected);
        // The summary moves to stderr.
        let stderr = stderr_of(&output);
        assert!(stderr.contains("16 commands, 2 errors"), "{stderr}");
        assert!(stderr.contains(&format!("snapshot written to {}", out.display())));
        let format = if format == "json" {
            SnapshotFormat::Json
        } else {
            SnapshotFormat::Binary
        };
        assert_eq!(
            std::fs::read(&out).unwrap(),
            snapshot_bytes(&machine, format)
        );
    }
}

#[test]
fn a_malformed_line_stops_the_replay_with_its_line_number() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = command_lines(&sample_commands()[..3]);
    lines.insert(1, String::new()); // blank lines are skipped but counted
    lines.insert(3, r#"{"CreateBucket":{"bucket":"x"}}"#.to_owned());
    lines.push("not json".to_owned());
    let log = write_log(dir.path(), "bad.jsonl", &lines);
    let out = dir.path().join("final.json");

    let output = replay(&log, &["--snapshot-out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = stderr_of(&output);
    assert_eq!(
        stderr,
        format!(
            "{}: line 4: malformed command: missing field `bucket_id` (column 30)\n",
            log.display()
        )
    );
    let stdout = stdout_of(&output);
    assert!(stdout.contains(": 2 commands, 0 errors"), "{stdout}");
    assert!(stdout.contains("stopped at line 4"), "{stdout}");
    assert!(!out.exists(), "no snapshot after a failed replay");
    assert_eq!(dir_names(dir.path()), ["bad.jsonl"]);

    let output = replay(
        &log,
        &["--skip-invalid", "--snapshot-out", out.to_str().unwrap()],
    );
    assert_eq!(output.status.code(), Some(0));
    let stderr = stderr_of(&output);
    assert!(stderr.contains("line 4: malformed command"), "{stderr}");
    assert!(
        stderr.contains("line 6: malformed command: expected value (column 1)"),
        "{stderr}"
    );
    let stdout = stdout_of(&output);
    assert!(stdout.contains(": 3 commands, 0 errors"), "{stdout}");
    assert!(stdout.contains("skipped 2 malformed lines"), "{stdout}");
    assert!(out.exists());
}

#[test]
fn from_a_snapshot_and_refusing_to_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let start = dir.path().join("start.bin");
    std::fs::write(
        &start,
        snapshot_bytes(&sample_machine(), SnapshotFormat::Binary),
    )
    .unwrap();
    let log = write_log(
        dir.path(),
        "more.jsonl",
        &command_lines(&[StreamCommand::DeleteStream {
            stream_id: strand::BucketStreamId::new("acme", "log"),
        }]),
    );
    let out = dir.path().join("end.json");
    let output = replay(
        &log,
        &[
            "--from",
            start.to_str().unwrap(),
            "--snapshot-out",
            out.to_str().unwrap(),
        ],
    );
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert!(stdout_of(&output).contains("1 commands, 0 errors"));
    let end: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let streams: Vec<&str> = end["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["metadata"]["stream_id"]["stream_id"].as_str().unwrap())
        .collect();
    assert_eq!(streams, ["events", "inbox.sess_1"]);

    // The output exists now: refused without --force, before replaying.
    let output = replay(&log, &["--snapshot-out", out.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains("already exists"));
    assert!(output.stdout.is_empty());

    // A bad --from snapshot fails the command.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, b"{}").unwrap();
    let output = replay(&log, &["--from", bad.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr_of(&output).contains("missing field `buckets`"));
}

#[test]
fn reference_traces_replay_to_the_recorded_responses_and_snapshot() {
    // Traces whose first `snapshot` step is preceded only by `apply` steps
    // and read-only queries: their commands, replayed, must give the
    // recorded responses (messages aside) and the recorded snapshot.
    const READ_ONLY: &[&str] = &[
        "head",
        "stream_attrs",
        "bucket_exists",
        "hot_start_offset",
        "retained_offset",
        "cold_chunks",
        "external_segments",
        "hot_segments",
        "hot_payload_len",
        "total_hot_payload_bytes",
        "record_range",
        "offset_for_record",
        "record_range_for_append",
        "read",
        "read_plan",
        "latest_snapshot",
        "read_snapshot",
        "bootstrap_plan",
        "plan_cold_flush",
        "plan_next_cold_flush_batch",
        "pending_cold_gc_batch",
        "pending_cold_gc_len",
        "pending_cold_gc_len_for_bucket",
        "bucket_usage_report",
        "bucket_quota_report",
        "integrity_snapshot",
    ];
    fn without_messages(mut v: Value) -> Value {
        if let Some(error) = v.get_mut("Error").and_then(Value::as_object_mut) {
            error.remove("message");
        }
        v
    }
    let dir = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for (name, trace) in load_traces() {
        let mut lines = Vec::new();
        let mut responses = Vec::new();
        let mut snapshot = None;
        for step in steps(&trace) {
            match step["op"].as_str().unwrap() {
                "apply" => {
                    lines.push(serde_json::to_string(&step["command"]).unwrap());
                    responses.push(without_messages(step["response"].clone()));
                }
                "query" if READ_ONLY.contains(&step["query"]["method"].as_str().unwrap()) => {}
                "snapshot" => {
                    snapshot = Some(step["snapshot"].clone());
                    break;
                }
                _ => break,
            }
        }
        let Some(snapshot) = snapshot.filter(|_| !lines.is_empty()) else {
            continue;
        };
        let log = write_log(dir.path(), &format!("{name}.jsonl"), &lines);
        let out = dir.path().join(format!("{name}.json"));
        let output = replay(
            &log,
            &["--responses", "--snapshot-out", out.to_str().unwrap()],
        );
        assert_eq!(
            output.status.code(),
            Some(0),
            "{name}: {}",
            stderr_of(&output)
        );
        let got: Vec<Value> = stdout_of(&output)
            .lines()
            .map(|l| without_messages(serde_json::from_str(l).unwrap()))
            .collect();
        assert_eq!(got, responses, "{name}");
        let written: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(written, snapshot, "{name}");
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} traces qualified");
}
