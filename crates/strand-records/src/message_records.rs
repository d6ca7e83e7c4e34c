//! Message records produced by appends and record counts for usage
//! (spec 02 §4).

use strand_model::StreamMessageRecord;

/// Appends the message records of one append over
/// `[start_offset, end_offset)` to `records` (spec 02 §4.1).
///
/// * `record_ends` empty: one record `{start_offset, end_offset}` if
///   `start_offset < end_offset`, none otherwise;
/// * else one record per end: record `i` runs from the previous record's end
///   (`start_offset` for the first) to `start_offset + record_ends[i]`
///   (saturating). **The ends are not checked**: invalid ends (legacy JSON
///   external appends) give records that go backwards or past `end_offset`.
///
/// Called at the mutation step of every write path, after the integrity
/// update (spec 02 §4.2): `CreateStream` `(0, initial_len, canonical ends)`,
/// `CreateExternal` `(0, payload_len, command ends)`, non-empty `Append`
/// `(offset, next_offset, ends)`, `AppendExternal` `(offset, next_offset,
/// command ends)`, `AppendBatch` once per item with that payload's ends.
/// A close adds nothing.
pub fn push_message_records(
    records: &mut Vec<StreamMessageRecord>,
    start_offset: u64,
    end_offset: u64,
    record_ends: &[u64],
) {
    if record_ends.is_empty() {
        if start_offset < end_offset {
            records.push(StreamMessageRecord {
                start_offset,
                end_offset,
            });
        }
        return;
    }
    records.reserve(record_ends.len());
    let mut previous_end = start_offset;
    for &end in record_ends {
        let end_offset = start_offset.saturating_add(end);
        records.push(StreamMessageRecord {
            start_offset: previous_end,
            end_offset,
        });
        previous_end = end_offset;
    }
}

/// The message records of one append (spec 02 §4.1), as a new list; see
/// [`push_message_records`].
#[must_use]
pub fn message_records_for_append(
    start_offset: u64,
    end_offset: u64,
    record_ends: &[u64],
) -> Vec<StreamMessageRecord> {
    let mut records = Vec::new();
    push_message_records(&mut records, start_offset, end_offset, record_ends);
    records
}

/// The number of records an append adds to `BucketUsage.committed_records`
/// (spec 02 §4.3): `len(record_ends)` if non-empty, else `1` for a non-empty
/// payload and `0` for an empty one.
///
/// `CreateStream`: `(canonical ends, initial_len)`; `CreateExternal`:
/// `(command ends, payload_len)`; non-empty `Append`: `(ends, payload_len)`;
/// `AppendExternal`: `(command ends, next_offset − offset)`, even when the
/// ends were never validated; `AppendBatch`: the sum over items
/// ([`crate::BatchRecordEnds::appended_record_count`]). Deduplicated retries,
/// errors and closes count nothing.
#[must_use]
pub fn appended_record_count(record_ends: &[u64], payload_len: u64) -> u64 {
    if record_ends.is_empty() {
        u64::from(payload_len > 0)
    } else {
        u64::try_from(record_ends.len()).unwrap_or(u64::MAX)
    }
}
