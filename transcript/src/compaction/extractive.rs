//! A summarizer that needs no model: it extracts the goal, the files touched, tool failures,
//! open questions and the last exchanges into markdown sections. Deterministic and bounded, so
//! the whole product works offline and repeated compactions never grow the summary unbounded.

use serde_json::Value;

use crate::message::MessageView;
use crate::role::Role;

/// Upper bound on the summary, in characters (~2,000 tokens).
pub const MAX_CHARS: usize = 8000;

const MAX_FILES: usize = 40;
const MAX_FAILURES: usize = 10;
const MAX_QUESTIONS: usize = 5;
const RECENT: usize = 6;

/// One line, at most `max` chars, with an ellipsis when shortened.
fn clip(text: &str, max: usize) -> String {
    let flat: String = text
        .trim()
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        return flat;
    }
    let mut s: String = flat.chars().take(max.saturating_sub(1)).collect();
    s.push('…');
    s
}

fn push_unique(list: &mut Vec<String>, item: String) {
    if !item.is_empty() && !list.contains(&item) {
        list.push(item);
    }
}

/// Files read and files modified, from tool-call arguments (`path` / `file_path`) of read vs
/// edit/write tools. A file both read and modified is listed as modified only.
pub fn file_operations(messages: &[MessageView]) -> (Vec<String>, Vec<String>) {
    let (mut read, mut modified) = (Vec::new(), Vec::new());
    for call in messages.iter().flat_map(|m| &m.tool_calls) {
        let Ok(args) = serde_json::from_str::<Value>(&call.arguments) else {
            continue;
        };
        let Some(path) = ["path", "file_path"]
            .iter()
            .find_map(|k| args.get(k).and_then(Value::as_str))
        else {
            continue;
        };
        match call.name.to_ascii_lowercase().as_str() {
            "read" | "read_file" | "view" => push_unique(&mut read, path.to_string()),
            "edit" | "write" | "edit_file" | "write_file" | "multiedit" | "multi_edit" => {
                push_unique(&mut modified, path.to_string())
            }
            _ => {}
        }
    }
    read.retain(|p| !modified.contains(p));
    (read, modified)
}

/// The bullets of a previous extractive summary, by section, so a new summary merges them
/// instead of nesting the old text.
#[derive(Default)]
struct Previous {
    goal: Vec<String>,
    read: Vec<String>,
    modified: Vec<String>,
    failures: Vec<String>,
    questions: Vec<String>,
    structured: bool,
}

impl Previous {
    fn parse(text: &str) -> Previous {
        let mut p = Previous::default();
        let mut section = "";
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("## ") {
                section = h.trim();
                continue;
            }
            let Some(item) = line.strip_prefix("- ") else {
                continue;
            };
            let list = match section {
                "Goal" => &mut p.goal,
                "Files read" => &mut p.read,
                "Files modified" => &mut p.modified,
                "Tool failures" => &mut p.failures,
                "Open questions" => &mut p.questions,
                _ => continue,
            };
            p.structured = true;
            push_unique(list, item.trim().to_string());
        }
        p
    }
}

fn section(out: &mut String, title: &str, items: &[String]) {
    if items.is_empty() {
        return;
    }
    out.push_str("## ");
    out.push_str(title);
    out.push('\n');
    for item in items {
        out.push_str("- ");
        out.push_str(item);
        out.push('\n');
    }
    out.push('\n');
}

fn last_n(mut items: Vec<String>, n: usize) -> Vec<String> {
    let drop = items.len().saturating_sub(n);
    items.drain(..drop);
    items
}

