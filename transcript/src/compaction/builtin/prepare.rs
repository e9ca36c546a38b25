//! [`prepare`] as named stages: admit the request, read its scope, choose a layer, prune
//! (Phase 1), and when pruning is not enough cut (Phase 2), let oversized kept outputs give way,
//! and gather what to summarize. Each stage reads the transcript and decides; none writes.

use std::collections::HashSet;

use super::{BUILTIN_PROTECTED_TOOLS, Job, Outcome, Policy, Request, Skip, Work};
use crate::Transcript;
use crate::compaction::{Settings, extractive};
use crate::entry::{Entry, PRUNED_TEXT};
use crate::record::{Layer, Trigger};
use crate::role::Role;
use crate::tokens::estimate_text;

mod gather;

use gather::summarize;

/// Decide and gather a compaction of the active branch.
pub fn prepare(t: &Transcript, settings: &Settings, request: &Request<'_>) -> Result<Job, Skip> {
    let stats = t.compaction_stats();
    admit(settings, request, stats.auto_in_run)?;
    let scope = Scope::read(t, settings, request);
    let layer = choose_layer(&scope, settings, request)?;
    let pruning = Pruning::plan(&scope, &settings.policy);
    let job = |layer, pruned, work, warnings| Job {
        layer,
        trigger: request.trigger,
        focus: request.focus.map(str::to_string),
        engine: request.engine.map(str::to_string),
        context_window: scope.window,
        tokens_before: scope.tokens_before,
        policy: settings.policy.clone(),
        pruned,
        pruned_saved: pruning.saved,
        work,
        counts_before: (stats.total as u64, stats.summarizing as u64),
        warnings,
    };
    if pruning.is_enough(layer, &scope, settings, request) {
        let work = prune_only(&scope, &pruning)?;
        return Ok(job(Layer::Prune, pruning.ids(&scope), work, Vec::new()));
    }
    let layer = escalate(layer, &scope, &pruning, &settings.policy)?;
    let cut = Cut::find(&scope, &pruning, layer, settings)?;
    let kept = Kept::give_way(&scope, &pruning, &cut, settings);
    let (work, warnings) = summarize(t, &scope, &cut, &kept, layer);
    // Only the pruned outputs that stay in the context are recorded: the rest are summarized.
    Ok(job(
        layer,
        kept.placeholder_ids(&scope, &pruning),
        work,
        warnings,
    ))
}

/// Refuse what the operator's settings do not allow: an automatic compaction with automatic
/// compaction off, or past `maxAutoCompactions` in this run.
fn admit(settings: &Settings, request: &Request<'_>, auto_in_run: usize) -> Result<(), Skip> {
    if request.trigger == Trigger::Manual {
        return Ok(());
    }
    if !settings.auto_enabled {
        let overflow = request.trigger == Trigger::Overflow;
        let kind = if overflow { "overflow" } else { "automatic" };
        return Err(Skip::because(format!(
            "automatic compaction is off (agents.defaults.compaction.enabled: false): an {kind} compaction does not run; compact manually (`ctxhost compact`)"
        )));
    }
    let cap = settings.policy.max_auto_compactions;
    if cap > 0 && auto_in_run >= cap as usize {
        return Err(Skip {
            reason: format!(
                "maxAutoCompactions ({cap}) reached in this run: automatic compaction stopped; compact manually (`ctxhost compact`) or start a fresh session"
            ),
            capped: true,
        });
    }
    Ok(())
}

/// What a compaction works on: the context's messages after its boundary, and how full the
/// window is.
struct Scope<'t> {
    entries: &'t [Entry],
    /// The compaction entry the context starts with, if any.
    boundary: Option<usize>,
    /// Context messages in order, the boundary left out.
    messages: Vec<usize>,
    window: u64,
    tokens_before: u64,
    /// `tokens_before` as a share of the window.
    share: f64,
    /// The threshold fired (or the context overflowed): this compaction must do something.
    fired: bool,
}

impl<'t> Scope<'t> {
    fn read(t: &'t Transcript, settings: &Settings, request: &Request<'_>) -> Self {
        let entries = t.entries();
        let window = settings.context_window.max(1);
        let tokens_before = request.context_tokens.unwrap_or_else(|| t.context_tokens());
        let ctx = t.context();
        let boundary = ctx
            .first()
            .copied()
            .filter(|&i| entries[i].entry_type() == "compaction");
        let messages = ctx
            .iter()
            .copied()
            .filter(|&i| Some(i) != boundary)
            .collect();
        Scope {
            entries,
            boundary,
            messages,
            window,
            tokens_before,
            share: tokens_before as f64 / window as f64,
            fired: settings.should_compact(tokens_before) || request.trigger == Trigger::Overflow,
        }
    }

