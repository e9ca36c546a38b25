//! The restore message: a checkpoint rendered for the model, lean on purpose. It is inserted at
//! the start of the kept context after a compaction and in a new session, and every token it
//! costs is paid on each turn after, so it says each thing once, in short lines, and lists
//! only the newest items of long lists (the checkpoint file has them all).
//!
//! After a compaction it follows the runtime's summary, which already carries the current
//! task, the user's requests, files and tool failures: there it adds only what the summary
//! lacks — where the work stands, what to do next, and the user's decisions. In a new session
//! there is no summary, and it renders everything.

use std::fmt::Write;

use crate::checkpoint::{Checkpoint, ExchangeRole, Status};

/// The `customType` of the inserted message.
pub const CUSTOM_TYPE: &str = "checkpoint-restore";
/// Above this many compactions the restore suggests a fresh session.
pub const COMPACTION_WARNING_AFTER: u32 = 3;

/// Items of each list shown; the rest are counted.
const SHOW_DECISIONS: usize = 6;
const SHOW_FILES_MODIFIED: usize = 25;
const SHOW_FILES_READ: usize = 10;
const SHOW_ITEMS: usize = 4;

/// Why the restore is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occasion {
    Compaction,
    NewSession,
}

/// The newest `show` paths, grouped by directory, with the number of older ones left out.
fn newest(paths: &[&String], show: usize) -> String {
    let skip = paths.len().saturating_sub(show);
    let mut line = grouped(&paths[skip..]);
    if skip > 0 {
        let _ = write!(line, " (+{skip} earlier)");
    }
    line
}

/// `a/b/x.ts, a/b/y.ts, c.md` → `a/b/{x.ts, y.ts}, c.md`: each directory written once. Groups
/// keep the order in which their directories first appear.
fn grouped(paths: &[&String]) -> String {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    for path in paths {
        let (dir, file) = match path.rfind('/') {
            Some(slash) => path.split_at(slash + 1),
            None => ("", path.as_str()),
        };
        match groups.iter_mut().find(|(existing, _)| *existing == dir) {
            Some((_, files)) => files.push(file),
            None => groups.push((dir, vec![file])),
        }
    }
    let groups: Vec<String> = groups
        .into_iter()
        .map(|(dir, files)| match files.as_slice() {
            [file] => format!("{dir}{file}"),
            _ => format!("{dir}{{{}}}", files.join(", ")),
        })
        .collect();
    groups.join(", ")
}