/// Summarize `messages` (oldest first), merging `previous_summary`; `focus` is the operator's
/// custom instruction, recorded so the reader knows what the compaction was asked to keep.
pub fn summarize(
    messages: &[MessageView],
    previous_summary: Option<&str>,
    focus: Option<&str>,
) -> String {
    let prev = previous_summary.map(Previous::parse).unwrap_or_default();
    let users = || {
        messages
            .iter()
            .filter(|m| m.role == Role::User && !m.text.trim().is_empty())
    };

    let goal = if prev.goal.is_empty() {
        users().take(3).map(|m| clip(&m.text, 400)).collect()
    } else {
        prev.goal.clone()
    };

    let (read_new, modified_new) = file_operations(messages);
    let mut modified = prev.modified.clone();
    modified_new
        .into_iter()
        .for_each(|p| push_unique(&mut modified, p));
    let mut read = prev.read.clone();
    read_new.into_iter().for_each(|p| push_unique(&mut read, p));
    read.retain(|p| !modified.contains(p));

    let mut failures = prev.failures.clone();
    for m in messages
        .iter()
        .filter(|m| m.role == Role::ToolResult && m.is_error)
    {
        let first = m
            .text
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no output)");
        let tool = m.tool_name.as_deref().unwrap_or("tool");
        push_unique(&mut failures, format!("{tool}: {}", clip(first, 160)));
    }

    let mut questions = prev.questions.clone();
    for m in users().filter(|m| m.text.trim_end().ends_with('?')) {
        push_unique(&mut questions, clip(&m.text, 300));
    }

    let recent: Vec<String> = messages
        .iter()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant) && !m.text.trim().is_empty())
        .map(|m| format!("**{}**: {}", m.role.as_str(), clip(&m.text, 240)))
        .collect();

    let mut out = String::new();
    section(&mut out, "Goal", &goal);
    if let Some(f) = focus.filter(|f| !f.trim().is_empty()) {
        section(&mut out, "Focus", &[clip(f, 400)]);
    }
    if let Some(text) = previous_summary.filter(|t| !prev.structured && !t.trim().is_empty()) {
        // A summary written by a model: keep its opening, it is the best account of the past.
        section(&mut out, "Earlier context", &[clip(text, 2000)]);
    }
    section(&mut out, "Files read", &last_n(read, MAX_FILES));
    section(&mut out, "Files modified", &last_n(modified, MAX_FILES));
    section(&mut out, "Tool failures", &last_n(failures, MAX_FAILURES));
    section(
        &mut out,
        "Open questions",
        &last_n(questions, MAX_QUESTIONS),
    );
    section(&mut out, "Recent exchanges", &last_n(recent, RECENT));
    if out.is_empty() {
        out.push_str("## Goal\n- (no user messages in the compacted part)\n");
    }
    let out = out.trim_end().to_string();
    if out.chars().count() <= MAX_CHARS {
        return out;
    }
    let mut cut: String = out.chars().take(MAX_CHARS - 24).collect();
    cut.push_str("\n…(summary truncated)");
    cut
}

