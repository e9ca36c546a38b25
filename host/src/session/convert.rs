//! Transcript entries in the contract's terms: what crosses into the guest.

use std::sync::{Arc, Mutex};

use ctxhost_transcript::{Entry, Transcript};

use crate::runtime::contract::{ContextEntry, EntryRef, HostError, Message, Role, ToolCall, Usage};

/// Saturates a token figure into the contract's `u32`.
pub fn tokens_u32(tokens: u64) -> u32 {
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// The current context as an engine receives it (`assemble`, `context-entries`), with the tool
/// facts of tool results (no message is decoded: the transcript kept them at load).
pub(super) fn context_entries(transcript: &Transcript, tools: &ToolNames) -> Vec<ContextEntry> {
    let entries = transcript.entries();
    let tools = tools.read(entries);
    let context = transcript.context();
    let mut out = Vec::with_capacity(context.len());
    for &index in context {
        let entry = &entries[index];
        if let Some(role) = entry.context_role() {
            out.push(ContextEntry {
                entry: index as u32,
                role,
                tokens: entry.tokens(),
                tool_name: tools.name(index),
                is_error: entry.is_error(),
                pruned: entry.is_pruned(),
            });
        }
    }
    out
}

/// The tool each entry of a session's transcript names, by index, with one shared string per
/// tool (so the contract's interning of names is a pointer comparison). A session's
/// transcript is only ever appended to, so an index's answer never changes: each entry is
/// looked at once, when it is first in a context.
#[derive(Default)]
pub(super) struct ToolNames {
    known: Mutex<ToolIndex>,
}

#[derive(Default)]
pub(super) struct ToolIndex {
    names: Vec<Arc<str>>,
    /// 0: no tool; n: `names[n - 1]`.
    by_entry: Vec<u32>,
}

impl ToolNames {
    /// The index, brought up to date with `entries`.
    fn read(&self, entries: &[Entry]) -> std::sync::MutexGuard<'_, ToolIndex> {
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        let ToolIndex { names, by_entry } = &mut *known;
        for entry in &entries[by_entry.len().min(entries.len())..] {
            let slot = entry.tool_name().map_or(0, |name| {
                let known = names.iter().position(|n| **n == *name);
                let position = known.unwrap_or_else(|| {
                    names.push(Arc::from(name));
                    names.len() - 1
                });
                position as u32 + 1
            });
            by_entry.push(slot);
        }
        known
    }
}

impl ToolIndex {
    fn name(&self, index: usize) -> Option<Arc<str>> {
        match self.by_entry.get(index).copied().unwrap_or(0) {
            0 => None,
            n => Some(self.names[n as usize - 1].clone()),
        }
    }
}

/// The call ids of tool results, for the `tool-call-ids` import; None for other roles. An id
/// means reading the message, so each entry's is read once and kept (entries never change
/// once written; the id check guards against a transcript replaced under the session).
#[derive(Default)]
pub(super) struct CallIds {
    known: Mutex<Vec<Option<KnownCallId>>>,
}

/// The call id read from an entry, with the id of the entry it was read from.
type KnownCallId = (Box<str>, Option<Arc<str>>);

impl CallIds {
    /// The call id of each referenced entry; an entry outside the current context is an
    /// invalid argument (the import answers for what `assemble` was given).
    pub(super) fn of(
        &self,
        transcript: &Transcript,
        refs: &[EntryRef],
    ) -> Result<Vec<Option<String>>, HostError> {
        let entries = transcript.entries();
        let mut in_context = vec![false; entries.len()];
        for &index in transcript.context() {
            in_context[index] = true;
        }
        let mut known = self.known.lock().unwrap_or_else(|e| e.into_inner());
        refs.iter()
            .map(|&r| {
                let index = r as usize;
                if !in_context.get(index).copied().unwrap_or(false) {
                    return Err(HostError::InvalidArgument(format!(
                        "entry {r} is not in the current context"
                    )));
                }
                let entry = &entries[index];
                if entry.context_role() != Some(Role::ToolResult) {
                    return Ok(None);
                }
                if known.len() <= index {
                    known.resize_with(index + 1, || None);
                }
                let id = match &known[index] {
                    Some((entry_id, call_id)) if **entry_id == *entry.id() => call_id.clone(),
                    _ => {
                        let call_id = ToolHead::of(&entry.message_json())
                            .tool_call_id
                            .map(Arc::from);
                        known[index] = Some((entry.id().into(), call_id.clone()));
                        call_id
                    }
                };
                Ok(id.as_deref().map(String::from))
            })
            .collect()
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

/// The call id of a tool result, read without decoding its content (serde skips the
/// `content` value by scanning it; nothing of it is allocated).
#[derive(Default, serde::Deserialize)]
struct ToolHead {
    #[serde(rename = "toolCallId")]
    tool_call_id: Option<String>,
}

impl ToolHead {
    /// A message whose head does not parse has no call id (it is still in the context).
    fn of(json: &str) -> Self {
        serde_json::from_str(json).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A user message, two `read` results (the second an error) and a `bash` result.
    fn transcript() -> Transcript {
        let mut t = Transcript::new("s", "/w", "2025-01-01T00:00:00.000Z");
        let result = |id: &str, name: &str, error: bool| {
            serde_json::json!({
                "role": "toolResult", "toolCallId": id, "toolName": name,
                "content": [{"type": "text", "text": "out"}], "isError": error, "timestamp": 1,
            })
        };
        let user = serde_json::json!({"role": "user", "content": "go", "timestamp": 1});
        for message in [
            user,
            result("call_1", "read", false),
            result("call_2", "read", true),
            result("call_3", "bash", false),
        ] {
            t.append_message(&message, "2025-01-01T00:00:01.000Z")
                .unwrap();
        }
        t
    }

    #[test]
    fn tool_facts_come_from_the_transcript_with_one_string_per_tool() {
        let tools = ToolNames::default();
        let mut t = transcript();
        let context = context_entries(&t, &tools);
        let names: Vec<Option<&str>> = context.iter().map(|e| e.tool_name.as_deref()).collect();
        assert_eq!(names, [None, Some("read"), Some("read"), Some("bash")]);
        let errors: Vec<bool> = context.iter().map(|e| e.is_error).collect();
        assert_eq!(errors, [false, false, true, false]);
        let (first, second) = (&context[1].tool_name, &context[2].tool_name);
        assert!(Arc::ptr_eq(
            first.as_ref().unwrap(),
            second.as_ref().unwrap()
        ));
        let bash = context[3].tool_name.clone().unwrap();
        // An entry appended later is looked at when it is first in a context.
        let grep = serde_json::json!({
            "role": "toolResult", "toolCallId": "call_4", "toolName": "grep",
            "content": [], "isError": false, "timestamp": 1,
        });
        t.append_message(&grep, "2025-01-01T00:00:02.000Z").unwrap();
        let context = context_entries(&t, &tools);
        assert_eq!(context[4].tool_name.as_deref(), Some("grep"));
        assert!(Arc::ptr_eq(context[3].tool_name.as_ref().unwrap(), &bash));
    }

    #[test]
    fn call_ids_are_read_for_tool_results_of_the_context_only() {
        let t = transcript();
        let ids = CallIds::default();
        assert_eq!(
            ids.of(&t, &[3, 0, 1, 1]).unwrap(),
            [
                Some("call_3".into()),
                None,
                Some("call_1".into()),
                Some("call_1".into())
            ]
        );
        let err = ids.of(&t, &[2, 9]).unwrap_err();
        assert!(
            err.to_string()
                .contains("entry 9 is not in the current context"),
            "{err}"
        );
    }
}
