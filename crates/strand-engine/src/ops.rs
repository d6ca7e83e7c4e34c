//! The typed requests a group serves, and what they answer.

use strand::{BucketStreamId, HotRead, ProducerRequest, StreamResponse};

/// Where a read starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ReadFrom {
    /// The first retained byte (the protocol's `-1`).
    Start,
    /// The current tail (the protocol's `now`).
    Tail,
    /// A byte offset.
    Offset(u64),
    /// An offset a client may have computed (the Durable Streams mount):
    /// the read starts at the start of the message holding it, at the tail
    /// when it is beyond (`StreamStateMachine::whole_message_start`).
    Within(u64),
}

/// A write to a stream: an append, an append-and-close, or a close.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteRequest {
    /// The target stream.
    pub stream_id: BucketStreamId,
    /// The request's content type. With [`WriteRequest::media_type_match`]
    /// a type whose media type (case-insensitive, parameters ignored)
    /// equals the stream's is replaced by the stream's exact type, and any
    /// other type is refused with `ContentTypeMismatch` before the machine
    /// looks at the body.
    pub content_type: Option<String>,
    /// Compare content types as media types rather than exactly.
    pub media_type_match: bool,
    /// The bytes to append; empty with `close` for a close-only write.
    pub payload: bytes::Bytes,
    /// Close the stream with (or without) this append.
    pub close: bool,
    /// A stream-sequence token that must increase.
    pub stream_seq: Option<String>,
    /// An idempotent producer request.
    pub producer: Option<ProducerRequest>,
    /// Append only if the stream's next record equals this (JSON streams).
    pub record_match: Option<u64>,
}

/// What an append transaction answered: one response per append, or the
/// error that rolled the whole transaction back.
pub type TransactionOutcome = Result<Vec<StreamResponse>, StreamResponse>;

/// What a write answered.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WriteOutcome {
    /// The machine's response.
    pub response: StreamResponse,
    /// The producer's `(epoch, last accepted seq)` after the write, when
    /// the request carried a producer that has state on the stream.
    pub producer_position: Option<(u64, u64)>,
}

/// What a read answered: the hot slices, or the machine's error.
pub type ReadOutcome = Result<HotRead, StreamResponse>;

/// A stream's metadata as a head request sees it.
pub type HeadOutcome = Option<strand::StreamMetadata>;
