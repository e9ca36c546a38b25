//! The replay the compaction measurements share: a session driven the way `ctxhost replay` and
//! `serve` drive an engine (append each message; before each assistant turn, the session's turn
//! driver), with a callback right after each compaction, given the session and the assembly
//! that followed it.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use ctxhost::runtime::PreparedEngine;
use ctxhost::{Assembly, Host, Session, SessionTarget, TurnRequest};
use serde_json::Value;

/// A session to replay: its messages and the standing instructions the user gave in it.
#[derive(Debug, Clone)]
pub struct Subject {
    pub name: String,
    pub messages: Vec<Value>,
    pub instructions: Vec<String>,
}

/// The moment right after a compaction.
pub struct Compacted<'a> {
    pub session: &'a Session,
    /// The assembly of the turn that followed the compaction.
    pub assembly: &'a Assembly,
    /// The id of the first entry the compaction kept.
    pub first_kept: Option<&'a str>,
    /// Source messages appended so far.
    pub appended: usize,
}

/// What a replay did besides what its callback measured.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    pub engine: String,
    pub session: String,
    pub messages: usize,
    pub compactions: usize,
    /// Compactions asked for that found no cut point.
    pub no_cut_point: usize,
    /// Assistant turns whose context still passed the window after compaction.
    pub overflowing_turns: usize,
    /// Assistant turns.
    pub turns: usize,
    /// Turns neither running nor following a compaction (the first turn left out)…
    pub turns_between_compactions: usize,
    /// …and of those, the ones whose request extended the previous one exactly.
    pub prefix_kept_turns: usize,
    /// Turns after the first whose request extended the previous one exactly, compactions or not.
    pub prefix_kept_all: usize,
    /// Each turn's share of its request repeating the previous one (the first turn left out).
    pub prefix_shares: Vec<f64>,
    /// Wall clock of the replay, measurements included.
    pub elapsed: Duration,
}

/// Replays `subject` on `engine` at `window` tokens into a scratch transcript under `dir`,
/// calling `after_compaction` after each compaction.
pub async fn replay(
    host: &Host,
    engine: Arc<PreparedEngine>,
    subject: &Subject,
    dir: &Path,
    window: u64,
    mut after_compaction: impl FnMut(Compacted<'_>),
) -> Result<Replay> {
    let settings = host.compaction_settings().for_window(window);
    let output = dir.join(format!(
        "replay-{}-{}-{window}.jsonl",
        engine.id(),
        subject.name
    ));
    remove_with_index(&output);
    let started = Instant::now();
    let mut session = host
        .open_session(
            &SessionTarget::Path(output.clone()),
            &ctxhost::SessionOptions::on(engine.clone()).with_settings(settings.clone()),
        )
        .await?;
    session.set_estimates_only(true);
    session.set_sync(false);
    let mut result = Replay {
        engine: engine.id().to_string(),
        session: subject.name.clone(),
        messages: subject.messages.len(),
        ..Replay::default()
    };
    let mut compacted_last_turn = true;
    for (appended, message) in subject.messages.iter().enumerate() {
        if message["role"] == "assistant" {
            let turn = session
                .assemble_turn(&TurnRequest::default(), &mut |_| {})
                .await?;
            let compacted = turn
                .compaction
                .as_ref()
                .is_some_and(|c| c.compacted().is_some());
            if result.turns > 0 {
                result.prefix_shares.push(turn.prefix.share());
                result.prefix_kept_all += usize::from(turn.prefix.kept_previous);
            }
            if !compacted && !compacted_last_turn {
                result.turns_between_compactions += 1;
                result.prefix_kept_turns += usize::from(turn.prefix.kept_previous);
            }
            compacted_last_turn = compacted;
            result.turns += 1;
            match turn.compaction.as_ref().map(|c| &c.outcome) {
                Some(Ok(outcome)) if outcome.compacted => {
                    result.compactions += 1;
                    after_compaction(Compacted {
                        session: &session,
                        assembly: &turn.assembly,
                        first_kept: outcome.first_kept_entry_id.as_deref(),
                        appended,
                    });
                }
                Some(Ok(outcome))
                    if (outcome.reason.as_deref()).is_some_and(|r| r.contains("no cut point")) =>
                {
                    result.no_cut_point += 1;
                }
                _ => {}
            }
            if u64::from(turn.assembly.estimated_tokens) > window {
                result.overflowing_turns += 1;
            }
        }
        session.append(message).await?;
    }
    session.close().await?;
    result.elapsed = started.elapsed();
    remove_with_index(&output);
    Ok(result)
}

/// A scratch transcript and the recall index a search left beside it.
fn remove_with_index(path: &Path) {
    let _ = std::fs::remove_file(path);
    let _ = std::fs::remove_file(ctxhost::recall::index_path(path));
}
