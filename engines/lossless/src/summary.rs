//! What a summary node says about its span: the facts a resumed agent must not lose (the
//! user's requests and standing rules, tool failures with their error line, files changed,
//! where the span ended up), extracted without a model, and the same condensed upward. With
//! the operator's `llm` grant a model writes the prose instead; the facts are kept either way,
//! so a parent can always be condensed from its children without a model.
//!
//! Everything is bounded: a leaf renders within [`LEAF_CHARS`], a parent within
//! [`PARENT_CHARS`]; when a list does not fit, its oldest items give way and their count stays.

use ctxhost_heuristics::FilesTouched;
use ctxhost_sdk::host::{self, CompletionRequest};
use ctxhost_sdk::serde_json::{self, Value};
use ctxhost_sdk::{HostError, Message, Role, ToolCall, log};
use serde::{Deserialize, Serialize};

/// Upper bound of a leaf's summary, in characters (~175 tokens).
pub const LEAF_CHARS: usize = 700;
/// Upper bound of a parent's summary, in characters (~250 tokens).
pub const PARENT_CHARS: usize = 1_000;
/// A request as a leaf quotes it: enough to recognise it and search for it.
const ASK_CHARS: usize = 160;
/// A request as a parent quotes it.
const PARENT_ASK_CHARS: usize = 90;
const OUTCOME_CHARS: usize = 160;
const TARGET_CHARS: usize = 40;
/// A standing rule and a failure's error line, as the host's extractive summary quotes them.
const RULE_CHARS: usize = 120;
const ERROR_LINE_CHARS: usize = 64;
/// What a model is shown of one message, and of a whole span.
const PROMPT_MESSAGE_CHARS: usize = 1_200;
const PROMPT_CHARS: usize = 16_000;

/// The facts of a span, oldest first; `*_elided` count what the bound left out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Facts {
    pub asked: Vec<String>,
    pub asked_elided: u32,
    pub rules: Vec<String>,
    pub failed: Vec<String>,
    pub failed_elided: u32,
    pub changed: Vec<String>,
    pub changed_elided: u32,
    pub outcome: Option<String>,
}

pub use ctxhost_heuristics::clip;

fn push_unique(list: &mut Vec<String>, item: String) {
    if !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}

/// What a call ran on, by the rules the host's summaries use.
fn call_target(call: &ToolCall) -> String {
    let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
    ctxhost_heuristics::call_target(&text_fields(&arguments), TARGET_CHARS)
}

/// A call's arguments as the shared rules read them: the top-level fields that hold text, in
/// document order (none unless the arguments are a JSON object).
fn text_fields(arguments: &Value) -> Vec<(&str, &str)> {
    let fields = arguments.as_object().into_iter().flatten();
    fields
        .filter_map(|(key, value)| Some((key.as_str(), value.as_str()?)))
        .collect()
}

/// The files the messages' calls modified, oldest first.
fn files_modified(messages: &[Message]) -> Vec<String> {
    let mut files = FilesTouched::default();
    for call in messages.iter().flat_map(|m| &m.tool_calls) {
        let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        files.record(&call.name, &text_fields(&arguments));
    }
    files.into_read_and_modified().1
}

/// The facts of a leaf's messages (oldest first).
pub fn leaf_facts(messages: &[Message]) -> Facts {
    let mut facts = Facts::default();
    for (i, message) in messages.iter().enumerate() {
        match message.role {
            Role::User if !ctxhost_heuristics::is_acknowledgement(&message.text) => {
                facts.asked.push(clip(&message.text, ASK_CHARS));
                for rule in ctxhost_heuristics::standing_instructions(&message.text, RULE_CHARS) {
                    push_unique(&mut facts.rules, clip(&rule, ASK_CHARS));
                }
            }
            Role::ToolResult | Role::BashExecution if message.is_error => {
                // The call it answers, searched back among the span's assistant messages.
                let call = message.tool_call_id.as_deref().and_then(|id| {
                    messages[..i]
                        .iter()
                        .rev()
                        .flat_map(|m| &m.tool_calls)
                        .find(|c| c.id == id)
                });
                let tool = message.tool_name.as_deref().unwrap_or("tool");
                let target = call.map(call_target).unwrap_or_default();
                let line = ctxhost_heuristics::error_line(&message.text, ERROR_LINE_CHARS);
                facts.failed.push(if target.is_empty() {
                    format!("{tool}: {line}")
                } else {
                    format!("{tool} `{target}`: {line}")
                });
            }
            Role::Assistant if !message.text.trim().is_empty() => {
                facts.outcome = Some(clip(&message.text, OUTCOME_CHARS));
            }
            _ => {}
        }
    }
    facts.changed = files_modified(messages);
    facts
}

