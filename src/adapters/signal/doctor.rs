//! `herald doctor`'s Signal checks: the daemon answers at `signal.url` (`version`), and
//! `signal.account` is registered there (`listAccounts` on a multi-account daemon; on a
//! single-account one, `getUserStatus` of the account, which only a registered account can
//! ask). Each result names the key at fault.

use serde_json::{json, Value};

use super::config::SignalConfig;
use super::rpc::{RpcError, SignalRpc};

/// One line of the doctor's report: what was checked, and what it found.
pub type Check = (&'static str, Result<String, String>);

/// Runs the checks that apply to this section.
pub async fn doctor(config: &SignalConfig) -> Vec<Check> {
    let mut out = Vec::new();
    if let Err(e) = config.check() {
        out.push(("signal config", Err(e.to_string())));
        return out;
    }
    let url = config.url.as_ref().map(|u| u.as_str()).unwrap_or_default();
    let rpc = match SignalRpc::new(url) {
        Ok(rpc) => rpc,
        Err(e) => {
            out.push(("signal.url", Err(e.to_string())));
            return out;
        }
    };
    match rpc.call("version", json!({})).await {
        Ok(v) => {
            let version = v.get("version").and_then(Value::as_str).unwrap_or("?");
            out.push(("signal.url", Ok(format!("signal-cli {version} answers"))));
        }
        Err(e) => {
            out.push((
                "signal.url",
                Err(format!("signal-cli does not answer there: {e}")),
            ));
            return out;
        }
    }
    out.push(("signal.account", account(&rpc, config.account()).await));
    out
}

async fn account(rpc: &SignalRpc, account: &str) -> Result<String, String> {
    match rpc.call("listAccounts", json!({})).await {
        Ok(list) => {
            let numbers: Vec<&str> = list
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.get("number").and_then(Value::as_str))
                .collect();
            if numbers.contains(&account) {
                Ok(format!("{account} is registered on the daemon"))
            } else {
                Err(format!(
                    "{account} is not an account of this daemon (it has {numbers:?}): register or link it"
                ))
            }
        }
        Err(RpcError::Refused { code: -32601, .. }) => {
            let status = rpc
                .call("getUserStatus", json!({"recipient": [account]}))
                .await;
            match status {
                Ok(v) if registered(&v) => Ok(format!(
                    "{account}: the daemon's account answers and is registered with Signal"
                )),
                Ok(_) => Err(format!("{account} is not registered with Signal")),
                Err(e) => Err(format!("the daemon's account cannot act: {e}")),
            }
        }
        Err(e) => Err(format!("cannot list the daemon's accounts: {e}")),
    }
}

fn registered(status: &Value) -> bool {
    status
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| s.get("isRegistered").and_then(Value::as_bool) == Some(true))
}
