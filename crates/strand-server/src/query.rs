//! The query string of a read: `offset`, `live` and `cursor` (spec 08 §4);
//! unknown parameters are ignored, a repeated or empty `offset` is refused.

use crate::errors::ApiError;

/// A read's query parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadQuery {
    /// `offset`, decoded.
    pub offset: Option<String>,
    /// `live`, decoded.
    pub live: Option<String>,
    /// `cursor`, decoded.
    pub cursor: Option<String>,
}

impl ReadQuery {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Result<Self, ApiError> {
        let mut out = Self::default();
        let Some(raw) = raw else {
            return Ok(out);
        };
        for pair in raw.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let key = decode(key)?;
            let slot = match key.as_str() {
                "offset" => &mut out.offset,
                "live" => &mut out.live,
                "cursor" => &mut out.cursor,
                _ => continue,
            };
            if slot.is_some() {
                return Err(ApiError::bad_request(format!(
                    "query parameter {key} given twice"
                )));
            }
            *slot = Some(decode(value)?);
        }
        if out.offset.as_deref() == Some("") {
            return Err(ApiError::bad_request("offset must not be empty"));
        }
        Ok(out)
    }
}

/// Percent-decodes a query component (`+` is a space); the result must be
/// UTF-8.
pub(crate) fn decode(text: &str) -> Result<String, ApiError> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        ApiError::bad_request("malformed percent-encoding in the query")
                    })?;
                out.push(hex);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| ApiError::bad_request("query is not valid UTF-8"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        let q = ReadQuery::parse(Some("offset=-1&live=sse&x=1&cursor=12")).unwrap();
        assert_eq!(q.offset.as_deref(), Some("-1"));
        assert_eq!(q.live.as_deref(), Some("sse"));
        assert_eq!(q.cursor.as_deref(), Some("12"));
        assert_eq!(
            ReadQuery::parse(Some("offset=a%20b"))
                .unwrap()
                .offset
                .as_deref(),
            Some("a b")
        );
        assert!(ReadQuery::parse(Some("offset=")).is_err());
        assert!(ReadQuery::parse(Some("offset=1&offset=2")).is_err());
        assert!(ReadQuery::parse(Some("offset=%zz")).is_err());
        assert!(ReadQuery::parse(Some("offset=%ff")).is_err());
        assert_eq!(ReadQuery::parse(None).unwrap(), ReadQuery::default());
    }
}
