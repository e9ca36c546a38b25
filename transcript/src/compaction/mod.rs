//! Runtime compaction (what an engine's `delegate-compaction` runs): decide when and which
//! layer ([`runtime::prepare`]), prune old tool outputs, choose the cut so that recent context
//! stays, and summarize the older part in stages ([`runtime::Job::run`]) with a pluggable
//! [`Summarizer`]. [`plan`] is the plain keep-recent + extractive compaction.

pub mod extractive;
pub mod openai;
pub mod runtime;
pub mod summarizer;

pub use openai::{OpenAiCompatible, OpenAiConfig};
pub use runtime::{
    Degradation, Estimate, Job, Layer, Policy, Request, Risk, Skip, Tier, Trigger, degradation,
    prepare,
};
pub use summarizer::{Extractive, SummarizeError, Summarizer, SummarizerConfig, SummaryRequest};

use serde_json::{Value, json};

use crate::message::MessageView;
use crate::role::Role;
use crate::tokens::estimate_text;
use crate::transcript::Transcript;

/// Compaction thresholds (pi / OpenClaw `compaction` settings), the layered policy and the
/// summarizer.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub context_window: u64,
    pub reserve_tokens: u64,
    /// `reserve_tokens` is never taken below this; 0 disables the floor.
    pub reserve_tokens_floor: u64,
    pub keep_recent_tokens: u64,
    pub policy: Policy,
    pub summarizer: SummarizerConfig,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            context_window: 200_000,
            reserve_tokens: 16_384,
            reserve_tokens_floor: 20_000,
            keep_recent_tokens: 20_000,
            policy: Policy::default(),
            summarizer: SummarizerConfig::Extractive,
        }
    }
}

impl Settings {
    /// The context size above which compaction triggers.
    pub fn threshold(&self) -> u64 {
        self.context_window
            .saturating_sub(self.reserve_tokens.max(self.reserve_tokens_floor))
    }

    pub fn should_compact(&self, context_tokens: u64) -> bool {
        context_tokens > self.threshold()
    }
}

/// A compaction ready to append (`Transcript::append_compaction`).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub first_kept_index: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_compacted: usize,
    pub details: Value,
    pub layer: Layer,
    /// For the operator (full layer ran, degradation).
    pub warnings: Vec<String>,
    pub degradation: Degradation,
}

impl Plan {
    pub fn to_new_compaction(&self) -> crate::transcript::NewCompaction {
        crate::transcript::NewCompaction {
            summary: self.summary.clone(),
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            tokens_before: self.tokens_before,
            details: Some(self.details.clone()),
        }
    }
}

