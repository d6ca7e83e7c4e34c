//! Rendering instants for headers, and the long-poll cursor (spec 08 §7).

/// Renders milliseconds since the Unix epoch as RFC 3339 UTC
/// (`2025-01-01T00:00:00.000Z`).
pub fn render_rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = ms % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// A proleptic Gregorian date from days since 1970-01-01 (H. Hinnant's
/// algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// 2024-10-09T00:00:00Z, where cursor intervals are counted from.
const CURSOR_EPOCH_MS: u64 = 1_728_432_000_000;
/// One cursor interval: 20 s.
const CURSOR_INTERVAL_MS: u64 = 20_000;

/// The cursor to answer a live read with: the current interval number, or,
/// when the client already holds that interval (or a later one), its
/// cursor plus a jitter of 1 to 180 intervals, so echoing a cursor always
/// gives a strictly larger one.
pub fn next_cursor(now_ms: u64, client: Option<&str>) -> u64 {
    let current = now_ms.saturating_sub(CURSOR_EPOCH_MS) / CURSOR_INTERVAL_MS;
    match client.and_then(|c| c.parse::<u64>().ok()) {
        Some(c) if c >= current => {
            c.saturating_add(1 + (now_ms.wrapping_mul(2_654_435_761) >> 7) % 180)
        }
        _ => current,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::headers::parse_rfc3339_ms;

    #[test]
    fn render_round_trips() {
        for ms in [0, 1, 951_868_800_123, 1_767_225_600_000, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339_ms(&render_rfc3339_ms(ms)), Some(ms));
        }
        assert_eq!(render_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
    }

    #[test]
    fn cursors_grow_when_echoed() {
        let now = CURSOR_EPOCH_MS + 10 * CURSOR_INTERVAL_MS + 5;
        assert_eq!(next_cursor(now, None), 10);
        assert_eq!(next_cursor(now, Some("3")), 10);
        let c = next_cursor(now, Some("10"));
        assert!(c > 10 && c <= 190);
        assert!(next_cursor(now, Some(&c.to_string())) > c);
    }
}
