//! Real PDFs for the document tests and the media benchmark, written with `lopdf` (as
//! re-exported by `pdf-extract`, the reader Herald uses): one page per string, each line of it
//! a line of Helvetica text, content streams compressed like a real writer's.

use pdf_extract::content::{Content, Operation};
use pdf_extract::{dictionary, Document, EncryptionState, EncryptionVersion, Object, Stream};

/// A PDF whose pages show `pages` (lines split on `\n`; ASCII keeps the standard encoding).
pub fn text_pdf(pages: &[String]) -> Vec<u8> {
    let mut doc = build(pages);
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("write pdf");
    out
}

/// A PDF with one page and no text at all (what a scan without OCR looks like to a reader).
pub fn empty_page_pdf() -> Vec<u8> {
    text_pdf(&[String::new()])
}

/// `text_pdf` encrypted with a user password: nobody without it reads the text.
pub fn encrypted_pdf(pages: &[String], user_password: &str) -> Vec<u8> {
    let mut doc = build(pages);
    doc.trailer.set(
        "ID",
        Object::Array(vec![
            Object::string_literal(b"0123456789abcdef".to_vec()),
            Object::string_literal(b"0123456789abcdef".to_vec()),
        ]),
    );
    let version = EncryptionVersion::V2 {
        document: &doc,
        owner_password: "owner-secret",
        user_password,
        key_length: 128,
        permissions: Default::default(),
    };
    let state = EncryptionState::try_from(version).expect("encryption state");
    doc.encrypt(&state).expect("encrypt");
    let mut out = Vec::new();
    doc.save_to(&mut out).expect("write pdf");
    out
}

fn build(pages: &[String]) -> Document {
    let mut doc = Document::with_version("1.5");
    let pages_id = doc.new_object_id();
    let font_id = doc.add_object(dictionary! {
        "Type" => "Font",
        "Subtype" => "Type1",
        "BaseFont" => "Helvetica",
        "Encoding" => "WinAnsiEncoding",
    });
    let resources_id = doc.add_object(dictionary! {
        "Font" => dictionary! { "F1" => font_id },
    });
    let mut kids = Vec::with_capacity(pages.len());
    for page in pages {
        let mut ops = vec![
            Operation::new("BT", vec![]),
            Operation::new("Tf", vec!["F1".into(), 11.into()]),
            Operation::new("TL", vec![14.into()]),
            Operation::new("Td", vec![50.into(), 800.into()]),
        ];
        for line in page.lines() {
            ops.push(Operation::new("Tj", vec![Object::string_literal(line)]));
            ops.push(Operation::new("T*", vec![]));
        }
        ops.push(Operation::new("ET", vec![]));
        let content = Content { operations: ops };
        let mut stream = Stream::new(dictionary! {}, content.encode().expect("encode page"));
        let _ = stream.compress();
        let content_id = doc.add_object(stream);
        let page_id = doc.add_object(dictionary! {
            "Type" => "Page",
            "Parent" => pages_id,
            "Contents" => content_id,
        });
        kids.push(page_id.into());
    }
    let count = kids.len() as i64;
    doc.objects.insert(
        pages_id,
        Object::Dictionary(dictionary! {
            "Type" => "Pages",
            "Kids" => kids,
            "Count" => count,
            "Resources" => resources_id,
            "MediaBox" => vec![0.into(), 0.into(), 595.into(), 842.into()],
        }),
    );
    let catalog_id = doc.add_object(dictionary! {
        "Type" => "Catalog",
        "Pages" => pages_id,
    });
    doc.trailer.set("Root", catalog_id);
    doc
}
