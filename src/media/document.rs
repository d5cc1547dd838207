//! A document a person sent, as text the model can read: text, Markdown, code, CSV and JSON
//! as they are (decoded to UTF-8), a PDF through its text layer, a Word or OpenDocument text
//! through its XML, cut at a character budget.
//!
//! What a file is comes from its name's extension first (platforms send `.rs` or `.csv` as
//! `application/octet-stream`), then its MIME type, then its bytes (`sniff`). A type Herald
//! does not read is `Ok(None)`, for the caller to name; a file that claims a readable type
//! but is not one is `MediaError::Corrupt`.
//!
//! This is the decoding itself, and it runs inside the isolated `herald decode` worker
//! (`media::decode`), never in the daemon: a PDF is looked over first (`decode::pdf_scan`:
//! pages, inflated bytes, forms that draw themselves) and only then given to `pdf-extract`
//! (pure Rust over `lopdf`, under `catch_unwind`); an office file's XML is read under the
//! same inflate cap (`decode::office`). `read_document_blocking` remains for callers that
//! hold trusted bytes.

use std::borrow::Cow;

use super::decode::office::{office_text, Office};
use super::decode::pdf_scan::prescan;
use super::decode::Limits;
use super::sniff::{sniff, utf8_prefix};
use super::MediaError;

/// What kind of text a document holds, for the note that introduces it to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocFormat {
    Text,
    Markdown,
    /// Source code or a structured text format, with its language ("Rust", "YAML").
    Code(&'static str),
    Csv,
    Json,
    Pdf,
    /// A Word document (.docx).
    Word,
    /// An OpenDocument text (.odt).
    OpenDocument,
}

impl DocFormat {
    /// A short name: "text", "Markdown", the language, "CSV", "JSON", "PDF".
    pub fn name(&self) -> &'static str {
        match self {
            DocFormat::Text => "text",
            DocFormat::Markdown => "Markdown",
            DocFormat::Code(language) => language,
            DocFormat::Csv => "CSV",
            DocFormat::Json => "JSON",
            DocFormat::Pdf => "PDF",
            DocFormat::Word => "Word document",
            DocFormat::OpenDocument => "OpenDocument text",
        }
    }
}

/// A document's text, cut at the budget: `total_chars` is the length before the cut.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentText {
    pub format: DocFormat,
    pub text: String,
    pub truncated: bool,
    pub total_chars: usize,
}

/// Extensions (lowercase) Herald reads as text, and how.
const EXTENSIONS: &[(&str, DocFormat)] = {
    use DocFormat::{Code as C, Csv, Json, Markdown, Text};
    &[
        ("txt", Text),
        ("text", Text),
        ("log", Text),
        ("rst", Text),
        ("org", Text),
        ("srt", Text),
        ("vtt", Text),
        ("tex", C("LaTeX")),
        ("md", Markdown),
        ("markdown", Markdown),
        ("csv", Csv),
        ("tsv", Csv),
        ("json", Json),
        ("jsonl", Json),
        ("ndjson", Json),
        ("geojson", Json),
        ("rs", C("Rust")),
        ("py", C("Python")),
        ("js", C("JavaScript")),
        ("mjs", C("JavaScript")),
        ("cjs", C("JavaScript")),
        ("jsx", C("JavaScript")),
        ("ts", C("TypeScript")),
        ("tsx", C("TypeScript")),
        ("go", C("Go")),
        ("java", C("Java")),
        ("kt", C("Kotlin")),
        ("kts", C("Kotlin")),
        ("scala", C("Scala")),
        ("c", C("C")),
        ("h", C("C")),
        ("cpp", C("C++")),
        ("cc", C("C++")),
        ("cxx", C("C++")),
        ("hpp", C("C++")),
        ("hh", C("C++")),
        ("cs", C("C#")),
        ("m", C("Objective-C")),
        ("swift", C("Swift")),
        ("rb", C("Ruby")),
        ("php", C("PHP")),
        ("pl", C("Perl")),
        ("lua", C("Lua")),
        ("r", C("R")),
        ("jl", C("Julia")),
        ("hs", C("Haskell")),
        ("ml", C("OCaml")),
        ("ex", C("Elixir")),
        ("exs", C("Elixir")),
        ("erl", C("Erlang")),
        ("clj", C("Clojure")),
        ("dart", C("Dart")),
        ("zig", C("Zig")),
        ("nim", C("Nim")),
        ("sh", C("Shell")),
        ("bash", C("Shell")),
        ("zsh", C("Shell")),
        ("fish", C("Shell")),
        ("ps1", C("PowerShell")),
        ("bat", C("Batch")),
        ("sql", C("SQL")),
        ("html", C("HTML")),
        ("htm", C("HTML")),
        ("css", C("CSS")),
        ("scss", C("SCSS")),
        ("vue", C("Vue")),
        ("svelte", C("Svelte")),
        ("xml", C("XML")),
        ("svg", C("XML")),
        ("yaml", C("YAML")),
        ("yml", C("YAML")),
        ("toml", C("TOML")),
        ("ini", C("INI")),
        ("cfg", C("INI")),
        ("conf", C("config")),
        ("env", C("dotenv")),
        ("proto", C("Protobuf")),
        ("graphql", C("GraphQL")),
        ("tf", C("Terraform")),
        ("nix", C("Nix")),
        ("diff", C("diff")),
        ("patch", C("diff")),
        ("cmake", C("CMake")),
    ]
};

