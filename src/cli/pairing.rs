//! `herald pairing`: list pending codes and approved senders, approve a code, revoke a sender.

use clap::Subcommand;

use super::Access;
use crate::config::Config;

#[derive(Subcommand)]
pub enum PairingCmd {
    /// Pending, unexpired pairing codes, then the senders approved through pairing.
    List,
    /// Approve a code: its sender may talk to the agent from now on.
    Approve { platform: String, code: String },
    /// Remove a sender approved through pairing.
    Revoke { platform: String, sender_id: String },
}

pub async fn pairing(config: &Config, cmd: PairingCmd) -> anyhow::Result<()> {
    let (name, access) = match &cmd {
        PairingCmd::List => ("pairing list", Access::Read),
        PairingCmd::Approve { .. } => ("pairing approve", Access::Write),
        PairingCmd::Revoke { .. } => ("pairing revoke", Access::Write),
    };
    // Every pairing command acts on rows only a daemon writes.
    let store = super::open_store(config, name, access).await?;
    match cmd {
        PairingCmd::List => {
            let pending = store.pairing_pending().await?;
            if pending.is_empty() {
                println!("no pending pairing codes");
            }
            for p in pending {
                println!(
                    "{}  {}  sender {} ({})  chat {}  expires {}",
                    p.platform,
                    p.code,
                    p.sender_id,
                    p.sender_name,
                    p.chat_id,
                    super::fmt_ms(p.expires_at)
                );
            }
            let approved = store.senders_approved().await?;
            if approved.is_empty() {
                println!("no senders approved through pairing");
            } else {
                println!("approved senders (remove one with `herald pairing revoke PLATFORM SENDER_ID`):");
            }
            for a in approved {
                println!(
                    "{}  sender {} ({})  approved {}",
                    a.platform,
                    a.sender_id,
                    a.sender_name,
                    super::fmt_ms(a.approved_at)
                );
            }
        }
        PairingCmd::Approve { platform, code } => {
            let code = code.trim().to_ascii_uppercase();
            let req = store.pairing_approve(&platform, &code).await?;
            println!(
                "approved {} sender {} ({}); they are told in their chat, and what they wrote while waiting is answered",
                req.platform, req.sender_id, req.sender_name
            );
        }
        PairingCmd::Revoke {
            platform,
            sender_id,
        } => {
            if store.sender_revoke(&platform, &sender_id).await? {
                println!("revoked {platform} sender {sender_id}");
            } else {
                anyhow::bail!("{platform} sender {sender_id} was not approved through pairing");
            }
        }
    }
    store.close().await;
    Ok(())
}
