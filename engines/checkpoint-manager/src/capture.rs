//! Incremental capture: what `ingest` learns from each message, as pure computation.
//!
//! Nothing here calls the host or a model; a message is looked at once, when it arrives, and
//! the few facts a checkpoint needs are kept (with caps, so a long session cannot grow them
//! without bound). The four parts are persisted separately, as the spec's state files, and only
//! when they changed.

use ctxhost_heuristics::is_acknowledgement;
use ctxhost_sdk::serde_json::{self, Value};
use ctxhost_sdk::{Message, Role};
use serde::{Deserialize, Serialize};

use crate::checkpoint::{self, Checkpoint, Decision, Status};
use crate::thread::{ThreadState, gist};
use crate::time::iso_utc;

/// At most this many decisions (the newest are kept).
pub const MAX_DECISIONS: usize = 50;
/// At most this many tool names and file paths per list (the most recently used are kept).
pub const MAX_RESOURCES: usize = 100;
/// At most this many open items and learnings each.
pub const MAX_ISSUES: usize = 20;
/// A user message shorter than this, right after a long agent response, is a decision (unless
/// it only acknowledges: see [`is_acknowledgement`]).
pub const DECISION_MAX_CHARS: usize = 120;
/// Characters of a failed tool's output kept as its gist.
const FAILURE_GIST_CHARS: usize = 100;
/// Characters of the agent's response quoted after a decision, for context.
const DECISION_CONTEXT_CHARS: usize = 50;

/// A list of distinct strings in order of last use, capped: using an item again moves it to the
/// end, and the least recently used item goes first when the cap is reached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RecentSet(pub Vec<String>);

impl RecentSet {
    /// Records a use of `item`; returns whether the list changed.
    pub fn touch(&mut self, item: &str, cap: usize) -> bool {
        if self.0.last().is_some_and(|last| last == item) {
            return false;
        }
        self.0.retain(|existing| existing != item);
        self.0.push(item.to_string());
        let excess = self.0.len().saturating_sub(cap);
        self.0.drain(..excess);
        true
    }
}

/// `resources.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub files_read: RecentSet,
    pub files_modified: RecentSet,
    pub tools_used: RecentSet,
}

/// `decisions.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decisions {
    pub items: Vec<Decision>,
    /// Decisions ever made in the session (ids stay unique after the oldest are dropped).
    pub made: u32,
}

/// A tool call that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub tool: String,
    /// The file or target of the call, when its arguments named one.
    pub target: Option<String>,
    pub gist: String,
}

impl Failure {
    /// `"edit" on src/a.rs: Could not find the text` — the line a checkpoint lists.
    pub fn describe(&self) -> String {
        match &self.target {
            Some(target) => format!("\"{}\" on {target}: {}", self.tool, self.gist),
            None => format!("\"{}\": {}", self.tool, self.gist),
        }
    }
}

/// `open_items.json`: failures not yet followed by a success of the same tool, and those that
/// were (what went wrong once and was overcome: worth remembering beyond the session).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenItems {
    pub open: Vec<Failure>,
    pub learned: Vec<Failure>,
}

/// A tool call of the agent's, as the checkpoint remembers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRef {
    pub id: String,
    pub tool: String,
    pub target: Option<String>,
}

/// The part of `thread.json` that is not the thread: where the conversation stands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Working {
    pub last_role: Option<LastRole>,
    /// The agent's newest tool call.
    pub last_call: Option<CallRef>,
    /// The calls of the agent's newest message (to name a failing call's target).
    pub pending: Vec<CallRef>,
    /// The end of the agent's newest text, quoted with a decision.
    pub agent_tail: String,
}

/// The role of the newest message, as far as the working status is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LastRole {
    User,
    /// The agent answered and ended its turn.
    AgentReply,
    /// The agent called tools and waits for their results.
    AgentToolCall,
    ToolResult,
}

/// `thread.json`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadFile {
    pub thread: ThreadState,
    pub working: Working,
}

