//! One session's engine state and what each hook does with it, without touching the host: the
//! hooks in `lib.rs` pass in what they got from the host and log the warnings collected here,
//! so all of this runs natively in unit tests against a temp dir.

use std::path::Path;

use ctxhost_sdk::serde_json::{self, Value};
use ctxhost_sdk::{AssembleRequest, AssembleResult, ContextEntry, EntryRef, Message, Plan, Role};

use crate::capture::{Capture, Dirty};
use crate::checkpoint::{Checkpoint, Meta, SCHEMA, SCHEMA_VERSION, TokenUsage, Trigger};
use crate::config::Config;
use crate::gauge::{self, Level};
use crate::restore::{self, Occasion};
use crate::store::{self, Stamped, Store};
use crate::time::{iso_utc, parse_iso_utc};

/// How the session started, as the host's `bootstrap` reports it.
#[derive(Debug, Clone)]
pub struct Start<'a> {
    pub key: &'a str,
    pub session_file: &'a str,
    /// Entries in the transcript when the instance started (`None`: unknown, no bootstrap).
    pub entry_count: Option<u32>,
    /// The compaction summary the current context starts with, if any: an old compaction is
    /// not a reason to restore.
    pub leading_summary: Option<EntryRef>,
    pub config: Config,
}

/// The engine's state for one session.
#[derive(Debug)]
pub struct SessionState {
    key: String,
    session_file: String,
    store: Store,
    config: Config,
    capture: Capture,
    /// The newest checkpoint written or found: the restore's source and the next one's
    /// `previous_checkpoint`.
    latest: Option<Checkpoint>,
    compaction_count: u32,
    context_window: u32,
    context_tokens: u32,
    /// Input tokens of the last automatic checkpoint since the last compaction (dedupe).
    last_auto_tokens: Option<u32>,
    /// Something was captured that no checkpoint holds yet.
    unsaved: bool,
    /// State-file parts changed since they were last saved, when that was, and the messages
    /// ingested since: state files are written at a bounded rate, not on every ingest.
    pending: Dirty,
    saved_at: Option<u64>,
    ingested_since_save: u32,
    shown: Shown,
    /// Whether `shown` is on disk as it is: a first compaction must find what preceded it.
    shown_saved: bool,
    warnings: Vec<String>,
}

/// What the context shows besides the transcript's entries, with the compaction summary it
/// follows. Saved whenever it changes: an instance started again on the same transcript
/// (OpenClaw starts one per turn, a sidecar gives an idle session's back) plans the context
/// its predecessor planned, and a compaction made by another instance still gets its restore.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Shown {
    /// The transcript this was shown in.
    session_file: String,
    /// The compaction summary seen first in the last assembled context.
    seen_summary: Option<EntryRef>,
    /// The restore message, once there is reason for one: inserted on every assemble until
    /// the next compaction replaces it (inserted messages are not written to the transcript,
    /// so showing it once would lose it on the next turn).
    restore: Option<String>,
    /// Gauge readings given since the last compaction, each where it was given.
    gauge: GaugeNotes,
}

/// The gauge as messages pinned where they were given, not a system-prompt line: a line that
/// changes every turn at the top of the request makes every call a prompt-cache miss, while a
/// note that stays where it was inserted leaves each request a byte-identical extension of the
/// previous one. A new note is given only when the reading moves a step (or a checkpoint is
/// saved), so the model still sees how full the context is, never more than a step stale.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct GaugeNotes {
    /// (the entry the note follows, its text), oldest first.
    notes: Vec<(EntryRef, String)>,
    /// The last reading given: (percent step, checkpoint saved).
    last: Option<(u64, bool)>,
}

impl Shown {
    /// What an earlier instance on this transcript showed. Without one (or when it was shown in
    /// another transcript) the context as it starts: its leading summary is an old compaction,
    /// not a reason to restore.
    /// Also whether it was on disk.
    fn resumed(store: &Store, start: &Start<'_>, warnings: &mut Vec<String>) -> (Self, bool) {
        let fresh = Shown {
            session_file: start.session_file.to_string(),
            seen_summary: start.leading_summary,
            ..Shown::default()
        };
        match store.load_state::<Shown>(store::SHOWN) {
            Ok(Some(Stamped { data, .. }))
                if data.session_file == start.session_file && start.entry_count != Some(0) =>
            {
                (data, true)
            }
            Ok(_) => (fresh, false),
            Err(e) => {
                warnings.push(format!("state file ignored: {e}"));
                (fresh, false)
            }
        }
    }

