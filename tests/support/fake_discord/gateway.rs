//! The fake gateway: one websocket server speaking Discord's opcodes in JSON text frames.
//!
//! It keeps one session at a time (a bot with one shard) and must keep sequence numbers and
//! RESUME replay exact, because those are what a "no message lost" test leans on. It never
//! decides anything for the client: reconnects happen only because a test asked for one.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::{payloads, Conn, ConnCmd, Inner, Session, Shared};

pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        tokio::spawn(connection(stream, shared.clone()));
    }
}

/// What the socket task must do after a client frame was handled under the lock.
enum Reply {
    None,
    Send(Value),
    Close(u16, &'static str),
}

async fn connection(stream: TcpStream, shared: Arc<Shared>) {
    let Ok(mut ws) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let conn_id = shared.new_id();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let interval = shared.heartbeat_interval_ms.load(Ordering::Relaxed);
    let hello = json!({"op": 10, "d": {"heartbeat_interval": interval}});
    if ws.send(Message::Text(hello.to_string())).await.is_err() {
        return;
    }
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(ConnCmd::Frame(f)) => {
                    if ws.send(Message::Text(f)).await.is_err() {
                        break;
                    }
                }
                // Dropping the stream closes TCP with no close frame: an abrupt network loss.
                Some(ConnCmd::Drop) | None => return,
            },
            frame = ws.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    match handle_frame(&shared, conn_id, &tx, &text) {
                        Reply::None => {}
                        Reply::Send(v) => {
                            if ws.send(Message::Text(v.to_string())).await.is_err() {
                                break;
                            }
                        }
                        Reply::Close(code, reason) => {
                            let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
                            let _ = ws.close(Some(frame)).await;
                            break;
                        }
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    let mut inner = shared.lock();
    if inner.conn.as_ref().map(|c| c.id) == Some(conn_id) {
        inner.conn = None;
    }
}

fn handle_frame(
    shared: &Shared,
    conn_id: u64,
    tx: &mpsc::UnboundedSender<ConnCmd>,
    text: &str,
) -> Reply {
    let Ok(frame) = serde_json::from_str::<Value>(text) else {
        return Reply::Close(4002, "Error while decoding payload.");
    };
    let d = &frame["d"];
    match frame["op"].as_u64() {
        Some(1) => {
            if shared.lock().acks_stopped {
                Reply::None
            } else {
                Reply::Send(json!({"op": 11}))
            }
        }
        Some(2) => {
            if !shared.token_ok(d["token"].as_str().unwrap_or_default()) {
                return Reply::Close(4004, "Authentication failed.");
            }
            let mut inner = shared.lock();
            inner.identify_count += 1;
            take_over(&mut inner, conn_id, tx);
            let session_id = format!("fake-session-{}", shared.new_id());
            inner.session = Some(Session {
                id: session_id.clone(),
                seq: 0,
                log: Vec::new(),
            });
            let ready = payloads::ready(&session_id, &shared.gateway_url);
            shared.dispatch_locked(&mut inner, "READY", ready);
            for (event, d) in std::mem::take(&mut inner.pending) {
                shared.dispatch_locked(&mut inner, &event, d);
            }
            Reply::None
        }
        Some(6) => {
            if !shared.token_ok(d["token"].as_str().unwrap_or_default()) {
                return Reply::Close(4004, "Authentication failed.");
            }
            let mut inner = shared.lock();
            inner.resume_count += 1;
            let wanted = d["session_id"].as_str().unwrap_or_default();
            let from = d["seq"].as_u64().unwrap_or(0);
            let frames = match &inner.session {
                Some(s) if s.id == wanted => s
                    .log
                    .iter()
                    .filter(|(seq, _)| *seq > from)
                    .map(|(_, f)| f.clone())
                    .collect::<Vec<_>>(),
                // Unknown or forgotten session: Discord answers op 9, not resumable.
                _ => return Reply::Send(json!({"op": 9, "d": false})),
            };
            take_over(&mut inner, conn_id, tx);
            for f in frames {
                let _ = tx.send(ConnCmd::Frame(f));
            }
            shared.dispatch_locked(&mut inner, "RESUMED", json!({}));
            Reply::None
        }
        other => {
            eprintln!("fake discord gateway: ignoring op {other:?}: {text}");
            Reply::None
        }
    }
}

/// Makes this socket the session's socket; a previous one is cut, as Discord does.
fn take_over(inner: &mut Inner, conn_id: u64, tx: &mpsc::UnboundedSender<ConnCmd>) {
    if let Some(old) = inner.conn.take() {
        if old.id != conn_id {
            let _ = old.tx.send(ConnCmd::Drop);
        }
    }
    inner.conn = Some(Conn {
        id: conn_id,
        tx: tx.clone(),
    });
}
