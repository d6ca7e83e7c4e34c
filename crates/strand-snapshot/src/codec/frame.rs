//! One frame: header layout, CRC-64 and MessagePack bodies.

use rmp_serde::config::BytesMode;
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::format::FRAME_HEADER_LEN;

/// The fixed-size header in front of every frame body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameHeader {
    pub(crate) kind: u8,
    pub(crate) index: u64,
    pub(crate) len: u64,
    pub(crate) crc: u64,
}

impl FrameHeader {
    /// A header for `body`, with its CRC computed.
    pub(crate) fn for_body(kind: u8, index: u64, body: &[u8]) -> Self {
        let len = body.len() as u64;
        Self {
            kind,
            index,
            len,
            crc: frame_crc(kind, index, len, body),
        }
    }

    pub(crate) fn to_bytes(self) -> [u8; FRAME_HEADER_LEN] {
        let mut out = [0u8; FRAME_HEADER_LEN];
        out[0] = self.kind;
        out[1..9].copy_from_slice(&self.index.to_le_bytes());
        out[9..17].copy_from_slice(&self.len.to_le_bytes());
        out[17..25].copy_from_slice(&self.crc.to_le_bytes());
        out
    }

    pub(crate) fn parse(bytes: &[u8; FRAME_HEADER_LEN]) -> Self {
        let u64_at = |at: usize| {
            let mut le = [0u8; 8];
            le.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(le)
        };
        Self {
            kind: bytes[0],
            index: u64_at(1),
            len: u64_at(9),
            crc: u64_at(17),
        }
    }
}

/// CRC-64/XZ over `kind ‖ le64(index) ‖ le64(len) ‖ body`.
pub(crate) fn frame_crc(kind: u8, index: u64, len: u64, body: &[u8]) -> u64 {
    let mut digest = crc64fast::Digest::new();
    digest.write(&[kind]);
    digest.write(&index.to_le_bytes());
    digest.write(&len.to_le_bytes());
    digest.write(body);
    digest.sum64()
}

/// Encodes `value` into `buf` (cleared first) as MessagePack: structs as
/// maps keyed by field name, byte vectors as `bin`.
pub(crate) fn encode_body<T: Serialize + ?Sized>(
    buf: &mut Vec<u8>,
    value: &T,
) -> Result<(), rmp_serde::encode::Error> {
    buf.clear();
    let mut ser = rmp_serde::Serializer::new(buf)
        .with_struct_map()
        .with_bytes(BytesMode::ForceIterables);
    value.serialize(&mut ser)
}

/// Why a body did not decode.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// The MessagePack decoder failed.
    Decode(rmp_serde::decode::Error),
    /// The value is followed by this many extra bytes.
    Trailing(u64),
}

/// Decodes a body that must hold exactly one MessagePack value.
pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, BodyError> {
    let value = rmp_serde::from_slice(body).map_err(BodyError::Decode)?;
    match value_len(body) {
        Some(used) if used == body.len() => Ok(value),
        Some(used) => Err(BodyError::Trailing((body.len() - used) as u64)),
        // The decoder accepted what the scanner rejects: cannot happen for
        // well-formed MessagePack; report it as garbage rather than panic.
        None => Err(BodyError::Trailing(body.len() as u64)),
    }
}

/// The encoded length of the first MessagePack value of `buf`, or `None`
/// when it is malformed or incomplete. Iterative: nesting depth costs no
/// stack.
pub(crate) fn value_len(buf: &[u8]) -> Option<usize> {
    let mut pos = 0usize;
    let mut pending: u64 = 1;
    let be = |at: usize, n: usize| -> Option<u64> {
        let bytes = buf.get(at..at.checked_add(n)?)?;
        Some(bytes.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b)))
    };
    while pending > 0 {
        let marker = *buf.get(pos)?;
        pos += 1;
        pending -= 1;
        // (bytes of fixed data, bytes of a length prefix, extra items)
        let (skip, items): (u64, u64) = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => (0, 0),
            0x80..=0x8f => (0, 2 * u64::from(marker & 0x0f)),
            0x90..=0x9f => (0, u64::from(marker & 0x0f)),
            0xa0..=0xbf => (u64::from(marker & 0x1f), 0),
            0xc1 => return None,
            0xc4 | 0xd9 => (1 + be(pos, 1)?, 0),
            0xc5 | 0xda => (2 + be(pos, 2)?, 0),
            0xc6 | 0xdb => (4 + be(pos, 4)?, 0),
            0xc7 => (2 + be(pos, 1)?, 0),
            0xc8 => (3 + be(pos, 2)?, 0),
            0xc9 => (5 + be(pos, 4)?, 0),
            0xca | 0xce | 0xd2 => (4, 0),
            0xcb | 0xcf | 0xd3 => (8, 0),
            0xcc | 0xd0 => (1, 0),
            0xcd | 0xd1 => (2, 0),
            0xd4 => (2, 0),
            0xd5 => (3, 0),
            0xd6 => (5, 0),
            0xd7 => (9, 0),
            0xd8 => (17, 0),
            0xdc => (2, be(pos, 2)?),
            0xdd => (4, be(pos, 4)?),
            0xde => (2, 2 * be(pos, 2)?),
            0xdf => (4, 2 * be(pos, 4)?),
        };
        pos = pos.checked_add(usize::try_from(skip).ok()?)?;
        if pos > buf.len() {
            return None;
        }
        pending = pending.checked_add(items)?;
    }
    Some(pos)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn crc_is_crc64_xz() {
        // The CRC-64/XZ check value of "123456789".
        let mut digest = crc64fast::Digest::new();
        digest.write(b"123456789");
        assert_eq!(digest.sum64(), 0x995d_c9bb_df19_39fa);
    }

    #[test]
    fn header_round_trips() {
        let h = FrameHeader {
            kind: 2,
            index: 0x0102_0304_0506_0708,
            len: 99,
            crc: u64::MAX - 1,
        };
        assert_eq!(FrameHeader::parse(&h.to_bytes()), h);
        assert_eq!(h.to_bytes()[1], 0x08, "index is little-endian");
    }

    #[test]
    fn value_len_measures_nested_values() {
        let v = serde_json::json!({"a": [1, -1, 300, -300, 70000, "x", null, true, 1.5], "b": {"c": []}});
        let mut buf = Vec::new();
        encode_body(&mut buf, &v).unwrap();
        assert_eq!(value_len(&buf), Some(buf.len()));
        buf.push(0);
        assert_eq!(value_len(&buf), Some(buf.len() - 1));
        assert_eq!(value_len(&buf[..buf.len() - 3]), None);
        // bin 8 of length 3
        assert_eq!(value_len(&[0xc4, 3, 1, 2, 3]), Some(5));
        assert_eq!(value_len(&[0xc4, 3, 1, 2]), None);
        // array32 claiming u32::MAX elements in a short buffer
        assert_eq!(value_len(&[0xdd, 0xff, 0xff, 0xff, 0xff, 1, 2]), None);
        assert_eq!(value_len(&[0xc1]), None);
        assert_eq!(value_len(&[]), None);
    }

    #[test]
    fn decode_body_rejects_trailing_bytes() {
        let mut buf = Vec::new();
        encode_body(&mut buf, &7u64).unwrap();
        assert_eq!(decode_body::<u64>(&buf).unwrap(), 7);
        buf.extend_from_slice(&[1, 2]);
        assert!(matches!(
            decode_body::<u64>(&buf),
            Err(BodyError::Trailing(2))
        ));
    }
}
