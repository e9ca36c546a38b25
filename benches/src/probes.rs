//! Probes: is what a compaction took away still in the model's context, and if not, can the
//! agent get it back?
//!
//! A session is replayed as the continuity rows replay it (`crate::compacting`). Right after
//! each compaction, probes are drawn mechanically from the messages compacted away, with the
//! continuity rows' ground truth: each user request, each tool failure's error line, each
//! modified file's path, each standing instruction given in them, and the current task (the
//! newest request). A probe's *answer* is that key text (folded: lower-case, whitespace
//! collapsed); its *question* is up to four of the answer's own longest words (what someone
//! half-remembering it would type).
//!
//! - **in context**: the answer is in the assembled request (kept messages, summary, inserted
//!   messages, system-prompt addition);
//! - **reachable**: in context, or a scripted agent finds it with at most two tool calls:
//!   `ctx_search` with the question (the answer is in a hit's snippet), then `ctx_expand` of
//!   the top hit (the answer is in what it opens).

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use ctxhost::recall::{ExpandRequest, ExpandTarget, SearchQuery};
use ctxhost::runtime::PreparedEngine;
use ctxhost::{AssembledItem, Host};
use serde_json::Value;

use crate::compacting::{self, Compacted, Replay};
use crate::continuity::{
    Subject, Tally, acknowledgement, expand_groups, fold, key, text_of, truth,
};

/// The kinds of probe, in the table's order.
pub const KINDS: [&str; 5] = [
    "user request",
    "tool failure",
    "modified file",
    "standing instruction",
    "current task",
];

/// One kind's results over every probe of a run.
#[derive(Debug, Clone, Copy, Default)]
pub struct KindTally {
    pub in_context: Tally,
    pub reachable: Tally,
}

/// One session replayed on one engine, probed after each compaction.
#[derive(Debug, Clone, Default)]
pub struct ProbeRun {
    pub replay: Replay,
    pub kinds: [KindTally; 5],
    /// Tool calls the scripted agent made (searches and expansions).
    pub tool_calls: usize,
}

/// Replays `subject` on `engine` at `window` tokens and probes after every compaction.
pub async fn run(
    host: &Host,
    engine: Arc<PreparedEngine>,
    subject: &Subject,
    dir: &Path,
    window: u64,
) -> Result<ProbeRun> {
    let mut run = ProbeRun::default();
    let mut failure = None;
    run.replay = compacting::replay(host, engine, subject, dir, window, |point| {
        if failure.is_none()
            && let Err(e) = probe_point(&point, subject, &mut run)
        {
            failure = Some(e);
        }
    })
    .await?;
    match failure {
        Some(e) => Err(e),
        None => Ok(run),
    }
}

fn probe_point(point: &Compacted<'_>, subject: &Subject, run: &mut ProbeRun) -> Result<()> {
    let context = fold(&expand_groups(&assembled_text(point)));
    let cut = crate::continuity::compacted_messages(&point.session.transcript(), point.first_kept)
        .min(point.appended);
    let compacted = &subject.messages[..cut];
    let so_far = &subject.messages[..point.appended];
    let truth = truth(compacted);
    let compacted_user_text = fold(
        &compacted
            .iter()
            .filter(|m| m["role"] == "user")
            .map(text_of)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    let current = so_far
        .iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .map(text_of)
        .find(|t| !acknowledgement(t))
        .map(|t| key(&t));
    let instructions = subject
        .instructions
        .iter()
        .filter(|rule| compacted_user_text.contains(&fold(rule)))
        .map(|rule| key(rule));
    let probes: Vec<(usize, String)> = (truth.requests.iter().map(|r| (0, r.clone())))
        .chain(truth.failures.iter().map(|f| (1, f.clone())))
        .chain(truth.modified.iter().map(|p| (2, p.clone())))
        .chain(instructions.map(|r| (3, r)))
        .chain(current.map(|c| (4, c)))
        .collect();
    for (kind, answer) in probes {
        let answer = fold(&answer);
        let in_context = context.contains(&answer);
        let reachable = in_context || found_by_agent(point, &answer, &mut run.tool_calls)?;
        run.kinds[kind].in_context.count(in_context);
        run.kinds[kind].reachable.count(reachable);
    }
    Ok(())
}

/// What the model receives after the compaction, as text.
fn assembled_text(point: &Compacted<'_>) -> String {
    let t = point.session.transcript();
    let mut out = String::new();
    for item in point.assembly.items() {
        let json = match item {
            AssembledItem::Entry(i) => t.entries()[i].context_message_json().into_owned(),
            AssembledItem::Inserted(json) => json.to_string(),
        };
        let value: Value = serde_json::from_str(&json).unwrap_or_default();
        strings_of(&value, &mut out);
    }
    if let Some(addition) = &point.assembly.system_prompt_addition {
        out.push_str(addition);
    }
    out
}

/// Every string in a JSON value, each on a line (texts, tool-call arguments, summaries).
fn strings_of(value: &Value, out: &mut String) {
    match value {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings_of(v, out)),
        _ => {}
    }
}

/// The scripted agent: search with the question, then open the top hit.
fn found_by_agent(point: &Compacted<'_>, answer: &str, calls: &mut usize) -> Result<bool> {
    let Some(question) = question(answer) else {
        return Ok(false);
    };
    *calls += 1;
    let hits = point.session.search(&SearchQuery::words(question))?;
    if hits.iter().any(|h| fold(&h.snippet).contains(answer)) {
        return Ok(true);
    }
    let Some(top) = hits.first() else {
        return Ok(false);
    };
    *calls += 1;
    let opened = point.session.expand(&ExpandRequest {
        target: ExpandTarget::Entry(top.id.clone()),
        max_tokens: None,
    })?;
    Ok(fold(&opened.text).contains(answer))
}

/// Up to four of the answer's longest words (three letters or more), in the answer's order.
fn question(answer: &str) -> Option<String> {
    let mut words: Vec<(usize, &str)> = answer
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .enumerate()
        .collect();
    words.sort_by_key(|(i, w)| (std::cmp::Reverse(w.len()), *i));
    words.dedup_by_key(|(_, w)| *w);
    words.truncate(4);
    words.sort_by_key(|(i, _)| *i);
    (!words.is_empty()).then(|| words.iter().map(|(_, w)| *w).collect::<Vec<_>>().join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_is_the_answers_longest_words_in_order() {
        assert_eq!(
            question("please migrate the billing cron job to the zeppelin").as_deref(),
            Some("please migrate billing zeppelin")
        );
        assert_eq!(
            question("src/core/agent-session.ts").as_deref(),
            Some("src core agent session")
        );
        assert_eq!(question("a b"), None);
    }
}
