//! Token estimation by the agent-runtime convention: chars/4 rounded up, an image = 4,800 chars.
//! Chars are Unicode scalar values (pi counts UTF-16 units; the difference is noise for an
//! estimate and scalars are what Rust counts cheaply).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::content::{Block, Counted, Members, Source};
use crate::role::Role;

/// What one image block counts as, in characters.
pub const IMAGE_CHARS: usize = 4800;

/// What a content block costs in chars (strings measured in chars, tool-call arguments as
/// compact JSON): the estimate's reading of a block, for both of its decoders.
pub(crate) fn block_chars(block: Block<usize>) -> usize {
    let mut n = 0;
    block.counted(|part| {
        n += match part {
            Counted::Text(chars) => chars,
            Counted::Image => IMAGE_CHARS,
        }
    });
    n
}

pub(crate) fn chars_to_tokens(chars: usize) -> u32 {
    u32::try_from(chars.div_ceil(4)).unwrap_or(u32::MAX)
}

/// chars/4, rounded up.
pub fn estimate_text(text: &str) -> u32 {
    chars_to_tokens(text.chars().count())
}

/// Estimate an AgentMessage (text, thinking, tool-call name + arguments JSON, images,
/// bashExecution command + output, summaries). Unknown roles count 0; a message whose content
/// cannot be decoded counts as its whole JSON text, which over- rather than under-estimates.
pub fn estimate_message(message: &serde_json::Value) -> u32 {
    let json = message.to_string();
    match summarize(&json) {
        Ok(s) => s.tokens,
        Err(_) => estimate_text(&json),
    }
}

/// Length of a JSON text as `JSON.stringify` would write it (insignificant whitespace dropped),
/// without building a value: tool-call arguments are counted this way.
pub(crate) fn compact_json_chars(raw: &str) -> usize {
    let (mut n, mut in_string, mut escaped) = (0, false, false);
    for c in raw.chars() {
        if in_string {
            n += 1;
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            n += 1;
            in_string = c == '"';
        }
    }
    n
}

/// Assistant `usage`. `total_tokens` falls back to the sum of the parts when the transcript
/// has no `totalTokens` (older pi files), because that sum is what the provider saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Input tokens not read from the cache.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Input tokens read from the provider's cache.
    pub cache_read: u64,
    /// Input tokens written to the provider's cache.
    pub cache_write: u64,
    /// The provider's total for the call.
    pub total_tokens: u64,
}

/// Far above any model's context window: a token figure beyond it is garbage (a corrupt or
/// hand-edited file, `2^64-1`), and taking it at face value shows absurd utilisation.
pub const MAX_PLAUSIBLE_TOKENS: u64 = 100_000_000;

/// A token count written as a JSON number, if plausible: a whole number from 0 to
/// [`MAX_PLAUSIBLE_TOKENS`].
pub(crate) fn plausible(v: f64) -> Option<u64> {
    (v >= 0.0 && v.fract() == 0.0 && v <= MAX_PLAUSIBLE_TOKENS as f64).then_some(v as u64)
}

#[derive(Deserialize, Default)]
#[serde(expecting = "a usage object")]
pub(crate) struct RawUsage {
    pub input: Option<f64>,
    pub output: Option<f64>,
    #[serde(rename = "cacheRead")]
    pub cache_read: Option<f64>,
    #[serde(rename = "cacheWrite")]
    pub cache_write: Option<f64>,
    #[serde(rename = "totalTokens")]
    pub total_tokens: Option<f64>,
}

impl RawUsage {
    /// The usage, implausible figures treated as absent.
    pub(crate) fn to_usage(&self) -> Usage {
        self.checked().0
    }

