//! The daemon's `GET /api/v1/events`: a Server-Sent Events stream, one `event:receive` per
//! envelope whose `data:` line is `{"envelope":{…},"account":"+…"}` as signal-cli writes it,
//! and a `:` keep-alive line every 15 seconds. Envelopes that arrived while no stream was
//! open are written first (signal-cli receiving `on-connection` leaves them on Signal's
//! server until a client listens).
//!
//! Must not: buffer an event past a flush (the adapter must see each as it is written), or
//! keep a stream open after the fake dropped it.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State as AxState;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use tokio::sync::mpsc;

use super::Shared;

const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub(crate) async fn handle(AxState(shared): AxState<Arc<Shared>>) -> Response {
    let (tx, rx) = mpsc::unbounded_channel::<String>();
    {
        let mut st = shared.lock();
        if !st.registered {
            return StatusCode::BAD_REQUEST.into_response();
        }
        while let Some(data) = st.pending.pop_front() {
            let _ = tx.send(data);
        }
        st.streams.push(tx);
        st.connections += 1;
    }
    let events = futures::stream::unfold(rx, |mut rx| async move {
        let chunk = match tokio::time::timeout(KEEP_ALIVE, rx.recv()).await {
            Ok(Some(data)) => format!("event:receive\ndata:{data}\n\n"),
            Ok(None) => return None,
            Err(_) => ":\n".to_string(),
        };
        Some((Ok::<_, Infallible>(Bytes::from(chunk)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(events.boxed()))
        .expect("a response")
}
