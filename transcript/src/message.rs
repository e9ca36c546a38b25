//! AgentMessage decoding: one borrowed pass over a message's JSON gives the role, the token
//! estimate, the usage and (on demand) the engine-facing [`MessageView`].

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde_json::value::RawValue;

use crate::tokens::{IMAGE_CHARS, chars_to_tokens, compact_json_chars};

/// Who a context message speaks as (AgentMessage `role`, plus the synthesised summary roles).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    User,
    Assistant,
    ToolResult,
    BashExecution,
    Custom,
    BranchSummary,
    CompactionSummary,
}

impl Role {
    /// Parse a transcript role name; the v2 name `hookMessage` is the v3 `custom`.
    pub fn parse(name: &str) -> Option<Role> {
        Some(match name {
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "toolResult" => Role::ToolResult,
            "bashExecution" => Role::BashExecution,
            "custom" | "hookMessage" => Role::Custom,
            "branchSummary" => Role::BranchSummary,
            "compactionSummary" => Role::CompactionSummary,
            _ => return None,
        })
    }

    /// The v3 role name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "toolResult",
            Role::BashExecution => "bashExecution",
            Role::Custom => "custom",
            Role::BranchSummary => "branchSummary",
            Role::CompactionSummary => "compactionSummary",
        }
    }
}

/// An assistant `toolCall` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The `arguments` object as JSON text, verbatim from the transcript (`{}` when absent).
    pub arguments: String,
}

/// Assistant `usage`. `total_tokens` falls back to the sum of the parts when the transcript
/// has no `totalTokens` (older pi files), because that sum is what the provider saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
}

/// The parts of a message an engine needs, decoded once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageView {
    pub role: Role,
    /// Unix milliseconds.
    pub timestamp: u64,
    /// Text blocks (and string content, summaries, bash command + output) joined by '\n';
    /// no thinking, no images.
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub tool_name: Option<String>,
    pub is_error: bool,
    pub stop_reason: Option<String>,
    pub usage: Option<Usage>,
    pub tokens: u32,
}

#[derive(Deserialize)]
struct RawUsage {
    input: Option<f64>,
    output: Option<f64>,
    #[serde(rename = "cacheRead")]
    cache_read: Option<f64>,
    #[serde(rename = "cacheWrite")]
    cache_write: Option<f64>,
    #[serde(rename = "totalTokens")]
    total_tokens: Option<f64>,
}

impl RawUsage {
    fn to_usage(&self) -> Usage {
        // `as` saturates on out-of-range floats: a garbage number cannot panic here.
        let n = |v: Option<f64>| v.map_or(0, |v| v.max(0.0) as u64);
        let (input, output) = (n(self.input), n(self.output));
        let (cache_read, cache_write) = (n(self.cache_read), n(self.cache_write));
        let total = n(self.total_tokens);
        Usage {
            input,
            output,
            cache_read,
            cache_write,
            total_tokens: if total > 0 {
                total
            } else {
                input
                    .saturating_add(output)
                    .saturating_add(cache_read)
                    .saturating_add(cache_write)
            },
        }
    }
}

/// A message as borrowed from its JSON text, for building views. Unknown fields are skipped.
#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(borrow)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    timestamp: Option<f64>,
    usage: Option<RawUsage>,
    #[serde(rename = "stopReason", borrow)]
    stop_reason: Option<Cow<'a, str>>,
    #[serde(rename = "toolName", borrow)]
    tool_name: Option<Cow<'a, str>>,
    #[serde(rename = "isError")]
    is_error: Option<bool>,
    #[serde(borrow)]
    command: Option<Cow<'a, str>>,
    #[serde(borrow)]
    output: Option<Cow<'a, str>>,
    #[serde(borrow)]
    summary: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct RawBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

