//! `cargo xtask bench`: runs strand-machine's benches (release), reads
//! divan's tables and the `BENCH name=value unit` lines the bench binaries
//! print, and prints one table: metric | strand | target | reference | met.
//!
//! The reference figures are those the performance issue quotes for
//! `ursula-stream`; the targets are the issue's. Timings use divan's median.
//! The raw output is kept in `target/xtask-bench.txt`.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};

/// The bench targets of `crates/strand-machine/benches`, in run order.
const BENCHES: [&str; 5] = ["memory", "append", "flush_plan", "snapshot", "producer"];

/// Runs the benches and prints the summary table.
pub(crate) fn bench(root: &Path) -> Result<(), String> {
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root)
        .args(["bench", "--package", "strand-machine"]);
    for name in BENCHES {
        cmd.args(["--bench", name]);
    }
    cmd.args(["--", "--color", "never"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let shown = format!("{cmd:?}");
    println!("==> {shown}");
    let output = cmd
        .output()
        .map_err(|e| format!("could not start {shown}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let raw = root.join("target").join("xtask-bench.txt");
    if let Err(e) = std::fs::write(&raw, &stdout) {
        eprintln!(
            "xtask: could not keep the raw output in {}: {e}",
            raw.display()
        );
    }
    if !output.status.success() {
        print!("{stdout}");
        return Err(format!("{shown} exited with {}", output.status));
    }
    let figures = Figures::parse(&stdout);
    let (table, missing) = summary(&figures);
    println!();
    print!("{table}");
    println!();
    println!("raw bench output: {}", raw.display());
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "figures missing from the bench output: {}",
            missing.join(", ")
        ))
    }
}

/// Everything the bench output told: divan medians (ns) by
/// `binary/path/of/bench` and custom figures by name.
#[derive(Debug, Default)]
struct Figures {
    medians_ns: BTreeMap<String, f64>,
    custom: BTreeMap<String, f64>,
}

impl Figures {
    fn parse(output: &str) -> Self {
        let mut figures = Figures::default();
        // The current divan table's binary name, then one name per depth.
        let mut path: Vec<String> = Vec::new();
        for line in output.lines() {
            if let Some(rest) = line.strip_prefix("BENCH ") {
                if let Some((name, value)) = parse_custom(rest) {
                    figures.custom.insert(name, value);
                }
                continue;
            }
            if line.contains("fastest") && line.contains("median") {
                // Header row: `<binary>   fastest │ slowest │ median …`.
                if let Some(binary) = line.split_whitespace().next() {
                    path = vec![binary.to_owned()];
                }
                continue;
            }
            if path.is_empty() {
                continue;
            }
            let Some((depth, name, median)) = parse_row(line) else {
                continue;
            };
            path.truncate(depth);
            path.push(name);
            if let Some(ns) = median {
                figures.medians_ns.insert(path.join("/"), ns);
            }
        }
        figures
    }

    fn median(&self, key: &str, missing: &mut Vec<String>) -> Option<f64> {
        let found = self.medians_ns.get(key).copied();
        if found.is_none() {
            missing.push(key.to_owned());
        }
        found
    }

    fn custom(&self, key: &str, missing: &mut Vec<String>) -> Option<f64> {
        let found = self.custom.get(key).copied();
        if found.is_none() {
            missing.push(format!("BENCH {key}"));
        }
        found
    }
}

/// `name=value unit` → `(name, value)`.
fn parse_custom(rest: &str) -> Option<(String, f64)> {
    let (name, value) = rest.split_once('=')?;
    let value = value.split_whitespace().next()?.parse().ok()?;
    Some((name.trim().to_owned(), value))
}

