//! Every `spec NN §X.Y` citation in the workspace's Rust sources names a
//! file of the vendored behavioural spec (`docs/spec/NN-*.md`) and, when
//! it gives a section, a heading of that file numbered `X.Y`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The section numbers of each spec file's headings, by its two digits.
fn spec_sections() -> BTreeMap<String, BTreeSet<String>> {
    let mut out = BTreeMap::new();
    let dir = root().join("docs/spec");
    for entry in std::fs::read_dir(&dir).expect("docs/spec is vendored") {
        let path = entry.expect("a readable entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let Some(area) = name
            .get(..2)
            .filter(|a| a.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let text = std::fs::read_to_string(&path).expect("a readable spec file");
        let sections = text
            .lines()
            .filter_map(|line| line.strip_prefix('#'))
            .map(|heading| heading.trim_start_matches('#').trim())
            .filter_map(|heading| {
                let number: String = heading
                    .chars()
                    .take_while(|c| c.is_ascii_digit() || *c == '.')
                    .collect();
                let number = number.trim_end_matches('.');
                (!number.is_empty()).then(|| number.to_owned())
            })
            .collect();
        out.insert(area.to_owned(), sections);
    }
    out
}

/// The Rust files under `dir`, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each citation of `line`: the area's two digits and the section, if any.
fn citations(line: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("spec ") {
        rest = &rest[at + 5..];
        let area: String = rest.chars().take(2).collect();
        if area.len() != 2 || !area.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let after = &rest[2..];
        let section = after.strip_prefix(" §").map(|s| {
            s.chars()
                .take_while(|c| c.is_ascii_digit() || *c == '.')
                .collect::<String>()
                .trim_end_matches('.')
                .to_owned()
        });
        out.push((area, section.filter(|s| !s.is_empty())));
    }
    out
}

#[test]
fn every_spec_citation_names_a_vendored_section() {
    let sections = spec_sections();
    assert!(sections.len() >= 8, "docs/spec holds {sections:?}");
    let mut files = Vec::new();
    for dir in ["crates", "xtask", "tests/src", "tests/tests", "fuzz/checks"] {
        rust_files(&root().join(dir), &mut files);
    }
    let mut seen = 0;
    let mut unresolved = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (number, line) in text.lines().enumerate() {
            for (area, section) in citations(line) {
                seen += 1;
                let known = sections
                    .get(&area)
                    .is_some_and(|s| section.as_ref().is_none_or(|section| s.contains(section)));
                if !known {
                    unresolved.push(format!(
                        "{}:{}: spec {area} §{}",
                        file.display(),
                        number + 1,
                        section.unwrap_or_default()
                    ));
                }
            }
        }
    }
    assert!(
        seen > 100,
        "only {seen} citations found: is the scan broken?"
    );
    assert!(unresolved.is_empty(), "{}", unresolved.join("\n"));
}

#[test]
fn citations_are_read_as_written() {
    assert_eq!(
        citations("see spec 02 §2.5 and spec 07 §5. Also spec 08."),
        vec![
            ("02".to_owned(), Some("2.5".to_owned())),
            ("07".to_owned(), Some("5".to_owned())),
            ("08".to_owned(), None),
        ]
    );
    assert!(citations("the spec says, spec x").is_empty());
}
