//! Checksummed records in segment files, and their recovery.
//!
//! A segment is a sequence of records:
//!
//! ```text
//! record := len: u32 LE ‖ !len: u32 LE ‖ crc: u64 LE ‖ payload[len]
//! payload := kind: u8 ‖ body (MessagePack)
//! crc := CRC-64/XZ (crc64fast) of payload
//! ```
//!
//! `!len` (the bitwise complement) lets recovery tell a damaged header
//! from a record cut short. Recovery of a segment stops at the first
//! record that is not whole and intact:
//!
//! - in the last segment, a record cut short (fewer bytes left than its
//!   header or its length say), a zero-filled tail, or a last record whose
//!   checksum fails is a torn tail: it is truncated away and reported;
//! - anything else (a failed checksum with more data after it, a damaged
//!   header followed by non-zero bytes, any damage in an older segment) is
//!   an error naming the file and byte offset. Nothing is ever skipped.

use std::path::{Path, PathBuf};

/// Bytes of a record's header.
pub(crate) const HEADER_LEN: usize = 16;

/// The largest payload a record may have (a corrupt length beyond it is
/// reported as such).
pub(crate) const MAX_PAYLOAD: usize = 1 << 30;

/// Why a log directory could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// A record that is not the torn tail of the last segment is damaged.
    #[error("{}: corrupt log record at byte {offset}: {reason}", path.display())]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// The byte offset of the damaged record.
        offset: u64,
        /// What is wrong with it.
        reason: String,
    },
}

impl LogError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Appends one record to `out`.
pub(crate) fn encode_record(kind: u8, body: &[u8], out: &mut Vec<u8>) {
    let len = body.len().saturating_add(1);
    let len32 = u32::try_from(len).unwrap_or(u32::MAX);
    let mut digest = crc64fast::Digest::new();
    digest.write(&[kind]);
    digest.write(body);
    out.reserve(HEADER_LEN + len);
    out.extend_from_slice(&header(len32, digest.sum64()));
    out.push(kind);
    out.extend_from_slice(body);
}

/// A record's header: its payload's length, that length's complement and
/// the payload's checksum.
fn header(len32: u32, crc: u64) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..4].copy_from_slice(&len32.to_le_bytes());
    header[4..8].copy_from_slice(&(!len32).to_le_bytes());
    header[8..].copy_from_slice(&crc.to_le_bytes());
    header
}

/// Appends one record whose body `write` serializes straight into `out`
/// (no body buffer of its own, no second copy): the same bytes as
/// [`encode_record`] with the body `write` produces. On an error `out` is
/// left as it was.
///
/// # Errors
/// What `write` answered, or a body longer than a record can hold.
pub(crate) fn encode_record_with<E: std::fmt::Display>(
    kind: u8,
    out: &mut Vec<u8>,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
) -> Result<(), String> {
    let at = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.push(kind);
    if let Err(e) = write(out) {
        out.truncate(at);
        return Err(e.to_string());
    }
    let payload_len = out.len() - at - HEADER_LEN;
    let Ok(len32) = u32::try_from(payload_len) else {
        out.truncate(at);
        return Err(format!(
            "a log record of {payload_len} bytes is longer than a record can hold"
        ));
    };
    let mut digest = crc64fast::Digest::new();
    digest.write(out.get(at + HEADER_LEN..).unwrap_or_default());
    if let Some(slot) = out.get_mut(at..at + HEADER_LEN) {
        slot.copy_from_slice(&header(len32, digest.sum64()));
    }
    Ok(())
}

