//! Building `assemble` answers: plans of kept entries, kept runs and inserted messages.

use serde_json::json;

use crate::context::{AssembleRequest, ContextEntry};
use crate::tokens::estimate_tokens;

use crate::wit::types::{AssembleResult, ContextItem, KeepRange};

/// An AgentMessage JSON object for a user message with one text block:
/// `{"role":"user","content":[{"type":"text","text":…}],"timestamp":…}`.
pub fn user_text_message(text: &str, timestamp_ms: u64) -> String {
    json!({
        "role": "user",
        "content": [{ "type": "text", "text": text }],
        "timestamp": timestamp_ms,
    })
    .to_string()
}

/// An AgentMessage JSON object for a custom message shown to the model and the user:
/// `{"role":"custom","customType":…,"content":…,"display":true,"timestamp":…}`.
pub fn custom_message(custom_type: &str, content: &str, timestamp_ms: u64) -> String {
    json!({
        "role": "custom",
        "customType": custom_type,
        "content": content,
        "display": true,
        "timestamp": timestamp_ms,
    })
    .to_string()
}

/// A tool result's placeholder: an AgentMessage that answers the same tool call (`call_id`,
/// the entry's `toolName` and `isError`) with `text` instead of the output, so the assistant's
/// call still has its answer. `None` when `entry` is not a tool result. The call id comes from
/// [`host::tool_call_ids`](crate::host::tool_call_ids); [`Plan::keep_as_placeholder`] asks for
/// it.
///
/// ```
/// use ctxhost_sdk::{ContextEntry, Role, tool_result_placeholder};
/// let entry = ContextEntry {
///     tool_name: Some("read".into()),
///     ..ContextEntry::new(4, Role::ToolResult, 900)
/// };
/// let json = tool_result_placeholder(&entry, "call_7", "[output elided]", 0).unwrap();
/// assert!(json.contains(r#""toolCallId":"call_7""#));
/// ```
pub fn tool_result_placeholder(
    entry: &ContextEntry,
    call_id: &str,
    text: &str,
    timestamp_ms: u64,
) -> Option<String> {
    if !entry.is_tool_result() {
        return None;
    }
    Some(
        json!({
            "role": "toolResult",
            "toolCallId": call_id,
            "toolName": entry.tool_name.as_deref().unwrap_or(""),
            "content": [{ "type": "text", "text": text }],
            "isError": entry.is_error,
            "timestamp": timestamp_ms,
        })
        .to_string(),
    )
}

/// The pass-through answer: keep every entry of the request, in order, as one `keep-range`
/// item; the estimate is the sum of the entries' tokens. Reads the request's columns only.
pub fn pass_through(request: &AssembleRequest) -> AssembleResult {
    let refs = request.entries.refs();
    let items = match refs {
        [] => Vec::new(),
        [only] => vec![ContextItem::Keep(*only)],
        [first, .., last] => vec![ContextItem::KeepRange(KeepRange {
            first: *first,
            last: *last,
        })],
    };
    AssembleResult {
        items,
        estimated_tokens: request.entries.total_tokens(),
        system_prompt_addition: None,
    }
}

/// A builder for an [`AssembleResult`]: items in the order they are added, with a running
/// token estimate (kept entries count their `tokens`, inserted messages their text's
/// [`estimate_tokens`]).
///
/// Prefer [`keep_range`](Self::keep_range) for consecutive entries of the request: the plan
/// crosses the component boundary as one item instead of one per entry.
///
/// ```
/// use ctxhost_sdk::{ContextEntry, ContextItem, Plan, Role};
///
/// let entry = ContextEntry::new(7, Role::User, 12);
/// let result = Plan::new()
///     .insert_custom("notes", "remember: tabs, not spaces")
///     .keep(&entry)
///     .build();
/// assert_eq!(result.items.len(), 2);
/// assert_eq!(result.items[1], ContextItem::Keep(7));
/// assert_eq!(result.estimated_tokens, 12 + 7);
/// ```
#[derive(Debug, Clone, Default)]
pub struct Plan {
    items: Vec<ContextItem>,
    tokens: u32,
    system_prompt_addition: Option<String>,
    timestamp_ms: u64,
}

impl Plan {
    /// An empty plan.
    pub fn new() -> Self {
        Plan::default()
    }

    /// An empty plan with room for `items` items.
    pub fn with_capacity(items: usize) -> Self {
        Plan {
            items: Vec::with_capacity(items),
            ..Plan::default()
        }
    }

