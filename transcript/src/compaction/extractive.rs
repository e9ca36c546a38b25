//! A summarizer that needs no model: it extracts what a resumed agent must not lose — the
//! current task, the user's requests and standing instructions, why tools failed, the files
//! touched — into markdown sections, and merges them with the previous summary section by
//! section, so nothing decays from one compaction to the next.
//!
//! The summary is bounded ([`MAX_CHARS`]). When it would grow past that, the past gives way
//! (the oldest exchanges, requests, files and resolved failures are elided with a count), never
//! the present (the current task and the standing instructions).

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::Value;

use crate::message::MessageView;
use crate::role::Role;

/// Upper bound on the summary, in characters (~1,200 tokens at chars / 4).
pub const MAX_CHARS: usize = 4800;

/// The current task is quoted verbatim up to this many characters.
const CURRENT_CHARS: usize = 500;
/// The first request of the session.
const STARTED_CHARS: usize = 120;
/// Each entry of the request ledger: enough to recognise the request by its opening words.
const REQUEST_CHARS: usize = 44;
/// Each standing instruction, and at most this many of them.
const INSTRUCTION_CHARS: usize = 120;
const MAX_INSTRUCTIONS: usize = 8;
/// The error line of a failure, and the command head or path it names.
const FAILURE_LINE_CHARS: usize = 64;
const TARGET_CHARS: usize = 26;
/// A resolved failure is a weaker lesson: its error line alone, shorter, without the target
/// (a later success on the same call resolved it), so more failures fit the same budget.
const RESOLVED_LINE_CHARS: usize = 48;
/// Files are listed in full until their grouped lines pass these budgets (characters); then
/// the oldest are elided with a count. Roughly 60–100 modified paths fit.
pub const MODIFIED_FILES_BUDGET: usize = 1400;
pub const READ_FILES_BUDGET: usize = 600;
/// How the lists share what the cap leaves them: requests, failures, modified files, read
/// files. Failures and requests come first: files may be elided past a stated budget (their
/// count kept), a lost failure or request is a lesson or an ask the agent no longer knows of.
const SHARES: [f64; 4] = [0.36, 0.36, 0.18, 0.10];
/// The request ledger's own budget, before the global cap.
const REQUESTS_BUDGET: usize = 2800;
const RECENT: usize = 2;
const RECENT_CHARS: usize = 160;
const PROGRESS_CHARS: usize = 200;

/// One line, at most `max` chars, with an ellipsis when shortened.
fn clip(text: &str, max: usize) -> String {
    let flat = fold(text);
    if flat.chars().count() <= max {
        return flat;
    }
    let mut s: String = flat.chars().take(max.saturating_sub(1)).collect();
    s.truncate(s.trim_end().len());
    s.push('…');
    s
}

/// Whitespace (newlines included) folded to single spaces.
fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `items` appended to `list` in order, each unless empty or already there: a summary's lists
/// hold an item once. One set for the whole batch, so a session's worth of items is linear.
fn extend_unique(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    let mut seen: HashSet<String> = list.iter().cloned().collect();
    for item in items {
        if !item.is_empty() && seen.insert(item.clone()) {
            list.push(item);
        }
    }
}

/// `items` pushed to `list` one by one as the newest: an item already there (or pushed again
/// later in the batch) moves to where it was pushed last. In one pass over both, not a
/// removal per push.
fn extend_newest(list: &mut Vec<String>, items: impl IntoIterator<Item = String>) {
    let items: Vec<String> = items.into_iter().filter(|i| !i.is_empty()).collect();
    if items.is_empty() {
        return;
    }
    let pushed: HashSet<&str> = items.iter().map(String::as_str).collect();
    // Walking the batch from its end, the first sight of an item is where it stays.
    let mut placed = HashSet::with_capacity(pushed.len());
    let mut last_sight: Vec<bool> = items.iter().rev().map(|i| placed.insert(i)).collect();
    last_sight.reverse();
    let mut merged: Vec<String> = std::mem::take(list)
        .into_iter()
        .filter(|old| !pushed.contains(old.as_str()))
        .collect();
    merged.extend(
        items
            .iter()
            .zip(last_sight)
            .filter(|(_, last)| *last)
            .map(|(i, _)| i.clone()),
    );
    *list = merged;
}

/// `read` without the paths also in `modified` (a file both read and modified is listed as
/// modified only).
fn drop_modified(read: &mut Vec<String>, modified: &[String]) {
    if read.is_empty() || modified.is_empty() {
        return;
    }
    let modified: HashSet<&str> = modified.iter().map(String::as_str).collect();
    read.retain(|p| !modified.contains(p.as_str()));
}

// ---------------------------------------------------------------------------------------------
// What the user asked

/// Words that, alone or together, only acknowledge or wave the agent on.
const ACK_WORDS: &[&str] = &[
    "ok", "okay", "k", "kk", "yes", "y", "yep", "yeah", "yup", "sure", "continue", "go", "on",
    "ahead", "proceed", "do", "it", "all", "thanks", "thank", "you", "ty", "thx", "great", "nice",
    "cool", "good", "done", "next", "lgtm", "sounds", "perfect", "alright", "right", "please",
    "pls", "fine", "that", "works", "keep", "going", "carry",
];

/// A user message that asks for nothing: an acknowledgement (`ok`, `yes, do it`, `continue`)
/// or a bare slash command (`/mode`), which the agent runtime handles itself.
pub fn is_acknowledgement(text: &str) -> bool {
    let t = text.trim();
    if t.is_empty() || (t.starts_with('/') && !t.contains(char::is_whitespace)) {
        return true;
    }
    let words: Vec<String> = t
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect();
    !words.is_empty() && words.len() <= 6 && words.iter().all(|w| ACK_WORDS.contains(&w.as_str()))
}

/// Openings of a clause that make it an instruction meant to last.
const CLAUSE_CUES: &[&str] = &[
    "don't ",
    "dont ",
    "do not ",
    "never ",
    "always ",
    "use ",
    "stop ",
    "avoid ",
    "only ",
    "prefer ",
    "make sure ",
    "remember to ",
    "no ",
    "please don't ",
    "please never ",
    "please always ",
    "please use ",
];
/// Words that make a clause an instruction wherever they stand.
const ANYWHERE_CUES: &[&str] = &[" must never ", " must always ", " never ", " always "];
/// `no …` clauses that are not rules.
const NOT_RULES: &[&str] = &["no need", "no idea", "no problem", "no worries", "no way"];

/// The sentences of a user message that state a lasting rule (`don't …`, `never …`,
/// `always …`, `use X not Y`, `… must …`). Questions are not rules.
pub fn standing_instructions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for sentence in text.split_inclusive(['.', '!', '?', '\n']) {
        let s = sentence.trim();
        if s.ends_with('?') || s.chars().count() < 8 {
            continue;
        }
        let lower = format!(" {} ", s.to_lowercase().replace('’', "'"));
        let clause_start = lower
            .split([',', ';', ':', '—', '('])
            .map(|c| c.trim_start_matches(|ch: char| !ch.is_alphanumeric()))
            .filter(|c| !NOT_RULES.iter().any(|n| c.starts_with(n)))
            .any(|c| {
                CLAUSE_CUES.iter().any(|cue| {
                    c.starts_with(cue)
                        && c[cue.len()..]
                            .chars()
                            .next()
                            .is_some_and(char::is_alphanumeric)
                })
            });
        let anywhere = ANYWHERE_CUES.iter().any(|cue| lower.contains(cue));
        if clause_start || anywhere {
            out.push(clip(s, INSTRUCTION_CHARS));
        }
    }
    out
}