/// One summary from partial extractive summaries (oldest first): the goal of the first, the
/// union of every list (files, failures, questions, decisions, pinned), the latest exchanges;
/// bounded like [`summarize`]. Free text (a model's summary) is kept under its own heading.
pub fn merge(parts: &[String]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut items: Vec<Vec<String>> = Vec::new();
    for part in parts {
        let mut current: Option<usize> = None;
        for line in part.lines() {
            if let Some(h) = line.strip_prefix("## ") {
                let title = h.trim().to_string();
                let idx = match order.iter().position(|t| *t == title) {
                    Some(i) => i,
                    None => {
                        order.push(title);
                        items.push(Vec::new());
                        order.len() - 1
                    }
                };
                // The goal is the first part's; later parts restate their own opening.
                current = (order[idx] != "Goal" || items[idx].is_empty()).then_some(idx);
                continue;
            }
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            let idx = match current {
                Some(i) => i,
                None if order.iter().all(|t| t != "Goal") || !text.starts_with("- ") => {
                    let title = "Earlier context".to_string();
                    let i = match order.iter().position(|t| *t == title) {
                        Some(i) => i,
                        None => {
                            order.push(title);
                            items.push(Vec::new());
                            order.len() - 1
                        }
                    };
                    current = Some(i);
                    i
                }
                None => continue,
            };
            let item = text.strip_prefix("- ").unwrap_or(text).to_string();
            push_unique(&mut items[idx], item);
        }
    }
    let mut out = String::new();
    for (title, list) in order.iter().zip(items) {
        let cap = match title.as_str() {
            "Files read" | "Files modified" => MAX_FILES,
            "Tool failures" => MAX_FAILURES,
            "Open questions" => MAX_QUESTIONS,
            "Recent exchanges" => RECENT,
            _ => 40,
        };
        section(&mut out, title, &last_n(list, cap));
    }
    let out = out.trim_end().to_string();
    if out.chars().count() <= MAX_CHARS {
        return out;
    }
    let mut cut: String = out.chars().take(MAX_CHARS - 24).collect();
    cut.push_str("\n…(summary truncated)");
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn msg(role: Role, text: &str) -> MessageView {
        MessageView {
            role,
            timestamp: 0,
            text: text.into(),
            tool_calls: vec![],
            tool_name: None,
            is_error: false,
            stop_reason: None,
            usage: None,
            tokens: 1,
        }
    }

    fn call(name: &str, args: &str) -> MessageView {
        let mut m = msg(Role::Assistant, "");
        m.tool_calls.push(ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.into(),
        });
        m
    }

    #[test]
    fn sections_from_messages() {
        let mut fail = msg(Role::ToolResult, "\nENOENT: no such file\nmore");
        fail.is_error = true;
        fail.tool_name = Some("read".into());
        let msgs = vec![
            msg(Role::User, "Port the selector to the new theme"),
            call("read", r#"{"path":"src/a.ts"}"#),
            call("read", r#"{"path":"src/b.ts"}"#),
            call("edit", r#"{"path":"src/b.ts","oldText":"x","newText":"y"}"#),
            call("write", r#"{"file_path":"src/c.ts","content":""}"#),
            fail,
            msg(Role::User, "Should we keep the old colors?"),
            msg(Role::Assistant, "Done."),
        ];
        let s = summarize(&msgs, None, Some("keep the API notes"));
        assert!(
            s.starts_with("## Goal\n- Port the selector to the new theme\n"),
            "{s}"
        );
        assert!(s.contains("## Focus\n- keep the API notes"));
        assert!(s.contains("## Files read\n- src/a.ts\n\n"), "{s}");
        assert!(s.contains("## Files modified\n- src/b.ts\n- src/c.ts\n"));
        assert!(s.contains("## Tool failures\n- read: ENOENT: no such file\n"));
        assert!(s.contains("## Open questions\n- Should we keep the old colors?"));
        assert!(s.contains("**assistant**: Done."));
        assert_eq!(s, summarize(&msgs, None, Some("keep the API notes")));
    }

    #[test]
    fn merges_previous_summary_without_nesting() {
        let first = summarize(
            &[
                msg(Role::User, "Goal one"),
                call("edit", r#"{"path":"x.rs"}"#),
            ],
            None,
            None,
        );
        let second = summarize(&[call("write", r#"{"path":"y.rs"}"#)], Some(&first), None);
        assert!(second.contains("## Goal\n- Goal one\n"), "{second}");
        assert!(second.contains("- x.rs\n- y.rs"), "{second}");
        assert_eq!(second.matches("## Goal").count(), 1);
        let free = summarize(&[], Some("The model wrote this."), None);
        assert!(free.contains("## Earlier context\n- The model wrote this."));
    }

    #[test]
    fn merge_unions_sections_and_keeps_the_first_goal() {
        let a = summarize(
            &[
                msg(Role::User, "Goal A"),
                call("edit", r#"{"path":"a.rs"}"#),
            ],
            None,
            None,
        );
        let b = summarize(
            &[
                msg(Role::User, "Later ask?"),
                call("edit", r#"{"path":"b.rs"}"#),
            ],
            None,
            None,
        );
        let m = merge(&[a, b]);
        assert!(m.starts_with("## Goal\n- Goal A\n\n"), "{m}");
        assert!(m.contains("- a.rs\n- b.rs"), "{m}");
        assert!(m.contains("## Open questions\n- Later ask?"), "{m}");
        assert!(
            !m.contains("- Later ask?\n\n## Files"),
            "the second goal is not kept: {m}"
        );
        let free = merge(&["A model wrote this.".into(), "## Goal\n- g".into()]);
        assert!(
            free.contains("## Earlier context\n- A model wrote this."),
            "{free}"
        );
    }

    #[test]
    fn bounded_in_size() {
        let long: Vec<MessageView> = (0..500)
            .map(|i| {
                let mut m = call(
                    "edit",
                    &format!(r#"{{"path":"src/very/long/path/number/{i}.rs"}}"#),
                );
                m.text = "x".repeat(1000);
                m
            })
            .chain((0..50).map(|i| msg(Role::User, &format!("{} question {i}?", "y".repeat(500)))))
            .collect();
        let s = summarize(&long, Some(&"z".repeat(50_000)), Some(&"f".repeat(10_000)));
        assert!(s.chars().count() <= MAX_CHARS, "{}", s.chars().count());
    }
}
