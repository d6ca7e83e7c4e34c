//! Server-sent event framing (spec 08 §8): `event: <kind>` lines, payload
//! lines `data:` with no space, each payload split on CR, LF and CRLF so
//! no payload can start an event of its own.
//!
//! An SSE client strips one space after `data:`, so a line that begins
//! with a space is written after one extra space (`data:` + ` ` + line):
//! every client reads the line back whole. Other lines keep the bare
//! `data:line` the official suite checks for.

use bytes::{BufMut, BytesMut};

/// How a stream's data events are encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataEncoding {
    /// `text/*` streams: the text as it is.
    Text,
    /// JSON streams: one JSON array of the values.
    Json,
    /// Anything else: standard base64.
    Base64,
}

impl DataEncoding {
    /// The encoding for a stream's content type.
    pub fn for_content_type(content_type: &str) -> Self {
        let media = strand_engine::media_type(content_type);
        if media.eq_ignore_ascii_case("application/json") {
            Self::Json
        } else if media
            .get(..5)
            .is_some_and(|prefix| prefix.eq_ignore_ascii_case("text/"))
        {
            Self::Text
        } else {
            Self::Base64
        }
    }
}

/// Appends one event: `event: {kind}`, then one `data:` line per line of
/// `payload`, then a blank line.
pub fn push_event(out: &mut BytesMut, kind: &str, payload: &[u8]) {
    out.put_slice(b"event: ");
    out.put_slice(kind.as_bytes());
    out.put_u8(b'\n');
    let mut rest = payload;
    loop {
        let cut = rest.iter().position(|&b| b == b'\n' || b == b'\r');
        let (line, next) = match cut {
            None => (rest, None),
            Some(i) => {
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                (&rest[..i], Some(&rest[i + skip..]))
            }
        };
        out.put_slice(b"data:");
        if line.first() == Some(&b' ') {
            out.put_u8(b' ');
        }
        out.put_slice(line);
        out.put_u8(b'\n');
        match next {
            Some(next) => rest = next,
            None => break,
        }
    }
    out.put_u8(b'\n');
}

/// The control event's JSON object, flat, keys in a fixed order.
pub fn control_json(
    next_offset: &str,
    cursor: Option<&str>,
    up_to_date: bool,
    closed: bool,
) -> String {
    let mut s = String::with_capacity(96);
    s.push_str("{\"streamNextOffset\":\"");
    s.push_str(next_offset);
    s.push('"');
    if closed {
        s.push_str(",\"streamClosed\":true");
    } else {
        if let Some(cursor) = cursor {
            s.push_str(",\"streamCursor\":\"");
            s.push_str(cursor);
            s.push('"');
        }
        if up_to_date {
            s.push_str(",\"upToDate\":true");
        }
    }
    s.push('}');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_lines_cannot_start_events() {
        let mut out = BytesMut::new();
        push_event(&mut out, "data", b"a\r\n\r\nevent: control\rb\n");
        assert_eq!(
            &out[..],
            b"event: data\ndata:a\ndata:\ndata:event: control\ndata:b\ndata:\n\n"
        );
    }

    /// What an SSE client reads from one event's `data` lines (the SSE
    /// standard: one space after the colon is dropped).
    fn decoded(event: &[u8]) -> Vec<u8> {
        let text = std::str::from_utf8(event).unwrap_or_default();
        let lines: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|l| l.strip_prefix(' ').unwrap_or(l))
            .collect();
        lines.join("\n").into_bytes()
    }

    #[test]
    fn lines_that_begin_with_spaces_read_back_whole() {
        for payload in [" two\n  lines", "  ", "a\n b\n\n  c ", "plain\nlines"] {
            let mut out = BytesMut::new();
            push_event(&mut out, "data", payload.as_bytes());
            assert_eq!(decoded(&out), payload.as_bytes(), "{payload:?}");
        }
        let mut out = BytesMut::new();
        push_event(&mut out, "data", b" two\n  lines\nline1");
        assert_eq!(
            &out[..],
            b"event: data\ndata:  two\ndata:   lines\ndata:line1\n\n"
        );
    }

    #[test]
    fn control_events_are_flat() {
        assert_eq!(
            control_json("0_1", Some("7"), true, false),
            r#"{"streamNextOffset":"0_1","streamCursor":"7","upToDate":true}"#
        );
        assert_eq!(
            control_json("0_1", Some("7"), true, true),
            r#"{"streamNextOffset":"0_1","streamClosed":true}"#
        );
    }

    #[test]
    fn encodings_by_type() {
        assert_eq!(
            DataEncoding::for_content_type("text/plain; charset=utf-8"),
            DataEncoding::Text
        );
        assert_eq!(
            DataEncoding::for_content_type("Application/JSON"),
            DataEncoding::Json
        );
        assert_eq!(
            DataEncoding::for_content_type("application/octet-stream"),
            DataEncoding::Base64
        );
        assert_eq!(
            DataEncoding::for_content_type("image/png"),
            DataEncoding::Base64
        );
        // A multi-byte character across byte 5 is no `text/` prefix (it
        // once panicked slicing there).
        assert_eq!(
            DataEncoding::for_content_type("text\u{e9}/plain"),
            DataEncoding::Base64
        );
    }
}
