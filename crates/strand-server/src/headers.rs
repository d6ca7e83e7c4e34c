//! Protocol header names and the parsing of header values (spec 08 §4,
//! §10, §11, §13).

use axum::http::{HeaderMap, HeaderName};
use strand::ProducerRequest;

/// `Stream-Next-Offset`.
pub const NEXT_OFFSET: HeaderName = HeaderName::from_static("stream-next-offset");
/// `Stream-Up-To-Date`.
pub const UP_TO_DATE: HeaderName = HeaderName::from_static("stream-up-to-date");
/// `Stream-Cursor`.
pub const CURSOR: HeaderName = HeaderName::from_static("stream-cursor");
/// `Stream-Closed`.
pub const CLOSED: HeaderName = HeaderName::from_static("stream-closed");
/// `Stream-TTL`.
pub const TTL: HeaderName = HeaderName::from_static("stream-ttl");
/// `Stream-Expires-At`.
pub const EXPIRES_AT: HeaderName = HeaderName::from_static("stream-expires-at");
/// `Stream-Seq`.
pub const SEQ: HeaderName = HeaderName::from_static("stream-seq");
/// `Producer-Id`.
pub const PRODUCER_ID: HeaderName = HeaderName::from_static("producer-id");
/// `Producer-Epoch`.
pub const PRODUCER_EPOCH: HeaderName = HeaderName::from_static("producer-epoch");
/// `Producer-Seq`.
pub const PRODUCER_SEQ: HeaderName = HeaderName::from_static("producer-seq");
/// `Producer-Expected-Seq`.
pub const PRODUCER_EXPECTED_SEQ: HeaderName = HeaderName::from_static("producer-expected-seq");
/// `Producer-Received-Seq`.
pub const PRODUCER_RECEIVED_SEQ: HeaderName = HeaderName::from_static("producer-received-seq");
/// `Stream-SSE-Data-Encoding`.
pub const SSE_DATA_ENCODING: HeaderName = HeaderName::from_static("stream-sse-data-encoding");
/// `X-Accel-Buffering: no` on SSE responses: buffering proxies pass
/// events on at once.
pub const X_ACCEL_BUFFERING: HeaderName = HeaderName::from_static("x-accel-buffering");
/// `Stream-Attrs` (bucketed layout): JSON stream attributes on create.
pub const ATTRS: HeaderName = HeaderName::from_static("stream-attrs");
/// `Stream-Record-Match` (bucketed layout): append only at this record.
pub const RECORD_MATCH: HeaderName = HeaderName::from_static("stream-record-match");
/// `Stream-Snapshot-Match`: the expected digest of the current snapshot.
pub const SNAPSHOT_MATCH: HeaderName = HeaderName::from_static("stream-snapshot-match");
/// `Stream-Snapshot-Offset`: a visible snapshot's offset.
pub const SNAPSHOT_OFFSET: HeaderName = HeaderName::from_static("stream-snapshot-offset");
/// `Stream-Snapshot-Digest`: a visible snapshot's digest.
pub const SNAPSHOT_DIGEST: HeaderName = HeaderName::from_static("stream-snapshot-digest");
/// `Stream-Forked-From`.
pub const FORKED_FROM: HeaderName = HeaderName::from_static("stream-forked-from");
/// The fork offset of a fork create.
pub const FORK_OFFSET: HeaderName = HeaderName::from_static("stream-fork-offset");
/// The sub-offset of a fork create.
pub const FORK_SUB_OFFSET: HeaderName = HeaderName::from_static("stream-fork-sub-offset");

/// `Stream-Deduplicated` (bucketed batch appends): the batch was a retry.
pub const DEDUPLICATED: HeaderName = HeaderName::from_static("stream-deduplicated");
/// `Prefer` (RFC 7240): `return=minimal` on batch appends.
pub const PREFER: HeaderName = HeaderName::from_static("prefer");

/// The largest integer a producer header may carry (2^53 − 1).
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// A header's value as text; `Err` when present but not visible ASCII /
/// UTF-8.
pub fn text<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<Option<&'a str>, String> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => as_text(v, name).map(Some),
    }
}

/// A header that may appear at most once: one lookup finds its first value
/// and whether there is a second.
pub fn single<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Result<Option<&'a str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(format!("header {name} given more than once"));
    }
    as_text(first, name).map(Some)
}

fn as_text<'a>(value: &'a axum::http::HeaderValue, name: &HeaderName) -> Result<&'a str, String> {
    value
        .to_str()
        .map_err(|_| format!("header {name} is not valid text"))
}