/// Checks one whole record read back from a segment (`bytes` is exactly
/// the record: header and payload) and returns its kind and body.
///
/// # Errors
/// What is wrong with it: a header that does not match the record's
/// length, or a checksum that does not match its payload.
pub(crate) fn check_record(bytes: &[u8]) -> Result<(u8, &[u8]), String> {
    if bytes.len() <= HEADER_LEN {
        return Err(format!("a record of {} bytes is too short", bytes.len()));
    }
    let len = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let check = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    if len != !check || len as usize != bytes.len() - HEADER_LEN {
        return Err(format!(
            "damaged record header (length {len}, expected {})",
            bytes.len() - HEADER_LEN
        ));
    }
    let crc = u64::from_le_bytes([
        bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15],
    ]);
    let payload = &bytes[HEADER_LEN..];
    let mut digest = crc64fast::Digest::new();
    digest.write(payload);
    if digest.sum64() != crc {
        return Err("checksum mismatch".to_owned());
    }
    Ok((payload[0], &payload[1..]))
}

/// One intact record of a segment.
pub(crate) struct Record<'a> {
    /// Its byte offset in the file.
    pub(crate) offset: u64,
    /// Its kind byte.
    pub(crate) kind: u8,
    /// Its body.
    pub(crate) body: &'a [u8],
}

/// What a segment scan found at its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tail {
    /// The segment ends exactly after its last intact record.
    Clean,
    /// A torn tail starts at `offset`: why.
    Torn { offset: u64, reason: String },
}