enum Content<'a> {
    None,
    Text(Cow<'a, str>),
    Blocks(Vec<RawBlock<'a>>),
}

fn content<'a>(raw: Option<&'a RawValue>) -> Result<Content<'a>, String> {
    let Some(raw) = raw else {
        return Ok(Content::None);
    };
    let text = raw.get();
    let result = match text.as_bytes().first() {
        Some(b'"') => serde_json::from_str(text).map(Content::Text),
        Some(b'[') => serde_json::from_str(text).map(Content::Blocks),
        _ => return Err("message content must be a string or a list of blocks".into()),
    };
    result.map_err(|e| format!("message content: {e}"))
}

/// What parse/append time keeps about a message: enough for context accounting without
/// touching the JSON again.
pub(crate) struct Summary {
    pub role: Option<Role>,
    pub role_name: String,
    pub tokens: u32,
    /// Set only for an assistant message whose usage may be trusted as a context size.
    pub valid_usage: Option<u64>,
    pub excluded: bool,
}

/// A string member, kept only as its length in chars. serde_json hands escaped strings to the
/// visitor from its scratch buffer, so counting never allocates.
struct Chars(usize);

impl<'de> Deserialize<'de> for Chars {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Chars;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Chars, E> {
                Ok(Chars(v.chars().count()))
            }
        }
        d.deserialize_str(V)
    }
}

fn chars(c: &Option<Chars>) -> usize {
    c.as_ref().map_or(0, |c| c.0)
}

/// A content block, reduced to what it costs in context.
#[derive(Deserialize)]
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
        match self.kind.as_deref() {
            Some("text") => chars(&self.text),
            Some("thinking") => chars(&self.thinking),
            Some("toolCall") => {
                chars(&self.name) + self.arguments.map_or(2, |a| compact_json_chars(a.get()))
            }
            Some("image") => IMAGE_CHARS,
            _ => 0,
        }
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
        let n = match role {
            Role::BashExecution => chars(&self.command) + chars(&self.output),
            Role::BranchSummary | Role::CompactionSummary => chars(&self.summary),
            _ => self.content.as_ref().map_or(0, |c| c.0),
        };
        chars_to_tokens(n)
    }
}

/// Decode what accounting needs from a message's JSON.
pub(crate) fn summarize(json: &str) -> Result<Summary, String> {
    let m: MessageStats<'_> = serde_json::from_str(json).map_err(|e| format!("message: {e}"))?;
    let role = m.role.as_deref().and_then(Role::parse);
    let excluded = role == Some(Role::BashExecution) && m.exclude_from_context == Some(true);
    let valid_usage = match (role, &m.usage) {
        (Some(Role::Assistant), Some(u))
            if !matches!(m.stop_reason.as_deref(), Some("error" | "aborted")) =>
        {
            // A zero total carries no measurement (pi writes zeros on failed turns).
            Some(u.to_usage().total_tokens).filter(|t| *t > 0)
        }
        _ => None,
    };
    Ok(Summary {
        role,
        role_name: m.role.as_deref().unwrap_or("").to_string(),
        tokens: match role {
            Some(r) if !excluded => m.tokens(r),
            _ => 0,
        },
        valid_usage,
        excluded,
    })
}

/// The engine-facing view of a message's JSON; `default_timestamp` is used when the message
/// has none. None for unknown roles.
pub(crate) fn view(json: &str, default_timestamp: u64) -> Result<Option<MessageView>, String> {
    let stats = summarize(json)?;
    let m = RawMessage::parse(json)?;
    let Some(role) = m.role() else {
        return Ok(None);
    };
    let mut parts: Vec<&str> = Vec::new();
    let mut tool_calls = Vec::new();
    let content = content(m.content)?;
    match role {
        Role::BashExecution => {
            parts.extend(m.command.as_deref());
            parts.extend(m.output.as_deref());
        }
        Role::BranchSummary | Role::CompactionSummary => parts.extend(m.summary.as_deref()),
        _ => match &content {
            Content::None => {}
            Content::Text(t) => parts.push(t),
            Content::Blocks(blocks) => {
                for b in blocks {
                    match b.kind.as_deref() {
                        Some("text") => parts.extend(b.text.as_deref()),
                        Some("toolCall") => tool_calls.push(ToolCall {
                            id: b.id.as_deref().unwrap_or("").to_string(),
                            name: b.name.as_deref().unwrap_or("").to_string(),
                            arguments: b.arguments.map_or("{}", |a| a.get()).to_string(),
                        }),
                        _ => {}
                    }
                }
            }
        },
    }
    Ok(Some(MessageView {
        role,
        timestamp: m.timestamp.map_or(default_timestamp, |t| t.max(0.0) as u64),
        text: parts.join("\n"),
        tool_calls,
        tool_name: m.tool_name.as_deref().map(str::to_string),
        is_error: m.is_error.unwrap_or(false),
        stop_reason: m.stop_reason.as_deref().map(str::to_string),
        usage: m.usage.as_ref().map(RawUsage::to_usage),
        tokens: stats.tokens,
    }))
}

