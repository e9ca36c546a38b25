//! AgentMessage decoding: one borrowed pass over a message's JSON gives the role, the token
//! estimate, the usage and (on demand) the engine-facing [`MessageView`].

use std::borrow::Cow;

use serde::Deserialize;
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
pub(crate) struct RawUsage {
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

/// A message as borrowed from its JSON text. Unknown fields are skipped by serde.
#[derive(Deserialize)]
pub(crate) struct RawMessage<'a> {
    #[serde(borrow)]
    pub role: Option<Cow<'a, str>>,
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
    #[serde(rename = "excludeFromContext")]
    exclude_from_context: Option<bool>,
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

impl<'a> RawMessage<'a> {
    pub fn parse(json: &'a str) -> Result<RawMessage<'a>, String> {
        serde_json::from_str(json).map_err(|e| format!("message: {e}"))
    }

    pub fn role(&self) -> Option<Role> {
        self.role.as_deref().and_then(Role::parse)
    }

    /// chars/4 of what the model sees, by the convention in TRANSCRIPTS.md.
    pub fn tokens(&self) -> Result<u32, String> {
        let Some(role) = self.role() else {
            return Ok(0);
        };
        let len = |s: &Option<Cow<'_, str>>| s.as_deref().map_or(0, |s| s.chars().count());
        let chars = match role {
            Role::BashExecution => len(&self.command) + len(&self.output),
            Role::BranchSummary | Role::CompactionSummary => len(&self.summary),
            _ => match content(self.content)? {
                Content::None => 0,
                Content::Text(t) => t.chars().count(),
                Content::Blocks(blocks) => blocks
                    .iter()
                    .map(|b| match b.kind.as_deref() {
                        Some("text") => len(&b.text),
                        Some("thinking") => len(&b.thinking),
                        Some("toolCall") => {
                            len(&b.name) + b.arguments.map_or(2, |a| compact_json_chars(a.get()))
                        }
                        Some("image") => IMAGE_CHARS,
                        _ => 0,
                    })
                    .sum(),
            },
        };
        Ok(chars_to_tokens(chars))
    }

    fn is_valid_usage_source(&self) -> bool {
        !matches!(self.stop_reason.as_deref(), Some("error" | "aborted"))
    }

    pub fn summary(&self) -> Result<Summary, String> {
        let role = self.role();
        let excluded = role == Some(Role::BashExecution) && self.exclude_from_context == Some(true);
        let valid_usage = match (role, &self.usage) {
            (Some(Role::Assistant), Some(u)) if self.is_valid_usage_source() => {
                // A zero total carries no measurement (pi writes zeros on failed turns).
                Some(u.to_usage().total_tokens).filter(|t| *t > 0)
            }
            _ => None,
        };
        Ok(Summary {
            role,
            role_name: self.role.as_deref().unwrap_or("").to_string(),
            tokens: if excluded { 0 } else { self.tokens()? },
            valid_usage,
            excluded,
        })
    }

    /// The engine-facing view; `default_timestamp` is used when the message has none.
    pub fn view(&self, default_timestamp: u64) -> Result<Option<MessageView>, String> {
        let Some(role) = self.role() else {
            return Ok(None);
        };
        let mut parts: Vec<&str> = Vec::new();
        let mut tool_calls = Vec::new();
        let content = content(self.content)?;
        match role {
            Role::BashExecution => {
                parts.extend(self.command.as_deref());
                parts.extend(self.output.as_deref());
            }
            Role::BranchSummary | Role::CompactionSummary => parts.extend(self.summary.as_deref()),
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
            timestamp: self
                .timestamp
                .map_or(default_timestamp, |t| t.max(0.0) as u64),
            text: parts.join("\n"),
            tool_calls,
            tool_name: self.tool_name.as_deref().map(str::to_string),
            is_error: self.is_error.unwrap_or(false),
            stop_reason: self.stop_reason.as_deref().map(str::to_string),
            usage: self.usage.as_ref().map(RawUsage::to_usage),
            tokens: self.tokens()?,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn view_of_assistant_keeps_text_and_tool_calls_but_not_thinking() {
        let json = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"a"},{"type":"toolCall","id":"t1","name":"read","arguments":{"path":"x.rs"}},{"type":"text","text":"b"}],"usage":{"input":10,"output":5,"cacheRead":1,"cacheWrite":2,"cost":{"total":0.1}},"stopReason":"toolUse","timestamp":42}"#;
        let m = RawMessage::parse(json).unwrap();
        let v = m.view(0).unwrap().unwrap();
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
        assert_eq!(m.summary().unwrap().valid_usage, Some(18));
    }

    #[test]
    fn aborted_and_errored_usage_is_not_valid() {
        for stop in ["error", "aborted"] {
            let json = format!(
                r#"{{"role":"assistant","content":[],"usage":{{"totalTokens":500}},"stopReason":"{stop}"}}"#
            );
            let m = RawMessage::parse(&json).unwrap();
            assert_eq!(m.summary().unwrap().valid_usage, None, "{stop}");
        }
    }

    #[test]
    fn bash_execution_excluded_from_context_costs_nothing() {
        let m = RawMessage::parse(
            r#"{"role":"bashExecution","command":"ls","output":"a b","excludeFromContext":true}"#,
        )
        .unwrap();
        let s = m.summary().unwrap();
        assert!(s.excluded);
        assert_eq!(s.tokens, 0);
        let v = m.view(9).unwrap().unwrap();
        assert_eq!(v.text, "ls\na b");
        assert_eq!(v.timestamp, 9);
    }

    #[test]
    fn bad_content_is_an_error_and_unknown_role_has_no_view() {
        assert!(
            RawMessage::parse(r#"{"role":"user","content":5}"#)
                .unwrap()
                .tokens()
                .is_err()
        );
        let m = RawMessage::parse(r#"{"role":"narrator","content":"x"}"#).unwrap();
        assert_eq!(m.view(0).unwrap(), None);
        assert_eq!(m.tokens().unwrap(), 0);
    }

    #[test]
    fn hook_message_is_custom() {
        assert_eq!(Role::parse("hookMessage"), Some(Role::Custom));
        assert_eq!(Role::Custom.as_str(), "custom");
    }
}