    /// What tells one state of it from another cheaply: the summary it follows and the
    /// notes given (the restore changes only with the summary).
    fn changes(&self) -> (Option<EntryRef>, usize) {
        (self.seen_summary, self.gauge.notes.len())
    }
}

/// The entry a new gauge note follows: the last one when the context ends a turn (the prompt
/// is still to come), the one before the prompt when the context ends with it (a runtime that
/// sends the prompt among the entries, as pi does: the prompt stays the last thing the model
/// reads), and none inside a tool loop (a note between a tool result and the model's next step
/// would interrupt it, and placed further back it would change what the previous call sent):
/// the reading waits for the next turn.
fn note_anchor(entries: &[ContextEntry]) -> Option<EntryRef> {
    match entries {
        [.., last] if last.is_tool_result() => None,
        [.., before, last] if last.role == Role::User => Some(before.entry),
        [.., last] => Some(last.entry),
        [] => None,
    }
}

/// Percentage points between gauge notes.
pub const GAUGE_STEP_PERCENT: u64 = 5;

/// The custom message type of a gauge note.
pub const GAUGE_CUSTOM_TYPE: &str = "checkpoint-gauge";

/// State files are saved at most this often (ms)…
pub const SAVE_INTERVAL_MS: u64 = 2_000;
/// …or after this many ingested messages, whichever comes first: a crash loses at most that
/// much of the capture, and a replay does not rewrite four files per message.
pub const SAVE_EVERY_MESSAGES: u32 = 50;

/// `agent:<agent_id>:<channel>:…` keys name their agent and channel; other keys neither.
fn agent_and_channel(key: &str) -> (Option<String>, Option<String>) {
    let mut parts = key.split(':');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("agent"), Some(agent), channel) if !agent.is_empty() => (
            Some(agent.to_string()),
            channel.filter(|c| !c.is_empty()).map(str::to_string),
        ),
        _ => (None, None),
    }
}

impl SessionState {
    /// Opens the session's state: the newest checkpoint, and the state files unless they are
    /// older than it (then the checkpoint, written from that state, seeds the capture).
    pub fn open(root: &Path, start: Start<'_>) -> Self {
        let store = Store::new(root, start.key);
        store.remove_stale_temps();
        let found = store.latest();
        let mut warnings = found.warnings;
        let latest = found.checkpoint;
        let checkpoint_ms = latest
            .as_ref()
            .and_then(|cp| parse_iso_utc(&cp.meta.created_at));

        // The checkpoint, written from the state of its time, is the base; state files written
        // after it hold what was captured since and win. Older ones are stale: discarded.
        let mut capture = match &latest {
            Some(checkpoint) => Capture::from_checkpoint(checkpoint),
            None => Capture::default(),
        };
        let mut mismatched = Vec::new();
        let mut load = |name| load_part(&store, name, checkpoint_ms, &mut warnings);
        let decisions = load(store::DECISIONS);
        let thread = load(store::THREAD);
        let resources = load(store::RESOURCES);
        let open_items = load(store::OPEN_ITEMS);
        if let Some(part) = decode(decisions, store::DECISIONS, &mut mismatched) {
            capture.decisions = part;
        }
        if let Some(part) = decode(thread, store::THREAD, &mut mismatched) {
            capture.thread = part;
        }
        if let Some(part) = decode(resources, store::RESOURCES, &mut mismatched) {
            capture.resources = part;
        }
        if let Some(part) = decode(open_items, store::OPEN_ITEMS, &mut mismatched) {
            capture.open_items = part;
        }
        warnings.extend(mismatched);

        // A new session: a fresh transcript, or another transcript than the checkpoint's.
        let new_session = latest.as_ref().is_some_and(|cp| {
            start.entry_count == Some(0) || cp.meta.session_file != start.session_file
        });
        if new_session {
            // The thread describes the conversation that comes next, not the last one's.
            capture.thread = Default::default();
        }
        let (shown, shown_saved) = if new_session {
            let shown = Shown {
                session_file: start.session_file.to_string(),
                restore: latest
                    .as_ref()
                    .map(|cp| restore::render(cp, Occasion::NewSession, None)),
                ..Shown::default()
            };
            (shown, false)
        } else {
            Shown::resumed(&store, &start, &mut warnings)
        };
        let compaction_count = match &latest {
            Some(cp) if !new_session => cp.meta.compaction_count,
            _ => 0,
        };
        SessionState {
            key: start.key.to_string(),
            session_file: start.session_file.to_string(),
            store,
            config: start.config,
            capture,
            latest,
            compaction_count,
            context_window: 0,
            context_tokens: 0,
            last_auto_tokens: None,
            unsaved: false,
            pending: Dirty::default(),
            saved_at: None,
            ingested_since_save: 0,
            shown,
            shown_saved,
            warnings,
        }
    }

