//! Hot payload checks of restore: legacy segment synthesis (spec 07 §5.3
//! step 6), segment/payload tiling (§5.6) and payload-source coverage of the
//! retained suffix (§5.7). All arithmetic is checked; nothing panics.

use strand_model::{ColdChunkRef, HotPayloadSegment, ObjectPayloadRef};

/// The hot segments restore uses (step 6): the given ones, or, when none are
/// given and the payload is non-empty, one synthesized segment
/// `hot_start_offset..tail` spanning the whole payload.
pub(crate) fn effective_hot_segments(
    hot_segments: &[HotPayloadSegment],
    payload_len: usize,
    hot_start_offset: u64,
    tail: u64,
) -> Vec<HotPayloadSegment> {
    if hot_segments.is_empty() && payload_len > 0 {
        vec![HotPayloadSegment {
            start_offset: hot_start_offset,
            end_offset: tail,
            payload_start: 0,
            payload_end: payload_len,
        }]
    } else {
        hot_segments.to_vec()
    }
}

/// §5.6: walking the segments in list order, each one starts in the payload
/// where the previous one ended (the first at 0), is non-empty in both
/// coordinates, lies within the payload and has equal offset and byte
/// lengths; together they end exactly at `payload_len`. Offset order,
/// overlap and position relative to `[retained, tail)` are not checked.
pub(crate) fn segments_tile_payload(segments: &[HotPayloadSegment], payload_len: usize) -> bool {
    let mut expected = 0_usize;
    for segment in segments {
        let Some(offset_len) = segment.end_offset.checked_sub(segment.start_offset) else {
            return false;
        };
        let Some(byte_len) = segment.payload_end.checked_sub(segment.payload_start) else {
            return false;
        };
        let fits = offset_len > 0
            && segment.payload_start == expected
            && byte_len > 0
            && segment.payload_end <= payload_len
            && u64::try_from(byte_len).is_ok_and(|len| len == offset_len);
        if !fits {
            return false;
        }
        expected = segment.payload_end;
    }
    expected == payload_len
}

/// Validity of one cold chunk or external ref (§5.7 step 1.2): a non-empty
/// range, a path that is not blank after trimming, and an object slice
/// `object_offset + len` that neither overflows nor exceeds `object_size`.
fn object_range_valid(
    start_offset: u64,
    end_offset: u64,
    s3_path: &str,
    object_size: u64,
    object_offset: u64,
) -> bool {
    if end_offset <= start_offset || s3_path.trim().is_empty() {
        return false;
    }
    object_offset
        .checked_add(end_offset - start_offset)
        .is_some_and(|object_end| object_end <= object_size)
}

/// The payload sources of one entry: everything §5.7 needs.
pub(crate) struct PayloadSources<'a> {
    /// The entry's `cold_frontier_offset`.
    pub(crate) cold_frontier_offset: u64,
    /// The entry's cold chunks.
    pub(crate) cold_chunks: &'a [ColdChunkRef],
    /// The entry's external segments.
    pub(crate) external_segments: &'a [ObjectPayloadRef],
    /// The effective hot segments (step 6).
    pub(crate) hot_segments: &'a [HotPayloadSegment],
}

