//! The summarizer's stages (`summarizeInStages`, `summarizeWithFallback`): how Phase 2 splits
//! what it summarizes into chunks that fit the summarizer's window, and what it falls back to
//! when the summarizer fails.

use super::super::extractive;
use super::super::summarizer::{SummarizeError, Summarizer, SummaryRequest};
use super::{Policy, Tier};
use crate::message::MessageView;
use crate::role::Role;

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
    let mut errors = Vec::new();
    if fits_one_call(request.messages, window, policy) {
        let (s, tier) = summarize_with_fallback(summarizer, request, window, &mut errors);
        return (s, tier, errors);
    }
    let chunks = split_by_token_share(request.messages, policy.parts);
    let mut partials = Vec::with_capacity(chunks.len());
    let mut worst = Tier::Full;
    for (n, chunk) in chunks.iter().enumerate() {
        let part = part_request(request, chunk, n, chunks.len());
        let (s, tier) = summarize_with_fallback(summarizer, &part, window, &mut errors);
        worst = worst.max(tier);
        partials.push(s);
    }
    let merged = merge(summarizer, partials, request.focus, &mut errors);
    (merged, worst, errors)
}

/// The request for part `n` of `parts`: the previous summary goes with the oldest part, the
/// task the user is on with the newest.
fn part_request<'a>(
    request: &SummaryRequest<'a>,
    messages: &'a [MessageView],
    n: usize,
    parts: usize,
) -> SummaryRequest<'a> {
    SummaryRequest {
        messages,
        previous_summary: request.previous_summary.filter(|_| n == 0),
        current_request: request.current_request.filter(|_| n + 1 == parts),
        ..*request
    }
}

/// Whether `messages` go to the summarizer in one call: they are few, or fit the chunk budget,
/// or the policy does not split.
fn fits_one_call(messages: &[MessageView], window: u64, policy: &Policy) -> bool {
    let total: u64 = messages.iter().map(|m| u64::from(m.tokens)).sum();
    let ratio = adaptive_chunk_ratio(messages, window, policy);
    let budget = (window as f64 * ratio) as u64;
    policy.parts <= 1
        || messages.len() < 4
        || (total as f64 * policy.safety_margin) as u64 <= budget
}

/// The partial summaries merged by the summarizer; concatenated partials lose nothing, so when
/// it fails the extractive merge bounds them.
fn merge(
    summarizer: &dyn Summarizer,
    mut partials: Vec<String>,
    focus: Option<&str>,
    errors: &mut Vec<String>,
) -> String {
    if partials.len() == 1 {
        return partials.pop().unwrap_or_default();
    }
    summarizer.merge(&partials, focus).unwrap_or_else(|e| {
        errors.push(format!("merge: {e}"));
        extractive::merge(&partials)
    })
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
    let first_error = match summarizer.summarize(request) {
        Ok(s) => return (s, Tier::Full),
        Err(e) => e,
    };
    errors.push(first_error.to_string());
    let (large, small) = split_large(request.messages, window);
    if !large.is_empty() && !small.is_empty() {
        match summarize_without_large(summarizer, request, &large, small) {
            Ok(s) => return (s, Tier::Partial),
            Err(e) => errors.push(e.to_string()),
        }
    }
    (
        note_and_facts(request, &first_error, large.len()),
        Tier::Note,
    )
}

/// The messages over half the window, and the others.
fn split_large(messages: &[MessageView], window: u64) -> (Vec<&MessageView>, Vec<&MessageView>) {
    let limit = window / 2;
    messages.iter().partition(|m| u64::from(m.tokens) > limit)
}

/// A summary of the `small` messages, noting each of the `large` ones it leaves out.
fn summarize_without_large(
    summarizer: &dyn Summarizer,
    request: &SummaryRequest<'_>,
    large: &[&MessageView],
    small: Vec<&MessageView>,
) -> Result<String, SummarizeError> {
    let rest: Vec<MessageView> = small.into_iter().cloned().collect();
    let smaller = SummaryRequest {
        messages: &rest,
        ..*request
    };
    let mut s = summarizer.summarize(&smaller)?;
    for m in large {
        s.push_str(&format!(
            "\n[Large {} (~{}K tokens) omitted from summary]",
            m.role.as_str(),
            u64::from(m.tokens).div_ceil(1000)
        ));
    }
    Ok(s)
}

/// The last tier: a note of the failure, then the facts the extractive summary finds.
fn note_and_facts(
    request: &SummaryRequest<'_>,
    error: &SummarizeError,
    oversized: usize,
) -> String {
    let note = format!(
        "[Summary unavailable: the summarizer failed ({error}). Context contained {} messages ({oversized} oversized); facts extracted mechanically follow.]",
        request.messages.len(),
    );
    let facts = extractive::summarize_at(
        request.messages,
        request.previous_summary,
        request.focus,
        request.current_request,
    );
    format!("{note}\n\n{facts}")
}