/// Whole file names with no extension that are code.
const NAMES: &[(&str, &str)] = &[
    ("dockerfile", "Dockerfile"),
    ("containerfile", "Dockerfile"),
    ("makefile", "Makefile"),
    ("justfile", "justfile"),
];

/// MIME types that say nothing about the content.
const GENERIC_MIMES: &[&str] = &[
    "application/octet-stream",
    "binary/octet-stream",
    "application/unknown",
    "application/x-unknown",
];

/// MIME types of the office formats read, and their extensions.
const OFFICE: &[(&str, &str, Office)] = &[
    (
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        "docx",
        Office::Word,
    ),
    (
        "application/vnd.oasis.opendocument.text",
        "odt",
        Office::OpenDocument,
    ),
];

/// The document's text, or `Ok(None)` for a type Herald does not read; under the default
/// caps but `max_chars`.
pub fn read_document(
    bytes: &[u8],
    mime: Option<&str>,
    name: Option<&str>,
    max_chars: usize,
) -> Result<Option<DocumentText>, MediaError> {
    let limits = Limits {
        max_chars,
        ..Limits::default()
    };
    decode_document(bytes, mime, name, &limits)
}

/// The document's text under `limits`, or `Ok(None)` for a type Herald does not read.
pub fn decode_document(
    bytes: &[u8],
    mime: Option<&str>,
    name: Option<&str>,
    limits: &Limits,
) -> Result<Option<DocumentText>, MediaError> {
    let max_chars = limits.max_chars;
    let mime = mime.map(essence).filter(|m| !m.is_empty());
    let mime = mime.as_deref();
    let sniffed = sniff(bytes);
    let claims_pdf = mime == Some("application/pdf") || extension(name) == Some("pdf".into());
    if claims_pdf || sniffed == Some("application/pdf") {
        return read_pdf(bytes, limits).map(Some);
    }
    let ext = extension(name);
    let office = OFFICE
        .iter()
        .find(|(m, e, _)| ext.as_deref() == Some(*e) || mime == Some(*m) || sniffed == Some(*m));
    if let Some((_, _, kind)) = office {
        let text = office_text(bytes, *kind, limits.max_unpacked_bytes)?;
        let format = match kind {
            Office::Word => DocFormat::Word,
            Office::OpenDocument => DocFormat::OpenDocument,
        };
        return Ok(Some(cut(format, &tidy_pdf_text(&text), max_chars)));
    }
    if let Some(format) = format_by_name(name).or_else(|| mime.and_then(format_by_mime)) {
        let text = decode_text(bytes)?;
        return Ok(Some(cut(format, &text, max_chars)));
    }
    let generic = mime.is_none_or(|m| GENERIC_MIMES.contains(&m));
    if !generic || sniffed.is_some() || has_nul(bytes) {
        return Ok(None);
    }
    Ok(utf8_prefix(bytes).map(|text| cut(DocFormat::Text, strip_bom(text), max_chars)))
}

