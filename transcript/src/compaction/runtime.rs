//! The runtime compaction `delegate-compaction` runs: a layered policy picks what to do from
//! how full the window is, Phase 1 prunes old tool outputs (no model call), Phase 2 summarizes
//! the older part in stages with a three-tier fallback, and the result is one `compaction`
//! entry.
//!
//! [`prepare`] reads the transcript and returns an owned [`Job`] (so a host can release its
//! lock and run the summarizer on a blocking thread); [`Job::run`] calls the summarizer and
//! returns the [`Plan`] to append.

use std::collections::HashSet;

use serde_json::Value;

use super::summarizer::{Extractive, SummarizeError, Summarizer, SummaryRequest};
use super::{Plan, Settings, extractive};
use crate::entry::{Entry, PRUNED_TEXT};
use crate::message::MessageView;
pub use crate::record::{CompactionRecord, Degradation, Layer, Risk, Tier, Trigger};
use crate::role::Role;
use crate::tokens::estimate_text;
use crate::transcript::Transcript;

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
        first_kept_index: usize,
        first_kept_entry_id: String,
        /// The previous summary, or (without one) a note that outputs were pruned.
        summary: String,
        /// Whether `summary` is a real summary rather than the note.
        carries_summary: bool,
        /// Estimated context after (summary + messages, pruned ones as placeholders).
        tokens_after: u64,
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

fn ratio(tokens: u64, window: u64) -> f64 {
    tokens as f64 / window.max(1) as f64
}

