//! The built-in compaction `delegate-compaction` runs: a layered policy picks what to do from
//! how full the window is, Phase 1 prunes old tool outputs (no model call), Phase 2 summarizes
//! the older part in stages with a three-tier fallback, and the result is one `compaction`
//! entry.
//!
//! [`prepare`] reads the transcript and returns an owned [`Job`] (so a host can release its
//! lock and run the summarizer on a blocking thread); [`Job::run`] calls the summarizer and
//! returns the [`Plan`] to append.

use std::collections::HashSet;

use super::summarizer::{Extractive, Summarizer, SummaryRequest};
use super::{Plan, extractive};
use crate::entry::Entry;
use crate::message::MessageView;
pub use crate::record::{CompactionRecord, Degradation, Layer, Risk, Tier, Trigger};
use crate::tokens::estimate_text;

mod prepare;
mod stages;

pub use prepare::prepare;
pub use stages::{
    adaptive_chunk_ratio, split_by_token_share, summarize_in_stages, summarize_with_fallback,
};

/// Tools whose outputs are never pruned, besides `pruneProtectedTools`.
pub const BUILTIN_PROTECTED_TOOLS: &[&str] = &["skill", "memory_search"];

/// The layered policy: the keys of `agents.defaults.compaction` that pick and shape a layer,
/// read from the config as they are named here (camelCase); the chunking parameters are not
/// operator keys.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Policy {
    /// Phase 1 runs at all (`prune: false` skips straight to summarizing).
    #[serde(skip)]
    pub prune_enabled: bool,
    /// Prune when the context reaches this share of the window...
    pub prune_at: f64,
    /// ...and tool outputs in it exceed this many tokens.
    pub prune_tool_output_tokens: u64,
    /// The most recent tool output tokens are never pruned.
    pub prune_protect_tokens: u64,
    /// Prune only when at least this much would be saved.
    pub prune_minimum_tokens: u64,
    /// Tools whose outputs are never pruned (added to [`BUILTIN_PROTECTED_TOOLS`]).
    pub prune_protected_tools: Vec<String>,
    pub summarize_at: f64,
    pub summarize_keep_recent_tokens: u64,
    pub full_at: f64,
    pub full_keep_recent_tokens: u64,
    /// Automatic summarizing compactions allowed in one run (between two user messages);
    /// 0 = no cap.
    pub max_auto_compactions: u32,
    /// Summarizing compactions from which a degradation warning is added; 0 = never.
    pub warn_at_compaction: u32,
    /// `summarizeInStages`: parts, base / minimum chunk ratio, safety margin.
    #[serde(skip)]
    pub parts: usize,
    #[serde(skip)]
    pub chunk_ratio: f64,
    #[serde(skip)]
    pub min_chunk_ratio: f64,
    #[serde(skip)]
    pub safety_margin: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            prune_enabled: true,
            prune_at: 0.80,
            prune_tool_output_tokens: 50_000,
            prune_protect_tokens: 40_000,
            prune_minimum_tokens: 20_000,
            prune_protected_tools: Vec::new(),
            summarize_at: 0.88,
            summarize_keep_recent_tokens: 25_000,
            full_at: 0.95,
            full_keep_recent_tokens: 15_000,
            max_auto_compactions: 5,
            warn_at_compaction: 3,
            parts: 2,
            chunk_ratio: 0.4,
            min_chunk_ratio: 0.15,
            safety_margin: 1.2,
        }
    }
}

/// Risk: low, medium from 2, high from 3, critical from 5 summarizing compactions.
pub fn degradation(count: u64) -> Degradation {
    let (risk, recommendation) = match count {
        0 | 1 => (
            Risk::Low,
            "no action needed: at most one summary stands in for older context",
        ),
        2 => (
            Risk::Medium,
            "summaries now summarize summaries; pin what must survive, or compact with --focus",
        ),
        3 | 4 => (
            Risk::High,
            "detail from early in the session is fading; consider `ctxhost context export` and continuing in a fresh session",
        ),
        _ => (
            Risk::Critical,
            "start a fresh session: `ctxhost context export --session S FILE` then `ctxhost context import FILE`",
        ),
    };
    Degradation {
        count,
        risk,
        recommendation: recommendation.into(),
    }
}

