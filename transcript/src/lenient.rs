//! Lone UTF-16 surrogate escapes, read the way every other reader reads them.
//!
//! Node's `JSON.stringify` writes a string cut inside an emoji as `"\ud83d"` (half of a
//! surrogate pair) and Node reads it back; Rust strings cannot hold half a character, so
//! serde refuses the whole line and with it the file. Every reader of a transcript (a full
//! load, `status`'s backwards scan, a runtime's commit through `serve`) first replaces each
//! lone surrogate escape by `\ufffd`, the replacement character, as Go's and Python's
//! `errors="replace"` readers do. The two escapes are both six ASCII bytes, so the text keeps
//! its length, every byte offset and its UTF-8 validity; valid pairs are left alone.

/// Whether `bytes` may hold a surrogate escape; most text has none, and one fast search for
/// `\u` says so (a pass over the text per spelling, `\ud` and `\uD`, cost twice that).
fn may_have_surrogates(bytes: &[u8]) -> bool {
    memchr::memmem::find_iter(bytes, b"\\u")
        .any(|at| matches!(bytes.get(at + 2), Some(b'd' | b'D')))
}

/// Replaces every lone surrogate escape in `bytes` (JSON text) by `\ufffd`, in place; returns
/// how many were replaced.
pub(crate) fn replace_lone_surrogates(bytes: &mut [u8]) -> usize {
    if !may_have_surrogates(bytes) {
        return 0;
    }
    let mut replaced = 0;
    let mut at = 0;
    // Walks escape by escape from the start, so `\\ud83d` (an escaped backslash, then text)
    // is never taken for an escape.
    while let Some(found) = memchr::memchr(b'\\', &bytes[at..]) {
        let (next, lone) = pass_escape(bytes, at + found);
        replaced += usize::from(lone);
        at = next;
    }
    replaced
}

/// The escape at `p` (a backslash) passed, a lone surrogate replaced: where the text after it
/// starts, and whether it was one.
#[inline]
fn pass_escape(bytes: &mut [u8], p: usize) -> (usize, bool) {
    if bytes.get(p + 1) != Some(&b'u') {
        return (p + 2, false);
    }
    match unit_at(bytes, p) {
        Some(0xD800..=0xDBFF) if matches!(unit_at(bytes, p + 6), Some(0xDC00..=0xDFFF)) => {
            (p + 12, false)
        }
        Some(0xD800..=0xDFFF) => {
            bytes[p + 2..p + 6].copy_from_slice(b"fffd");
            (p + 6, true)
        }
        _ => (p + 2, false),
    }
}

/// The UTF-16 unit of a `\uXXXX` escape starting at `p`.
fn unit_at(bytes: &[u8], p: usize) -> Option<u16> {
    if bytes.get(p..p + 2)? != b"\\u" {
        return None;
    }
    let hex = std::str::from_utf8(bytes.get(p + 2..p + 6)?).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

/// `text` with its lone surrogate escapes replaced (see the module).
pub(crate) fn text(text: String) -> String {
    if !may_have_surrogates(text.as_bytes()) {
        return text;
    }
    let mut bytes = text.into_bytes();
    replace_lone_surrogates(&mut bytes);
    String::from_utf8(bytes).expect("ASCII replaced by ASCII keeps UTF-8")
}

/// `text` with its lone surrogate escapes replaced, copied only when it has one.
pub(crate) fn str(text: &str) -> std::borrow::Cow<'_, str> {
    if !may_have_surrogates(text.as_bytes()) {
        return text.into();
    }
    self::text(text.to_string()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replaced(text: &str) -> String {
        self::text(text.to_string())
    }

    #[test]
    fn lone_halves_become_the_replacement_character_and_pairs_stay() {
        assert_eq!(replaced(r#"{"a":"x\ud83d"}"#), r#"{"a":"x\ufffd"}"#);
        assert_eq!(replaced(r#"{"a":"\uDE00y"}"#), r#"{"a":"\ufffdy"}"#);
        assert_eq!(replaced(r#""\ud83d\ude00""#), r#""\ud83d\ude00""#);
        // A high half followed by another high half: both are alone.
        assert_eq!(replaced(r#""\ud83d\ud83d""#), r#""\ufffd\ufffd""#);
        // An escaped backslash followed by the letters is text, not an escape.
        assert_eq!(replaced(r#""\\ud83d""#), r#""\\ud83d""#);
        assert_eq!(replaced(r#""\\\ud83d""#), r#""\\\ufffd""#);
        // Cut short at the end of the text: left for the parser to report.
        assert_eq!(replaced(r#""\ud8"#), r#""\ud8"#);
        let value: serde_json::Value = serde_json::from_str(&replaced(r#""a\ud83d""#)).unwrap();
        assert_eq!(value, "a\u{fffd}");
    }
}
