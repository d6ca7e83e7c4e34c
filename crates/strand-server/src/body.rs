//! Request bodies, read whole up to the configured limit.

use axum::body::Body;
use axum::http::StatusCode;
use bytes::Bytes;

use crate::errors::ApiError;

/// Bodies up to this size are copied into a buffer of their own.
///
/// hyper hands a small body over as a slice of the connection's read
/// buffer. Appends keep their bytes in the hot buffer, so a kept slice
/// would pin that whole buffer (8 KiB or more for a 256-byte append) and
/// make hyper allocate a fresh one for the next request: measured, a third
/// of the server's CPU went to faulting in those pages. One copy of a small
/// body is far cheaper. Larger bodies arrive in several frames, which
/// `to_bytes` already gathers into one buffer of their own.
pub(crate) const COPY_BELOW: usize = 1 << 20;

/// Reads a body of at most `limit` bytes; a longer one is 413 and is not
/// buffered beyond the limit. The result owns its allocation (see
/// [`COPY_BELOW`]).
pub(crate) async fn read_limited(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let bytes = read_shared(body, limit).await?;
    if bytes.len() < COPY_BELOW {
        Ok(Bytes::copy_from_slice(&bytes))
    } else {
        Ok(bytes)
    }
}

async fn read_shared(body: Body, limit: usize) -> Result<Bytes, ApiError> {
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