    /// The `timestamp` (Unix milliseconds) of messages inserted after this call; 0 by default,
    /// which keeps the plan deterministic. Inserted messages are not written to the transcript.
    pub fn timestamp(mut self, timestamp_ms: u64) -> Self {
        self.timestamp_ms = timestamp_ms;
        self
    }

    /// Keeps an entry of the request, as the host has it.
    pub fn keep(mut self, entry: &ContextEntry) -> Self {
        self.items.push(ContextItem::Keep(entry.entry));
        self.tokens = self.tokens.saturating_add(entry.tokens);
        self
    }

    /// Keeps a run of consecutive entries of the request (a subslice of
    /// `request.entries`) as one `keep-range` item; an empty run adds nothing, a single entry
    /// is a `keep`. The host expands the range in the request's order.
    pub fn keep_range(mut self, run: &[ContextEntry]) -> Self {
        let (Some(first), Some(last)) = (run.first(), run.last()) else {
            return self;
        };
        let tokens = run.iter().fold(0u32, |sum, e| sum.saturating_add(e.tokens));
        self.tokens = self.tokens.saturating_add(tokens);
        self.items.push(if run.len() == 1 {
            ContextItem::Keep(first.entry)
        } else {
            ContextItem::KeepRange(KeepRange {
                first: first.entry,
                last: last.entry,
            })
        });
        self
    }

    /// Keeps each of these entries, in order, one item each (see
    /// [`keep_range`](Self::keep_range) for a run of consecutive entries).
    pub fn keep_all<'a>(mut self, entries: impl IntoIterator<Item = &'a ContextEntry>) -> Self {
        let entries = entries.into_iter();
        self.items.reserve(entries.size_hint().0);
        for entry in entries {
            self = self.keep(entry);
        }
        self
    }

    /// Inserts a message of the engine's own: an AgentMessage JSON object, counted as `tokens`.
    pub fn insert(mut self, message_json: String, tokens: u32) -> Self {
        self.items.push(ContextItem::Insert(message_json));
        self.tokens = self.tokens.saturating_add(tokens);
        self
    }

    /// Sends a tool result as a placeholder with this text instead of its output, answering
    /// the same tool call (see [`tool_result_placeholder`]; the call id is asked of the host
    /// with [`host::tool_call_ids`](crate::host::tool_call_ids)); counted as the text's
    /// estimate. An entry that is not a tool result, or whose call id the host does not know,
    /// is kept as it is.
    pub fn keep_as_placeholder(self, entry: &ContextEntry, text: &str) -> Self {
        if !entry.is_tool_result() {
            return self.keep(entry);
        }
        let call_id = crate::host::tool_call_ids(&[entry.entry])
            .ok()
            .and_then(|mut ids| ids.pop().flatten());
        let placeholder =
            call_id.and_then(|id| tool_result_placeholder(entry, &id, text, self.timestamp_ms));
        match placeholder {
            Some(message) => self.insert(message, estimate_tokens(text)),
            None => self.keep(entry),
        }
    }

    /// Inserts a user message with this text (see [`user_text_message`]).
    pub fn insert_user_text(self, text: &str) -> Self {
        let message = user_text_message(text, self.timestamp_ms);
        self.insert(message, estimate_tokens(text))
    }

    /// Inserts a custom message of this `customType` with this text (see [`custom_message`]).
    pub fn insert_custom(self, custom_type: &str, text: &str) -> Self {
        let message = custom_message(custom_type, text, self.timestamp_ms);
        self.insert(message, estimate_tokens(text))
    }

    /// Text the host appends to the system prompt; counted in the estimate.
    pub fn system_prompt_addition(mut self, text: impl Into<String>) -> Self {
        let text = text.into();
        self.tokens = self.tokens.saturating_add(estimate_tokens(&text));
        if let Some(previous) = self.system_prompt_addition.take() {
            self.tokens = self.tokens.saturating_sub(estimate_tokens(&previous));
        }
        self.system_prompt_addition = Some(text);
        self
    }

    /// The token estimate so far.
    pub fn estimated_tokens(&self) -> u32 {
        self.tokens
    }

    /// The items so far.
    pub fn items(&self) -> &[ContextItem] {
        &self.items
    }

    /// The finished answer.
    pub fn build(self) -> AssembleResult {
        AssembleResult {
            items: self.items,
            estimated_tokens: self.tokens,
            system_prompt_addition: self.system_prompt_addition,
        }
    }
}

