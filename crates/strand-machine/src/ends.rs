//! The record ends of one inline append (`payload_record_ends` of spec 02
//! §3.3.3), computed without an allocation for the usual few records and
//! without classifying the request's content type again when it is the
//! stream's own.

use strand_records::{RecordWriteError, is_json_record_content_type};

/// Ends kept inline up to this many records.
const INLINE_ENDS: usize = 8;

/// Relative record ends: inline up to [`INLINE_ENDS`], on the heap beyond.
pub(crate) struct RecordEnds {
    len: usize,
    inline: [u64; INLINE_ENDS],
    /// Every end once there are more than [`INLINE_ENDS`]; empty before.
    heap: Vec<u64>,
}

impl RecordEnds {
    fn new() -> Self {
        Self {
            len: 0,
            inline: [0; INLINE_ENDS],
            heap: Vec::new(),
        }
    }

    fn push(&mut self, end: u64) {
        if self.heap.is_empty() {
            if let Some(slot) = self.inline.get_mut(self.len) {
                *slot = end;
                self.len += 1;
                return;
            }
            self.heap.extend_from_slice(&self.inline);
        }
        self.heap.push(end);
    }

    /// The ends, in order.
    pub(crate) fn as_slice(&self) -> &[u64] {
        if self.heap.is_empty() {
            self.inline.get(..self.len).unwrap_or(&[])
        } else {
            &self.heap
        }
    }
}

/// Exactly `strand_records::payload_record_ends(content_type, payload)`:
/// no content type or a non-JSON one gives no ends; a JSON one gives the
/// position after every `\n` of a payload that ends with `\n` (none for an
/// empty payload), and `NonCanonicalJsonPayload` for one that does not.
///
/// `same_as_stream` (the content type is the stream's, compared once by
/// the caller) and `stream_is_json` (the stream's classification) let such
/// a request skip classifying it again.
pub(crate) fn inline_record_ends(
    content_type: Option<&str>,
    same_as_stream: bool,
    stream_is_json: bool,
    payload: &[u8],
) -> Result<RecordEnds, RecordWriteError> {
    let mut ends = RecordEnds::new();
    let Some(content_type) = content_type else {
        return Ok(ends);
    };
    let json = if same_as_stream {
        stream_is_json
    } else {
        is_json_record_content_type(content_type)
    };
    if !json {
        return Ok(ends);
    }
    match payload.last() {
        None => return Ok(ends),
        Some(&b'\n') => {}
        Some(_) => return Err(RecordWriteError::NonCanonicalJsonPayload),
    }
    push_newline_ends(&mut ends, payload);
    Ok(ends)
}

/// Pushes `i + 1` for every `i` with `payload[i] == b'\n'`, in order,
/// eight bytes at a time.
fn push_newline_ends(ends: &mut RecordEnds, payload: &[u8]) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const NEWLINES: u64 = ONES * b'\n' as u64;
    let end_after = |at: usize| u64::try_from(at + 1).unwrap_or(u64::MAX);
    let mut chunks = payload.chunks_exact(8);
    let mut base = 0usize;
    for chunk in &mut chunks {
        let Ok(bytes) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        // Zero bytes of `x` are the newlines; `hits` has the top bit of
        // exactly those bytes set (no false positives, unlike the
        // subtract-one trick).
        let x = u64::from_le_bytes(bytes) ^ NEWLINES;
        let mut hits = !(((x & LOW7) + LOW7) | x | LOW7);
        while hits != 0 {
            let byte = (hits.trailing_zeros() / 8) as usize;
            ends.push(end_after(base + byte));
            hits &= hits - 1;
        }
        base += 8;
    }
    for (i, &byte) in chunks.remainder().iter().enumerate() {
        if byte == b'\n' {
            ends.push(end_after(base + i));
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use strand_records::payload_record_ends;

    use super::inline_record_ends;

    fn content_type() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some("application/json".to_owned())),
            Just(Some("Application/JSON; charset=utf-8".to_owned())),
            Just(Some("application/octet-stream".to_owned())),
            Just(Some(" application/json ".to_owned())),
            "[a-z/; ]{0,20}".prop_map(Some),
        ]
    }

    #[test]
    fn few_and_many_records() {
        for payload in [
            &b"\n"[..],
            b"{}\n",
            b"a\nb\nc\n",
            b"12345678\n",
            b"1234567\n\n",
            b"\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
            b"x\ny\nzz\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
            b"no newline at the end\nx",
        ] {
            let got = inline_record_ends(Some("application/json"), true, true, payload)
                .map(|ends| ends.as_slice().to_vec());
            assert_eq!(got, payload_record_ends(Some("application/json"), payload));
        }
    }

    proptest! {
        /// Same result as the records crate's function, whatever the
        /// stream's content type, for payloads of few and of many records.
        #[test]
        fn matches_payload_record_ends(
            request in content_type(),
            stream in content_type(),
            same in any::<bool>(),
            payload in proptest::collection::vec(
                prop_oneof![Just(b'\n'), Just(b'x'), Just(0u8), Just(1u8), Just(0x8a_u8), any::<u8>()],
                0..40),
        ) {
            let stream = stream.unwrap_or_default();
            let request = if same { Some(stream.clone()) } else { request };
            let stream_is_json = strand_records::is_json_record_content_type(&stream);
            let same = request.as_deref() == Some(stream.as_str());
            let got = inline_record_ends(request.as_deref(), same, stream_is_json, &payload)
                .map(|ends| ends.as_slice().to_vec());
            prop_assert_eq!(got, payload_record_ends(request.as_deref(), &payload));
        }
    }
}