    /// The usage and, when a figure was ignored as implausible, what was wrong.
    pub(crate) fn checked(&self) -> (Usage, Option<String>) {
        let mut check = PlausibleCounts { problem: None };
        let input = check.count("input", self.input);
        let output = check.count("output", self.output);
        let cache_read = check.count("cacheRead", self.cache_read);
        let cache_write = check.count("cacheWrite", self.cache_write);
        let total = check.count("totalTokens", self.total_tokens);
        let parts = (input.saturating_add(output))
            .saturating_add(cache_read)
            .saturating_add(cache_write);
        let usage = Usage {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: if total > 0 { total } else { parts },
        };
        (usage, check.problem)
    }
}

/// Usage figures read as token counts, an implausible one as 0 (the first named in `problem`).
struct PlausibleCounts {
    problem: Option<String>,
}

impl PlausibleCounts {
    fn count(&mut self, name: &str, v: Option<f64>) -> u64 {
        match v {
            None => 0,
            Some(v) => plausible(v).unwrap_or_else(|| {
                self.problem.get_or_insert_with(|| {
                    format!("usage.{name} {v} is not a plausible token count; ignored")
                });
                0
            }),
        }
    }
}

/// What parse/append time keeps about a message: enough for context accounting without
/// touching the JSON again.
#[derive(Debug)]
pub(crate) struct Summary {
    pub role: Option<Role>,
    pub role_name: String,
    pub tokens: u32,
    /// Set only for an assistant message whose usage may be trusted as a context size.
    pub valid_usage: Option<u64>,
    /// A usage figure ignored as implausible.
    pub usage_problem: Option<String>,
    pub excluded: bool,
}

impl Summary {
    /// The role, tokens and usage total the context counts: none for a message kept out of it.
    #[inline]
    pub(crate) fn counted(&self) -> (Option<Role>, u32, Option<u64>) {
        if self.excluded {
            (None, 0, None)
        } else {
            (self.role, self.tokens, self.valid_usage)
        }
    }
}

/// A string member, kept only as its length in chars. It is captured raw (no unescaping, no
/// allocation) and the decoded length is computed from the escapes: this is the hot path of
/// loading, and tool outputs are full of `\n`.
struct Chars(usize);

impl<'de> Deserialize<'de> for Chars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: &'de RawValue = Deserialize::deserialize(d)?;
        match json_string_chars(raw.get()) {
            Some(n) => Ok(Chars(n)),
            None => Err(de::Error::invalid_type(
                de::Unexpected::Other(raw.get()),
                &"a string",
            )),
        }
    }
}

/// Decoded length in chars of a JSON string literal (with its quotes); None if not a string.
/// Escapes shrink: `\x` is 1 char, `\uXXXX` is 1, a surrogate pair `\uXXXX\uXXXX` is 1.
fn json_string_chars(raw: &str) -> Option<usize> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let b = inner.as_bytes();
    let mut n = inner.chars().count();
    let mut i = 0;
    while let Some(off) = b
        .get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b'\\'))
    {
        let at = i + off;
        let step = escape_len(inner, at);
        n = n.saturating_sub(step - 1);
        i = at + step;
    }
    Some(n)
}

/// The bytes of the escape at `at` in a string literal's inside, all decoding to one char:
/// `\x`, `\uXXXX`, or a surrogate pair `\uXXXX\uXXXX`.
#[inline]
fn escape_len(inner: &str, at: usize) -> usize {
    let b = inner.as_bytes();
    if b.get(at + 1) != Some(&b'u') {
        return 2;
    }
    let high = inner
        .get(at + 2..at + 6)
        .and_then(|h| u16::from_str_radix(h, 16).ok())
        .is_some_and(|v| (0xD800..0xDC00).contains(&v));
    if high && b.get(at + 6) == Some(&b'\\') && b.get(at + 7) == Some(&b'u') {
        12
    } else {
        6
    }
}

fn chars(c: &Option<Chars>) -> usize {
    c.as_ref().map_or(0, |c| c.0)
}

fn chars_of(c: &Option<Chars>) -> Option<usize> {
    c.as_ref().map(|c| c.0)
}

