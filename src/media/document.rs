use super::MediaError;
use std::sync::Arc;
pub enum DocFormat {
    Text,
    Markdown,
    Code(&'static str),
    Csv,
    Json,
    Pdf,
}
pub struct DocumentText {
    pub format: DocFormat,
    pub text: String,
    pub truncated: bool,
    pub total_chars: usize,
}
pub async fn read_document_blocking(
    _b: Arc<[u8]>,
    _m: Option<String>,
    _n: Option<String>,
    _c: usize,
) -> Result<Option<DocumentText>, MediaError> {
    unimplemented!()
}
