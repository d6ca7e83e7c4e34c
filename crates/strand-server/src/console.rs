//! The web console at `/__strand/console` (`docs/console.md`): one page,
//! its script and its style sheet, compiled into the binary. They hold no
//! data, so they are served to anyone; the page asks the node's own routes
//! for everything it shows, with the token its user enters (kept in the
//! tab's session storage), so it sees what that token may see.

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::errors::ApiError;

/// The console's files: name after `/__strand/console/`, content type,
/// bytes. The page is also served at `/__strand/console` itself.
const ASSETS: [(&str, &str, &str); 3] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../console/index.html"),
    ),
    (
        "console.js",
        "text/javascript; charset=utf-8",
        include_str!("../console/console.js"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("../console/console.css"),
    ),
];

/// Nothing but the node itself: no other origin's scripts, styles,
/// connections or frames.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

/// Whether the console has a file of this name.
pub(crate) fn has_asset(name: &str) -> bool {
    ASSETS.iter().any(|(n, _, _)| *n == name)
}

/// `GET` (or `HEAD`) of a console file.
///
/// # Errors
///
/// 405 for another method, 404 for a file it does not have.
pub(crate) fn serve(method: &Method, name: &str) -> Result<Response, ApiError> {
    if method != Method::GET && method != Method::HEAD {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} is not allowed here"),
        )
        .with_header(header::ALLOW, "GET, HEAD"));
    }
    let Some((_, content_type, body)) = ASSETS.iter().find(|(n, _, _)| *n == name) else {
        return Err(ApiError::not_found("the console has no such file"));
    };
    let body = if method == Method::HEAD { "" } else { *body };
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, *content_type),
        (header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::X_FRAME_OPTIONS, "DENY"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    Ok(response)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_files() {
        let page = ASSETS[0].2;
        assert!(page.contains(r#"src="/__strand/console/console.js""#));
        assert!(page.contains(r#"href="/__strand/console/console.css""#));
        for (name, _, body) in ASSETS {
            assert!(has_asset(name));
            // No other origin: nothing is fetched from outside.
            assert!(
                !body.contains("http://") && !body.contains("https://"),
                "{name}"
            );
        }
        assert!(!has_asset("../Cargo.toml"));
        let r = serve(&Method::GET, "console.js").unwrap();
        assert_eq!(
            r.headers()[header::CONTENT_TYPE],
            "text/javascript; charset=utf-8"
        );
        assert_eq!(serve(&Method::POST, "index.html").unwrap_err().status, 405);
        assert_eq!(serve(&Method::GET, "nope.js").unwrap_err().status, 404);
    }
}