impl From<Plan> for AssembleResult {
    fn from(plan: Plan) -> Self {
        plan.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::types::{Role, Session};

    fn entry(entry: u32, tokens: u32) -> ContextEntry {
        ContextEntry::new(entry, Role::User, tokens)
    }

    fn tool_result(entry: u32) -> ContextEntry {
        ContextEntry {
            tool_name: Some("bash".into()),
            is_error: true,
            ..ContextEntry::new(entry, Role::ToolResult, 500)
        }
    }

    #[test]
    fn estimate_is_chars_over_four_rounded_up() {
        assert_eq!(estimate_tokens(""), 0);
        assert_eq!(estimate_tokens("abcd"), 1);
        assert_eq!(estimate_tokens("abcde"), 2);
        assert_eq!(estimate_tokens("ééééé"), 2);
    }

    #[test]
    fn messages_are_escaped_json() {
        let user = user_text_message("say \"hi\"\n", 5);
        assert_eq!(
            user,
            r#"{"role":"user","content":[{"type":"text","text":"say \"hi\"\n"}],"timestamp":5}"#
        );
        let custom: serde_json::Value =
            serde_json::from_str(&custom_message("a\"b", "x\\y", 0)).unwrap();
        assert_eq!(custom["customType"], "a\"b");
        assert_eq!(custom["content"], "x\\y");
        assert_eq!(custom["display"], true);
        assert_eq!(custom["role"], "custom");
    }

    #[test]
    fn pass_through_keeps_everything_as_one_range_and_sums_tokens() {
        let request = AssembleRequest {
            session: Session {
                id: "s".into(),
                key: "k".into(),
            },
            token_budget: None,
            context_window: 1000,
            context_tokens: 0,
            available_tools: vec![],
            entries: vec![entry(0, 3), entry(4, 5), entry(9, 1)].into(),
            model: None,
            prompt: None,
        };
        let result = pass_through(&request);
        assert_eq!(
            result.items,
            vec![ContextItem::KeepRange(KeepRange { first: 0, last: 9 })]
        );
        assert_eq!(result.estimated_tokens, 9);
        assert_eq!(result.system_prompt_addition, None);
    }

    #[test]
    fn keep_range_of_one_entry_is_a_keep_and_of_none_is_nothing() {
        let result = Plan::new()
            .keep_range(&[])
            .keep_range(&[entry(5, 2)])
            .build();
        assert_eq!(result.items, vec![ContextItem::Keep(5)]);
        assert_eq!(result.estimated_tokens, 2);
    }

    #[test]
    fn a_placeholder_answers_the_same_call() {
        let json = tool_result_placeholder(&tool_result(3), "call_1", "[gone]", 9).unwrap();
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["role"], "toolResult");
        assert_eq!(value["toolCallId"], "call_1");
        assert_eq!(value["toolName"], "bash");
        assert_eq!(value["isError"], true);
        assert_eq!(value["content"][0]["text"], "[gone]");
        assert_eq!(value["timestamp"], 9);
        assert_eq!(
            tool_result_placeholder(&entry(3, 1), "call_1", "x", 0),
            None
        );

        // The plan asks the host for the call id; an entry it has none for is kept.
        let history = [
            crate::testing::tool_result(3, "bash", "a long output"),
            crate::testing::message(4, Role::User, "next"),
        ];
        let host = crate::testing::TestHost::new().transcript(history.clone());
        let entries: Vec<ContextEntry> = history.iter().map(crate::testing::entry).collect();
        let plan = host.run(|| {
            Plan::new()
                .keep_as_placeholder(&entries[0], "[gone]")
                .keep_as_placeholder(&entries[1], "[gone]")
                .keep_as_placeholder(&tool_result(9), "[gone]")
                .build()
        });
        assert!(matches!(&plan.items[0], ContextItem::Insert(json) if json.contains("call-3")));
        assert_eq!(
            plan.items[1..],
            [ContextItem::Keep(4), ContextItem::Keep(9)]
        );
        assert_eq!(
            plan.estimated_tokens,
            estimate_tokens("[gone]") + entries[1].tokens + 500
        );
        assert_eq!(host.calls(), ["tool-call-ids", "tool-call-ids"]);
    }

    #[test]
    fn plan_counts_inserts_and_system_prompt() {
        let result = Plan::new()
            .timestamp(42)
            .insert_user_text("12345678")
            .keep(&entry(1, 10))
            .system_prompt_addition("abcd")
            .system_prompt_addition("abcdefgh")
            .build();
        assert_eq!(result.estimated_tokens, 2 + 10 + 2);
        assert_eq!(result.system_prompt_addition.as_deref(), Some("abcdefgh"));
        let ContextItem::Insert(json) = &result.items[0] else {
            panic!("expected an insert")
        };
        assert!(json.ends_with(r#""timestamp":42}"#), "{json}");
    }
}
