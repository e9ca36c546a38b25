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
        let mut parsed = Parsed::default();
        let mut section = "";
        for line in text.lines() {
            if let Some(h) = line.strip_prefix("## ") {
                section = h.trim();
                continue;
            }
            match line.strip_prefix("- ").filter(|_| KNOWN.contains(&section)) {
                Some(item) => parsed.item(section, item.trim().to_string()),
                None if !line.trim().is_empty() => parsed.free.push(line.trim()),
                None => {}
            }
        }
        parsed.finish()
    }

    /// Folds `later` (what came after `self`) in: the later current task and progress win,
    /// lists are unioned in order, counts add up.
    pub(super) fn absorb(&mut self, later: Sections) {
        self.current = later.current.or(self.current.take());
        self.started = self.started.take().or(later.started);
        self.focus = later.focus.or(self.focus.take());
        self.earlier = self.earlier.take().or(later.earlier);
        for i in later.instructions {
            add_instruction(&mut self.instructions, i);
        }
        self.requests_elided += later.requests_elided;
        extend_newest(&mut self.requests, later.requests);
        self.progress = later.progress.or(self.progress.take());
        self.failures_elided += later.failures_elided;
        let mut failures = FailureLedger::new(std::mem::take(&mut self.failures));
        for f in later.failures {
            failures.add(f);
        }
        self.failures = failures.into_vec();
        self.modified_elided += later.modified_elided;
        self.read_elided += later.read_elided;
        self.add_files(later.read, later.modified);
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
                Role::User => self.learn_request(m.text.trim(), &mut requests),
                Role::Assistant => {
                    pending.calls(m);
                    self.learn_progress(&m.text);
                }
                Role::ToolResult => learn_result(&mut failures, &mut pending, m),
                _ => {}
            }
        }
        extend_newest(&mut self.requests, requests);
        self.failures = failures.into_vec();
        let (read, modified) = file_operations(messages);
        self.add_files(read, modified);
        let recent = recent_exchanges(messages);
        if !recent.is_empty() {
            self.recent = recent;
        }
    }

    /// Files read and modified, after those listed: a file modified anywhere is listed as
    /// modified only.
    fn add_files(&mut self, read: Vec<String>, modified: Vec<String>) {
        extend_unique(&mut self.modified, modified);
        extend_unique(&mut self.read, read);
        drop_modified(&mut self.read, &self.modified);
    }

    /// An agent's message that says something: the progress so far.
    fn learn_progress(&mut self, text: &str) {
        if !text.trim().is_empty() {
            self.progress = Some(clip(text, PROGRESS_CHARS));
        }
    }

    /// A user's message: the task now (and at the start), a request, standing instructions.
    fn learn_request(&mut self, text: &str, requests: &mut Vec<String>) {
        if is_acknowledgement(text) {
            return;
        }
        self.started
            .get_or_insert_with(|| clip(text, STARTED_CHARS));
        self.current = Some(clip(text, CURRENT_CHARS));
        requests.push(clip(text, REQUEST_CHARS));
        for i in standing_instructions(text, INSTRUCTION_CHARS) {
            add_instruction(&mut self.instructions, i);
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

/// A tool result: a failure, or the success that resolves the failures of its call.
fn learn_result(failures: &mut FailureLedger, pending: &mut PendingCalls, m: &MessageView) {
    let (tool, target) = pending.answer(m);
    if !m.is_error {
        failures.resolve(&tool, &target);
        return;
    }
    failures.add(Failure {
        tool,
        target,
        line: ctxhost_heuristics::error_line(&m.text, FAILURE_LINE_CHARS),
        resolved: false,
        more: 0,
    });
}

/// The newest exchanges, oldest first: only they are rendered, so only they are kept.
fn recent_exchanges(messages: &[MessageView]) -> Vec<String> {
    let mut recent: Vec<String> = messages
        .iter()
        .rev()
        .filter(|m| matches!(m.role, Role::User | Role::Assistant) && !m.text.trim().is_empty())
        .take(RECENT)
        .map(|m| format!("**{}**: {}", m.role.as_str(), clip(&m.text, RECENT_CHARS)))
        .collect();
    recent.reverse();
    recent
}

/// A summary being read back: the lists' items gathered, made distinct once at the end (first
/// sight kept).
#[derive(Default)]
struct Parsed<'t> {
    sections: Sections,
    instructions: Vec<String>,
    requests: Vec<String>,
    modified: Vec<String>,
    read: Vec<String>,
    failures_seen: HashSet<(String, String, String)>,
    /// Lines outside the sections this module writes: a model's prose, pinned messages.
    free: Vec<&'t str>,
}

impl Parsed<'_> {
    /// An item of a known `section`.
    fn item(&mut self, section: &str, item: String) {
        let p = &mut self.sections;
        match (section, elided_count(&item)) {
            ("Current task", _) => p.current = Some(item),
            ("Started with" | "Goal", _) => {
                p.started.get_or_insert(item);
            }
            ("Focus", _) => p.focus = Some(item),
            ("Earlier context", _) => p.earlier = Some(item),
            ("Standing instructions", _) => self.instructions.push(item),
            ("User requests", Some(n)) => p.requests_elided += n,
            ("User requests" | "Open questions", None) => self.requests.push(item),
            ("Progress", _) => p.progress = Some(item),
            ("Tool failures", Some(n)) => p.failures_elided += n,
            ("Tool failures", None) => self.failure(&item),
            ("Files modified", Some(n)) => p.modified_elided += n,
            ("Files modified", None) => self.modified.extend(ungrouped(&item)),
            ("Files read", Some(n)) => p.read_elided += n,
            ("Files read", None) => self.read.extend(ungrouped(&item)),
            ("Recent exchanges", _) => p.recent.push(item),
            _ => {}
        }
    }

    fn failure(&mut self, item: &str) {
        let f = Failure::parse(item);
        if self.failures_seen.insert(f.key()) {
            self.sections.failures.push(f);
        }
    }

    fn finish(self) -> Sections {
        let mut p = self.sections;
        extend_unique(&mut p.instructions, self.instructions);
        extend_unique(&mut p.requests, self.requests);
        p.add_files(self.read, self.modified);
        if !self.free.is_empty() {
            let mut earlier = p.earlier.take().unwrap_or_default();
            if !earlier.is_empty() {
                earlier.push(' ');
            }
            earlier.push_str(&self.free.join(" "));
            p.earlier = Some(clip(&earlier, EARLIER_CHARS));
        }
        // "Started with" is left out when it equals the current task.
        if p.started.is_none() {
            p.started = p.current.clone();
        }
        p
    }
}
