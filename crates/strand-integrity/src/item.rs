//! The hashed item of one append (spec 02 §5.2) and its single-item setsum.
//!
//! The payload is never copied: the item's header (everything before the
//! kind-specific pieces' variable parts) is assembled in a stack buffer and
//! hashed beside the borrowed payload, so an
//! inline append costs one SHA3-256 pass over a few dozen header bytes plus
//! the payload, fed in two pieces. A header too long for the buffer (ids far
//! beyond what the machine accepts) is fed piece by piece instead; the hash
//! is the same, since SHA3 sees only the concatenation.

use setsum::Setsum;

/// Domain tag of streams without an affinity key.
const TAG_V1: &[u8] = b"ursula-stream-record-v1";
/// Domain tag of streams with an affinity key (even an empty one).
const TAG_V2: &[u8] = b"ursula-stream-record-v2";
const NUL: &[u8] = &[0];
const KIND_INLINE: &[u8] = b"inline";
const KIND_EXTERNAL: &[u8] = b"external";
/// Longest item: v2 header (10 pieces) plus the two external pieces.
const MAX_PIECES: usize = 12;

/// The stream identity hashed into every integrity item: the three parts of
/// the stream's full `BucketStreamId`.
///
/// Build it from the slot's id, e.g.
/// `IntegrityDomain::new(&id.bucket_id, id.affinity_key.as_deref(), &id.stream_id)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IntegrityDomain<'a> {
    /// The bucket id.
    pub bucket_id: &'a str,
    /// The affinity key; `Some("")` is distinct from `None` (v2 vs v1 layout).
    pub affinity_key: Option<&'a str>,
    /// The local stream name.
    pub stream_id: &'a str,
}

impl<'a> IntegrityDomain<'a> {
    /// Builds a domain from the three id parts.
    pub const fn new(
        bucket_id: &'a str,
        affinity_key: Option<&'a str>,
        stream_id: &'a str,
    ) -> Self {
        Self {
            bucket_id,
            affinity_key,
            stream_id,
        }
    }
}

/// The kind-specific tail of an item.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ItemKind<'a> {
    /// `inline` followed by the appended bytes.
    Inline(&'a [u8]),
    /// `external` followed by the object path and its size (LE u64).
    External {
        /// The object's `s3_path`.
        s3_path: &'a str,
        /// The object's `object_size`.
        object_size: u64,
    },
}

/// A fixed-capacity list of borrowed pieces.
struct Pieces<'a> {
    buf: [&'a [u8]; MAX_PIECES],
    len: usize,
}

impl<'a> Pieces<'a> {
    fn new() -> Self {
        Self {
            buf: [&[]; MAX_PIECES],
            len: 0,
        }
    }

    fn push(&mut self, piece: &'a [u8]) {
        // MAX_PIECES covers the longest layout; `get_mut` keeps this panic-free.
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = piece;
            self.len += 1;
        }
    }

    fn as_slice(&self) -> &[&'a [u8]] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

/// Capacity of the stack buffer the header is assembled in: room for the
/// v2 tag, ids as long as the machine accepts (a 122-byte path
/// `bucket/affinity/stream`), the NULs, the offsets and the kind tag.
const HEADER_CAP: usize = 256;
/// Capacity of the buffer tried first: a v1 header whose bucket and stream
/// names have up to 79 bytes together (81 for an inline item).
const SHORT_HEADER_CAP: usize = 128;

/// Calls `f` with the pieces of the item for `[start_offset, end_offset)`.
/// Their plain concatenation is the item of spec 02 §5.2: usually the whole
/// header as one piece, then the payload (or the object path and size).
pub(crate) fn with_item_pieces<R>(
    domain: IntegrityDomain<'_>,
    start_offset: u64,
    end_offset: u64,
    kind: ItemKind<'_>,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    let size_le = match kind {
        ItemKind::External { object_size, .. } => object_size.to_le_bytes(),
        ItemKind::Inline(_) => [0; 8],
    };
    let (kind_tag, tail): (&[u8], [&[u8]; 2]) = match kind {
        ItemKind::Inline(payload) => (KIND_INLINE, [payload, &[]]),
        ItemKind::External { s3_path, .. } => (KIND_EXTERNAL, [s3_path.as_bytes(), &size_le]),
    };
    // Most headers fit the short buffer, whose zeroing the compiler does
    // with a few inline stores; the long one costs a `memset` call.
    let mut short = Header::<SHORT_HEADER_CAP>::new();
    if short.fill(domain, start_offset, end_offset, kind_tag) {
        return after_header(short.as_slice(), kind, tail, f);
    }
    let mut header = Header::<HEADER_CAP>::new();
    if header.fill(domain, start_offset, end_offset, kind_tag) {
        return after_header(header.as_slice(), kind, tail, f);
    }
    // Too long for the buffer: the same bytes, piece by piece.
    let start_le = start_offset.to_le_bytes();
    let end_le = end_offset.to_le_bytes();
    let mut pieces = Pieces::new();
    match domain.affinity_key {
        None => {
            pieces.push(TAG_V1);
            pieces.push(domain.bucket_id.as_bytes());
            pieces.push(NUL);
        }
        Some(key) => {
            pieces.push(TAG_V2);
            pieces.push(domain.bucket_id.as_bytes());
            pieces.push(NUL);
            pieces.push(key.as_bytes());
            pieces.push(NUL);
        }
    }
    pieces.push(domain.stream_id.as_bytes());
    pieces.push(NUL);
    pieces.push(&start_le);
    pieces.push(&end_le);
    pieces.push(kind_tag);
    for piece in tail {
        pieces.push(piece);
    }
    f(pieces.as_slice())
}

