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
///
/// Elements are read two at a time from 8-byte little-endian windows (see
/// [`pairs`]) while both end with a comma; the last one or two elements,
/// and anything unusual, go through [`element`], which reads one element
/// from a 4-byte window (zero-padded at the very end of the input).
fn compact_byte_array_at(text: &[u8], at: usize) -> Option<(Vec<u8>, usize)> {
    if text.get(at) != Some(&b'[') {
        return None;
    }
    let t = text.get(at + 1..)?;
    if t.first() == Some(&b']') {
        return Some((Vec::new(), at + 2));
    }
    SCRATCH.with_borrow_mut(|scratch| {
        // `scratch` is kept zero-filled to its full length, which serves as
        // its capacity: writing into a slice needs no length bookkeeping.
        if scratch.len() < MIN_SCRATCH {
            scratch.resize(MIN_SCRATCH, 0);
        }
        let mut n = 0;
        let mut p = 0;
        loop {
            let buf = scratch.as_mut_slice();
            (p, n) = pairs(t, p, buf, n);
            // Usually the last one or two elements; else a full buffer or
            // input that is not a compact array.
            for _ in 0..2 {
                let Some(slot) = buf.get_mut(n) else {
                    break;
                };
                let (value, delimiter, used) = element(window(t, p))?;
                *slot = value;
                n += 1;
                p += used;
                if delimiter != b',' {
                    if delimiter != b']' {
                        return None;
                    }
                    // Exact-size copy: restore slices hot chunks out of it.
                    return Some((buf.get(..n)?.to_vec(), at + 1 + p));
                }
            }
            if n == buf.len() {
                let grown = n.checked_mul(2)?;
                scratch.resize(grown, 0);
            }
        }
    })
}

/// Initial scratch length (elements), grown by doubling.
const MIN_SCRATCH: usize = 4096;

