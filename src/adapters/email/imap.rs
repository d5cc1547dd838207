//! The IMAP connection: TCP, then TLS from the first byte or after STARTTLS (rustls with the
//! webpki roots, the ring provider: the TLS stack the rest of Herald uses), or plain only with
//! `insecure = true`; then LOGIN. async-imap speaks the protocol.
//!
//! Also the one look into the Sent folder: whether a Message-ID is there already.
//!
//! Must not: log the password or a message's content.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::config::{EmailConfig, EmailTls};
use super::MailError;

/// Any byte stream IMAP runs over (TCP, TLS over TCP).
pub trait Io: AsyncRead + AsyncWrite + Unpin + Send + Debug {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send + Debug> Io for T {}

pub type Session = async_imap::Session<Box<dyn Io>>;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Connects and logs in. `MailError::Refused` when the server refused the login.
pub async fn connect(cfg: &EmailConfig) -> Result<Session, MailError> {
    let host = cfg.imap_host();
    let port = cfg.imap_port();
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host, port)))
        .await
        .map_err(|_| MailError::Failed(format!("IMAP {host}:{port}: connect timed out")))?
        .map_err(|e| MailError::Failed(format!("IMAP {host}:{port}: {e}")))?;
    let client = match (cfg.insecure, cfg.tls) {
        (true, _) => greeted(Box::new(tcp) as Box<dyn Io>).await?,
        (false, EmailTls::Implicit) => greeted(Box::new(tls(host, tcp).await?)).await?,
        (false, EmailTls::Starttls) => {
            let mut plain = greeted(Box::new(tcp) as Box<dyn Io>).await?;
            plain
                .run_command_and_check_ok("STARTTLS", None)
                .await
                .map_err(|e| MailError::Failed(format!("IMAP STARTTLS: {e}")))?;
            let tcp = plain.into_inner();
            async_imap::Client::new(Box::new(tls(host, tcp).await?) as Box<dyn Io>)
        }
    };
    let password = cfg.password().ok_or(MailError::Refused(
        "no password (email.password or email.password_env)".into(),
    ))?;
    client
        .login(cfg.login(), password.expose())
        .await
        .map_err(|(e, _)| match e {
            async_imap::error::Error::No(m) | async_imap::error::Error::Bad(m) => {
                MailError::Refused(format!("IMAP login refused: {m}"))
            }
            other => MailError::Failed(format!("IMAP login: {other}")),
        })
}

/// A client past the server's greeting.
async fn greeted(stream: Box<dyn Io>) -> Result<async_imap::Client<Box<dyn Io>>, MailError> {
    let mut client = async_imap::Client::new(stream);
    match client.read_response().await {
        Ok(Some(_)) => Ok(client),
        Ok(None) => Err(MailError::Failed(
            "IMAP server closed before its greeting".into(),
        )),
        Err(e) => Err(MailError::Failed(format!("IMAP greeting: {e}"))),
    }
}

/// TLS over `stream`, checked against `host` with the webpki roots.
pub async fn tls<S>(host: &str, stream: S) -> Result<tokio_rustls::client::TlsStream<S>, MailError>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let roots = rustls::RootCertStore::from_iter(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| MailError::Failed(format!("TLS setup: {e}")))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| MailError::Failed(format!("TLS server name {host:?}: {e}")))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .map_err(|e| MailError::Failed(format!("TLS with {host}: {e}")))
}

/// Whether a message with `message_id` is in `folder` (read-only; the folder is not selected
/// for writing).
pub async fn holds(cfg: &EmailConfig, folder: &str, message_id: &str) -> Result<bool, MailError> {
    let mut s = connect(cfg).await?;
    let failed = |e: async_imap::error::Error| MailError::Failed(format!("IMAP {folder}: {e}"));
    s.examine(folder).await.map_err(failed)?;
    let quoted = message_id.replace(['"', '\\'], "");
    let found = s
        .uid_search(format!("HEADER Message-ID \"{quoted}\""))
        .await
        .map_err(failed)?;
    let _ = s.logout().await;
    Ok(!found.is_empty())
}

/// The raw bytes of message `uid` of the selected mailbox (not marked \Seen).
pub async fn fetch(s: &mut Session, uid: u32) -> Result<Option<Vec<u8>>, MailError> {
    let failed = |e: async_imap::error::Error| MailError::Failed(format!("IMAP fetch: {e}"));
    let stream = s
        .uid_fetch(uid.to_string(), "(UID BODY.PEEK[])")
        .await
        .map_err(failed)?;
    let fetched: Vec<_> = stream.try_collect().await.map_err(failed)?;
    Ok(fetched
        .iter()
        .find(|f| f.uid == Some(uid))
        .and_then(|f| f.body())
        .map(<[u8]>::to_vec))
}

/// The header of message `uid` of the selected mailbox (not marked \Seen).
pub async fn fetch_header(s: &mut Session, uid: u32) -> Result<Option<Vec<u8>>, MailError> {
    let failed = |e: async_imap::error::Error| MailError::Failed(format!("IMAP fetch: {e}"));
    let stream = s
        .uid_fetch(uid.to_string(), "(UID BODY.PEEK[HEADER])")
        .await
        .map_err(failed)?;
    let fetched: Vec<_> = stream.try_collect().await.map_err(failed)?;
    Ok(fetched
        .iter()
        .find(|f| f.uid == Some(uid))
        .and_then(|f| f.header())
        .map(<[u8]>::to_vec))
}

/// The sizes of messages `uids` of the selected mailbox.
pub async fn sizes(s: &mut Session, uids: &[u32]) -> Result<Vec<(u32, u32)>, MailError> {
    if uids.is_empty() {
        return Ok(Vec::new());
    }
    let set = uids
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let failed = |e: async_imap::error::Error| MailError::Failed(format!("IMAP fetch sizes: {e}"));
    let stream = s
        .uid_fetch(set, "(UID RFC822.SIZE)")
        .await
        .map_err(failed)?;
    let fetched: Vec<_> = stream.try_collect().await.map_err(failed)?;
    Ok(fetched
        .iter()
        .filter_map(|f| Some((f.uid?, f.size?)))
        .collect())
}
