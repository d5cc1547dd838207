//! What a file is from its first bytes, not from what the platform said: a Telegram document
//! sent as `application/octet-stream`, a Discord attachment without a `content_type`, a file
//! whose name lies.
//!
//! Magic bytes come from the `infer` crate's signature table; `is_text` decides whether bytes
//! with no recognised signature can be read as text.

/// How many leading bytes `is_text` searches for a NUL (binary formats have one early).
const NUL_WINDOW: usize = 8 * 1024;

/// The MIME type the bytes' signature names (PNG, JPEG, GIF, WEBP, PDF, OGG, MP3, WAV,
/// MP4/M4A, ZIP and the rest of `infer`'s table), or `None` when no signature matches (text,
/// or a format the table does not know).
///
/// An Ogg file is `audio/ogg` whatever codec it holds (Telegram voice notes are Ogg Opus):
/// the container is what a speech-to-text endpoint and a file name need.
pub fn sniff(bytes: &[u8]) -> Option<&'static str> {
    let mime = infer::get(bytes)?.mime_type();
    Some(match mime {
        "audio/opus" => "audio/ogg",
        other => other,
    })
}

/// Whether the bytes read as text: valid UTF-8 (a last character cut off by a size limit is
/// allowed) with no NUL in the first 8 KiB. An empty file is text.
pub fn is_text(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(NUL_WINDOW)];
    if memchr::memchr(0, head).is_some() {
        return false;
    }
    utf8_prefix(bytes).is_some()
}

/// The bytes as `&str` when they are UTF-8 but for at most one cut character at the end
/// (which is left out).
pub(crate) fn utf8_prefix(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        // `error_len() == None`: the input ended inside a character, nothing invalid before.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_name_the_common_formats() {
        let cases: &[(&[u8], &str)] = &[
            (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", "image/png"),
            (b"\xff\xd8\xff\xe0\0\x10JFIF\0", "image/jpeg"),
            (b"GIF89a\x01\0\x01\0", "image/gif"),
            (b"RIFF\x24\0\0\0WEBPVP8 ", "image/webp"),
            (b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "application/pdf"),
            (b"ID3\x04\0\0\0\0\0\0", "audio/mpeg"),
            (b"RIFF\x24\0\0\0WAVEfmt ", "audio/x-wav"),
            (b"\0\0\0\x20ftypM4A \0\0\0\0", "audio/m4a"),
            (b"\0\0\0\x18ftypmp42\0\0\0\0", "video/mp4"),
            (b"PK\x03\x04\x14\0\0\0\x08\0", "application/zip"),
        ];
        for (bytes, mime) in cases {
            assert_eq!(sniff(bytes), Some(*mime), "{bytes:?}");
        }
    }

    #[test]
    fn an_ogg_opus_voice_note_is_audio_ogg() {
        let mut page = b"OggS\0\x02\0\0\0\0\0\0\0\0".to_vec();
        page.extend_from_slice(&[0; 14]);
        page.extend_from_slice(b"OpusHead\x01\x01");
        assert_eq!(sniff(&page), Some("audio/ogg"));
        let mut vorbis = b"OggS\0\x02".to_vec();
        vorbis.extend_from_slice(&[0; 22]);
        vorbis.extend_from_slice(b"\x01vorbis");
        assert_eq!(sniff(&vorbis), Some("audio/ogg"));
    }

    #[test]
    fn text_has_no_signature() {
        assert_eq!(sniff(b"hello, world\n"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn text_is_utf8_without_nul() {
        assert!(is_text(b"plain ascii\n"));
        assert!(is_text("Grüße, 東京 🚀".as_bytes()));
        assert!(is_text(b""));
        assert!(!is_text(b"abc\0def"));
        assert!(!is_text(b"caf\xe9 latin-1"));
        assert!(!is_text(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"));
    }

    #[test]
    fn a_cut_last_character_is_allowed_a_broken_middle_is_not() {
        let s = "ab🚀".as_bytes();
        for cut in 3..s.len() {
            assert!(is_text(&s[..cut]), "cut at {cut}");
        }
        assert_eq!(utf8_prefix(&s[..4]), Some("ab"));
        assert!(!is_text(b"a\xf0\x9f b"));
    }

    #[test]
    fn a_nul_past_the_window_does_not_count() {
        let mut bytes = vec![b'a'; NUL_WINDOW];
        bytes.push(0);
        assert!(is_text(&bytes));
        bytes[NUL_WINDOW - 1] = 0;
        assert!(!is_text(&bytes));
    }
}
