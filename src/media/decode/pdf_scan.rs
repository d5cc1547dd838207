//! A PDF looked over before its text is extracted, inside the decode worker: pdf-extract
//! inflates every stream it meets without a cap and follows a form's `Do` by recursion, so a
//! small file can ask for gigabytes or draw itself until the stack overflows. This pass counts
//! the pages (refused past `max_pages`), inflates every FlateDecode stream into nothing with a
//! running total (refused past `max_unpacked_bytes`), and walks what each page and form draws
//! the way the extractor will (a form without its own resources uses its caller's), refusing a
//! drawing that reaches itself or nests deeper than the extractor's stack allows.
//!
//! It only reads the parsed document; the extraction still runs afterwards on the same bytes.

use std::collections::{HashMap, HashSet};
use std::io::Read;

use pdf_extract::{Dictionary, Document, Object, ObjectId, Stream};

use super::wire::Limits;
use crate::media::MediaError;

/// Drawings nested deeper than this are refused (the extractor recurses once per level).
const MAX_NESTING: usize = 48;
/// Drawing steps the walk takes before it calls the file too tangled to read.
const MAX_STEPS: usize = 100_000;

/// Refuses a document over the caps; `Ok` when extraction may go ahead.
pub fn prescan(doc: &Document, limits: &Limits) -> Result<(), MediaError> {
    let pages = doc.get_pages();
    let count = pages.len() as u64;
    if count > limits.max_pages {
        return Err(MediaError::TooManyPages {
            pages: count,
            max: limits.max_pages,
        });
    }
    let mut left = limits.max_unpacked_bytes;
    for object in doc.objects.values() {
        if let Object::Stream(stream) = object {
            if is_flate(stream) {
                let n = inflated_len(&stream.content, left);
                if n > left {
                    return Err(MediaError::Unpacked {
                        max: limits.max_unpacked_bytes,
                    });
                }
                left -= n;
            }
        }
    }
    Walk::new(doc, limits.max_unpacked_bytes).pages(pages.values().copied())
}

fn is_flate(stream: &Stream) -> bool {
    stream
        .filters()
        .ok()
        .and_then(|f| f.first().copied())
        .is_some_and(|f| f == b"FlateDecode" || f == b"Fl")
}

/// Bytes the zlib stream inflates to, read up to `cap + 1` (a broken stream counts what
/// decoded before the break).
fn inflated_len(compressed: &[u8], cap: u64) -> u64 {
    let mut reader = flate2::read::ZlibDecoder::new(compressed).take(cap.saturating_add(1));
    let mut buf = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    while let Ok(n) = reader.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n as u64;
    }
    total
}

/// A stream's content as the extractor will see it, at most `cap` bytes.
fn content(stream: &Stream, cap: u64) -> Vec<u8> {
    if is_flate(stream) {
        let mut out = Vec::new();
        let mut reader = flate2::read::ZlibDecoder::new(&stream.content[..]).take(cap);
        let _ = reader.read_to_end(&mut out);
        return out;
    }
    if stream.filters().is_err() {
        return stream.content.clone();
    }
    stream.decompressed_content().unwrap_or_default()
}

/// A drawing as the extractor runs it: the stream, and the resources its names resolve in.
type State = (ObjectId, ObjectId);

struct Walk<'a> {
    doc: &'a Document,
    cap: u64,
    /// Resource dictionaries met so far, by the object that holds them.
    resources: HashMap<ObjectId, &'a Dictionary>,
    /// The names each stream draws with `Do`.
    drawn: HashMap<ObjectId, Vec<Vec<u8>>>,
    done: HashSet<State>,
    steps: usize,
}