    /// Warnings since the last call, for the host's log.
    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The newest checkpoint written or found.
    pub fn latest(&self) -> Option<&Checkpoint> {
        self.latest.as_ref()
    }

    /// The restore message currently inserted, if any.
    pub fn restore(&self) -> Option<&str> {
        self.shown.restore.as_deref()
    }

    /// Captures one message; the state files it changed are saved when the last save is
    /// [`SAVE_INTERVAL_MS`] or [`SAVE_EVERY_MESSAGES`] old (a checkpoint saves everything).
    pub fn ingest(&mut self, message: &Message, now_ms: u64) {
        self.capture.ingest(message);
        self.unsaved = true;
        let dirty = self.capture.take_dirty();
        self.pending = Dirty {
            decisions: self.pending.decisions || dirty.decisions,
            thread: self.pending.thread || dirty.thread,
            resources: self.pending.resources || dirty.resources,
            open_items: self.pending.open_items || dirty.open_items,
        };
        self.ingested_since_save += 1;
        let due = self
            .saved_at
            .is_none_or(|at| now_ms.saturating_sub(at) >= SAVE_INTERVAL_MS)
            || self.ingested_since_save >= SAVE_EVERY_MESSAGES;
        if due && self.pending.any() {
            self.save_pending(now_ms);
        }
    }

    /// Writes the state files that changed since they were last saved.
    pub fn save_pending(&mut self, now_ms: u64) {
        let dirty = std::mem::take(&mut self.pending);
        self.saved_at = Some(now_ms);
        self.ingested_since_save = 0;
        let saved = [
            (dirty.decisions, store::DECISIONS),
            (dirty.thread, store::THREAD),
            (dirty.resources, store::RESOURCES),
            (dirty.open_items, store::OPEN_ITEMS),
        ]
        .into_iter()
        .filter(|(changed, _)| *changed)
        .map(|(_, name)| (name, self.save_part(name, now_ms)));
        let failures: Vec<String> = saved
            .filter_map(|(name, result)| result.err().map(|e| format!("saving {name}: {e}")))
            .collect();
        self.warnings.extend(failures);
    }

    fn save_part(&self, name: &str, now_ms: u64) -> std::io::Result<()> {
        let capture = &self.capture;
        match name {
            store::DECISIONS => self.store.save_state(name, &capture.decisions, now_ms),
            store::THREAD => self.store.save_state(name, &capture.thread, now_ms),
            store::RESOURCES => self.store.save_state(name, &capture.resources, now_ms),
            _ => self.store.save_state(name, &capture.open_items, now_ms),
        }
    }

    /// The compaction summary `request` starts with when this session has not seen it yet:
    /// the next [`Self::assemble_after`] renders the restore, and wants the summary's text.
    pub fn new_summary(&self, request: &AssembleRequest) -> Option<EntryRef> {
        request
            .entries
            .first()
            .filter(|entry| entry.role == Role::CompactionSummary)
            .map(|entry| entry.entry)
            .filter(|&entry| Some(entry) != self.shown.seen_summary)
    }

    /// [`Self::assemble_after`] without the summary's text.
    pub fn assemble(&mut self, request: &AssembleRequest, now_ms: u64) -> AssembleResult {
        self.assemble_after(request, now_ms, None)
    }

    /// The gauge, the checkpoint at the threshold, and the restore after a compaction, which
    /// leaves out what `summary_text` (the new summary's, when there is one) already says.
    pub fn assemble_after(
        &mut self,
        request: &AssembleRequest,
        now_ms: u64,
        summary_text: Option<&str>,
    ) -> AssembleResult {
        self.context_window = request.context_window;
        let shown_before = self.shown.changes();
        if let Some(summary) = self.new_summary(request) {
            self.restore_after(summary, summary_text);
        }
        self.read_gauge(request, now_ms);
        if !self.shown_saved || self.shown.changes() != shown_before {
            self.save_shown(now_ms);
        }
        self.plan(request)
    }