impl PayloadSources<'_> {
    /// §5.7: every cold chunk and external ref is valid (even those wholly
    /// before `retained`), every hot segment is non-empty, and the ranges
    /// `(retained, frontier)`, chunks, external refs and hot segments, sorted
    /// by `(start, end)`, cover `[retained, tail)` without a gap. Coverage may
    /// run past `tail`.
    pub(crate) fn cover(&self, retained: u64, tail: u64) -> bool {
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(
            1 + self.cold_chunks.len() + self.external_segments.len() + self.hot_segments.len(),
        );
        if self.cold_frontier_offset > retained {
            ranges.push((retained, self.cold_frontier_offset));
        }
        for chunk in self.cold_chunks {
            if !object_range_valid(
                chunk.start_offset,
                chunk.end_offset,
                &chunk.s3_path,
                chunk.object_size,
                chunk.object_offset,
            ) {
                return false;
            }
            ranges.push((chunk.start_offset, chunk.end_offset));
        }
        for segment in self.external_segments {
            if !object_range_valid(
                segment.start_offset,
                segment.end_offset,
                &segment.s3_path,
                segment.object_size,
                segment.object_offset,
            ) {
                return false;
            }
            ranges.push((segment.start_offset, segment.end_offset));
        }
        for segment in self.hot_segments {
            if segment.end_offset <= segment.start_offset {
                return false;
            }
            ranges.push((segment.start_offset, segment.end_offset));
        }
        ranges.sort_unstable();
        let mut cursor = retained;
        for (start, end) in ranges {
            if end <= cursor {
                continue;
            }
            if start > cursor {
                return false;
            }
            cursor = end;
            if cursor >= tail {
                return true;
            }
        }
        cursor == tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(
        start_offset: u64,
        end_offset: u64,
        payload_start: usize,
        payload_end: usize,
    ) -> HotPayloadSegment {
        HotPayloadSegment {
            start_offset,
            end_offset,
            payload_start,
            payload_end,
        }
    }

    fn chunk(start: u64, end: u64, path: &str, size: u64, offset: u64) -> ColdChunkRef {
        ColdChunkRef {
            start_offset: start,
            end_offset: end,
            s3_path: path.to_owned(),
            object_size: size,
            object_offset: offset,
            shared_object: false,
            payload_digest: String::new(),
        }
    }

    fn hot_only(segments: &[HotPayloadSegment]) -> PayloadSources<'_> {
        PayloadSources {
            cold_frontier_offset: 0,
            cold_chunks: &[],
            external_segments: &[],
            hot_segments: segments,
        }
    }

    #[test]
    fn synthesis_only_for_empty_segments_and_non_empty_payload() {
        assert_eq!(effective_hot_segments(&[], 2, 3, 5), vec![seg(3, 5, 0, 2)]);
        assert!(effective_hot_segments(&[], 0, 3, 5).is_empty());
        let given = [seg(0, 1, 0, 1)];
        assert_eq!(effective_hot_segments(&given, 9, 3, 5), given.to_vec());
    }

    #[test]
    fn tiling_accepts_unordered_and_overlapping_segments() {
        assert!(segments_tile_payload(&[], 0));
        assert!(!segments_tile_payload(&[], 1));
        assert!(segments_tile_payload(
            &[seg(2, 4, 0, 2), seg(0, 2, 2, 4)],
            4
        ));
        assert!(segments_tile_payload(
            &[seg(0, 2, 0, 2), seg(1, 3, 2, 4)],
            4
        ));
    }

    #[test]
    fn tiling_rejections() {
        // Gap in the payload, short total, empty segment, reversed offsets,
        // length mismatch, payload_end beyond the payload, reversed bytes.
        assert!(!segments_tile_payload(&[seg(0, 1, 1, 2)], 2));
        assert!(!segments_tile_payload(&[seg(0, 1, 0, 1)], 2));
        assert!(!segments_tile_payload(&[seg(1, 1, 0, 0)], 0));
        assert!(!segments_tile_payload(&[seg(2, 1, 0, 1)], 1));
        assert!(!segments_tile_payload(&[seg(0, 2, 0, 1)], 1));
        assert!(!segments_tile_payload(&[seg(0, 5, 0, 5)], 3));
        assert!(!segments_tile_payload(&[seg(0, 1, 1, 0)], 1));
        assert!(!segments_tile_payload(
            &[seg(0, u64::MAX, 0, usize::MAX)],
            usize::MAX - 1
        ));
    }

    #[test]
    fn object_validity() {
        assert!(object_range_valid(0, 3, "p", 3, 0));
        assert!(!object_range_valid(0, 3, "p", 3, 1));
        assert!(!object_range_valid(3, 3, "p", 3, 0));
        assert!(!object_range_valid(0, 1, "  ", 1, 0));
        assert!(!object_range_valid(0, 1, "", 1, 0));
        assert!(!object_range_valid(0, 1, "p", u64::MAX, u64::MAX));
        assert!(!object_range_valid(0, 1, "p", 5, 5));
    }

    #[test]
    fn coverage_walk() {
        // Hot 0..3 on tail 2: coverage may run past the tail.
        assert!(hot_only(&[seg(0, 3, 0, 3)]).cover(0, 2));
        // Gap between 0 and 2.
        assert!(!hot_only(&[seg(2, 4, 0, 2)]).cover(0, 4));
        // Nothing to cover.
        assert!(hot_only(&[]).cover(2, 2));
        // retained == tail: a range wholly beyond the tail fails, a
        // straddling one (or one starting at the tail) passes.
        assert!(!hot_only(&[seg(3, 4, 0, 1)]).cover(2, 2));
        assert!(hot_only(&[seg(1, 3, 0, 2)]).cover(2, 2));
        assert!(hot_only(&[seg(2, 3, 0, 1)]).cover(2, 2));
        // Ranges wholly below the cursor are skipped.
        assert!(hot_only(&[seg(0, 1, 0, 1), seg(1, 3, 1, 3)]).cover(2, 3));
        // Short of the tail.
        assert!(!hot_only(&[seg(0, 1, 0, 1)]).cover(0, 2));
    }

    #[test]
    fn frontier_chunks_and_external_combine() {
        let chunks = [chunk(3, 6, "_packs/p1.bin", 10, 4)];
        let external = [ObjectPayloadRef {
            start_offset: 6,
            end_offset: 9,
            s3_path: "ext/a.bin".to_owned(),
            object_size: 3,
            object_offset: 0,
        }];
        let hot = [seg(9, 12, 0, 3)];
        let sources = PayloadSources {
            cold_frontier_offset: 3,
            cold_chunks: &chunks,
            external_segments: &external,
            hot_segments: &hot,
        };
        assert!(sources.cover(0, 12));
        let no_frontier = PayloadSources {
            cold_frontier_offset: 0,
            ..sources
        };
        assert!(!no_frontier.cover(0, 12));
    }

    #[test]
    fn invalid_chunk_before_retained_still_fails() {
        let chunks = [chunk(0, 1, "", 1, 0)];
        let hot = [seg(5, 6, 0, 1)];
        let sources = PayloadSources {
            cold_frontier_offset: 0,
            cold_chunks: &chunks,
            external_segments: &[],
            hot_segments: &hot,
        };
        assert!(!sources.cover(5, 6));
    }
}
