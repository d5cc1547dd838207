use super::{MediaCache, MediaError};
use crate::config::Config;
use crate::domain::Attachment;
use std::sync::Arc;
pub struct Fetched {
    pub bytes: Arc<[u8]>,
    pub mime: Option<String>,
    pub sha256: String,
}
pub struct Fetcher {
    _c: MediaCache,
}
impl Fetcher {
    pub fn from_config(_config: &Config, cache: MediaCache) -> Fetcher {
        Fetcher { _c: cache }
    }
    pub async fn fetch(&self, _a: &Attachment) -> Result<Fetched, MediaError> {
        unimplemented!()
    }
}
