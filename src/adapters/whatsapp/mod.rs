//! WhatsApp adapter, through Meta's Cloud API: a signed webhook in, the Graph API out.
//!
//! `app` sees it as an [`Adapter`]: `from_config` (the Graph client, no network; `None`
//! without `whatsapp.access_token`), `outbound` (text, files by media id, reply-button
//! questions, read receipts with the typing indicator), `routes` (the webhook: Meta's `GET`
//! verification and the signed `POST`s) and `spawn` (hands the webhook its receiver).
//!
//! Must not: log the access token, the app secret, the verify token or a payload; answer a
//! webhook 200 before its messages are in the inbox.

mod api;
pub mod config;
mod doctor;
pub mod inbound;
mod outbound;
mod receive;
mod signature;
pub mod spec;
mod status;
mod webhook;
mod window;

#[cfg(test)]
mod inbound_tests;

use std::sync::{Arc, OnceLock};

use anyhow::Context;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{Adapter, Edge};
use crate::config::Config;
use crate::delivery::Outbound;
use crate::domain::Platform;
use api::GraphApi;
use config::WhatsAppConfig;
use outbound::WhatsAppOutbound;
use receive::{Parts, Receiver};
use window::{Template, Window};

pub use doctor::doctor;
pub use receive::CANNOT_READ;
pub use spec::SPEC;

pub const WHATSAPP: Platform = Platform::named("whatsapp");

pub struct WhatsAppAdapter {
    config: WhatsAppConfig,
    api: GraphApi,
    outbound: Arc<WhatsAppOutbound>,
    receiver: Arc<OnceLock<Arc<Receiver>>>,
    /// The outbound's 24-hour window, waiting for the store at `spawn`.
    window: Window,
}

impl WhatsAppAdapter {
    /// Builds the client from the section (no network yet).
    pub fn new(config: WhatsAppConfig) -> anyhow::Result<WhatsAppAdapter> {
        config.check()?;
        let api = GraphApi::new(config.api_url.as_str(), config.token())?;
        if config.allow_all_users {
            tracing::warn!(
                "whatsapp.allow_all_users is on: every number that writes can talk to the agent"
            );
        }
        let template = config.brief_template.clone().map(|name| Template {
            name,
            language: config.template_language.clone(),
        });
        let window = Window::new(template);
        Ok(WhatsAppAdapter {
            outbound: Arc::new(WhatsAppOutbound::new(
                api.clone(),
                config.phone().to_string(),
                window.clone(),
            )),
            config,
            api,
            receiver: Arc::new(OnceLock::new()),
            window,
        })
    }
}

impl Adapter for WhatsAppAdapter {
    fn from_config(config: &Config) -> anyhow::Result<Option<WhatsAppAdapter>> {
        let Some(section) = config.section::<WhatsAppConfig>("whatsapp")? else {
            return Ok(None);
        };
        if section.access_token.is_none() {
            return Ok(None);
        }
        WhatsAppAdapter::new(section)
            .context("whatsapp adapter")
            .map(Some)
    }

    fn platform(&self) -> Platform {
        WHATSAPP
    }

    fn outbound(&self) -> Arc<dyn Outbound> {
        self.outbound.clone()
    }

    fn pace(&self, _config: &Config) -> Option<crate::delivery::pace::Limits> {
        self.config.pacing.then(spec::limits)
    }

    /// The token and the phone number id, tried once before ready: a token Meta refuses stops
    /// the start naming its key.
    fn preflight(&self) -> Option<futures::future::BoxFuture<'static, Result<(), String>>> {
        let api = self.api.clone();
        let phone = self.config.phone().to_string();
        Some(Box::pin(async move {
            match api.get(&phone, Some("display_phone_number")).await {
                Err(e) if e.is_auth() => Err(format!(
                    "whatsapp.access_token was refused by Meta ({e}); replace it (herald doctor checks it)"
                )),
                Err(e) if e.code() == Some(api::code::INVALID_PARAMETER) => Err(format!(
                    "whatsapp.phone_number_id is not a number this token can send from ({e})"
                )),
                Err(e) => {
                    tracing::warn!(error = %e, "whatsapp check at start failed; sends retry");
                    Ok(())
                }
                Ok(_) => Ok(()),
            }
        }))
    }

    fn routes(&self) -> Option<axum::Router> {
        let secret = self.config.app_secret.as_ref()?.expose();
        let verify = self.config.verify_token.as_ref()?.expose();
        Some(webhook::routes(
            &self.config.webhook_path,
            secret,
            verify,
            self.receiver.clone(),
        ))
    }

    fn spawn(self: Box<Self>, edge: Edge, _tracker: &TaskTracker, _cancel: CancellationToken) {
        // The outbound's window reads "last heard" from the store from now on.
        self.window.attach(edge.store.clone());
        let receiver = Receiver::new(Parts {
            ingest: edge.ingest.clone(),
            approvals: edge.approvals.clone(),
            outbound: self.outbound.clone(),
            statuses: status::Statuses {
                store: edge.store.clone(),
            },
            api_url: self.config.api_url.as_str().to_string(),
            auth: edge.auth.clone(),
            store: edge.store.clone(),
        });
        let _ = self.receiver.set(Arc::new(receiver));
        tracing::info!(webhook = %self.config.webhook_path, "whatsapp adapter ready");
    }
}