/// A content block, reduced to what it costs in context.
#[derive(Deserialize)]
#[serde(expecting = "a content block object")]
struct BlockChars<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    text: Option<Chars>,
    thinking: Option<Chars>,
    name: Option<Chars>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

impl BlockChars<'_> {
    fn chars(&self) -> usize {
        let members = Members {
            text: chars_of(&self.text),
            thinking: chars_of(&self.thinking),
            id: None,
            name: chars_of(&self.name),
            arguments: self.arguments.map(|a| compact_json_chars(a.get())),
        };
        block_chars(Block::new(self.kind.as_deref().map(str::as_bytes), members))
    }
}

/// `content`, a string or a list of blocks, reduced to its char count in one pass.
struct ContentChars(usize);

impl<'de> Deserialize<'de> for ContentChars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ContentChars;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a list of content blocks")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ContentChars, E> {
                Ok(ContentChars(v.chars().count()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ContentChars, A::Error> {
                let mut n = 0;
                while let Some(block) = seq.next_element::<BlockChars<'de>>()? {
                    n += block.chars();
                }
                Ok(ContentChars(n))
            }
        }
        d.deserialize_any(V)
    }
}

/// The hot-path decoding done for every message at parse/append time: role, token estimate
/// and usage, without building strings.
#[derive(Deserialize)]
#[serde(expecting = "a message object")]
struct MessageStats<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    content: Option<ContentChars>,
    usage: Option<RawUsage>,
    #[serde(rename = "stopReason", borrow)]
    stop_reason: Option<Cow<'a, str>>,
    command: Option<Chars>,
    output: Option<Chars>,
    summary: Option<Chars>,
    #[serde(rename = "excludeFromContext")]
    exclude_from_context: Option<bool>,
}

impl MessageStats<'_> {
    /// chars/4 of what the model sees, by the convention in TRANSCRIPTS.md.
    fn tokens(&self, role: Role) -> u32 {
        let n = match Source::of(role) {
            Source::CommandAndOutput => chars(&self.command) + chars(&self.output),
            Source::Summary => chars(&self.summary),
            Source::Content => self.content.as_ref().map_or(0, |c| c.0),
        };
        chars_to_tokens(n)
    }
}

/// The usage total of a message of `role` as a context size: an assistant message's whose
/// turn did not fail (`stop_reason`). A zero total carries no measurement (pi writes zeros on
/// failed turns).
pub(crate) fn context_size(
    role: Option<Role>,
    stop_reason: Option<&[u8]>,
    usage: Option<Usage>,
) -> Option<u64> {
    let failed = matches!(stop_reason, Some(b"error" | b"aborted"));
    match (role, usage) {
        (Some(Role::Assistant), Some(u)) if !failed => Some(u.total_tokens).filter(|t| *t > 0),
        _ => None,
    }
}

/// Decode what accounting needs from a message's JSON.
pub(crate) fn summarize(json: &str) -> Result<Summary, String> {
    let m: MessageStats<'_> = match serde_json::from_str(json) {
        Ok(m) => m,
        Err(e) => return unknown_role(json).ok_or_else(|| format!("message: {e}")),
    };
    let role = m.role.as_deref().and_then(Role::parse);
    let excluded = role == Some(Role::BashExecution) && m.exclude_from_context == Some(true);
    let (usage, usage_problem) = m.usage.as_ref().map(RawUsage::checked).unzip();
    Ok(Summary {
        role,
        role_name: m.role.as_deref().unwrap_or("").to_string(),
        tokens: match role {
            Some(r) if !excluded => m.tokens(r),
            _ => 0,
        },
        valid_usage: context_size(role, m.stop_reason.as_deref().map(str::as_bytes), usage),
        usage_problem: usage_problem.flatten(),
        excluded,
    })
}