/// The verdict for a context at `utilisation` (tokens / window) after `count` summarizing
/// compactions: a context past its window is critical whatever the count says, since the next
/// model call cannot be sent until it is compacted.
pub fn degradation_at(count: u64, utilisation: f64) -> Degradation {
    let by_count = degradation(count);
    if utilisation <= 1.0 || by_count.risk == Risk::Critical {
        return by_count;
    }
    Degradation {
        count,
        risk: Risk::Critical,
        recommendation: format!(
            "the context is {:.0}% of the window and cannot be sent: compact it now (`ctxhost compact --session S`)",
            utilisation * 100.0
        ),
    }
}

/// What a compaction was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    pub trigger: Trigger,
    /// Custom instruction (`--focus`): recorded and handed to the summarizer.
    pub focus: Option<&'a str>,
    /// The engine that asked (recorded in the details).
    pub engine: Option<&'a str>,
    /// The context size the caller measured (a replay measures by estimates, since recorded
    /// usage belongs to another window); `None`: the transcript's usage-based figure.
    pub context_tokens: Option<u64>,
}

impl Default for Request<'_> {
    fn default() -> Self {
        Request {
            trigger: Trigger::Manual,
            focus: None,
            engine: None,
            context_tokens: None,
        }
    }
}

/// Nothing to do, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skip {
    pub reason: String,
    /// True when `maxAutoCompactions` stopped it (the operator must act).
    pub capped: bool,
}

impl Skip {
    fn because(reason: String) -> Self {
        Skip {
            reason,
            capped: false,
        }
    }
}

/// Phase 2 work, owned. The entries to summarize are copied, not decoded: decoding them into
/// `MessageView`s is the summarizer's work (`Job::run`), so deciding and dry runs stay cheap.
#[derive(Debug, Clone)]
struct Summarize {
    entries: Vec<Entry>,
    previous_summary: Option<String>,
    pinned: Vec<String>,
    first_kept_index: usize,
    first_kept_entry_id: String,
    kept_tokens: u64,
    /// The record of the latest summarizing compaction, whose file lists this one extends.
    prev_details: Option<CompactionRecord>,
    /// The user's newest request in the kept part, for the summary's current task.
    current_request: Option<String>,
    /// The cut fell inside the newest turn (it alone was bigger than what may be kept).
    split_turn: bool,
    /// Kept tool results whose outputs give way to placeholders because the kept part alone
    /// would not leave room for the next call (one batch of parallel results bigger than the
    /// window): the summary carries their opening lines, named by call.
    oversized: Vec<extractive::Oversized>,
}

/// What a job does after deciding.
#[derive(Debug, Clone)]
enum Work {
    /// Phase 1 only: the boundary stays and the summary before it is carried over.
    Prune {
        /// The summary is the previous one or (without one) a note that outputs were pruned;
        /// `tokens_after` estimates summary + messages, pruned ones as placeholders.
        outcome: Outcome,
        /// Whether the summary is a real summary rather than the note.
        carries_summary: bool,
    },
    /// Phase 1, then Phase 2 summarizes the part before the cut.
    Summarize(Box<Summarize>),
}

/// A prepared compaction: everything read from the transcript, nothing written.
#[derive(Debug, Clone)]
pub struct Job {
    layer: Layer,
    trigger: Trigger,
    focus: Option<String>,
    engine: Option<String>,
    context_window: u64,
    tokens_before: u64,
    policy: Policy,
    /// Tool results Phase 1 prunes (ids), and the tokens that saves.
    pruned: Vec<String>,
    pruned_saved: u64,
    work: Work,
    counts_before: (u64, u64),
    warnings: Vec<String>,
}

/// What a dry run shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Estimate {
    pub layer: Layer,
    pub tokens_before: u64,
    /// Estimated context after (the summary counted at its bound for Phase 2).
    pub tokens_after: u64,
    pub tool_outputs_pruned: usize,
    pub messages_to_summarize: usize,
}

impl Job {
    pub fn layer(&self) -> Layer {
        self.layer
    }