/// Which parts changed since they were last saved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dirty {
    pub decisions: bool,
    pub thread: bool,
    pub resources: bool,
    pub open_items: bool,
}

impl Dirty {
    pub fn any(self) -> bool {
        self.decisions || self.thread || self.resources || self.open_items
    }
}

/// Everything captured for one session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capture {
    pub decisions: Decisions,
    pub thread: ThreadFile,
    pub resources: Resources,
    pub open_items: OpenItems,
    dirty: Dirty,
}

/// What a tool does to files, read from its name (the names pi, OpenClaw and Claude Code use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileAccess {
    Read,
    Modify,
}

fn file_access(tool: &str) -> Option<FileAccess> {
    let name: String = tool
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    match name.as_str() {
        "read" | "readfile" => Some(FileAccess::Read),
        "write" | "writefile" | "edit" | "editfile" | "multiedit" => Some(FileAccess::Modify),
        _ => None,
    }
}

/// The `path` (or `file_path`) argument of a call, when it has one.
fn path_argument(arguments: &str) -> Option<String> {
    let arguments: Value = serde_json::from_str(arguments).ok()?;
    ["path", "file_path"]
        .iter()
        .find_map(|key| arguments.get(key)?.as_str())
        .map(str::trim)
        .filter(|path| !path.is_empty())
        .map(str::to_string)
}

/// The last `max` characters of `text`, whitespace folded, with a leading `…` when cut.
fn tail_gist(text: &str, max: usize) -> String {
    let folded = gist(text, usize::MAX);
    let chars = folded.chars().count();
    if chars <= max {
        return folded;
    }
    let tail: String = folded.chars().skip(chars - max).collect();
    format!("…{}", tail.trim_start())
}

/// Pushes `item` (moving an equal one to the end instead of repeating it), dropping the oldest
/// items beyond `cap`.
fn push_capped<T: PartialEq>(items: &mut Vec<T>, item: T, cap: usize) {
    items.retain(|existing| *existing != item);
    items.push(item);
    let excess = items.len().saturating_sub(cap);
    items.drain(..excess);
}

impl Capture {
    /// Seeds a capture from a checkpoint, for when the state files are stale: the checkpoint
    /// was written from that same state, so decisions, files, tools and open items carry over.
    /// The thread does not: it describes the conversation that comes next.
    pub fn from_checkpoint(checkpoint: &Checkpoint) -> Self {
        let list = |items: &[String]| RecentSet(items.to_vec());
        let as_failures = |items: &[String]| {
            items
                .iter()
                .map(|text| Failure {
                    tool: String::new(),
                    target: None,
                    gist: text.clone(),
                })
                .collect()
        };
        let made = checkpoint
            .decisions
            .iter()
            .filter_map(|d| d.id.strip_prefix("d_")?.parse::<u32>().ok())
            .max()
            .unwrap_or(0);
        Capture {
            decisions: Decisions {
                items: checkpoint.decisions.clone(),
                made,
            },
            thread: ThreadFile::default(),
            resources: Resources {
                files_read: list(&checkpoint.resources.files_read),
                files_modified: list(&checkpoint.resources.files_modified),
                tools_used: list(&checkpoint.resources.tools_used),
            },
            open_items: OpenItems {
                open: as_failures(&checkpoint.open_items),
                learned: as_failures(&checkpoint.learnings),
            },
            dirty: Dirty {
                decisions: true,
                thread: true,
                resources: true,
                open_items: true,
            },
        }
    }

    /// Which parts changed since the last call; they are clean afterwards.
    pub fn take_dirty(&mut self) -> Dirty {
        std::mem::take(&mut self.dirty)
    }

    /// Whether anything changed since the last [`take_dirty`](Self::take_dirty).
    pub fn is_dirty(&self) -> bool {
        self.dirty.any()
    }

