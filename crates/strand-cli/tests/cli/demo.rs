//! `strand demo`.

use crate::common::*;

#[test]
fn runs_without_arguments_and_checks_itself() {
    let output = strand().arg("demo").output().unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let text = stdout_of(&output);
    for expected in [
        "deduplicated\":true",
        "(an error, as expected)",
        "records of acme/events: 0..2",
        "ColdFlushed",
        "SnapshotPublished",
        "RetentionAdvanced",
        "pending cold GC entries: 1",
        ": ok (json): 2 buckets, 3 streams, 23 bytes hot, 1 producers, 1 pending GC entries",
        ": ok (binary): 2 buckets, 3 streams, 23 bytes hot, 1 producers, 1 pending GC entries",
        "both restore to exactly the state above",
        "replaying them on a fresh machine gives the same snapshot: yes",
        "(temporary directory, removed on exit)",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
}

#[test]
fn out_dir_files_work_with_the_other_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    let output = strand()
        .arg("demo")
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    assert_eq!(
        dir_names(&out),
        ["commands.jsonl", "snapshot.bin", "snapshot.json"]
    );

    let output = strand()
        .args(["snapshot", "verify"])
        .arg(out.join("snapshot.json"))
        .arg(out.join("snapshot.bin"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));

    // Replaying the demo's log reproduces its snapshot byte for byte.
    let replayed = dir.path().join("replayed.json");
    let output = strand()
        .arg("replay")
        .arg(out.join("commands.jsonl"))
        .arg("--snapshot-out")
        .arg(&replayed)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr_of(&output));
    let summary = stdout_of(&output);
    assert!(summary.contains("19 commands, 2 errors"), "{summary}");
    assert!(summary.contains("ContentTypeMismatch  1"), "{summary}");
    assert!(summary.contains("QuotaExceeded        1"), "{summary}");
    assert_eq!(
        std::fs::read(&replayed).unwrap(),
        std::fs::read(out.join("snapshot.json")).unwrap()
    );

    // A second run replaces the files.
    let output = strand()
        .arg("demo")
        .arg("--out-dir")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
}
