//! Socket Mode: `apps.connections.open` hands out a one-use ticketed URL; a websocket that
//! presents the ticket at `/link/` gets `hello`, then envelopes (`envelopes.rs`), and answers
//! each with `{"envelope_id": …}` (optionally a `payload`). The fake can ask a client to go
//! (`disconnect` with a reason, then close) or cut it with no close frame.
//!
//! Must not: accept a connection without a ticket it issued, or reuse a ticket.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tokio_tungstenite::tungstenite::http::StatusCode;
use tokio_tungstenite::tungstenite::Message;

use super::args::Args;
use super::records::Connection;
use super::web::ok;
use super::{envelopes, FakeSlack, Shared};

pub(crate) enum ConnCmd {
    Frame(String),
    /// Send `{"type":"disconnect","reason":…}` and close.
    Disconnect(String),
    /// Close the TCP connection with no close frame.
    Drop,
}

pub(crate) struct Conn {
    pub tx: mpsc::UnboundedSender<ConnCmd>,
}

pub(crate) fn connections_open(shared: &Arc<Shared>, _: &Args) -> Value {
    let ticket = uuid::Uuid::new_v4().to_string();
    shared.lock().tickets.insert(ticket.clone());
    ok(json!({
        "url": format!("{}/link/?ticket={ticket}&app_id={}", shared.ws_base, shared.cfg.app_id),
    }))
}

pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(connection(stream, shared.clone()));
    }
}

fn ticket_of(req: &Request) -> Option<String> {
    if !req.uri().path().starts_with("/link") {
        return None;
    }
    let query = req.uri().query().unwrap_or_default();
    url::form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "ticket")
        .map(|(_, v)| v.into_owned())
}

// The handshake check's `Result<Response, ErrorResponse>` is tungstenite's `Callback` signature.
#[allow(clippy::result_large_err)]
async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let mut ticket = None;
    let check = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        match ticket_of(req) {
            Some(t) if shared.lock().tickets.remove(&t) => {
                ticket = Some(t);
                Ok(resp)
            }
            _ => {
                let mut refused = ErrorResponse::new(Some("invalid or used ticket".into()));
                *refused.status_mut() = StatusCode::UNAUTHORIZED;
                Err(refused)
            }
        }
    };
    let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, check).await else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = {
        let mut st = shared.lock();
        let id = st.rec.connections.len() as u64 + 1;
        let hello = json!({
            "type": "hello",
            "num_connections": st.conns.len() + 1,
            "debug_info": {
                "host": format!("applink-fake-{id}"),
                "build_number": 1,
                "approximate_connection_time": 18060,
            },
            "connection_info": {"app_id": shared.cfg.app_id},
        });
        // Through the queue, so `hello` is on the wire before any envelope.
        let _ = tx.send(ConnCmd::Frame(hello.to_string()));
        st.conns.insert(id, Conn { tx });
        st.rec.connections.push(Connection {
            id,
            ticket: ticket.unwrap_or_default(),
            opened_at: std::time::Instant::now(),
            closed_at: None,
            close: None,
        });
        envelopes::flush(&mut st);
        id
    };
    let close = loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(ConnCmd::Frame(f)) => {
                    if ws.send(Message::Text(f)).await.is_err() {
                        break "send failed".to_string();
                    }
                }
                Some(ConnCmd::Disconnect(reason)) => {
                    let frame = json!({
                        "type": "disconnect",
                        "reason": reason,
                        "debug_info": {"host": format!("applink-fake-{id}")},
                    });
                    let _ = ws.send(Message::Text(frame.to_string())).await;
                    let _ = ws.close(None).await;
                    break format!("disconnect: {reason}");
                }
                Some(ConnCmd::Drop) | None => break "dropped".to_string(),
            },
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => client_frame(&shared, id, &text),
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    break "client closed".to_string();
                }
                Some(Ok(_)) => {}
            },
        }
    };
    let mut st = shared.lock();
    st.conns.remove(&id);
    if let Some(c) = st.rec.connections.iter_mut().find(|c| c.id == id) {
        c.closed_at = Some(std::time::Instant::now());
        c.close = Some(close);
    }
}

/// A frame from the app: an acknowledgement (anything else is ignored, as Slack ignores it).
fn client_frame(shared: &Shared, conn: u64, text: &str) {
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        eprintln!("fake slack: a socket frame that is not JSON: {text:.200}");
        return;
    };
    if let Some(id) = v["envelope_id"].as_str() {
        let payload = v.get("payload").cloned();
        envelopes::ack(&mut shared.lock(), conn, id, payload);
    }
}

impl FakeSlack {
    /// Tells every connected client to go (`{"type":"disconnect","reason":reason}`, e.g.
    /// `refresh_requested`) and closes each socket; their unacked envelopes come back later.
    pub fn disconnect(&self, reason: &str) {
        let conns = std::mem::take(&mut self.shared.lock().conns);
        for c in conns.values() {
            let _ = c.tx.send(ConnCmd::Disconnect(reason.to_string()));
        }
    }

    /// Cuts every socket with no close frame: a network loss.
    pub fn drop_connections(&self) {
        let conns = std::mem::take(&mut self.shared.lock().conns);
        for c in conns.values() {
            let _ = c.tx.send(ConnCmd::Drop);
        }
    }
}
