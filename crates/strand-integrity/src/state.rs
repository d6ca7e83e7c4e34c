//! Per-stream integrity state (`StreamIntegrity`, spec 02 §5.1, §5.3–5.5).

use std::fmt;

use setsum::Setsum;

use crate::EMPTY_SETSUM_HEX;
use crate::hex::{encode_setsum_hex, parse_setsum_hex};
use crate::item::{IntegrityDomain, ItemKind, item_setsum};
use crate::snapshot::StreamIntegritySnapshot;

/// The integrity state of one stream slot.
///
/// The reference keeps `live`, `total` and a record count. Because eviction is
/// a no-op and restore sets `live := total` (spec 02 §5.4–5.5, quirks §8.9,
/// §8.10), `live` always equals `total`; this type therefore stores only the
/// total and reports it for both. It is `Copy` (40 bytes), so an append
/// transaction saves it with a plain copy and rolls back by assigning the copy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamIntegrity {
    total: Setsum,
    total_records: u64,
}

/// Which of the three setsum strings of a [`StreamIntegritySnapshot`] failed to parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetsumField {
    /// `live_setsum`.
    Live,
    /// `evicted_setsum`.
    Evicted,
    /// `total_setsum`.
    Total,
}

impl fmt::Display for SetsumField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Live => "live_setsum",
            Self::Evicted => "evicted_setsum",
            Self::Total => "total_setsum",
        })
    }
}

/// Why [`StreamIntegrity::restore`] rejected a snapshot. The state machine maps
/// every variant to `StreamSnapshotError::IntegrityMismatch { stream_id }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityRestoreError {
    /// The field is not a 64-byte setsum hex digest.
    #[error("{field} is not a valid setsum hex digest")]
    InvalidSetsum {
        /// The field that failed to parse.
        field: SetsumField,
    },
    /// `live + evicted` (setsum addition) differs from `total`.
    #[error("live_setsum + evicted_setsum does not equal total_setsum")]
    SumMismatch,
}

impl StreamIntegrity {
    /// The empty state of a new slot: empty setsums, zero records.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one `inline` item for `[start_offset, end_offset)` holding `payload`
    /// (create with a non-empty payload, non-empty `Append`, one batch payload).
    ///
    /// Does nothing when `start_offset == end_offset`. Costs one SHA3-256 pass
    /// over a short header plus `payload`; the payload is not copied.
    pub fn append_inline(
        &mut self,
        domain: IntegrityDomain<'_>,
        start_offset: u64,
        end_offset: u64,
        payload: &[u8],
    ) {
        if start_offset == end_offset {
            return;
        }
        let item = item_setsum(domain, start_offset, end_offset, ItemKind::Inline(payload));
        self.add(item);
    }

    /// Adds one `external` item for `[start_offset, end_offset)` naming the
    /// object `s3_path` of `object_size` bytes (`CreateExternal`,
    /// `AppendExternal`). `payload_len` only enters through `end_offset`;
    /// `object_offset` and the content type are not hashed.
    ///
    /// Does nothing when `start_offset == end_offset`.
    pub fn append_external(
        &mut self,
        domain: IntegrityDomain<'_>,
        start_offset: u64,
        end_offset: u64,
        s3_path: &str,
        object_size: u64,
    ) {
        if start_offset == end_offset {
            return;
        }
        let kind = ItemKind::External {
            s3_path,
            object_size,
        };
        let item = item_setsum(domain, start_offset, end_offset, kind);
        self.add(item);
    }

