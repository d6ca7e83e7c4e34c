//! Request bodies, read whole up to the configured limit.

use axum::body::Body;
use axum::http::StatusCode;
use bytes::Bytes;

use crate::errors::ApiError;

/// Reads a body of at most `limit` bytes; a longer one is 413 and is not
/// buffered beyond the limit.
pub async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let too_large = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            || e.to_string().contains("length limit");
        if too_large {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body is larger than {limit} bytes"),
            )
        } else {
            ApiError::bad_request(format!("could not read the request body: {e}"))
        }
    })
}
