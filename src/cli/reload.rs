//! `herald reload`: asks the running daemon (on `server.listen`, with `web.token`) to re-read
//! its configuration, and prints what it applied, what waits for a restart, or why the file
//! was refused (then the exit status is non-zero and nothing changed).

use anyhow::{bail, Context};
use serde_json::Value;

use crate::config::Config;

pub async fn reload(config: &Config) -> anyhow::Result<()> {
    let mut addr = config.server.listen;
    if addr.ip().is_unspecified() {
        addr.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
    }
    let url = format!("http://{addr}/api/v1/admin/reload");
    let mut req = reqwest::Client::new().post(&url);
    if let Some(token) = &config.web.token {
        req = req.bearer_auth(token.expose());
    }
    let resp = req
        .send()
        .await
        .with_context(|| format!("no daemon answered at {url}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.unwrap_or(Value::Null);
    if !status.is_success() {
        let why = body["error"].as_str().unwrap_or("no reason given");
        bail!("reload refused ({status}): {why}");
    }
    print!("{}", describe(&body["report"]));
    Ok(())
}

/// The report as lines an operator reads.
pub fn describe(report: &Value) -> String {
    let list = |k: &str| -> Vec<String> {
        report[k]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (applied, restart) = (list("applied"), list("restart_needed"));
    let mut out = format!("configuration generation {}\n", report["generation"]);
    if applied.is_empty() && restart.is_empty() {
        out.push_str("nothing changed\n");
    }
    if !applied.is_empty() {
        out.push_str(&format!("applied: {}\n", applied.join(", ")));
    }
    if !restart.is_empty() {
        out.push_str(&format!(
            "needs a restart (running as before): {}\n",
            restart.join(", ")
        ));
    }
    out
}
