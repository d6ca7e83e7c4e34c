//! Which group owns a stream (spec 08 §23): FNV-1a 64 of
//! `bucket + "/" + (affinity key, else stream id)`, modulo the group count.

use strand::BucketStreamId;

const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a 64 over the given byte pieces, hashed as one concatenated string.
pub fn fnv1a64(pieces: &[&[u8]]) -> u64 {
    let mut hash = FNV_OFFSET_BASIS;
    for piece in pieces {
        for &byte in *piece {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(FNV_PRIME);
        }
    }
    hash
}

/// The placement key's hash of a stream: its affinity key when it has one
/// (so streams sharing a key share a group), else its stream id.
pub fn placement_hash(id: &BucketStreamId) -> u64 {
    let local = id.affinity_key.as_deref().unwrap_or(&id.stream_id);
    fnv1a64(&[id.bucket_id.as_bytes(), b"/", local.as_bytes()])
}

/// The group index of a stream among `groups` groups (`groups` ≥ 1).
pub fn group_of(id: &BucketStreamId, groups: usize) -> usize {
    let groups = u64::try_from(groups.max(1)).unwrap_or(u64::MAX);
    // The remainder is below `groups`, which came from a usize.
    usize::try_from(placement_hash(id) % groups).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_published_vectors() {
        // Vectors of the FNV reference test suite (FNV-1a, 64 bit).
        assert_eq!(fnv1a64(&[b""]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(&[b"a"]), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(&[b"foobar"]), 0x8594_4171_f739_67e8);
        assert_eq!(fnv1a64(&[b"foo", b"bar"]), fnv1a64(&[b"foobar"]));
    }

    #[test]
    fn affinity_key_decides_placement() {
        let a = BucketStreamId::with_affinity("b", "k", "s1");
        let b = BucketStreamId::with_affinity("b", "k", "s2");
        let plain = BucketStreamId::new("b", "k");
        for groups in [1, 2, 7, 64] {
            assert_eq!(group_of(&a, groups), group_of(&b, groups));
            assert_eq!(group_of(&a, groups), group_of(&plain, groups));
            assert!(group_of(&a, groups) < groups);
        }
    }

    #[test]
    fn one_group_takes_everything() {
        assert_eq!(group_of(&BucketStreamId::new("x", "y"), 1), 0);
        assert_eq!(group_of(&BucketStreamId::new("x", "y"), 0), 0);
    }
}