    pub fn estimate(&self) -> Estimate {
        let (tokens_after, messages_to_summarize) = match &self.work {
            Work::Prune { outcome, .. } => (outcome.tokens_after, 0),
            Work::Summarize(s) => (
                s.kept_tokens
                    + (extractive::MAX_CHARS as u64)
                        .div_ceil(4)
                        .min(self.tokens_before),
                s.entries.len(),
            ),
        };
        Estimate {
            layer: self.layer,
            tokens_before: self.tokens_before,
            tokens_after: tokens_after.min(self.tokens_before),
            tool_outputs_pruned: self.pruned.len(),
            messages_to_summarize,
        }
    }

    /// Call the summarizer (Phase 2) and build the entry.
    pub fn run(mut self, summarizer: &dyn Summarizer) -> Plan {
        let mut record = CompactionRecord::default();
        let outcome = self.outcome(summarizer, &mut record);
        let summarizing = self.layer != Layer::Prune;
        record.summarizer = Some(summarizing.then(|| summarizer.name()));
        record.tokens_after = Some(outcome.tokens_after);
        record.messages_compacted = Some(outcome.compacted as u64);
        self.note_job(&mut record);
        self.finish(outcome, record)
    }

    /// The summary and boundary the job's work leaves, with what it did noted in `record`.
    fn outcome(&self, summarizer: &dyn Summarizer, record: &mut CompactionRecord) -> Outcome {
        match &self.work {
            Work::Prune {
                outcome,
                carries_summary,
            } => {
                record.carries_summary = Some(*carries_summary);
                outcome.clone()
            }
            Work::Summarize(s) => {
                let phase = Phase2 {
                    summarizer,
                    focus: self.focus.as_deref(),
                    context_window: self.context_window,
                    policy: &self.policy,
                };
                phase.run(s, record)
            }
        }
    }

    /// The job's own facts in `record` (taken: the job only finishes after this).
    fn note_job(&mut self, record: &mut CompactionRecord) {
        record.layer = Some(self.layer);
        record.trigger = Some(self.trigger);
        record.engine = self.engine.take();
        record.focus = self.focus.take();
        record.pruned_tokens = (!self.pruned.is_empty()).then_some(self.pruned_saved);
        record.pruned_entry_ids = std::mem::take(&mut self.pruned);
        record.compaction_count = Some(self.counts_before.0 + 1);
    }

    /// The plan to append: the outcome, and the record completed with the degradation verdict.
    fn finish(self, outcome: Outcome, mut record: CompactionRecord) -> Plan {
        let summarizing = self.layer != Layer::Prune;
        let summary_count = self.counts_before.1 + u64::from(summarizing);
        let report = degradation(summary_count);
        let mut warnings = self.warnings;
        if summarizing {
            warnings.extend(degradation_warning(&self.policy, summary_count, &report));
        }
        record.summary_count = Some(summary_count);
        record.degradation = Some(report.clone());
        record.warnings = warnings.clone();
        Plan {
            summary: outcome.summary,
            first_kept_entry_id: outcome.first_kept_entry_id,
            first_kept_index: outcome.first_kept_index,
            tokens_before: self.tokens_before,
            tokens_after: outcome.tokens_after,
            messages_compacted: outcome.compacted,
            details: record,
            layer: self.layer,
            warnings,
            degradation: report,
        }
    }
}

/// What either phase leaves for the entry.
#[derive(Debug, Clone)]
struct Outcome {
    summary: String,
    first_kept_index: usize,
    first_kept_entry_id: String,
    tokens_after: u64,
    compacted: usize,
}

/// Phase 2 as a job runs it: the summarizer and what it is told besides the entries.
struct Phase2<'a> {
    summarizer: &'a dyn Summarizer,
    focus: Option<&'a str>,
    context_window: u64,
    policy: &'a Policy,
}