/// Folded and lower-cased: how a decision is looked for in the summary.
fn folded(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// Characters of a decision's opening that identify it in the summary's request ledger (whose
/// items quote more than this).
const DECISION_KEY_CHARS: usize = 40;

/// The restore text. `summary` is the runtime's summary it follows after a compaction: the
/// decisions it already quotes are not repeated, so the restore's lines go to older ones the
/// summary's ledger elided.
pub fn render(checkpoint: &Checkpoint, occasion: Occasion, summary: Option<&str>) -> String {
    let meta = &checkpoint.meta;
    let working = &checkpoint.working;
    let mut out = String::with_capacity(2048);
    let why = match occasion {
        Occasion::Compaction => "the context was compacted",
        Occasion::NewSession => "a new session started",
    };
    let _ = writeln!(
        out,
        "[Checkpoint {} of {}, {}: {why}. Working state restored; files on disk are the source of truth.]",
        meta.checkpoint_id, meta.session_key, meta.created_at
    );

    let full = occasion == Occasion::NewSession;
    if full && !working.topic.is_empty() {
        let _ = writeln!(out, "Topic: {}", working.topic);
    }
    let status = match working.status {
        Status::InProgress => "in progress",
        Status::Idle => "idle",
        Status::WaitingForUser => "waiting for the user",
    };
    let _ = write!(out, "Status: {status}");
    if working.interrupted {
        out.push_str(", interrupted mid-turn");
    }
    if let Some(tool) = &working.last_tool_call {
        let _ = write!(out, "; last tool: {tool}");
    }
    let _ = writeln!(out, "\nNext: {}", working.next_action);

    let summary = summary.map(folded);
    let decisions: Vec<&crate::checkpoint::Decision> = checkpoint
        .decisions
        .iter()
        .filter(|d| {
            let said = d.what.split(" (re: ").next().unwrap_or(&d.what);
            let key: String = folded(said).chars().take(DECISION_KEY_CHARS).collect();
            summary.as_ref().is_none_or(|s| !s.contains(&key))
        })
        .collect();
    if !decisions.is_empty() {
        out.push_str("Decisions:\n");
        let skip = decisions.len().saturating_sub(SHOW_DECISIONS);
        for decision in &decisions[skip..] {
            // `2025-03-01T09:30:00Z` → `03-01 09:30`: the date and minute are what matter.
            let when = decision
                .when
                .get(5..16)
                .unwrap_or(&decision.when)
                .replace('T', " ");
            let _ = writeln!(out, "- {when} {}", decision.what);
        }
        if skip > 0 {
            let _ = writeln!(out, "- (+{skip} earlier)");
        }
    }

    if full {
        render_rest(&mut out, checkpoint);
    }

    if meta.compaction_count > COMPACTION_WARNING_AFTER {
        let _ = writeln!(
            out,
            "Warning: this session was compacted {} times; details are getting lost. Consider a fresh session seeded from this checkpoint.",
            meta.compaction_count
        );
    }
    out.truncate(out.trim_end().len());
    out
}

/// The thread, files, tools, open items and learnings: what a new session has no summary of.
fn render_rest(out: &mut String, checkpoint: &Checkpoint) {
    let thread = &checkpoint.thread;
    if !thread.summary.is_empty() {
        let _ = writeln!(out, "Thread: {}", thread.summary);
    }
    for exchange in &thread.key_exchanges {
        let who = match exchange.role {
            ExchangeRole::User => "user",
            ExchangeRole::Agent => "agent",
        };
        let _ = writeln!(out, "- {who}: {}", exchange.gist);
    }

    let resources = &checkpoint.resources;
    let modified: Vec<&String> = resources.files_modified.iter().collect();
    if !modified.is_empty() {
        let _ = writeln!(out, "Modified: {}", newest(&modified, SHOW_FILES_MODIFIED));
    }
    // A modified file was read too: listing it twice would only cost tokens.
    let read: Vec<&String> = resources
        .files_read
        .iter()
        .filter(|path| !resources.files_modified.contains(path))
        .collect();
    if !read.is_empty() {
        let _ = writeln!(out, "Also read: {}", newest(&read, SHOW_FILES_READ));
    }
    if !resources.tools_used.is_empty() {
        let _ = writeln!(out, "Tools: {}", resources.tools_used.join(", "));
    }

    if !checkpoint.open_items.is_empty() {
        out.push_str("Open (failed, not yet resolved):\n");
        for item in newest_items(&checkpoint.open_items) {
            let _ = writeln!(out, "- {item}");
        }
    }
    if !checkpoint.learnings.is_empty() {
        out.push_str("Learnings (consider storing to long-term memory):\n");
        for item in newest_items(&checkpoint.learnings) {
            let _ = writeln!(out, "- {item}");
        }
    }
}

fn newest_items(items: &[String]) -> &[String] {
    &items[items.len().saturating_sub(SHOW_ITEMS)..]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::tests::sample;
    use crate::checkpoint::{Decision, Exchange};

    #[test]
    fn renders_every_section_compactly() {
        let mut checkpoint = sample("Fix the parser");
        checkpoint.learnings = vec!["\"edit\" on a.rs: no match".into()];
        let text = render(&checkpoint, Occasion::NewSession, None);
        let expected = "\
[Checkpoint cp_007 of agent:main:telegram:dm:42, 2025-03-01T09:30:00Z: a new session started. Working state restored; files on disk are the source of truth.]
Topic: Fix the parser
Status: in progress, interrupted mid-turn; last tool: Fix the parser
Next: Fix the parser
Decisions:
- 03-01 09:00 Fix the parser
Thread: Fix the parser
- user: Fix the parser
- agent: done
Modified: Fix the parser
Also read: src/main.rs
Tools: read, Fix the parser
Open (failed, not yet resolved):
- Fix the parser
Learnings (consider storing to long-term memory):
- \"edit\" on a.rs: no match";
        assert_eq!(text, expected);
    }

    #[test]
    fn after_a_compaction_only_what_the_summary_lacks() {
        let checkpoint = sample("Fix the parser");
        let text = render(&checkpoint, Occasion::Compaction, None);
        let expected = "\
[Checkpoint cp_007 of agent:main:telegram:dm:42, 2025-03-01T09:30:00Z: the context was compacted. Working state restored; files on disk are the source of truth.]
Status: in progress, interrupted mid-turn; last tool: Fix the parser
Next: Fix the parser
Decisions:
- 03-01 09:00 Fix the parser";
        assert_eq!(text, expected);
    }

    #[test]
    fn after_a_compaction_decisions_the_summary_quotes_give_way_to_older_ones() {
        let mut checkpoint = sample("x");
        checkpoint.decisions = (1..=10)
            .map(|i| Decision {
                id: format!("d_{i:03}"),
                what: format!("Keep   the decision number {i:02} as it was (re: …the question)"),
                when: "2025-03-01T09:00:00Z".into(),
            })
            .collect();
        let summary = "## User requests\n- keep the decision number 09 as it was\n- Keep the decision number 10 as it was";
        let text = render(&checkpoint, Occasion::Compaction, Some(summary));
        assert!(
            !text.contains("number 10") && !text.contains("number 09"),
            "{text}"
        );
        assert!(
            text.contains("number 08") && text.contains("number 03"),
            "{text}"
        );
        assert!(
            !text.contains("number 02") && text.contains("- (+2 earlier)"),
            "{text}"
        );
        let without = render(&checkpoint, Occasion::Compaction, None);
        assert!(without.contains("number 10"), "{without}");
    }

    #[test]
    fn paths_are_grouped_by_directory_and_modified_files_are_not_listed_as_read() {
        let mut checkpoint = sample("x");
        checkpoint.resources.files_modified = [
            "src/a.rs",
            "README.md",
            "src/b.rs",
            "src/ui/c.ts",
            "日本/d.md",
        ]
        .map(String::from)
        .to_vec();
        checkpoint.resources.files_read = ["src/a.rs", "docs/x.md", "docs/y.md"]
            .map(String::from)
            .to_vec();
        let text = render(&checkpoint, Occasion::NewSession, None);
        assert!(
            text.contains("Modified: src/{a.rs, b.rs}, README.md, src/ui/c.ts, 日本/d.md\n"),
            "{text}"
        );
        assert!(text.contains("Also read: docs/{x.md, y.md}\n"), "{text}");
    }

    #[test]
    fn warns_after_three_compactions() {
        let mut checkpoint = sample("x");
        checkpoint.meta.compaction_count = 3;
        assert!(!render(&checkpoint, Occasion::Compaction, None).contains("fresh session"));
        checkpoint.meta.compaction_count = 4;
        let text = render(&checkpoint, Occasion::Compaction, None);
        assert!(
            text.ends_with("Consider a fresh session seeded from this checkpoint."),
            "{text}"
        );
        assert!(text.contains("compacted 4 times"));
    }

    #[test]
    fn long_lists_show_their_newest_items_and_count_the_rest() {
        let mut checkpoint = sample("x");
        checkpoint.resources.files_modified = (0..30).map(|i| format!("f{i}")).collect();
        checkpoint.resources.files_read = (0..100).map(|i| format!("r{i}")).collect();
        checkpoint.decisions = (1..=50)
            .map(|i| Decision {
                id: format!("d_{i:03}"),
                what: format!("decision {i}"),
                when: "2025-03-01T09:00:00Z".into(),
            })
            .collect();
        checkpoint.thread.key_exchanges = vec![
            Exchange {
                role: ExchangeRole::User,
                gist: "u".repeat(121),
            };
            8
        ];
        checkpoint.open_items = (0..20).map(|i| format!("open {i}")).collect();
        let text = render(&checkpoint, Occasion::NewSession, None);
        assert!(text.contains("Modified: {f5, f6, "), "{text}");
        assert!(text.contains("f29} (+5 earlier)"));
        assert!(text.contains("Also read: {r90, "));
        assert!(text.contains("r99} (+90 earlier)"));
        assert!(text.contains("- 03-01 09:00 decision 45\n"));
        assert!(!text.contains("decision 44\n"));
        assert!(text.contains("- (+44 earlier)"));
        assert!(text.contains("- open 16\n") && !text.contains("open 15"));
        // Every cap applied, the worst case stays within the spec's 600–700 token target.
        let tokens = ctxhost_sdk::estimate_tokens(&text);
        assert!(tokens < 700, "{tokens} tokens:\n{text}");
    }
}
