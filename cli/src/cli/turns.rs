//! The turn ledger in `context history`: every turn `serve` answered for the session, what
//! became of it, and a table of the latest.

use std::path::Path;

use ctxhost::ledger::{self, LedgerRecord, TurnOutcome};
use schemars::JsonSchema;
use serde::Serialize;

use super::output::stderr_line;

/// Turns shown in the table (all of them are in `--json`).
const SHOWN: usize = 20;

/// The session's ledger, summed up.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct TurnLedger {
    turns: usize,
    /// Turns served by a fallback engine or not served at all.
    degraded_turns: usize,
    /// Turns after the first whose request extended the previous one exactly.
    prefix_kept_turns: usize,
    records: Vec<LedgerRecord>,
}

impl TurnLedger {
    /// The ledger beside `transcript`, its unreadable lines warned about on stderr.
    pub(super) fn read(transcript: &Path) -> anyhow::Result<Self> {
        let history = ledger::read_history(transcript)?;
        for warning in ctxhost_transcript::shown_warnings(&history.warnings) {
            stderr_line!("warning: {warning}");
        }
        let records = history.records;
        Ok(Self {
            turns: records.len(),
            degraded_turns: (records.iter())
                .filter(|r| r.outcome != TurnOutcome::Ok)
                .count(),
            prefix_kept_turns: records.iter().filter(|r| r.prefix.kept_previous).count(),
            records,
        })
    }

    pub(super) fn lines(&self) -> Vec<String> {
        if self.records.is_empty() {
            return vec!["turns: none recorded (the ledger is written by `ctxhost serve`)".into()];
        }
        let mut lines = vec![format!(
            "turns: {} recorded, {} degraded, {} of {} kept the previous request as a prefix",
            self.turns,
            self.degraded_turns,
            self.prefix_kept_turns,
            self.turns.saturating_sub(1)
        )];
        let shown = &self.records[self.records.len().saturating_sub(SHOWN)..];
        lines.push(format!(
            "{:<24}  {:<18}  {:<8}  {:>9}  {:>7}  {:>9}  {:>9}  compaction / error",
            "when", "engine", "outcome", "tokens", "prefix", "engine", "bridge"
        ));
        for r in shown {
            let outcome = match r.outcome {
                TurnOutcome::Ok => "ok",
                TurnOutcome::Fallback => "fallback",
                TurnOutcome::Failed => "failed",
            };
            let what = match (&r.compaction, &r.error) {
                (_, Some(error)) => error.clone(),
                (Some(c), None) if c.compacted => format!(
                    "{} {} -> {}",
                    c.layer.as_deref().unwrap_or("compacted"),
                    c.tokens_before,
                    c.tokens_after
                ),
                (Some(c), None) => format!("not compacted: {}", c.reason.as_deref().unwrap_or("-")),
                (None, None) => String::new(),
            };
            lines.push(
                format!(
                    "{:<24}  {:<18}  {:<8}  {:>9}  {:>6.1}%  {:>7}µs  {:>7}µs  {what}",
                    r.at,
                    format!("{} {}", r.engine, r.contract),
                    outcome,
                    r.assembled_tokens,
                    r.prefix.share() * 100.0,
                    r.engine_micros,
                    r.bridge_micros,
                )
                .trim_end()
                .to_string(),
            );
        }
        lines
    }
}
