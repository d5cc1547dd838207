//! Status callbacks (`sent`, `delivered`, `read`, `failed`) onto the outbox row they are about.
//!
//! Each message Herald sends carries its outbox key in `biz_opaque_callback_data`, and Meta
//! echoes it in every status of that message. A `sent` status therefore names the row even when
//! Herald never read the answer to its send (a crash, a timeout): the row is marked sent with
//! the `wamid` then, and a resend after a restart finds it done. `delivered` and `read` move
//! the row's delivery state forward; `failed` fails the row with Meta's code and title, logged
//! at warn and counted (`herald_whatsapp_failed_total{code}`), and `herald outbox failed` lists
//! it: never swallowed.
//!
//! Must not: move a delivery state backwards (statuses arrive out of order), or touch a row of
//! another platform.

use std::sync::Arc;

use super::inbound::Status;
use super::WHATSAPP;
use crate::store::{DeliveryReport, Store, StoreError};

#[derive(Clone)]
pub struct Statuses {
    pub store: Arc<dyn Store>,
}

impl Statuses {
    pub async fn record(&self, st: &Status) -> Result<(), StoreError> {
        let report = match st.status.as_str() {
            "sent" => DeliveryReport::Sent,
            "delivered" => DeliveryReport::Delivered,
            "read" => DeliveryReport::Read,
            "failed" => {
                let (code, title) = st.error.clone().unwrap_or((0, "no reason given".into()));
                tracing::warn!(wamid = %st.wamid, code, title = %title,
                    "whatsapp could not deliver a message (status failed)");
                metrics::counter!("herald_whatsapp_failed_total", "code" => code.to_string())
                    .increment(1);
                DeliveryReport::Failed(format!("whatsapp delivery failed: error {code}: {title}"))
            }
            other => {
                tracing::debug!(status = other, "whatsapp status not handled");
                return Ok(());
            }
        };
        let changed = self
            .store
            .outbox_report(WHATSAPP, st.key.as_deref(), &st.wamid, &report)
            .await?;
        if changed && matches!(report, DeliveryReport::Sent) && st.key.is_some() {
            tracing::debug!(wamid = %st.wamid, "whatsapp status recorded a message Herald had not marked sent");
        }
        Ok(())
    }
}
