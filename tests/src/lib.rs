//! Shared helpers for strand's workspace-level tests: the conformance trace
//! replayer (`tests/conformance/FORMAT.md`) and the corpus reader. Only
//! integration tests (here and in `crates/strand-cli`) use this crate.

use std::fmt;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};
use strand::{BucketStreamId, ProducerRequest, StreamCommand, StreamSnapshot, StreamStateMachine};

/// The environment variable naming a directory of uncompressed `*.json`
/// traces (such as `../shared/conformance/traces`) to read instead of the
/// vendored corpus.
pub const CORPUS_DIR_ENV: &str = "STRAND_CONFORMANCE_DIR";

/// The vendored corpus: `tests/conformance/traces.tar.zst`, a tar of
/// `traces/*.json` compressed with zstd (`cargo xtask vendor-conformance`
/// writes it).
pub fn vendored_archive() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/traces.tar.zst")
}

/// Where the golden traces are read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceSource {
    /// A directory of `*.json` trace files (`STRAND_CONFORMANCE_DIR`).
    Dir(PathBuf),
    /// A zstd-compressed tar holding `traces/*.json` (the vendored copy).
    Archive(PathBuf),
}

impl fmt::Display for TraceSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceSource::Dir(dir) => write!(f, "{} ({CORPUS_DIR_ENV})", dir.display()),
            TraceSource::Archive(path) => write!(f, "{}", path.display()),
        }
    }
}

/// `STRAND_CONFORMANCE_DIR` when set, else the vendored archive.
pub fn trace_source() -> TraceSource {
    match std::env::var_os(CORPUS_DIR_ENV) {
        Some(dir) if !dir.is_empty() => TraceSource::Dir(PathBuf::from(dir)),
        _ => TraceSource::Archive(vendored_archive()),
    }
}

/// One trace file's name (`producers-0007.json`) and bytes.
#[derive(Debug, Clone)]
pub struct TraceFile {
    /// The file name, without directories.
    pub name: String,
    /// The file's contents.
    pub bytes: Vec<u8>,
}

impl TraceFile {
    /// The file name without `.json` (`producers-0007`).
    pub fn stem(&self) -> &str {
        self.name.strip_suffix(".json").unwrap_or(&self.name)
    }
}

/// Reads every `*.json` trace of `source`, sorted by file name.
pub fn read_trace_files(source: &TraceSource) -> Result<Vec<TraceFile>, String> {
    let mut files = match source {
        TraceSource::Dir(dir) => read_dir_traces(dir)?,
        TraceSource::Archive(path) => read_archive_traces(path)?,
    };
    files.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(pair) = files.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(format!("{source} holds {} twice", pair[0].name));
    }
    Ok(files)
}

fn read_dir_traces(dir: &Path) -> Result<Vec<TraceFile>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read trace dir {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bytes =
            std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        files.push(TraceFile { name, bytes });
    }
    Ok(files)
}

fn read_archive_traces(path: &Path) -> Result<Vec<TraceFile>, String> {
    let file = std::fs::File::open(path).map_err(|e| {
        format!(
            "cannot open the vendored corpus {} ({e}); refresh it with \
             `cargo xtask vendor-conformance`, or set {CORPUS_DIR_ENV}",
            path.display()
        )
    })?;
    let decoder = ruzstd::decoding::StreamingDecoder::new(BufReader::new(file))
        .map_err(|e| format!("{} is not zstd: {e}", path.display()))?;
    let mut archive = tar::Archive::new(decoder);
    let entries = archive
        .entries()
        .map_err(|e| format!("{} is not a tar: {e}", path.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("{}: bad tar entry: {e}", path.display()))?;
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let member = entry
            .path()
            .map_err(|e| format!("{}: bad tar path: {e}", path.display()))?
            .into_owned();
        let in_traces = member.parent() == Some(Path::new("traces"));
        if !in_traces || member.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = member
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut bytes = Vec::new();
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: cannot read {}: {e}", path.display(), member.display()))?;
        files.push(TraceFile { name, bytes });
    }
    Ok(files)
}

/// Every trace of `source` as a JSON document with its file stem, sorted
/// by file name.
pub fn load_trace_documents(source: &TraceSource) -> Result<Vec<(String, Value)>, String> {
    read_trace_files(source)?
        .into_iter()
        .map(|file| {
            let doc: Value = serde_json::from_slice(&file.bytes)
                .map_err(|e| format!("{} in {source} is not JSON: {e}", file.name))?;
            Ok((file.stem().to_owned(), doc))
        })
        .collect()
}

