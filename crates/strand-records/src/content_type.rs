//! JSON record content types and canonical newline boundaries (spec 02 §1).

use crate::RecordIndexError;

/// The only media type that counts as "JSON records".
const JSON_MEDIA_TYPE: &str = "application/json";

/// Whether `content_type` is a JSON record content type (spec 02 §1.1).
///
/// Takes the text before the first `;`, trims Unicode whitespace (as
/// [`str::trim`]) and compares it with `application/json`, ignoring ASCII case
/// only. Nothing else is normalised: `application/x-ndjson`,
/// `application/ json` and `;application/json` are not JSON,
/// `application/json;` is.
#[must_use]
pub fn is_json_record_content_type(content_type: &str) -> bool {
    // Equivalent to trimming the text before the first `;` and comparing
    // it, but without scanning for the `;` first: the media type contains
    // neither `;` nor whitespace, so the string must be leading whitespace,
    // the media type, trailing whitespace, then its end or a `;`. Most
    // content types (`application/octet-stream`, …) fail on the first
    // 16 bytes.
    let rest = content_type.trim_start();
    let Some(head) = rest.get(..JSON_MEDIA_TYPE.len()) else {
        return false;
    };
    if !head.eq_ignore_ascii_case(JSON_MEDIA_TYPE) {
        return false;
    }
    let after = rest
        .get(JSON_MEDIA_TYPE.len()..)
        .unwrap_or_default()
        .trim_start();
    after.is_empty() || after.starts_with(';')
}

/// The relative record ends of a payload (spec 02 §1.2).
///
/// * not a JSON content type: `Ok([])`, the payload is never looked at;
/// * empty payload: `Ok([])`;
/// * last byte is not `\n`: `Err(InvalidBoundaries)`;
/// * otherwise `i + 1` for every index `i` with `payload[i] == b'\n'`, in
///   increasing order. The JSON itself is never parsed: every
///   newline-terminated run of bytes, including an empty line, is a record.
///
/// # Errors
///
/// [`RecordIndexError::InvalidBoundaries`] for a non-empty JSON payload that
/// does not end with `\n`; [`RecordIndexError::ArithmeticOverflow`] if a
/// position does not fit a `u64` (impossible on 64-bit targets).
pub fn canonical_json_record_ends(
    content_type: &str,
    payload: &[u8],
) -> Result<Vec<u64>, RecordIndexError> {
    if !is_json_record_content_type(content_type) {
        return Ok(Vec::new());
    }
    match payload.last() {
        None => return Ok(Vec::new()),
        Some(&b'\n') => {}
        Some(_) => return Err(RecordIndexError::InvalidBoundaries),
    }
    let mut ends = Vec::new();
    for (index, _) in payload
        .iter()
        .enumerate()
        .filter(|(_, byte)| **byte == b'\n')
    {
        let end = index
            .checked_add(1)
            .and_then(|end| u64::try_from(end).ok())
            .ok_or(RecordIndexError::ArithmeticOverflow)?;
        ends.push(end);
    }
    Ok(ends)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{JSON_MEDIA_TYPE, is_json_record_content_type};

    /// The definition of spec 02 §1.1, written as it reads.
    fn by_definition(content_type: &str) -> bool {
        let media_type = match content_type.split_once(';') {
            Some((head, _params)) => head,
            None => content_type,
        };
        media_type.trim().eq_ignore_ascii_case(JSON_MEDIA_TYPE)
    }

    #[test]
    fn known_cases() {
        for (ct, json) in [
            ("application/json", true),
            ("Application/JSON", true),
            ("application/json;", true),
            ("application/json; charset=utf-8", true),
            (" \tapplication/json \u{a0};x", true),
            ("\u{3000}application/json", true),
            ("application/jsonx", false),
            ("application/json x", false),
            ("application/ json", false),
            (";application/json", false),
            ("application/x-ndjson", false),
            ("application/octet-stream", false),
            ("application/jso", false),
            ("", false),
            ("application/jsoé", false),
        ] {
            assert_eq!(is_json_record_content_type(ct), json, "{ct:?}");
            assert_eq!(by_definition(ct), json, "{ct:?}");
        }
    }

    proptest! {
        #[test]
        fn matches_the_definition(
            pre in "[ \t\u{a0}\u{3000}a;]{0,3}",
            mid in prop_oneof![
                Just("application/json".to_owned()),
                Just("APPLICATION/Json".to_owned()),
                "[a-zA-Z/;é ]{0,20}",
            ],
            post in "[ \t\u{a0}\u{2028};xé=]{0,4}",
        ) {
            let ct = format!("{pre}{mid}{post}");
            prop_assert_eq!(is_json_record_content_type(&ct), by_definition(&ct));
        }
    }
}
