//! Fast paths for the JSON form of byte vectors (`[104,105]`), which make
//! up most of a payload-heavy snapshot. Output and accepted input are
//! exactly serde_json's for `Vec<u8>`; anything unusual on input falls back
//! to serde_json itself.

/// Decimal text of every byte value, with its length.
const DIGITS: [([u8; 3], u8); 256] = {
    let mut table = [([0u8; 3], 0u8); 256];
    let mut i = 0;
    while i < 256 {
        let v = i as u8;
        table[i] = if v >= 100 {
            ([b'0' + v / 100, b'0' + (v / 10) % 10, b'0' + v % 10], 3)
        } else if v >= 10 {
            ([b'0' + v / 10, b'0' + v % 10, 0], 2)
        } else {
            ([b'0' + v, 0, 0], 1)
        };
        i += 1;
    }
    table
};

/// Appends `bytes` as a compact JSON array of numbers, byte-identical to
/// `serde_json::to_writer(&bytes.to_vec())`.
pub(crate) fn write_byte_array(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() * 4 + 2);
    out.push(b'[');
    for (i, &b) in bytes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let (digits, len) = &DIGITS[usize::from(b)];
        out.extend_from_slice(&digits[..usize::from(*len)]);
    }
    out.push(b']');
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\r' | b'\t')
}

/// Parses the JSON byte array starting at `text[at]` (which must be `[`);
/// returns the bytes and the position just after the closing `]`. Returns
/// `None` for anything but plain decimal integers 0–255 separated by commas
/// (and JSON whitespace); the caller then defers to serde_json, which also
/// produces the error for invalid input.
pub(crate) fn parse_byte_array_at(text: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    compact_byte_array_at(text, at).or_else(|| spaced_byte_array_at(text, at))
}

/// The compact form serde_json writes (`[1,22,255]`), in one pass.
fn compact_byte_array_at(text: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    if text.get(at) != Some(&b'[') {
        return None;
    }
    let t = text.get(at + 1..)?;
    if t.first() == Some(&b']') {
        return Some((Vec::new(), at + 2));
    }
    SCRATCH.with_borrow_mut(|out| {
        out.clear();
        let mut p = 0;
        // Every element needs its digits plus one delimiter, so four bytes of
        // lookahead always exist until the last element; the rare tail
        // (`…,7]` at the very end of the input) takes the general path.
        while let Some(w) = t.get(p..p + 4) {
            let d = [
                w[0].wrapping_sub(b'0'),
                w[1].wrapping_sub(b'0'),
                w[2].wrapping_sub(b'0'),
                w[3].wrapping_sub(b'0'),
            ];
            let (value, len) = if d[0] > 9 {
                return None;
            } else if d[1] > 9 {
                (d[0], 1)
            } else if d[0] == 0 {
                return None;
            } else if d[2] > 9 {
                (d[0] * 10 + d[1], 2)
            } else if d[3] <= 9 {
                return None;
            } else {
                let v = u16::from(d[0]) * 100 + u16::from(d[1]) * 10 + u16::from(d[2]);
                (u8::try_from(v).ok()?, 3)
            };
            out.push(value);
            match w.get(len) {
                Some(b',') => p += len + 1,
                // Exact-size copy: restore slices hot chunks out of it.
                Some(b']') => return Some((out.as_slice().to_vec(), at + 1 + p + len + 1)),
                _ => return None,
            }
        }
        None
    })
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Any whitespace layout (pretty-printed snapshots).
fn spaced_byte_array_at(text: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    if text.get(at) != Some(&b'[') {
        return None;
    }
    let rest = text.get(at + 1..)?;
    let close = rest.iter().position(|&b| b == b']')?;
    let body = &rest[..close];
    let end = at + 1 + close + 1;
    // Exact capacity: restore slices hot chunks out of this allocation.
    let mut out = Vec::with_capacity(body.iter().filter(|&&b| b == b',').count() + 1);
    let n = body.len();
    let mut i = 0;
    while i < n && is_ws(body[i]) {
        i += 1;
    }
    if i == n {
        out.shrink_to_fit();
        return Some((out, end));
    }
    loop {
        // One number: 1-3 digits, no leading zero unless it is "0".
        let first = *body.get(i)?;
        if !first.is_ascii_digit() {
            return None;
        }
        let mut value = u32::from(first - b'0');
        i += 1;
        let mut digits = 1;
        while i < n && body[i].is_ascii_digit() {
            if first == b'0' || digits == 3 {
                return None;
            }
            value = value * 10 + u32::from(body[i] - b'0');
            digits += 1;
            i += 1;
        }
        out.push(u8::try_from(value).ok()?);
        while i < n && is_ws(body[i]) {
            i += 1;
        }
        if i == n {
            return Some((out, end));
        }
        if body[i] != b',' {
            return None;
        }
        i += 1;
        while i < n && is_ws(body[i]) {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_what_serde_json_writes() {
        let all: Vec<u8> = (0..=255).collect();
        for bytes in [&[][..], &[0][..], &[7, 10, 99, 100, 255][..], &all[..]] {
            let mut out = Vec::new();
            write_byte_array(&mut out, bytes);
            assert_eq!(out, serde_json::to_vec(&bytes.to_vec()).unwrap_or_default());
        }
    }

    #[test]
    fn parses_what_serde_json_accepts() {
        for text in [
            "[]",
            "[ ]",
            "[0]",
            "[1,2,3]",
            "[ 255 , 0,\n 7 ]",
            "[10,100,200]",
        ] {
            let expected: Vec<u8> = serde_json::from_str(text).unwrap_or_default();
            let got = parse_byte_array_at(text.as_bytes(), 0);
            assert_eq!(got, Some((expected, text.len())), "{text}");
        }
    }

    #[test]
    fn defers_everything_unusual() {
        for text in [
            "[256]", "[01]", "[1,]", "[,1]", "[-1]", "[1.0]", "[1e2]", "[1 2]", "[\"a\"]",
            "[1000]", "{}", "[1",
        ] {
            assert_eq!(parse_byte_array_at(text.as_bytes(), 0), None, "{text}");
            // serde_json rejects them too (so the fallback reports the error).
            assert!(serde_json::from_str::<Vec<u8>>(text).is_err(), "{text}");
        }
    }
}
