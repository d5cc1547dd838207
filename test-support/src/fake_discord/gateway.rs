//! The fake gateway: one websocket server speaking Discord's opcodes in JSON text frames.
//!
//! It keeps one session per shard (from IDENTIFY's `shard: [id, total]`) and must keep sequence
//! numbers and RESUME replay exact, because those are what a "no message lost" test leans on.
//! It never decides anything for the client: reconnects happen only because a test asked for
//! one.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message;

use super::{payloads, Conn, ConnCmd, FakeDiscord, Inner, Session, Shared};

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
    shared.lock().conns.retain(|_, c| c.id != conn_id);
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
            let shard = d["shard"][0].as_u64().unwrap_or(0);
            let total = d["shard"][1].as_u64().unwrap_or(1);
            if total == 0 || shard >= total {
                return Reply::Close(4010, "Invalid shard.");
            }
            let mut inner = shared.lock();
            inner.identify_count += 1;
            *inner.identifies_by_shard.entry(shard).or_default() += 1;
            inner.shard_total = total;
            if take_over(&mut inner, shard, conn_id, tx) {
                inner.shard_takeovers += 1;
            }
            let session_id = format!("fake-session-{}", shared.new_id());
            inner.sessions.insert(
                shard,
                Session {
                    id: session_id.clone(),
                    seq: 0,
                    log: Vec::new(),
                },
            );
            let ready = payloads::ready(&session_id, &shared.gateway_url, [shard, total]);
            // READY has no guild: it routes to shard 0 by the rule, so it is sent directly.
            inner.send_on_shard(shard, "READY", ready);
            let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut inner.pending)
                .into_iter()
                .partition(|(event, d)| shard_of(event, d, total) == shard);
            inner.pending = others;
            for (event, d) in mine {
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
            let found = inner
                .sessions
                .iter()
                .find(|(_, s)| s.id == wanted)
                .map(|(shard, s)| {
                    let frames = s
                        .log
                        .iter()
                        .filter(|(seq, _)| *seq > from)
                        .map(|(_, f)| f.clone())
                        .collect::<Vec<_>>();
                    (*shard, frames)
                });
            // Unknown or forgotten session: Discord answers op 9, not resumable.
            let Some((shard, frames)) = found else {
                return Reply::Send(json!({"op": 9, "d": false}));
            };
            take_over(&mut inner, shard, conn_id, tx);
            for f in frames {
                let _ = tx.send(ConnCmd::Frame(f));
            }
            inner.send_on_shard(shard, "RESUMED", json!({}));
            Reply::None
        }
        other => {
            eprintln!("fake discord gateway: ignoring op {other:?}: {text}");
            Reply::None
        }
    }
}

/// Makes this socket the shard session's socket; a previous live one is cut. Returns whether a
/// different socket was still live on the shard.
fn take_over(
    inner: &mut Inner,
    shard: u64,
    conn_id: u64,
    tx: &mpsc::UnboundedSender<ConnCmd>,
) -> bool {
    let new = Conn {
        id: conn_id,
        tx: tx.clone(),
    };
    match inner.conns.insert(shard, new) {
        Some(old) if old.id != conn_id => {
            let _ = old.tx.send(ConnCmd::Drop);
            true
        }
        _ => false,
    }
}

/// Discord's routing rule: a guild's events go to shard `(guild_id >> 22) % total`, everything
/// without a guild (DMs) to shard 0.
pub fn shard_of(event: &str, d: &Value, total: u64) -> u64 {
    let key = if event == "GUILD_CREATE" {
        "id"
    } else {
        "guild_id"
    };
    let guild = d[key].as_str().and_then(|s| s.parse::<u64>().ok());
    guild.map_or(0, |g| (g >> 22) % total.max(1))
}

impl Inner {
    /// Appends a dispatch to one shard's session and sends it on its live socket, whatever the
    /// routing rule says (READY and RESUMED belong to the session, not to a guild).
    pub fn send_on_shard(&mut self, shard: u64, event: &str, d: Value) {
        let Some(session) = self.sessions.get_mut(&shard) else {
            return;
        };
        session.seq += 1;
        let frame = json!({"op": 0, "s": session.seq, "t": event, "d": d}).to_string();
        session.log.push((session.seq, frame.clone()));
        if let Some(conn) = self.conns.get(&shard) {
            let _ = conn.tx.send(ConnCmd::Frame(frame));
        }
    }
}

impl FakeDiscord {
    // ---- gateway faults ----------------------------------------------------------------------

    /// Closes every shard's gateway TCP connection with no close frame; sessions survive.
    pub fn drop_socket(&self) {
        for (_, conn) in std::mem::take(&mut self.shared.lock().conns) {
            let _ = conn.tx.send(ConnCmd::Drop);
        }
    }

    /// While true, HEARTBEATs get no op 11 (serenity then re-identifies, see CRATES.md).
    pub fn stop_heartbeat_acks(&self, stop: bool) {
        self.shared.lock().acks_stopped = stop;
    }

    /// What `GET /gateway/bot` recommends as the shard count (1 unless set).
    pub fn set_recommended_shards(&self, n: u64) {
        self.shared.recommended_shards.store(n, Ordering::Relaxed);
    }

    /// op 7: the client should reconnect and resume.
    pub fn send_reconnect(&self) {
        self.send_raw(json!({"op": 7, "d": null}));
    }

    /// op 9. When not resumable, the session is forgotten and the client must IDENTIFY again.
    pub fn invalidate_session(&self, resumable: bool) {
        self.send_raw(json!({"op": 9, "d": resumable}));
        if !resumable {
            self.shared.lock().sessions.clear();
        }
    }

    /// Sends `frame` on every shard's socket.
    fn send_raw(&self, frame: Value) {
        for conn in self.shared.lock().conns.values() {
            let _ = conn.tx.send(ConnCmd::Frame(frame.to_string()));
        }
    }
}