/// Content words of an instruction, to tell when a newer one is about the same thing.
fn subject(instruction: &str) -> Vec<String> {
    const STOP: &[&str] = &[
        "the", "and", "not", "don't", "dont", "never", "always", "use", "must", "should", "make",
        "sure", "please", "only", "any", "all", "for", "with", "from", "this", "that", "our",
        "your", "you", "instead", "rather", "than", "are", "was", "will", "avoid", "stop",
        "prefer", "just", "also", "into", "when", "then", "them", "its", "it's", "need",
    ];
    let mut words: Vec<String> = instruction
        .to_lowercase()
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '_' || c == '-'))
        .filter(|w| w.len() >= 3 && !STOP.contains(w))
        .map(str::to_string)
        .collect();
    words.dedup();
    words
}

/// Adds a standing instruction; an older one about the same subject (two content words in
/// common, or most of the shorter one's) is superseded by it.
fn add_instruction(list: &mut Vec<String>, instruction: String) {
    let new = subject(&instruction);
    list.retain(|old| {
        let old_words = subject(old);
        let shared = old_words.iter().filter(|w| new.contains(w)).count();
        let smaller = old_words.len().min(new.len()).max(1);
        !(shared >= 2 || shared * 2 > smaller) || *old == instruction
    });
    extend_newest(list, [instruction]);
    let excess = list.len().saturating_sub(MAX_INSTRUCTIONS);
    list.drain(..excess);
}

// ---------------------------------------------------------------------------------------------
// Why tools failed

/// A failed tool call: the tool, the command head or path it ran on, and the line of its
/// output that names the error.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Failure {
    tool: String,
    target: String,
    line: String,
    resolved: bool,
    /// Other targets that failed with the same line (`grep …: exit code 1` nine times is one
    /// lesson; the newest target is named).
    more: usize,
}

const RESOLVED: &str = " — resolved";

impl Failure {
    fn render(&self) -> String {
        let mut s = self.tool.clone();
        if self.resolved {
            if self.more > 0 {
                s.push_str(&format!(" (+{} more)", self.more));
            }
            s.push_str(": ");
            s.push_str(&clip(&self.line, RESOLVED_LINE_CHARS));
            s.push_str(RESOLVED);
            return s;
        }
        if !self.target.is_empty() {
            s.push_str(&format!(" `{}`", self.target));
        }
        if self.more > 0 {
            s.push_str(&format!(" (+{} more)", self.more));
        }
        s.push_str(": ");
        s.push_str(&self.line);
        if self.resolved {
            s.push_str(RESOLVED);
        }
        s
    }

    fn parse(item: &str) -> Failure {
        let (item, resolved) = match item.strip_suffix(RESOLVED) {
            Some(rest) => (rest, true),
            None => (item, false),
        };
        // `tool `target` (+N more): line`, `tool `target`: line`, `tool (+N more): line` or
        // `tool: line`; a target may itself hold ": ", a line a backtick.
        let count = |more: &str| -> Option<usize> {
            more.trim()
                .strip_prefix("(+")?
                .strip_suffix(" more)")?
                .parse()
                .ok()
        };
        let quoted = item
            .split_once(" `")
            .filter(|(tool, _)| !tool.contains(": "))
            .and_then(|(tool, rest)| {
                let (target, rest) = rest.split_once('`')?;
                let (more, line) = rest.split_once(": ")?;
                Some((tool, target, count(more).unwrap_or(0), line))
            });
        let (tool, target, more, line) = quoted.unwrap_or_else(|| {
            let (head, line) = item.split_once(": ").unwrap_or((item, ""));
            match head.split_once(" (+") {
                Some((tool, more)) => (tool, "", count(&format!("(+{more}")).unwrap_or(0), line),
                None => (head, "", 0, line),
            }
        });
        Failure {
            tool: tool.to_string(),
            target: target.to_string(),
            line: line.to_string(),
            resolved,
            more,
        }
    }

    /// What makes two failures the same entry: the tool, its target and the error line.
    fn key(&self) -> (String, String, String) {
        (self.tool.clone(), self.target.clone(), self.line.clone())
    }
}

/// Lines that open a tool's output without saying anything about the error: npm's script
/// echo, git's remote banner, shell prompts, separators.
fn boilerplate(line: &str) -> bool {
    let l = line.trim();
    l.starts_with("> ")
        || l == ">"
        || l.starts_with("To http")
        || l.starts_with("To git@")
        || l.starts_with("$ ")
        || l.starts_with("+ ")
        || l.starts_with("Command exited")
        || l.starts_with("npm ERR! A complete log")
        || l.starts_with("npm error A complete log")
        || l.chars().all(|c| !c.is_alphanumeric())
}

const ERROR_WORDS: &[&str] = &[
    "error",
    "fail",
    "cannot",
    "can't",
    "could not",
    "couldn't",
    "not found",
    "no such",
    "denied",
    "rejected",
    "refused",
    "invalid",
    "unexpected",
    "exception",
    "panic",
    "fatal",
    "enoent",
    "eacces",
    "timed out",
    "timeout",
    "not allowed",
    "does not exist",
    "missing",
    "undefined",
    "mismatch",
    "conflict",
    "abort",
];

/// The line of a failed tool's output that names the error: the first non-boilerplate line
/// with an error word, else the first non-boilerplate line.
pub fn error_line(output: &str) -> String {
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let named = lines.iter().find(|l| {
        let lower = l.to_lowercase();
        !boilerplate(l) && ERROR_WORDS.iter().any(|w| lower.contains(w))
    });
    let line = named
        .or_else(|| lines.iter().find(|l| !boilerplate(l)))
        .or(lines.first())
        .copied()
        .unwrap_or("(no output)");
    clip(line, FAILURE_LINE_CHARS)
}

/// What a tool call ran on: the path it names, else the first line of its command, else its
/// first string argument.
fn call_target(arguments: &str) -> String {
    let Ok(args) = serde_json::from_str::<Value>(arguments) else {
        return String::new();
    };
    let pick = [
        "path",
        "file_path",
        "command",
        "cmd",
        "url",
        "query",
        "pattern",
    ]
    .iter()
    .find_map(|k| args.get(k).and_then(Value::as_str))
    .or_else(|| {
        args.as_object()
            .and_then(|o| o.values().find_map(Value::as_str))
    })
    .unwrap_or("");
    let first = pick.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    clip(first, TARGET_CHARS).replace('`', "'")
}

/// The calls of the newest assistant message, for naming what each tool result answers:
/// results follow their calls in order, paired by tool name.
#[derive(Debug, Default)]
pub(crate) struct PendingCalls(Vec<(String, String)>);

impl PendingCalls {
    /// An assistant message: its calls are the ones the next results answer.
    pub(crate) fn calls(&mut self, assistant: &MessageView) {
        self.0 = assistant
            .tool_calls
            .iter()
            .map(|c| (c.name.clone(), call_target(&c.arguments)))
            .collect();
    }

    /// A tool result: its tool, and the target of the call it answers (empty when unknown).
    pub(crate) fn answer(&mut self, result: &MessageView) -> (String, String) {
        let tool = result.tool_name.clone().unwrap_or_else(|| "tool".into());
        let target = self
            .0
            .iter()
            .position(|(name, _)| *name == tool)
            .map(|i| self.0.remove(i).1)
            .unwrap_or_default();
        (tool, target)
    }
}

// ---------------------------------------------------------------------------------------------
// Files

