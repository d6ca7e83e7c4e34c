//! Small response builders the routes share.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// A JSON response (`application/json`) with `value` as its body.
pub(crate) fn json(status: StatusCode, value: &impl Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Sets header `name` to `value`; a value a header cannot carry is left
/// out (the values set here are offsets, numbers and names already
/// checked).
pub(crate) fn set_header(
    headers: &mut HeaderMap,
    name: header::HeaderName,
    value: impl AsRef<str>,
) {
    if let Ok(v) = HeaderValue::from_str(value.as_ref()) {
        headers.insert(name, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_answers_carry_their_type_and_a_bad_header_value_is_left_out() {
        let r = json(StatusCode::CREATED, &serde_json::json!({"a": 1}));
        assert_eq!(r.status(), StatusCode::CREATED);
        assert_eq!(r.headers()[header::CONTENT_TYPE], "application/json");
        let mut headers = HeaderMap::new();
        set_header(&mut headers, header::ETAG, "\"1\"");
        set_header(&mut headers, header::LOCATION, "a\nb");
        assert_eq!(headers[header::ETAG], "\"1\"");
        assert!(!headers.contains_key(header::LOCATION));
    }
}
