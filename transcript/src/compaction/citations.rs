//! Summaries cite their sources: each request a summary lists gets the id of the user message
//! it came from (`[#1a2b3c4d]`), which the agent hands to `ctx_expand` to read it whole, and a
//! count of elided requests says how to find them. Applied to any summarizer's text after it
//! is written; a line that already cites, or whose message is not among those summarized
//! (a request carried from an earlier summary keeps the citation it had), is left as it is.

use super::extractive;
use super::summarizer::{Extractive, Summarizer};
use crate::entry::Entry;
use crate::role::Role;

/// Sections whose items are user requests.
const REQUEST_SECTIONS: &[&str] = &["## Current task", "## Started with", "## User requests"];
/// Characters of an item matched against the messages (items are clipped requests).
const MATCH_CHARS: usize = 32;

/// `summary` with citations added, never past `max_chars` (when given): citations are added in
/// order while they fit.
pub fn cite(summary: &str, summarized: &[Entry], max_chars: Option<usize>) -> String {
    let requests = user_requests(summarized);
    let mut length = summary.chars().count();
    let mut out = String::with_capacity(summary.len() + 256);
    let mut in_requests = false;
    for line in summary.lines() {
        if line.starts_with("## ") {
            in_requests = REQUEST_SECTIONS.contains(&line.trim_end());
        }
        let cited = in_requests.then(|| cited_line(line, &requests)).flatten();
        // Cited while the citation fits.
        let grown = cited
            .as_ref()
            .map(|c| c.chars().count() - line.chars().count());
        match (cited, grown) {
            (Some(cited), Some(grown)) if max_chars.is_none_or(|max| length + grown <= max) => {
                length += grown;
                out.push_str(&cited);
            }
            _ => out.push_str(line),
        }
        out.push('\n');
    }
    out.truncate(out.trim_end().len());
    out
}

/// The summarized user messages: their text folded for matching, and their ids.
fn user_requests(summarized: &[Entry]) -> Vec<(String, &str)> {
    summarized
        .iter()
        .filter_map(|e| {
            let view = e.view().filter(|v| v.role == Role::User)?;
            Some((fold(&view.text), e.id()))
        })
        .collect()
}

/// The summary with its request lines citing their messages. An extractive summary stays within
/// its bound: the past gives way (as it does for the oversized section) to make room for them.
pub(crate) fn cite_within_bound(
    text: String,
    summarized: &[Entry],
    summarizer: &dyn Summarizer,
) -> String {
    if summarizer.name() != Extractive.name() {
        return cite(&text, summarized, None);
    }
    let cap = text.chars().count().max(extractive::MAX_CHARS);
    let room = room(&text);
    let text = if text.chars().count() + room > cap {
        extractive::bounded(&text, cap.saturating_sub(room))
    } else {
        text
    };
    cite(&text, summarized, Some(cap))
}

/// Characters the citations of `summary` may add at most (each request line one citation).
pub fn room(summary: &str) -> usize {
    const CITATION_CHARS: usize = " [#12345678]".len();
    let mut in_requests = false;
    let mut lines = 0;
    for line in summary.lines() {
        if line.starts_with("## ") {
            in_requests = REQUEST_SECTIONS.contains(&line.trim_end());
        } else if in_requests && line.starts_with("- ") && !line.contains("[#") {
            lines += 1;
        }
    }
    lines * CITATION_CHARS
}

/// A request line with its citation: ` [#id]` for an item found among the summarized user
/// messages; for `(+N earlier requests)`, a search hint.
fn cited_line(line: &str, requests: &[(String, &str)]) -> Option<String> {
    let item = line.strip_prefix("- ")?;
    if item.contains("[#") || item.contains("ctx_search") {
        return None;
    }
    if item.starts_with("(+") && item.ends_with("earlier requests)") {
        return Some(format!(
            "{}; ctx_search finds them)",
            line.trim_end_matches(')')
        ));
    }
    let (key, names) = match_keys(item)?;
    let (_, id) = requests.iter().rev().find(|(text, _)| {
        text.contains(&key) && names.iter().all(|name| text.contains(name.as_str()))
    })?;
    Some(format!("{line} [#{id}]"))
}

