//! The visible-snapshot digest (spec 05 §6.1, spec 07 §5.3 step 12).

/// Lowercase hex (64 characters) BLAKE3 of
/// `le_u64(content_type.len()) ‖ content_type ‖ payload`.
///
/// This is the digest stored with a visible snapshot: computed when one is
/// published, and by restore when a snapshot entry carries an empty digest.
#[must_use]
pub fn visible_snapshot_digest(content_type: &str, payload: &[u8]) -> String {
    let len = u64::try_from(content_type.len()).unwrap_or(u64::MAX);
    let mut hasher = blake3::Hasher::new();
    hasher.update(&len.to_le_bytes());
    hasher.update(content_type.as_bytes());
    hasher.update(payload);
    hasher.finalize().to_hex().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_05_vectors() {
        assert_eq!(
            visible_snapshot_digest("text/plain", b"state"),
            "d1768bf8ff2099ce2eb24a7b8ff7a2c6ea48a094fde29160a1ed42943358e2dc"
        );
        assert_eq!(
            visible_snapshot_digest("x", b""),
            "83dc55ccddb68bf3cf487468c2681a52e752a60105fb23653f70a55eb95ad340"
        );
    }

    #[test]
    fn spec_07_vector() {
        assert_eq!(
            visible_snapshot_digest("application/json", b"{}"),
            "a8e77ad0200c3d91cb1062a5ee44d523f5b458efa4639a671b4c1421a3f27f37"
        );
    }

    #[test]
    fn length_prefix_separates_content_type_from_payload() {
        assert_ne!(
            visible_snapshot_digest("ab", b"c"),
            visible_snapshot_digest("a", b"bc")
        );
    }
}
