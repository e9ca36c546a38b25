//! The fast path of loading: one forward pass over a `message` entry line that finds what an
//! [`Entry`](crate::entry::Entry) keeps about it (type, id, parentId, timestamp, where the
//! message sits, its role, its token estimate and usage) without building a value or a string.
//! Text is measured where it lies: a string's length in chars is its bytes minus UTF-8
//! continuation bytes minus what its escapes shrink by, eight bytes at a time.
//!
//! It answers only for the common shape and validates all of it as JSON: any line it does not
//! fully understand (another entry type, an escaped key or id, a duplicate member, a number it
//! would have to round, an unknown role, invalid JSON) gets `None`, and the serde decoder in
//! `entry.rs` reads that line instead, with its errors and rules. So both paths agree by
//! construction: this one only ever answers what that one would.

use std::ops::Range;

use crate::content::{Block, Members, Source};
use crate::role::Role;
use crate::tokens::{self, RawUsage};

mod scan;

use scan::Scan;

/// What the fast path found on a `message` line.
#[derive(Debug)]
pub(crate) struct MessageLine {
    /// `id`, when present (a v1 line has none).
    pub id: Option<Range<usize>>,
    /// `parentId`: None when absent, Some(None) when null.
    pub parent_id: Option<Option<Range<usize>>>,
    /// The timestamp string's content, when it is a string without escapes.
    pub timestamp: Option<Range<usize>>,
    pub message: Range<usize>,
    pub summary: tokens::Summary,
    /// The message's `toolName` (a string without escapes) and `isError`.
    pub tool_name: Option<Range<usize>>,
    pub is_error: Option<bool>,
}

/// Members of an entry line the serde decoder names (see `RawEntry`): a second one is an error
/// there, so it is left to it here.
const ENTRY_MEMBERS: [&[u8]; 14] = [
    b"type",
    b"id",
    b"parentId",
    b"timestamp",
    b"message",
    b"summary",
    b"firstKeptEntryId",
    b"firstKeptEntryIndex",
    b"tokensBefore",
    b"fromId",
    b"customType",
    b"content",
    b"display",
    b"details",
];

/// Members of a message the token accounting names (see `MessageStats`), and the two a tool
/// result's pruning asks about.
const MESSAGE_MEMBERS: [&[u8]; 10] = [
    b"role",
    b"content",
    b"usage",
    b"stopReason",
    b"command",
    b"output",
    b"summary",
    b"excludeFromContext",
    b"toolName",
    b"isError",
];

const BLOCK_MEMBERS: [&[u8]; 5] = [b"type", b"text", b"thinking", b"name", b"arguments"];

const USAGE_MEMBERS: [&[u8]; 5] = [
    b"input",
    b"output",
    b"cacheRead",
    b"cacheWrite",
    b"totalTokens",
];

/// What the message's members say, as `MessageStats` reads them.
#[derive(Default)]
struct Stats {
    role: Option<Range<usize>>,
    content: Option<usize>,
    usage: Option<RawUsage>,
    stop_reason: Option<Range<usize>>,
    command: Option<usize>,
    output: Option<usize>,
    summary: Option<usize>,
    exclude: Option<bool>,
    tool_name: Option<Range<usize>>,
    is_error: Option<bool>,
}

/// `content`: a string or a list of blocks, in chars (None for null).
fn content(s: &mut Scan<'_>) -> Option<Option<usize>> {
    match s.peek()? {
        b'n' => s.literal(b"null").map(|_| None),
        b'"' => s.string().filter(|st| !st.unicode).map(|st| Some(st.chars)),
        b'[' => blocks(s).map(Some),
        _ => None,
    }
}

/// A list of content blocks, in chars.
fn blocks(s: &mut Scan<'_>) -> Option<usize> {
    let mut total = 0;
    s.items(b']', |s| {
        total += block(s)?;
        Some(())
    })?;
    Some(total)
}

/// One content block, in chars (see `BlockChars`).
fn block(s: &mut Scan<'_>) -> Option<usize> {
    let mut kind: Option<Range<usize>> = None;
    let mut m = Members::default();
    s.object(&BLOCK_MEMBERS, |s, which| {
        match which {
            Some(b"type") => kind = s.plain_or_null()?,
            Some(b"text") => m.text = s.chars_or_null()?,
            Some(b"thinking") => m.thinking = s.chars_or_null()?,
            Some(b"name") => m.name = s.chars_or_null()?,
            Some(b"arguments") => m.arguments = s.value_or_null(2)?,
            _ => {
                s.value(2)?;
            }
        }
        Some(())
    })?;
    let b = s.b;
    Some(tokens::block_chars(Block::new(kind.map(|r| &b[r]), m)))
}

