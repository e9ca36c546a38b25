//! A summary as sections: read from a previous summary, merged with a later one, and learned
//! from messages.
use super::*;

/// A summary's content, by section. Lists are oldest first; `*_elided` count what the budget
/// left out of them, so the count survives the next merge.
#[derive(Debug, Clone, Default)]
pub(super) struct Sections {
    pub(super) current: Option<String>,
    pub(super) started: Option<String>,
    pub(super) focus: Option<String>,
    /// A model-written summary merged in: kept under its own heading.
    pub(super) earlier: Option<String>,
    pub(super) instructions: Vec<String>,
    pub(super) requests: Vec<String>,
    pub(super) requests_elided: usize,
    pub(super) progress: Option<String>,
    pub(super) failures: Vec<Failure>,
    pub(super) failures_elided: usize,
    pub(super) modified: Vec<String>,
    pub(super) modified_elided: usize,
    pub(super) read: Vec<String>,
    pub(super) read_elided: usize,
    pub(super) recent: Vec<String>,
}

/// The sections [`Sections::parse`] reads back (or, for [`OVERSIZED_TITLE`], knows to drop).
pub(super) const KNOWN: &[&str] = &[
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
pub(super) const EARLIER_CHARS: usize = 2000;

/// `(+12 earlier …)` → 12.
pub(super) fn elided_count(item: &str) -> Option<usize> {
    item.strip_prefix("(+")?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

impl Sections {
    /// Reads a summary this module wrote (older layouts too: `Goal`, `Open questions`).
    pub(super) fn parse(text: &str) -> Sections {
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
    pub(super) fn absorb(&mut self, later: Sections) {
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
    pub(super) fn learn(&mut self, messages: &[MessageView]) {
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
                    for i in standing_instructions(text, INSTRUCTION_CHARS) {
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
                            line: ctxhost_heuristics::error_line(&m.text, FAILURE_LINE_CHARS),
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
    pub(super) fn progress_in_recent(&self) -> bool {
        let (Some(progress), Some(last)) = (&self.progress, self.recent.last()) else {
            return false;
        };
        last.strip_prefix("**assistant**: ").is_some_and(|said| {
            // Both clip the same message; a clip may skip its middle, the heads still agree.
            let head = said.split(" … ").next().unwrap_or(said);
            progress.starts_with(head.trim_end_matches('…'))
        })
    }
}