    fn tool_output_tokens(&self) -> u64 {
        self.messages
            .iter()
            .filter(|&&i| self.entries[i].context_role() == Some(Role::ToolResult))
            .map(|&i| u64::from(self.entries[i].tokens()))
            .sum()
    }

    /// Whether a cut may fall before message `j` (not on a tool result: a call and its results
    /// stay on the same side).
    fn cuttable(&self, j: usize) -> bool {
        self.entries[self.messages[j]].context_role() != Some(Role::ToolResult)
    }

    /// The summary the boundary carries (none for a prune-only note).
    fn previous_summary(&self) -> Option<String> {
        self.boundary
            .filter(|&b| carries_summary(&self.entries[b]))
            .and_then(|b| self.entries[b].view())
            .map(|v| v.text)
    }
}

/// The layer the window share asks for; a manual or fired compaction below every layer
/// summarizes.
fn choose_layer(
    scope: &Scope<'_>,
    settings: &Settings,
    request: &Request<'_>,
) -> Result<Layer, Skip> {
    let policy = &settings.policy;
    let r = scope.share;
    if r >= policy.full_at {
        Ok(Layer::Full)
    } else if r >= policy.summarize_at {
        Ok(Layer::Summarize)
    } else if r >= policy.prune_at && scope.tool_output_tokens() > policy.prune_tool_output_tokens {
        // With pruning off, the summarize layer runs where prune would have.
        Ok(if policy.prune_enabled {
            Layer::Prune
        } else {
            Layer::Summarize
        })
    } else if scope.fired || request.trigger == Trigger::Manual {
        Ok(Layer::Summarize)
    } else {
        Err(Skip::because(format!(
            "the context is at {:.0}% of the window: below every layer",
            r * 100.0
        )))
    }
}

/// Phase 1: the old tool outputs that give way to placeholders.
struct Pruning {
    /// Entry indices, in context order; empty when pruning does not apply.
    pruned: HashSet<usize>,
    order: Vec<usize>,
    /// Tokens pruning saves (0 when it does not apply).
    saved: u64,
    /// What pruning every candidate would save, applied or not (for the refusal's reason).
    candidate_saving: u64,
}

impl Pruning {
    /// Pruning applies when it is on, finds candidates, and saves at least
    /// `pruneMinimumTokens`.
    fn plan(scope: &Scope<'_>, policy: &Policy) -> Self {
        let (order, saving) = if policy.prune_enabled {
            prune_candidates(scope.entries, &scope.messages, policy)
        } else {
            (Vec::new(), 0)
        };
        let applies = !order.is_empty() && saving >= policy.prune_minimum_tokens;
        let order = if applies { order } else { Vec::new() };
        Pruning {
            pruned: order.iter().copied().collect(),
            order,
            saved: if applies { saving } else { 0 },
            candidate_saving: saving,
        }
    }

    fn applies(&self) -> bool {
        !self.order.is_empty()
    }

    /// Pruning alone is the compaction: the prune layer, or an automatic compaction that
    /// pruning brings under the prune mark (and the threshold).
    fn is_enough(
        &self,
        layer: Layer,
        scope: &Scope<'_>,
        settings: &Settings,
        request: &Request<'_>,
    ) -> bool {
        let policy = &settings.policy;
        let stop_at =
            ((policy.prune_at * scope.window as f64) as u64).min(settings.auto_threshold().max(1));
        let after = scope.tokens_before.saturating_sub(self.saved);
        self.applies()
            && (layer == Layer::Prune || (request.trigger != Trigger::Manual && after < stop_at))
    }

    /// An entry's tokens in the context after pruning.
    fn tokens_of(&self, scope: &Scope<'_>, i: usize) -> u64 {
        if self.pruned.contains(&i) {
            placeholder_tokens()
        } else {
            u64::from(scope.entries[i].tokens())
        }
    }

    /// The tokens of `messages` in the context after pruning.
    fn tokens(&self, scope: &Scope<'_>, messages: &[usize]) -> u64 {
        messages.iter().map(|&i| self.tokens_of(scope, i)).sum()
    }