/// Paths that say nothing durable about the work: scratch files and directories.
fn transient_path(path: &str) -> bool {
    let p = path.trim();
    p.is_empty()
        || p.ends_with('/')
        || p == "."
        || p.starts_with("/tmp/")
        || p.starts_with("/var/folders/")
        || p.starts_with("/private/var/folders/")
        || p.starts_with("/private/tmp/")
        || p.contains("/TemporaryItems/")
}

/// Files read and files modified, from tool-call arguments (`path` / `file_path`) of read vs
/// edit/write tools. A file both read and modified is listed as modified only.
pub fn file_operations(messages: &[MessageView]) -> (Vec<String>, Vec<String>) {
    let (mut read, mut modified) = (Vec::new(), Vec::new());
    let (mut read_seen, mut modified_seen) = (HashSet::new(), HashSet::new());
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
        if transient_path(path) {
            continue;
        }
        let (list, seen) = match call.name.to_ascii_lowercase().as_str() {
            "read" | "read_file" | "view" => (&mut read, &mut read_seen),
            "edit" | "write" | "edit_file" | "write_file" | "multiedit" | "multi_edit" => {
                (&mut modified, &mut modified_seen)
            }
            _ => continue,
        };
        if !path.is_empty() && seen.insert(path.to_string()) {
            list.push(path.to_string());
        }
    }
    drop_modified(&mut read, &modified);
    (read, modified)
}

