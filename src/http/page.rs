//! The web chat page: one static HTML file with inline script, no build step.

use axum::response::Html;

pub(super) async fn chat_page() -> Html<&'static str> {
    Html(include_str!("chat.html"))
}
