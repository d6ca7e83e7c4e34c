//! Record helpers of the create and append paths (spec 02 §3.1–§3.4, §3.6).
//!
//! These are pure functions; the state machine calls each one at a fixed
//! place in a command's check order (given in each function's docs) and maps
//! a [`RecordWriteError`] to its response.

use crate::{
    PendingRecordAppend, RecordIndexError, RecordWriteError, StreamRecordIndex, StreamRecordRange,
    appended_record_count, canonical_json_record_ends, is_json_record_content_type,
};

/// The record ends of an inline payload under a command's content type.
///
/// `None` gives `[]`; `Some(ct)` gives [`canonical_json_record_ends`]`(ct,
/// payload)`.
///
/// Called by:
/// * `CreateStream`, by the dispatcher, **first**, before any id, bucket,
///   attrs, TTL or producer check (§3.3.1 step 1). Pass `Some(content_type)`.
///   On error the post-command TTL sweep still runs.
/// * inline `Append`, step 7, right after the record precondition
///   ([`check_record_precondition`]) and before
///   [`prepare_record_append`] (§3.3.3). Pass the **command's** content type.
///
/// # Errors
///
/// [`RecordWriteError::NonCanonicalJsonPayload`] for a JSON-typed non-empty
/// payload whose last byte is not `\n`.
pub fn payload_record_ends(
    content_type: Option<&str>,
    payload: &[u8],
) -> Result<Vec<u64>, RecordWriteError> {
    match content_type {
        None => Ok(Vec::new()),
        Some(content_type) => canonical_json_record_ends(content_type, payload)
            .map_err(|_| RecordWriteError::NonCanonicalJsonPayload),
    }
}

/// The record index a new stream starts with (spec 02 §3.1).
///
/// * non-JSON `content_type`: `None`, or an error if `record_ends` is
///   non-empty;
/// * JSON, `payload_len > 0`, `record_ends` empty: `None` (legacy JSON
///   stream without record coordinates);
/// * otherwise a new index fed `record_ends` at base 0.
///
/// Called by:
/// * `CreateStream` after scope, attrs, retention and producer validation
///   and before the producer-sequence check, expiry replacement, the
///   `AlreadyExists` decision and the quota check (§3.3.1 step 2), with the
///   ends of [`payload_record_ends`]; it cannot fail there.
/// * `CreateExternal` after `validate_external_payload_ref`, scope, attrs,
///   retention and producer validation and before the producer-sequence
///   check and the `AlreadyExists` decision (§3.3.2), with the command's
///   `record_ends` as given.
///
/// The producer item of the create takes its bounds from the index's range
/// ([`producer_record_bounds`]).
///
/// # Errors
///
/// [`RecordWriteError::BoundariesOnNonJsonStream`] for a non-JSON type with
/// ends; [`RecordWriteError::BoundaryMismatch`] when the ends do not cover
/// the payload.
pub fn build_record_index(
    content_type: &str,
    payload_len: u64,
    record_ends: &[u64],
) -> Result<Option<StreamRecordIndex>, RecordWriteError> {
    if !is_json_record_content_type(content_type) {
        return if record_ends.is_empty() {
            Ok(None)
        } else {
            Err(RecordWriteError::BoundariesOnNonJsonStream)
        };
    }
    if payload_len > 0 && record_ends.is_empty() {
        return Ok(None);
    }
    let mut index = StreamRecordIndex::new();
    index
        .append_relative_ends(0, payload_len, record_ends)
        .map_err(RecordWriteError::BoundaryMismatch)?;
    Ok(Some(index))
}

