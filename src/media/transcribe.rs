use super::MediaError;
use crate::config::Config;
pub struct Transcriber;
impl Transcriber {
    pub fn from_config(_config: &Config) -> Option<Transcriber> {
        None
    }
    pub async fn transcribe(&self, _b: &[u8], _m: &str, _f: &str) -> Result<String, MediaError> {
        unimplemented!()
    }
}
