//! The web chat page: one static HTML file with inline script, no build step.

use axum::response::Html;

pub(super) async fn chat_page() -> Html<&'static str> {
    Html(include_str!("chat.html"))
}

/// A tiny embedded icon, so that browsers asking for it get one rather than a 404.
pub(super) async fn favicon() -> impl axum::response::IntoResponse {
    (
        [
            (axum::http::header::CONTENT_TYPE, "image/x-icon"),
            (axum::http::header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        include_bytes!("favicon.ico").as_slice(),
    )
}
