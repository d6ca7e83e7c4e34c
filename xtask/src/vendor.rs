//! `cargo xtask vendor-conformance [DIR]`: refreshes the vendored
//! conformance corpus `tests/conformance/` from a directory laid out like
//! `../shared/conformance` (`FORMAT.md`, `SUMMARY.md`, `traces/*.json`).
//!
//! The traces become one `traces.tar.zst`: a ustar archive of
//! `traces/<name>.json` in file-name order, every header with mode 0644,
//! owner 0:0 and mtime 0, compressed by libzstd at level 19 in one frame
//! with a checksum. The same input gives the same bytes (for a given zstd
//! version, which `Cargo.lock` pins). The tests read it with `ruzstd`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The vendored copy, relative to the workspace root.
const VENDORED: &str = "tests/conformance";
/// The archive holding the traces, inside [`VENDORED`].
const ARCHIVE: &str = "traces.tar.zst";
/// The documents copied beside it.
const DOCUMENTS: [&str; 2] = ["FORMAT.md", "SUMMARY.md"];
/// libzstd's compression level: 19 packs the 38 MB corpus into under 2 MB.
const ZSTD_LEVEL: i32 = 19;

/// `cargo xtask vendor-conformance [DIR]`.
pub(crate) fn vendor_conformance(root: &Path, args: &[String]) -> Result<(), String> {
    let source = match args {
        [] => root.join("../shared/conformance"),
        [dir] if !dir.starts_with('-') => PathBuf::from(dir),
        _ => return Err("usage: cargo xtask vendor-conformance [DIR]".into()),
    };
    // Shown without `..` when it exists; a missing DIR fails below.
    let source = fs::canonicalize(&source).unwrap_or(source);
    let out = root.join(VENDORED);
    fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;

    let traces = read_traces(&source.join("traces"))?;
    let tar = tar_traces(&traces)?;
    let compressed = zstd_compress(&tar)?;
    let mut changed = Vec::new();
    for name in DOCUMENTS {
        let from = source.join(name);
        let bytes = fs::read(&from).map_err(|e| format!("cannot read {}: {e}", from.display()))?;
        if write_if_changed(&out.join(name), &bytes)? {
            changed.push(name);
        }
    }
    if write_if_changed(&out.join(ARCHIVE), &compressed)? {
        changed.push(ARCHIVE);
    }
    let raw: usize = traces.iter().map(|(_, bytes)| bytes.len()).sum();
    println!(
        "vendored {} traces ({:.1} MiB) from {} into {VENDORED}/{ARCHIVE} ({:.2} MiB)",
        traces.len(),
        mib(raw),
        source.display(),
        mib(compressed.len())
    );
    if changed.is_empty() {
        println!("{VENDORED} was already up to date");
    } else {
        println!("changed: {}", changed.join(", "));
    }
    Ok(())
}

fn mib(bytes: usize) -> f64 {
    // Display only; corpus sizes are far below f64's exact integer range.
    bytes as f64 / (1024.0 * 1024.0)
}

/// Every `*.json` file of `dir` as (file name, bytes), sorted by name.
fn read_traces(dir: &Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let entries =
        fs::read_dir(dir).map_err(|e| format!("cannot read trace dir {}: {e}", dir.display()))?;
    let mut traces = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        if !path.is_file() || path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("{} has a non-UTF-8 name", path.display()))?
            .to_owned();
        let bytes = fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        traces.push((name, bytes));
    }
    if traces.is_empty() {
        return Err(format!("no *.json traces in {}", dir.display()));
    }
    traces.sort();
    Ok(traces)
}

/// A ustar archive of `traces/<name>` entries with fixed metadata.
fn tar_traces(traces: &[(String, Vec<u8>)]) -> Result<Vec<u8>, String> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in traces {
        let member = format!("traces/{name}");
        let mut header = tar::Header::new_ustar();
        header
            .set_path(&member)
            .map_err(|e| format!("cannot name tar entry {member}: {e}"))?;
        header.set_entry_type(tar::EntryType::Regular);
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_cksum();
        builder
            .append(&header, bytes.as_slice())
            .map_err(|e| format!("cannot add {member} to the tar: {e}"))?;
    }
    builder
        .into_inner()
        .map_err(|e| format!("cannot finish the tar: {e}"))
}

/// One zstd frame at [`ZSTD_LEVEL`], with a content checksum.
fn zstd_compress(data: &[u8]) -> Result<Vec<u8>, String> {
    let mut encoder = zstd::stream::write::Encoder::new(Vec::new(), ZSTD_LEVEL)
        .map_err(|e| format!("zstd: {e}"))?;
    encoder
        .include_checksum(true)
        .map_err(|e| format!("zstd: {e}"))?;
    encoder
        .set_pledged_src_size(Some(data.len() as u64))
        .map_err(|e| format!("zstd: {e}"))?;
    encoder.write_all(data).map_err(|e| format!("zstd: {e}"))?;
    encoder.finish().map_err(|e| format!("zstd: {e}"))
}

/// Writes `bytes` to `path` through a temporary file beside it, unless the
/// file already holds exactly them. Returns whether it wrote.
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<bool, String> {
    if fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(false);
    }
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    fs::rename(&tmp, path)
        .map_err(|e| format!("cannot move {} to {}: {e}", tmp.display(), path.display()))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_is_deterministic() -> Result<(), String> {
        let traces = vec![
            ("a.json".to_owned(), b"{\"name\":\"a\"}".to_vec()),
            ("b.json".to_owned(), b"{\"name\":\"b\"}".to_vec()),
        ];
        let first = zstd_compress(&tar_traces(&traces)?)?;
        let second = zstd_compress(&tar_traces(&traces)?)?;
        assert_eq!(first, second);
        let tar = zstd::stream::decode_all(first.as_slice()).map_err(|e| e.to_string())?;
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut names = Vec::new();
        for entry in archive.entries().map_err(|e| e.to_string())? {
            let entry = entry.map_err(|e| e.to_string())?;
            assert_eq!(entry.header().mtime().map_err(|e| e.to_string())?, 0);
            names.push(
                entry
                    .path()
                    .map_err(|e| e.to_string())?
                    .display()
                    .to_string(),
            );
        }
        assert_eq!(names, ["traces/a.json", "traces/b.json"]);
        Ok(())
    }
}