/// The facts of a parent: its children's, merged oldest first.
pub fn merged_facts(children: &[&Facts]) -> Facts {
    let mut facts = Facts::default();
    for child in children {
        facts.asked_elided += child.asked_elided;
        facts.failed_elided += child.failed_elided;
        facts.changed_elided += child.changed_elided;
        facts.asked.extend(
            child
                .asked
                .iter()
                .map(|a| clip(a, PARENT_ASK_CHARS))
                .filter(|a| !a.is_empty()),
        );
        for rule in &child.rules {
            push_unique(&mut facts.rules, rule.clone());
        }
        facts.failed.extend(child.failed.iter().cloned());
        for file in &child.changed {
            // Newest last: a file changed again moves to the end.
            facts.changed.retain(|f| f != file);
            facts.changed.push(file.clone());
        }
        if child.outcome.is_some() {
            facts.outcome.clone_from(&child.outcome);
        }
    }
    facts
}

impl Facts {
    /// The facts as summary text within `max_chars`: the oldest requests, failures and files
    /// give way first (counted), rules and the outcome last.
    pub fn render_within(&mut self, max_chars: usize) -> String {
        loop {
            let text = self.render();
            if text.chars().count() <= max_chars {
                return text;
            }
            let longest = [self.asked.len(), self.failed.len(), self.changed.len()];
            let (list, elided) = match longest.iter().enumerate().max_by_key(|(_, n)| **n) {
                Some((0, n)) if *n > 1 => (&mut self.asked, &mut self.asked_elided),
                Some((1, n)) if *n > 1 => (&mut self.failed, &mut self.failed_elided),
                Some((2, n)) if *n > 1 => (&mut self.changed, &mut self.changed_elided),
                _ => {
                    // One item each and still too long: the rules go, then everything is cut.
                    if self.rules.pop().is_some() {
                        continue;
                    }
                    return clip(&text, max_chars);
                }
            };
            list.remove(0);
            *elided += 1;
        }
    }

    fn render(&self) -> String {
        let mut lines = Vec::new();
        let more = |n: u32| {
            if n == 0 {
                String::new()
            } else {
                format!(" (+{n} earlier)")
            }
        };
        if !self.asked.is_empty() || self.asked_elided > 0 {
            let quoted: Vec<String> = self.asked.iter().map(|a| format!("\"{a}\"")).collect();
            lines.push(format!(
                "asked{}: {}",
                more(self.asked_elided),
                quoted.join("; ")
            ));
        }
        if !self.rules.is_empty() {
            lines.push(format!("rules: {}", self.rules.join("; ")));
        }
        if !self.failed.is_empty() || self.failed_elided > 0 {
            lines.push(format!(
                "failed{}: {}",
                more(self.failed_elided),
                self.failed.join("; ")
            ));
        }
        if !self.changed.is_empty() || self.changed_elided > 0 {
            lines.push(format!(
                "changed{}: {}",
                more(self.changed_elided),
                self.changed.join(", ")
            ));
        }
        if let Some(outcome) = &self.outcome {
            lines.push(format!("ended with: {outcome}"));
        }
        if lines.is_empty() {
            lines.push("(no requests, failures or changes in this span)".into());
        }
        lines.join("\n")
    }
}

/// Who wrote a node's summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Author {
    /// Extracted from the messages (or the children's facts) without a model.
    Extractive,
    /// The operator's configured model, through `complete`.
    Model,
}

