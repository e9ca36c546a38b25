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

pub use ctxhost_heuristics::is_acknowledgement;
use ctxhost_heuristics::{FilesTouched, clip, drop_modified, same_subject, standing_instructions};

use crate::message::MessageView;
use crate::role::Role;

mod failures;
mod files;
mod oversized;
mod render;
mod sections;

pub(crate) use failures::PendingCalls;
pub use failures::call_target;
use failures::{Failure, FailureLedger};
pub use files::file_operations;
use files::{dir_and_file, grouped, grouped_size, ungrouped};
pub use oversized::{OVERSIZED_TITLE, Oversized, oversized_section};
use sections::Sections;

/// Upper bound on the summary, in characters (~1,200 tokens at chars / 4).
pub const MAX_CHARS: usize = 4800;

/// The current task is quoted verbatim up to this many characters.
const CURRENT_CHARS: usize = 500;
/// The first request of the session.
const STARTED_CHARS: usize = 120;
/// Each entry of the request ledger: room for its verb, object and a path or identifier,
/// cut at a word (`clip`). Longer lines mean fewer of them within the budget; whole ones are
/// worth more than many a reader cannot make out.
const REQUEST_CHARS: usize = 64;
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

/// A tool call's arguments as the shared rules read them: the top-level fields that hold text,
/// in document order (none unless the arguments are a JSON object).
fn text_fields(arguments: &Value) -> Vec<(&str, &str)> {
    let fields = arguments.as_object().into_iter().flatten();
    fields
        .filter_map(|(key, value)| Some((key.as_str(), value.as_str()?)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// What the user asked

/// Adds a standing instruction; an older one about the same subject (two content words in
/// common, or most of the shorter one's) is superseded by it.
fn add_instruction(list: &mut Vec<String>, instruction: String) {
    list.retain(|old| !same_subject(old, &instruction) || *old == instruction);
    extend_newest(list, [instruction]);
    let excess = list.len().saturating_sub(MAX_INSTRUCTIONS);
    list.drain(..excess);
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
        for i in standing_instructions(text, INSTRUCTION_CHARS) {
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

/// A summary this module wrote, re-rendered within `max_chars` (the past giving way as in
/// [`summarize`]), to leave room for what the runtime appends.
pub fn bounded(summary: &str, max_chars: usize) -> String {
    if summary.chars().count() <= max_chars {
        return summary.to_string();
    }
    Sections::parse(summary).render_bounded_to(max_chars)
}

#[cfg(test)]
pub(super) mod tests;
