//! Transcript entries in the contract's terms: what crosses into the guest.

use ctxhost_transcript::{Entry, Role as TranscriptRole, Transcript};

use crate::runtime::contract::{ContextEntry, Message, Role, ToolCall, Usage};

pub fn role(role: TranscriptRole) -> Role {
    match role {
        TranscriptRole::User => Role::User,
        TranscriptRole::Assistant => Role::Assistant,
        TranscriptRole::ToolResult => Role::ToolResult,
        TranscriptRole::BashExecution => Role::BashExecution,
        TranscriptRole::Custom => Role::Custom,
        TranscriptRole::BranchSummary => Role::BranchSummary,
        TranscriptRole::CompactionSummary => Role::CompactionSummary,
    }
}

/// Saturates a token figure into the contract's `u32`.
pub fn tokens_u32(tokens: u64) -> u32 {
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// The current context as entry references: the input of `assemble`.
pub fn context_entries(transcript: &Transcript) -> Vec<ContextEntry> {
    let entries = transcript.entries();
    transcript
        .context()
        .into_iter()
        .filter_map(|index| {
            let entry = &entries[index];
            Some(ContextEntry {
                entry: index as u32,
                role: role(entry.context_role()?),
                tokens: entry.tokens(),
            })
        })
        .collect()
}

/// One entry as a message, or `None` for entries that never reach the model.
pub fn message(index: usize, entry: &Entry) -> Option<Message> {
    let view = entry.view()?;
    Some(Message {
        entry: index as u32,
        entry_id: entry.id().to_string(),
        role: role(view.role),
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
