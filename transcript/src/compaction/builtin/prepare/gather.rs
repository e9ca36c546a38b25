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
    let entries = scope.entries;
    let (before_cut, after_cut) = scope.messages.split_at(cut.at);
    let oversized = oversized_outputs(entries, after_cut, &kept.oversized);
    let warnings = cut_warnings(scope, cut, layer, oversized.len());
    let first = after_cut[0];
    let work = Work::Summarize(Box::new(Summarize {
        entries: context_entries(entries, before_cut),
        previous_summary: scope.previous_summary(),
        pinned: match layer {
            Layer::Full => pinned_before(t, before_cut),
            _ => Vec::new(),
        },
        first_kept_index: first,
        first_kept_entry_id: entries[first].id().to_string(),
        kept_tokens: kept.tokens,
        prev_details: latest_summarizing_record(t),
        current_request: current_request(entries, after_cut),
        split_turn: cut.split_turn,
        oversized,
    }));
    (work, warnings)
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
    for &i in kept {
        let Some(view) = entries[i].view() else {
            continue;
        };
        match view.role {
            Role::Assistant => pending.calls(&view),
            Role::ToolResult => {
                let (tool, target) = pending.answer(&view);
                if oversized.contains(&i) {
                    out.push(extractive::Oversized {
                        tool,
                        target,
                        output: view.text,
                        tokens: entries[i].tokens(),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// Messages before the cut that a `label` entry pinned (`pin` / `pinned`), as text.
fn pinned_before(t: &Transcript, before_cut: &[usize]) -> Vec<String> {
    let entries = t.entries();
    let mut pinned_ids = HashSet::new();
    for i in t.active_branch() {
        let e = &entries[i];
        if e.entry_type() != "label" {
            continue;
        }
        if let Ok(v) = serde_json::from_str::<Value>(e.line()) {
            let label = v.get("label").and_then(Value::as_str).unwrap_or("");
            if matches!(label.to_ascii_lowercase().as_str(), "pin" | "pinned")
                && let Some(target) = v.get("targetId").and_then(Value::as_str)
            {
                pinned_ids.insert(target.to_string());
            }
        }
    }
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