/// `a/b/x.ts, a/b/y.ts, c.md` → `a/b/{x.ts, y.ts}` and `c.md`: one line per directory, in the
/// order directories first appear.
fn grouped(paths: &[String]) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for path in paths {
        let (dir, file) = dir_and_file(path);
        let g = *group_of.entry(dir).or_insert_with(|| {
            groups.push((dir, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(file);
    }
    groups
        .into_iter()
        .map(|(dir, files)| match files.as_slice() {
            [one] => format!("{dir}{one}"),
            _ => format!("{dir}{{{}}}", files.join(", ")),
        })
        .collect()
}

/// `a/b/x.ts` → (`a/b/`, `x.ts`): the directory a path is grouped under, and its name.
fn dir_and_file(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(slash) => path.split_at(slash + 1),
        None => ("", path),
    }
}

/// The rendered size of [`grouped`]`(paths)` (each line with its `- ` and line break).
fn grouped_size(paths: &[String]) -> usize {
    grouped(paths).iter().map(|l| l.len() + 3).sum()
}

/// The paths of one grouped line.
fn ungrouped(line: &str) -> Vec<String> {
    match line.find('{') {
        Some(open) if line.ends_with('}') => {
            let dir = &line[..open];
            line[open + 1..line.len() - 1]
                .split(", ")
                .map(|f| format!("{dir}{f}"))
                .collect()
        }
        _ => vec![line.to_string()],
    }
}

// ---------------------------------------------------------------------------------------------
// The summary, as sections

/// A summary's content, by section. Lists are oldest first; `*_elided` count what the budget
/// left out of them, so the count survives the next merge.
#[derive(Debug, Clone, Default)]
struct Sections {
    current: Option<String>,
    started: Option<String>,
    focus: Option<String>,
    /// A model-written summary merged in: kept under its own heading.
    earlier: Option<String>,
    instructions: Vec<String>,
    requests: Vec<String>,
    requests_elided: usize,
    progress: Option<String>,
    failures: Vec<Failure>,
    failures_elided: usize,
    modified: Vec<String>,
    modified_elided: usize,
    read: Vec<String>,
    read_elided: usize,
    recent: Vec<String>,
}

/// The section the runtime appends for kept tool results replaced by placeholders (a batch of
/// parallel results bigger than the window). Not carried into the next summary: by then those
/// results are part of the span summarized.
pub const OVERSIZED_TITLE: &str = "Tool outputs replaced by placeholders (too big to keep)";
/// Characters quoted of such outputs' opening lines, all together, and of one at most.
const OPENINGS_CHARS: usize = 600;
const OPENING_CHARS: usize = 240;

/// A tool output too big to keep: its tool, what its call ran on, the output and its tokens.
#[derive(Debug, Clone)]
pub struct Oversized {
    pub tool: String,
    pub target: String,
    pub output: String,
    pub tokens: u32,
}

/// The [`OVERSIZED_TITLE`] section: per output, `read `src/a.rs` (212 lines, 9000 tokens):`
/// and its opening lines, sharing `OPENINGS_CHARS`.
pub fn oversized_section(outputs: &[Oversized]) -> String {
    let each = (OPENINGS_CHARS / outputs.len().max(1)).clamp(60, OPENING_CHARS);
    let items: Vec<String> = outputs
        .iter()
        .map(|o| {
            let mut s = o.tool.clone();
            if !o.target.is_empty() {
                s.push_str(&format!(" `{}`", o.target));
            }
            let lines = o.output.lines().filter(|l| !l.trim().is_empty()).count();
            s.push_str(&format!(" ({lines} lines, {} tokens): ", o.tokens));
            s.push_str(&clip(&o.output, each));
            s
        })
        .collect();
    let mut out = String::new();
    section(&mut out, OVERSIZED_TITLE, &items);
    out.trim_end().to_string()
}

/// A summary this module wrote, re-rendered within `max_chars` (the past giving way as in
/// [`summarize`]), to leave room for what the runtime appends.
pub fn bounded(summary: &str, max_chars: usize) -> String {
    if summary.chars().count() <= max_chars {
        return summary.to_string();
    }
    Sections::parse(summary).render_bounded_to(max_chars)
}

/// The sections [`Sections::parse`] reads back (or, for [`OVERSIZED_TITLE`], knows to drop).
const KNOWN: &[&str] = &[
    OVERSIZED_TITLE,
    "Current task",
    "Started with",
    "Goal",
    "Focus",
    "Earlier context",
    "Standing instructions",
    "User requests",
    "Open questions",
    "Progress",
    "Tool failures",
    "Files modified",
    "Files read",
    "Recent exchanges",
];
/// A model's earlier summary is kept up to this many characters.
const EARLIER_CHARS: usize = 2000;

/// `(+12 earlier …)` → 12.
fn elided_count(item: &str) -> Option<usize> {
    item.strip_prefix("(+")?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

impl Sections {
    /// Reads a summary this module wrote (older layouts too: `Goal`, `Open questions`).
    fn parse(text: &str) -> Sections {
        let mut p = Sections::default();
        // Items gathered per list, made distinct once at the end (first sight kept).
        let (mut instructions, mut requests) = (Vec::new(), Vec::new());
        let (mut modified, mut read) = (Vec::new(), Vec::new());
        let mut failures_seen = HashSet::new();
        let mut section = String::new();
        // Lines outside the sections this module writes: a model's prose, pinned messages.
        let mut free: Vec<&str> = Vec::new();
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("## ") {
                section = h.trim().to_string();
                continue;
            }
            let Some(item) = line
                .strip_prefix("- ")
                .filter(|_| KNOWN.contains(&section.as_str()))
            else {
                if !line.trim().is_empty() {
                    free.push(line.trim());
                }
                continue;
            };
            let item = item.trim().to_string();
            let elided = elided_count(&item);
            match (section.as_str(), elided) {
                ("Current task", _) => p.current = Some(item),
                ("Started with" | "Goal", _) => {
                    p.started.get_or_insert(item);
                }
                ("Focus", _) => p.focus = Some(item),
                ("Earlier context", _) => p.earlier = Some(item),
                ("Standing instructions", _) => instructions.push(item),
                ("User requests", Some(n)) => p.requests_elided += n,
                ("User requests" | "Open questions", None) => requests.push(item),
                ("Progress", _) => p.progress = Some(item),
                ("Tool failures", Some(n)) => p.failures_elided += n,
                ("Tool failures", None) => {
                    let f = Failure::parse(&item);
                    if failures_seen.insert(f.key()) {
                        p.failures.push(f);
                    }
                }
                ("Files modified", Some(n)) => p.modified_elided += n,
                ("Files modified", None) => modified.extend(ungrouped(&item)),
                ("Files read", Some(n)) => p.read_elided += n,
                ("Files read", None) => read.extend(ungrouped(&item)),
                ("Recent exchanges", _) => p.recent.push(item),
                _ => continue,
            }
        }
        extend_unique(&mut p.instructions, instructions);
        extend_unique(&mut p.requests, requests);
        extend_unique(&mut p.modified, modified);
        extend_unique(&mut p.read, read);
        drop_modified(&mut p.read, &p.modified);
        if !free.is_empty() {
            let mut earlier = p.earlier.take().unwrap_or_default();
            if !earlier.is_empty() {
                earlier.push(' ');
            }
            earlier.push_str(&free.join(" "));
            p.earlier = Some(clip(&earlier, EARLIER_CHARS));
        }
        // "Started with" is left out when it equals the current task.
        if p.started.is_none() {
            p.started = p.current.clone();
        }
        p
    }

    /// Folds `later` (what came after `self`) in: the later current task and progress win,
    /// lists are unioned in order, counts add up.
    fn absorb(&mut self, later: Sections) {
        if later.current.is_some() {
            self.current = later.current;
        }
        if self.started.is_none() {
            self.started = later.started;
        }
        if later.focus.is_some() {
            self.focus = later.focus;
        }
        if self.earlier.is_none() {
            self.earlier = later.earlier;
        }
        for i in later.instructions {
            add_instruction(&mut self.instructions, i);
        }
        self.requests_elided += later.requests_elided;
        extend_newest(&mut self.requests, later.requests);
        if later.progress.is_some() {
            self.progress = later.progress;
        }
        self.failures_elided += later.failures_elided;
        let mut failures = FailureLedger::new(std::mem::take(&mut self.failures));
        for f in later.failures {
            failures.add(f);
        }
        self.failures = failures.into_vec();
        self.modified_elided += later.modified_elided;
        extend_unique(&mut self.modified, later.modified);
        self.read_elided += later.read_elided;
        extend_unique(&mut self.read, later.read);
        drop_modified(&mut self.read, &self.modified);
        if !later.recent.is_empty() {
            self.recent = later.recent;
        }
    }

    /// Learns from the messages of this span, oldest first.
    fn learn(&mut self, messages: &[MessageView]) {
        let mut pending = PendingCalls::default();
        let mut requests = Vec::new();
        let mut failures = FailureLedger::new(std::mem::take(&mut self.failures));
        for m in messages {
            match m.role {
                Role::User => {
                    let text = m.text.trim();
                    if is_acknowledgement(text) {
                        continue;
                    }
                    self.started
                        .get_or_insert_with(|| clip(text, STARTED_CHARS));
                    self.current = Some(clip(text, CURRENT_CHARS));
                    requests.push(clip(text, REQUEST_CHARS));
                    for i in standing_instructions(text) {
                        add_instruction(&mut self.instructions, i);
                    }
                }
                Role::Assistant => {
                    pending.calls(m);
                    if !m.text.trim().is_empty() {
                        self.progress = Some(clip(&m.text, PROGRESS_CHARS));
                    }
                }
                Role::ToolResult => {
                    let (tool, target) = pending.answer(m);
                    if m.is_error {
                        failures.add(Failure {
                            tool,
                            target,
                            line: error_line(&m.text),
                            resolved: false,
                            more: 0,
                        });
                    } else {
                        failures.resolve(&tool, &target);
                    }
                }
                _ => {}
            }
        }
        extend_newest(&mut self.requests, requests);
        self.failures = failures.into_vec();
        let (read, modified) = file_operations(messages);
        extend_unique(&mut self.modified, modified);
        extend_unique(&mut self.read, read);
        drop_modified(&mut self.read, &self.modified);
        // Only the newest exchanges are kept: only they are rendered.
        let mut recent: Vec<String> = messages
            .iter()
            .rev()
            .filter(|m| matches!(m.role, Role::User | Role::Assistant) && !m.text.trim().is_empty())
            .take(RECENT)
            .map(|m| format!("**{}**: {}", m.role.as_str(), clip(&m.text, RECENT_CHARS)))
            .collect();
        if !recent.is_empty() {
            recent.reverse();
            self.recent = recent;
        }
    }

    /// The newest recent exchange is the agent's message progress quotes: saying it twice
    /// would only cost the budget.
    fn progress_in_recent(&self) -> bool {
        let (Some(progress), Some(last)) = (&self.progress, self.recent.last()) else {
            return false;
        };
        last.strip_prefix("**assistant**: ")
            .is_some_and(|said| progress.starts_with(said.trim_end_matches('…')))
    }

    /// Elides the oldest items of a list while its rendered lines pass `budget`. The size of
    /// the grouped lines is kept per directory as paths leave, not regrouped per path.
    fn fit_files(list: &mut Vec<String>, elided: &mut usize, budget: usize) {
        // Per directory: its paths and the bytes of their names.
        let mut dirs: HashMap<&str, (usize, usize)> = HashMap::new();
        for path in list.iter() {
            let (dir, file) = dir_and_file(path);
            let d = dirs.entry(dir).or_default();
            d.0 += 1;
            d.1 += file.len();
        }
        // What `grouped` renders for a directory: `dir/name`, or `dir/{a, b}`; and `- `, `\n`.
        let line = |dir: &str, (paths, bytes): (usize, usize)| match paths {
            0 => 0,
            1 => dir.len() + bytes + 3,
            n => dir.len() + 2 + bytes + 2 * (n - 1) + 3,
        };
        let mut size: usize = dirs.iter().map(|(dir, d)| line(dir, *d)).sum();
        let mut cut = 0;
        while list.len() - cut > 1 && size > budget {
            let (dir, file) = dir_and_file(&list[cut]);
            if let Some(d) = dirs.get_mut(dir) {
                size -= line(dir, *d);
                *d = (d.0 - 1, d.1 - file.len());
                size += line(dir, *d);
            }
            cut += 1;
        }
        list.drain(..cut);
        *elided += cut;
    }

    fn render(&self) -> String {
        let mut out = String::new();
        let one = |out: &mut String, title: &str, item: &Option<String>| {
            if let Some(i) = item {
                section(out, title, std::slice::from_ref(i));
            }
        };
        one(&mut out, "Current task", &self.current);
        if self.started != self.current {
            one(&mut out, "Started with", &self.started);
        }
        one(&mut out, "Focus", &self.focus);
        section(&mut out, "Standing instructions", &self.instructions);
        let mut requests = Vec::new();
        if self.requests_elided > 0 {
            requests.push(format!("(+{} earlier requests)", self.requests_elided));
        }
        requests.extend(self.requests.iter().cloned());
        section(&mut out, "User requests", &requests);
        if !self.progress_in_recent() {
            one(&mut out, "Progress", &self.progress);
        }
        let mut failures = Vec::new();
        if self.failures_elided > 0 {
            failures.push(format!("(+{} earlier failures)", self.failures_elided));
        }
        failures.extend(self.failures.iter().map(Failure::render));
        section(&mut out, "Tool failures", &failures);
        for (title, list, elided) in [
            ("Files modified", &self.modified, self.modified_elided),
            ("Files read", &self.read, self.read_elided),
        ] {
            let mut lines = Vec::new();
            if elided > 0 {
                lines.push(format!("(+{elided} earlier files)"));
            }
            lines.extend(grouped(list));
            section(&mut out, title, &lines);
        }
        one(&mut out, "Earlier context", &self.earlier);
        section(&mut out, "Recent exchanges", &self.recent);
        if out.is_empty() {
            out.push_str("## Current task\n- (no user requests in the compacted part)\n");
        }
        out.trim_end().to_string()
    }

    /// Renders within [`MAX_CHARS`], taking from the past first: recent exchanges, the model's
    /// earlier text, progress and the first request go whole; then the oldest items of the
    /// request ledger, failures (resolved ones first), modified and read files, each list in
    /// proportion to its share ([`SHARES`]), so no section is emptied for another. The current
    /// task, focus and standing instructions are never cut, nor the newest item of a list.
    fn render_bounded(self) -> String {
        self.render_bounded_to(MAX_CHARS)
    }

    /// [`Self::render_bounded`] within `max_chars`.
    fn render_bounded_to(mut self, max_chars: usize) -> String {
        Self::fit_files(
            &mut self.modified,
            &mut self.modified_elided,
            MODIFIED_FILES_BUDGET,
        );
        Self::fit_files(&mut self.read, &mut self.read_elided, READ_FILES_BUDGET);
        let mut size: usize = self.requests.iter().map(|r| r.len() + 3).sum();
        let mut cut = 0;
        while self.requests.len() - cut > 1 && size > REQUESTS_BUDGET {
            size -= self.requests[cut].len() + 3;
            cut += 1;
        }
        self.requests.drain(..cut);
        self.requests_elided += cut;
        self.shed_while_surely_over(max_chars);
        self.render_shedding(max_chars)
    }

    /// Renders, and while over `max_chars` gives up one thing of the past and renders again
    /// (see [`Self::render_bounded`]). Each step renders, so it comes after
    /// [`Self::shed_while_surely_over`], which leaves it a bounded number of steps.
    fn render_shedding(mut self, max_chars: usize) -> String {
        loop {
            let out = self.render();
            let over = out.chars().count().saturating_sub(max_chars);
            if over == 0 {
                return out;
            }
            if !self.recent.is_empty() {
                self.recent.remove(0);
                continue;
            }
            if let Some(e) = self.earlier.take() {
                let keep = e.chars().count().saturating_sub(over + 2);
                if keep > 200 {
                    self.earlier = Some(clip(&e, keep));
                }
                continue;
            }
            if self.progress.take().is_some() {
                continue;
            }
            if self.started.is_some() && self.started != self.current {
                self.started = self.current.clone();
                continue;
            }
            // The list furthest over its share gives up its oldest item.
            let sizes = [
                self.requests.iter().map(|r| r.len() + 3).sum::<usize>(),
                self.failures.iter().map(|f| f.render().len() + 3).sum(),
                grouped(&self.modified).iter().map(|l| l.len() + 3).sum(),
                grouped(&self.read).iter().map(|l| l.len() + 3).sum(),
            ];
            let lens = [
                self.requests.len(),
                self.failures.len(),
                self.modified.len(),
                self.read.len() + 1,
            ];
            let pick = (0..4).filter(|&k| lens[k] > 1).max_by(|&a, &b| {
                (sizes[a] as f64 / SHARES[a]).total_cmp(&(sizes[b] as f64 / SHARES[b]))
            });
            match pick {
                Some(0) => {
                    self.requests.remove(0);
                    self.requests_elided += 1;
                }
                Some(1) => {
                    let i = self.failures.iter().position(|f| f.resolved).unwrap_or(0);
                    self.failures.remove(i);
                    self.failures_elided += 1;
                }
                Some(2) => {
                    self.modified.remove(0);
                    self.modified_elided += 1;
                }
                Some(_) => {
                    self.read.remove(0);
                    self.read_elided += 1;
                }
                // Only the present is left; it is bounded by construction.
                None => return out,
            }
        }
    }
}

impl Sections {
    /// The steps the loop of [`Self::render_bounded_to`] takes while the summary is over
    /// `max_chars`, taken without rendering for as long as it surely is: the request and failure
    /// items alone (each at least `- ` and its text up to trailing blanks) pass `max_chars`.
    /// Then the loop drops recent exchanges, the earlier text and progress, rewinds the start,
    /// and sheds list items by the same rule, which needs only the lists' sizes, kept here as
    /// items leave. The loop then goes on from where this stops, so the result is the same as
    /// rendering after each step, without the render per step (quadratic in the failures a long
    /// session collects).
    fn shed_while_surely_over(&mut self, max_chars: usize) {
        let floor = |item: &str| 2 + item.trim_end().chars().count();
        let failures: Vec<String> = self.failures.iter().map(Failure::render).collect();
        let mut surely: usize = self.requests.iter().map(|r| floor(r)).sum::<usize>()
            + failures.iter().map(|f| floor(f)).sum::<usize>();
        if surely <= max_chars {
            return;
        }
        self.recent.clear();
        self.earlier = None;
        self.progress = None;
        if self.started.is_some() {
            self.started = self.current.clone();
        }
        let mut sizes = [
            self.requests.iter().map(|r| r.len() + 3).sum::<usize>(),
            failures.iter().map(|f| f.len() + 3).sum(),
            grouped_size(&self.modified),
            grouped_size(&self.read),
        ];
        let mut lens = [
            self.requests.len(),
            self.failures.len(),
            self.modified.len(),
            self.read.len() + 1,
        ];
        // Requests leave from the front; failures the oldest resolved one first, else the oldest.
        let mut requests_gone = 0;
        let mut failure_gone = vec![false; failures.len()];
        let (mut oldest, mut oldest_resolved) = (0, 0);
        while surely > max_chars {
            let pick = (0..4).filter(|&k| lens[k] > 1).max_by(|&a, &b| {
                (sizes[a] as f64 / SHARES[a]).total_cmp(&(sizes[b] as f64 / SHARES[b]))
            });
            match pick {
                Some(0) => {
                    let r = &self.requests[requests_gone];
                    sizes[0] -= r.len() + 3;
                    surely -= floor(r);
                    requests_gone += 1;
                    self.requests_elided += 1;
                }
                Some(1) => {
                    while oldest_resolved < failures.len()
                        && (failure_gone[oldest_resolved]
                            || !self.failures[oldest_resolved].resolved)
                    {
                        oldest_resolved += 1;
                    }
                    while failure_gone[oldest] {
                        oldest += 1;
                    }
                    let i = if oldest_resolved < failures.len() {
                        oldest_resolved
                    } else {
                        oldest
                    };
                    failure_gone[i] = true;
                    sizes[1] -= failures[i].len() + 3;
                    surely -= floor(&failures[i]);
                    self.failures_elided += 1;
                }
                // Files were fitted to their budgets already: few, regrouped as they leave.
                Some(2) => {
                    self.modified.remove(0);
                    self.modified_elided += 1;
                    sizes[2] = grouped_size(&self.modified);
                }
                Some(_) => {
                    self.read.remove(0);
                    self.read_elided += 1;
                    sizes[3] = grouped_size(&self.read);
                }
                None => break,
            }
            if let Some(k) = pick {
                lens[k] -= 1;
            }
        }
        self.requests.drain(..requests_gone);
        let mut gone = failure_gone.into_iter();
        self.failures.retain(|_| !gone.next().unwrap_or(false));
    }
}

/// The failures of a summary being learned, with the two lookups a span makes per tool result
/// kept in maps: the same error again (tool and line) and the failures a success resolves (tool
/// and target). Each is a lookup, not a scan of every failure so far.
struct FailureLedger {
    /// In order, oldest first; `None` where a failure was merged into a newer one.
    slots: Vec<Option<Failure>>,
    /// The slots of each (tool, error line), oldest first.
    by_error: HashMap<(String, String), VecDeque<usize>>,
    /// The slots of each (tool, target) not yet resolved.
    unresolved: HashMap<(String, String), Vec<usize>>,
}

impl FailureLedger {
    fn new(failures: Vec<Failure>) -> FailureLedger {
        let mut ledger = FailureLedger {
            slots: Vec::with_capacity(failures.len()),
            by_error: HashMap::new(),
            unresolved: HashMap::new(),
        };
        for f in failures {
            ledger.push(f);
        }
        ledger
    }

    fn push(&mut self, f: Failure) {
        let slot = self.slots.len();
        self.by_error
            .entry((f.tool.clone(), f.line.clone()))
            .or_default()
            .push_back(slot);
        if !f.resolved {
            self.unresolved
                .entry((f.tool.clone(), f.target.clone()))
                .or_default()
                .push(slot);
        }
        self.slots.push(Some(f));
    }

    /// The same error again (on this target or another) is one entry: open again, the newest,
    /// naming the newest target and counting the others.
    fn add(&mut self, mut f: Failure) {
        let same = self
            .by_error
            .get_mut(&(f.tool.clone(), f.line.clone()))
            .and_then(VecDeque::pop_front);
        if let Some(old) = same.and_then(|slot| self.slots[slot].take()) {
            f.more += old.more + usize::from(old.target != f.target);
        }
        self.push(f);
    }

    /// A success of `tool` on `target` resolves the earlier failures of the same call.
    fn resolve(&mut self, tool: &str, target: &str) {
        let Some(slots) = self
            .unresolved
            .remove(&(tool.to_string(), target.to_string()))
        else {
            return;
        };
        for slot in slots {
            if let Some(f) = &mut self.slots[slot] {
                f.resolved = true;
            }
        }
    }

    fn into_vec(self) -> Vec<Failure> {
        self.slots.into_iter().flatten().collect()
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

/// The summary's state before this span: the previous summary's sections, or a model's text.
fn previous(previous_summary: Option<&str>) -> Sections {
    let Some(text) = previous_summary.filter(|t| !t.trim().is_empty()) else {
        return Sections::default();
    };
    // A model's prose comes back as `earlier`: its opening is the best account of the past.
    Sections::parse(text)
}

/// Summarize `messages` (oldest first), merging `previous_summary`; `focus` is the operator's
/// custom instruction, recorded so the reader knows what the compaction was asked to keep.
pub fn summarize(
    messages: &[MessageView],
    previous_summary: Option<&str>,
    focus: Option<&str>,
) -> String {
    summarize_at(messages, previous_summary, focus, None)
}

/// [`summarize`], told the user's newest request when it lies in the part that stays verbatim
/// (`current_request`): the summary then names the task the user is on at compaction time.
pub fn summarize_at(
    messages: &[MessageView],
    previous_summary: Option<&str>,
    focus: Option<&str>,
    current_request: Option<&str>,
) -> String {
    let mut s = previous(previous_summary);
    s.learn(messages);
    if let Some(text) = current_request.filter(|t| !is_acknowledgement(t)) {
        s.current = Some(clip(text, CURRENT_CHARS));
        extend_newest(&mut s.requests, [clip(text, REQUEST_CHARS)]);
        for i in standing_instructions(text) {
            add_instruction(&mut s.instructions, i);
        }
    }
    if let Some(f) = focus.filter(|f| !f.trim().is_empty()) {
        s.focus = Some(clip(f, 400));
    }
    s.render_bounded()
}

/// The parts of a summary that are facts, not prose — the current task, standing
/// instructions, tool failures and files — for a model-written summary to be completed with
/// (a model may drop or garble them; the host appends them mechanically).
pub fn mechanical(
    messages: &[MessageView],
    previous_summary: Option<&str>,
    current_request: Option<&str>,
) -> String {
    let mut s = Sections::parse(previous_summary.unwrap_or(""));
    s.learn(messages);
    if let Some(text) = current_request.filter(|t| !is_acknowledgement(t)) {
        s.current = Some(clip(text, CURRENT_CHARS));
    }
    facts(s)
}

/// [`mechanical`] of partial summaries merged (oldest first).
pub fn mechanical_merge(parts: &[String]) -> String {
    let mut all = Sections::default();
    for part in parts {
        all.absorb(Sections::parse(part));
    }
    facts(all)
}

fn facts(s: Sections) -> String {
    let facts = Sections {
        current: s.current,
        instructions: s.instructions,
        failures: s.failures,
        failures_elided: s.failures_elided,
        modified: s.modified,
        modified_elided: s.modified_elided,
        read: s.read,
        read_elided: s.read_elided,
        ..Sections::default()
    };
    if facts.current.is_none()
        && facts.instructions.is_empty()
        && facts.failures.is_empty()
        && facts.modified.is_empty()
        && facts.read.is_empty()
    {
        return String::new();
    }
    facts.render_bounded()
}

/// The files a summary lists (read, modified), directory groups expanded; elided ones are
/// only counted in the summary, so they are not here.
pub fn files_in(summary: &str) -> (Vec<String>, Vec<String>) {
    let s = Sections::parse(summary);
    (s.read, s.modified)
}

/// One summary from partial extractive summaries (oldest first): the first one's start, the
/// last one's current task and progress, the union of every list (requests, instructions with
/// supersession, failures, files); bounded like [`summarize`]. Free text (a model's summary)
/// is kept under its own heading.
pub fn merge(parts: &[String]) -> String {
    let mut all = Sections::default();
    for part in parts {
        all.absorb(previous(Some(part)));
    }
    all.render_bounded()
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::message::ToolCall;

    pub(in crate::compaction) fn msg(role: Role, text: &str) -> MessageView {
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

    pub(in crate::compaction) fn call(name: &str, args: &str) -> MessageView {
        let mut m = msg(Role::Assistant, "");
        m.tool_calls.push(ToolCall {
            id: "1".into(),
            name: name.into(),
            arguments: args.into(),
        });
        m
    }

    pub(in crate::compaction) fn result(tool: &str, text: &str, is_error: bool) -> MessageView {
        let mut m = msg(Role::ToolResult, text);
        m.tool_name = Some(tool.into());
        m.is_error = is_error;
        m
    }

    fn section_of<'a>(summary: &'a str, title: &str) -> &'a str {
        let start = summary
            .find(&format!("## {title}\n"))
            .unwrap_or_else(|| panic!("no {title} in {summary}"));
        let rest = &summary[start..];
        &rest[..rest.find("\n\n").unwrap_or(rest.len())]
    }

    /// Shedding without rendering takes exactly the steps rendering after each would take:
    /// both are run on summaries over their bound by every list in turn, at several bounds.
    #[test]
    fn shedding_without_rendering_ends_where_rendering_each_step_does() {
        let mut inputs = Vec::new();
        for (requests, failures, files) in [(400, 10, 5), (20, 300, 5), (50, 200, 400), (0, 2, 0)] {
            let mut msgs: Vec<MessageView> = (0..requests)
                .map(|i| msg(Role::User, &format!("request {i} {}", "w ".repeat(i % 13))))
                .collect();
            for i in 0..failures {
                msgs.push(call(
                    "bash",
                    &format!(r#"{{"command":"make t{}"}}"#, i % 50),
                ));
                msgs.push(result(
                    "bash",
                    &format!("error: t{i} broke {}", "x".repeat(i % 40)),
                    i % 4 != 3,
                ));
            }
            for i in 0..files {
                msgs.push(call(
                    "edit",
                    &format!(r#"{{"path":"src/d{}/f{i}.rs"}}"#, i % 9),
                ));
                msgs.push(call("read", &format!(r#"{{"path":"docs/n{i}.md"}}"#)));
            }
            msgs.push(msg(Role::Assistant, &"progress ".repeat(30)));
            let mut s = previous(Some(&format!("Model prose {}", "p ".repeat(900))));
            s.learn(&msgs);
            inputs.push(s);
        }
        let mut shortcuts = 0;
        for s in inputs {
            for max in [400, 1200, MAX_CHARS, 20_000] {
                let mut shed = s.clone();
                shed.shed_while_surely_over(max);
                shortcuts += usize::from(shed.failures.len() < s.failures.len());
                assert_eq!(
                    shed.render_shedding(max),
                    s.clone().render_shedding(max),
                    "max {max}"
                );
            }
        }
        assert!(shortcuts >= 3, "the shortcut was taken {shortcuts} times");
    }

    #[test]
    fn sections_from_messages() {
        let msgs = vec![
            msg(Role::User, "Port the selector to the new theme"),
            call("read", r#"{"path":"src/a.ts"}"#),
            result("read", "...", false),
            call("read", r#"{"path":"src/b.ts"}"#),
            call("edit", r#"{"path":"src/b.ts","oldText":"x","newText":"y"}"#),
            call("write", r#"{"file_path":"src/c.ts","content":""}"#),
            call("read", r#"{"path":"/tmp/scratch.txt"}"#),
            call("read", r#"{"path":"docs/"}"#),
            call("read", r#"{"path":"src/missing.ts"}"#),
            result("read", "\nENOENT: no such file\nmore", true),
            msg(Role::User, "Should we keep the old colors?"),
            msg(Role::Assistant, "Done."),
        ];
        let s = summarize(&msgs, None, Some("keep the API notes"));
        assert!(
            s.starts_with("## Current task\n- Should we keep the old colors?\n"),
            "{s}"
        );
        assert!(s.contains("## Started with\n- Port the selector to the new theme\n"));
        assert!(s.contains("## Focus\n- keep the API notes"));
        assert!(
            s.contains("## Files read\n- src/{a.ts, missing.ts}\n\n"),
            "{s}"
        );
        assert!(s.contains("## Files modified\n- src/{b.ts, c.ts}\n"), "{s}");
        assert!(!s.contains("/tmp/") && !s.contains("docs/"), "{s}");
        assert!(
            s.contains("## Tool failures\n- read `src/missing.ts`: ENOENT: no such file\n"),
            "{s}"
        );
        assert!(s.contains("**assistant**: Done."));
        assert_eq!(s, summarize(&msgs, None, Some("keep the API notes")));
    }

    #[test]
    fn the_current_task_is_the_last_real_request_and_survives_ten_merges() {
        let task = "Rewrite the tokenizer so that multi-byte input is counted per character, \
                    and keep the public API unchanged";
        let mut summary = summarize(
            &[
                msg(Role::User, "Set up the repo"),
                msg(Role::User, task),
                msg(Role::Assistant, "On it."),
                msg(Role::User, "ok"),
                msg(Role::User, "continue"),
            ],
            None,
            None,
        );
        for i in 0..10 {
            // Ten more compactions of tool work with acknowledgements only.
            let span: Vec<MessageView> = (0..20)
                .flat_map(|j| {
                    [
                        call("edit", &format!(r#"{{"path":"src/m{i}/f{j}.rs"}}"#)),
                        result("edit", "ok", false),
                    ]
                })
                .chain([msg(Role::User, "yes, go ahead")])
                .collect();
            summary = summarize(&span, Some(&summary), None);
        }
        assert_eq!(
            section_of(&summary, "Current task"),
            format!("## Current task\n- {}", clip(task, CURRENT_CHARS))
        );
        assert!(section_of(&summary, "User requests").contains("- Set up the repo"));
        assert!(!summary.contains("- yes, go ahead"), "{summary}");
        assert!(summary.chars().count() <= MAX_CHARS);
        // the same through the staged merge of partial summaries
        let parts: Vec<String> = (0..10)
            .map(|i| {
                summarize(
                    &[msg(Role::User, &format!("request number {i}"))],
                    None,
                    None,
                )
            })
            .collect();
        let merged = merge(&parts);
        assert!(merged.starts_with("## Current task\n- request number 9\n"));
        assert!(merged.contains("## Started with\n- request number 0\n"));
        for i in 0..10 {
            assert!(
                merged.contains(&format!("- request number {i}\n")),
                "{merged}"
            );
        }
    }

    #[test]
    fn the_current_request_in_the_kept_part_is_named() {
        let s = summarize_at(
            &[msg(Role::User, "Fix the build")],
            None,
            None,
            Some("Now add a CHANGELOG entry"),
        );
        assert!(s.starts_with("## Current task\n- Now add a CHANGELOG entry\n"));
        assert!(
            s.contains("- Fix the build\n- Now add a CHANGELOG entry\n"),
            "{s}"
        );
    }

    #[test]
    fn acknowledgements_and_slash_commands_are_not_requests() {
        for ack in [
            "ok",
            "Yes, do it",
            "continue",
            "/mode",
            "yeah do it all",
            "k",
            "",
        ] {
            assert!(is_acknowledgement(ack), "{ack}");
        }
        for ask in [
            "ok, make muted a little brighter",
            "no, the block should stay as is",
            "f0c674",
        ] {
            assert!(!is_acknowledgement(ask), "{ask}");
        }
    }

    #[test]
    fn an_instruction_given_in_turn_two_survives_until_superseded() {
        let mut summary = summarize(
            &[
                msg(Role::User, "Add retry logic to the client"),
                msg(Role::Assistant, "Sure."),
                msg(
                    Role::User,
                    "Good. Never push to main directly. Also, use anyhow not unwrap in the CLI.",
                ),
                msg(Role::User, "I don't understand why this fails?"),
            ],
            None,
            None,
        );
        for i in 0..10 {
            let span = [
                msg(Role::User, &format!("Now handle case {i} in the parser")),
                call("bash", r#"{"command":"cargo test"}"#),
                result("bash", "ok", false),
            ];
            summary = summarize(&span, Some(&summary), None);
        }
        let rules = section_of(&summary, "Standing instructions");
        assert!(rules.contains("- Never push to main directly."), "{rules}");
        assert!(
            rules.contains("- Also, use anyhow not unwrap in the CLI."),
            "{rules}"
        );
        assert!(!rules.contains("understand"), "{rules}");
        // A newer rule on the same subject replaces the old one.
        let summary = summarize(
            &[msg(
                Role::User,
                "Change of plan: use thiserror not anyhow in the CLI.",
            )],
            Some(&summary),
            None,
        );
        let rules = section_of(&summary, "Standing instructions");
        assert!(
            rules.contains("use thiserror not anyhow in the CLI"),
            "{rules}"
        );
        assert!(!rules.contains("use anyhow not unwrap"), "{rules}");
        assert!(rules.contains("Never push to main directly"), "{rules}");
    }

    #[test]
    fn a_boilerplate_first_line_is_not_the_failure() {
        let npm = "\n> pi-monorepo@0.0.3 check\n> biome check && tsc\n\nsrc/theme.ts(12,3): error TS2304: Cannot find name 'chalk'.\n";
        let git = "To https://github.com/x/y.git\n ! [rejected]        main -> main (fetch first)\nerror: failed to push some refs";
        let msgs = vec![
            call("bash", r#"{"command":"npm run check\nnpm test"}"#),
            result("bash", npm, true),
            call("bash", r#"{"command":"git push origin main"}"#),
            result("bash", git, true),
            call("edit", r#"{"path":"src/a.ts","oldText":"x"}"#),
            result("edit", "Could not find the exact text in src/a.ts", true),
            call("edit", r#"{"path":"src/a.ts","oldText":"y"}"#),
            result("edit", "Successfully replaced text", false),
        ];
        let s = summarize(&msgs, None, None);
        let failures = section_of(&s, "Tool failures");
        assert!(
            failures.contains(
                "- bash `npm run check`: src/theme.ts(12,3): error TS2304: Cannot find name 'chalk'.\n"
            ),
            "{failures}"
        );
        assert!(
            failures.contains("- bash `git push origin main`: ! [rejected]"),
            "{failures}"
        );
        // Resolved: the error line alone, shorter (the path is in it), read back as resolved.
        assert!(
            failures.contains("- edit: Could not find the exact text in src/a.ts — resolved"),
            "{failures}"
        );
        let again = summarize(&[], Some(&s), None);
        assert_eq!(section_of(&again, "Tool failures"), failures);
        let f = Failure::parse("edit (+2 more): Could not find `x` in a.ts — resolved");
        assert_eq!((f.tool.as_str(), f.more, f.resolved), ("edit", 2, true));
        assert_eq!(f.line, "Could not find `x` in a.ts");
        assert!(!failures.contains("> pi-monorepo"), "{failures}");
        // The same error on other targets is one entry naming the newest and counting the rest.
        let greps: Vec<MessageView> = (0..3)
            .flat_map(|i| {
                [
                    call("bash", &format!(r#"{{"command":"grep -n x{i} src"}}"#)),
                    result("bash", "Command exited with code 1", true),
                ]
            })
            .collect();
        let s = summarize(&greps, Some(&s), None);
        let failures = section_of(&s, "Tool failures");
        assert!(
            failures.contains("- bash `grep -n x2 src` (+2 more): Command exited with code 1"),
            "{failures}"
        );
        assert_eq!(failures.matches("exited with code 1").count(), 1);
        assert!(failures.contains("bash `npm run check`"), "{failures}");
        // unresolved failures are carried through later compactions
        let later = summarize(&[msg(Role::User, "next thing")], Some(&s), None);
        assert!(
            later.contains("bash `npm run check`: src/theme.ts(12,3)"),
            "{later}"
        );
        assert!(!later.contains("`npm run check`: src/theme.ts(12,3): error TS2304: Cannot find name 'chalk'. — resolved"));
    }

    #[test]
    fn files_are_complete_and_grouped_until_their_budget_then_the_oldest_are_counted() {
        let span = |from: usize, to: usize| -> Vec<MessageView> {
            (from..to)
                .map(|i| {
                    call(
                        "edit",
                        &format!(r#"{{"path":"src/mod{}/file{i}.rs"}}"#, i % 4),
                    )
                })
                .collect()
        };
        let mut summary = summarize(&span(0, 20), None, None);
        summary = summarize(&span(20, 40), Some(&summary), None);
        let files = section_of(&summary, "Files modified");
        for i in 0..40 {
            assert!(files.contains(&format!("file{i}.rs")), "{files}");
        }
        assert_eq!(files.lines().count(), 5, "one line per directory: {files}");
        // Past the budget: the newest stay, the oldest are counted, across merges.
        for k in 0..10 {
            summary = summarize(&span(40 + k * 40, 80 + k * 40), Some(&summary), None);
        }
        let files = section_of(&summary, "Files modified");
        assert!(files.contains("file439.rs"), "{files}");
        assert!(!files.contains("file0.rs,"), "{files}");
        let elided = files
            .lines()
            .find_map(|l| elided_count(l.trim_start_matches("- ")))
            .expect("a count of the elided files");
        let listed: usize = files
            .lines()
            .skip(2)
            .map(|l| ungrouped(l.trim_start_matches("- ")).len())
            .sum();
        assert_eq!(elided + listed, 440, "{files}");
        assert!(files.len() <= MODIFIED_FILES_BUDGET + 60, "{}", files.len());
    }

    #[test]
    fn the_budget_truncates_the_past_never_the_present() {
        let task = format!("The real task: {}", "keep this ".repeat(60));
        let mut msgs: Vec<MessageView> = (0..300)
            .flat_map(|i| {
                [
                    msg(Role::User, &format!("request {i} {}", "y".repeat(90))),
                    call(
                        "edit",
                        &format!(r#"{{"path":"src/very/long/path/{i}.rs"}}"#),
                    ),
                    call("bash", &format!(r#"{{"command":"make target{i}"}}"#)),
                    result(
                        "bash",
                        &format!("error: target{i} {}", "z".repeat(200)),
                        true,
                    ),
                ]
            })
            .collect();
        msgs.push(msg(Role::User, "Never force-push the release branch."));
        msgs.push(msg(Role::User, &task));
        let s = summarize(&msgs, Some(&"z".repeat(50_000)), Some(&"f".repeat(10_000)));
        assert!(s.chars().count() <= MAX_CHARS, "{}", s.chars().count());
        assert!(s.starts_with(&format!(
            "## Current task\n- {}",
            clip(&task, CURRENT_CHARS)
        )));
        assert!(s.contains("- Never force-push the release branch."), "{s}");
        assert!(s.contains("request 299"), "the newest request stays: {s}");
        assert!(
            files_in(&s)
                .1
                .iter()
                .any(|f| f == "src/very/long/path/299.rs"),
            "the newest file stays: {s}"
        );
        assert!(s.contains("make target299"), "the newest failure stays");
        assert!(s.contains("earlier requests)"), "{s}");
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
        assert!(second.contains("## Current task\n- Goal one\n"), "{second}");
        assert!(second.contains("- {x.rs, y.rs}"), "{second}");
        assert_eq!(second.matches("## Current task").count(), 1);
        let free = summarize(&[], Some("The model wrote this."), None);
        assert!(free.contains("## Earlier context\n- The model wrote this."));
        // a summary in the older layout is read too
        let old = "## Goal\n- Old goal\n\n## Files modified\n- a.rs\n\n## Open questions\n- Why?";
        let s = summarize(&[], Some(old), None);
        assert!(s.contains("## Started with\n- Old goal"), "{s}");
        assert!(s.contains("- Why?") && s.contains("- a.rs"), "{s}");
    }

    #[test]
    fn mechanical_facts_for_a_model_summary() {
        let msgs = vec![
            msg(Role::User, "Don't touch the lockfile. Fix the flaky test"),
            call("edit", r#"{"path":"tests/a.rs"}"#),
            call("bash", r#"{"command":"cargo test"}"#),
            result(
                "bash",
                "running 3 tests\nthread 'x' panicked at tests/a.rs:3",
                true,
            ),
        ];
        let m = mechanical(&msgs, None, None);
        assert!(
            m.starts_with("## Current task\n- Don't touch the lockfile."),
            "{m}"
        );
        assert!(m.contains("## Standing instructions\n- Don't touch the lockfile."));
        assert!(m.contains("bash `cargo test`: thread 'x' panicked at tests/a.rs:3"));
        assert!(m.contains("## Files modified\n- tests/a.rs"));
        assert!(!m.contains("Recent exchanges"));
    }
}
