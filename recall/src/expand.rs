//! Opening entries again: one entry, a range, or a summary's citation, rendered as the
//! original text under a token cap, with a cursor for the rest. Reads the transcript only.

use ctxhost_transcript::Transcript;
use ctxhost_transcript::tokens::estimate_text;

use crate::error::RecallError;
use crate::text;

/// Tokens an expansion returns when the caller does not say, and the bounds it may ask for.
pub(crate) const DEFAULT_MAX_TOKENS: u32 = 2_000;
pub(crate) const MIN_MAX_TOKENS: u32 = 100;
pub(crate) const MAX_MAX_TOKENS: u32 = 16_000;

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExpandTarget {
    /// One entry by id, or a citation as summaries write it: `#1a2b3c4d`, `[#1a2b3c4d]`,
    /// `#1a2b3c4d..#5e6f7a8b` (a range).
    Entry(String),
    /// Entries from `from` to `to` (file order, both included).
    Range {
        /// The first entry's id.
        from: String,
        /// The last entry's id.
        to: String,
    },
    /// Where a previous expansion stopped (its [`Expansion::next`]).
    Cursor(String),
}

/// One expansion asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpandRequest {
    /// What to open.
    pub target: ExpandTarget,
    /// Estimated tokens the text may use (100..=16,000; `None` is 2,000).
    pub max_tokens: Option<u32>,
}

/// The original text of the entries asked for, as far as the cap allowed.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Expansion {
    /// Each entry's heading line and text, in file order.
    pub text: String,
    /// Ids of the entries shown (whole or in part).
    pub entries: Vec<String>,
    /// Estimated tokens of `text`.
    pub tokens: u32,
    /// A cursor to pass back for what did not fit; `None` when everything was shown.
    pub next: Option<String>,
}

/// Where an expansion starts and ends: positions in the file, and a character offset into the
/// first entry's body when a cursor resumes inside it.
struct Span {
    first: usize,
    offset: usize,
    last: usize,
}

/// Opens what `request` names in `transcript`.
pub fn expand(transcript: &Transcript, request: &ExpandRequest) -> Result<Expansion, RecallError> {
    let max_tokens = match request.max_tokens {
        None => DEFAULT_MAX_TOKENS,
        Some(n @ MIN_MAX_TOKENS..=MAX_MAX_TOKENS) => n,
        Some(n) => {
            return Err(RecallError::invalid(format!(
                "maxTokens is {n}; it must be between {MIN_MAX_TOKENS} and {MAX_MAX_TOKENS}"
            )));
        }
    };
    let span = span(transcript, &request.target)?;
    Ok(render(transcript, &span, max_tokens))
}

fn span(transcript: &Transcript, target: &ExpandTarget) -> Result<Span, RecallError> {
    let position = |id: &str, field: &str| {
        transcript.index_of(id).ok_or_else(|| {
            RecallError::invalid(format!(
                "{field} {id:?} is not an entry of this session (ids come from ctx_search hits \
                 or a summary's citations)"
            ))
        })
    };
    let (first, offset, last) = match target {
        ExpandTarget::Entry(citation) => match parse_citation(citation) {
            Some((from, None)) => {
                let at = position(from, "id")?;
                (at, 0, at)
            }
            Some((from, Some(to))) => (position(from, "id")?, 0, position(to, "id")?),
            None => {
                return Err(RecallError::invalid(format!(
                    "id {citation:?} is not an entry id or a citation like #1a2b3c4d"
                )));
            }
        },
        ExpandTarget::Range { from, to } => (position(from, "from")?, 0, position(to, "to")?),
        ExpandTarget::Cursor(cursor) => {
            let bad =
                || RecallError::invalid(format!("cursor {cursor:?} is not one an expansion gave"));
            let (at, rest) = cursor.split_once('@').ok_or_else(bad)?;
            let (offset, to) = rest.split_once('~').ok_or_else(bad)?;
            let offset: usize = offset.parse().map_err(|_| bad())?;
            (position(at, "cursor")?, offset, position(to, "cursor")?)
        }
    };
    if last < first {
        return Err(RecallError::invalid(format!(
            "the range runs backwards: {:?} comes after {:?} in the session",
            transcript.entries()[first].id(),
            transcript.entries()[last].id()
        )));
    }
    Ok(Span {
        first,
        offset,
        last,
    })
}

/// `1a2b3c4d`, `#1a2b3c4d`, `[#1a2b3c4d]`, `#a..#b`, `[#a..#b]`: the ids it names.
fn parse_citation(citation: &str) -> Option<(&str, Option<&str>)> {
    let inner = citation
        .trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim();
    fn strip(s: &str) -> Option<&str> {
        let s = s.trim().trim_start_matches('#');
        (!s.is_empty() && !s.contains(char::is_whitespace)).then_some(s)
    }
    match inner.split_once("..") {
        Some((from, to)) => Some((strip(from)?, Some(strip(to)?))),
        None => Some((strip(inner)?, None)),
    }
}