    fn ids(&self, scope: &Scope<'_>) -> Vec<String> {
        self.order
            .iter()
            .map(|&i| scope.entries[i].id().to_string())
            .collect()
    }
}

fn placeholder_tokens() -> u64 {
    u64::from(estimate_text(PRUNED_TEXT))
}

/// The prune layer's work: the boundary stays at the first message and carries the previous
/// summary (or a note that outputs were pruned).
fn prune_only(scope: &Scope<'_>, pruning: &Pruning) -> Result<Work, Skip> {
    let first = scope
        .messages
        .first()
        .copied()
        .ok_or_else(|| Skip::because("no messages".into()))?;
    let carried = scope.previous_summary();
    let carries_summary = carried.is_some();
    let pruned = pruning.order.len();
    let summary =
        carried.unwrap_or_else(|| format!("[{pruned} older tool output(s) pruned for context]"));
    let tokens_after = u64::from(estimate_text(&summary)) + pruning.tokens(scope, &scope.messages);
    Ok(Work::Prune {
        outcome: Outcome {
            summary,
            first_kept_index: first,
            first_kept_entry_id: scope.entries[first].id().to_string(),
            tokens_after,
            compacted: 0,
        },
        carries_summary,
    })
}

/// Pruning was not enough: the prune layer becomes a summarize one when the compaction must do
/// something, and is refused otherwise.
fn escalate(
    layer: Layer,
    scope: &Scope<'_>,
    pruning: &Pruning,
    policy: &Policy,
) -> Result<Layer, Skip> {
    match layer {
        Layer::Prune if !scope.fired => Err(Skip::because(format!(
            "pruning would save {} tokens, less than pruneMinimumTokens ({})",
            pruning.candidate_saving, policy.prune_minimum_tokens
        ))),
        Layer::Prune => Ok(Layer::Summarize),
        other => Ok(other),
    }
}

/// The tool results among `messages` that pruning left whole, biggest first.
fn results_biggest_first(scope: &Scope<'_>, pruning: &Pruning, messages: &[usize]) -> Vec<usize> {
    let mut results: Vec<usize> = messages
        .iter()
        .copied()
        .filter(|i| {
            !pruning.pruned.contains(i)
                && scope.entries[*i].context_role() == Some(Role::ToolResult)
        })
        .collect();
    results.sort_by_key(|&i| std::cmp::Reverse(scope.entries[i].tokens()));
    results
}

/// The summary's bound in tokens.
fn summary_bound() -> u64 {
    (extractive::MAX_CHARS as u64).div_ceil(4)
}

/// Phase 2's cut: the messages before `at` (an index into the scope's messages) are summarized.
#[derive(Debug, PartialEq, Eq)]
struct Cut {
    at: usize,
    /// The recent tokens the layer keeps verbatim.
    keep: u64,
    /// The most the kept part may hold: half the threshold.
    cap: u64,
    /// The cut fell inside the newest turn (it alone was bigger than `keep`).
    split_turn: bool,
}

impl Cut {
    /// The latest point at which the recent `keep` tokens are kept, never on a tool result (a
    /// call and its results stay on the same side).
    fn find(
        scope: &Scope<'_>,
        pruning: &Pruning,
        layer: Layer,
        settings: &Settings,
    ) -> Result<Cut, Skip> {
        let cap = (settings.threshold() / 2).max(1);
        let keep = recent_to_keep(scope, layer, settings).min(cap);
        let reached = budget_reached(scope, pruning, keep)?;
        let before = (0..=reached)
            .rev()
            .find(|&j| scope.cuttable(j))
            .filter(|&c| c > 0);
        // No such point before the kept budget: the newest turn alone is bigger than what may
        // be kept.
        let split_turn = before.is_none();
        let at = match before {
            Some(at) => at,
            None => inside_newest_turn(scope, pruning, reached, settings)?,
        };
        Ok(Cut {
            at,
            keep,
            cap,
            split_turn,
        })
    }
}

/// The recent tokens the layer keeps verbatim, before the cut's cap.
fn recent_to_keep(scope: &Scope<'_>, layer: Layer, settings: &Settings) -> u64 {
    let policy = &settings.policy;
    match layer {
        Layer::Full => policy.full_keep_recent_tokens,
        _ if scope.share >= policy.summarize_at => policy.summarize_keep_recent_tokens,
        _ => settings.keep_recent_tokens,
    }
}

