//! The hashed item of one append (spec 02 §5.2) and its single-item setsum.
//!
//! The item is never materialised: its pieces are borrowed slices handed to
//! `Setsum::insert_vectored`, so an inline append costs one SHA3-256 pass over
//! a few dozen header bytes plus the payload, with no copy of the payload.

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

/// Calls `f` with the pieces of the item for `[start_offset, end_offset)`.
/// Their plain concatenation is the item of spec 02 §5.2.
pub(crate) fn with_item_pieces<R>(
    domain: IntegrityDomain<'_>,
    start_offset: u64,
    end_offset: u64,
    kind: ItemKind<'_>,
    f: impl FnOnce(&[&[u8]]) -> R,
) -> R {
    let start_le = start_offset.to_le_bytes();
    let end_le = end_offset.to_le_bytes();
    let size_le = match kind {
        ItemKind::External { object_size, .. } => object_size.to_le_bytes(),
        ItemKind::Inline(_) => [0; 8],
    };
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
    match kind {
        ItemKind::Inline(payload) => {
            pieces.push(KIND_INLINE);
            pieces.push(payload);
        }
        ItemKind::External { s3_path, .. } => {
            pieces.push(KIND_EXTERNAL);
            pieces.push(s3_path.as_bytes());
            pieces.push(&size_le);
        }
    }
    f(pieces.as_slice())
}

/// The setsum holding exactly the one item for `[start_offset, end_offset)`.
pub(crate) fn item_setsum(
    domain: IntegrityDomain<'_>,
    start_offset: u64,
    end_offset: u64,
    kind: ItemKind<'_>,
) -> Setsum {
    with_item_pieces(domain, start_offset, end_offset, kind, |pieces| {
        let mut setsum = Setsum::default();
        setsum.insert_vectored(pieces);
        setsum
    })
}