/// The operator's configured model, as far as this instance knows it: asked only while it
/// has not refused (`permission-denied`: the `llm` grant is missing, so it is not asked again)
/// and while the current hook has slow imports left (the host caps them per call).
#[derive(Debug, Default)]
pub struct Model {
    denied: bool,
    calls_left: u32,
}

impl Model {
    /// A hook starts: it may ask the model at most `calls` times.
    pub fn allow(&mut self, calls: u32) {
        self.calls_left = calls;
    }

    /// A summary of `material` within `max_chars`; `None` when the model is not granted,
    /// fails or answers nothing (the caller falls back to the extractive text). The material
    /// is built only when the model will be asked.
    fn summarize(&mut self, material: impl FnOnce() -> String, max_chars: usize) -> Option<String> {
        if self.denied || self.calls_left == 0 {
            return None;
        }
        self.calls_left -= 1;
        let request = CompletionRequest {
            system: Some(
                "You write one node of a hierarchical memory of a coding-agent session. In at \
                 most 120 words of plain text state what the user asked (quote briefly), \
                 decisions and why, errors and whether they were fixed, and files changed. No \
                 preamble."
                    .into(),
            ),
            prompt: material(),
            max_tokens: Some(400),
        };
        match host::complete(&request) {
            Ok(text) if !text.trim().is_empty() => Some(clip(text.trim(), max_chars)),
            Ok(_) => None,
            Err(HostError::PermissionDenied(_)) => {
                self.denied = true;
                None
            }
            Err(error) => {
                log::debug(format!("model summary failed, extracting instead: {error}"));
                None
            }
        }
    }
}

/// A leaf's messages as a model reads them: each clipped, the whole bounded.
fn leaf_material(messages: &[Message]) -> String {
    let mut material = String::from("Messages of the span, oldest first:\n");
    for message in messages {
        let who = match (message.role, message.tool_name.as_deref()) {
            (Role::ToolResult, Some(tool)) if message.is_error => format!("{tool} failed"),
            (Role::ToolResult, Some(tool)) => format!("{tool} output"),
            (role, _) => format!("{role:?}").to_lowercase(),
        };
        let calls: Vec<String> = message
            .tool_calls
            .iter()
            .map(|c| format!(" → {} {}", c.name, call_target(c)))
            .collect();
        material.push_str(&format!(
            "[{who}] {}{}\n",
            clip(&message.text, PROMPT_MESSAGE_CHARS),
            calls.join("")
        ));
        if material.len() > PROMPT_CHARS {
            break;
        }
    }
    material
}

/// A node's summary and who wrote it.
pub struct Written {
    pub text: String,
    pub author: Author,
}

/// The summary of a leaf.
pub fn write_leaf(messages: &[Message], facts: &mut Facts, model: &mut Model) -> Written {
    let extractive = facts.render_within(LEAF_CHARS);
    Written::by_model_or(
        model.summarize(|| leaf_material(messages), LEAF_CHARS),
        extractive,
    )
}

/// The summary of a parent, from its children's summaries (oldest first).
pub fn write_parent(children: &[&str], facts: &mut Facts, model: &mut Model) -> Written {
    let extractive = facts.render_within(PARENT_CHARS);
    let material = || {
        let mut text = String::from("Summaries of consecutive spans, oldest first:\n");
        for child in children {
            text.push_str(&format!("- {child}\n"));
        }
        text
    };
    Written::by_model_or(model.summarize(material, PARENT_CHARS), extractive)
}