/// The newest message at which the messages from it to the end hold `keep` tokens; refused
/// when they all hold less.
fn budget_reached(scope: &Scope<'_>, pruning: &Pruning, keep: u64) -> Result<usize, Skip> {
    let mut kept = 0u64;
    let reached = scope.messages.iter().rposition(|&i| {
        kept += pruning.tokens_of(scope, i);
        kept >= keep
    });
    reached.ok_or_else(|| {
        Skip::because(format!(
            "everything fits in the {keep} recent tokens kept: nothing to summarize"
        ))
    })
}

/// The cut of a newest turn bigger than what may be kept (from `reached` on): at its latest
/// step that keeps something. With nothing to cut between at all (the context is one call
/// batch and its results), the cut falls before it, nothing new is summarized, and its outputs
/// give way later.
fn inside_newest_turn(
    scope: &Scope<'_>,
    pruning: &Pruning,
    reached: usize,
    settings: &Settings,
) -> Result<usize, Skip> {
    let messages = &scope.messages;
    let whole = pruning.tokens(scope, messages);
    (reached + 1..messages.len())
        .find(|&j| scope.cuttable(j))
        .or_else(|| {
            (scope.cuttable(0) && whole + summary_bound() > settings.threshold()).then_some(0)
        })
        .ok_or_else(|| {
            Skip::because(
                "no cut point: the newest turn is one tool call batch and its results".into(),
            )
        })
}

/// The part after the cut, and which of its outputs give way.
struct Kept {
    /// Where the kept part starts (the cut), an index into the scope's messages.
    from: usize,
    tokens: u64,
    /// Kept tool results replaced by placeholders because the kept part alone would not leave
    /// room for the next call.
    oversized: HashSet<usize>,
}

impl Kept {
    /// No cut may separate a call from its results, so a batch of parallel results bigger than
    /// the window is kept whole and the next call would overflow. Its biggest outputs then give
    /// way to placeholders (call and result stay, paired by id) until the kept part fits the
    /// cut's cap; the summary carries their opening lines.
    fn give_way(scope: &Scope<'_>, pruning: &Pruning, cut: &Cut, settings: &Settings) -> Self {
        let after_cut = &scope.messages[cut.at..];
        let mut tokens = pruning.tokens(scope, after_cut);
        let mut oversized = HashSet::new();
        if tokens + summary_bound() > settings.threshold() {
            for i in results_biggest_first(scope, pruning, after_cut) {
                if tokens <= cut.cap {
                    break;
                }
                tokens -= pruning
                    .tokens_of(scope, i)
                    .saturating_sub(placeholder_tokens());
                oversized.insert(i);
            }
        }
        Kept {
            from: cut.at,
            tokens,
            oversized,
        }
    }

    /// The kept entries shown as placeholders (pruned or given way), by id.
    fn placeholder_ids(&self, scope: &Scope<'_>, pruning: &Pruning) -> Vec<String> {
        scope.messages[self.from..]
            .iter()
            .filter(|i| pruning.pruned.contains(i) || self.oversized.contains(i))
            .map(|&i| scope.entries[i].id().to_string())
            .collect()
    }
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
pub(super) fn prune_candidates(
    entries: &[Entry],
    messages: &[usize],
    policy: &Policy,
) -> (Vec<usize>, u64) {
    let placeholder = placeholder_tokens();
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
                if users < 2 || e.is_pruned() || tool_tokens < policy.prune_protect_tokens {
                    tool_tokens += tokens;
                    continue;
                }
                if let Some(saving) = pruning_saves(e, policy, placeholder) {
                    out.push(i);
                    saved += saving;
                }
            }
            _ => {}
        }
    }
    out.reverse();
    (out, saved)
}

/// What pruning the old tool result `e` would save: nothing for a protected tool, an error
/// (it is why something failed: a placeholder would hide it from the model and from the
/// summary, and it is short as a rule) or an output no longer than its placeholder.
fn pruning_saves(e: &Entry, policy: &Policy, placeholder: u64) -> Option<u64> {
    // Read as loading kept them: decoding each output here cost most of prepare.
    let tool = e.tool_name().unwrap_or_default();
    let protected = e.is_error()
        || BUILTIN_PROTECTED_TOOLS.contains(&tool)
        || policy.prune_protected_tools.iter().any(|p| p == tool);
    let tokens = u64::from(e.tokens());
    (!protected && tokens > placeholder).then(|| tokens - placeholder)
}

#[cfg(test)]
mod tests;