fn usage(s: &mut Scan<'_>) -> Option<Option<RawUsage>> {
    if s.is_null()? {
        return Some(None);
    }
    let mut raw = RawUsage::default();
    s.object(&USAGE_MEMBERS, |s, which| {
        let figure = match which {
            Some(b"input") => &mut raw.input,
            Some(b"output") => &mut raw.output,
            Some(b"cacheRead") => &mut raw.cache_read,
            Some(b"cacheWrite") => &mut raw.cache_write,
            Some(b"totalTokens") => &mut raw.total_tokens,
            _ => {
                s.value(2)?;
                return Some(());
            }
        };
        *figure = if s.is_null()? { None } else { Some(s.count()?) };
        Some(())
    })?;
    Some(Some(raw))
}

fn message(s: &mut Scan<'_>) -> Option<Stats> {
    let mut m = Stats::default();
    s.object(&MESSAGE_MEMBERS, |s, which| {
        match which {
            Some(b"role") => m.role = Some(s.plain()?),
            Some(b"content") => m.content = content(s)?,
            Some(b"usage") => m.usage = usage(s)?,
            Some(b"stopReason") => m.stop_reason = s.plain_or_null()?,
            Some(b"command") => m.command = s.chars_or_null()?,
            Some(b"output") => m.output = s.chars_or_null()?,
            Some(b"summary") => m.summary = s.chars_or_null()?,
            Some(b"excludeFromContext") => m.exclude = s.bool_or_null()?,
            Some(b"toolName") => m.tool_name = s.plain_or_null()?,
            Some(b"isError") => m.is_error = s.bool_or_null()?,
            _ => {
                s.value(1)?;
            }
        }
        Some(())
    })?;
    Some(m)
}

/// The fast path for one line (see the module docs); None hands the line to serde.
pub(crate) fn message_line(line: &str) -> Option<MessageLine> {
    scan_line(line, true)
}

/// [`message_line`] for a check that only asks whether the line decodes and what it says
/// besides its size (ids, a usage figure ignored): chars are not counted, so
/// `summary.tokens` is 0.
pub(crate) fn message_line_unmeasured(line: &str) -> Option<MessageLine> {
    scan_line(line, false)
}

fn scan_line(line: &str, measure: bool) -> Option<MessageLine> {
    let mut s = Scan::new(line, measure);
    let entry = entry_members(&mut s)?;
    if s.peek().is_some() {
        return None; // trailing bytes: glued entries and the like are serde's to judge
    }
    if s.lone_surrogate {
        return None; // a reader that did not replace it first: serde's error is the answer
    }
    if entry.kind.map(|r| &s.b[r]) != Some(b"message") {
        return None;
    }
    let (message, stats) = entry.message?;
    Some(MessageLine {
        id: entry.id,
        parent_id: entry.parent_id,
        timestamp: entry.timestamp,
        message,
        summary: stats.token_summary(line, measure)?,
        tool_name: stats.tool_name,
        is_error: stats.is_error,
    })
}

/// What an entry line's members say, as far as the fast path reads them.
#[derive(Default)]
struct EntryMembers {
    kind: Option<Range<usize>>,
    id: Option<Range<usize>>,
    parent_id: Option<Option<Range<usize>>>,
    timestamp: Option<Range<usize>>,
    /// Where the message sits, and what it says.
    message: Option<(Range<usize>, Stats)>,
}

fn entry_members(s: &mut Scan<'_>) -> Option<EntryMembers> {
    let mut e = EntryMembers::default();
    s.object(&ENTRY_MEMBERS, |s, which| {
        match which {
            Some(b"type") => e.kind = Some(s.plain()?),
            Some(b"id") => e.id = Some(s.plain()?),
            Some(b"parentId") => e.parent_id = Some(s.plain_or_null()?),
            Some(b"timestamp") if s.peek()? == b'"' => e.timestamp = Some(s.plain()?),
            Some(b"message") => {
                s.peek()?;
                let start = s.i;
                let stats = message(s)?;
                e.message = Some((start..s.i, stats));
            }
            _ => {
                s.value(1)?;
            }
        }
        Some(())
    })?;
    Some(e)
}