/// A message of a role this crate does not know is kept as it is, whatever its members hold
/// (see [`Role`]): not part of the context, so its content is not interpreted.
fn unknown_role(json: &str) -> Option<Summary> {
    #[derive(Deserialize)]
    #[serde(expecting = "a message object")]
    struct RoleOnly<'a> {
        #[serde(borrow)]
        role: Option<Cow<'a, str>>,
    }
    let role = serde_json::from_str::<RoleOnly<'_>>(json).ok()?.role?;
    (!role.is_empty() && Role::parse(&role).is_none()).then(|| Summary {
        role: None,
        role_name: role.into_owned(),
        tokens: 0,
        valid_usage: None,
        usage_problem: None,
        excluded: false,
    })
}

/// A BPE vocabulary shipped inside the binary (no download at run time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// GPT-4o / o-series.
    O200k,
    /// GPT-4 / GPT-3.5.
    Cl100k,
}

impl Encoding {
    /// `o200k_base` / `cl100k_base` (also `o200k`, `cl100k`).
    pub fn parse(name: &str) -> Option<Encoding> {
        match name {
            "o200k" | "o200k_base" => Some(Encoding::O200k),
            "cl100k" | "cl100k_base" => Some(Encoding::Cl100k),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::O200k => "o200k_base",
            Encoding::Cl100k => "cl100k_base",
        }
    }
}

/// Exact token counts with a BPE vocabulary, counting the same parts of a message as the
/// chars/4 estimate (an image still counts as 4,800 chars / 4 = 1,200 tokens). Loading a
/// vocabulary takes ~100 ms once per process; counting is ~10x slower than chars/4, which is
/// why chars/4 stays the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenCounter {
    encoding: Encoding,
}

