//! A small SMTP server (RFC 5321 submission, enough of it for a real client: EHLO, AUTH PLAIN
//! and LOGIN for one login (535 for any other), MAIL, RCPT, DATA with dot-unstuffing, RSET,
//! NOOP, QUIT) that keeps every message it accepts instead of relaying it. Written here rather than run from PyPI (aiosmtpd) because
//! it needs no venv, starts in microseconds, and the tests need two things a stock sink does
//! not do: refuse the next message with a 4xx reply naming a wait, and put an accepted
//! message's copy into the user's Sent folder on the Dovecot of the test, before it answers
//! 250, as Gmail and Fastmail keep a Sent copy of what is submitted.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One message the server accepted.
#[derive(Clone, Debug)]
pub struct Accepted {
    pub from: String,
    pub to: Vec<String>,
    pub data: Vec<u8>,
    /// The client authenticated on this connection.
    pub authed: bool,
    pub at: Instant,
    /// The wall clock at acceptance, in milliseconds.
    pub at_ms: i64,
}

/// Where an accepted message's copy goes: (IMAP port, login, password, folder).
#[derive(Clone, Debug)]
pub struct SentCopy {
    pub port: u16,
    pub login: String,
    pub password: String,
    pub folder: String,
}

#[derive(Default)]
struct State {
    accepted: Mutex<Vec<Accepted>>,
    refuse: AtomicU32,
    refuse_secs: AtomicU64,
    copy: Mutex<Option<SentCopy>>,
    /// The one (login, password) AUTH accepts.
    login: Mutex<(String, String)>,
}

impl State {
    fn login_ok(&self, login: &str, password: &str) -> bool {
        let want = self.login.lock().unwrap();
        want.0 == login && want.1 == password
    }
}

pub struct SmtpSink {
    pub port: u16,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl SmtpSink {
    /// A server accepting AUTH by `login` (login, password) only.
    pub async fn start(login: (&str, &str), copy: Option<SentCopy>) -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind smtp");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(State::default());
        *state.copy.lock().unwrap() = copy;
        *state.login.lock().unwrap() = (login.0.to_string(), login.1.to_string());
        let s = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let s = s.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, s).await;
                });
            }
        });
        SmtpSink { port, state, task }
    }

    /// Everything accepted so far, in order.
    pub fn accepted(&self) -> Vec<Accepted> {
        self.state.accepted.lock().unwrap().clone()
    }

    /// The next `n` messages are refused at the end of DATA with
    /// `451 4.7.1 rate limited, try again in <secs> seconds`.
    pub fn refuse_next(&self, n: u32, secs: u64) {
        self.state.refuse_secs.store(secs, Ordering::SeqCst);
        self.state.refuse.store(n, Ordering::SeqCst);
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(sock: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    let (r, mut w) = sock.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"220 sink.test ESMTP herald test sink\r\n")
        .await?;
    let (mut from, mut to, mut authed) = (String::new(), Vec::new(), false);
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let cmd = line.trim_end().to_string();
        let upper = cmd.to_ascii_uppercase();
        let reply: String = if upper.starts_with("EHLO") {
            "250-sink.test\r\n250-AUTH PLAIN LOGIN\r\n250-8BITMIME\r\n250 SIZE 52428800\r\n".into()
        } else if upper.starts_with("HELO") {
            "250 sink.test\r\n".into()
        } else if upper.starts_with("AUTH PLAIN") {
            let mut token = cmd.split_whitespace().nth(2).map(str::to_string);
            if token.is_none() {
                w.write_all(b"334 \r\n").await?;
                line.clear();
                r.read_line(&mut line).await?;
                token = Some(line.trim().to_string());
            }
            // `\0login\0password`
            let plain = decode(token.as_deref().unwrap_or(""));
            let mut parts = plain.split('\0').skip(1);
            let (login, password) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
            authed = state.login_ok(login, password);
            auth_reply(authed)
        } else if upper.starts_with("AUTH LOGIN") {
            let mut login = cmd.split_whitespace().nth(2).map(decode);
            if login.is_none() {
                w.write_all(b"334 VXNlcm5hbWU6\r\n").await?;
                line.clear();
                r.read_line(&mut line).await?;
                login = Some(decode(line.trim()));
            }
            w.write_all(b"334 UGFzc3dvcmQ6\r\n").await?;
            line.clear();
            r.read_line(&mut line).await?;
            authed = state.login_ok(login.as_deref().unwrap_or(""), &decode(line.trim()));
            auth_reply(authed)
        } else if upper.starts_with("MAIL FROM:") {
            from = angle(&cmd[10..]);
            to.clear();
            "250 2.1.0 Ok\r\n".into()
        } else if upper.starts_with("RCPT TO:") {
            to.push(angle(&cmd[8..]));
            "250 2.1.5 Ok\r\n".into()
        } else if upper == "DATA" {
            w.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n")
                .await?;
            let data = read_data(&mut r).await?;
            accept(&state, &from, &to, data, authed).await
        } else if upper == "RSET" {
            from.clear();
            to.clear();
            "250 2.0.0 Ok\r\n".into()
        } else if upper == "NOOP" {
            "250 2.0.0 Ok\r\n".into()
        } else if upper == "QUIT" {
            w.write_all(b"221 2.0.0 Bye\r\n").await?;
            return Ok(());
        } else {
            "502 5.5.2 Command not recognized\r\n".into()
        };
        w.write_all(reply.as_bytes()).await?;
    }
}

/// Reads DATA up to the lone dot, undoing dot-stuffing.
async fn read_data<R: tokio::io::AsyncRead + Unpin>(
    r: &mut BufReader<R>,
) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = r.read_until(b'\n', &mut line).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        if line == b".\r\n" || line == b".\n" {
            return Ok(data);
        }
        let body = if line.starts_with(b"..") {
            &line[1..]
        } else {
            &line[..]
        };
        data.extend_from_slice(body);
    }
}

async fn accept(state: &State, from: &str, to: &[String], data: Vec<u8>, authed: bool) -> String {
    let refused = state
        .refuse
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok();
    if refused {
        let secs = state.refuse_secs.load(Ordering::SeqCst);
        return format!("451 4.7.1 rate limited, try again in {secs} seconds\r\n");
    }
    let copy = state.copy.lock().unwrap().clone();
    if let Some(c) = copy {
        if let Err(e) =
            super::mailbox::append(c.port, &c.login, &c.password, &c.folder, &data).await
        {
            return format!("451 4.3.0 could not keep the Sent copy: {e}\r\n");
        }
    }
    state.accepted.lock().unwrap().push(Accepted {
        from: from.to_string(),
        to: to.to_vec(),
        data,
        authed,
        at: Instant::now(),
        at_ms: chrono::Utc::now().timestamp_millis(),
    });
    "250 2.0.0 Ok: queued\r\n".into()
}

fn decode(b64: &str) -> String {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn auth_reply(ok: bool) -> String {
    if ok {
        "235 2.7.0 Authentication successful\r\n".into()
    } else {
        "535 5.7.8 Authentication credentials invalid\r\n".into()
    }
}

fn angle(s: &str) -> String {
    let s = s.trim();
    let end = s.find('>').map_or(s.len(), |i| i + 1);
    s[..end]
        .trim_start_matches('<')
        .trim_end_matches('>')
        .to_string()
}