impl<'a> RawMessage<'a> {
    fn parse(json: &'a str) -> Result<RawMessage<'a>, String> {
        serde_json::from_str(json).map_err(|e| format!("message: {e}"))
    }

    fn role(&self) -> Option<Role> {
        self.role.as_deref().and_then(Role::parse)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_of_assistant_keeps_text_and_tool_calls_but_not_thinking() {
        let json = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"a"},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"x.rs"}},{"type":"text","text":"b"}],"usage":{"input":10,"output":5,"cacheRead":1,"cacheWrite":2,"cost":{"total":0.1}},"stopReason":"toolUse","timestamp":42}"#;
        let v = view(json, 0).unwrap().unwrap();
        assert_eq!(v.role, Role::Assistant);
        assert_eq!(v.text, "a\nb");
        assert_eq!(v.timestamp, 42);
        assert_eq!(v.tool_calls.len(), 1);
        assert_eq!(v.tool_calls[0].name, "read");
        assert_eq!(v.tool_calls[0].arguments, r#"{"path":"x.rs"}"#);
        // no totalTokens: the parts are summed
        assert_eq!(v.usage.unwrap().total_tokens, 18);
        assert_eq!(v.stop_reason.as_deref(), Some("toolUse"));
        // hmm(3) + a(1) + read(4) + {"path":"x.rs"}(15) + b(1) = 24 chars -> 6 tokens
        assert_eq!(v.tokens, 6);
        assert_eq!(summarize(json).unwrap().valid_usage, Some(18));
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
    fn bash_execution_excluded_from_context_costs_nothing() {
        let json =
            r#"{"role":"bashExecution","command":"ls","output":"a b","excludeFromContext":true}"#;
        let s = summarize(json).unwrap();
        assert!(s.excluded);
        assert_eq!(s.tokens, 0);
        let v = view(json, 9).unwrap().unwrap();
        assert_eq!(v.text, "ls\na b");
        assert_eq!(v.timestamp, 9);
    }

    #[test]
    fn bad_content_is_an_error_and_unknown_role_has_no_view() {
        let e = summarize(r#"{"role":"user","content":5}"#).unwrap_err();
        assert!(e.contains("a string or a list of content blocks"), "{e}");
        assert!(summarize(r#"{"role":"assistant","content":[{"type":"text","text":1}]}"#).is_err());
        let json = r#"{"role":"narrator","content":"x"}"#;
        assert_eq!(view(json, 0).unwrap(), None);
        assert_eq!(summarize(json).unwrap().tokens, 0);
        assert_eq!(summarize(json).unwrap().role_name, "narrator");
    }

    #[test]
    fn escaped_text_counts_decoded_chars() {
        // "a\nb\u00e9" decodes to 4 chars; "\ud83d\ude00" (one emoji) to 1
        let s = summarize(r#"{"role":"user","content":"a\nb\u00e9\ud83d\ude00xxx"}"#).unwrap();
        assert_eq!(s.tokens, 2); // 8 chars
        let s = summarize(r#"{"role":"user","content":[{"type":"text","text":"a\nbc"}]}"#).unwrap();
        assert_eq!(s.tokens, 1);
    }

    #[test]
    fn hook_message_is_custom() {
        assert_eq!(Role::parse("hookMessage"), Some(Role::Custom));
        assert_eq!(Role::Custom.as_str(), "custom");
    }
}
