//! Public constants of the model (spec 01 §3).
//!
//! `COMMITTED_WRITE_UNIT_BYTES` is deliberately absent: it belongs to the usage
//! accounting crate.

/// Logical span, in bytes, of one cold-index page: 64 MiB.
///
/// Read plans split cold-index ranges so that `page_id = offset / span` and no
/// segment crosses a page boundary `(page_id + 1) * span` (spec 06 §5.4).
pub const COLD_INDEX_PAGE_SPAN_BYTES: u64 = 64 * 1024 * 1024;

/// Inclusive upper bound on the compact serde_json encoding of a
/// [`StreamAttrs`](crate::StreamAttrs): 16 KiB (spec 01 §6.3).
///
/// Public in this crate for the other strand crates; the facade does not
/// export it.
pub const MAX_STREAM_ATTRS_BYTES: usize = 16 * 1024;

/// The most expired streams removed by one TTL sweep after a write command
/// (spec 01 §9.4, spec 03).
pub const TTL_EXPIRY_SWEEP_MAX_STREAMS_PER_WRITE: usize = 256;

/// Largest producer epoch or sequence accepted: 2^53 − 1 (spec 01 §17.1).
pub const MAX_JS_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// Shortest accepted bucket id, in bytes (spec 01 §16.1).
pub const MIN_BUCKET_ID_BYTES: usize = 4;

/// Longest accepted bucket id, in bytes (spec 01 §16.1).
pub const MAX_BUCKET_ID_BYTES: usize = 64;

/// Byte limit of one path segment (`stream_id` or `affinity_key`) and of the
/// combined identity `bucket/[affinity/]stream` (spec 01 §16.2).
pub const MAX_STREAM_PATH_BYTES: usize = 122;

/// The local stream id reserved with or without an affinity key (spec 01 §16.2).
pub const RESERVED_STREAM_ID: &str = "streams";

/// Local stream ids reserved under an affinity path (spec 01 §4), in ascending
/// byte order.
pub const RESERVED_AFFINITY_STREAM_IDS: [&str; 6] = [
    "$transaction",
    "append-batch",
    "attrs",
    "bootstrap",
    "retention",
    "snapshot",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_spec_table() {
        assert_eq!(COLD_INDEX_PAGE_SPAN_BYTES, 67_108_864);
        assert_eq!(MAX_STREAM_ATTRS_BYTES, 16_384);
        assert_eq!(TTL_EXPIRY_SWEEP_MAX_STREAMS_PER_WRITE, 256);
        assert_eq!(MAX_JS_SAFE_INTEGER, (1u64 << 53) - 1);
        assert_eq!(MIN_BUCKET_ID_BYTES, 4);
        assert_eq!(MAX_BUCKET_ID_BYTES, 64);
        assert_eq!(MAX_STREAM_PATH_BYTES, 122);
    }
}