/// Decide and gather a compaction of the active branch.
pub fn prepare(t: &Transcript, settings: &Settings, request: &Request<'_>) -> Result<Job, Skip> {
    let policy = &settings.policy;
    let window = settings.context_window.max(1);
    let tokens_before = request.context_tokens.unwrap_or_else(|| t.context_tokens());
    let r = ratio(tokens_before, window);
    let stats = t.compaction_stats();
    let skip = |reason: String| Skip {
        reason,
        capped: false,
    };
    if request.trigger != Trigger::Manual && !settings.auto_enabled {
        return Err(skip(format!(
            "automatic compaction is off (agents.defaults.compaction.enabled: false): an {} compaction does not run; compact manually (`ctxhost compact`)",
            if request.trigger == Trigger::Overflow {
                "overflow"
            } else {
                "automatic"
            }
        )));
    }
    if request.trigger != Trigger::Manual
        && policy.max_auto_compactions > 0
        && stats.auto_in_run >= policy.max_auto_compactions as usize
    {
        return Err(Skip {
            reason: format!(
                "maxAutoCompactions ({}) reached in this run: automatic compaction stopped; compact manually (`ctxhost compact`) or start a fresh session",
                policy.max_auto_compactions
            ),
            capped: true,
        });
    }

    let entries = t.entries();
    let ctx = t.context();
    let boundary = ctx
        .first()
        .copied()
        .filter(|&i| entries[i].entry_type() == "compaction");
    let messages: Vec<usize> = ctx
        .iter()
        .copied()
        .filter(|&i| Some(i) != boundary)
        .collect();
    let tool_tokens: u64 = messages
        .iter()
        .filter(|&&i| entries[i].context_role() == Some(Role::ToolResult))
        .map(|&i| u64::from(entries[i].tokens()))
        .sum();
    let fired = settings.should_compact(tokens_before) || request.trigger == Trigger::Overflow;
    let layer = if r >= policy.full_at {
        Layer::Full
    } else if r >= policy.summarize_at {
        Layer::Summarize
    } else if r >= policy.prune_at && tool_tokens > policy.prune_tool_output_tokens {
        // With pruning off, the summarize layer runs where prune would have.
        if policy.prune_enabled {
            Layer::Prune
        } else {
            Layer::Summarize
        }
    } else if fired || request.trigger == Trigger::Manual {
        Layer::Summarize
    } else {
        return Err(skip(format!(
            "the context is at {:.0}% of the window: below every layer",
            r * 100.0
        )));
    };

    // Phase 1: prune old tool outputs.
    let (pruned_idx, saved) = if policy.prune_enabled {
        prune_candidates(t, &messages, policy)
    } else {
        (Vec::new(), 0)
    };
    let prune_applies = !pruned_idx.is_empty() && saved >= policy.prune_minimum_tokens;
    let (pruned_idx, saved) = if prune_applies {
        (pruned_idx, saved)
    } else {
        (Vec::new(), 0)
    };
    let pruned_set: HashSet<usize> = pruned_idx.iter().copied().collect();
    let after_prune = tokens_before.saturating_sub(saved);
    let stop_at = ((policy.prune_at * window as f64) as u64).min(settings.auto_threshold().max(1));
    let pruned: Vec<String> = pruned_idx
        .iter()
        .map(|&i| entries[i].id().to_string())
        .collect();
    let job = |layer, pruned, work, warnings| Job {
        layer,
        trigger: request.trigger,
        focus: request.focus.map(str::to_string),
        engine: request.engine.map(str::to_string),
        context_window: window,
        tokens_before,
        policy: policy.clone(),
        pruned,
        pruned_saved: saved,
        work,
        counts_before: (stats.total as u64, stats.summarizing as u64),
        warnings,
    };
    let prune_is_enough = prune_applies
        && (layer == Layer::Prune || (request.trigger != Trigger::Manual && after_prune < stop_at));
    if prune_is_enough {
        let first = messages
            .first()
            .copied()
            .ok_or_else(|| skip("no messages".into()))?;
        let carried = boundary
            .filter(|&b| carries_summary(&entries[b]))
            .and_then(|b| entries[b].view())
            .map(|v| v.text);
        let carries_summary = carried.is_some();
        let previous = carried.unwrap_or_else(|| {
            format!("[{} older tool output(s) pruned for context]", pruned.len())
        });
        let placeholder = u64::from(estimate_text(PRUNED_TEXT));
        let prune_tokens_after = u64::from(estimate_text(&previous))
            + messages
                .iter()
                .map(|&i| {
                    if pruned_set.contains(&i) {
                        placeholder
                    } else {
                        u64::from(entries[i].tokens())
                    }
                })
                .sum::<u64>();
        let work = Work::Prune {
            first_kept_index: first,
            first_kept_entry_id: entries[first].id().to_string(),
            summary: previous,
            carries_summary,
            tokens_after: prune_tokens_after,
        };
        return Ok(job(Layer::Prune, pruned, work, Vec::new()));
    }
    if layer == Layer::Prune && !fired {
        return Err(skip(format!(
            "pruning would save {saved} tokens, less than pruneMinimumTokens ({})",
            policy.prune_minimum_tokens
        )));
    }
    let layer = if layer == Layer::Prune {
        Layer::Summarize
    } else {
        layer
    };

    // Phase 2: the cut.
    let cap = (settings.threshold() / 2).max(1);
    let keep = match layer {
        Layer::Full => policy.full_keep_recent_tokens,
        _ if r >= policy.summarize_at => policy.summarize_keep_recent_tokens,
        _ => settings.keep_recent_tokens,
    }
    .min(cap);
    let tokens_of = |i: usize| {
        if pruned_set.contains(&i) {
            u64::from(estimate_text(PRUNED_TEXT))
        } else {
            u64::from(entries[i].tokens())
        }
    };
    let mut kept = 0u64;
    let mut reached = None;
    for (j, &i) in messages.iter().enumerate().rev() {
        kept += tokens_of(i);
        if kept >= keep {
            reached = Some(j);
            break;
        }
    }
    let Some(reached) = reached else {
        return Err(skip(format!(
            "everything fits in the {keep} recent tokens kept: nothing to summarize"
        )));
    };
    // A cut never lands on a tool result: a call and its result stay on the same side.
    let cuttable = |j: usize| entries[messages[j]].context_role() != Some(Role::ToolResult);
    let before = (0..=reached)
        .rev()
        .find(|&j| cuttable(j))
        .filter(|&c| c > 0);
    // No such point before the kept budget: the newest turn alone is bigger than what may be
    // kept. Cut inside it, at its latest step that keeps something, and summarize the prefix.
    let split_turn = before.is_none();
    // Nothing to cut between at all (the context is one call batch and its results): the cut
    // falls before it, nothing new is summarized, and its outputs give way below.
    let whole: u64 = messages.iter().map(|&i| tokens_of(i)).sum();
    let summary_bound = (extractive::MAX_CHARS as u64).div_ceil(4);
    let cut = before
        .or_else(|| (reached + 1..messages.len()).find(|&j| cuttable(j)))
        .or_else(|| (cuttable(0) && whole + summary_bound > settings.threshold()).then_some(0))
        .ok_or_else(|| {
            skip("no cut point: the newest turn is one tool call batch and its results".into())
        })?;

    let to_summarize: Vec<Entry> = messages[..cut]
        .iter()
        .map(|&i| &entries[i])
        .filter(|e| e.context_role().is_some())
        .cloned()
        .collect();
    let previous_summary = boundary
        .filter(|&b| carries_summary(&entries[b]))
        .and_then(|b| entries[b].view())
        .map(|v| v.text);
    let prev_details = t
        .active_branch()
        .into_iter()
        .rev()
        .filter(|&i| entries[i].entry_type() == "compaction")
        .map(|i| entries[i].compaction_record())
        .find(|record| !record.is_some_and(CompactionRecord::is_prune))
        .flatten()
        .cloned();
    let pinned = if layer == Layer::Full {
        pinned_before(t, &messages[..cut])
    } else {
        Vec::new()
    };
    let mut kept_tokens: u64 = messages[cut..].iter().map(|&i| tokens_of(i)).sum();
    // No cut may separate a call from its results, so a batch of parallel results bigger than
    // the window is kept whole, and the next call would overflow. Its biggest outputs then give
    // way to placeholders (call and result stay, paired by id) until the kept part fits in
    // `cap`, and the summary carries their opening lines.
    let mut oversized_idx = Vec::new();
    if kept_tokens + summary_bound > settings.threshold() {
        let mut results: Vec<usize> = messages[cut..]
            .iter()
            .copied()
            .filter(|i| {
                !pruned_set.contains(i) && entries[*i].context_role() == Some(Role::ToolResult)
            })
            .collect();
        results.sort_by_key(|&i| std::cmp::Reverse(entries[i].tokens()));
        let placeholder = u64::from(estimate_text(PRUNED_TEXT));
        for i in results {
            if kept_tokens <= cap {
                break;
            }
            kept_tokens -= tokens_of(i).saturating_sub(placeholder);
            oversized_idx.push(i);
        }
    }
    let oversized_idx: HashSet<usize> = oversized_idx.into_iter().collect();
    let oversized = oversized_outputs(t, &messages[cut..], &oversized_idx);
    let kept_pruned: Vec<String> = messages[cut..]
        .iter()
        .filter(|i| pruned_set.contains(i) || oversized_idx.contains(i))
        .map(|&i| entries[i].id().to_string())
        .collect();
    let first = messages[cut];
    let current_request = messages[cut..]
        .iter()
        .rev()
        .filter(|&&i| entries[i].context_role() == Some(Role::User))
        .filter_map(|&i| entries[i].view())
        .map(|v| v.text)
        .find(|text| !extractive::is_acknowledgement(text));
    let mut warnings = Vec::new();
    if split_turn {
        warnings.push(format!(
            "the newest turn alone exceeds the {keep} tokens kept: it was cut between its steps and its beginning summarized"
        ));
    }
    if !oversized.is_empty() {
        warnings.push(format!(
            "the newest tool results alone pass the {cap} tokens that may be kept: {} of their outputs were replaced by placeholders, the summary quotes their opening lines",
            oversized.len()
        ));
    }
    if layer == Layer::Full {
        warnings.push(format!(
            "the context reached {:.0}% of the window: full compaction kept only the last {keep} tokens (and pinned messages) verbatim",
            r * 100.0
        ));
    }
    let work = Work::Summarize(Box::new(Summarize {
        entries: to_summarize,
        previous_summary,
        pinned,
        first_kept_index: first,
        first_kept_entry_id: entries[first].id().to_string(),
        kept_tokens,
        prev_details,
        current_request,
        split_turn,
        oversized,
    }));
    // Only the pruned outputs that stay in the context are recorded: the rest are summarized.
    Ok(job(layer, kept_pruned, work, warnings))
}

