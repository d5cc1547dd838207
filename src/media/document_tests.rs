//! Table tests for `media::document`: which files are read as what, what is refused, how text
//! that is not UTF-8 is decoded, and where the budget cuts. Real PDFs are read in
//! `tests/it/media_readers.rs` (written there by test-support's PDF writer).

use super::document::{read_document, DocFormat, DocumentText};
use super::MediaError;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";

fn read(bytes: &[u8], mime: Option<&str>, name: Option<&str>) -> Option<DocumentText> {
    read_document(bytes, mime, name, 1000).expect("readable")
}

fn format_of(bytes: &[u8], mime: Option<&str>, name: Option<&str>) -> Option<DocFormat> {
    read(bytes, mime, name).map(|d| d.format)
}

#[test]
fn text_like_files_by_extension_whatever_the_platform_says() {
    let octet = Some("application/octet-stream");
    let cases: &[(&str, Option<&str>, DocFormat)] = &[
        ("notes.txt", None, DocFormat::Text),
        ("README.md", octet, DocFormat::Markdown),
        ("sales.CSV", octet, DocFormat::Csv),
        ("data.json", None, DocFormat::Json),
        (
            "main.rs",
            Some("application/rls-services+xml"),
            DocFormat::Code("Rust"),
        ),
        ("app.py", Some("text/x-python"), DocFormat::Code("Python")),
        ("deploy/compose.yml", None, DocFormat::Code("YAML")),
        ("Dockerfile", None, DocFormat::Code("Dockerfile")),
        ("server.log", octet, DocFormat::Text),
    ];
    for (name, mime, want) in cases {
        assert_eq!(
            format_of(b"hello = 1\n", *mime, Some(name)),
            Some(*want),
            "{name}"
        );
    }
}

#[test]
fn text_like_files_by_mime_when_the_name_says_nothing() {
    let cases: &[(&str, DocFormat)] = &[
        ("text/plain; charset=utf-8", DocFormat::Text),
        ("text/markdown", DocFormat::Markdown),
        ("TEXT/CSV", DocFormat::Csv),
        ("application/json", DocFormat::Json),
        ("application/ld+json", DocFormat::Json),
        ("application/x-yaml", DocFormat::Code("YAML")),
        ("application/toml", DocFormat::Code("TOML")),
        ("application/xml", DocFormat::Code("XML")),
        ("text/x-rust", DocFormat::Code("Rust")),
        ("text/html", DocFormat::Code("HTML")),
    ];
    for (mime, want) in cases {
        assert_eq!(
            format_of(b"{}", Some(mime), Some("upload")),
            Some(*want),
            "{mime}"
        );
    }
}

#[test]
fn unnamed_untyped_text_is_read_by_sniffing() {
    let doc = read("Grüße aus Köln\n".as_bytes(), None, None).expect("text");
    assert_eq!(doc.format, DocFormat::Text);
    assert_eq!(doc.text, "Grüße aus Köln\n");
    assert_eq!(
        format_of(b"plain", Some("application/octet-stream"), Some("blob.bin")),
        Some(DocFormat::Text)
    );
}

#[test]
fn binary_and_unread_types_are_none() {
    assert_eq!(read(PNG, None, None), None);
    assert_eq!(read(PNG, Some("application/octet-stream"), Some("x")), None);
    assert_eq!(read(PNG, Some("image/png"), Some("photo.png")), None);
    let zip = b"PK\x03\x04\x14\0\0\0\x08\0rest";
    assert_eq!(read(zip, Some("application/zip"), Some("photos.zip")), None);
    assert_eq!(read(b"\x01\x02\0\x03", None, Some("data.bin")), None);
    // A specific type Herald does not read stays unread even when its bytes are text; any
    // `text/*` is read.
    assert_eq!(
        read(b"abc", Some("application/vnd.ms-excel"), Some("sheet.xls")),
        None
    );
    let vcard = read(b"BEGIN:VCARD", Some("text/vcard"), None);
    assert_eq!(vcard.map(|d| d.format), Some(DocFormat::Text));
}

#[test]
fn a_cut_office_file_is_corrupt() {
    let zip = b"PK\x03\x04\x14\0\0\0\x08\0rest";
    let docx = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    for (mime, name) in [(Some(docx), Some("report.docx")), (None, Some("notes.odt"))] {
        let err = read_document(zip, mime, name, 100).unwrap_err();
        assert!(
            matches!(err, MediaError::Corrupt(ref m) if m.contains("not a readable archive")),
            "{err}"
        );
    }
}

#[test]
fn binary_under_a_text_name_is_corrupt() {
    let err = read_document(PNG, Some("text/plain"), Some("notes.txt"), 100).unwrap_err();
    assert!(
        matches!(err, MediaError::Corrupt(ref m) if m.contains("binary")),
        "{err}"
    );
}

#[test]
fn text_that_is_not_utf8_is_decoded() {
    let latin1 = b"caf\xe9 cr\xe8me \x80";
    assert_eq!(
        read(latin1, None, Some("menu.txt")).unwrap().text,
        "café crème €"
    );
    let mut utf16 = vec![0xff, 0xfe];
    utf16.extend("hi ✓".encode_utf16().flat_map(u16::to_le_bytes));
    assert_eq!(read(&utf16, Some("text/plain"), None).unwrap().text, "hi ✓");
    let bom = "\u{feff}a,b\n1,2\n".as_bytes();
    assert_eq!(read(bom, None, Some("t.csv")).unwrap().text, "a,b\n1,2\n");
}

#[test]
fn a_cut_last_character_is_dropped() {
    let bytes = "ok 🚀".as_bytes();
    let doc = read(&bytes[..bytes.len() - 1], None, Some("a.txt")).unwrap();
    assert_eq!(doc.text, "ok ");
}

#[test]
fn the_budget_cuts_on_a_character_boundary() {
    let text = "ab🚀cd🚀ef";
    let doc = read_document(text.as_bytes(), None, Some("x.md"), 3)
        .unwrap()
        .unwrap();
    assert_eq!(
        doc,
        DocumentText {
            format: DocFormat::Markdown,
            text: "ab🚀".into(),
            truncated: true,
            total_chars: 8,
        }
    );
    let whole = read_document(text.as_bytes(), None, Some("x.md"), 8)
        .unwrap()
        .unwrap();
    assert!(!whole.truncated);
    assert_eq!((whole.text.as_str(), whole.total_chars), (text, 8));
    let none = read_document(text.as_bytes(), None, Some("x.md"), 0)
        .unwrap()
        .unwrap();
    assert_eq!((none.text.as_str(), none.truncated), ("", true));
}

#[test]
fn a_file_that_claims_pdf_but_does_not_parse_is_corrupt() {
    for (bytes, mime, name) in [
        (&b"%PDF-1.4\n1 0 obj garbage"[..], None, Some("scan.pdf")),
        (&b"just some text"[..], Some("application/pdf"), None),
        (&b"%PDF-1.7\n"[..], None, None),
    ] {
        let err = read_document(bytes, mime, name, 100).unwrap_err();
        assert!(
            matches!(err, MediaError::Corrupt(ref m) if m.contains("PDF")),
            "{bytes:?}: {err}"
        );
    }
}