    /// Learns from one message.
    pub fn ingest(&mut self, message: &Message) {
        match message.role {
            Role::User => self.user(message),
            Role::Assistant => self.assistant(message),
            Role::ToolResult => self.tool_result(message),
            // A user's own shell command, custom messages and summaries say nothing about what
            // the agent is doing.
            _ => {}
        }
    }

    fn user(&mut self, message: &Message) {
        let text = message.text.trim();
        if text.is_empty() {
            return;
        }
        let follows_long_response = self.thread.thread.user(text);
        self.thread.working.last_role = Some(LastRole::User);
        self.thread.working.pending.clear();
        self.dirty.thread = true;
        // "ok" after a report decides nothing; "yes" to "Shall I …?" does.
        let answered_question = self.thread.working.agent_tail.trim_end().ends_with('?');
        // A reply that only acknowledges or waves the agent on (`ok`, `yes, do it`) decides
        // nothing unless the agent had asked a question.
        let decides = !is_acknowledgement(text) || answered_question;
        if follows_long_response && decides && text.chars().count() < DECISION_MAX_CHARS {
            self.decisions.made += 1;
            let what = format!(
                "{} (re: {})",
                gist(text, DECISION_MAX_CHARS),
                self.thread.working.agent_tail
            );
            let decision = Decision {
                id: format!("d_{:03}", self.decisions.made),
                what,
                when: iso_utc(message.timestamp),
            };
            push_capped(&mut self.decisions.items, decision, MAX_DECISIONS);
            self.dirty.decisions = true;
        }
    }

    fn assistant(&mut self, message: &Message) {
        let text = message.text.trim();
        self.thread.thread.agent(text);
        let working = &mut self.thread.working;
        if !text.is_empty() {
            working.agent_tail = tail_gist(text, DECISION_CONTEXT_CHARS);
        }
        working.pending = message
            .tool_calls
            .iter()
            .map(|call| CallRef {
                id: call.id.clone(),
                tool: call.name.clone(),
                target: path_argument(&call.arguments),
            })
            .collect();
        working.last_role = Some(if working.pending.is_empty() {
            LastRole::AgentReply
        } else {
            LastRole::AgentToolCall
        });
        if let Some(last) = working.pending.last() {
            working.last_call = Some(last.clone());
        }
        self.dirty.thread = true;

        for call in &message.tool_calls {
            self.dirty.resources |= self.resources.tools_used.touch(&call.name, MAX_RESOURCES);
            let Some(access) = file_access(&call.name) else {
                continue;
            };
            let Some(path) = path_argument(&call.arguments) else {
                continue;
            };
            let files = match access {
                FileAccess::Read => &mut self.resources.files_read,
                FileAccess::Modify => &mut self.resources.files_modified,
            };
            self.dirty.resources |= files.touch(&path, MAX_RESOURCES);
        }
    }

    fn tool_result(&mut self, message: &Message) {
        let tool = message.tool_name.clone().unwrap_or_default();
        self.thread.working.last_role = Some(LastRole::ToolResult);
        self.dirty.thread = true;
        if message.is_error {
            let call_id = message.tool_call_id.as_deref();
            let target = self
                .thread
                .working
                .pending
                .iter()
                .find(|call| Some(call.id.as_str()) == call_id)
                .and_then(|call| call.target.clone());
            let failure = Failure {
                tool,
                target,
                gist: gist(&message.text, FAILURE_GIST_CHARS),
            };
            push_capped(&mut self.open_items.open, failure, MAX_ISSUES);
            self.dirty.open_items = true;
        } else if self.open_items.open.iter().any(|f| f.tool == tool) {
            // The tool works again: what failed before is now a lesson, not an open item.
            let (resolved, open) = std::mem::take(&mut self.open_items.open)
                .into_iter()
                .partition(|f| f.tool == tool);
            self.open_items.open = open;
            for failure in resolved {
                push_capped(&mut self.open_items.learned, failure, MAX_ISSUES);
            }
            self.dirty.open_items = true;
        }
    }