/// One divan tree row: `(depth, name, median in ns if the row has times)`.
/// Rows look like `├─ name   1.2 µs │ 3.4 µs │ 1.5 µs │ 1.6 µs │ 50 │ 100`,
/// nested rows carry one more `│  ` or `   ` per level.
fn parse_row(line: &str) -> Option<(usize, String, Option<f64>)> {
    let tree_chars = ['│', '├', '╰', '─', ' '];
    let prefix_len = line
        .char_indices()
        .find(|(_, c)| !tree_chars.contains(c))
        .map(|(i, _)| i)?;
    let prefix = &line[..prefix_len];
    // Counter rows (throughput) have no `─ ` right before the text.
    if !prefix.ends_with("─ ") {
        return None;
    }
    let depth = prefix.chars().count() / 3;
    let rest = &line[prefix_len..];
    let cells: Vec<&str> = rest.split('│').collect();
    let name = cells.first()?.split_whitespace().next()?.to_owned();
    let median = cells.get(2).and_then(|cell| parse_duration_ns(cell));
    Some((depth, name, median))
}

/// `"1.234 µs"` → 1234.0 (nanoseconds).
fn parse_duration_ns(cell: &str) -> Option<f64> {
    let mut parts = cell.split_whitespace();
    let value: f64 = parts.next()?.parse().ok()?;
    let scale = match parts.next()? {
        "ps" => 1e-3,
        "ns" => 1.0,
        "µs" | "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return None,
    };
    Some(value * scale)
}

/// Whether a figure meets its target.
#[derive(Clone, Copy)]
enum Met {
    Yes,
    No,
    NoTarget,
}

impl Met {
    fn check(ok: bool) -> Self {
        if ok { Met::Yes } else { Met::No }
    }

    fn text(self) -> &'static str {
        match self {
            Met::Yes => "yes",
            Met::No => "NO",
            Met::NoTarget => "",
        }
    }
}

/// One row of the summary table.
struct Row {
    metric: &'static str,
    strand: String,
    target: &'static str,
    reference: &'static str,
    met: Met,
}

fn row(
    metric: &'static str,
    value: Option<(String, Met)>,
    target: &'static str,
    reference: &'static str,
) -> Row {
    let (strand, met) = value.unwrap_or_else(|| ("n/a".to_owned(), Met::NoTarget));
    Row {
        metric,
        strand,
        target,
        reference,
        met,
    }
}

