//! Transcript entries in the contract's terms: what crosses into the guest.

use std::sync::{Arc, Mutex};

use ctxhost_transcript::{Entry, Transcript};

use crate::runtime::contract::{ContextEntry, Message, Role, ToolCall, Usage};

/// Saturates a token figure into the contract's `u32`.
pub fn tokens_u32(tokens: u64) -> u32 {
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// The current context as entry references, without tool facts: for measuring and
/// validating, which need only references, roles and tokens.
pub(super) fn context_entries(transcript: &Transcript) -> Vec<ContextEntry> {
    entries_with(transcript, |_, _| ToolFacts::default())
}

/// The current context as an engine receives it (`assemble`, `context-entries`): with the tool
/// facts of tool results, read once per entry through `cache`.
pub(super) fn context_entries_with_tools(
    transcript: &Transcript,
    cache: &ToolCache,
) -> Vec<ContextEntry> {
    let mut known = cache.facts.lock().unwrap_or_else(|e| e.into_inner());
    entries_with(transcript, |index, entry| {
        if entry.context_role() != Some(Role::ToolResult) {
            return ToolFacts::default();
        }
        if known.len() <= index {
            known.resize_with(index + 1, || None);
        }
        match &known[index] {
            // Keyed by id too: a replaced transcript must not inherit another entry's facts.
            Some((id, facts)) if **id == *entry.id() => facts.clone(),
            _ => {
                let facts = ToolFacts::from(ToolHead::of(&entry.message_json()));
                known[index] = Some((entry.id().into(), facts.clone()));
                facts
            }
        }
    })
}

fn entries_with(
    transcript: &Transcript,
    mut tools: impl FnMut(usize, &Entry) -> ToolFacts,
) -> Vec<ContextEntry> {
    let entries = transcript.entries();
    transcript
        .context()
        .into_iter()
        .filter_map(|index| {
            let entry = &entries[index];
            let role = entry.context_role()?;
            let tool = tools(index, entry);
            Some(ContextEntry {
                entry: index as u32,
                role,
                tokens: entry.tokens(),
                tool_name: tool.tool_name,
                tool_call_id: tool.tool_call_id,
                is_error: tool.is_error,
                pruned: entry.is_pruned(),
            })
        })
        .collect()
}

/// Tool facts of a session's tool results by entry index. Reading them means scanning the
/// whole message (the error flag follows the output), megabytes for a long session, so each
/// entry is read once; entries never change once written.
#[derive(Default)]
pub(super) struct ToolCache {
    facts: Mutex<Vec<Option<CachedFacts>>>,
}

/// The facts read from an entry, with the id of the entry they were read from.
type CachedFacts = (Box<str>, ToolFacts);

#[derive(Debug, Clone, Default)]
struct ToolFacts {
    tool_name: Option<Arc<str>>,
    tool_call_id: Option<Arc<str>>,
    is_error: bool,
}

impl From<ToolHead> for ToolFacts {
    fn from(head: ToolHead) -> Self {
        Self {
            tool_name: head.tool_name.map(Arc::from),
            tool_call_id: head.tool_call_id.map(Arc::from),
            is_error: head.is_error,
        }
    }
}

/// One entry as a message, or `None` for entries that never reach the model.
pub(super) fn message(index: usize, entry: &Entry) -> Option<Message> {
    let view = entry.view()?;
    let tool_call_id = match view.role {
        Role::ToolResult => ToolHead::of(&entry.message_json()).tool_call_id,
        _ => None,
    };
    Some(Message {
        entry: index as u32,
        entry_id: entry.id().to_string(),
        role: view.role,
        timestamp: view.timestamp,
        text: view.text,
        tool_calls: view
            .tool_calls
            .into_iter()
            .map(|call| ToolCall {
                id: call.id,
                name: call.name,
                arguments: call.arguments,
            })
            .collect(),
        tool_name: view.tool_name,
        tool_call_id,
        is_error: view.is_error,
        stop_reason: view.stop_reason,
        usage: view.usage.map(|u| Usage {
            input: u.input,
            output: u.output,
            cache_read: u.cache_read,
            cache_write: u.cache_write,
            total_tokens: u.total_tokens,
        }),
        tokens: view.tokens,
        json: entry.message_json().into_owned(),
    })
}

/// The tool facts of a tool result, read without decoding its content (serde skips the
/// `content` value by scanning it; nothing of it is allocated).
#[derive(Default, serde::Deserialize)]
struct ToolHead {
    #[serde(rename = "toolName")]
    tool_name: Option<String>,
    #[serde(rename = "toolCallId")]
    tool_call_id: Option<String>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

impl ToolHead {
    /// A message whose head does not parse has no tool facts (it is still in the context).
    fn of(json: &str) -> Self {
        serde_json::from_str(json).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_facts_come_from_the_message_head() {
        let head = ToolHead::of(
            r#"{"role":"toolResult","toolCallId":"call_1","toolName":"bash","content":[{"type":"text","text":"x"}],"isError":true}"#,
        );
        assert_eq!(head.tool_name.as_deref(), Some("bash"));
        assert_eq!(head.tool_call_id.as_deref(), Some("call_1"));
        assert!(head.is_error);
        let none = ToolHead::of(r#"{"role":"toolResult","isError":null}"#);
        assert_eq!(none.tool_name, None);
        assert!(!none.is_error);
    }
}
