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
    let media_type = match content_type.split_once(';') {
        Some((head, _params)) => head,
        None => content_type,
    };
    media_type.trim().eq_ignore_ascii_case(JSON_MEDIA_TYPE)
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
