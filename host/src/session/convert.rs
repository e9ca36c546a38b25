//! Transcript entries in the contract's terms: what crosses into the guest.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ctxhost_transcript::{Entry, Transcript};

use ctxhost_runtime::contract::{Context, ContextEntry, EntryRef, HostError, Message, Role};

/// Saturates a token figure into the contract's `u32`.
pub fn tokens_u32(tokens: u64) -> u32 {
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// The current context as engines receive it (`assemble`, `context-entries`), kept between
/// calls: a session's transcript only grows, and while its [`Transcript::revision`] holds, the
/// context only grows at its end, so a call looks only at the entries appended since the last
/// one. Tool facts come from what the transcript kept at load (no message is decoded), and
/// each tool name is stored once.
///
/// The context is shared (`Arc`), not copied, with each request; it is extended in place once
/// the previous request is dropped. Each rebuild gets a new context revision (unique in the
/// process), which is what lets a 0.4 engine be sent only the rows appended since.
#[derive(Default)]
pub(super) struct ContextCache {
    kept: Mutex<Kept>,
}

/// Context revisions handed out in this process; 0 stays "unknown".
static NEXT_CONTEXT_REVISION: AtomicU64 = AtomicU64::new(1);

#[derive(Default)]
struct Kept {
    /// The transcript revision `context` was built at.
    revision: Option<u64>,
    /// The context revision of `context`: it changes whenever `context` is rebuilt.
    context_revision: u64,
    /// How many of the transcript's `context()` indices `context` was built from.
    seen: usize,
    context: Arc<Context>,
    /// Per transcript entry, the `tool` of its row (names only ever grow, so it never goes stale).
    tool_by_entry: Vec<u32>,
    /// The tokens of `context`'s rows, and of every entry of the `seen` indices (the same
    /// unless an entry of the context has no role), summed as they were added.
    tokens: ContextTokens,
}

impl Kept {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            context: self.context.clone(),
            revision: self.context_revision,
            tokens: self.tokens,
        }
    }

    /// Starts the context again for transcript revision `revision`, as a new context revision.
    /// Tool names are kept: they only ever grow.
    fn restart(&mut self, revision: u64) {
        // Copies the context only while an earlier request still holds it.
        Arc::make_mut(&mut self.context).entries.clear();
        self.seen = 0;
        self.tokens = ContextTokens::default();
        self.revision = Some(revision);
        self.context_revision = NEXT_CONTEXT_REVISION.fetch_add(1, Ordering::Relaxed);
    }

    /// The `tool` of each entry not yet named, each new tool name stored once.
    fn name_tools(&mut self, entries: &[Entry]) {
        let names = &mut Arc::make_mut(&mut self.context).tool_names;
        for entry in &entries[self.tool_by_entry.len().min(entries.len())..] {
            let tool = entry.tool_name().map_or(0, |name| {
                let known = names.iter().position(|n| n == name);
                let position = known.unwrap_or_else(|| {
                    names.push(name.to_string());
                    names.len() - 1
                });
                position as u32 + 1
            });
            self.tool_by_entry.push(tool);
        }
    }

    /// Adds the rows of the context `indices` not yet seen, and their tokens.
    fn extend(&mut self, entries: &[Entry], indices: &[usize]) {
        let context = Arc::make_mut(&mut self.context);
        context.entries.reserve(indices.len() - self.seen);
        for &index in &indices[self.seen..] {
            let entry = &entries[index];
            self.tokens.entries += u64::from(entry.tokens());
            if let Some(role) = entry.context_role() {
                self.tokens.rows += u64::from(entry.tokens());
                context.entries.push(ContextEntry {
                    entry: index as u32,
                    role,
                    tokens: entry.tokens(),
                    tool: self.tool_by_entry[index],
                    is_error: entry.is_error(),
                    pruned: entry.is_pruned(),
                });
            }
        }
        self.seen = indices.len();
    }
}

