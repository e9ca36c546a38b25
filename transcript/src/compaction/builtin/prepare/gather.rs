//! Phase 2's gathering: what the summarizer reads (the entries before the cut, the previous
//! summary and its file lists, pinned messages, the request the user is on, the kept outputs
//! that give way) and the warnings the cut earned.

use std::collections::HashSet;

use serde_json::Value;

use super::{Cut, Kept, Scope};
use crate::Transcript;
use crate::compaction::builtin::{Summarize, Work};
use crate::compaction::extractive;
use crate::entry::Entry;
use crate::message::MessageView;
use crate::record::{CompactionRecord, Layer};
use crate::role::Role;

/// Phase 2's work: what the summarizer reads, and the warnings the cut earned.
pub(super) fn summarize(
    t: &Transcript,
    scope: &Scope<'_>,
    cut: &Cut,
    kept: &Kept,
    layer: Layer,
) -> (Work, Vec<String>) {
    let (entries, (before_cut, after_cut)) = (scope.entries, scope.messages.split_at(cut.at));
    let oversized = oversized_outputs(entries, after_cut, &kept.oversized);
    let warnings = cut_warnings(scope, cut, layer, oversized.len());
    let summarize = Box::new(Summarize {
        entries: context_entries(entries, before_cut),
        previous_summary: scope.previous_summary(),
        pinned: pinned_before(t, before_cut, layer),
        first_kept_index: after_cut[0],
        first_kept_entry_id: entries[after_cut[0]].id().to_string(),
        kept_tokens: kept.tokens,
        prev_details: latest_summarizing_record(t),
        current_request: current_request(entries, after_cut),
        split_turn: cut.split_turn,
        oversized,
    });
    (Work::Summarize(summarize), warnings)
}

/// The context entries among `messages`, copied (decoding them is the summarizer's work).
fn context_entries(entries: &[Entry], messages: &[usize]) -> Vec<Entry> {
    messages
        .iter()
        .map(|&i| &entries[i])
        .filter(|e| e.context_role().is_some())
        .cloned()
        .collect()
}

/// The record of the latest summarizing compaction on the active branch, whose file lists
/// this one extends (None when it has none, or there is none).
fn latest_summarizing_record(t: &Transcript) -> Option<CompactionRecord> {
    let entries = t.entries();
    t.active_branch()
        .into_iter()
        .rev()
        .filter(|&i| entries[i].entry_type() == "compaction")
        .map(|i| entries[i].compaction_record())
        .find(|record| !record.is_some_and(CompactionRecord::is_prune))
        .flatten()
        .cloned()
}

/// The user's newest request in the kept part (acknowledgements are not requests).
fn current_request(entries: &[Entry], kept: &[usize]) -> Option<String> {
    kept.iter()
        .rev()
        .filter(|&&i| entries[i].context_role() == Some(Role::User))
        .filter_map(|&i| entries[i].view())
        .map(|v| v.text)
        .find(|text| !extractive::is_acknowledgement(text))
}

/// What the operator is told about the cut: a split turn, outputs that gave way, a full layer.
fn cut_warnings(scope: &Scope<'_>, cut: &Cut, layer: Layer, oversized: usize) -> Vec<String> {
    let mut warnings = Vec::new();
    if cut.split_turn {
        warnings.push(format!(
            "the newest turn alone exceeds the {} tokens kept: it was cut between its steps and its beginning summarized",
            cut.keep
        ));
    }
    if oversized > 0 {
        warnings.push(format!(
            "the newest tool results alone pass the {} tokens that may be kept: {} of their outputs were replaced by placeholders, the summary quotes their opening lines",
            cut.cap, oversized
        ));
    }
    if layer == Layer::Full {
        warnings.push(format!(
            "the context reached {:.0}% of the window: full compaction kept only the last {} tokens (and pinned messages) verbatim",
            scope.share * 100.0,
            cut.keep
        ));
    }
    warnings
}

/// The outputs at `oversized` (entry indices among `kept`), each named by the call it answers.
fn oversized_outputs(
    entries: &[Entry],
    kept: &[usize],
    oversized: &HashSet<usize>,
) -> Vec<extractive::Oversized> {
    // Naming them decodes the kept messages: only when there are some (prepare decodes none).
    if oversized.is_empty() {
        return Vec::new();
    }
    let mut pending = extractive::PendingCalls::default();
    let mut out = Vec::new();
    for (i, view) in kept.iter().filter_map(|&i| Some((i, entries[i].view()?))) {
        match view.role {
            Role::Assistant => pending.calls(&view),
            Role::ToolResult if oversized.contains(&i) => {
                out.push(named_output(&mut pending, view, entries[i].tokens()));
            }
            // Every answer is taken, so the next ones pair with their calls.
            Role::ToolResult => _ = pending.answer(&view),
            _ => {}
        }
    }
    out
}

/// A tool result's output (of `tokens`), named by the call it answers.
fn named_output(
    pending: &mut extractive::PendingCalls,
    view: MessageView,
    tokens: u32,
) -> extractive::Oversized {
    let (tool, target) = pending.answer(&view);
    extractive::Oversized {
        tool,
        target,
        output: view.text,
        tokens,
    }
}

/// Messages before the cut that a `label` entry pinned (`pin` / `pinned`), as text: a full
/// compaction carries them verbatim.
fn pinned_before(t: &Transcript, before_cut: &[usize], layer: Layer) -> Vec<String> {
    if layer != Layer::Full {
        return Vec::new();
    }
    let entries = t.entries();
    let pinned_ids = pinned_ids(t);
    before_cut
        .iter()
        .filter(|&&i| pinned_ids.contains(entries[i].id()))
        .filter_map(|&i| entries[i].view())
        .map(|v| {
            let text: String = v.text.chars().take(2000).collect();
            format!("**{}**: {}", v.role.as_str(), text.replace('\n', " "))
        })
        .collect()
}

/// The entries the `label` entries of the active branch pin (`pin` / `pinned`), by id.
fn pinned_ids(t: &Transcript) -> HashSet<String> {
    let entries = t.entries();
    let labels = t.active_branch().into_iter().map(|i| &entries[i]);
    let labels = labels.filter(|e| e.entry_type() == "label");
    labels
        .filter_map(|e| serde_json::from_str::<Value>(e.line()).ok())
        .filter(|v| {
            let label = v.get("label").and_then(Value::as_str).unwrap_or("");
            matches!(label.to_ascii_lowercase().as_str(), "pin" | "pinned")
        })
        .filter_map(|v| Some(v.get("targetId")?.as_str()?.to_string()))
        .collect()
}
