//! Errors as HTTP responses: the machine's error codes mapped to statuses
//! (spec 08 §24), and the server's own refusals. Bodies are short
//! `text/plain` messages.

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use strand::{StreamErrorCode, StreamErrorContext, StreamResponse};
use strand_engine::{EngineError, FanOutError, Unavailable};

use crate::headers as h;
use crate::offsets;

/// Which URL layout a request came through; a few codes map differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The Durable Streams mount `/v1/stream/…`.
    DurableStreams,
    /// The bucketed layout `/{bucket}/…`.
    Bucketed,
}

/// An error response: status, extra headers and a short text body.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// Headers beside the body.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// The text body.
    pub message: String,
}

impl ApiError {
    /// An error with a status and message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            headers: Vec::new(),
            message: message.into(),
        }
    }

    /// 400 Bad Request.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 404 Not Found.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// Adds a header.
    pub fn with_header(mut self, name: HeaderName, value: impl AsRef<str>) -> Self {
        if let Ok(v) = HeaderValue::from_str(value.as_ref()) {
            self.headers.push((name, v));
        }
        self
    }

    /// Maps a machine error (a `StreamResponse::Error`) to a response; any
    /// other response is a 500, since callers only pass errors.
    pub fn from_machine(response: &StreamResponse, layout: Layout) -> Self {
        let StreamResponse::Error {
            code,
            message,
            next_offset,
            context,
        } = response
        else {
            return Self::new(StatusCode::INTERNAL_SERVER_ERROR, "unexpected response");
        };
        use StreamErrorCode as C;
        let status = match code {
            C::StreamGone | C::StreamSoftDeleted => StatusCode::GONE,
            C::BucketNotFound | C::StreamNotFound | C::SnapshotNotFound | C::BucketErased => {
                StatusCode::NOT_FOUND
            }
            C::StreamAlreadyExistsConflict
            | C::ContentTypeMismatch
            | C::StreamClosed
            | C::StreamSeqConflict
            | C::ProducerSeqConflict
            | C::SnapshotConflict
            | C::ImportConflict
            | C::BucketNotEmpty
            | C::StreamHasForks => StatusCode::CONFLICT,
            C::RecordPreconditionFailed => StatusCode::PRECONDITION_FAILED,
            C::ProducerEpochStale => StatusCode::FORBIDDEN,
            C::OffsetOutOfRange => match layout {
                Layout::Bucketed => StatusCode::RANGE_NOT_SATISFIABLE,
                Layout::DurableStreams => StatusCode::BAD_REQUEST,
            },
            C::QuotaExceeded => StatusCode::TOO_MANY_REQUESTS,
            C::InvalidBucketId
            | C::InvalidStreamId
            | C::MissingContentType
            | C::EmptyAppend
            | C::InvalidProducer
            | C::InvalidRetention
            | C::InvalidSnapshot
            | C::InvalidStreamAttrs
            | C::InvalidRecordBoundaries
            | C::ImportInvalid
            | C::InvalidFork
            | C::InvalidColdFlush => StatusCode::BAD_REQUEST,
        };
        let mut error = Self::new(status, message.clone());
        if *code == C::StreamClosed {
            error = error.with_header(h::CLOSED, "true");
        }
        if matches!(
            code,
            C::StreamClosed | C::StreamSeqConflict | C::ContentTypeMismatch
        ) && let Some(next) = next_offset
        {
            error = error.with_header(h::NEXT_OFFSET, offsets::render(*next));
        }
        for item in context {
            match item {
                StreamErrorContext::ProducerSeqConflict {
                    expected_seq,
                    received_seq,
                } => {
                    error = error
                        .with_header(h::PRODUCER_EXPECTED_SEQ, expected_seq.to_string())
                        .with_header(h::PRODUCER_RECEIVED_SEQ, received_seq.to_string());
                }
                StreamErrorContext::ProducerEpochStale { current_epoch } => {
                    error = error.with_header(h::PRODUCER_EPOCH, current_epoch.to_string());
                }
                _ => {}
            }
        }
        error
    }
}

impl From<EngineError> for ApiError {
    fn from(error: EngineError) -> Self {
        match error {
            EngineError::Unavailable(Unavailable::DiskFull) => {
                Self::new(StatusCode::INSUFFICIENT_STORAGE, error.to_string())
                    .with_header(header::RETRY_AFTER, "5")
            }
            // A question, not a write: say so.
            EngineError::Unavailable(Unavailable::Remote) => Self::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "this node does not hold one of the groups the request needs, and no member that holds it answered",
            )
            .with_header(header::RETRY_AFTER, "1"),
            EngineError::Busy | EngineError::TooManyWaiters | EngineError::Unavailable(_) => {
                Self::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
                    .with_header(header::RETRY_AFTER, "1")
            }
            EngineError::Shutdown => Self::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string()),
        }
    }
}

impl From<FanOutError> for ApiError {
    /// 503 with `Retry-After: 1`, saying which groups applied the command;
    /// the commands sent to every group (bucket create, quota, purge) are
    /// safe to repeat, and repeating one finishes it.
    fn from(error: FanOutError) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{error}; repeat the request to finish it"),
        )
        .with_header(header::RETRY_AFTER, "1")
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, self.message).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        for (name, value) in self.headers {
            headers.insert(name, value);
        }
        response
    }
}

/// A handler's result.
pub(crate) type ApiResult<T = Response> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn producer_gap_carries_its_sequences() {
        let e = StreamResponse::error_with(
            StreamErrorCode::ProducerSeqConflict,
            None,
            vec![StreamErrorContext::ProducerSeqConflict {
                expected_seq: 3,
                received_seq: 5,
            }],
            "gap",
        );
        let api = ApiError::from_machine(&e, Layout::DurableStreams);
        assert_eq!(api.status, StatusCode::CONFLICT);
        let names: Vec<&str> = api.headers.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["producer-expected-seq", "producer-received-seq"]);
    }

    #[test]
    fn offset_out_of_range_depends_on_layout() {
        let e = StreamResponse::error_at(StreamErrorCode::OffsetOutOfRange, 3, "x");
        assert_eq!(
            ApiError::from_machine(&e, Layout::DurableStreams).status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            ApiError::from_machine(&e, Layout::Bucketed).status,
            StatusCode::RANGE_NOT_SATISFIABLE
        );
    }
}