    /// Adds one `inline` item per payload of an `AppendBatch`, in order. The
    /// first payload starts at `start_offset` (the tail before the batch); each
    /// payload `k` covers `[offset_k, offset_k.saturating_add(len_k))` and the
    /// next starts where it ends. Empty payloads add nothing. Returns the
    /// offset after the last payload (the new tail).
    pub fn append_inline_batch<P: AsRef<[u8]>>(
        &mut self,
        domain: IntegrityDomain<'_>,
        start_offset: u64,
        payloads: &[P],
    ) -> u64 {
        let mut offset = start_offset;
        for payload in payloads {
            let bytes = payload.as_ref();
            let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            let next = offset.saturating_add(len);
            self.append_inline(domain, offset, next, bytes);
            offset = next;
        }
        offset
    }

    /// Retention moved the retained offset to `retained_offset`.
    ///
    /// **Quirk (reproduce for compatibility, spec 02 §8, item 9):** this does
    /// nothing. Nothing is ever moved to "evicted"; only the
    /// `live_start_offset` argument of [`Self::snapshot`] shows retention.
    #[inline]
    pub fn evict_before(&mut self, retained_offset: u64) {
        let _ = retained_offset;
    }

    /// The reported view (spec 02 §5.4). Pass the slot's retained offset as
    /// `live_start_offset` and `metadata.tail_offset` as `tail_offset`.
    pub fn snapshot(&self, live_start_offset: u64, tail_offset: u64) -> StreamIntegritySnapshot {
        let total = encode_setsum_hex(&self.total);
        StreamIntegritySnapshot {
            live_setsum: total.clone(),
            evicted_setsum: EMPTY_SETSUM_HEX.to_owned(),
            total_setsum: total,
            live_start_offset,
            tail_offset,
            live_records: self.total_records,
            evicted_records: 0,
            total_records: self.total_records,
        }
    }

    /// Rebuilds the state from a snapshot entry's integrity (spec 02 §5.5,
    /// spec 07 §5.9):
    ///
    /// 1. parse `live_setsum`, `evicted_setsum`, `total_setsum` (lenient
    ///    `setsum` 0.8 parse: upper case and `+h` groups accepted, columns not
    ///    reduced; non-ASCII rejected);
    /// 2. require `live + evicted == total` (one conditional subtraction per
    ///    column, then raw column equality);
    /// 3. on success the state is `total` with `total_records`; the parsed
    ///    live value, `live_records`, `evicted_records`, `live_start_offset`
    ///    and `tail_offset` are ignored.
    ///
    /// Never panics, whatever the strings hold.
    pub fn restore(snapshot: &StreamIntegritySnapshot) -> Result<Self, IntegrityRestoreError> {
        let parse = |text: &str, field: SetsumField| {
            parse_setsum_hex(text).ok_or(IntegrityRestoreError::InvalidSetsum { field })
        };
        let live = parse(&snapshot.live_setsum, SetsumField::Live)?;
        let evicted = parse(&snapshot.evicted_setsum, SetsumField::Evicted)?;
        let total = parse(&snapshot.total_setsum, SetsumField::Total)?;
        if live + evicted != total {
            return Err(IntegrityRestoreError::SumMismatch);
        }
        Ok(Self {
            total,
            total_records: snapshot.total_records,
        })
    }

    /// Number of contributing appends since creation (saturating).
    pub fn total_records(&self) -> u64 {
        self.total_records
    }

    /// The 32-byte digest of the total (= live) setsum.
    pub fn total_digest(&self) -> [u8; 32] {
        self.total.digest()
    }

    /// Lowercase hex digest of the total (= live) setsum.
    pub fn total_setsum_hex(&self) -> String {
        encode_setsum_hex(&self.total)
    }