/// Splits a segment's bytes into intact records, stopping at a torn tail.
/// `last` says whether this is the newest segment (the only one that may
/// have a torn tail).
///
/// # Errors
/// [`LogError::Corrupt`] for damage that is not a torn tail.
pub(crate) fn scan<'a>(
    path: &Path,
    bytes: &'a [u8],
    last: bool,
) -> Result<(Vec<Record<'a>>, Tail), LogError> {
    let mut records = Vec::new();
    let mut at = 0usize;
    let corrupt = |offset: usize, reason: String| LogError::Corrupt {
        path: path.to_path_buf(),
        offset: offset as u64,
        reason,
    };
    let torn = |offset: usize, reason: String| -> Result<Tail, LogError> {
        if last {
            Ok(Tail::Torn {
                offset: offset as u64,
                reason,
            })
        } else {
            Err(corrupt(
                offset,
                format!("{reason} (in a segment that is not the newest)"),
            ))
        }
    };
    while at < bytes.len() {
        let rest = &bytes[at..];
        if rest.len() < HEADER_LEN {
            return Ok((records, torn(at, "a record header cut short".to_owned())?));
        }
        let len = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let check = u32::from_le_bytes([rest[4], rest[5], rest[6], rest[7]]);
        if len != !check || len == 0 || len as usize > MAX_PAYLOAD {
            if rest.iter().all(|b| *b == 0) {
                return Ok((records, torn(at, "a zero-filled tail".to_owned())?));
            }
            return Err(corrupt(at, "damaged record header".to_owned()));
        }
        let end = HEADER_LEN + len as usize;
        if rest.len() < end {
            return Ok((
                records,
                torn(
                    at,
                    format!(
                        "a record of {len} bytes cut short after {} bytes",
                        rest.len() - HEADER_LEN
                    ),
                )?,
            ));
        }
        let crc = u64::from_le_bytes([
            rest[8], rest[9], rest[10], rest[11], rest[12], rest[13], rest[14], rest[15],
        ]);
        let payload = &rest[HEADER_LEN..end];
        let mut digest = crc64fast::Digest::new();
        digest.write(payload);
        if digest.sum64() != crc {
            if at + end == bytes.len() {
                return Ok((
                    records,
                    torn(at, "the last record's checksum does not match".to_owned())?,
                ));
            }
            return Err(corrupt(
                at,
                format!(
                    "checksum mismatch with {} more bytes after the record",
                    bytes.len() - at - end
                ),
            ));
        }
        records.push(Record {
            offset: at as u64,
            kind: payload[0],
            body: &payload[1..],
        });
        at += end;
    }
    Ok((records, Tail::Clean))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn three() -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(1, b"first", &mut out);
        encode_record(2, b"second record", &mut out);
        encode_record(3, b"third", &mut out);
        out
    }

    #[test]
    fn intact_records_scan_clean() {
        let bytes = three();
        let (records, tail) = scan(Path::new("s"), &bytes, true).unwrap();
        assert_eq!(tail, Tail::Clean);
        let kinds: Vec<u8> = records.iter().map(|r| r.kind).collect();
        assert_eq!(kinds, [1, 2, 3]);
        assert_eq!(records[1].body, b"second record");
    }

    #[test]
    fn every_cut_of_the_last_record_is_a_torn_tail() {
        let bytes = three();
        let last_start = bytes.len() - (HEADER_LEN + 6);
        for cut in last_start + 1..bytes.len() {
            let (records, tail) = scan(Path::new("s"), &bytes[..cut], true).unwrap();
            assert_eq!(records.len(), 2, "cut at {cut}");
            assert!(
                matches!(tail, Tail::Torn { offset, .. } if offset == last_start as u64),
                "cut at {cut}: {tail:?}"
            );
        }
    }

    #[test]
    fn a_flipped_byte_in_the_last_payload_is_a_torn_tail() {
        let mut bytes = three();
        let n = bytes.len();
        bytes[n - 2] ^= 0x40;
        let (records, tail) = scan(Path::new("s"), &bytes, true).unwrap();
        assert_eq!(records.len(), 2);
        assert!(matches!(tail, Tail::Torn { .. }));
    }

    #[test]
    fn a_flipped_byte_in_a_middle_record_is_an_error_with_its_offset() {
        let mut bytes = three();
        let second = HEADER_LEN + 6;
        bytes[second + HEADER_LEN + 3] ^= 1;
        let err = scan(Path::new("dir/00000001.seg"), &bytes, true)
            .err()
            .unwrap();
        let text = err.to_string();
        assert!(text.contains("dir/00000001.seg"), "{text}");
        assert!(text.contains(&format!("at byte {second}")), "{text}");
    }

    #[test]
    fn a_damaged_middle_header_is_an_error() {
        let mut bytes = three();
        bytes[HEADER_LEN + 6 + 1] ^= 0xff;
        assert!(scan(Path::new("s"), &bytes, true).is_err());
    }

    #[test]
    fn a_record_written_in_place_is_the_same_bytes() {
        let mut whole = b"before".to_vec();
        let mut in_place = whole.clone();
        encode_record(9, b"a body of some bytes", &mut whole);
        encode_record_with(9, &mut in_place, |out| {
            out.extend_from_slice(b"a body of some bytes");
            Ok::<(), String>(())
        })
        .unwrap();
        assert_eq!(whole, in_place);
        // A failed body leaves the buffer as it was.
        let before = in_place.clone();
        let failed = encode_record_with(9, &mut in_place, |out| {
            out.extend_from_slice(b"half");
            Err("no")
        });
        assert_eq!(failed, Err("no".to_owned()));
        assert_eq!(in_place, before);
    }

    #[test]
    fn check_record_takes_an_intact_record_and_refuses_a_damaged_one() {
        let mut one = Vec::new();
        encode_record(7, b"body bytes", &mut one);
        assert_eq!(check_record(&one).unwrap(), (7, &b"body bytes"[..]));
        assert!(check_record(&one[..one.len() - 1]).is_err());
        let mut flipped = one.clone();
        flipped[HEADER_LEN + 2] ^= 4;
        assert!(check_record(&flipped).unwrap_err().contains("checksum"));
        let mut header = one;
        header[0] ^= 1;
        assert!(check_record(&header).unwrap_err().contains("header"));
    }

    #[test]
    fn a_zero_tail_is_torn_and_a_torn_older_segment_is_an_error() {
        let mut bytes = three();
        bytes.extend_from_slice(&[0u8; 40]);
        let (records, tail) = scan(Path::new("s"), &bytes, true).unwrap();
        assert_eq!(records.len(), 3);
        assert!(matches!(tail, Tail::Torn { .. }));
        assert!(scan(Path::new("s"), &bytes, false).is_err());
    }
}
