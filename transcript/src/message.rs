//! Message views: the parts of an AgentMessage an engine needs, decoded on demand.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use crate::content::{Block, Members, Shown, Source};
use crate::role::Role;
use crate::tokens::{RawUsage, Usage, summarize};

/// An assistant `toolCall` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The `arguments` object as JSON text, verbatim from the transcript (`{}` when absent).
    pub arguments: String,
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

/// A message as borrowed from its JSON text, for building views. Unknown fields are skipped.
#[derive(Deserialize)]
#[serde(expecting = "a message object")]
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
#[serde(expecting = "a content block object")]
struct RawBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<Cow<'a, str>>,
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

/// The engine-facing view of a message's JSON; `default_timestamp` is used when the message
/// has none. None for unknown roles.
pub(crate) fn view(json: &str, default_timestamp: u64) -> Result<Option<MessageView>, String> {
    let stats = summarize(json)?;
    let m = RawMessage::parse(json)?;
    let Some(role) = m.role() else {
        return Ok(None);
    };
    let content = content(m.content)?;
    let mut shown = ShownParts::default();
    shown.add_message(&m, role, &content);
    Ok(Some(MessageView {
        role,
        timestamp: m.timestamp.map_or(default_timestamp, |t| t.max(0.0) as u64),
        text: shown.texts.join("\n"),
        tool_calls: shown.tool_calls,
        tool_name: m.tool_name.as_deref().map(str::to_string),
        is_error: m.is_error.unwrap_or(false),
        stop_reason: m.stop_reason.as_deref().map(str::to_string),
        usage: m.usage.as_ref().map(RawUsage::to_usage),
        tokens: stats.tokens,
    }))
}

/// What a view shows of a message: its texts, in order, and its tool calls.
#[derive(Default)]
struct ShownParts<'a> {
    texts: Vec<&'a str>,
    tool_calls: Vec<ToolCall>,
}

impl<'a> ShownParts<'a> {
    /// The parts of `m` (whose content is `content`) that its role shows.
    fn add_message(&mut self, m: &'a RawMessage<'_>, role: Role, content: &'a Content<'_>) {
        match Source::of(role) {
            Source::CommandAndOutput => {
                self.texts.extend(m.command.as_deref());
                self.texts.extend(m.output.as_deref());
            }
            Source::Summary => self.texts.extend(m.summary.as_deref()),
            Source::Content => self.add_content(content),
        }
    }

    fn add_content(&mut self, content: &'a Content<'_>) {
        match content {
            Content::None => {}
            Content::Text(t) => self.texts.push(t),
            Content::Blocks(blocks) => blocks.iter().for_each(|b| self.add_block(b)),
        }
    }

    /// A block as the shared block rules show it (thinking and images are not shown).
    fn add_block(&mut self, b: &'a RawBlock<'_>) {
        let members = Members {
            text: b.text.as_deref(),
            thinking: None,
            id: b.id.as_deref(),
            name: b.name.as_deref(),
            arguments: b.arguments.map(RawValue::get),
        };
        match Block::new(b.kind.as_deref().map(str::as_bytes), members).shown() {
            Some(Shown::Text(text)) => self.texts.push(text),
            Some(Shown::ToolCall {
                id,
                name,
                arguments,
            }) => self.tool_calls.push(ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: arguments.to_string(),
            }),
            None => {}
        }
    }
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
    fn view_of_a_bash_execution_keeps_it_even_when_excluded_from_context() {
        let json =
            r#"{"role":"bashExecution","command":"ls","output":"a b","excludeFromContext":true}"#;
        let v = view(json, 9).unwrap().unwrap();
        assert_eq!(v.text, "ls\na b");
        assert_eq!(v.timestamp, 9);
        assert_eq!(v.tokens, 0);
    }

    #[test]
    fn unknown_role_has_no_view() {
        assert_eq!(
            view(r#"{"role":"narrator","content":"x"}"#, 0).unwrap(),
            None
        );
    }
}
