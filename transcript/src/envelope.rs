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

/// serde_json refuses deeper nesting; deeper lines go to it for its error.
const MAX_DEPTH: usize = 100;

/// A string literal: where its content sits and how long it is.
#[derive(Debug, Clone, Copy)]
struct Str {
    start: usize,
    end: usize,
    /// Chars of the literal as written (escapes count as their spelling), quotes excluded.
    raw_chars: usize,
    /// Chars of the decoded string.
    chars: usize,
    escaped: bool,
    /// A `\u` escape: serde decodes such a string when it is a message's whole `content`
    /// (and refuses lone surrogates), so that case is left to it.
    unicode: bool,
}

struct Scan<'a> {
    b: &'a [u8],
    i: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// Bytes of `x` equal to zero, as their high bit (exact for the lowest flagged byte and all
/// below it, which is all that is used).
fn zero_bytes(x: u64) -> u64 {
    x.wrapping_sub(ONES) & !x & HIGHS
}

/// UTF-8 continuation bytes (`10xxxxxx`) among the 8 bytes of `x`. ASCII (most text) is
/// answered without counting bits: the baseline x86-64 target has no popcount instruction.
fn continuations(x: u64) -> usize {
    if x & HIGHS == 0 {
        return 0;
    }
    (x & !(x << 1) & HIGHS).count_ones() as usize
}