/// What a request item is matched by: the head of its text, and the names kept past a gap;
/// None when the head is too short to tell messages apart.
fn match_keys(item: &str) -> Option<(String, Vec<String>)> {
    // A clipped item may skip its middle (`head … name`): its head is what the message holds.
    let head = item.split(" … ").next().unwrap_or(item);
    let key: String = fold(head.trim_end_matches('…'))
        .trim_matches('"')
        .chars()
        .take(MATCH_CHARS)
        .collect();
    if key.chars().count() < 8 {
        return None;
    }
    // A short head ("Rename the") could match another message: the names kept past the gap
    // must be in the same one.
    let names = (item.split(" … ").skip(1))
        .map(|part| fold(part.trim_end_matches('…')))
        .collect();
    Some((key, names))
}

fn fold(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Transcript;
    use serde_json::json;

    const TS: &str = "2026-11-25T10:00:00.000Z";

    fn entries() -> Vec<Entry> {
        let mut t = Transcript::new("s", "/", TS);
        for text in [
            "Please migrate the billing cron job to the zeppelin scheduler today",
            "ok",
            "Then rename   the config key maxRetries to retryLimit everywhere",
        ] {
            t.append_message(&json!({"role": "user", "content": text}), TS)
                .unwrap();
        }
        t.entries().to_vec()
    }

    #[test]
    fn requests_cite_the_message_they_came_from() {
        let entries = entries();
        let (a, c) = (entries[0].id().to_string(), entries[2].id().to_string());
        let summary = "## Current task\n- Then rename the config key maxRetries to retryL…\n\n## User requests\n- (+3 earlier requests)\n- Please migrate the billing cron job to the zep…\n- something said elsewhere entirely\n\n## Files modified\n- Please migrate the billing cron job to the zep…";
        let cited = cite(summary, &entries, None);
        assert_eq!(
            cited,
            format!(
                "## Current task\n- Then rename the config key maxRetries to retryL… [#{c}]\n\n## User requests\n- (+3 earlier requests; ctx_search finds them)\n- Please migrate the billing cron job to the zep… [#{a}]\n- something said elsewhere entirely\n\n## Files modified\n- Please migrate the billing cron job to the zep…"
            )
        );
        // Citing again changes nothing.
        assert_eq!(cite(&cited, &entries, None), cited);
    }

    #[test]
    fn a_line_that_skips_its_middle_cites_the_message_holding_its_names() {
        let mut t = Transcript::new("s", "/", TS);
        for text in [
            "Rename the config field in docs/design.md please",
            "Rename the config field and then update src/config.rs to match",
        ] {
            t.append_message(&json!({"role": "user", "content": text}), TS)
                .unwrap();
        }
        let entries = t.entries().to_vec();
        let first = entries[0].id().to_string();
        // The newer message shares the head but not the path: the older one is the source.
        let cited = cite(
            "## User requests\n- Rename the config field … docs/design.md…",
            &entries,
            None,
        );
        assert!(
            cited.ends_with(&format!("docs/design.md… [#{first}]")),
            "{cited}"
        );
        // A path no message holds cites nothing rather than a wrong message.
        let unknown = "## User requests\n- Rename the config field … src/nowhere.rs";
        assert_eq!(cite(unknown, &entries, None), unknown);
    }

    #[test]
    fn citations_stop_at_the_cap() {
        let entries = entries();
        let summary = "## User requests\n- Please migrate the billing cron job to the zep…\n- Then rename the config key maxRetries to retryL…";
        let cap = summary.chars().count() + 12;
        let cited = cite(summary, &entries, Some(cap));
        assert!(cited.chars().count() <= cap, "{cited}");
        assert_eq!(cited.matches("[#").count(), 1, "{cited}");
    }
}