impl Written {
    /// The model's summary when it wrote one, else the extractive one.
    fn by_model_or(model_text: Option<String>, extractive: String) -> Written {
        match model_text {
            Some(text) => Written {
                text,
                author: Author::Model,
            },
            None => Written {
                text: extractive,
                author: Author::Extractive,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::serde_json::json;
    use ctxhost_sdk::testing::{TestHost, message, tool_call, tool_result};

    fn span() -> Vec<Message> {
        let mut failed = tool_result(3, "bash", "running\nerror[E0308]: mismatched types\n");
        failed.is_error = true;
        failed.tool_call_id = Some("call-2".into());
        vec![
            message(0, Role::User, "Fix the parser. Never touch the lexer."),
            tool_call(1, "edit", json!({"path": "src/parser.rs"})),
            tool_call(2, "bash", json!({"command": "cargo test"})),
            failed,
            message(4, Role::User, "ok"),
            message(
                5,
                Role::Assistant,
                "The parser now accepts trailing commas.",
            ),
        ]
    }

    #[test]
    fn a_leaf_keeps_requests_rules_failures_files_and_the_outcome() {
        let mut facts = leaf_facts(&span());
        assert_eq!(facts.asked, ["Fix the parser. Never touch the lexer."]);
        assert_eq!(facts.rules, ["Never touch the lexer."]);
        assert_eq!(
            facts.failed,
            ["bash `cargo test`: error[E0308]: mismatched types"]
        );
        assert_eq!(facts.changed, ["src/parser.rs"]);
        let text = facts.render_within(LEAF_CHARS);
        assert!(
            text.ends_with("ended with: The parser now accepts trailing commas."),
            "{text}"
        );
        assert!(
            !text.contains("\"ok\""),
            "acknowledgements are not requests"
        );
    }

    #[test]
    fn a_bound_drops_the_oldest_items_and_keeps_their_count() {
        let mut facts = Facts {
            asked: (0..40).map(|i| format!("request number {i}")).collect(),
            ..Facts::default()
        };
        let text = facts.render_within(200);
        assert!(text.chars().count() <= 200, "{text}");
        assert!(text.contains("request number 39"), "{text}");
        assert!(!text.contains("request number 0\""), "{text}");
        assert!(
            text.starts_with(&format!("asked (+{} earlier)", facts.asked_elided)),
            "{text}"
        );
    }

    #[test]
    fn parents_merge_children_and_files_move_to_their_latest_change() {
        let a = Facts {
            asked: vec!["a".into()],
            changed: vec!["x.rs".into(), "y.rs".into()],
            outcome: Some("first".into()),
            ..Facts::default()
        };
        let b = Facts {
            asked: vec!["b".into()],
            asked_elided: 2,
            changed: vec!["x.rs".into()],
            ..Facts::default()
        };
        let merged = merged_facts(&[&a, &b]);
        assert_eq!(merged.asked, ["a", "b"]);
        assert_eq!(merged.asked_elided, 2);
        assert_eq!(merged.changed, ["y.rs", "x.rs"]);
        assert_eq!(merged.outcome.as_deref(), Some("first"));
    }

    #[test]
    fn the_model_writes_when_granted_and_extraction_serves_when_it_fails() {
        let messages = span();
        let host = TestHost::new().on_complete(|request| {
            assert!(request.prompt.contains("Fix the parser"));
            Ok("  The user asked to fix the parser.  ".into())
        });
        let mut model = Model::default();
        model.allow(1);
        let written = host.run(|| write_leaf(&messages, &mut leaf_facts(&messages), &mut model));
        assert_eq!(written.author, Author::Model);
        assert_eq!(written.text, "The user asked to fix the parser.");
        // One slow import allowed, one used: the next summary is extracted.
        let written = host.run(|| write_leaf(&messages, &mut leaf_facts(&messages), &mut model));
        assert_eq!(written.author, Author::Extractive);
        assert_eq!(host.calls(), ["complete"]);

        let failing =
            TestHost::new().on_complete(|_| Err(HostError::Unavailable("no model".into())));
        model.allow(4);
        let written = failing.run(|| write_leaf(&messages, &mut leaf_facts(&messages), &mut model));
        assert_eq!(written.author, Author::Extractive);
        assert!(written.text.starts_with("asked: \"Fix the parser."));

        // Not granted: asked once, never again in this instance.
        let denied = TestHost::new();
        denied.run(|| write_parent(&["a"], &mut Facts::default(), &mut model));
        denied.run(|| write_parent(&["b"], &mut Facts::default(), &mut model));
        assert_eq!(denied.calls(), ["complete"]);
    }
}