/// Builds the table; also returns the figures that were missing.
fn summary(f: &Figures) -> (String, Vec<String>) {
    let mut missing = Vec::new();
    let m = &mut missing;
    let mut rows = Vec::new();

    for (metric, ratio_metric, key, reference) in [
        (
            "inline 100 B appends/s, no producer",
            "  append / integrity floor, no producer",
            "inline_100b_no_producer",
            "~300 k/s",
        ),
        (
            "inline 100 B appends/s, producer, 10 % retries",
            "  append / integrity floor, producer, 10 % retries",
            "inline_100b_producer_10pct_retries",
            "",
        ),
        (
            "inline 100 B appends/s, JSON, 3 records each",
            "  append / integrity floor, JSON, 3 records each",
            "inline_100b_json_3_records",
            "",
        ),
    ] {
        let append = f.median(&format!("append/{key}"), m);
        let floor = f.median(&format!("append/floor_{key}"), m);
        let value = append.map(|ns| (format!("{} ({})", rate(ns), duration(ns)), Met::NoTarget));
        rows.push(row(metric, value, "", reference));
        rows.push(row(
            ratio_metric,
            floor_ratio(append, floor, SMALL_APPEND_FLOOR_TARGET),
            "<= 1.3x",
            "2.5-3.0x",
        ));
        // The same ratio from interleaved sample pairs (append sample, floor
        // sample, back to back), immune to the machine's drift between
        // divan's two benches.
        let interleaved = f.custom(&format!("interleaved_floor_ratio_{key}"), m);
        rows.push(row(
            "    the same, interleaved sample pairs (median)",
            interleaved.map(|r| {
                (
                    format!("{r:.2}x"),
                    Met::check(r <= SMALL_APPEND_FLOOR_TARGET),
                )
            }),
            "<= 1.3x",
            "",
        ));
    }

    let allocs = f.custom("allocs_per_inline_append_no_producer", m);
    rows.push(row(
        "allocations per inline append, no producer",
        allocs.map(|a| (format!("{a:.2}"), Met::check(a <= 1.0))),
        "<= 1",
        "5",
    ));
    for (metric, key) in [
        (
            "allocations per inline append, producer",
            "allocs_per_inline_append_producer",
        ),
        (
            "allocations per inline append, JSON",
            "allocs_per_inline_append_json",
        ),
    ] {
        let value = f.custom(key, m).map(|a| (format!("{a:.2}"), Met::NoTarget));
        rows.push(row(metric, value, "", ""));
    }

    let append_64k = f.median("append/append_64k", m);
    let floor_64k = f.median("append/setsum_floor_64k", m);
    let ratio_64k = floor_ratio(append_64k, floor_64k, LARGE_APPEND_FLOOR_TARGET);
    rows.push(row(
        "64 KiB append / setsum floor",
        ratio_64k,
        "<= 1.05x",
        "1.20x (SHA3 floor)",
    ));

    let plan = |n: &str, m: &mut Vec<String>| {
        f.median(&format!("flush_plan/plan_next_cold_flush_batch/{n}"), m)
    };
    let plan_1k = plan("1000", m);
    let plan_10k = plan("10000", m);
    let plan_50k = plan("50000", m);
    rows.push(row(
        "flush planning per call, 1 k streams",
        plan_1k.map(|ns| (duration(ns), Met::NoTarget)),
        "",
        "",
    ));
    rows.push(row(
        "flush planning per call, 10 k streams",
        plan_10k.map(|ns| (duration(ns), Met::check(ns < 10e6))),
        "< 10 ms",
        "4.7 s",
    ));
    rows.push(row(
        "flush planning per call, 50 k streams",
        plan_50k.map(|ns| (duration(ns), Met::NoTarget)),
        "",
        "",
    ));
    rows.push(row(
        "flush planning ratio 50 k / 1 k",
        plan_50k.zip(plan_1k).map(|(a, b)| {
            let r = a / b;
            (format!("{r:.1}"), Met::check(r < 60.0))
        }),
        "< 60",
        "137",
    ));

    let json_bytes = f.custom("snapshot_json_bytes", m);
    for (metric, key) in [
        (
            "snapshot + JSON encode, write_snapshot (10 k x 2 KiB)",
            "snapshot/snapshot_encode_json",
        ),
        (
            "JSON decode + restore, restore_from_slice (10 k x 2 KiB)",
            "snapshot/snapshot_decode_restore_json",
        ),
    ] {
        let value = f.median(key, m).zip(json_bytes).map(|(ns, bytes)| {
            let mib_s = bytes / (1024.0 * 1024.0) / (ns / 1e9);
            (
                format!("{mib_s:.0} MiB/s ({})", duration(ns)),
                Met::check(mib_s >= 400.0),
            )
        });
        rows.push(row(metric, value, ">= 400 MiB/s", "~190 MiB/s"));
    }
    for (metric, key) in [
        (
            "snapshot() + plain serde_json::to_vec",
            "snapshot/snapshot_encode_serde_json",
        ),
        (
            "plain serde_json::from_slice + restore()",
            "snapshot/snapshot_decode_restore_serde_json",
        ),
    ] {
        let value = f.median(key, m).zip(json_bytes).map(|(ns, bytes)| {
            let mib_s = bytes / (1024.0 * 1024.0) / (ns / 1e9);
            (
                format!("{mib_s:.0} MiB/s ({})", duration(ns)),
                Met::NoTarget,
            )
        });
        rows.push(row(metric, value, "", "~190 MiB/s"));
    }

    for (metric, key) in [
        (
            "allocations per stream, write_snapshot JSON",
            "allocs_per_stream_write_snapshot_json",
        ),
        (
            "allocations per stream, write_snapshot binary",
            "allocs_per_stream_write_snapshot_binary",
        ),
    ] {
        let value = f.custom(key, m).map(|a| (format!("{a:.1}"), Met::NoTarget));
        rows.push(row(metric, value, "", ""));
    }

    let binary_bytes = f.custom("snapshot_binary_bytes", m);
    rows.push(row(
        "snapshot size, JSON / binary (10 k x 2 KiB)",
        json_bytes.zip(binary_bytes).map(|(j, b)| {
            let mib = 1024.0 * 1024.0;
            (
                format!("{:.1} MiB / {:.1} MiB", j / mib, b / mib),
                Met::NoTarget,
            )
        }),
        "",
        "",
    ));
    for (metric, key) in [
        (
            "binary snapshot encode (write_snapshot)",
            "snapshot/snapshot_encode_binary",
        ),
        (
            "binary decode + restore (restore_from)",
            "snapshot/snapshot_decode_restore_binary",
        ),
    ] {
        let value = f.median(key, m).zip(binary_bytes).map(|(ns, bytes)| {
            let mib_s = bytes / (1024.0 * 1024.0) / (ns / 1e9);
            (
                format!("{mib_s:.0} MiB/s ({})", duration(ns)),
                Met::NoTarget,
            )
        });
        rows.push(row(metric, value, "", ""));
    }

    // Issue #13: strand's own codec at least 3x the serde path it
    // replaces, both timed in the same bench run.
    for (metric, fast, slow) in [
        (
            "write_snapshot binary vs snapshot() + serde_json",
            "snapshot/snapshot_encode_binary",
            "snapshot/snapshot_encode_serde_json",
        ),
        (
            "restore_from binary vs serde_json + restore()",
            "snapshot/snapshot_decode_restore_binary",
            "snapshot/snapshot_decode_restore_serde_json",
        ),
    ] {
        let value = f
            .median(fast, m)
            .zip(f.median(slow, m))
            .map(|(fast, slow)| {
                let speedup = slow / fast;
                (format!("{speedup:.2}x faster"), Met::check(speedup >= 3.0))
            });
        rows.push(row(metric, value, ">= 3x", ""));
    }

    let per_stream = f.custom("heap_bytes_per_empty_stream", m);
    rows.push(row(
        "heap bytes per empty stream",
        per_stream.map(|b| (format!("{b:.0} B"), Met::check(b <= 300.0))),
        "<= 300 B",
        "954 B",
    ));
    let per_receipt = f.custom("heap_bytes_per_receipt", m);
    rows.push(row(
        "heap bytes per producer receipt",
        per_receipt.map(|b| (format!("{b:.0} B"), Met::check(b <= 80.0))),
        "<= 80 B",
        "219 B",
    ));
    let per_chunk = f.custom("heap_bytes_per_cold_chunk", m);
    rows.push(row(
        "heap bytes per stored cold chunk",
        per_chunk.map(|b| (format!("{b:.0} B"), Met::check(b <= 120.0))),
        "<= 120 B",
        "",
    ));

    let retry_big = f.median("producer/retry_200k_receipts", m);
    let retry_small = f.median("producer/retry_10_receipts", m);
    rows.push(row(
        "producer retries/s, 200 k receipts",
        retry_big.map(|ns| (format!("{} ({})", rate(ns), duration(ns)), Met::NoTarget)),
        "",
        "~5 k/s",
    ));
    rows.push(row(
        "producer retries/s, 10 receipts",
        retry_small.map(|ns| (format!("{} ({})", rate(ns), duration(ns)), Met::NoTarget)),
        "",
        "",
    ));
    // "Flat" = the retry cost does not grow with the history: 20 000x the
    // receipts may cost a few cache misses more, not a scan. We accept up
    // to 5x (a linear scan would be thousands of times slower).
    rows.push(row(
        "retry cost, 200 k / 10 receipts",
        retry_big.zip(retry_small).map(|(a, b)| {
            let r = a / b;
            (format!("{r:.1}x"), Met::check(r <= 5.0))
        }),
        "flat (<= 5x)",
        "",
    ));

    (render(&rows), missing)
}

