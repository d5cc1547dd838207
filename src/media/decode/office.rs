//! The text of an office document (.docx, .odt), inside the decode worker. Both are zip
//! archives around one XML part (`word/document.xml`, `content.xml`); a zip entry can inflate
//! a thousandfold and XML can define entities that expand exponentially, so the entry is read
//! through `take()` under what is left of `max_unpacked_bytes`, and a document type
//! declaration (where entities are defined) is refused outright: Word and LibreOffice never
//! write one. Only the five predefined entities and character references are expanded.

use std::io::Read;

use quick_xml::events::Event;

use crate::media::MediaError;

/// Which office format, by the part that holds its text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Office {
    Word,
    OpenDocument,
}

impl Office {
    fn part(self) -> &'static str {
        match self {
            Office::Word => "word/document.xml",
            Office::OpenDocument => "content.xml",
        }
    }
}

/// The document's text, one line per paragraph.
pub fn office_text(bytes: &[u8], kind: Office, max_unpacked: u64) -> Result<String, MediaError> {
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| malformed(&format!("not a readable archive: {e}")))?;
    let entry = archive.by_name(kind.part()).map_err(|e| match e {
        zip::result::ZipError::FileNotFound => malformed(&format!("it has no {}", kind.part())),
        e => malformed(&format!("its {} cannot be read: {e}", kind.part())),
    })?;
    let mut xml = Vec::new();
    entry
        .take(max_unpacked.saturating_add(1))
        .read_to_end(&mut xml)
        .map_err(|e| malformed(&format!("its archive is damaged: {e}")))?;
    if xml.len() as u64 > max_unpacked {
        return Err(MediaError::Unpacked { max: max_unpacked });
    }
    xml_text(&xml, kind)
}

/// The text of the document part: Word keeps text in `w:t` runs, OpenDocument in the
/// paragraphs and headings themselves.
fn xml_text(xml: &[u8], kind: Office) -> Result<String, MediaError> {
    let mut reader = quick_xml::Reader::from_reader(xml);
    let mut out = String::new();
    // Word: inside a `w:t`; OpenDocument: paragraphs open around the cursor.
    let mut depth = 0usize;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| malformed(&format!("its XML does not parse: {e}")))?;
        match event {
            Event::DocType(_) => {
                return Err(malformed(
                    "it declares its own XML entities, which Herald does not expand",
                ))
            }
            Event::Start(e) if opens_text(kind, e.local_name().as_ref()) => depth += 1,
            Event::End(e) => {
                let name = e.local_name();
                if opens_text(kind, name.as_ref()) {
                    depth = depth.saturating_sub(1);
                }
                if matches!(name.as_ref(), "p" | "h") {
                    out.push('\n');
                }
            }
            Event::Empty(e) => match e.local_name().as_ref() {
                "tab" => out.push('\t'),
                "br" | "cr" | "line-break" => out.push('\n'),
                "s" if kind == Office::OpenDocument => out.push(' '),
                _ => {}
            },
            Event::Text(t) if depth > 0 => out.push_str(&t.xml10_content()),
            Event::CData(t) if depth > 0 => out.push_str(&t.xml10_content()),
            Event::GeneralRef(r) if depth > 0 => {
                let c = match r.resolve_char_ref() {
                    Ok(Some(c)) => c,
                    Ok(None) => predefined(&r.xml10_content())
                        .ok_or_else(|| malformed("it uses an XML entity it never defined"))?,
                    Err(_) => return Err(malformed("it has a broken character reference")),
                };
                out.push(c);
            }
            Event::Eof => break,
            _ => {}
        }
    }
    Ok(out)
}

fn opens_text(kind: Office, local: &str) -> bool {
    match kind {
        Office::Word => local == "t",
        Office::OpenDocument => matches!(local, "p" | "h"),
    }
}

fn predefined(name: &str) -> Option<char> {
    Some(match name {
        "lt" => '<',
        "gt" => '>',
        "amp" => '&',
        "apos" => '\'',
        "quot" => '"',
        _ => return None,
    })
}

fn malformed(why: &str) -> MediaError {
    MediaError::Corrupt(format!("it is malformed ({why})"))
}