/// The record precondition (`record_match`) of spec 02 §3.4.
///
/// `index` is the stream's record index. `record_match: None` passes. The
/// spec's "stream slot missing: pass" step is the caller's: existence was
/// checked earlier on every path that calls this.
///
/// Called by `Append` (step 6, §3.3.3) and `AppendExternal` (step 7,
/// §3.3.4), so also inside transactions: after producer evaluation and
/// before boundary extraction / [`prepare_record_append`]. A stale
/// precondition is therefore reported even for a malformed body.
///
/// # Errors
///
/// [`RecordWriteError::RecordMatchWithoutIndex`] if there is no index;
/// [`RecordWriteError::InvalidRecordIndex`] if its range overflows;
/// [`RecordWriteError::RecordTailMismatch`] if `next_record != record_match`.
pub fn check_record_precondition(
    index: Option<&StreamRecordIndex>,
    record_match: Option<u64>,
) -> Result<(), RecordWriteError> {
    let Some(expected_record) = record_match else {
        return Ok(());
    };
    let index = index.ok_or(RecordWriteError::RecordMatchWithoutIndex)?;
    let range = index
        .range()
        .map_err(RecordWriteError::InvalidRecordIndex)?;
    if range.next_record == expected_record {
        Ok(())
    } else {
        Err(RecordWriteError::RecordTailMismatch {
            current_record: range.next_record,
            expected_record,
        })
    }
}

/// Validates an append's record ends against the stream's index without
/// changing it (spec 02 §3.2).
///
/// * no index, `json_stream`: `Ok(None)`; `record_ends` is not checked at all
///   (legacy JSON stream);
/// * no index, not `json_stream`: `Ok(None)`, or an error if `record_ends` is
///   non-empty;
/// * index present: [`StreamRecordIndex::prepare_append`]`(base_offset,
///   payload_len, record_ends)`; its range is the append's record range.
///
/// `base_offset` is the stream tail. The result is `Some` exactly when there
/// is an index; commit it at the mutation step with
/// [`StreamRecordIndex::commit_append`] on the same index (only for a
/// non-empty payload; a close commits nothing but still uses the range for
/// its producer item), or drop it if the command fails later.
///
/// Called by:
/// * `Append` step 8 (§3.3.3), after [`payload_record_ends`] and before the
///   quota, closed, `EmptyAppend`, content-type and stream-seq checks;
///   `json_stream` = is_json(the **stream's** stored content type).
/// * `AppendExternal` step 8 (§3.3.4), after [`check_record_precondition`]
///   and before the closed, content-type, stream-seq and quota checks; the
///   command's `record_ends` as given, `payload_len` of the external ref,
///   `json_stream` = is_json(the stream's stored content type).
/// * `AppendBatch` step 12 (§3.3.5), once for the whole batch, after
///   [`batch_record_ends`]; `json_stream` = is_json(the batch content type),
///   `payload_len` = [`BatchRecordEnds::total_len`], ends =
///   [`BatchRecordEnds::combined_ends`].
///
/// # Errors
///
/// [`RecordWriteError::BoundariesOnNonJsonStream`] (no index, not JSON,
/// ends given); [`RecordWriteError::BoundaryMismatch`] (any prepare error).
pub fn prepare_record_append(
    current: Option<&StreamRecordIndex>,
    json_stream: bool,
    base_offset: u64,
    payload_len: u64,
    record_ends: &[u64],
) -> Result<Option<PendingRecordAppend>, RecordWriteError> {
    match current {
        None if json_stream => Ok(None),
        None if record_ends.is_empty() => Ok(None),
        None => Err(RecordWriteError::BoundariesOnNonJsonStream),
        Some(index) => index
            .prepare_append(base_offset, payload_len, record_ends)
            .map(Some)
            .map_err(RecordWriteError::BoundaryMismatch),
    }
}

/// `(record_start, record_next)` of a `ProducerAppendRecord` (spec 02 §3.6):
/// `(Some(first), Some(next))` of the append's range when the stream has an
/// index, `(None, None)` otherwise.
///
/// Pass the created index's range for creates, the pending range
/// ([`PendingRecordAppend::range`]) for appends and closes, and each item's
/// range ([`batch_item_record_ranges`]) for batches.
#[must_use]
pub fn producer_record_bounds(range: Option<StreamRecordRange>) -> (Option<u64>, Option<u64>) {
    match range {
        Some(range) => (Some(range.first_record), Some(range.next_record)),
        None => (None, None),
    }
}

