//! Replays every saved fuzz input of `fuzz/regressions/<target>/` through
//! the same check the fuzz target runs (`fuzz/checks/<target>.rs`, compiled
//! in here as a module), so a crash the fuzzer found stays fixed without
//! cargo-fuzz. `cargo xtask fuzz` runs the targets themselves. A target
//! whose directory holds no input fails: each keeps at least one seed.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

#[path = "../../fuzz/checks/binary_decode.rs"]
mod binary_decode;
#[path = "../../fuzz/checks/command_sequence.rs"]
mod command_sequence;
#[path = "../../fuzz/checks/http_request.rs"]
mod http_request;
#[path = "../../fuzz/checks/json_restore.rs"]
mod json_restore;

fn inputs(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/regressions")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_file()
                && p.file_name()
                    .is_some_and(|n| n != ".gitkeep" && n != "README.md")
        })
        .collect();
    files.sort();
    files
}

fn replay(target: &str, check: fn(&[u8])) {
    let inputs = inputs(target);
    assert!(
        !inputs.is_empty(),
        "fuzz/regressions/{target}/ holds no input: keep at least one seed there"
    );
    for path in inputs {
        let data = std::fs::read(&path).unwrap();
        println!("{target}: replaying {}", path.display());
        check(&data);
    }
}

#[test]
fn binary_decode_regressions() {
    replay("binary_decode", binary_decode::check);
}

#[test]
fn json_restore_regressions() {
    replay("json_restore", json_restore::check);
}

#[test]
fn command_sequence_regressions() {
    replay("command_sequence", command_sequence::check);
}

#[test]
fn http_request_regressions() {
    replay("http_request", http_request::check);
}

/// The command vocabulary must be one the machine accepts: with all
/// operands zero (the plain choice), a create of each of the four streams
/// and an append to each succeed. (A vocabulary of invalid ids once made
/// the target fuzz only rejections.)
#[test]
fn command_sequence_vocabulary_is_accepted() {
    let record = |kind: u8, stream: u8| {
        let mut r = [0u8; command_sequence::RECORD];
        r[0] = kind;
        r[1] = stream;
        r
    };
    let mut data = Vec::new();
    for stream in 0..4 {
        data.extend_from_slice(&record(4, stream)); // CreateStream
        data.extend_from_slice(&record(7, stream)); // Append
    }
    let machine = command_sequence::machine_after(&data);
    let snapshot = machine.snapshot();
    assert_eq!(snapshot.buckets.len(), 2, "{snapshot:?}");
    assert_eq!(snapshot.streams.len(), 4, "{snapshot:?}");
    for entry in &snapshot.streams {
        assert!(
            entry.metadata.tail_offset > 0,
            "{}: nothing appended",
            entry.metadata.stream_id
        );
    }
}
