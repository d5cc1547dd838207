//! The file parts of a `multipart/form-data` body, byte for byte: what the fake Telegram and
//! the fake Discord record of an upload. Text parts are left to each fake's own decoder.

/// One file part: its field name, its file name and its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilePart {
    pub field: String,
    pub file_name: String,
    pub bytes: Vec<u8>,
}

/// The file parts of `body`, when `content_type` is multipart with a boundary.
pub fn file_parts(content_type: &str, body: &[u8]) -> Vec<FilePart> {
    let Some(boundary) = content_type.split("boundary=").nth(1) else {
        return Vec::new();
    };
    let delimiter = format!("--{}", boundary.trim_matches('"'));
    let mut out = Vec::new();
    for part in split(body, delimiter.as_bytes()).into_iter().skip(1) {
        if part.starts_with(b"--") {
            break;
        }
        let Some(at) = find(part, b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&part[..at]);
        let content = &part[at + 4..];
        let content = content.strip_suffix(b"\r\n").unwrap_or(content);
        let attr = |name: &str| {
            head.split(';')
                .find_map(|a| {
                    a.trim()
                        .strip_prefix(&format!("{name}=\""))
                        .map(str::to_string)
                })
                .and_then(|v| v.split('"').next().map(str::to_string))
        };
        if let (Some(field), Some(file_name)) = (attr("name"), attr("filename")) {
            out.push(FilePart {
                field,
                file_name,
                bytes: content.to_vec(),
            });
        }
    }
    out
}

fn split<'a>(body: &'a [u8], delimiter: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    while let Some(at) = find(rest, delimiter) {
        out.push(&rest[..at]);
        rest = &rest[at + delimiter.len()..];
    }
    out.push(rest);
    out
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}
