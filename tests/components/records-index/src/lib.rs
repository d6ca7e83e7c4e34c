//! A downstream use of `strand-records` alone: index the records of an
//! NDJSON stream written in several appends, then answer "where does
//! record N start" and "which record starts at byte B", the way a reader
//! resuming by record number would.

use strand_records::{RecordIndexError, StreamRecordIndex, canonical_json_record_ends};

/// The JSON content type of the stream.
pub const CONTENT_TYPE: &str = "application/json";

/// An NDJSON stream's record index and tail.
#[derive(Debug, Default)]
pub struct NdjsonIndex {
    index: StreamRecordIndex,
    tail: u64,
}

impl NdjsonIndex {
    /// An empty stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one NDJSON payload (every record ends with `\n`) and returns
    /// the numbers of its first record and of the record after its last.
    pub fn append(&mut self, payload: &[u8]) -> Result<(u64, u64), RecordIndexError> {
        let ends = canonical_json_record_ends(CONTENT_TYPE, payload)?;
        let len = u64::try_from(payload.len()).map_err(|_| RecordIndexError::ArithmeticOverflow)?;
        let range = self.index.append_relative_ends(self.tail, len, &ends)?;
        self.tail += len;
        Ok((range.first_record, range.next_record))
    }

    /// The stream's length in bytes.
    pub fn tail(&self) -> u64 {
        self.tail
    }

    /// Where record `record` starts (the tail for the next record).
    pub fn offset_of(&self, record: u64) -> Result<u64, RecordIndexError> {
        self.index.offset_for(record, self.tail)
    }

    /// The record starting at byte `offset`.
    pub fn record_at(&self, offset: u64) -> Result<u64, RecordIndexError> {
        self.index.record_for_offset(offset, self.tail)
    }

    /// Drops the records before `offset` (a record boundary) and returns
    /// the first record still held.
    pub fn retain_from(&mut self, offset: u64) -> Result<u64, RecordIndexError> {
        self.index.retain_from_offset(offset, self.tail)
    }
}
