//! Headers every response carries so the page shells (`/`, `/admin`) cannot be framed,
//! sniffed or made to load a foreign script, and leak no referrer.
//!
//! Set on every response, not only the pages: a JSON body cannot be framed or sniffed either,
//! and a page added later is covered without a choice. A handler that sets one of them itself
//! keeps its own value.

use axum::http::header::{
    HeaderName, HeaderValue, CONTENT_SECURITY_POLICY, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::Response;

/// The pages' scripts and styles are inline; everything they fetch is this origin.
pub const CSP: &str = "default-src 'self'; script-src 'self' 'unsafe-inline'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; \
    frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

const HEADERS: [(HeaderName, &str); 4] = [
    (X_FRAME_OPTIONS, "DENY"),
    (CONTENT_SECURITY_POLICY, CSP),
    (X_CONTENT_TYPE_OPTIONS, "nosniff"),
    (REFERRER_POLICY, "no-referrer"),
];

/// The response layer (`axum::middleware::map_response`).
pub(super) async fn secure(res: Response) -> Response {
    with_secure(res)
}

/// The same for a response made outside the router (the listener's own answers).
pub(super) fn with_secure(mut res: Response) -> Response {
    let h = res.headers_mut();
    for (name, value) in HEADERS {
        h.entry(name)
            .or_insert_with(|| HeaderValue::from_static(value));
    }
    res
}