    fn add(&mut self, item: Setsum) {
        self.total += item;
        self.total_records = self.total_records.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const D: IntegrityDomain<'static> = IntegrityDomain::new("bench", None, "s");

    #[test]
    fn empty_spans_contribute_nothing() {
        let mut integrity = StreamIntegrity::new();
        integrity.append_inline(D, 7, 7, b"");
        integrity.append_external(D, 7, 7, "obj/1", 10);
        integrity.append_inline_batch::<&[u8]>(D, 7, &[b"", b""]);
        assert_eq!(integrity, StreamIntegrity::new());
        assert_eq!(integrity.total_records(), 0);
    }

    #[test]
    fn batch_is_one_item_per_payload_at_running_offsets() {
        let mut batch = StreamIntegrity::new();
        let end = batch.append_inline_batch::<&[u8]>(D, 3, &[b"ab", b"", b"cde"]);
        assert_eq!(end, 8);
        let mut single = StreamIntegrity::new();
        single.append_inline(D, 3, 5, b"ab");
        single.append_inline(D, 5, 8, b"cde");
        assert_eq!(batch, single);
        assert_eq!(batch.total_records(), 2);
    }

    #[test]
    fn batch_accepts_owned_payloads() {
        let mut a = StreamIntegrity::new();
        a.append_inline_batch(D, 0, &[vec![1_u8, 2], vec![3]]);
        let mut b = StreamIntegrity::new();
        b.append_inline_batch::<&[u8]>(D, 0, &[&[1, 2], &[3]]);
        assert_eq!(a, b);
    }

    #[test]
    fn identity_parts_change_the_item() {
        let variants = [
            IntegrityDomain::new("bench", None, "s"),
            IntegrityDomain::new("bench", Some(""), "s"),
            IntegrityDomain::new("bench", Some("k"), "s"),
            IntegrityDomain::new("bench", None, "t"),
            IntegrityDomain::new("bencx", None, "s"),
        ];
        let mut digests: Vec<[u8; 32]> = variants
            .iter()
            .map(|d| {
                let mut integrity = StreamIntegrity::new();
                integrity.append_inline(*d, 0, 1, b"x");
                integrity.total_digest()
            })
            .collect();
        digests.sort_unstable();
        digests.dedup();
        assert_eq!(digests.len(), variants.len());
    }

    #[test]
    fn inline_and_external_kinds_differ() {
        let mut inline = StreamIntegrity::new();
        inline.append_inline(D, 0, 4, b"obj/");
        let mut external = StreamIntegrity::new();
        external.append_external(D, 0, 4, "obj/", 0);
        assert_ne!(inline.total_digest(), external.total_digest());
    }

    #[test]
    fn external_object_size_is_hashed_and_payload_len_only_via_end() {
        let mut a = StreamIntegrity::new();
        a.append_external(D, 0, 4, "obj/1", 10);
        let mut b = StreamIntegrity::new();
        b.append_external(D, 0, 4, "obj/1", 11);
        let mut c = StreamIntegrity::new();
        c.append_external(D, 0, 5, "obj/1", 10);
        assert_ne!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn record_count_saturates() {
        let mut integrity = StreamIntegrity::restore(&StreamIntegritySnapshot {
            live_setsum: EMPTY_SETSUM_HEX.into(),
            evicted_setsum: EMPTY_SETSUM_HEX.into(),
            total_setsum: EMPTY_SETSUM_HEX.into(),
            live_start_offset: 0,
            tail_offset: 0,
            live_records: 0,
            evicted_records: 0,
            total_records: u64::MAX,
        })
        .unwrap();
        integrity.append_inline(D, 0, 1, b"x");
        assert_eq!(integrity.total_records(), u64::MAX);
    }

    #[test]
    fn transaction_rollback_by_copy() {
        let mut integrity = StreamIntegrity::new();
        integrity.append_inline(D, 0, 1, b"x");
        let saved = integrity;
        integrity.append_inline(D, 1, 2, b"y");
        assert_ne!(integrity, saved);
        integrity = saved;
        assert_eq!(integrity.snapshot(0, 1), saved.snapshot(0, 1));
    }

    #[test]
    fn error_display() {
        let err = IntegrityRestoreError::InvalidSetsum {
            field: SetsumField::Evicted,
        };
        assert_eq!(
            err.to_string(),
            "evicted_setsum is not a valid setsum hex digest"
        );
    }
}