/// A plain decimal integer: `0`, or a non-zero digit followed by digits; no
/// sign, fraction, exponent or leading zero.
pub fn parse_decimal(value: &str) -> Option<u64> {
    let bytes = value.as_bytes();
    let shaped = match bytes {
        [] => false,
        [b'0'] => true,
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    };
    if shaped { value.parse().ok() } else { None }
}

/// Producer headers: all three or none (spec 08 §11).
pub fn producer(headers: &HeaderMap) -> Result<Option<ProducerRequest>, String> {
    let id = single(headers, &PRODUCER_ID)?;
    let epoch = single(headers, &PRODUCER_EPOCH)?;
    let seq = single(headers, &PRODUCER_SEQ)?;
    match (id, epoch, seq) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(seq)) => {
            if id.trim().is_empty() {
                return Err("Producer-Id must not be empty".into());
            }
            let number = |name: &str, v: &str| {
                v.bytes()
                    .all(|b| b.is_ascii_digit())
                    .then(|| v.parse::<u64>().ok())
                    .flatten()
                    .filter(|n| !v.is_empty() && *n <= MAX_SAFE_INTEGER)
                    .ok_or_else(|| format!("{name} must be a non-negative integer up to 2^53-1"))
            };
            Ok(Some(ProducerRequest {
                producer_id: id.to_owned(),
                producer_epoch: number("Producer-Epoch", epoch)?,
                producer_seq: number("Producer-Seq", seq)?,
            }))
        }
        _ => Err("Producer-Id, Producer-Epoch and Producer-Seq must be given together".into()),
    }
}

/// Parses an RFC 3339 timestamp (`2025-01-01T00:00:00Z`,
/// `…T00:00:00.123+02:00`) into milliseconds since the Unix epoch. Times
/// before the epoch are clamped to 0.
pub fn parse_rfc3339_ms(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let sep = |at: usize, chars: &[u8]| b.get(at).is_some_and(|c| chars.contains(c));
    let (year, month, day) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    if !sep(4, b"-") || !sep(7, b"-") || !sep(10, b"Tt ") || !sep(13, b":") || !sep(16, b":") {
        return None;
    }
    let (hour, minute, second) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut millis = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 3 {
                millis = millis * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..3 {
            millis *= 10;
        }
    }
    let offset_minutes = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digits = [*h1, *h2, *m1, *m2];
            if !digits.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let d = |x: u8| i64::from(x - b'0');
            let (h, m) = (d(*h1) * 10 + d(*h2), d(*m1) * 10 + d(*m2));
            if h > 23 || m > 59 {
                return None;
            }
            if *sign == b'+' {
                h * 60 + m
            } else {
                -(h * 60 + m)
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    let ms = seconds.checked_mul(1_000)?.checked_add(millis)?;
    Some(u64::try_from(ms).unwrap_or(0))
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn decimals_are_plain() {
        assert_eq!(parse_decimal("0"), Some(0));
        assert_eq!(parse_decimal("3600"), Some(3600));
        for bad in ["", "00", "01", "-1", "+1", "1.5", "1e3", " 1", "abc"] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn rfc3339_examples() {
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_ms("1970-01-01T00:00:01.5Z"), Some(1_500));
        assert_eq!(
            parse_rfc3339_ms("2000-03-01T00:00:00+00:00"),
            Some(951_868_800_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2000-03-01T02:00:00+02:00"),
            parse_rfc3339_ms("2000-03-01T00:00:00Z")
        );
        for bad in [
            "not-a-timestamp",
            "2000-02-30T00:00:00Z",
            "2000-03-01T00:00:00",
            "2000-03-01T25:00:00Z",
            "2000-03-01T00:00:00.Z",
        ] {
            assert_eq!(parse_rfc3339_ms(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn producer_headers_all_or_none() {
        let mut h = HeaderMap::new();
        assert_eq!(producer(&h), Ok(None));
        h.insert(PRODUCER_ID, HeaderValue::from_static("p"));
        assert!(producer(&h).is_err());
        h.insert(PRODUCER_EPOCH, HeaderValue::from_static("0"));
        h.insert(PRODUCER_SEQ, HeaderValue::from_static("7"));
        let p = producer(&h).unwrap().unwrap();
        assert_eq!((p.producer_epoch, p.producer_seq), (0, 7));
        for bad in ["1abc", "-1", "1e3", "", "9007199254740992"] {
            h.insert(PRODUCER_SEQ, HeaderValue::from_str(bad).unwrap());
            assert!(producer(&h).is_err(), "{bad:?}");
        }
    }
}