    /// A compaction starts a new prefix: readings of the old context go with it, and the
    /// restore is rendered from the newest checkpoint.
    fn restore_after(&mut self, summary: EntryRef, summary_text: Option<&str>) {
        self.shown.seen_summary = Some(summary);
        self.shown.gauge = GaugeNotes::default();
        self.shown.restore = self
            .latest
            .as_ref()
            .map(|cp| restore::render(cp, Occasion::Compaction, summary_text));
    }

    /// Reads the gauge for this call, writes the checkpoint at the threshold, and pins a note
    /// when the reading moved a step.
    fn read_gauge(&mut self, request: &AssembleRequest, now_ms: u64) {
        // The gauge reads the host's estimate of what this call sends (the entries' counts,
        // which the host's compaction decides on, plus the restore inserted here), not
        // `context_tokens`: recorded usage may come from another window (a replayed file read
        // 470–819% full).
        let entries: u64 = request.entries.iter().map(|e| u64::from(e.tokens)).sum();
        let restore = self
            .shown
            .restore
            .as_deref()
            .map_or(0, |r| u64::from(ctxhost_sdk::estimate_tokens(r)));
        let tokens = u32::try_from(entries + restore).unwrap_or(u32::MAX);
        self.context_tokens = tokens;
        let window = request.context_window;
        let reading = match gauge::read(tokens, window, &self.config, self.last_auto_tokens) {
            Level::Quiet => None,
            Level::Show => Some(false),
            Level::Checkpoint { write: false } => Some(true),
            Level::Checkpoint { write: true } => {
                let saved = self.write_checkpoint(Trigger::Auto80Pct, tokens, false, now_ms);
                if saved {
                    self.last_auto_tokens = Some(tokens);
                }
                Some(saved)
            }
        };
        if let (Some(saved), Some(anchor)) = (reading, note_anchor(&request.entries)) {
            let step = gauge::percent(tokens, window) / GAUGE_STEP_PERCENT;
            if self.shown.gauge.last != Some((step, saved)) {
                self.shown.gauge.last = Some((step, saved));
                let line = gauge::line(tokens, window, saved);
                self.shown.gauge.notes.push((anchor, line));
            }
        }
    }

    /// The context: the summary, the restore after it, then the entries with each gauge note
    /// where it was given.
    fn plan(&self, request: &AssembleRequest) -> AssembleResult {
        let summary = request
            .entries
            .first()
            .filter(|entry| entry.role == Role::CompactionSummary);
        let mut plan = Plan::with_capacity(3);
        let mut rest = match summary {
            Some(summary) => {
                plan = plan.keep(summary);
                &request.entries[1..]
            }
            None => &request.entries[..],
        };
        if let Some(restore) = &self.shown.restore {
            plan = plan.insert_custom(restore::CUSTOM_TYPE, restore);
        }
        let mut last_kept = summary.map(|s| s.entry);
        for (after, line) in &self.shown.gauge.notes {
            if last_kept != Some(*after) {
                // A note whose entry is no longer in the context is left out.
                let Some(at) = rest.iter().position(|e| e.entry == *after) else {
                    continue;
                };
                plan = plan.keep_range(&rest[..=at]);
                rest = &rest[at + 1..];
                last_kept = Some(*after);
            }
            plan = plan.insert_custom(GAUGE_CUSTOM_TYPE, line);
        }
        plan.keep_range(rest).build()
    }

    /// Saves what the context shows, for the next instance on this transcript; a failure is a
    /// warning (that instance would show less, nothing else is lost).
    fn save_shown(&mut self, now_ms: u64) {
        match self.store.save_state(store::SHOWN, &self.shown, now_ms) {
            Ok(()) => self.shown_saved = true,
            Err(e) => self
                .warnings
                .push(format!("{} not saved: {e}", store::SHOWN)),
        }
    }

    /// Before the runtime compacts: write the `compaction` checkpoint (so it is on disk even if
    /// summarizing fails). Call [`after_compaction`](Self::after_compaction) with the outcome.
    pub fn before_compaction(&mut self, current_tokens: Option<u32>, now_ms: u64) {
        self.compaction_count += 1;
        let tokens = current_tokens.unwrap_or(self.context_tokens);
        let interrupted = self.capture.mid_turn();
        self.write_checkpoint(Trigger::Compaction, tokens, interrupted, now_ms);
        self.last_auto_tokens = None;
    }