/// One trace file, loaded.
#[derive(Debug, Clone)]
pub struct Trace {
    /// The trace's name (`producers-0007`).
    pub name: String,
    /// Its profile (`producers`).
    pub profile: String,
    /// Its steps, in order.
    pub steps: Vec<Value>,
}

/// Loads every trace of `source`, sorted by file name.
pub fn load_traces(source: &TraceSource) -> Result<Vec<Trace>, String> {
    Ok(load_trace_documents(source)?
        .into_iter()
        .map(|(_, doc)| {
            let field = |k: &str| {
                doc.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            Trace {
                name: field("name"),
                profile: field("profile"),
                steps: doc
                    .get("steps")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
            }
        })
        .collect())
}

/// A step whose actual result differs from the recorded one.
#[derive(Debug, Clone)]
pub struct Mismatch {
    /// Zero-based step index.
    pub step: usize,
    /// The step's `op` (and query method).
    pub op: String,
    /// The recorded result, normalised.
    pub expected: Value,
    /// What strand produced, normalised.
    pub actual: Value,
}

/// The outcome of replaying one trace.
#[derive(Debug, Clone)]
pub struct TraceOutcome {
    /// Steps that matched before the first mismatch.
    pub matched_steps: usize,
    /// Total steps in the trace.
    pub total_steps: usize,
    /// The first mismatch, if any.
    pub mismatch: Option<Mismatch>,
}

/// Drops `message` inside every `{"Error": {...}}`, recursively.
pub fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(inner)) = map.get_mut("Error") {
                inner.remove("message");
            }
            for v in map.values_mut() {
                normalize(v);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn to_value<T: Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or_else(|e| Value::String(format!("<serialize error: {e}>")))
}

fn arg<T: DeserializeOwned>(args: &Map<String, Value>, name: &str) -> Result<T, String> {
    let v = args.get(name).cloned().unwrap_or(Value::Null);
    serde_json::from_value(v).map_err(|e| format!("argument `{name}`: {e}"))
}

fn run_query(
    machine: &mut StreamStateMachine,
    query: &Map<String, Value>,
) -> Result<Value, String> {
    let method = query
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let id = || arg::<BucketStreamId>(query, "stream_id");
    Ok(match method {
        "head" => to_value(&machine.head(&id()?)),
        "head_at" => to_value(&machine.head_at(&id()?, arg(query, "now_ms")?)),
        "stream_attrs" => to_value(&machine.stream_attrs(&id()?)),
        "bucket_exists" => to_value(&machine.bucket_exists(&arg::<String>(query, "bucket_id")?)),
        "hot_start_offset" => to_value(&machine.hot_start_offset(&id()?)),
        "retained_offset" => to_value(&machine.retained_offset(&id()?)),
        "cold_chunks" => to_value(&machine.cold_chunks(&id()?)),
        "external_segments" => to_value(&machine.external_segments(&id()?)),
        "hot_segments" => to_value(&machine.hot_segments(&id()?)),
        "hot_payload_len" => to_value(&machine.hot_payload_len(&id()?)),
        "total_hot_payload_bytes" => to_value(&machine.total_hot_payload_bytes()),
        "record_range" => to_value(&machine.record_range(&id()?)),
        "offset_for_record" => to_value(&machine.offset_for_record(&id()?, arg(query, "record")?)),
        "record_range_for_append" => {
            let producer: Option<ProducerRequest> = arg(query, "producer")?;
            to_value(&machine.record_range_for_append(
                &id()?,
                arg(query, "start_offset")?,
                arg(query, "next_offset")?,
                producer.as_ref(),
            ))
        }
        "access_requires_write" => to_value(&machine.access_requires_write(
            &id()?,
            arg(query, "now_ms")?,
            arg(query, "renew_ttl")?,
        )),
        "read" => to_value(&machine.read(&id()?, arg(query, "offset")?, arg(query, "max_len")?)),
        "read_plan" => {
            to_value(&machine.read_plan(&id()?, arg(query, "offset")?, arg(query, "max_len")?))
        }
        "read_plan_at" => to_value(&machine.read_plan_at(
            &id()?,
            arg(query, "offset")?,
            arg(query, "max_len")?,
            arg(query, "now_ms")?,
        )),
        "latest_snapshot" => to_value(&machine.latest_snapshot(&id()?)),
        "read_snapshot" => to_value(&machine.read_snapshot(&id()?, arg(query, "snapshot_offset")?)),
        "delete_snapshot" => {
            to_value(&machine.delete_snapshot(&id()?, arg(query, "snapshot_offset")?))
        }
        "bootstrap_plan" => to_value(&machine.bootstrap_plan(&id()?)),
        "plan_cold_flush" => to_value(&machine.plan_cold_flush(
            &id()?,
            arg(query, "min_hot_bytes")?,
            arg(query, "max_flush_bytes")?,
        )),
        "plan_next_cold_flush_batch" => to_value(&machine.plan_next_cold_flush_batch(
            arg(query, "min_hot_bytes")?,
            arg(query, "max_flush_bytes")?,
            arg(query, "max_batch_bytes")?,
            arg(query, "max_candidates")?,
        )),
        "pending_cold_gc_batch" => to_value(&machine.pending_cold_gc_batch(arg(query, "max")?)),
        "pending_cold_gc_len" => to_value(&machine.pending_cold_gc_len()),
        "pending_cold_gc_len_for_bucket" => {
            to_value(&machine.pending_cold_gc_len_for_bucket(&arg::<String>(query, "bucket_id")?))
        }
        "bucket_usage_report" => to_value(&machine.bucket_usage_report()),
        "bucket_quota_report" => to_value(&machine.bucket_quota_report()),
        "integrity_snapshot" => to_value(&machine.integrity_snapshot(&id()?)),
        other => return Err(format!("unknown query method `{other}`")),
    })
}

