//! The bodies of read answers: a page's hot-buffer slices sent as they
//! are or gathered into chunks ([`coalesce`]), or a rendered JSON array
//! ([`PageBody`]).

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::Response;
use bytes::Bytes;

/// Slices at least this long are sent as they are.
const PASS_THROUGH: usize = 16 * 1024;
/// Small slices are gathered into chunks of about this size.
const CHUNK: usize = 64 * 1024;

/// Gathers runs of small slices (one per appended message, often a few
/// hundred bytes) into chunks of about 64 KiB, and passes large
/// slices through untouched. Each chunk of a streamed body costs a frame
/// and a poll in hyper, so a page of 200 1 KiB messages sent slice by slice
/// spent more CPU on framing than copying 200 KiB once costs; a page never
/// becomes one big buffer either.
pub(crate) fn coalesce(slices: Vec<Bytes>) -> Vec<Bytes> {
    let mut out = Vec::new();
    let mut pending = bytes::BytesMut::new();
    for slice in slices {
        if slice.len() >= PASS_THROUGH {
            if !pending.is_empty() {
                out.push(pending.split().freeze());
            }
            out.push(slice);
            continue;
        }
        if pending.is_empty() {
            pending.reserve(CHUNK);
        }
        pending.extend_from_slice(&slice);
        if pending.len() >= CHUNK {
            out.push(pending.split().freeze());
        }
    }
    if !pending.is_empty() {
        out.push(pending.freeze());
    }
    out
}

/// A read's body: slices streamed as they are, or one rendered buffer.
pub(crate) enum PageBody {
    /// Hot-buffer slices, sent without copying.
    Slices(Vec<Bytes>),
    /// A rendered body (JSON arrays).
    Rendered(Bytes),
}

impl PageBody {
    /// A response with this body.
    pub(crate) fn into_response_body(self, status: StatusCode) -> Response {
        let body = match self {
            Self::Rendered(b) => Body::from(b),
            Self::Slices(mut s) if s.len() <= 1 => Body::from(s.pop().unwrap_or_default()),
            Self::Slices(s) => {
                let mut chunks = coalesce(s);
                if chunks.len() == 1 {
                    Body::from(chunks.pop().unwrap_or_default())
                } else {
                    Body::new(SlicesBody::new(chunks))
                }
            }
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        response
    }
}

/// A body of several chunks whose total length is known: hyper then sends
/// `Content-Length` and writes the chunks as they are, without the chunked
/// transfer coding's framing around each.
struct SlicesBody {
    chunks: std::collections::VecDeque<Bytes>,
    remaining: u64,
}

impl SlicesBody {
    fn new(chunks: Vec<Bytes>) -> Self {
        let remaining = chunks.iter().map(|c| c.len() as u64).sum();
        Self {
            chunks: chunks.into(),
            remaining,
        }
    }
}

impl hyper::body::Body for SlicesBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        let frame = this.chunks.pop_front().map(|chunk| {
            this.remaining = this.remaining.saturating_sub(chunk.len() as u64);
            Ok(hyper::body::Frame::data(chunk))
        });
        std::task::Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.remaining)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coalescing_keeps_the_bytes_and_order() {
        let big = Bytes::from(vec![b'B'; PASS_THROUGH]);
        let small: Vec<Bytes> = (0..100u8).map(|i| Bytes::from(vec![i; 1000])).collect();
        let mut input = small.clone();
        input.insert(50, big.clone());
        let out = coalesce(input.clone());
        let joined = |v: &[Bytes]| {
            v.iter()
                .flat_map(|b| b.iter().copied())
                .collect::<Vec<u8>>()
        };
        assert_eq!(joined(&out), joined(&input));
        // The large slice passes through untouched; the small ones are
        // gathered into a few chunks of at most CHUNK + one slice.
        assert!(out.iter().any(|b| b.as_ptr() == big.as_ptr()));
        assert!(out.len() <= 5, "{} chunks", out.len());
        assert!(
            out.iter()
                .all(|b| b.len() <= CHUNK + 1000 || b.len() == PASS_THROUGH)
        );
        assert!(coalesce(Vec::new()).is_empty());
    }
}