impl<'a> Walk<'a> {
    fn new(doc: &'a Document, cap: u64) -> Walk<'a> {
        Walk {
            doc,
            cap,
            resources: HashMap::new(),
            drawn: HashMap::new(),
            done: HashSet::new(),
            steps: 0,
        }
    }

    fn pages(mut self, pages: impl Iterator<Item = ObjectId>) -> Result<(), MediaError> {
        for page in pages {
            let Some(res) = self.page_resources(page) else {
                continue;
            };
            let content = self.doc.get_page_content(page).unwrap_or_default();
            for name in drawn_names(&content) {
                if let Some(target) = self.resolve(res, &name) {
                    self.from(target)?;
                }
            }
        }
        Ok(())
    }

    /// The page's resources, inherited up the page tree as the extractor does.
    fn page_resources(&mut self, page: ObjectId) -> Option<ObjectId> {
        let mut node = page;
        for _ in 0..64 {
            let dict = self.doc.get_dictionary(node).ok()?;
            if let Some(key) = self.own_resources(node, dict) {
                return Some(key);
            }
            node = dict.get(b"Parent").and_then(Object::as_reference).ok()?;
        }
        None
    }

    /// The resources `dict` (held by `owner`) names itself, remembered under their key.
    fn own_resources(&mut self, owner: ObjectId, dict: &'a Dictionary) -> Option<ObjectId> {
        let (key, res) = match dict.get(b"Resources").ok()? {
            Object::Reference(id) => (*id, self.doc.get_dictionary(*id).ok()?),
            Object::Dictionary(d) => (owner, d),
            _ => return None,
        };
        self.resources.insert(key, res);
        Some(key)
    }

    /// What drawing `name` under the resources `res` runs next.
    fn resolve(&mut self, res: ObjectId, name: &[u8]) -> Option<State> {
        let dict = *self.resources.get(&res)?;
        let xobjects = dict.get(b"XObject").ok()?;
        let xobjects = self.doc.dereference(xobjects).ok()?.1.as_dict().ok()?;
        let id = xobjects.get(name).and_then(Object::as_reference).ok()?;
        let stream = self.doc.get_object(id).and_then(Object::as_stream).ok()?;
        let own = self.own_resources(id, &stream.dict);
        Some((id, own.unwrap_or(res)))
    }

    fn names(&mut self, id: ObjectId) -> Vec<Vec<u8>> {
        if let Some(names) = self.drawn.get(&id) {
            return names.clone();
        }
        let names = match self.doc.get_object(id).and_then(Object::as_stream) {
            Ok(stream) => drawn_names(&content(stream, self.cap)),
            Err(_) => Vec::new(),
        };
        self.drawn.insert(id, names.clone());
        names
    }

    /// Depth-first from `start` on an explicit stack: a state met again on the current path
    /// is a drawing that draws itself.
    fn from(&mut self, start: State) -> Result<(), MediaError> {
        if self.done.contains(&start) {
            return Ok(());
        }
        let mut path: Vec<(State, Vec<Vec<u8>>)> = vec![(start, self.names(start.0))];
        let mut on_path: HashSet<State> = HashSet::from([start]);
        while let Some((state, pending)) = path.last_mut() {
            let state = *state;
            let Some(name) = pending.pop() else {
                path.pop();
                on_path.remove(&state);
                self.done.insert(state);
                continue;
            };
            self.steps += 1;
            if self.steps > MAX_STEPS {
                return Err(malformed("its drawings are too tangled to follow"));
            }
            let Some(next) = self.resolve(state.1, &name) else {
                continue;
            };
            if on_path.contains(&next) {
                return Err(malformed("a form in it draws itself"));
            }
            if self.done.contains(&next) {
                continue;
            }
            if path.len() >= MAX_NESTING {
                return Err(malformed("its drawings nest too deeply"));
            }
            on_path.insert(next);
            let names = self.names(next.0);
            path.push((next, names));
        }
        Ok(())
    }
}

fn malformed(why: &str) -> MediaError {
    MediaError::Corrupt(format!("it is malformed ({why})"))
}

fn is_delimiter(c: u8) -> bool {
    c.is_ascii_whitespace() || b"()<>[]{}/%".contains(&c)
}

/// The names a content stream draws: each `/Name Do` (a name inside a string counts too,
/// which can only make the walk stricter).
pub fn drawn_names(content: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut i = 0;
    while let Some(p) = memchr::memchr(b'/', &content[i..]) {
        let start = i + p + 1;
        let mut end = start;
        while end < content.len() && !is_delimiter(content[end]) {
            end += 1;
        }
        let mut j = end;
        while j < content.len() && content[j].is_ascii_whitespace() {
            j += 1;
        }
        let rest = &content[j..];
        if end > start
            && rest.starts_with(b"Do")
            && rest.get(2).is_none_or(|c| is_delimiter(*c))
            && !out.iter().any(|n| n == &content[start..end])
        {
            out.push(content[start..end].to_vec());
        }
        i = end;
    }
    out
}