/// Runs one step; returns `(op label, expected, actual)`, both normalised.
fn run_step(
    machine: &mut StreamStateMachine,
    step: &Value,
) -> Result<(String, Value, Value), String> {
    let obj = step.as_object().ok_or("step is not an object")?;
    let op = obj
        .get("op")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let (label, expected_key, actual) = match op.as_str() {
        "apply" => {
            let command: StreamCommand = arg(obj, "command")?;
            let label = format!("apply {}", command.kind());
            (label, "response", to_value(&machine.apply(command)))
        }
        "append_batch" => {
            let payloads: Vec<Vec<u8>> = arg(obj, "payloads")?;
            let slices: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
            let content_type: Option<String> = arg(obj, "content_type")?;
            let result = machine.append_batch_borrowed(
                arg(obj, "stream_id")?,
                content_type.as_deref(),
                &slices,
                arg(obj, "producer")?,
                arg(obj, "now_ms")?,
            );
            (op.clone(), "result", to_value(&result))
        }
        "append_transaction" => {
            let commands: Vec<StreamCommand> = arg(obj, "commands")?;
            (
                op.clone(),
                "result",
                to_value(&machine.append_transaction(commands)),
            )
        }
        "query" => {
            let query = obj
                .get("query")
                .and_then(Value::as_object)
                .ok_or("query step without `query`")?;
            let method = query
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or_default();
            (
                format!("query {method}"),
                "result",
                run_query(machine, query)?,
            )
        }
        "snapshot" => (op.clone(), "snapshot", to_value(&machine.snapshot())),
        "restore" => {
            let snapshot: StreamSnapshot = arg(obj, "snapshot")?;
            let result = match StreamStateMachine::restore(snapshot) {
                Ok(restored) => {
                    *machine = restored;
                    serde_json::json!({"Ok": null})
                }
                Err(e) => serde_json::json!({"Err": e.to_string()}),
            };
            (op.clone(), "result", result)
        }
        other => return Err(format!("unknown op `{other}`")),
    };
    let mut expected = obj.get(expected_key).cloned().unwrap_or(Value::Null);
    let mut actual = actual;
    normalize(&mut expected);
    normalize(&mut actual);
    Ok((label, expected, actual))
}

/// Replays a trace on a fresh machine, stopping at the first mismatch.
pub fn replay(trace: &Trace) -> TraceOutcome {
    let mut machine = StreamStateMachine::new();
    for (i, step) in trace.steps.iter().enumerate() {
        let mismatch = match run_step(&mut machine, step) {
            Ok((_, expected, actual)) if expected == actual => None,
            Ok((op, expected, actual)) => Some(Mismatch {
                step: i,
                op,
                expected,
                actual,
            }),
            Err(e) => Some(Mismatch {
                step: i,
                op: step
                    .get("op")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_owned(),
                expected: step.clone(),
                actual: Value::String(format!("replay error: {e}")),
            }),
        };
        if let Some(m) = mismatch {
            return TraceOutcome {
                matched_steps: i,
                total_steps: trace.steps.len(),
                mismatch: Some(m),
            };
        }
    }
    TraceOutcome {
        matched_steps: trace.steps.len(),
        total_steps: trace.steps.len(),
        mismatch: None,
    }
}