/// Target of the small appends' ratio to their integrity floor.
const SMALL_APPEND_FLOOR_TARGET: f64 = 1.3;
/// Target of the 64 KiB append's ratio to its integrity floor.
const LARGE_APPEND_FLOOR_TARGET: f64 = 1.05;

/// `append / floor` (both medians in ns, from the same run) as
/// `1.23x (append / floor)`, met when at most `target`.
fn floor_ratio(append: Option<f64>, floor: Option<f64>, target: f64) -> Option<(String, Met)> {
    append.zip(floor).map(|(a, fl)| {
        let r = a / fl;
        (
            format!("{r:.2}x ({} / {})", duration(a), duration(fl)),
            Met::check(r <= target),
        )
    })
}

/// Renders rows as a Markdown-style table.
fn render(rows: &[Row]) -> String {
    let header = ["metric", "strand", "target", "reference", "met"];
    let cells: Vec<[&str; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.metric,
                r.strand.as_str(),
                r.target,
                r.reference,
                r.met.text(),
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for line in &cells {
        for (w, cell) in widths.iter_mut().zip(line) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("| {} |\n", padded.join(" | "))
    };
    let mut out = line(header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&format!("|-{}-|\n", rule.join("-|-")));
    for c in cells {
        out.push_str(&line(c));
    }
    out
}

/// Operations per second for a median of `ns` per operation.
fn rate(ns: f64) -> String {
    let per_s = 1e9 / ns;
    if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e3 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.1} /s")
    }
}