    /// The runtime's compaction is done; `compacted` says whether it compacted anything.
    pub fn after_compaction(&mut self, compacted: bool) {
        if !compacted {
            self.compaction_count = self.compaction_count.saturating_sub(1);
        }
    }

    /// The session closes: a `session-end` checkpoint, when something was captured since the
    /// last one.
    pub fn end(&mut self, now_ms: u64) {
        if self.unsaved {
            self.write_checkpoint(Trigger::SessionEnd, self.context_tokens, false, now_ms);
        }
    }

    /// Writes a checkpoint of the current capture; returns whether it is on disk. A failure is
    /// a warning: the runtime's compaction still runs, and the next checkpoint may succeed.
    pub fn write_checkpoint(
        &mut self,
        trigger: Trigger,
        input_tokens: u32,
        interrupted: bool,
        now_ms: u64,
    ) -> bool {
        let checkpoint = self.build_checkpoint(trigger, input_tokens, interrupted, now_ms);
        match self
            .store
            .write_checkpoint(&checkpoint, self.config.retention)
        {
            Ok(_) => {
                self.latest = Some(checkpoint);
                self.unsaved = false;
                // The checkpoint holds the capture but the thread's working state (what the
                // last message left going on): saved beside it, so the next instance on this
                // transcript knows it. Other state files older than it are stale anyway.
                if let Err(e) = self.save_part(store::THREAD, now_ms) {
                    self.warnings
                        .push(format!("{} not saved: {e}", store::THREAD));
                }
                self.pending = Dirty::default();
                self.saved_at = Some(now_ms);
                self.ingested_since_save = 0;
                true
            }
            Err(e) => {
                self.warnings.push(format!("checkpoint not written: {e}"));
                false
            }
        }
    }

    /// The checkpoint the capture amounts to now.
    pub fn build_checkpoint(
        &self,
        trigger: Trigger,
        input_tokens: u32,
        interrupted: bool,
        now_ms: u64,
    ) -> Checkpoint {
        let (agent_id, channel) = agent_and_channel(&self.key);
        let utilization = if self.context_window == 0 {
            0.0
        } else {
            (f64::from(input_tokens) / f64::from(self.context_window) * 100.0).round() / 100.0
        };
        let capture = &self.capture;
        Checkpoint {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            meta: Meta {
                checkpoint_id: self.store.next_checkpoint_id(),
                session_key: self.key.clone(),
                session_file: self.session_file.clone(),
                created_at: iso_utc(now_ms),
                trigger,
                compaction_count: self.compaction_count,
                token_usage: TokenUsage {
                    input_tokens,
                    context_window: self.context_window,
                    utilization,
                },
                previous_checkpoint: self.latest.as_ref().map(|cp| cp.meta.checkpoint_id.clone()),
                channel,
                agent_id,
            },
            working: capture.working(interrupted),
            decisions: capture.decisions.items.clone(),
            resources: capture.resources(),
            thread: capture.thread.thread.to_thread(),
            open_items: capture.open_items(),
            learnings: capture.learnings(),
        }
    }
}

/// Loads one state file as JSON; `None` when absent, unreadable (a warning) or stale (older
/// than the newest checkpoint: then it is discarded).
fn load_part(
    store: &Store,
    name: &str,
    checkpoint_ms: Option<u64>,
    warnings: &mut Vec<String>,
) -> Option<Value> {
    match store.load_state::<Value>(name) {
        Ok(Some(Stamped { updated_ms, data })) => {
            if checkpoint_ms.is_some_and(|cp| updated_ms < cp) {
                store.discard_state(name);
                None
            } else {
                Some(data)
            }
        }
        Ok(None) => None,
        Err(e) => {
            warnings.push(format!("state file ignored: {e}"));
            None
        }
    }
}

/// A loaded state file as its part of the capture; a warning when its shape is wrong.
fn decode<T: serde::de::DeserializeOwned>(
    value: Option<Value>,
    name: &str,
    warnings: &mut Vec<String>,
) -> Option<T> {
    serde_json::from_value(value?)
        .map_err(|e| warnings.push(format!("state file {name} ignored: {e}")))
        .ok()
}

#[cfg(test)]
mod tests;
