//! Why tools failed: a failure as one summary line, the call a result answers, and the
//! ledger a summary learns failures into.
use super::*;

/// A failed tool call: the tool, the command head or path it ran on, and the line of its
/// output that names the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Failure {
    pub(super) tool: String,
    pub(super) target: String,
    pub(super) line: String,
    pub(super) resolved: bool,
    /// Other targets that failed with the same line (`grep …: exit code 1` nine times is one
    /// lesson; the newest target is named).
    pub(super) more: usize,
}

pub(super) const RESOLVED: &str = " — resolved";

impl Failure {
    pub(super) fn render(&self) -> String {
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

    pub(super) fn parse(item: &str) -> Failure {
        let (item, resolved) = match item.strip_suffix(RESOLVED) {
            Some(rest) => (rest, true),
            None => (item, false),
        };
        // `tool `target` (+N more): line`, `tool `target`: line`, `tool (+N more): line` or
        // `tool: line`; a target may itself hold ": ", a line a backtick.
        let (tool, target, more, line) = with_target(item).unwrap_or_else(|| {
            let (head, line) = item.split_once(": ").unwrap_or((item, ""));
            match head.split_once(" (+") {
                Some((tool, more)) => (tool, "", more_count(&format!("(+{more}")), line),
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
    pub(super) fn key(&self) -> (String, String, String) {
        (self.tool.clone(), self.target.clone(), self.line.clone())
    }
}

/// `tool `target` (+N more): line` or `tool `target`: line`, as (tool, target, N, line).
fn with_target(item: &str) -> Option<(&str, &str, usize, &str)> {
    let (tool, rest) = item
        .split_once(" `")
        .filter(|(tool, _)| !tool.contains(": "))?;
    let (target, rest) = rest.split_once('`')?;
    let (more, line) = rest.split_once(": ")?;
    Some((tool, target, more_count(more), line))
}

/// `(+N more)` → N; 0 for anything else.
fn more_count(more: &str) -> usize {
    let count = more
        .trim()
        .strip_prefix("(+")
        .and_then(|m| m.strip_suffix(" more)"));
    count.and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// What a tool call ran on, from its JSON `arguments`: the path it names, else the first line
/// of its command, else its first string argument; clipped to `max_chars`.
pub fn call_target(arguments: &str, max_chars: usize) -> String {
    let arguments = serde_json::from_str(arguments).unwrap_or(Value::Null);
    ctxhost_heuristics::call_target(&text_fields(&arguments), max_chars)
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
            .map(|c| {
                // Shown in a code span: a backtick would end it.
                let target = call_target(&c.arguments, TARGET_CHARS).replace('`', "'");
                (c.name.clone(), target)
            })
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

/// The failures of a summary being learned, with the two lookups a span makes per tool result
/// kept in maps: the same error again (tool and line) and the failures a success resolves (tool
/// and target). Each is a lookup, not a scan of every failure so far.
pub(super) struct FailureLedger {
    /// In order, oldest first; `None` where a failure was merged into a newer one.
    pub(super) slots: Vec<Option<Failure>>,
    /// The slots of each (tool, error line), oldest first.
    pub(super) by_error: HashMap<(String, String), VecDeque<usize>>,
    /// The slots of each (tool, target) not yet resolved.
    pub(super) unresolved: HashMap<(String, String), Vec<usize>>,
}

impl FailureLedger {
    pub(super) fn new(failures: Vec<Failure>) -> FailureLedger {
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

    pub(super) fn push(&mut self, f: Failure) {
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
    pub(super) fn add(&mut self, mut f: Failure) {
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
    pub(super) fn resolve(&mut self, tool: &str, target: &str) {
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

    pub(super) fn into_vec(self) -> Vec<Failure> {
        self.slots.into_iter().flatten().collect()
    }
}