/// Calls `f` with `header` followed by the kind's tail pieces (one for an
/// inline item, two for an external one).
#[inline]
fn after_header<R>(
    header: &[u8],
    kind: ItemKind<'_>,
    tail: [&[u8]; 2],
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    match kind {
        ItemKind::Inline(_) => f(&[header, tail[0]]),
        ItemKind::External { .. } => f(&[header, tail[0], tail[1]]),
    }
}

/// An item header (tag, ids, offsets, kind tag) assembled in a stack buffer.
struct Header<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Header<N> {
    fn new() -> Self {
        Self {
            buf: [0; N],
            len: 0,
        }
    }

    /// Writes the whole header; false if it does not fit.
    fn fill(&mut self, domain: IntegrityDomain<'_>, start: u64, end: u64, kind_tag: &[u8]) -> bool {
        let ids = match domain.affinity_key {
            None => self.put(TAG_V1) && self.put(domain.bucket_id.as_bytes()) && self.put(NUL),
            Some(key) => {
                self.put(TAG_V2)
                    && self.put(domain.bucket_id.as_bytes())
                    && self.put(NUL)
                    && self.put(key.as_bytes())
                    && self.put(NUL)
            }
        };
        ids && self.put(domain.stream_id.as_bytes())
            && self.put(NUL)
            && self.put(&start.to_le_bytes())
            && self.put(&end.to_le_bytes())
            && self.put(kind_tag)
    }

    /// Appends `bytes`; false (nothing written) if they do not fit.
    #[inline(always)]
    fn put(&mut self, bytes: &[u8]) -> bool {
        let Some(end) = self.len.checked_add(bytes.len()) else {
            return false;
        };
        match self.buf.get_mut(self.len..end) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len = end;
                true
            }
            None => false,
        }
    }

    fn as_slice(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or(&[])
    }
}

/// The setsum holding exactly the one item for `[start_offset, end_offset)`.
pub(crate) fn item_setsum(
    domain: IntegrityDomain<'_>,
    start_offset: u64,
    end_offset: u64,
    kind: ItemKind<'_>,
) -> Setsum {
    with_item_pieces(
        domain,
        start_offset,
        end_offset,
        kind,
        crate::hash::item_of_pieces,
    )
}

#[cfg(test)]
mod tests {
    use setsum::Setsum;

    use super::{
        HEADER_CAP, IntegrityDomain, ItemKind, SHORT_HEADER_CAP, item_setsum, with_item_pieces,
    };

    /// The item written out byte by byte, as spec 02 §5.2 lays it out.
    fn spelled_out(
        domain: IntegrityDomain<'_>,
        start: u64,
        end: u64,
        kind: ItemKind<'_>,
    ) -> Vec<u8> {
        let mut item = Vec::new();
        match domain.affinity_key {
            None => {
                item.extend_from_slice(b"ursula-stream-record-v1");
                item.extend_from_slice(domain.bucket_id.as_bytes());
                item.push(0);
            }
            Some(key) => {
                item.extend_from_slice(b"ursula-stream-record-v2");
                item.extend_from_slice(domain.bucket_id.as_bytes());
                item.push(0);
                item.extend_from_slice(key.as_bytes());
                item.push(0);
            }
        }
        item.extend_from_slice(domain.stream_id.as_bytes());
        item.push(0);
        item.extend_from_slice(&start.to_le_bytes());
        item.extend_from_slice(&end.to_le_bytes());
        match kind {
            ItemKind::Inline(payload) => {
                item.extend_from_slice(b"inline");
                item.extend_from_slice(payload);
            }
            ItemKind::External {
                s3_path,
                object_size,
            } => {
                item.extend_from_slice(b"external");
                item.extend_from_slice(s3_path.as_bytes());
                item.extend_from_slice(&object_size.to_le_bytes());
            }
        }
        item
    }

    /// Short ids (one header piece) and ids too long for the header buffer
    /// (piece by piece) hash the same spelled-out item.
    #[test]
    fn header_buffer_and_piecewise_fallback_hash_the_same_item() {
        // A v1 inline header of bucket "bench" is 52 bytes plus the stream
        // name: 76 fills the short buffer exactly, 77 needs the long one.
        let short_full = "f".repeat(SHORT_HEADER_CAP - 52);
        let short_over = "o".repeat(SHORT_HEADER_CAP - 51);
        let near = "x".repeat(HEADER_CAP - 60);
        let long = "s".repeat(HEADER_CAP);
        let streams = [
            "s",
            short_full.as_str(),
            short_over.as_str(),
            near.as_str(),
            long.as_str(),
        ];
        for stream in streams {
            for key in [None, Some(""), Some("k")] {
                let domain = IntegrityDomain::new("bench", key, stream);
                for kind in [
                    ItemKind::Inline(b"abc"),
                    ItemKind::Inline(b""),
                    ItemKind::External {
                        s3_path: "s3://b/o",
                        object_size: 9,
                    },
                ] {
                    let expected = spelled_out(domain, 7, 10, kind);
                    let pieces = with_item_pieces(domain, 7, 10, kind, |p| p.concat());
                    assert_eq!(pieces, expected, "{stream:.8} {key:?} {kind:?}");
                    let mut sum = Setsum::default();
                    sum.insert(&expected);
                    assert_eq!(item_setsum(domain, 7, 10, kind), sum);
                }
            }
        }
    }
}
