//! Email adapter: IMAP in (IDLE, or a poll where the server has none), SMTP out.
//!
//! `app` sees it as an [`Adapter`]: `from_config` (the SMTP client, no network; `None` without
//! `email.address`), `outbound` (one mail per reply, threaded), `preflight` (both logins, once)
//! and `spawn` (the mailbox reader, tracked and cancellable). No routes: nothing calls in.
//!
//! The wire crates stay in this folder: async-imap (IMAP, on tokio, over our rustls), lettre
//! (SMTP submission and the MIME builder), mail-parser (reading MIME), pulldown-cmark (the
//! HTML part).
//!
//! Must not: log the password or what a mail says; mark a mail handled before its inbox write;
//! answer a machine (auto-replies, bounces) or a From the receiving server did not vouch for.

mod auth;
mod compose;
pub mod config;
mod html;
mod ids;
mod imap;
mod inbound;
mod outbound;
mod parse;
mod quoted;
mod reader;
pub mod spec;

use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::Config;
use crate::delivery::Outbound;
use crate::domain::Platform;
use config::EmailConfig;
use outbound::EmailOutbound;

pub use spec::SPEC;

pub const EMAIL: Platform = Platform::named("email");

/// What went wrong talking to a mail server: the server refused us (a login: fix the
/// config), or anything else (retried).
#[derive(Debug, Clone, thiserror::Error)]
pub enum MailError {
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
}

pub struct EmailAdapter {
    config: EmailConfig,
    outbound: Arc<EmailOutbound>,
}

impl EmailAdapter {
    /// Builds the SMTP client from the section (no network yet).
    pub fn new(config: EmailConfig) -> anyhow::Result<EmailAdapter> {
        config.check()?;
        if config.insecure {
            tracing::warn!(
                "email.insecure is on: IMAP and SMTP run unencrypted (local tests only)"
            );
        }
        let outbound = EmailOutbound::new(config.clone())?;
        Ok(EmailAdapter {
            config,
            outbound: Arc::new(outbound),
        })
    }
}

impl Adapter for EmailAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<EmailAdapter>> {
        let Some(section) = config.section::<EmailConfig>("email")? else {
            return Ok(None);
        };
        if section.address.is_none() {
            return Ok(None);
        }
        EmailAdapter::new(section)
            .context("email adapter")
            .map(Some)
    }

    fn platform(&self) -> Platform {
        EMAIL
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    /// Both logins, once before ready: a password a server refuses stops the start.
    fn preflight(&self) -> Option<futures::future::BoxFuture<'static, Result<(), String>>> {
        let cfg = self.config.clone();
        let outbound = self.outbound.clone();
        Some(Box::pin(async move {
            match imap::connect(&cfg).await {
                Ok(mut s) => {
                    let _ = s.logout().await;
                }
                Err(MailError::Refused(e)) => {
                    return Err(format!(
                        "email.password was refused by the IMAP server ({e})"
                    ))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "email: IMAP not reachable at start; the reader retries")
                }
            }
            if let Err(e) = outbound.check_login().await {
                tracing::warn!(error = %e, "email: SMTP check failed at start; sends are retried");
            }
            Ok(())
        }))
    }

    fn spawn(self: Box<Self>, edge: Edge, tracker: &TaskTracker, cancel: CancellationToken) {
        let _ = self.outbound.store.set(edge.store.clone());
        let reader = reader::Reader {
            cfg: self.config,
            edge,
            outbound: self.outbound,
        };
        tracker.spawn(reader.run(cancel));
    }
}

/// `herald doctor`: logs in to both servers; one line each.
pub async fn doctor(config: &Config) -> Vec<(&'static str, Result<String, String>)> {
    let Some(cfg) = spec::section(config).filter(|s| s.address.is_some()) else {
        return Vec::new();
    };
    let imap_line = match imap::connect(&cfg).await {
        Ok(mut s) => {
            let _ = s.logout().await;
            Ok(format!(
                "IMAP login to {}:{} as {}",
                cfg.imap_host(),
                cfg.imap_port(),
                cfg.login()
            ))
        }
        Err(e) => Err(format!("IMAP {}:{}: {e}", cfg.imap_host(), cfg.imap_port())),
    };
    let smtp_line = match EmailOutbound::new(cfg.clone()) {
        Ok(o) => match o.check_login().await {
            Ok(()) => Ok(format!(
                "SMTP login to {}:{} as {}",
                cfg.smtp_host(),
                cfg.smtp_port(),
                cfg.login()
            )),
            Err(e) => Err(format!("SMTP {}:{}: {e}", cfg.smtp_host(), cfg.smtp_port())),
        },
        Err(e) => Err(format!("SMTP {}: {e}", cfg.smtp_host())),
    };
    vec![("email imap", imap_line), ("email smtp", smtp_line)]
}