/// A string list in a compaction's `details` (e.g. `modifiedFiles`); empty when absent.
pub(super) fn file_list(details: Option<&Value>, key: &str) -> Vec<String> {
    details
        .and_then(|d| d.get(key))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// Plan a compaction of the active branch, or None when there is nothing to compact (all of
/// it fits in `keep_recent_tokens`, or the cut would leave nothing to summarize).
///
/// Walking back from the newest context entry, tokens accumulate until `keep_recent_tokens`;
/// the cut goes to the nearest entry at or before that point that is not a toolResult, so a
/// tool call and its result stay together and at least `keep_recent_tokens` are kept. With a
/// previous compaction, summarizing starts at its first kept entry and its summary is merged.
pub fn plan(
    transcript: &Transcript,
    settings: &Settings,
    custom_instructions: Option<&str>,
) -> Option<Plan> {
    let entries = transcript.entries();
    let branch = transcript.active_branch();
    let prev = branch
        .iter()
        .rposition(|&i| entries[i].entry_type() == "compaction");
    let start = prev.map_or(0, |p| {
        entries[branch[p]]
            .first_kept
            .and_then(|k| branch[..p].iter().position(|&i| i == k))
            .unwrap_or(p + 1)
    });
    let candidates: Vec<usize> = branch[start..]
        .iter()
        .copied()
        .filter(|&i| entries[i].context_role().is_some() && entries[i].entry_type() != "compaction")
        .collect();

    let mut kept = 0u64;
    let mut reached = None;
    for (j, &i) in candidates.iter().enumerate().rev() {
        kept += u64::from(entries[i].tokens());
        if kept >= settings.keep_recent_tokens {
            reached = Some(j);
            break;
        }
    }
    let cut = (0..=reached?)
        .rev()
        .find(|&j| entries[candidates[j]].context_role() != Some(Role::ToolResult))?;
    if cut == 0 {
        return None;
    }

    let views: Vec<MessageView> = candidates[..cut]
        .iter()
        .filter_map(|&i| entries[i].view())
        .collect();
    let prev_entry = prev.map(|p| &entries[branch[p]]);
    let prev_summary = prev_entry.and_then(|e| e.view()).map(|v| v.text);
    let summary = extractive::summarize(&views, prev_summary.as_deref(), custom_instructions);

    let kept_tokens: u64 = candidates[cut..]
        .iter()
        .map(|&i| u64::from(entries[i].tokens()))
        .sum();
    let (read, modified) = extractive::file_operations(&views);
    // File lists are cumulative across compactions, as pi's details are.
    let prev_details = prev_entry
        .and_then(|e| serde_json::from_str::<Value>(e.line()).ok())
        .and_then(|v| v.get("details").cloned());
    let mut modified_all = file_list(prev_details.as_ref(), "modifiedFiles");
    for p in modified {
        if !modified_all.contains(&p) {
            modified_all.push(p);
        }
    }
    let mut read_all = file_list(prev_details.as_ref(), "readFiles");
    for p in read {
        if !read_all.contains(&p) {
            read_all.push(p);
        }
    }
    read_all.retain(|p| !modified_all.contains(p));

    let first = candidates[cut];
    let summaries = transcript.compaction_stats().summarizing as u64 + 1;
    Some(Plan {
        layer: Layer::Summarize,
        warnings: Vec::new(),
        degradation: degradation(summaries),
        tokens_before: transcript.context_tokens(),
        tokens_after: u64::from(estimate_text(&summary)) + kept_tokens,
        first_kept_entry_id: entries[first].id().to_string(),
        first_kept_index: first,
        messages_compacted: views.len(),
        details: json!({
            "summarizer": "extractive",
            "readFiles": read_all,
            "modifiedFiles": modified_all,
        }),
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::coding_session;

    #[test]
    fn thresholds() {
        let s = Settings::default();
        assert_eq!(
            s.threshold(),
            200_000 - 20_000,
            "the floor wins over 16,384"
        );
        assert!(!s.should_compact(180_000));
        assert!(s.should_compact(180_001));
        let no_floor = Settings {
            reserve_tokens_floor: 0,
            ..Settings::default()
        };
        assert_eq!(no_floor.threshold(), 200_000 - 16_384);
        let tiny = Settings {
            context_window: 1000,
            ..Settings::default()
        };
        assert_eq!(tiny.threshold(), 0);
    }

    #[test]
    fn nothing_to_compact_when_everything_fits() {
        let t = Transcript::parse(&coding_session(1, 10), "g").unwrap();
        assert!(plan(&t, &Settings::default(), None).is_none());
    }

    #[test]
    fn plan_on_a_generated_session() {
        let mut t = Transcript::parse(&coding_session(11, 300), "g").unwrap();
        let settings = Settings {
            keep_recent_tokens: 6000,
            ..Settings::default()
        };
        let p = plan(&t, &settings, Some("keep the failing tests in mind")).unwrap();
        let e = t.entries();
        let first = &e[p.first_kept_index];
        assert_eq!(first.id(), p.first_kept_entry_id);
        assert_ne!(
            first.context_role(),
            Some(Role::ToolResult),
            "cut on a toolResult"
        );
        assert!(first.context_role().is_some());

        let ctx = t.context();
        let pos = ctx.iter().position(|&i| i == p.first_kept_index).unwrap();
        let kept: u64 = ctx[pos..].iter().map(|&i| u64::from(e[i].tokens())).sum();
        assert!(kept >= settings.keep_recent_tokens, "kept {kept}");
        assert_eq!(p.messages_compacted, pos);
        assert_eq!(p.tokens_before, t.context_tokens());
        assert!(p.tokens_after < p.tokens_before);
        assert!(
            p.summary
                .contains("## Focus\n- keep the failing tests in mind")
        );

        // the summary names a file modified before the cut
        let views: Vec<MessageView> = ctx[..pos].iter().filter_map(|&i| e[i].view()).collect();
        let (_, modified) = extractive::file_operations(&views);
        assert!(!modified.is_empty());
        let (_, mut listed) = extractive::files_in(&p.summary);
        let mut expected = modified.clone();
        listed.sort();
        expected.sort();
        assert_eq!(listed, expected, "{}", p.summary);
        assert_eq!(
            p.details["modifiedFiles"].as_array().unwrap().len(),
            modified.len()
        );

        // applying it: boundary loading now starts with the summary
        let c = t
            .append_compaction(&p.to_new_compaction(), "2026-01-01T00:00:00.000Z")
            .unwrap();
        assert_eq!(t.context()[0], c);
        assert_eq!(t.context()[1], p.first_kept_index);
        assert!(t.context_tokens() < p.tokens_before);
        assert_eq!(t.compaction_count(), 1);

        // nothing new since: nothing to compact
        assert!(plan(&t, &settings, None).is_none());
        // a tighter budget cuts again, starting at the previous boundary and merging its summary
        let tighter = Settings {
            keep_recent_tokens: 2000,
            ..settings
        };
        let p2 = plan(&t, &tighter, None).unwrap();
        assert!(p2.first_kept_index > p.first_kept_index);
        assert_eq!(p2.summary.matches("## Current task").count(), 1);
        let prev_modified = p.details["modifiedFiles"].as_array().unwrap();
        for m in prev_modified {
            let m = m.as_str().unwrap();
            assert!(
                p2.details["modifiedFiles"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|x| x == m)
            );
        }
        t.append_compaction(&p2.to_new_compaction(), "2026-01-01T00:00:01.000Z")
            .unwrap();
        assert_eq!(t.compaction_count(), 2);
    }
}