    /// Where the conversation stands.
    pub fn status(&self) -> Status {
        match self.thread.working.last_role {
            None => Status::Idle,
            Some(LastRole::AgentReply) => Status::WaitingForUser,
            Some(LastRole::User | LastRole::AgentToolCall | LastRole::ToolResult) => {
                Status::InProgress
            }
        }
    }

    /// Whether the agent is inside its tool loop (so a compaction now cuts through a turn).
    pub fn mid_turn(&self) -> bool {
        matches!(
            self.thread.working.last_role,
            Some(LastRole::AgentToolCall | LastRole::ToolResult)
        )
    }

    /// The `working` section of a checkpoint.
    pub fn working(&self, interrupted: bool) -> checkpoint::Working {
        let status = self.status();
        let last_call = self.thread.working.last_call.as_ref();
        let next_action = match (status, last_call) {
            (Status::Idle, _) => "Wait for the user's first request.".to_string(),
            (Status::WaitingForUser, _) => "Wait for the user's reply.".to_string(),
            (Status::InProgress, _) if self.thread.working.last_role == Some(LastRole::User) => {
                "Answer the user's latest message (the topic).".to_string()
            }
            (Status::InProgress, Some(call)) => match &call.target {
                Some(target) => format!(
                    "Continue the task from the last \"{}\" call on {target}.",
                    call.tool
                ),
                None => format!("Continue the task from the last \"{}\" call.", call.tool),
            },
            (Status::InProgress, None) => "Continue the task.".to_string(),
        };
        checkpoint::Working {
            topic: self.thread.thread.last_summary.clone(),
            status,
            interrupted,
            last_tool_call: last_call.map(|call| call.tool.clone()),
            next_action,
        }
    }

    /// The `resources` section of a checkpoint.
    pub fn resources(&self) -> checkpoint::Resources {
        checkpoint::Resources {
            files_read: self.resources.files_read.0.clone(),
            files_modified: self.resources.files_modified.0.clone(),
            tools_used: self.resources.tools_used.0.clone(),
        }
    }

    /// Open failures as the checkpoint's `open_items`.
    pub fn open_items(&self) -> Vec<String> {
        self.open_items.open.iter().map(describe).collect()
    }

    /// Overcome failures as the checkpoint's `learnings`.
    pub fn learnings(&self) -> Vec<String> {
        self.open_items.learned.iter().map(describe).collect()
    }
}

