//! Shared helpers: the binary, the fixture locations, a sample machine with
//! known contents, and file utilities.

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use bytes::Bytes;
use serde_json::Value;
use strand::{
    BucketStreamId, ProducerRequest, SnapshotFormat, StreamCommand, StreamStateMachine,
    write_snapshot,
};

/// The built `strand` binary.
pub(crate) fn strand() -> Command {
    Command::new(env!("CARGO_BIN_EXE_strand"))
}

/// The workspace's legacy snapshot fixtures.
pub(crate) fn legacy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/legacy")
}

/// Every conformance trace (the vendored corpus, or the `*.json` files of
/// `STRAND_CONFORMANCE_DIR`), as (file stem, document), sorted by file name.
pub(crate) fn load_traces() -> Vec<(String, Value)> {
    let source = strand_tests::trace_source();
    let traces = strand_tests::load_trace_documents(&source)
        .unwrap_or_else(|e| panic!("conformance traces unavailable: {e}"));
    assert!(!traces.is_empty(), "no traces in {source}");
    traces
}

/// The steps of a trace.
pub(crate) fn steps(trace: &Value) -> &[Value] {
    trace["steps"].as_array().unwrap()
}

pub(crate) fn create(id: &BucketStreamId, content_type: &str) -> StreamCommand {
    StreamCommand::CreateStream {
        stream_id: id.clone(),
        content_type: content_type.into(),
        initial_payload: Bytes::new(),
        close_after: false,
        stream_seq: None,
        producer: None,
        stream_ttl_seconds: None,
        stream_expires_at_ms: None,
        attrs: None,
        now_ms: 1_000,
    }
}

pub(crate) fn append(
    id: &BucketStreamId,
    content_type: &str,
    body: &'static str,
    producer: Option<ProducerRequest>,
) -> StreamCommand {
    StreamCommand::Append {
        stream_id: id.clone(),
        content_type: Some(content_type.into()),
        payload: Bytes::from_static(body.as_bytes()),
        close_after: false,
        stream_seq: None,
        producer,
        now_ms: 2_000,
        record_match: None,
    }
}

/// The commands of the sample workload. Its state, known by construction:
///
/// * buckets `acme`, `beta`; `gone` erased; `beta` limited to 5 streams;
/// * `acme/events` (application/json): 16 bytes, records 0..2;
/// * `acme/log` (text/plain): "hello " by producer `p` (retried once, so
///   deduplicated) and "world": tail 11, one producer;
/// * `beta/sess_1/inbox.sess_1` (text/plain): "abc";
///
/// so 2 buckets, 3 streams, 30 bytes hot, 1 producer, 0 pending GC entries.
pub(crate) fn sample_commands() -> Vec<StreamCommand> {
    let log = BucketStreamId::new("acme", "log");
    let events = BucketStreamId::new("acme", "events");
    let inbox = BucketStreamId::with_affinity("beta", "sess_1", "inbox.sess_1");
    let p = ProducerRequest {
        producer_id: "p".into(),
        producer_epoch: 0,
        producer_seq: 0,
    };
    let bucket = |id: &str| StreamCommand::CreateBucket {
        bucket_id: id.into(),
    };
    vec![
        bucket("acme"),
        bucket("beta"),
        bucket("gone"),
        StreamCommand::PurgeBucket {
            bucket_id: "gone".into(),
        },
        StreamCommand::SetBucketQuota {
            bucket_id: "beta".into(),
            max_streams: Some(5),
            max_retained_bytes: None,
        },
        create(&log, "text/plain"),
        append(&log, "text/plain", "hello ", Some(p.clone())),
        append(&log, "text/plain", "hello ", Some(p)),
        append(&log, "text/plain", "world", None),
        create(&events, "application/json"),
        append(&events, "application/json", "{\"a\":1}\n{\"b\":2}\n", None),
        create(&inbox, "text/plain"),
        append(&inbox, "text/plain", "abc", None),
    ]
}

/// The sample machine (every command of the workload succeeds).
pub(crate) fn sample_machine() -> StreamStateMachine {
    let mut machine = StreamStateMachine::new();
    for command in sample_commands() {
        let shown = command.to_string();
        let response = machine.apply(command);
        assert!(!response.is_error(), "{shown}: {response:?}");
    }
    machine
}

/// The counts line `verify` prints for the sample machine.
pub(crate) const SAMPLE_COUNTS: &str =
    "2 buckets, 3 streams, 30 bytes hot, 1 producers, 0 pending GC entries";

/// A machine's snapshot in `format`.
pub(crate) fn snapshot_bytes(machine: &StreamStateMachine, format: SnapshotFormat) -> Vec<u8> {
    let mut bytes = Vec::new();
    write_snapshot(machine, format, &mut bytes).unwrap();
    bytes
}

/// The sorted names of a directory's entries (hidden files included).
pub(crate) fn dir_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A command's stdout as text.
pub(crate) fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// A command's stderr as text.
pub(crate) fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}