fn render(transcript: &Transcript, span: &Span, max_tokens: u32) -> Expansion {
    let entries = transcript.entries();
    let last_id = entries[span.last].id();
    let mut out = Expansion {
        text: String::new(),
        entries: Vec::new(),
        tokens: 0,
        next: None,
    };
    for (position, entry) in entries
        .iter()
        .enumerate()
        .take(span.last + 1)
        .skip(span.first)
    {
        let Some(view) = entry.view() else { continue };
        let heading = text::heading(entry, &view);
        let body = text::body(&view);
        let offset = if position == span.first {
            text::floor_char_boundary(&body, span.offset)
        } else {
            0
        };
        let rest = &body[offset..];
        let piece = format!("{heading}\n{rest}\n\n");
        let cost = estimate_text(&piece);
        if out.tokens + cost <= max_tokens {
            out.tokens += cost;
            out.text.push_str(&piece);
            out.entries.push(entry.id().to_string());
            continue;
        }
        if !out.entries.is_empty() {
            out.next = Some(cursor(entry.id(), 0, last_id));
            break;
        }
        // The first entry alone is over the cap: show what fits of it and resume inside it.
        let room = (max_tokens.saturating_sub(estimate_text(&heading) + 16) as usize) * 4;
        let cut = offset + text::floor_char_boundary(rest, room);
        out.text = format!("{heading}\n{}\n… (cut here)\n", &body[offset..cut]);
        out.tokens = estimate_text(&out.text);
        out.entries.push(entry.id().to_string());
        out.next = Some(cursor(entry.id(), cut, last_id));
        break;
    }
    out
}

fn cursor(at: &str, offset: usize, last: &str) -> String {
    format!("{at}@{offset}~{last}")
}

#[cfg(test)]
mod tests {
    use ctxhost_transcript::Transcript;
    use serde_json::json;

    use super::*;

    const TS: &str = "2026-11-25T10:00:00.000Z";

    fn session(sizes: &[usize]) -> Transcript {
        let mut t = Transcript::new("s", "/", TS);
        for (i, size) in sizes.iter().enumerate() {
            let text = format!("message {i} {}", "x".repeat(*size));
            t.append_message(&json!({"role": "user", "content": text}), TS)
                .unwrap();
        }
        t
    }

    fn request(target: ExpandTarget, max_tokens: Option<u32>) -> ExpandRequest {
        ExpandRequest { target, max_tokens }
    }

    #[test]
    fn an_entry_a_citation_and_a_range_open_their_text() {
        let t = session(&[10, 10, 10]);
        let [a, b, c] = [0, 1, 2].map(|i| t.entries()[i].id().to_string());
        let one = expand(&t, &request(ExpandTarget::Entry(format!("[#{b}]")), None)).unwrap();
        assert_eq!(one.entries, std::slice::from_ref(&b));
        assert!(one.text.contains("message 1 xxxxxxxxxx"), "{}", one.text);
        assert!(
            one.text.starts_with(&format!("[entry {b} · user")),
            "{}",
            one.text
        );
        assert_eq!(one.next, None);

        let cited = expand(
            &t,
            &request(ExpandTarget::Entry(format!("#{a}..#{c}")), None),
        )
        .unwrap();
        assert_eq!(cited.entries, [a.clone(), b.clone(), c.clone()]);
        let range = expand(&t, &request(ExpandTarget::Range { from: a, to: c }, None)).unwrap();
        assert_eq!(range, cited);
    }

    #[test]
    fn the_cap_stops_between_entries_and_the_cursor_resumes() {
        let t = session(&[1_000, 1_000, 1_000]);
        let [a, b, c] = [0, 1, 2].map(|i| t.entries()[i].id().to_string());
        let first = expand(
            &t,
            &request(
                ExpandTarget::Range {
                    from: a,
                    to: c.clone(),
                },
                Some(600),
            ),
        )
        .unwrap();
        assert_eq!(first.entries.len(), 2);
        assert!(first.tokens <= 600);
        let next = first.next.clone().unwrap();
        assert_eq!(next, format!("{c}@0~{c}"));
        let rest = expand(&t, &request(ExpandTarget::Cursor(next), Some(600))).unwrap();
        assert_eq!(rest.entries, [c]);
        assert_eq!(rest.next, None);
        let _ = b;
    }

    #[test]
    fn an_entry_over_the_cap_is_cut_and_resumed_inside() {
        let t = session(&[5_000]);
        let a = t.entries()[0].id().to_string();
        let first = expand(&t, &request(ExpandTarget::Entry(a.clone()), Some(200))).unwrap();
        assert!(first.tokens <= 200, "{}", first.tokens);
        assert!(first.text.contains("(cut here)"));
        let mut seen = first.text.matches('x').count();
        let mut next = first.next;
        while let Some(cursor) = next {
            let more = expand(&t, &request(ExpandTarget::Cursor(cursor), Some(16_000))).unwrap();
            seen += more.text.matches('x').count();
            next = more.next;
        }
        assert_eq!(
            seen, 5_000,
            "every character is shown exactly once across the pieces"
        );
    }

    #[test]
    fn bad_targets_name_the_problem() {
        let t = session(&[1, 1]);
        let [a, b] = [0, 1].map(|i| t.entries()[i].id().to_string());
        let err = |target| expand(&t, &request(target, None)).unwrap_err().to_string();
        assert!(err(ExpandTarget::Entry("nope".into())).contains("id \"nope\" is not an entry"));
        assert!(err(ExpandTarget::Entry("  ".into())).contains("not an entry id or a citation"));
        assert!(err(ExpandTarget::Range { from: b, to: a }).contains("runs backwards"));
        assert!(err(ExpandTarget::Cursor("zzz".into())).contains("cursor"));
        let too_big = expand(&t, &request(ExpandTarget::Entry("x".into()), Some(50_000)));
        assert!(
            too_big
                .unwrap_err()
                .to_string()
                .contains("maxTokens is 50000")
        );
    }
}