/// The current context as [`ContextCache::context`] gives it.
pub(super) struct Snapshot {
    pub context: Arc<Context>,
    /// See [`crate::runtime::contract::AssembleRequest::context_revision`].
    pub revision: u64,
    pub tokens: ContextTokens,
}

/// A context's tokens by the transcript's estimates, kept as the context grows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct ContextTokens {
    /// Of its rows, what an engine is given.
    pub rows: u64,
    /// Of every entry of [`Transcript::context`].
    pub entries: u64,
}

impl ContextCache {
    /// The current context of `transcript`, with its context revision and tokens.
    pub(super) fn context(&self, transcript: &Transcript) -> Snapshot {
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let entries = transcript.entries();
        let indices = transcript.context();
        let stale = kept.revision != Some(transcript.revision()) || kept.seen > indices.len();
        let complete = kept.seen == indices.len() && kept.tool_by_entry.len() >= entries.len();
        if !stale && complete {
            return kept.snapshot();
        }
        if stale {
            kept.restart(transcript.revision());
        }
        kept.name_tools(entries);
        kept.extend(entries, indices);
        kept.snapshot()
    }

    /// The current context of `transcript`, owned (for callers that keep or change it).
    pub(super) fn owned_context(&self, transcript: &Transcript) -> Context {
        Arc::unwrap_or_clone(self.context(transcript).context)
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
                Ok(known_call_id(&mut known, index, &entries[index]))
            })
            .collect()
    }
}

/// The call id of `entry` (at `index`) when it is a tool result: the one `known` keeps for
/// it, else read from its message and kept.
fn known_call_id(
    known: &mut Vec<Option<KnownCallId>>,
    index: usize,
    entry: &Entry,
) -> Option<String> {
    if entry.context_role() != Some(Role::ToolResult) {
        return None;
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
    id.as_deref().map(String::from)
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
        tool_calls: view.tool_calls,
        tool_name: view.tool_name,
        tool_call_id,
        is_error: view.is_error,
        stop_reason: view.stop_reason,
        usage: view.usage,
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
    fn tool_facts_come_from_the_transcript_with_one_name_per_tool() {
        let context = ContextCache::default().owned_context(&transcript());
        let names: Vec<Option<&str>> = (context.entries.iter())
            .map(|e| context.tool_name(e))
            .collect();
        assert_eq!(names, [None, Some("read"), Some("read"), Some("bash")]);
        assert_eq!(context.tool_names, ["read", "bash"]);
        let errors: Vec<bool> = context.entries.iter().map(|e| e.is_error).collect();
        assert_eq!(errors, [false, false, true, false]);
    }

    #[test]
    fn the_kept_context_follows_appends_and_compactions() {
        let cache = ContextCache::default();
        let mut t = transcript();
        let fresh = |t: &Transcript| ContextCache::default().owned_context(t);
        assert_eq!(cache.owned_context(&t), fresh(&t));
        let grep = serde_json::json!({
            "role": "toolResult", "toolCallId": "call_4", "toolName": "grep",
            "content": [], "isError": false, "timestamp": 1,
        });
        t.append_message(&grep, "2025-01-01T00:00:02.000Z").unwrap();
        let grown = cache.owned_context(&t);
        assert_eq!(grown, fresh(&t));
        assert_eq!(grown.tool_name(&grown.entries[4]), Some("grep"));
        // A compaction keeping the last two entries and pruning the `read` error before them.
        let kept = t.entries()[3].id().to_string();
        let pruned = t.entries()[2].id().to_string();
        t.append_compaction(
            &ctxhost_transcript::NewCompaction {
                summary: "earlier".into(),
                first_kept_entry_id: kept,
                tokens_before: 100,
                details: Some(serde_json::json!({ "prunedEntryIds": [pruned] })),
            },
            "2025-01-01T00:00:03.000Z",
        )
        .unwrap();
        let compacted = cache.owned_context(&t);
        assert_eq!(compacted, fresh(&t));
        let refs: Vec<u32> = compacted.entries.iter().map(|e| e.entry).collect();
        assert_eq!(refs, [5, 3, 4]);
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
