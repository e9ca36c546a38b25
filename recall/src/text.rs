//! An entry's text as recall sees it: what is indexed, the snippet a hit shows, and the
//! rendering `ctx_expand` hands back.

use ctxhost_transcript::time::format_iso_ms;
use ctxhost_transcript::{Entry, MessageView};

/// Indexed text of one entry at most (a bigger tool output is indexed up to here, and is
/// still opened whole by `ctx_expand`).
const MAX_INDEXED_BYTES: usize = 1 << 20;
/// Characters of a snippet before and after the first match.
const SNIPPET_BEFORE: usize = 60;
const SNIPPET_AFTER: usize = 160;

/// The text of an entry that a search looks in: the message's text, and for an assistant its
/// tool calls (name and arguments), for a tool result its tool's name.
pub(crate) fn searchable(view: &MessageView) -> String {
    let mut text = String::with_capacity(view.text.len() + 64);
    if let Some(tool) = &view.tool_name {
        text.push_str(tool);
        text.push('\n');
    }
    text.push_str(&view.text);
    for call in &view.tool_calls {
        text.push('\n');
        text.push_str(&call.name);
        text.push(' ');
        text.push_str(&call.arguments);
    }
    if text.len() > MAX_INDEXED_BYTES {
        let cut = floor_char_boundary(&text, MAX_INDEXED_BYTES);
        text.truncate(cut);
    }
    text
}

/// What the index holds for an entry: its [`searchable`] text, then the parts of each
/// mixed-case identifier (`AssembleTurn` → `Assemble Turn`, `maxRetries` → `max Retries`), so
/// an agent remembering one part of a name finds it. The tokenizer already splits paths and
/// snake_case at their punctuation; only case changes need spelling out.
pub(crate) fn indexed(view: &MessageView) -> String {
    let mut text = searchable(view);
    let parts = identifier_parts(&text);
    if !parts.is_empty() && text.len() + parts.len() < MAX_INDEXED_BYTES {
        text.push('\n');
        text.push_str(&parts);
    }
    text
}

/// The case-change parts of every mixed-case word of `text`, space-separated.
fn identifier_parts(text: &str) -> String {
    let mut parts = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let chars: Vec<char> = word.chars().collect();
        // A part starts at an upper-case letter after a lower-case letter or a digit, and at
        // the last capital of a run followed by lower case (`HTTPServer` → `HTTP Server`).
        let starts: Vec<usize> = (1..chars.len())
            .filter(|&i| {
                let (before, here) = (chars[i - 1], chars[i]);
                here.is_uppercase()
                    && (before.is_lowercase()
                        || before.is_ascii_digit()
                        || (before.is_uppercase()
                            && chars.get(i + 1).is_some_and(|c| c.is_lowercase())))
            })
            .collect();
        if starts.is_empty() {
            continue;
        }
        let mut from = 0;
        for start in starts.into_iter().chain([chars.len()]) {
            parts.extend(&chars[from..start]);
            parts.push(' ');
            from = start;
        }
    }
    parts
}

/// A short, one-line piece of `text` around the first of `terms` it contains (the start of the
/// text when none is found literally, as a stemmed match can be).
pub(crate) fn snippet(text: &str, terms: &[String]) -> String {
    let lower = text.to_lowercase();
    // Lower-casing can change byte lengths; only use a position that maps back safely.
    let found = if lower.len() == text.len() {
        terms
            .iter()
            .filter_map(|t| find_word_start(&lower, t))
            .min()
    } else {
        None
    };
    let at = found.unwrap_or(0);
    let start = back_chars(text, at, SNIPPET_BEFORE);
    let end = forward_chars(text, at, SNIPPET_AFTER);
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&collapse_whitespace(&text[start..end]));
    if end < text.len() {
        out.push('…');
    }
    out
}

/// Where `term` (or, for a stemmed term, its first five characters) first occurs.
fn find_word_start(lower: &str, term: &str) -> Option<usize> {
    lower.find(term).or_else(|| {
        let stem: String = term.chars().take(5).collect();
        (stem.chars().count() >= 4)
            .then(|| lower.find(&stem))
            .flatten()
    })
}

fn back_chars(text: &str, at: usize, n: usize) -> usize {
    text[..at]
        .char_indices()
        .rev()
        .nth(n.saturating_sub(1))
        .map_or(0, |(i, _)| i)
}

fn forward_chars(text: &str, at: usize, n: usize) -> usize {
    text[at..]
        .char_indices()
        .nth(n)
        .map_or(text.len(), |(i, _)| at + i)
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn floor_char_boundary(text: &str, index: usize) -> usize {
    if index >= text.len() {
        return text.len();
    }
    (0..=index)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0)
}

/// The line that heads an entry in an expansion: id, role (and tool), time.
pub(crate) fn heading(entry: &Entry, view: &MessageView) -> String {
    let mut line = format!("[entry {} · {}", entry.id(), view.role.as_str());
    if let Some(tool) = &view.tool_name {
        line.push(' ');
        line.push_str(tool);
        if view.is_error {
            line.push_str(" · error");
        }
    }
    if let Some(ms) = entry.timestamp() {
        line.push_str(" · ");
        line.push_str(&format_iso_ms(ms));
    }
    line.push(']');
    line
}

/// The body of an entry in an expansion: its text, then each tool call on a line of its own.
pub(crate) fn body(view: &MessageView) -> String {
    let mut body = view.text.clone();
    for call in &view.tool_calls {
        if !body.is_empty() {
            body.push('\n');
        }
        body.push_str(&format!("→ {}({})", call.name, call.arguments));
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_case_identifiers_are_split_into_their_parts() {
        assert_eq!(
            identifier_parts("call AssembleTurn, maxRetries and HTTPServer; plain words"),
            "Assemble Turn max Retries HTTP Server "
        );
        assert_eq!(identifier_parts("snake_case src/session/turn.rs"), "");
    }

    #[test]
    fn snippets_center_on_the_first_match_on_one_line() {
        let text = format!(
            "{}\n\nthe build failed: TypeError at line 3\n{}",
            "a ".repeat(100),
            "b ".repeat(200)
        );
        let s = snippet(&text, &["typeerror".into()]);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("the build failed: TypeError at line 3"), "{s}");
        assert!(!s.contains('\n'), "{s}");
    }

    #[test]
    fn a_stemmed_match_falls_back_to_its_stem_or_the_start() {
        let s = snippet("we were compacting the session", &["compaction".into()]);
        assert!(s.contains("compacting"), "{s}");
        assert_eq!(snippet("short", &["zzz".into()]), "short");
    }

    #[test]
    fn char_boundaries_are_respected() {
        let text = "é".repeat(10);
        assert_eq!(floor_char_boundary(&text, 3), 2);
        let s = snippet(&"ü".repeat(500), &["x".into()]);
        assert!(s.ends_with('…'));
    }
}