/// A failure seeded from a checkpoint has no tool: its gist is already the whole line.
fn describe(failure: &Failure) -> String {
    if failure.tool.is_empty() {
        failure.gist.clone()
    } else {
        failure.describe()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ctxhost_sdk::ToolCall;

    pub(crate) fn message(role: Role, text: &str) -> Message {
        Message {
            entry: 0,
            entry_id: "00000000".into(),
            role,
            timestamp: 1_700_000_000_000,
            text: text.into(),
            tool_calls: vec![],
            tool_name: None,
            tool_call_id: None,
            is_error: false,
            stop_reason: None,
            usage: None,
            tokens: 0,
            json: "{}".into(),
        }
    }

    pub(crate) fn call(id: &str, name: &str, arguments: &str) -> Message {
        let mut m = message(Role::Assistant, "");
        m.tool_calls = vec![ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }];
        m
    }

    pub(crate) fn result(id: &str, tool: &str, text: &str, is_error: bool) -> Message {
        let mut m = message(Role::ToolResult, text);
        m.tool_name = Some(tool.into());
        m.tool_call_id = Some(id.into());
        m.is_error = is_error;
        m.json = format!(r#"{{"role":"toolResult","toolCallId":"{id}"}}"#);
        m
    }

    #[test]
    fn files_and_tools_come_from_call_arguments() {
        let mut capture = Capture::default();
        capture.ingest(&call("1", "read", r#"{"path":"src/a.rs"}"#));
        capture.ingest(&call("2", "edit", r#"{"path":"src/a.rs","oldText":"x"}"#));
        capture.ingest(&call("3", "Write", r#"{"file_path":"/tmp/b.md"}"#));
        capture.ingest(&call("4", "bash", r#"{"command":"ls"}"#));
        capture.ingest(&call("5", "read", "not json"));
        capture.ingest(&call("6", "edit", r#"{"path":"  "}"#));
        capture.ingest(&call("7", "read", r#"{"path":"src/c.rs"}"#));
        capture.ingest(&call("8", "read", r#"{"path":"src/a.rs"}"#));
        let resources = capture.resources();
        assert_eq!(resources.files_read, ["src/c.rs", "src/a.rs"]);
        assert_eq!(resources.files_modified, ["src/a.rs", "/tmp/b.md"]);
        // Most recently used last: the empty-path `edit` call still used the tool.
        assert_eq!(resources.tools_used, ["Write", "bash", "edit", "read"]);
    }

    #[test]
    fn caps_hold() {
        let mut capture = Capture::default();
        for i in 0..150 {
            capture.ingest(&call(
                "c",
                &format!("tool{i}"),
                &format!(r#"{{"path":"f{i}"}}"#),
            ));
            capture.ingest(&call("c", "read", &format!(r#"{{"path":"r{i}"}}"#)));
            capture.ingest(&call("c", "edit", &format!(r#"{{"path":"m{i}"}}"#)));
            capture.ingest(&result("c", "edit", &format!("boom {i}"), true));
        }
        let resources = capture.resources();
        assert_eq!(resources.tools_used.len(), MAX_RESOURCES);
        assert_eq!(resources.files_read.len(), MAX_RESOURCES);
        assert_eq!(resources.files_read[0], "r50");
        assert_eq!(resources.files_modified.len(), MAX_RESOURCES);
        assert_eq!(capture.open_items().len(), MAX_ISSUES);

        let long = "L".repeat(600);
        for i in 0..70 {
            capture.ingest(&message(Role::Assistant, &long));
            capture.ingest(&message(Role::User, &format!("ok {i}")));
        }
        assert_eq!(capture.decisions.items.len(), MAX_DECISIONS);
        // A repeated failure is listed once, as the newest.
        capture.ingest(&result("c", "edit", "boom 130", true));
        assert_eq!(capture.open_items().len(), MAX_ISSUES);
        assert!(capture.open_items()[MAX_ISSUES - 1].ends_with("boom 130"));
        // The first user message has no response to reply to: 69 decisions, the newest 50 kept.
        assert_eq!(capture.decisions.items[0].id, "d_020");
        assert_eq!(capture.decisions.items[49].id, "d_069");
    }

    #[test]
    fn decisions_are_short_replies_to_long_responses_in_any_language() {
        let mut capture = Capture::default();
        capture.ingest(&message(Role::User, "短い")); // first message: nothing to reply to
        let mut plan = "Here is the plan. ".repeat(30);
        plan.push_str("Shall I also migrate the tests?");
        capture.ingest(&message(Role::Assistant, &plan));
        capture.ingest(&message(Role::User, "はい、お願いします"));
        capture.ingest(&message(Role::Assistant, "short answer"));
        capture.ingest(&message(Role::User, "да")); // after a short response: not a decision
        capture.ingest(&message(Role::Assistant, &"x".repeat(501)));
        capture.ingest(&message(
            Role::User,
            &"a long reply that is not a decision ".repeat(4),
        ));
        capture.ingest(&message(Role::Assistant, &"y".repeat(499)));
        capture.ingest(&message(Role::User, "ok")); // exactly 499: not long

        let decisions = &capture.decisions.items;
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!(decisions[0].id, "d_001");
        assert!(
            decisions[0].what.starts_with("はい、お願いします (re: …"),
            "{decisions:?}"
        );
        assert!(
            decisions[0].what.ends_with("migrate the tests?)"),
            "{decisions:?}"
        );
        assert_eq!(decisions[0].when, "2023-11-14T22:13:20Z");
    }

    #[test]
    fn acknowledgements_are_decisions_only_as_answers_to_a_question() {
        let mut capture = Capture::default();
        capture.ingest(&message(Role::User, "Port the theme"));
        let report = "I changed the colours and the tests pass. ".repeat(20);
        for ack in ["ok", "yes, do it", "continue", "/mode"] {
            capture.ingest(&message(Role::Assistant, &report));
            capture.ingest(&message(Role::User, ack));
        }
        assert!(
            capture.decisions.items.is_empty(),
            "{:?}",
            capture.decisions
        );
        capture.ingest(&message(Role::Assistant, &report));
        capture.ingest(&message(Role::User, "no, the block should stay as is"));
        let question = format!("{report} Shall I also update the light theme?");
        capture.ingest(&message(Role::Assistant, &question));
        capture.ingest(&message(Role::User, "yes"));
        let what: Vec<&str> = capture
            .decisions
            .items
            .iter()
            .map(|d| d.what.as_str())
            .collect();
        assert_eq!(what.len(), 2, "{what:?}");
        assert!(what[0].starts_with("no, the block should stay as is (re: "));
        assert!(
            what[1].starts_with("yes (re: ") && what[1].ends_with("the light theme?)"),
            "{what:?}"
        );
    }

    #[test]
    fn failures_are_open_until_the_tool_works_again() {
        let mut capture = Capture::default();
        capture.ingest(&call("c1", "edit", r#"{"path":"src/a.rs"}"#));
        capture.ingest(&result(
            "c1",
            "edit",
            "Could not find\nthe exact text",
            true,
        ));
        capture.ingest(&call("c2", "bash", r#"{"command":"make"}"#));
        capture.ingest(&result("c2", "bash", "make: *** [all] Error 2", true));
        assert_eq!(
            capture.open_items(),
            [
                "\"edit\" on src/a.rs: Could not find the exact text",
                "\"bash\": make: *** [all] Error 2"
            ]
        );
        assert!(capture.learnings().is_empty());
        capture.ingest(&call("c3", "edit", r#"{"path":"src/a.rs"}"#));
        capture.ingest(&result("c3", "edit", "ok", false));
        assert_eq!(capture.open_items(), ["\"bash\": make: *** [all] Error 2"]);
        assert_eq!(
            capture.learnings(),
            ["\"edit\" on src/a.rs: Could not find the exact text"]
        );
    }

    #[test]
    fn status_and_next_action_follow_the_newest_message() {
        let mut capture = Capture::default();
        assert_eq!(capture.status(), Status::Idle);
        capture.ingest(&message(Role::User, "fix the bug"));
        assert_eq!(capture.status(), Status::InProgress);
        assert!(!capture.mid_turn());
        capture.ingest(&call("c", "edit", r#"{"path":"a.rs"}"#));
        assert!(capture.mid_turn());
        let working = capture.working(true);
        assert_eq!(working.topic, "fix the bug");
        assert_eq!(working.last_tool_call.as_deref(), Some("edit"));
        assert_eq!(
            working.next_action,
            "Continue the task from the last \"edit\" call on a.rs."
        );
        capture.ingest(&result("c", "edit", "ok", false));
        assert_eq!(capture.status(), Status::InProgress);
        capture.ingest(&message(Role::Assistant, "Fixed."));
        assert_eq!(capture.status(), Status::WaitingForUser);
        assert!(!capture.mid_turn());
    }

    #[test]
    fn dirty_parts_are_reported_once() {
        let mut capture = Capture::default();
        assert!(!capture.is_dirty());
        capture.ingest(&call("c", "read", r#"{"path":"a"}"#));
        let dirty = capture.take_dirty();
        assert!(dirty.thread && dirty.resources && !dirty.decisions && !dirty.open_items);
        assert!(!capture.is_dirty());
        capture.ingest(&call("c", "read", r#"{"path":"a"}"#));
        assert!(!capture.take_dirty().resources, "nothing new");
    }
}