/// A duration in ns, in a readable unit.
fn duration(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "\
BENCH snapshot_json_bytes=1048576 bytes
Timer precision: 17 ns
flush_plan                     fastest       │ slowest       │ median        │ mean          │ samples │ iters
╰─ plan_next_cold_flush_batch                │               │               │               │         │
   ├─ 1000                     318.4 µs      │ 1.559 ms      │ 360.6 µs      │ 560.2 µs      │ 10      │ 10
   ╰─ 50000                    6.546 ms      │ 12.26 ms      │ 11.22 ms      │ 10.93 ms      │ 10      │ 10
append                                 fastest       │ slowest       │ median        │ mean          │ samples │ iters
├─ append_64k                          138.2 µs      │ 638.6 µs      │ 159.1 µs      │ 241.8 µs      │ 40      │ 1000
│  ╰─ nested                           1 ns          │ 2 ns          │ 3 ns          │ 4 ns          │ 1       │ 1
╰─ setsum_floor_64k                    144.9 µs      │ 158.4 µs      │ 151.6 µs      │ 151.8 µs      │ 40      │ 1000
";

    /// `value` is `Some` and within 1e-9 (relative) of `expected`.
    fn close(value: Option<f64>, expected: f64) -> bool {
        value.is_some_and(|v| (v - expected).abs() <= expected.abs() * 1e-9)
    }

    #[test]
    fn parses_divan_tables_and_custom_lines() {
        let f = Figures::parse(SAMPLE);
        assert!(close(
            f.custom.get("snapshot_json_bytes").copied(),
            1_048_576.0
        ));
        let get = |k: &str| f.medians_ns.get(k).copied();
        assert!(close(
            get("flush_plan/plan_next_cold_flush_batch/1000"),
            360_600.0
        ));
        assert!(close(
            get("flush_plan/plan_next_cold_flush_batch/50000"),
            11_220_000.0
        ));
        assert!(close(get("append/append_64k"), 159_100.0));
        assert!(close(get("append/append_64k/nested"), 3.0));
        assert!(close(get("append/setsum_floor_64k"), 151_600.0));
        // A parent row without times has no median; 5 rows carry one.
        assert!(
            !f.medians_ns
                .contains_key("flush_plan/plan_next_cold_flush_batch")
        );
        assert_eq!(f.medians_ns.len(), 5);
    }

    #[test]
    fn durations_convert_to_ns() {
        assert!(close(parse_duration_ns(" 1.5 s "), 1.5e9));
        assert!(close(parse_duration_ns("2 ms"), 2e6));
        assert!(close(parse_duration_ns("3 µs"), 3e3));
        assert!(close(parse_duration_ns("4 ns"), 4.0));
        assert_eq!(parse_duration_ns(""), None);
        assert_eq!(parse_duration_ns("5 parsecs"), None);
    }
}
