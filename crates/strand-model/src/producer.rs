//! Producer state types and the borrowed append input (spec 01 §7).

use serde::{Deserialize, Serialize};

use crate::id::BucketStreamId;
use crate::proto::ProducerRequest;

/// Persisted state of one idempotent producer of a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerSnapshot {
    /// The producer's id.
    pub producer_id: String,
    /// The producer's current epoch.
    pub producer_epoch: u64,
    /// The sequence number of its latest accepted write.
    pub producer_seq: u64,
    /// Start offset of its latest accepted write.
    pub last_start_offset: u64,
    /// Next offset after its latest accepted write.
    pub last_next_offset: u64,
    /// Whether its latest accepted write closed the stream.
    pub last_closed: bool,
    /// The items of its latest accepted write.
    pub last_items: Vec<ProducerAppendRecord>,
    /// Receipts of accepted writes in the current epoch. Absent on input
    /// reads as `[]`. Never trimmed (a reference quirk kept by strand).
    #[serde(default)]
    pub receipts: Vec<ProducerReceipt>,
}

/// The remembered outcome of one accepted producer write.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerReceipt {
    /// The write's sequence number.
    pub producer_seq: u64,
    /// Offset where the write started.
    pub start_offset: u64,
    /// Offset just past the write.
    pub next_offset: u64,
    /// Whether the write closed the stream.
    pub closed: bool,
    /// The write's items.
    pub items: Vec<ProducerAppendRecord>,
}

/// One item of a producer write, with its record coordinates when known.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerAppendRecord {
    /// Offset where the item started.
    pub start_offset: u64,
    /// Offset just past the item.
    pub next_offset: u64,
    /// Whether the item closed the stream.
    pub closed: bool,
    /// First record ordinal of the item (JSON streams).
    #[serde(default)]
    pub record_start: Option<u64>,
    /// Record ordinal just past the item (JSON streams).
    #[serde(default)]
    pub record_next: Option<u64>,
}

/// Borrowed input of `StreamStateMachine::append_borrowed` (spec 04).
#[derive(Debug)]
pub struct AppendStreamInput<'a> {
    /// The target stream.
    pub stream_id: BucketStreamId,
    /// Content type the caller expects the stream to have, if any.
    pub content_type: Option<&'a str>,
    /// The bytes to append.
    pub payload: &'a [u8],
    /// Close the stream after this append.
    pub close_after: bool,
    /// Stream-sequence token precondition.
    pub stream_seq: Option<String>,
    /// Idempotent producer identity.
    pub producer: Option<ProducerRequest>,
    /// The command's wall-clock time in milliseconds.
    pub now_ms: u64,
    /// Expected current record count precondition (JSON streams).
    pub record_match: Option<u64>,
}