/// The outputs at `oversized` (entry indices among `kept`), each named by the call it answers.
fn oversized_outputs(
    t: &Transcript,
    kept: &[usize],
    oversized: &HashSet<usize>,
) -> Vec<extractive::Oversized> {
    // Naming them decodes the kept messages: only when there are some (prepare decodes none).
    if oversized.is_empty() {
        return Vec::new();
    }
    let entries = t.entries();
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

/// Whether a compaction entry's summary is a real one (prune-only entries without an earlier
/// summary carry just a note).
fn carries_summary(e: &Entry) -> bool {
    e.compaction_record()
        .is_none_or(|r| !(r.is_prune() && r.carries_summary == Some(false)))
}

/// Phase 1 walk: from the newest message back, protect the last 2 user turns and the most
/// recent `pruneProtectTokens` of tool output, never touch protected tools, stop at a summary;
/// the older tool results are candidates. Returns them and the tokens pruning them saves.
fn prune_candidates(t: &Transcript, messages: &[usize], policy: &Policy) -> (Vec<usize>, u64) {
    let entries = t.entries();
    let placeholder = u64::from(estimate_text(PRUNED_TEXT));
    let mut users = 0;
    let mut tool_tokens = 0u64;
    let mut out = Vec::new();
    let mut saved = 0u64;
    for &i in messages.iter().rev() {
        let e = &entries[i];
        match e.context_role() {
            Some(Role::User) => users += 1,
            Some(Role::CompactionSummary | Role::BranchSummary) => break,
            Some(Role::ToolResult) => {
                let tokens = u64::from(e.tokens());
                if users < 2 || e.is_pruned() {
                    tool_tokens += tokens;
                    continue;
                }
                if tool_tokens < policy.prune_protect_tokens {
                    tool_tokens += tokens;
                    continue;
                }
                // Read as loading kept them: decoding each output here cost most of prepare.
                let tool = e.tool_name().unwrap_or_default();
                // An error result is why something failed: a placeholder would hide it from
                // the model and from the summary, and it is short as a rule.
                let failed = e.is_error();
                let protected = failed
                    || BUILTIN_PROTECTED_TOOLS.contains(&tool)
                    || policy.prune_protected_tools.iter().any(|p| p == tool);
                if protected || tokens <= placeholder {
                    continue;
                }
                out.push(i);
                saved += tokens - placeholder;
            }
            _ => {}
        }
    }
    out.reverse();
    (out, saved)
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

impl Job {
    pub fn layer(&self) -> Layer {
        self.layer
    }

    pub fn estimate(&self) -> Estimate {
        let (tokens_after, messages_to_summarize) = match &self.work {
            Work::Prune { tokens_after, .. } => (*tokens_after, 0),
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
    pub fn run(self, summarizer: &dyn Summarizer) -> Plan {
        let mut record = CompactionRecord::default();
        let (summary, first_kept_index, first_kept_entry_id, tokens_after, compacted) = match self
            .work
        {
            Work::Prune {
                first_kept_index,
                first_kept_entry_id,
                summary,
                carries_summary,
                tokens_after,
            } => {
                record.carries_summary = Some(carries_summary);
                (
                    summary,
                    first_kept_index,
                    first_kept_entry_id,
                    tokens_after,
                    0,
                )
            }
            Work::Summarize(s) => {
                let messages: Vec<MessageView> = s.entries.iter().filter_map(Entry::view).collect();
                let request = SummaryRequest {
                    messages: &messages,
                    previous_summary: s.previous_summary.as_deref(),
                    focus: self.focus.as_deref(),
                    current_request: s.current_request.as_deref(),
                };
                let (mut text, tier, errors) =
                    summarize_in_stages(summarizer, &request, self.context_window, &self.policy);
                if !s.oversized.is_empty() {
                    // Within the summary's own bound: an extractive summary makes room for it.
                    let section = extractive::oversized_section(&s.oversized);
                    if summarizer.name() == Extractive.name() {
                        let room =
                            extractive::MAX_CHARS.saturating_sub(section.chars().count() + 2);
                        text = extractive::bounded(&text, room);
                    }
                    text.push_str("\n\n");
                    text.push_str(&section);
                }
                if !s.pinned.is_empty() {
                    text.push_str("\n\n## Pinned messages\n");
                    for p in &s.pinned {
                        text.push_str(&format!("- {p}\n"));
                    }
                    text = text.trim_end().to_string();
                }
                text = super::citations::cite_within_bound(text, &s.entries, summarizer);
                record.summary_tier = Some(tier);
                record.split_turn = s.split_turn;
                record.summarizer_errors = errors;
                let (read, modified) = extractive::file_operations(&messages);
                let (read, modified) = merged_files(s.prev_details.as_ref(), read, modified);
                record.read_files = Some(read);
                record.modified_files = Some(modified);
                let after = u64::from(estimate_text(&text)) + s.kept_tokens;
                (
                    text,
                    s.first_kept_index,
                    s.first_kept_entry_id,
                    after,
                    messages.len(),
                )
            }
        };
        let (total_before, summaries_before) = self.counts_before;
        let summarizing = self.layer != Layer::Prune;
        let summary_count = summaries_before + u64::from(summarizing);
        let report = degradation(summary_count);
        let mut warnings = self.warnings;
        if self.policy.warn_at_compaction > 0
            && summarizing
            && summary_count >= u64::from(self.policy.warn_at_compaction)
        {
            warnings.push(format!(
                "this is summarizing compaction #{summary_count}: {} risk of degraded context; {}",
                report.risk, report.recommendation
            ));
        }
        record.tokens_after = Some(tokens_after);
        record.layer = Some(self.layer);
        record.trigger = Some(self.trigger);
        record.messages_compacted = Some(compacted as u64);
        record.engine = self.engine;
        record.summarizer = Some(summarizing.then(|| summarizer.name()));
        record.focus = self.focus;
        if !self.pruned.is_empty() {
            record.pruned_tokens = Some(self.pruned_saved);
        }
        record.pruned_entry_ids = self.pruned;
        record.compaction_count = Some(total_before + 1);
        record.summary_count = Some(summary_count);
        record.degradation = Some(report.clone());
        record.warnings = warnings.clone();
        Plan {
            summary,
            first_kept_entry_id,
            first_kept_index,
            tokens_before: self.tokens_before,
            tokens_after,
            messages_compacted: compacted,
            details: record,
            layer: self.layer,
            warnings,
            degradation: report,
        }
    }
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

/// OpenClaw's adaptive chunk ratio: large messages shrink the chunk budget (down to
/// `min_chunk_ratio`) so a chunk plus its prompt fits the summarizer's window.
pub fn adaptive_chunk_ratio(messages: &[MessageView], window: u64, policy: &Policy) -> f64 {
    if messages.is_empty() {
        return policy.chunk_ratio;
    }
    let total: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
    let avg = total as f64 / messages.len() as f64 * policy.safety_margin;
    let avg_ratio = avg / window.max(1) as f64;
    if avg_ratio > 0.1 {
        let reduction = (avg_ratio * 2.0).min(policy.chunk_ratio - policy.min_chunk_ratio);
        (policy.chunk_ratio - reduction).max(policy.min_chunk_ratio)
    } else {
        policy.chunk_ratio
    }
}

/// Split into `parts` consecutive groups of about equal token share, never splitting a tool
/// result from the call before it.
pub fn split_by_token_share(messages: &[MessageView], parts: usize) -> Vec<&[MessageView]> {
    let parts = parts.max(1);
    let total: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
    let target = total.div_ceil(parts as u64).max(1);
    let mut out = Vec::new();
    let (mut start, mut acc) = (0, 0u64);
    for (i, m) in messages.iter().enumerate() {
        if out.len() + 1 < parts && acc >= target && i > start && m.role != Role::ToolResult {
            out.push(&messages[start..i]);
            start = i;
            acc = 0;
        }
        acc += u64::from(m.tokens);
    }
    if start < messages.len() {
        out.push(&messages[start..]);
    }
    out
}

/// `summarizeInStages`: one call when the messages are few or fit the chunk budget; else
/// `parts` partial summaries (each with fallback) merged into one. Returns the summary, the
/// worst tier used and the summarizer errors met (texts carry no credentials).
pub fn summarize_in_stages(
    summarizer: &dyn Summarizer,
    request: &SummaryRequest<'_>,
    window: u64,
    policy: &Policy,
) -> (String, Tier, Vec<String>) {
    let messages = request.messages;
    let total: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
    let ratio = adaptive_chunk_ratio(messages, window, policy);
    let budget = (window as f64 * ratio) as u64;
    let mut errors = Vec::new();
    let whole = policy.parts <= 1
        || messages.len() < 4
        || (total as f64 * policy.safety_margin) as u64 <= budget;
    if whole {
        let (s, tier) = summarize_with_fallback(summarizer, request, window, &mut errors);
        return (s, tier, errors);
    }
    let chunks = split_by_token_share(messages, policy.parts);
    let mut partials = Vec::with_capacity(chunks.len());
    let mut worst = Tier::Full;
    for (n, chunk) in chunks.iter().enumerate() {
        let part = SummaryRequest {
            messages: chunk,
            previous_summary: request.previous_summary.filter(|_| n == 0),
            // The task the user is on belongs to the newest part.
            current_request: request.current_request.filter(|_| n + 1 == chunks.len()),
            ..*request
        };
        let (s, tier) = summarize_with_fallback(summarizer, &part, window, &mut errors);
        worst = worst.max(tier);
        partials.push(s);
    }
    let merged = if partials.len() == 1 {
        partials.pop().unwrap_or_default()
    } else {
        match summarizer.merge(&partials, request.focus) {
            Ok(s) => s,
            Err(e) => {
                errors.push(format!("merge: {e}"));
                // Concatenated partials lose nothing; the extractive merge bounds them.
                extractive::merge(&partials)
            }
        }
    };
    (merged, worst, errors)
}

/// `summarizeWithFallback`: the full summary; else one without the oversized messages
/// (> 50% of the window), noting each; else a plain note (followed by the extractive summary,
/// which needs no model, so the context keeps the facts).
pub fn summarize_with_fallback(
    summarizer: &dyn Summarizer,
    request: &SummaryRequest<'_>,
    window: u64,
    errors: &mut Vec<String>,
) -> (String, Tier) {
    let messages = request.messages;
    let first_error: SummarizeError = match summarizer.summarize(request) {
        Ok(s) => return (s, Tier::Full),
        Err(e) => e,
    };
    errors.push(first_error.to_string());
    let limit = window / 2;
    let (large, small): (Vec<&MessageView>, Vec<&MessageView>) =
        messages.iter().partition(|m| u64::from(m.tokens) > limit);
    if !large.is_empty() && !small.is_empty() {
        let rest: Vec<MessageView> = small.into_iter().cloned().collect();
        let smaller = SummaryRequest {
            messages: &rest,
            ..*request
        };
        match summarizer.summarize(&smaller) {
            Ok(mut s) => {
                for m in &large {
                    s.push_str(&format!(
                        "\n[Large {} (~{}K tokens) omitted from summary]",
                        m.role.as_str(),
                        u64::from(m.tokens).div_ceil(1000)
                    ));
                }
                return (s, Tier::Partial);
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    let note = format!(
        "[Summary unavailable: the summarizer failed ({first_error}). Context contained {} messages ({} oversized); facts extracted mechanically follow.]",
        messages.len(),
        large.len()
    );
    let facts = extractive::summarize_at(
        messages,
        request.previous_summary,
        request.focus,
        request.current_request,
    );
    (format!("{note}\n\n{facts}"), Tier::Note)
}

#[cfg(test)]
mod tests;