/// `text/CSV; charset=utf-8` → `text/csv`.
fn essence(mime: &str) -> String {
    mime.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

fn extension(name: Option<&str>) -> Option<String> {
    let file = name?.rsplit(['/', '\\']).next()?;
    let (_, ext) = file.rsplit_once('.')?;
    (!ext.is_empty()).then(|| ext.to_ascii_lowercase())
}

fn format_by_name(name: Option<&str>) -> Option<DocFormat> {
    if let Some(ext) = extension(name) {
        if let Some((_, f)) = EXTENSIONS.iter().find(|(e, _)| *e == ext) {
            return Some(*f);
        }
    }
    let file = name?.rsplit(['/', '\\']).next()?.to_ascii_lowercase();
    NAMES
        .iter()
        .find(|(n, _)| *n == file)
        .map(|(_, language)| DocFormat::Code(language))
}

fn format_by_mime(mime: &str) -> Option<DocFormat> {
    let (kind, sub) = mime.split_once('/')?;
    let sub = sub.strip_prefix("x-").unwrap_or(sub);
    let code = |language| Some(DocFormat::Code(language));
    match sub {
        "markdown" => Some(DocFormat::Markdown),
        "csv" | "tab-separated-values" => Some(DocFormat::Csv),
        "json" | "ndjson" | "jsonl" => Some(DocFormat::Json),
        s if s.ends_with("+json") => Some(DocFormat::Json),
        "xml" => code("XML"),
        s if s.ends_with("+xml") => code("XML"),
        "yaml" => code("YAML"),
        "toml" => code("TOML"),
        "html" => code("HTML"),
        "css" => code("CSS"),
        "javascript" | "ecmascript" => code("JavaScript"),
        "typescript" => code("TypeScript"),
        "python" | "python3" => code("Python"),
        "sh" | "shellscript" => code("Shell"),
        "sql" => code("SQL"),
        "rust" | "rustsrc" => code("Rust"),
        "c" | "csrc" | "chdr" => code("C"),
        "c++" | "c++src" => code("C++"),
        "java" | "java-source" => code("Java"),
        "go" => code("Go"),
        _ if kind == "text" => Some(DocFormat::Text),
        _ => None,
    }
}

fn has_nul(bytes: &[u8]) -> bool {
    memchr::memchr(0, &bytes[..bytes.len().min(8 * 1024)]).is_some()
}

fn strip_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// A file that claims to be text, as UTF-8: UTF-8 borrowed as it is (a cut last character
/// left out), UTF-16 by its byte-order mark, else Windows-1252 (what a text file that is not
/// UTF-8 most often is). NULs without a UTF-16 mark: binary under a text name.
fn decode_text(bytes: &[u8]) -> Result<Cow<'_, str>, MediaError> {
    if let Some((encoding, bom)) = encoding_rs::Encoding::for_bom(bytes) {
        if encoding != encoding_rs::UTF_8 {
            let (text, _) = encoding.decode_without_bom_handling(&bytes[bom..]);
            return Ok(text);
        }
    }
    if has_nul(bytes) {
        return Err(MediaError::Corrupt(
            "it is named as text but holds binary data".into(),
        ));
    }
    if let Some(text) = utf8_prefix(bytes) {
        return Ok(Cow::Borrowed(strip_bom(text)));
    }
    let (text, _) = encoding_rs::WINDOWS_1252.decode_without_bom_handling(bytes);
    Ok(text)
}

/// The first `max_chars` characters of `text` (copied; the rest is only counted).
fn cut(format: DocFormat, text: &str, max_chars: usize) -> DocumentText {
    let end = text.char_indices().nth(max_chars).map(|(i, _)| i);
    let total_chars = match end {
        None => text.chars().count(),
        Some(i) => max_chars + text[i..].chars().count(),
    };
    DocumentText {
        format,
        text: text[..end.unwrap_or(text.len())].to_owned(),
        truncated: end.is_some(),
        total_chars,
    }
}

/// A PDF's text layer. An encrypted PDF (no empty user password) or one of scanned images has
/// none: `Ok` with empty text, for the caller to say so.
fn read_pdf(bytes: &[u8], limits: &Limits) -> Result<DocumentText, MediaError> {
    use pdf_extract::{Error as PdfError, OutputError};
    let max_chars = limits.max_chars;
    // A file lopdf cannot load goes on to the extractor, which says why in its own terms
    // (encrypted, or not a PDF).
    let loaded = std::panic::catch_unwind(|| pdf_extract::Document::load_mem(bytes));
    if let Ok(Ok(doc)) = loaded {
        prescan(&doc, limits)?;
    }
    let extracted = std::panic::catch_unwind(|| pdf_extract::extract_text_from_mem(bytes));
    let raw = match extracted {
        Ok(Ok(text)) => text,
        Ok(Err(OutputError::PdfError(PdfError::Decryption(_) | PdfError::InvalidPassword))) => {
            String::new()
        }
        Ok(Err(e)) => {
            let why: String = e.to_string().chars().take(200).collect();
            return Err(MediaError::Corrupt(format!("not a readable PDF ({why})")));
        }
        Err(_) => {
            return Err(MediaError::Corrupt(
                "not a readable PDF (the reader gave up on it)".into(),
            ))
        }
    };
    Ok(cut(DocFormat::Pdf, &tidy_pdf_text(&raw), max_chars))
}

/// The extractor's layout as paragraphs: trailing spaces gone, runs of blank lines as one.
fn tidy_pdf_text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut blank = 0;
    for line in raw.lines().map(str::trim_end) {
        if line.is_empty() {
            blank += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str(if blank > 0 { "\n\n" } else { "\n" });
        }
        blank = 0;
        out.push_str(line);
    }
    out
}