impl Stats {
    /// The message's token summary, as `MessageStats` makes it; None for a role serde would
    /// read otherwise. Without `measure` the estimate is 0.
    fn token_summary(&self, line: &str, measure: bool) -> Option<tokens::Summary> {
        let role_name = &line[self.role.clone()?];
        // hookMessage is rewritten on migration; unknown roles follow serde's rule.
        let role = Role::parse(role_name).filter(|_| role_name != "hookMessage")?;
        let excluded = role == Role::BashExecution && self.exclude == Some(true);
        let (usage, usage_problem) = self.usage.as_ref().map(RawUsage::checked).unzip();
        let stop = self.stop_reason.clone().map(|r| &line.as_bytes()[r]);
        let valid_usage = tokens::context_size(Some(role), stop, usage);
        let measured = !excluded && measure;
        Some(tokens::Summary {
            role: Some(role),
            role_name: String::new(),
            tokens: if measured {
                tokens::chars_to_tokens(self.chars(role))
            } else {
                0
            },
            valid_usage,
            usage_problem: usage_problem.flatten(),
            excluded,
        })
    }

    /// The chars a message of `role` is estimated by.
    fn chars(&self, role: Role) -> usize {
        match Source::of(role) {
            Source::CommandAndOutput => self.command.unwrap_or(0) + self.output.unwrap_or(0),
            Source::Summary => self.summary.unwrap_or(0),
            Source::Content => self.content.unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path agrees with serde's decoding wherever it answers.
    fn agrees(message_json: &str) {
        let line = format!(
            r#"{{"type":"message","id":"a1","parentId":"a0","timestamp":"2025-01-01T00:00:00Z","message":{message_json}}}"#
        );
        let fast = message_line(&line).unwrap_or_else(|| panic!("no fast path for {line}"));
        let slow = tokens::summarize(message_json).unwrap();
        assert_eq!(&line[fast.message.clone()], message_json);
        assert_eq!(fast.summary.role, slow.role, "{message_json}");
        assert_eq!(fast.summary.tokens, slow.tokens, "{message_json}");
        assert_eq!(fast.summary.valid_usage, slow.valid_usage, "{message_json}");
        assert_eq!(fast.summary.excluded, slow.excluded, "{message_json}");
        assert_eq!(fast.id.map(|r| &line[r]), Some("a1"));
        assert_eq!(fast.parent_id.flatten().map(|r| &line[r]), Some("a0"));
    }

    #[test]
    fn counts_as_the_serde_decoder_counts() {
        agrees(r#"{"role":"user","content":"hi  there"}"#);
        agrees(r#"{"role":"user","content":"é 😀 \n\"\\ and a longer tail of text"}"#);
        agrees(
            r#"{"role":"user","content":[{"type":"text","text":"caf\u00e9 \ud83d\ude00 é 😀 \n\"\\ and a longer tail"}]}"#,
        );
        agrees(
            r#"{"role":"assistant","content":[{"type":"text","text":"ok"},{"type":"thinking","thinking":"hmm…"},{"type":"toolCall","id":"c1","name":"read","arguments":{ "path" : "/a b/\u00e9", "n":[1, 2.5e3, true, null] }},{"type":"image","data":"xx"}],"usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"totalTokens":15,"cost":{"total":0.1}},"stopReason":"toolUse"}"#,
        );
        agrees(
            r#"{"role":"assistant","content":[],"usage":{"input":3,"output":4},"stopReason":"error"}"#,
        );
        agrees(r#"{"role":"assistant","content":null,"usage":{"totalTokens":0}}"#);
        agrees(
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"read","content":[{"type":"text","text":"x\ty"}],"isError":false}"#,
        );
        agrees(
            r#"{"role":"bashExecution","command":"ls","output":"a\nb","excludeFromContext":true}"#,
        );
        agrees(r#"{"role":"bashExecution","command":"ls","output":null}"#);
        agrees(r#"{"role":"assistant","usage":{"totalTokens":200000000}}"#);
    }

    #[test]
    fn unusual_lines_are_left_to_serde() {
        let none = |l: &str| assert!(message_line(l).is_none(), "{l}");
        none(r#"{"type":"compaction","id":"c","summary":"s","firstKeptEntryId":"a"}"#);
        none(r#"{"typ\u0065":"message","id":"a","message":{"role":"user","content":"x"}}"#);
        none(r#"{"type":"message","id":"a","id":"b","message":{"role":"user","content":"x"}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"narrator","content":"x"}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"hookMessage","content":"x"}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":"x"}}{"a":1}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":"x"},"n":01}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":"a	b"}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":"\q"}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":"\ud800"}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"assistant","usage":{"input":1.5}}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":5}}"#);
        none(r#"{"type":"message","id":"a","message":{"role":"user","content":"x"},"x":tru}"#);
    }
}
