//! A platform's outbound that a reload can replace ([`Outbounds::replace`](super::Outbounds)):
//! every holder of the `Outbounds` (the outbox sender, previews, approval questions, budget
//! notices) keeps the one [`Swappable`] registered at start, and each call goes to the outbound
//! current at that moment. A send already under way finishes on the outbound it started on.

use std::sync::{Arc, RwLock};

use async_trait::async_trait;

use super::{Ask, OutFile, Outbound, PreviewTarget, SendError};
use crate::domain::Platform;
use crate::store::OutboxRow;

pub(super) struct Swappable {
    platform: Platform,
    current: RwLock<Arc<dyn Outbound>>,
}

impl Swappable {
    pub(super) fn new(o: Arc<dyn Outbound>) -> Swappable {
        Swappable {
            platform: o.platform(),
            current: RwLock::new(o),
        }
    }

    pub(super) fn replace(&self, o: Arc<dyn Outbound>) {
        *self.current.write().expect("outbound lock") = o;
    }

    fn now(&self) -> Arc<dyn Outbound> {
        self.current.read().expect("outbound lock").clone()
    }
}

#[async_trait]
impl Outbound for Swappable {
    fn platform(&self) -> Platform {
        self.platform
    }
    fn split(&self, text: &str) -> Vec<String> {
        self.now().split(text)
    }
    async fn send(&self, row: &OutboxRow) -> Result<String, SendError> {
        self.now().send(row).await
    }
    async fn send_file(&self, row: &OutboxRow, file: &OutFile) -> Result<String, SendError> {
        self.now().send_file(row, file).await
    }
    async fn typing(&self, chat_id: &str, thread_id: Option<&str>) {
        self.now().typing(chat_id, thread_id).await
    }
    async fn ask(&self, ask: &Ask<'_>) -> Result<String, SendError> {
        self.now().ask(ask).await
    }
    async fn ask_closed(
        &self,
        chat_id: &str,
        thread_id: Option<&str>,
        message_id: &str,
        text: &str,
    ) {
        self.now()
            .ask_closed(chat_id, thread_id, message_id, text)
            .await
    }
    fn previews(&self) -> bool {
        self.now().previews()
    }
    async fn preview_send(&self, to: &PreviewTarget<'_>, text: &str) -> Result<String, SendError> {
        self.now().preview_send(to, text).await
    }
    async fn preview_edit(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
        text: &str,
    ) -> Result<(), SendError> {
        self.now().preview_edit(to, message_id, text).await
    }
    async fn preview_delete(
        &self,
        to: &PreviewTarget<'_>,
        message_id: &str,
    ) -> Result<(), SendError> {
        self.now().preview_delete(to, message_id).await
    }
    async fn finalize(&self, row: &OutboxRow, message_id: &str) -> Result<String, SendError> {
        self.now().finalize(row, message_id).await
    }
}