impl TokenCounter {
    /// None when the crate was built without the `bpe` feature.
    pub fn new(encoding: Encoding) -> Option<TokenCounter> {
        cfg!(feature = "bpe").then_some(TokenCounter { encoding })
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Exact tokens of a text.
    pub fn count_text(&self, text: &str) -> u32 {
        #[cfg(feature = "bpe")]
        {
            let bpe = match self.encoding {
                Encoding::O200k => tiktoken_rs::o200k_base_singleton(),
                Encoding::Cl100k => tiktoken_rs::cl100k_base_singleton(),
            };
            u32::try_from(bpe.encode_ordinary(text).len()).unwrap_or(u32::MAX)
        }
        #[cfg(not(feature = "bpe"))]
        {
            estimate_text(text)
        }
    }

    /// Exact tokens of an AgentMessage's JSON (None when it is not a known context message).
    pub fn count_message(&self, json: &str) -> Option<u32> {
        let s = summarize(json).ok()?;
        let role = s.role?;
        if s.excluded {
            return Some(0);
        }
        let value: serde_json::Value = serde_json::from_str(json).ok()?;
        let mut n = 0u32;
        each_counted_part(role, &value, &mut |part| {
            n = n.saturating_add(match part {
                Counted::Text(text) => self.count_text(text),
                Counted::Image => chars_to_tokens(IMAGE_CHARS),
            })
        });
        Some(n)
    }
}

/// The parts of a message of `role` that the model reads (see [`Source`]), each to `take`.
fn each_counted_part(role: Role, value: &serde_json::Value, take: &mut dyn FnMut(Counted<&str>)) {
    let text = |k: &str| value.get(k).and_then(serde_json::Value::as_str);
    match Source::of(role) {
        Source::CommandAndOutput => {
            take(Counted::Text(text("command").unwrap_or("")));
            take(Counted::Text(text("output").unwrap_or("")));
        }
        Source::Summary => take(Counted::Text(text("summary").unwrap_or(""))),
        Source::Content => match value.get("content") {
            Some(serde_json::Value::String(s)) => take(Counted::Text(s)),
            Some(serde_json::Value::Array(blocks)) => {
                for b in blocks {
                    each_counted_block_part(b, take);
                }
            }
            _ => {}
        },
    }
}

fn each_counted_block_part(b: &serde_json::Value, take: &mut dyn FnMut(Counted<&str>)) {
    let field = |k: &str| b.get(k).and_then(serde_json::Value::as_str);
    // Counted as written out, not as the object it holds.
    let arguments = b.get("arguments").map(|a| a.to_string());
    let members = Members {
        text: field("text"),
        thinking: field("thinking"),
        id: None,
        name: field("name"),
        arguments: arguments.as_deref(),
    };
    Block::new(field("type").map(str::as_bytes), members).counted(take);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_rounds_up_and_counts_scalars() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("abcd"), 1);
        assert_eq!(estimate_text("abcde"), 2);
        assert_eq!(estimate_text("ééé"), 1); // 3 scalars, 6 bytes
    }

    #[test]
    fn messages_by_role() {
        assert_eq!(
            estimate_message(&json!({"role":"user","content":"12345678"})),
            2
        );
        let user_img = json!({"role":"user","content":[
            {"type":"text","text":"1234"},{"type":"image","data":"AAAA","mimeType":"image/png"}]});
        assert_eq!(estimate_message(&user_img), (4 + 4800) / 4);
        let assistant = json!({"role":"assistant","content":[
            {"type":"thinking","thinking":"abcd"},
            {"type":"toolCall","id":"1","name":"bash","arguments":{"command":"ls"}}]});
        // 4 + "bash"(4) + {"command":"ls"}(16) = 24
        assert_eq!(estimate_message(&assistant), 6);
        let bash = json!({"role":"bashExecution","command":"ls","output":"abcdef"});
        assert_eq!(estimate_message(&bash), 2);
        let summary = json!({"role":"compactionSummary","summary":"x".repeat(40),"tokensBefore":1});
        assert_eq!(estimate_message(&summary), 10);
        assert_eq!(
            estimate_message(&json!({"role":"mystery","content":"long text"})),
            0
        );
        // undecodable content: counted as its JSON text
        let bad = json!({"role":"user","content":12});
        assert_eq!(estimate_message(&bad), estimate_text(&bad.to_string()));
    }

    #[test]
    fn compact_length_ignores_whitespace_outside_strings() {
        assert_eq!(
            compact_json_chars(r#"{ "a" : "b c" }"#),
            compact_json_chars(r#"{"a":"b c"}"#)
        );
        assert_eq!(compact_json_chars(r#"{"a":"\" x"}"#), 12);
    }

    #[test]
    fn aborted_and_errored_usage_is_not_valid() {
        for stop in ["error", "aborted"] {
            let json = format!(
                r#"{{"role":"assistant","content":[],"usage":{{"totalTokens":500}},"stopReason":"{stop}"}}"#
            );
            assert_eq!(summarize(&json).unwrap().valid_usage, None, "{stop}");
        }
    }

    #[test]
    fn implausible_usage_is_absent_and_named() {
        let json = |usage: &str| {
            format!(r#"{{"role":"assistant","content":[],"usage":{usage},"stopReason":"stop"}}"#)
        };
        let s = summarize(&json(r#"{"totalTokens":18446744073709551615}"#)).unwrap();
        assert_eq!(s.valid_usage, None);
        let problem = s.usage_problem.unwrap();
        assert!(
            problem.starts_with("usage.totalTokens 1844674407370955"),
            "{problem}"
        );
        // an absurd total falls back to the parts, as an absent one does
        let s = summarize(&json(r#"{"input":10,"output":5,"totalTokens":1e300}"#)).unwrap();
        assert_eq!(s.valid_usage, Some(15));
        assert!(s.usage_problem.is_some());
        for bad in ["-5", "2.5", "100000001"] {
            let s = summarize(&json(&format!(r#"{{"output":{bad},"input":3}}"#))).unwrap();
            assert_eq!(s.valid_usage, Some(3), "{bad}");
            assert!(s.usage_problem.unwrap().contains("usage.output"), "{bad}");
        }
        let s = summarize(&json(r#"{"totalTokens":100000000}"#)).unwrap();
        assert_eq!((s.valid_usage, s.usage_problem), (Some(100_000_000), None));
    }

    #[test]
    fn shape_errors_do_not_name_rust_types() {
        for json in [
            "5",
            r#"{"role":"user","content":[5]}"#,
            r#"{"role":"assistant","content":[],"usage":7}"#,
        ] {
            let e = summarize(json).unwrap_err();
            assert!(!e.contains("struct"), "{e}");
            assert!(e.contains("object"), "{e}");
        }
    }

    #[test]
    fn bash_execution_excluded_from_context_costs_nothing() {
        let json =
            r#"{"role":"bashExecution","command":"ls","output":"a b","excludeFromContext":true}"#;
        let s = summarize(json).unwrap();
        assert!(s.excluded);
        assert_eq!(s.tokens, 0);
    }

    #[test]
    fn bad_content_is_an_error_and_unknown_role_counts_nothing() {
        let e = summarize(r#"{"role":"user","content":5}"#).unwrap_err();
        assert!(e.contains("a string or a list of content blocks"), "{e}");
        assert!(summarize(r#"{"role":"assistant","content":[{"type":"text","text":1}]}"#).is_err());
        let json = r#"{"role":"narrator","content":"x"}"#;
        assert_eq!(summarize(json).unwrap().tokens, 0);
        assert_eq!(summarize(json).unwrap().role_name, "narrator");
    }

    #[test]
    fn raw_string_length_matches_decoded_length() {
        for text in [
            "",
            "plain",
            "a\nb",
            "quote \" and \\ slash",
            "é ü 😀 \u{1}",
            "tab\tend",
        ] {
            let raw = serde_json::to_string(text).unwrap();
            assert_eq!(json_string_chars(&raw), Some(text.chars().count()), "{raw}");
            // the same text written with \u escapes everywhere
            let escaped: String = text.encode_utf16().map(|u| format!("\\u{u:04x}")).collect();
            assert_eq!(
                json_string_chars(&format!("\"{escaped}\"")),
                Some(text.chars().count())
            );
        }
        assert_eq!(json_string_chars("12"), None);
    }

    #[cfg(feature = "bpe")]
    #[test]
    fn bpe_counts_are_exact_and_offline() {
        let c = TokenCounter::new(Encoding::O200k).unwrap();
        assert_eq!(c.count_text("hello world"), 2);
        let cl = TokenCounter::new(Encoding::Cl100k).unwrap();
        assert_eq!(cl.count_text("hello world"), 2);
        let json = r#"{"role":"assistant","content":[{"type":"text","text":"hello world"},{"type":"image","data":"x","mimeType":"image/png"}]}"#;
        assert_eq!(c.count_message(json), Some(2 + 1200));
        assert_eq!(c.count_message(r#"{"role":"narrator"}"#), None);
        // thinking and a tool call's name and arguments are counted, as the estimate counts them
        let json = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hello world"},{"type":"toolCall","id":"c1","name":"read","arguments":{"path":"a"}}]}"#;
        let parts = ["hello world", "read", r#"{"path":"a"}"#];
        let expected: u32 = parts.iter().map(|p| c.count_text(p)).sum();
        assert!(expected > 2);
        assert_eq!(c.count_message(json), Some(expected));
        assert_eq!(Encoding::parse("cl100k_base"), Some(Encoding::Cl100k));
        assert_eq!(Encoding::parse("gpt2"), None);
    }

    #[test]
    fn escaped_text_counts_decoded_chars() {
        // "a\nb\u00e9" decodes to 4 chars; "\ud83d\ude00" (one emoji) to 1
        let s = summarize(r#"{"role":"user","content":"a\nb\u00e9\ud83d\ude00xxx"}"#).unwrap();
        assert_eq!(s.tokens, 2); // 8 chars
        let s = summarize(r#"{"role":"user","content":[{"type":"text","text":"a\nbc"}]}"#).unwrap();
        assert_eq!(s.tokens, 1);
    }
}