impl Phase2<'_> {
    /// Summarize `s.entries`, add the sections the summarizer does not write (oversized
    /// outputs, pinned messages, citations) and record how it went.
    fn run(&self, s: &Summarize, record: &mut CompactionRecord) -> Outcome {
        let messages: Vec<MessageView> = s.entries.iter().filter_map(Entry::view).collect();
        let (text, tier, errors) = self.summary(s, &messages);
        record.summary_tier = Some(tier);
        record.split_turn = s.split_turn;
        record.summarizer_errors = errors;
        note_files(record, &messages, s.prev_details.as_ref());
        Outcome {
            tokens_after: u64::from(estimate_text(&text)) + s.kept_tokens,
            summary: text,
            first_kept_index: s.first_kept_index,
            first_kept_entry_id: s.first_kept_entry_id.clone(),
            compacted: messages.len(),
        }
    }

    /// The summary of `messages` (the entries of `s`, decoded) with its sections and
    /// citations, the worst tier used and the summarizer's errors.
    fn summary(&self, s: &Summarize, messages: &[MessageView]) -> (String, Tier, Vec<String>) {
        let request = SummaryRequest {
            messages,
            previous_summary: s.previous_summary.as_deref(),
            focus: self.focus,
            current_request: s.current_request.as_deref(),
        };
        let (mut text, tier, errors) =
            summarize_in_stages(self.summarizer, &request, self.context_window, self.policy);
        self.append_oversized(&mut text, &s.oversized);
        append_pinned(&mut text, &s.pinned);
        let text = super::citations::cite_within_bound(text, &s.entries, self.summarizer);
        (text, tier, errors)
    }

    /// The opening lines of kept outputs too big to keep whole, within the summary's own
    /// bound: an extractive summary makes room for them.
    fn append_oversized(&self, text: &mut String, oversized: &[extractive::Oversized]) {
        if oversized.is_empty() {
            return;
        }
        let section = extractive::oversized_section(oversized);
        if self.summarizer.name() == Extractive.name() {
            let room = extractive::MAX_CHARS.saturating_sub(section.chars().count() + 2);
            *text = extractive::bounded(text, room);
        }
        text.push_str("\n\n");
        text.push_str(&section);
    }
}

/// The pinned messages, verbatim, after the summary.
fn append_pinned(text: &mut String, pinned: &[String]) {
    if pinned.is_empty() {
        return;
    }
    text.push_str("\n\n## Pinned messages\n");
    for p in pinned {
        text.push_str(&format!("- {p}\n"));
    }
    *text = text.trim_end().to_string();
}

/// The warning a summarizing compaction adds once `warnAtCompaction` is reached.
fn degradation_warning(
    policy: &Policy,
    summary_count: u64,
    report: &Degradation,
) -> Option<String> {
    let warn_at = u64::from(policy.warn_at_compaction);
    (warn_at > 0 && summary_count >= warn_at).then(|| {
        format!(
            "this is summarizing compaction #{summary_count}: {} risk of degraded context; {}",
            report.risk, report.recommendation
        )
    })
}

/// The files `messages` read and modified, added to the previous summarizing compaction's.
fn note_files(
    record: &mut CompactionRecord,
    messages: &[MessageView],
    prev: Option<&CompactionRecord>,
) {
    let (read, modified) = extractive::file_operations(messages);
    let (read, modified) = merged_files(prev, read, modified);
    record.read_files = Some(read);
    record.modified_files = Some(modified);
}

/// The file lists of the previous summarizing compaction, extended by this one's: a file
/// modified anywhere is listed as modified, not read. Cumulative, as pi's details are.
fn merged_files(
    prev: Option<&CompactionRecord>,
    read: Vec<String>,
    modified: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    // Sets beside the lists: the lists grow with the session, one scan per path would not.
    let extend = |all: &mut Vec<String>, new: Vec<String>| {
        let mut listed: HashSet<String> = all.iter().cloned().collect();
        all.extend(new.into_iter().filter(|p| listed.insert(p.clone())));
    };
    let mut modified_all = prev
        .and_then(|r| r.modified_files.clone())
        .unwrap_or_default();
    extend(&mut modified_all, modified);
    let mut read_all = prev.and_then(|r| r.read_files.clone()).unwrap_or_default();
    extend(&mut read_all, read);
    let modified_set: HashSet<&str> = modified_all.iter().map(String::as_str).collect();
    read_all.retain(|p| !modified_set.contains(p.as_str()));
    (read_all, modified_all)
}

#[cfg(test)]
mod tests;
