//! Replays every saved fuzz input of `fuzz/regressions/<target>/` through
//! the same check the fuzz target runs (`fuzz/checks/<target>.rs`, compiled
//! in here as a module), so a crash the fuzzer found stays fixed without
//! cargo-fuzz. `cargo xtask fuzz` runs the targets themselves.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

#[path = "../../fuzz/checks/binary_decode.rs"]
mod binary_decode;
#[path = "../../fuzz/checks/command_sequence.rs"]
mod command_sequence;
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
    for path in inputs(target) {
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
