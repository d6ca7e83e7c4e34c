//! Offsets on the wire (spec 08 §5, §23): a u64 byte offset rendered as two
//! fixed-width 16-digit decimals joined by `_`, so string order is numeric
//! order; `-1` and `now` are the two sentinels.

use strand_engine::ReadFrom;

const SPLIT: u64 = 10_000_000_000_000_000;

/// Renders a byte offset: `{v / 10^16:016}_{v % 10^16:016}`.
///
/// Both halves are below 10^16 (`u64::MAX / 10^16` is 1844), so each is
/// exactly 16 digits; they are written digit by digit into a stack buffer
/// (every response carries an offset, and `write!` with padding cost a
/// measurable share of an SSE delivery).
pub fn render(offset: u64) -> String {
    let mut buf = [b'0'; 33];
    buf[16] = b'_';
    let (mut high, mut low) = (offset / SPLIT, offset % SPLIT);
    for i in (0..16).rev() {
        buf[i] = b'0' + (high % 10) as u8;
        buf[17 + i] = b'0' + (low % 10) as u8;
        high /= 10;
        low /= 10;
    }
    // ASCII digits and `_`: always UTF-8, so the fallback never happens.
    String::from_utf8(buf.to_vec()).unwrap_or_default()
}

/// Why an offset string was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetError {
    /// Not `-1`, `now` or `digits_digits`.
    Malformed,
    /// Well formed, but larger than any stream can be.
    TooLarge,
}

/// Parses an offset as a client sends it: `-1`, `now`, or two runs of 1 to
/// 16 decimal digits joined by `_`.
pub fn parse(text: &str) -> Result<ReadFrom, OffsetError> {
    match text {
        "-1" => return Ok(ReadFrom::Start),
        "now" => return Ok(ReadFrom::Tail),
        _ => {}
    }
    parse_position(text).map(ReadFrom::Offset)
}

/// Parses a `digits_digits` position (no sentinels).
pub fn parse_position(text: &str) -> Result<u64, OffsetError> {
    let (hi, lo) = text.split_once('_').ok_or(OffsetError::Malformed)?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 16 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(hi) || !digits(lo) {
        return Err(OffsetError::Malformed);
    }
    let hi: u64 = hi.parse().map_err(|_| OffsetError::Malformed)?;
    let lo: u64 = lo.parse().map_err(|_| OffsetError::Malformed)?;
    hi.checked_mul(SPLIT)
        .and_then(|h| h.checked_add(lo))
        .ok_or(OffsetError::TooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn renders_the_suites_zero_offset() {
        assert_eq!(render(0), "0000000000000000_0000000000000000");
        assert_eq!(render(21), "0000000000000000_0000000000000021");
        assert_eq!(render(u64::MAX), "0000000000001844_6744073709551615");
    }

    #[test]
    fn parses_sentinels_and_positions() {
        assert_eq!(parse("-1"), Ok(ReadFrom::Start));
        assert_eq!(parse("now"), Ok(ReadFrom::Tail));
        assert_eq!(
            parse("0000000000000000_0000000000000021"),
            Ok(ReadFrom::Offset(21))
        );
        assert_eq!(parse("1_5"), Ok(ReadFrom::Offset(SPLIT + 5)));
        assert_eq!(
            parse("9999999999999999_9999999999999999"),
            Err(OffsetError::TooLarge)
        );
        for bad in [
            "", "0", "0,1", "0 1", "a_b", "_1", "1_", "1_2_3", "../x", "-2", "NOW",
        ] {
            assert_eq!(parse(bad), Err(OffsetError::Malformed), "{bad:?}");
        }
    }

    proptest! {
        #[test]
        fn render_round_trips_and_sorts(a: u64, b: u64) {
            prop_assert_eq!(render(a), format!("{:016}_{:016}", a / SPLIT, a % SPLIT));
            prop_assert_eq!(parse(&render(a)), Ok(ReadFrom::Offset(a)));
            prop_assert_eq!(a.cmp(&b), render(a).cmp(&render(b)));
        }
    }
}
