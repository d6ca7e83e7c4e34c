//! The stream a routed request targets ([`StreamRequest`]), shared by the
//! stream routes and live reads.

use strand::BucketStreamId;

use crate::errors::Layout;

/// One request on a stream resource.
pub(crate) struct StreamRequest {
    /// The stream.
    pub id: BucketStreamId,
    /// Its name for grants (the mount's canonical name, or
    /// `[affinity/]stream` on the bucketed layout).
    pub name: String,
    /// The layout it came through.
    pub layout: Layout,
    /// The request path, for `Location`.
    pub path: String,
    /// The request target's authority (HTTP/2 sends it instead of a
    /// `Host` header), for `Location`.
    pub authority: Option<axum::http::uri::Authority>,
    /// The token subject the request was authorized for, if any.
    pub subject: Option<String>,
}