impl<'a> Scan<'a> {
    fn ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.ws();
        self.b.get(self.i).copied()
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.peek()? == c).then(|| self.i += 1)
    }

    /// A string literal at `i` (after whitespace).
    fn string(&mut self) -> Option<Str> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let b = self.b;
        let mut j = start;
        let mut cont = 0usize; // continuation bytes
        let mut shrink = 0usize; // chars escapes save when decoded
        let mut escaped = false;
        let mut unicode = false;
        loop {
            // Eight bytes at a time until one is a quote, a backslash or a control character.
            while let Some(chunk) = b.get(j..j + 8) {
                let x = u64::from_le_bytes(chunk.try_into().ok()?);
                let flagged = zero_bytes(x ^ (ONES * u64::from(b'"')))
                    | zero_bytes(x ^ (ONES * u64::from(b'\\')))
                    | (x.wrapping_sub(ONES * 0x20) & !x & HIGHS);
                if flagged != 0 {
                    let n = (flagged.trailing_zeros() / 8) as usize;
                    let below = if n == 0 {
                        0
                    } else {
                        x & (u64::MAX >> (64 - 8 * n))
                    };
                    cont += continuations(below);
                    j += n;
                    break;
                }
                cont += continuations(x);
                j += 8;
            }
            let c = *b.get(j)?;
            match c {
                b'"' => {
                    let raw = j - start - cont;
                    self.i = j + 1;
                    return Some(Str {
                        start,
                        end: j,
                        raw_chars: raw,
                        chars: raw - shrink,
                        escaped,
                        unicode,
                    });
                }
                b'\\' => {
                    escaped = true;
                    match *b.get(j + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                            shrink += 1;
                            j += 2;
                        }
                        b'u' => {
                            unicode = true;
                            let unit = hex4(b.get(j + 2..j + 6)?)?;
                            // A high surrogate followed by another escape is one char of 12
                            // bytes, as `tokens::json_string_chars` counts it.
                            if (0xD800..0xDC00).contains(&unit)
                                && b.get(j + 6) == Some(&b'\\')
                                && b.get(j + 7) == Some(&b'u')
                            {
                                hex4(b.get(j + 8..j + 12)?)?;
                                shrink += 11;
                                j += 12;
                            } else {
                                shrink += 5;
                                j += 6;
                            }
                        }
                        _ => return None,
                    }
                }
                c if c < 0x20 => return None,
                c => {
                    // The tail of the line, fewer than eight bytes.
                    cont += usize::from(c & 0xC0 == 0x80);
                    j += 1;
                }
            }
        }
    }

    /// A string without escapes (ids, types, roles): its content.
    fn plain(&mut self) -> Option<Range<usize>> {
        let s = self.string()?;
        (!s.escaped).then_some(s.start..s.end)
    }

    /// `null`, or a string without escapes.
    fn plain_or_null(&mut self) -> Option<Option<Range<usize>>> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(None);
        }
        self.plain().map(Some)
    }

    fn literal(&mut self, word: &[u8]) -> Option<usize> {
        self.peek()?;
        (self.b.get(self.i..self.i + word.len())? == word).then(|| {
            self.i += word.len();
            word.len()
        })
    }

    fn is_null(&mut self) -> Option<bool> {
        if self.peek()? == b'n' {
            self.literal(b"null")?;
            return Some(true);
        }
        Some(false)
    }

    /// A JSON number; its length in chars.
    fn number(&mut self) -> Option<usize> {
        self.peek()?;
        let b = self.b;
        let start = self.i;
        let mut j = start;
        if b.get(j) == Some(&b'-') {
            j += 1;
        }
        let digits = |j: &mut usize| {
            let from = *j;
            while b.get(*j).is_some_and(u8::is_ascii_digit) {
                *j += 1;
            }
            *j > from
        };
        match b.get(j)? {
            b'0' => j += 1,
            b'1'..=b'9' => {
                digits(&mut j);
            }
            _ => return None,
        }
        if b.get(j) == Some(&b'.') {
            j += 1;
            if !digits(&mut j) {
                return None;
            }
        }
        if matches!(b.get(j), Some(b'e' | b'E')) {
            j += 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if !digits(&mut j) {
                return None;
            }
        }
        self.i = j;
        Some(j - start)
    }

    /// A whole number written plainly (what token counts are): its value as serde reads it.
    /// Anything else (fractions, exponents, signs, 16+ digits) is left to serde.
    fn count(&mut self) -> Option<f64> {
        self.peek()?;
        let start = self.i;
        let len = self.number()?;
        let text = &self.b[start..start + len];
        if len > 15 || !text.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = text.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0'));
        Some(n as f64)
    }

    /// Any value, checked; its length as `JSON.stringify` writes it (whitespace dropped,
    /// strings as spelled), which is how tool-call arguments are counted.
    fn value(&mut self, depth: usize) -> Option<usize> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|s| s.raw_chars + 2),
            b'{' => {
                self.i += 1;
                let mut n = 2;
                if self.peek()? == b'}' {
                    self.i += 1;
                    return Some(n);
                }
                loop {
                    n += self.string()?.raw_chars + 3; // quotes and colon
                    self.eat(b':')?;
                    n += self.value(depth + 1)?;
                    match self.peek()? {
                        b',' => n += 1,
                        b'}' => {
                            self.i += 1;
                            return Some(n);
                        }
                        _ => return None,
                    }
                    self.i += 1;
                }
            }
            b'[' => {
                self.i += 1;
                let mut n = 2;
                if self.peek()? == b']' {
                    self.i += 1;
                    return Some(n);
                }
                loop {
                    n += self.value(depth + 1)?;
                    match self.peek()? {
                        b',' => n += 1,
                        b']' => {
                            self.i += 1;
                            return Some(n);
                        }
                        _ => return None,
                    }
                    self.i += 1;
                }
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    /// The members of an object: calls `member` with each key that is one of `names` (None for
    /// any other) and leaves the scanner at its value, which `member` must consume. Members
    /// are told by name, so the order of a table binds nothing. A key spelled with escapes, or
    /// a named member given twice, ends the fast path.
    fn object(
        &mut self,
        names: &[&'static [u8]],
        mut member: impl FnMut(&mut Self, Option<&'static [u8]>) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        let mut seen = 0u32;
        loop {
            let key = self.string()?;
            if key.escaped {
                return None;
            }
            let name = &self.b[key.start..key.end];
            let which = names.iter().position(|n| *n == name);
            if let Some(k) = which {
                if seen & (1 << k) != 0 {
                    return None;
                }
                seen |= 1 << k;
            }
            self.eat(b':')?;
            member(self, which.map(|k| names[k]))?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn bool_or_null(&mut self) -> Option<Option<bool>> {
        match self.peek()? {
            b't' => self.literal(b"true").map(|_| Some(true)),
            b'f' => self.literal(b"false").map(|_| Some(false)),
            _ => self.literal(b"null").map(|_| None),
        }
    }

    /// A member holding a string measured in chars, or null.
    fn chars_or_null(&mut self) -> Option<Option<usize>> {
        if self.is_null()? {
            return Some(None);
        }
        self.string().map(|s| Some(s.chars))
    }
}

fn hex4(b: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(b).ok()?;
    if !text.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u16::from_str_radix(text, 16).ok()
}

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
        b'[' => {
            s.i += 1;
            let mut total = 0;
            if s.peek()? == b']' {
                s.i += 1;
                return Some(Some(total));
            }
            loop {
                total += block(s)?;
                match s.peek()? {
                    b',' => s.i += 1,
                    b']' => {
                        s.i += 1;
                        return Some(Some(total));
                    }
                    _ => return None,
                }
            }
        }
        _ => None,
    }
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
            Some(b"arguments") => {
                m.arguments = if s.is_null()? {
                    None
                } else {
                    Some(s.value(2)?)
                }
            }
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
    let mut raw = RawUsage {
        input: None,
        output: None,
        cache_read: None,
        cache_write: None,
        total_tokens: None,
    };
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
    let b = line.as_bytes();
    let mut s = Scan { b, i: 0 };
    let mut kind = None;
    let mut id = None;
    let mut parent_id = None;
    let mut timestamp = None;
    let mut found: Option<(Range<usize>, Stats)> = None;
    s.object(&ENTRY_MEMBERS, |s, which| {
        match which {
            Some(b"type") => kind = Some(s.plain()?),
            Some(b"id") => id = Some(s.plain()?),
            Some(b"parentId") => parent_id = Some(s.plain_or_null()?),
            Some(b"timestamp") => {
                timestamp = if s.peek()? == b'"' {
                    Some(s.plain()?)
                } else {
                    s.value(1)?;
                    None
                }
            }
            Some(b"message") => {
                s.peek()?;
                let start = s.i;
                let stats = message(s)?;
                found = Some((start..s.i, stats));
            }
            _ => {
                s.value(1)?;
            }
        }
        Some(())
    })?;
    if s.peek().is_some() {
        return None; // trailing bytes: glued entries and the like are serde's to judge
    }
    if kind.map(|r| &b[r]) != Some(b"message") {
        return None;
    }
    let (message, stats) = found?;
    let role_name = &line[stats.role.clone()?];
    // hookMessage is rewritten on migration; unknown roles follow serde's rule.
    let role = Role::parse(role_name).filter(|_| role_name != "hookMessage")?;
    let excluded = role == Role::BashExecution && stats.exclude == Some(true);
    let (usage, usage_problem) = stats.usage.as_ref().map(RawUsage::checked).unzip();
    let stop = stats.stop_reason.map(|r| &b[r]);
    let valid_usage = match usage {
        Some(u) if role == Role::Assistant && !matches!(stop, Some(b"error" | b"aborted")) => {
            Some(u.total_tokens).filter(|t| *t > 0)
        }
        _ => None,
    };
    let chars = match Source::of(role) {
        Source::CommandAndOutput => stats.command.unwrap_or(0) + stats.output.unwrap_or(0),
        Source::Summary => stats.summary.unwrap_or(0),
        Source::Content => stats.content.unwrap_or(0),
    };
    Some(MessageLine {
        id,
        parent_id,
        timestamp,
        message,
        summary: tokens::Summary {
            role: Some(role),
            role_name: String::new(),
            tokens: if excluded {
                0
            } else {
                tokens::chars_to_tokens(chars)
            },
            valid_usage,
            usage_problem: usage_problem.flatten(),
            excluded,
        },
        tool_name: stats.tool_name,
        is_error: stats.is_error,
    })
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
