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
    /// Count chars (for token estimates); a check of the line alone leaves them at 0.
    measure: bool,
    /// A `\u` escape of half a surrogate pair was passed: every reader replaces it first
    /// (see `lenient`), so a line with one is not what this scan saw.
    lone_surrogate: bool,
}

/// The 16 bytes of `chunk` as two bit masks (bit `k` for byte `k`): the bytes that end a run
/// of plain string text (a quote, a backslash, or a control character, which JSON strings may
/// not hold) and, when `measure`, the UTF-8 continuation bytes (a string's length in chars is
/// its bytes minus those). Text is most of a transcript's bytes: this is the scanner's inner
/// loop, sixteen bytes per step with SSE2, which every x86-64 CPU has.
#[cfg(target_arch = "x86_64")]
fn masks(chunk: &[u8; 16], measure: bool) -> (u32, u32) {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is in the x86-64 baseline (the compiler assumes it everywhere), and the
    // load reads the 16 bytes of `chunk`.
    unsafe {
        let x = _mm_loadu_si128(chunk.as_ptr().cast());
        let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
        let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
        // max(x, 0x1f) == 0x1f exactly for the bytes 0x00..=0x1f.
        let low = _mm_set1_epi8(0x1f);
        let control = _mm_cmpeq_epi8(_mm_max_epu8(x, low), low);
        let stop = _mm_or_si128(_mm_or_si128(quote, backslash), control);
        // Continuation bytes are -128..=-65 as signed bytes; ASCII has none.
        let continuation = if measure && _mm_movemask_epi8(x) != 0 {
            _mm_movemask_epi8(_mm_cmplt_epi8(x, _mm_set1_epi8(-64))) as u32
        } else {
            0
        };
        (_mm_movemask_epi8(stop) as u32, continuation)
    }
}

/// [`masks`] elsewhere, a byte at a time.
#[cfg(not(target_arch = "x86_64"))]
fn masks(chunk: &[u8; 16], measure: bool) -> (u32, u32) {
    masks_bytewise(chunk, measure)
}

/// What [`masks`] computes, a byte at a time: the definition the SSE2 path is tested against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn masks_bytewise(chunk: &[u8; 16], measure: bool) -> (u32, u32) {
    let (mut stop, mut continuation) = (0, 0);
    for (k, &c) in chunk.iter().enumerate() {
        stop |= u32::from(c == b'"' || c == b'\\' || c < 0x20) << k;
        continuation |= u32::from(measure && c & 0xC0 == 0x80) << k;
    }
    (stop, continuation)
}

/// The first byte at or after `j` that ends a run of plain string text (see [`masks`]), or
/// `b.len()`, and the continuation bytes before it when `measure`.
fn plain_run(b: &[u8], mut j: usize, measure: bool) -> (usize, usize) {
    let mut cont = 0;
    while let Some(chunk) = b.get(j..j + 16) {
        let (stop, continuation) = masks(chunk.try_into().unwrap_or(&[0; 16]), measure);
        if stop != 0 {
            let n = stop.trailing_zeros() as usize;
            return (j + n, cont + count_below(continuation, n));
        }
        cont += count_below(continuation, 16);
        j += 16;
    }
    // The last bytes of the line, one at a time.
    while let Some(&c) = b.get(j) {
        if c == b'"' || c == b'\\' || c < 0x20 {
            break;
        }
        cont += usize::from(measure && c & 0xC0 == 0x80);
        j += 1;
    }
    (j, cont)
}

/// Set bits of `mask` below bit `n`. Counting bits takes a dozen instructions without a
/// popcount one, so ASCII text (no bits) skips it.
fn count_below(mask: u32, n: usize) -> usize {
    if mask == 0 {
        return 0;
    }
    (mask & !(u32::MAX << n)).count_ones() as usize
}

/// What a string literal's escapes add up to, as they are passed.
#[derive(Default)]
struct Escapes {
    /// Chars they save when decoded.
    shrink: usize,
    any: bool,
    unicode: bool,
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

    /// A string literal at `i` (after whitespace): its text is passed by [`plain_run`], from
    /// escape to escape.
    fn string(&mut self) -> Option<Str> {
        if self.peek()? != b'"' {
            return None;
        }
        let start = self.i + 1;
        let mut j = start; // the bytes before `j` are passed
        let mut cont = 0usize; // continuation bytes
        let mut esc = Escapes::default();
        let end = loop {
            let (k, c) = plain_run(self.b, j, self.measure);
            cont += c;
            match *self.b.get(k)? {
                b'"' => break k,
                b'\\' => j = self.escape(k, &mut esc)?,
                _ => return None, // a control character
            }
        };
        let raw = end - start - cont;
        self.i = end + 1;
        Some(Str {
            start,
            end,
            raw_chars: raw,
            chars: raw - esc.shrink,
            escaped: esc.any,
            unicode: esc.unicode,
        })
    }

    /// The escape at `k` (a backslash): where the text after it starts.
    fn escape(&mut self, k: usize, esc: &mut Escapes) -> Option<usize> {
        let b = self.b;
        esc.any = true;
        match *b.get(k + 1)? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                esc.shrink += 1;
                Some(k + 2)
            }
            b'u' => {
                esc.unicode = true;
                let unit = hex4(b.get(k + 2..k + 6)?)?;
                let next = b.get(k + 6..k + 12).filter(|e| e.starts_with(b"\\u"));
                // A high surrogate followed by another escape is one char of 12 bytes, as
                // `tokens::json_string_chars` counts it.
                if (0xD800..0xDC00).contains(&unit) && next.is_some() {
                    let low = hex4(&next?[2..])?;
                    self.lone_surrogate |= !(0xDC00..0xE000).contains(&low);
                    esc.shrink += 11;
                    Some(k + 12)
                } else {
                    self.lone_surrogate |= (0xD800..0xE000).contains(&unit);
                    esc.shrink += 5;
                    Some(k + 6)
                }
            }
            _ => None,
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
    scan_line(line, true)
}

/// [`message_line`] for a check that only asks whether the line decodes and what it says
/// besides its size (ids, a usage figure ignored): chars are not counted, so
/// `summary.tokens` is 0.
pub(crate) fn message_line_unmeasured(line: &str) -> Option<MessageLine> {
    scan_line(line, false)
}

fn scan_line(line: &str, measure: bool) -> Option<MessageLine> {
    let b = line.as_bytes();
    let mut s = Scan {
        b,
        i: 0,
        measure,
        lone_surrogate: false,
    };
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
    if s.lone_surrogate {
        return None; // a reader that did not replace it first: serde's error is the answer
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
            tokens: if excluded || !measure {
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
    #[test]
    fn the_vector_masks_are_the_bytewise_ones_for_every_byte_at_every_position() {
        for byte in 0..=255u8 {
            for at in 0..16 {
                let mut chunk = [b'a'; 16];
                chunk[at] = byte;
                chunk[(at + 7) % 16] = 0xC3; // a lead byte beside it
                for measure in [false, true] {
                    assert_eq!(
                        masks(&chunk, measure),
                        masks_bytewise(&chunk, measure),
                        "byte {byte:#04x} at {at}, measure {measure}"
                    );
                }
            }
        }
    }

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
