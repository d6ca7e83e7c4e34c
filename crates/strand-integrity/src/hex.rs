//! Setsum hex digests: lowercase encoding and the lenient `setsum` 0.8 parse
//! (spec 02 §6.4), made panic-free for non-ASCII input.

use setsum::{SETSUM_BYTES, Setsum};

/// Length in bytes of a setsum hex digest.
pub(crate) const SETSUM_HEX_LEN: usize = SETSUM_BYTES * 2;

const LOWER_HEX: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of the setsum's 32-byte digest (columns as little-endian
/// words). Same text as `Setsum::hexdigest`, without per-byte formatting.
pub(crate) fn encode_setsum_hex(setsum: &Setsum) -> String {
    let digest = setsum.digest();
    let mut out = String::with_capacity(SETSUM_HEX_LEN);
    for byte in digest {
        out.push(char::from(LOWER_HEX[usize::from(byte >> 4)]));
        out.push(char::from(LOWER_HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// Parses a setsum hex digest exactly as `Setsum::from_hexdigest` (setsum 0.8):
/// 64 bytes, each two-character group parsed by `u8::from_str_radix(_, 16)`
/// (so upper case and `+h` groups are accepted), columns **not** reduced.
///
/// Unlike the reference, which can panic when a multi-byte UTF-8 character
/// straddles a group boundary, any non-ASCII input is rejected (spec 02 §9).
pub(crate) fn parse_setsum_hex(text: &str) -> Option<Setsum> {
    if text.len() != SETSUM_HEX_LEN || !text.is_ascii() {
        return None;
    }
    // ASCII text: every byte index is a char boundary, so the crate's slicing
    // cannot panic.
    Setsum::from_hexdigest(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const ZEROS_62: &str = "00000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn empty_setsum_encodes_as_64_zeros() {
        assert_eq!(
            encode_setsum_hex(&Setsum::default()),
            crate::EMPTY_SETSUM_HEX
        );
    }

    #[test]
    fn encoding_matches_the_crate_hexdigest() {
        let mut s = Setsum::default();
        for item in [&b"a"[..], b"bc", b"", b"this is the first value"] {
            s.insert(item);
            assert_eq!(encode_setsum_hex(&s), s.hexdigest());
        }
    }

    #[test]
    fn uppercase_is_accepted() {
        let upper = format!("AB{ZEROS_62}");
        let lower = format!("ab{ZEROS_62}");
        assert_eq!(parse_setsum_hex(&upper), parse_setsum_hex(&lower));
        assert!(parse_setsum_hex(&lower).is_some());
    }

    #[test]
    fn plus_digit_group_is_that_digit() {
        // Spec 02 §5.5: `+f00…` parses as byte 0x0f followed by zeros.
        let parsed = parse_setsum_hex(&format!("+f{ZEROS_62}")).unwrap();
        assert_eq!(encode_setsum_hex(&parsed), format!("0f{ZEROS_62}"));
    }

    #[test]
    fn rejected_inputs() {
        for bad in [
            String::new(),
            "zz".to_owned(),
            format!("0{ZEROS_62}"),          // 63 bytes
            format!("000{ZEROS_62}"),        // 65 bytes
            format!("-1{ZEROS_62}"),         // sign not allowed for u8
            format!(" 1{ZEROS_62}"),         // whitespace
            format!("++{ZEROS_62}"),         // sign without digit
            format!("0g{ZEROS_62}"),         // not hex
            format!("0é{}", &ZEROS_62[1..]), // 64 bytes, 'é' straddles groups 0/1
            format!("é{ZEROS_62}"),          // 64 bytes, 'é' aligned to group 0
        ] {
            assert!(parse_setsum_hex(&bad).is_none(), "accepted {bad:?}");
        }
    }

    #[test]
    fn columns_are_not_reduced_on_parse() {
        // 0xffffffff is above P[0] = 0xfffffffb but is kept verbatim.
        let text = format!("ffffffff{}", &ZEROS_62[6..]);
        let parsed = parse_setsum_hex(&text).unwrap();
        assert_eq!(encode_setsum_hex(&parsed), text);
    }
}
