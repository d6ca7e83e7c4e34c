//! Replays every golden trace of the vendored corpus
//! (`tests/conformance/traces.tar.zst`, or the `*.json` files of
//! `STRAND_CONFORMANCE_DIR`) and compares each step with the recording.
//!
//! Ratchet: `tests/conformance-known-failures.txt` lists traces allowed to
//! fail while the state machine is being completed. An unlisted failure
//! fails the test, and so does a listed trace that now passes (so the list
//! only shrinks).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use strand_tests::{load_traces, replay, trace_source};

fn known_failures() -> BTreeSet<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance-known-failures.txt");
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

fn truncate(s: String) -> String {
    const MAX: usize = 4000;
    if s.len() <= MAX {
        return s;
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

#[test]
fn conformance_corpus() {
    let source = trace_source();
    let traces = match load_traces(&source) {
        Ok(t) => t,
        Err(e) => panic!("conformance corpus unavailable: {e}"),
    };
    assert!(!traces.is_empty(), "no traces found in {source}");
    let known = known_failures();

    let mut per_profile: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let (mut passed, mut steps_matched, mut steps_total) = (0usize, 0usize, 0usize);
    let mut unexpected_failures = Vec::new();
    let mut now_passing = Vec::new();
    let mut failing = BTreeSet::new();
    for trace in &traces {
        let outcome = replay(trace);
        steps_matched += outcome.matched_steps;
        steps_total += outcome.total_steps;
        let entry = per_profile.entry(trace.profile.clone()).or_default();
        entry.1 += 1;
        match &outcome.mismatch {
            None => {
                passed += 1;
                entry.0 += 1;
                if known.contains(&trace.name) {
                    now_passing.push(trace.name.clone());
                }
            }
            Some(m) => {
                failing.insert(trace.name.clone());
                if !known.contains(&trace.name) {
                    unexpected_failures.push(format!(
                        "trace {} step {} ({}):\n  expected: {}\n  actual:   {}",
                        trace.name,
                        m.step,
                        m.op,
                        truncate(m.expected.to_string()),
                        truncate(m.actual.to_string()),
                    ));
                }
            }
        }
    }
    for (profile, (ok, total)) in &per_profile {
        println!("  {profile:<14} {ok:>3}/{total}");
    }
    if std::env::var_os("STRAND_CONFORMANCE_PRINT_FAILING").is_some() {
        for name in &failing {
            println!("failing: {name}");
        }
    }
    for failure in unexpected_failures.iter().take(5) {
        println!("{failure}");
    }
    println!(
        "conformance: {passed}/{} traces passed, {steps_matched}/{steps_total} steps matched",
        traces.len()
    );
    assert!(
        unexpected_failures.is_empty(),
        "{} trace(s) failed that are not in tests/conformance-known-failures.txt",
        unexpected_failures.len()
    );
    assert!(
        now_passing.is_empty(),
        "these traces pass now; remove them from tests/conformance-known-failures.txt: {}",
        now_passing.join(", ")
    );
}

/// Every `snapshot` step's recorded snapshot survives the binary codec
/// unchanged, and the streaming JSON encoder writes exactly serde JSON.
#[test]
fn codec_corpus_round_trip() {
    use strand::StreamSnapshot;
    use strand_snapshot::{
        CollectSink, DecodeLimits, decode_binary, decode_json_slice, encode_binary, encode_json,
    };

    let source = trace_source();
    let traces = match load_traces(&source) {
        Ok(t) => t,
        Err(e) => panic!("conformance corpus unavailable: {e}"),
    };
    let (mut total, mut ok) = (0usize, 0usize);
    let mut failures = Vec::new();
    for trace in &traces {
        for (i, step) in trace.steps.iter().enumerate() {
            if step.get("op").and_then(|op| op.as_str()) != Some("snapshot") {
                continue;
            }
            total += 1;
            let Some(value) = step.get("snapshot") else {
                failures.push(format!("{} step {i}: no `snapshot` field", trace.name));
                continue;
            };
            let snap: StreamSnapshot = match serde_json::from_value(value.clone()) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!(
                        "{} step {i}: not a StreamSnapshot: {e}",
                        trace.name
                    ));
                    continue;
                }
            };
            let mut bin = Vec::new();
            if let Err(e) = encode_binary(&mut bin, &snap, &snap.streams) {
                failures.push(format!("{} step {i}: binary encode: {e}", trace.name));
                continue;
            }
            let mut sink = CollectSink::new();
            if let Err(e) = decode_binary(bin.as_slice(), &mut sink, &DecodeLimits::default()) {
                failures.push(format!("{} step {i}: binary decode: {e}", trace.name));
                continue;
            }
            if sink.into_snapshot() != snap {
                failures.push(format!(
                    "{} step {i}: binary round trip differs",
                    trace.name
                ));
                continue;
            }
            let mut json = Vec::new();
            let encoded = encode_json(&mut json, &snap, &snap.streams);
            if encoded.is_err() || serde_json::to_vec(&snap).ok().as_ref() != Some(&json) {
                failures.push(format!(
                    "{} step {i}: JSON encoder differs from serde_json",
                    trace.name
                ));
                continue;
            }
            if decode_json_slice(&json).ok().as_ref() != Some(&snap) {
                failures.push(format!(
                    "{} step {i}: JSON decoder differs from serde_json",
                    trace.name
                ));
                continue;
            }
            ok += 1;
        }
    }
    for failure in failures.iter().take(5) {
        println!("{failure}");
    }
    println!("codec: {ok}/{total} corpus snapshots round-tripped");
    assert!(total > 0, "no snapshot steps in {source}");
    assert!(
        failures.is_empty(),
        "{} snapshot(s) failed the codec round trip",
        failures.len()
    );
}