thread_local! {
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// How to read two elements out of an 8-byte window, for one layout of
/// digits and non-digits in it.
#[derive(Clone, Copy)]
struct PairLayout {
    /// `0xff` in the two delimiter bytes; zero for a layout that is not two
    /// elements of 1–3 digits each followed by a delimiter.
    delimiters: u64,
    /// What `delimiters` must select: two commas (`1` when invalid, which
    /// nothing matches).
    commas: u64,
    /// Added to the values' 16-bit lanes 1 and 3: `0x8000 − lowest value
    /// without a leading zero` (0, 10 or 100), so bit 15 of each lane is
    /// clear for a leading zero.
    floor: u64,
    /// Left shift aligning the first element's digits to the top of lane 0.
    first: u8,
    /// Right shift bringing the second element to byte 0.
    skip: u8,
    /// Left shift aligning the second element's digits to the top of lane 1.
    second: u8,
    /// Bytes used by both elements and their commas, minus one (3..=7).
    used: u8,
}

/// `0x8000` minus the smallest value of `len` digits without a leading zero.
const fn floor_of(len: u32) -> u64 {
    0x8000 - [0, 0, 10, 100][len as usize]
}

const fn pair_layout(pattern: u8) -> PairLayout {
    let invalid = PairLayout {
        delimiters: 0,
        commas: 1,
        floor: 0,
        first: 0,
        skip: 0,
        second: 0,
        used: 0,
    };
    let len1 = pattern.trailing_zeros();
    if len1 == 0 || len1 > 3 {
        return invalid;
    }
    let len2 = (pattern >> (len1 + 1)).trailing_zeros();
    if len2 == 0 || len2 > 3 {
        return invalid;
    }
    let d1 = len1;
    let d2 = len1 + 1 + len2;
    let delimiters = (0xff << (8 * d1)) | (0xff << (8 * d2));
    PairLayout {
        delimiters,
        commas: delimiters & 0x2c2c_2c2c_2c2c_2c2c,
        floor: (floor_of(len1) << 16) | (floor_of(len2) << 48),
        first: (32 - 8 * len1) as u8,
        skip: (8 * (len1 + 1)) as u8,
        second: (32 - 8 * len2) as u8,
        used: d2 as u8,
    }
}

/// [`PairLayout`] for each pattern of non-digit bytes in a window (bit k set
/// when byte k is not a digit).
static PAIR_LAYOUTS: [PairLayout; 256] = {
    let mut table = [pair_layout(0); 256];
    let mut i = 0;
    while i < 256 {
        table[i] = pair_layout(i as u8);
        i += 1;
    }
    table
};

/// Reads elements two at a time from `t[p..]` into `buf[n..]` while each
/// pair is two valid elements followed by commas (each element with its
/// comma takes at most four bytes, so a pair always fits one 8-byte
/// window). Returns the new `p` and `n`.
fn pairs(t: &[u8], p: usize, buf: &mut [u8], n: usize) -> (usize, usize) {
    let (Some(mut text), Some(mut out)) = (t.get(p..), buf.get_mut(n..)) else {
        return (p, n);
    };
    let text_len = text.len();
    let mut done = 0;
    while let Some(window) = text.first_chunk::<8>() {
        let Some(([a, b], out_rest)) = std::mem::take(&mut out).split_first_chunk_mut::<2>() else {
            break;
        };
        let w = u64::from_le_bytes(*window);
        // Digits become 0..=9; every other byte becomes something else.
        let x = w ^ 0x3030_3030_3030_3030;
        // High bit of each byte set where the byte is not a digit (no carry
        // crosses bytes: (x & 0x7f) + 0x76 <= 0xf5).
        let non_digit =
            (((x & 0x7f7f_7f7f_7f7f_7f7f) + 0x7676_7676_7676_7676) | x) & 0x8080_8080_8080_8080;
        // Gather the eight high bits into one byte (bit k from byte k).
        let pattern = ((non_digit >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as usize;
        let layout = &PAIR_LAYOUTS[pattern & 0xff];
        // Digits right-aligned in two 32-bit lanes: [0, d0, d1, d2] for
        // three digits. Then 10·a + b per 16-bit lane, then 100·hi + lo,
        // leaving the values in 16-bit lanes 1 and 3.
        let e1 = (x as u32) << (layout.first & 31);
        let e2 = ((x >> (layout.skip & 63)) as u32) << (layout.second & 31);
        let y = u64::from(e1) | (u64::from(e2) << 32);
        let tens = (y.wrapping_mul(0x0a01) >> 8) & 0x00ff_00ff_00ff_00ff;
        let values = tens.wrapping_mul(0x0064_0001);
        // A value above 255 sets a lane's high byte; a leading zero leaves
        // bit 15 of lane + floor clear.
        let bad =
            (values & 0xff00_0000_ff00_0000) | (!(values + layout.floor) & 0x8000_0000_8000_0000);
        if w & layout.delimiters != layout.commas || bad != 0 {
            break;
        }
        *a = (values >> 16) as u8;
        *b = (values >> 48) as u8;
        out = out_rest;
        done += 2;
        text = &text[usize::from(layout.used & 7) + 1..];
    }
    (p + (text_len - text.len()), n + done)
}

/// The four bytes at `t[p..]` as a little-endian word, zero-padded past the
/// end of `t` (a zero byte is neither a digit nor a delimiter).
#[inline(always)]
fn window(t: &[u8], p: usize) -> u32 {
    match t.get(p..).and_then(<[u8]>::first_chunk::<4>) {
        Some(w) => u32::from_le_bytes(*w),
        None => padded_window(t, p),
    }
}

#[cold]
fn padded_window(t: &[u8], p: usize) -> u32 {
    let mut w = [0u8; 4];
    for (dst, src) in w.iter_mut().zip(t.get(p..).unwrap_or_default()) {
        *dst = *src;
    }
    u32::from_le_bytes(w)
}

/// Reads one element from the window at its start: 1–3 digits, no leading
/// zero, value at most 255. Returns the value, the byte after the digits
/// (unchecked) and the number of bytes used including that byte.
#[inline(always)]
fn element(w: u32) -> Option<(u8, u8, usize)> {
    // Digits become 0..=9; every other byte becomes something else.
    let x = w ^ 0x3030_3030;
    // High bit of each byte set where the byte is not a digit (no carries
    // cross bytes: (x & 0x7f) + 0x76 <= 0xf5).
    let non_digit = (((x & 0x7f7f_7f7f) + 0x7676_7676) | x) & 0x8080_8080;
    // 8 × the number of leading digits: 0, 8, 16 or 24. Four digits count
    // as three, whose "delimiter" is then a digit and is rejected.
    let shift = (non_digit | 0x8000_0000).trailing_zeros() - 7;
    if shift == 0 || (x & 0xff == 0 && shift > 8) {
        return None;
    }
    let delimiter = (w >> shift) as u8;
    // Digits right-aligned in the word, [0, d0, d1, d2] for three; then
    // pairs (10·a + b per 16-bit lane), then 100·hi + lo.
    let y = x << (32 - shift);
    let pairs = (y.wrapping_mul(0x0a01) >> 8) & 0x00ff_00ff;
    let value = pairs.wrapping_mul(0x0064_0001) >> 16;
    Some((
        u8::try_from(value).ok()?,
        delimiter,
        (shift / 8) as usize + 1,
    ))
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
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

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

    /// Every layout of one or two elements (all lengths, leading zeros,
    /// limits), at every alignment against the 8-byte windows and the end
    /// of the input, with and without text after the array.
    #[test]
    fn agrees_with_serde_json_on_edge_values() {
        let values = [
            "0", "00", "01", "9", "10", "09", "99", "100", "099", "199", "255", "256", "299",
            "300", "999", "1000", "0000",
        ];
        let mut cases = Vec::new();
        for prefix in ["", "7,", "7,7,", "7,7,7,", "11,222,3,"] {
            for a in values {
                cases.push(format!("[{prefix}{a}]"));
                for b in values {
                    cases.push(format!("[{prefix}{a},{b}]"));
                    cases.push(format!("[{prefix}{a},{b},5]"));
                    cases.push(format!("[{prefix}{a},{b},255,1]"));
                }
            }
        }
        for text in &cases {
            let expected = serde_json::from_str::<Vec<u8>>(text).ok();
            for suffix in ["", ",\"x\":[1,2]}", "]", "0"] {
                let full = format!("{{\"p\":{text}{suffix}");
                let at = full.find('[').unwrap();
                let got = compact_byte_array_at(full.as_bytes(), at);
                let end = at + text.len();
                assert_eq!(got, expected.clone().map(|v| (v, end)), "{full}");
            }
        }
    }

    #[test]
    fn parses_long_arrays() {
        // Longer than the initial scratch, so it grows mid-array.
        let bytes: Vec<u8> = (0..3 * MIN_SCRATCH + 5)
            .map(|i| (i * 7 % 256) as u8)
            .collect();
        let text = serde_json::to_vec(&bytes).unwrap();
        let got = compact_byte_array_at(&text, 0).unwrap();
        assert_eq!(got, (bytes, text.len()));
        assert_eq!(got.0.capacity(), got.0.len());
    }

    /// `[`, a body made of the given characters, `]`.
    fn bracketed(alphabet: &'static str) -> impl Strategy<Value = String> {
        proptest::collection::vec(proptest::sample::select(alphabet.as_bytes()), 0..40)
            .prop_map(|body| format!("[{}]", String::from_utf8(body).unwrap_or_default()))
    }

    /// The compact text of `bytes` with one character replaced, inserted or
    /// removed.
    fn mutated() -> impl Strategy<Value = String> {
        (
            proptest::collection::vec(any::<u8>(), 1..24),
            any::<prop::sample::Index>(),
            0..3u8,
            proptest::sample::select(b"0123456789,[] -.".as_slice()),
        )
            .prop_map(|(bytes, at, how, c)| {
                let mut text = serde_json::to_vec(&bytes).unwrap();
                // Keep the opening bracket.
                let i = 1 + at.index(text.len() - 1);
                match how {
                    0 => text[i] = c,
                    1 => text.insert(i, c),
                    _ => {
                        text.remove(i);
                    }
                }
                String::from_utf8(text).unwrap_or_default()
            })
    }

    /// `parse_byte_array_at` either declines or agrees with serde_json on
    /// the text up to the end it reports.
    fn check_against_serde_json(text: &str) -> Result<(), TestCaseError> {
        if let Some((bytes, end)) = parse_byte_array_at(text.as_bytes(), 0) {
            let expected = serde_json::from_str::<Vec<u8>>(&text[..end]);
            prop_assert_eq!(Some(bytes), expected.ok(), "{}", text);
            if !text[1..text.len() - 1].contains(']') {
                prop_assert_eq!(end, text.len(), "{}", text);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn compact_text_parses_back(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let text = serde_json::to_vec(&bytes).unwrap();
            prop_assert_eq!(compact_byte_array_at(&text, 0), Some((bytes.clone(), text.len())));
            prop_assert_eq!(parse_byte_array_at(&text, 0), Some((bytes, text.len())));
        }

        #[test]
        fn random_text_is_declined_or_right(text in bracketed("0123456789,[] -.")) {
            check_against_serde_json(&text)?;
        }

        #[test]
        fn random_digit_runs_are_declined_or_right(text in bracketed("0123456789,,,")) {
            check_against_serde_json(&text)?;
        }

        #[test]
        fn mutated_text_is_declined_or_right(text in mutated()) {
            check_against_serde_json(&text)?;
        }
    }
}
