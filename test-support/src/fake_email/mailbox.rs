//! The test's own IMAP client (async-imap over plain TCP, as a mail client would be): fills a
//! mailbox by APPEND and reads folders back, for the tests and the SMTP sink's Sent copies.

use futures::TryStreamExt;
use tokio::net::TcpStream;

type Session = async_imap::Session<TcpStream>;

async fn login(port: u16, login: &str, password: &str) -> Result<Session, String> {
    let tcp = TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let mut client = async_imap::Client::new(tcp);
    client
        .read_response()
        .await
        .map_err(|e| format!("greeting: {e}"))?;
    client
        .login(login, password)
        .await
        .map_err(|(e, _)| format!("login: {e}"))
}

/// APPENDs `raw` to `folder`.
pub async fn append(
    port: u16,
    login_name: &str,
    password: &str,
    folder: &str,
    raw: &[u8],
) -> Result<(), String> {
    let mut s = login(port, login_name, password).await?;
    s.append(folder, None, None, raw)
        .await
        .map_err(|e| format!("append: {e}"))?;
    let _ = s.logout().await;
    Ok(())
}

/// Every message of `folder` with its flags, in UID order.
pub async fn read(
    port: u16,
    login_name: &str,
    password: &str,
    folder: &str,
) -> Result<Vec<(Vec<u8>, Vec<String>)>, String> {
    let mut s = login(port, login_name, password).await?;
    let mb = s
        .examine(folder)
        .await
        .map_err(|e| format!("examine: {e}"))?;
    let mut out = Vec::new();
    if mb.exists > 0 {
        let fetched: Vec<_> = s
            .fetch("1:*", "(UID FLAGS BODY.PEEK[])")
            .await
            .map_err(|e| format!("fetch: {e}"))?
            .try_collect()
            .await
            .map_err(|e| format!("fetch: {e}"))?;
        let mut rows: Vec<_> = fetched
            .iter()
            .map(|f| {
                let flags = f.flags().map(|fl| format!("{fl:?}")).collect();
                (
                    f.uid.unwrap_or(0),
                    f.body().unwrap_or_default().to_vec(),
                    flags,
                )
            })
            .collect();
        rows.sort_by_key(|r| r.0);
        out = rows.into_iter().map(|(_, b, f)| (b, f)).collect();
    }
    let _ = s.logout().await;
    Ok(out)
}

/// The capabilities the server announces after login.
pub async fn capabilities(
    port: u16,
    login_name: &str,
    password: &str,
) -> Result<Vec<String>, String> {
    let mut s = login(port, login_name, password).await?;
    let caps = s
        .capabilities()
        .await
        .map_err(|e| format!("capability: {e}"))?;
    let names = caps.iter().map(|c| format!("{c:?}")).collect();
    let _ = s.logout().await;
    Ok(names)
}
