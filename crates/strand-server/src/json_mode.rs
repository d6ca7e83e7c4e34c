//! JSON mode (spec 08 §9): a stream whose media type is `application/json`
//! stores each JSON value as one compact line, so the machine's record
//! index sees one record per value; reads turn the lines back into one
//! JSON array.

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::value::RawValue;

/// Why a JSON body was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JsonError {
    /// The body is not valid JSON.
    Invalid(String),
    /// A POST body was an empty array.
    EmptyArray,
}

/// Turns a request body into stored lines: a top-level array is flattened
/// one level (each element one value), anything else is one value. Each
/// value is re-written without insignificant whitespace and ends with
/// `\n`. `allow_empty` admits `[]` (a PUT creating an empty stream).
pub fn encode_body(body: &[u8], allow_empty: bool) -> Result<Bytes, JsonError> {
    let raw: &RawValue =
        serde_json::from_slice(body).map_err(|e| JsonError::Invalid(e.to_string()))?;
    let text = raw.get();
    let mut out = BytesMut::with_capacity(text.len() + 2);
    if text.starts_with('[') {
        let items: Vec<&RawValue> =
            serde_json::from_str(text).map_err(|e| JsonError::Invalid(e.to_string()))?;
        if items.is_empty() && !allow_empty {
            return Err(JsonError::EmptyArray);
        }
        for item in items {
            minify_into(item.get().as_bytes(), &mut out);
            out.put_u8(b'\n');
        }
    } else {
        minify_into(text.as_bytes(), &mut out);
        out.put_u8(b'\n');
    }
    Ok(out.freeze())
}

/// Copies valid JSON text without whitespace outside strings.
fn minify_into(json: &[u8], out: &mut BytesMut) {
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            out.put_u8(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else if !matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
            if b == b'"' {
                in_string = true;
            }
            out.put_u8(b);
        }
    }
}

/// Renders stored lines (whole values, each ending in `\n`) as one JSON
/// array: `[v1,v2,…]`, `[]` when there are none.
pub fn render_array(slices: &[Bytes]) -> Bytes {
    let len: usize = slices.iter().map(Bytes::len).sum();
    let mut out = BytesMut::with_capacity(len + 2);
    out.put_u8(b'[');
    let mut first = true;
    // A value may continue from one slice into the next (cold-tier pieces
    // are cut at byte counts, not at value boundaries).
    let mut inside = false;
    for slice in slices {
        let mut rest: &[u8] = slice;
        while !rest.is_empty() {
            let (part, ended, next) = match rest.iter().position(|&b| b == b'\n') {
                Some(p) => (&rest[..p], true, &rest[p + 1..]),
                None => (rest, false, &[][..]),
            };
            if !part.is_empty() {
                if !inside {
                    if !first {
                        out.put_u8(b',');
                    }
                    first = false;
                    inside = true;
                }
                out.put_slice(part);
            }
            if ended {
                inside = false;
            }
            rest = next;
        }
    }
    out.put_u8(b']');
    out.freeze()
}

/// The length of the longest prefix of `slices` that ends on a value
/// boundary (after a `\n`).
pub fn whole_values_len(slices: &[Bytes]) -> usize {
    let mut seen = 0;
    let mut last_end = 0;
    for slice in slices {
        if let Some(pos) = slice.iter().rposition(|&b| b == b'\n') {
            last_end = seen + pos + 1;
        }
        seen += slice.len();
    }
    last_end
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_cut_across_slices_render_whole() {
        let slices = [
            Bytes::from_static(b"{\"a\":"),
            Bytes::from_static(b"1}\n{\"b\""),
            Bytes::from_static(b":2}"),
            Bytes::from_static(b"\n"),
            Bytes::from_static(b"3\n"),
        ];
        assert_eq!(&render_array(&slices)[..], br#"[{"a":1},{"b":2},3]"#);
        assert_eq!(&render_array(&[])[..], b"[]");
    }

    #[test]
    fn arrays_are_flattened_one_level_and_minified() {
        let stored = encode_body(br#"[ {"a": 1}, {"b" : "x y"}, [1, 2] ]"#, false).unwrap();
        assert_eq!(&stored[..], b"{\"a\":1}\n{\"b\":\"x y\"}\n[1,2]\n");
        assert_eq!(
            &render_array(&[stored])[..],
            br#"[{"a":1},{"b":"x y"},[1,2]]"#
        );
    }

    #[test]
    fn scalars_and_escapes_survive() {
        let stored = encode_body(br#" "a\"b\n c" "#, false).unwrap();
        assert_eq!(&stored[..], b"\"a\\\"b\\n c\"\n");
        assert_eq!(
            &encode_body(b"12345678901234567890", false).unwrap()[..],
            b"12345678901234567890\n"
        );
    }

    #[test]
    fn invalid_and_empty_bodies() {
        assert!(matches!(
            encode_body(b"{", false),
            Err(JsonError::Invalid(_))
        ));
        assert!(matches!(
            encode_body(b"", false),
            Err(JsonError::Invalid(_))
        ));
        assert_eq!(encode_body(b"[]", false), Err(JsonError::EmptyArray));
        assert_eq!(&encode_body(b"[ ]", true).unwrap()[..], b"");
        assert_eq!(&render_array(&[])[..], b"[]");
    }

    #[test]
    fn value_boundaries() {
        let parts = [Bytes::from_static(b"1\n2"), Bytes::from_static(b"3\n45")];
        assert_eq!(whole_values_len(&parts), 5);
        assert_eq!(whole_values_len(&[Bytes::from_static(b"12")]), 0);
    }
}