/// The record ends of every payload of a batch (spec 02 §3.3.5 step 11).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BatchRecordEnds {
    /// Each payload's own relative ends, in batch order (for its message
    /// records and usage count).
    pub item_ends: Vec<Vec<u64>>,
    /// Each payload's length, in batch order.
    pub item_lens: Vec<u64>,
    /// All ends, each shifted by the total length of the payloads before
    /// it: the relative ends of the whole batch.
    pub combined_ends: Vec<u64>,
    /// The total length of all payloads.
    pub total_len: u64,
}

impl BatchRecordEnds {
    /// The batch's usage record count: the saturating sum over items of
    /// [`appended_record_count`]`(item ends, item len)` (spec 02 §4.3).
    #[must_use]
    pub fn appended_record_count(&self) -> u64 {
        self.item_ends
            .iter()
            .zip(&self.item_lens)
            .fold(0u64, |sum, (ends, &len)| {
                sum.saturating_add(appended_record_count(ends, len))
            })
    }
}

/// Computes [`canonical_json_record_ends`] for each payload of a batch, in
/// order, and combines them (spec 02 §3.3.5 step 11).
///
/// Called by `AppendBatch` after the content-type checks and the
/// empty-payload check (step 11), before [`prepare_record_append`].
///
/// # Errors
///
/// [`RecordWriteError::NonCanonicalJsonPayload`] for the first payload that
/// fails; [`RecordWriteError::BoundaryMismatch`]`(ArithmeticOverflow)` if a
/// length or shifted end overflows (unreachable in practice).
pub fn batch_record_ends<P: AsRef<[u8]>>(
    content_type: &str,
    payloads: &[P],
) -> Result<BatchRecordEnds, RecordWriteError> {
    const OVERFLOW: RecordWriteError =
        RecordWriteError::BoundaryMismatch(RecordIndexError::ArithmeticOverflow);
    let mut batch = BatchRecordEnds {
        item_ends: Vec::with_capacity(payloads.len()),
        item_lens: Vec::with_capacity(payloads.len()),
        ..BatchRecordEnds::default()
    };
    for payload in payloads {
        let payload = payload.as_ref();
        let ends = canonical_json_record_ends(content_type, payload)
            .map_err(|_| RecordWriteError::NonCanonicalJsonPayload)?;
        let len = u64::try_from(payload.len()).map_err(|_| OVERFLOW)?;
        for &end in &ends {
            let shifted = batch.total_len.checked_add(end).ok_or(OVERFLOW)?;
            batch.combined_ends.push(shifted);
        }
        batch.total_len = batch.total_len.checked_add(len).ok_or(OVERFLOW)?;
        batch.item_ends.push(ends);
        batch.item_lens.push(len);
    }
    Ok(batch)
}

/// The record range of each batch item (spec 02 §3.3.5 step 13).
///
/// With a pending range (the range of the [`PendingRecordAppend`] from
/// [`prepare_record_append`]), item `k` gets `[first_k, first_k + count_k)`
/// where `count_k` is the number of its ends and `first_0` is the pending
/// `first_record`. Without one, every item gets `None`.
#[must_use]
pub fn batch_item_record_ranges(
    pending_range: Option<StreamRecordRange>,
    batch: &BatchRecordEnds,
) -> Vec<Option<StreamRecordRange>> {
    let Some(pending_range) = pending_range else {
        return vec![None; batch.item_ends.len()];
    };
    let mut first_record = pending_range.first_record;
    batch
        .item_ends
        .iter()
        .map(|ends| {
            let count = u64::try_from(ends.len()).unwrap_or(u64::MAX);
            let next_record = first_record.saturating_add(count);
            let range = StreamRecordRange {
                first_record,
                next_record,
            };
            first_record = next_record;
            Some(range)
        })
        .collect()
}
