//! The messages ctxhost adds to a runtime's context, in a form the runtime can send its model.

use serde_json::{Map, Value, json};

/// A message ctxhost puts into the runtime's context, as the runtime can send it: roles a
/// model API knows stay, others (a compaction summary, a branch summary, a custom message)
/// become a user message; each is marked so the runtime can recognise ctxhost's output.
pub(crate) fn inserted(json: &str) -> Value {
    let Ok(Value::Object(mut message)) = serde_json::from_str::<Value>(json) else {
        return user_text(String::new(), "unknown", None);
    };
    let role = message
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .to_string();
    // A runtime prints a message's time beside it: one ctxhost made up gets the current time
    // rather than none (which shows as 1970).
    let timestamp = message.get("timestamp").cloned().unwrap_or_else(now_ms);
    let text = match role.as_str() {
        "user" | "assistant" | "toolResult" => {
            message.entry("timestamp").or_insert(timestamp);
            let marker = json!({ "inserted": true, "kind": role });
            message.insert("__ctxhost".into(), marker);
            return Value::Object(message);
        }
        "compactionSummary" => summary_text(
            "The earlier part of this conversation was compacted. Summary of it:",
            &message,
        ),
        "branchSummary" => summary_text(
            "Summary of a branch of this conversation that was left:",
            &message,
        ),
        _ => content_text(&message),
    };
    user_text(text, &role, Some(timestamp))
}

/// A summary message's `summary`, after the words that tell the model what it is.
fn summary_text(lead: &str, message: &Map<String, Value>) -> String {
    let summary = message.get("summary").and_then(Value::as_str).unwrap_or("");
    format!("{lead}\n\n<summary>\n{summary}\n</summary>")
}

fn now_ms() -> Value {
    ctxhost::timestamp::now_unix_ms().into()
}

/// The text of a message's `content`, else the message as JSON.
fn content_text(message: &Map<String, Value>) -> String {
    (message
        .get("content")
        .and_then(crate::protocol::content_text))
    .unwrap_or_else(|| Value::Object(message.clone()).to_string())
}

fn user_text(text: String, kind: &str, timestamp: Option<Value>) -> Value {
    let mut message = json!({
        "role": "user",
        "content": [{ "type": "text", "text": text }],
        "__ctxhost": { "inserted": true, "kind": kind },
    });
    if let Some(timestamp) = timestamp {
        message["timestamp"] = timestamp;
    }
    message
}
