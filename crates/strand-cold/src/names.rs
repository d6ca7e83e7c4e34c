//! Object names. Every object of a group lives under `g{group:03}/`:
//! a flush that holds one stream's bytes is
//! `g{group}/s/{bucket}/{stream}/{start:020}-{end:020}-{unique:016x}.bin`
//! (the stream's prefix is what a `ColdGcTarget::Stream` entry reclaims),
//! a pack of several streams' bytes is
//! `g{group}/p/{now_ms:013}-{unique:016x}.pack`. The unique suffix makes
//! two uploads never share a name, even for the same range after a retry,
//! a restart, or a stream deleted and created again.

use std::sync::atomic::{AtomicU64, Ordering};

use strand::BucketStreamId;

/// Longest encoded part kept as it is: a file name holds 255 bytes, and a
/// stream's part and its object's name share a path.
const MAX_PART: usize = 96;

/// One name part: `[A-Za-z0-9_-]` kept, every other byte `~XX` (hex), so
/// `.` can separate parts and no part is empty, `.` or `..`. A part whose
/// encoding would pass [`MAX_PART`] bytes becomes `~h` and the first 32 hex
/// digits of its BLAKE3 digest (distinct from every kept encoding, which
/// never has `~h`).
fn encode(part: &str, out: &mut String) {
    if part.is_empty() {
        out.push('~');
        return;
    }
    let long = part
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
                1
            } else {
                3
            }
        })
        .sum::<usize>()
        > MAX_PART;
    if long {
        let hex = blake3::hash(part.as_bytes()).to_hex();
        out.push_str("~h");
        out.push_str(hex.get(..32).unwrap_or_default());
        return;
    }
    for b in part.bytes() {
        if b.is_ascii_alphanumeric() || b == b'_' || b == b'-' {
            out.push(char::from(b));
        } else {
            out.push('~');
            out.push_str(&format!("{b:02X}"));
        }
    }
}

/// The directory of a group's objects.
pub fn group_prefix(group: usize) -> String {
    format!("g{group:03}")
}

/// The directory of one stream's objects (no trailing slash).
pub fn stream_prefix(group: usize, id: &BucketStreamId) -> String {
    let mut out = format!("{}/s/", group_prefix(group));
    encode(&id.bucket_id, &mut out);
    out.push('/');
    if let Some(key) = &id.affinity_key {
        encode(key, &mut out);
        out.push('.');
    }
    encode(&id.stream_id, &mut out);
    out
}

/// A name for one stream's flush of `[start, end)`.
pub fn stream_object(group: usize, id: &BucketStreamId, start: u64, end: u64) -> String {
    format!(
        "{}/{start:020}-{end:020}-{:016x}.bin",
        stream_prefix(group, id),
        unique()
    )
}

/// A name for a pack of several streams' flushes.
pub fn pack_object(group: usize, now_ms: u64) -> String {
    format!(
        "{}/p/{now_ms:013}-{:016x}.pack",
        group_prefix(group),
        unique()
    )
}

/// A process-unique, restart-unique 64-bit value: the clock's nanoseconds
/// and the process id seed a counter, mixed with splitmix64.
fn unique() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let seed = *SEED.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        (nanos as u64) ^ (u64::from(std::process::id()) << 32)
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut z = seed.wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_distinct_and_under_their_prefixes() {
        let a = BucketStreamId::new("b", "s.x/y");
        let b = BucketStreamId::with_affinity("b", "s", "x");
        let pa = stream_prefix(3, &a);
        assert_eq!(pa, "g003/s/b/s~2Ex~2Fy");
        assert_eq!(stream_prefix(3, &b), "g003/s/b/s.x");
        let n1 = stream_object(3, &a, 0, 10);
        let n2 = stream_object(3, &a, 0, 10);
        assert_ne!(n1, n2);
        assert!(n1.starts_with(&format!("{pa}/00000000000000000000-00000000000000000010-")));
        assert!(pack_object(1, 5).starts_with("g001/p/0000000000005-"));
        assert_eq!(
            stream_prefix(0, &BucketStreamId::new("b", "")),
            "g000/s/b/~"
        );
        // Long names become a digest: every part fits a file name.
        let long = "x".repeat(97);
        let p = stream_prefix(0, &BucketStreamId::new("b", &long));
        assert!(p.starts_with("g000/s/b/~h") && p.len() == "g000/s/b/~h".len() + 32);
        assert_ne!(
            p,
            stream_prefix(0, &BucketStreamId::new("b", "x".repeat(98)))
        );
        assert_eq!(
            stream_prefix(0, &BucketStreamId::new("b", "x".repeat(96))),
            format!("g000/s/b/{}", "x".repeat(96))
        );
    }
}
