//! What `health` answers: per session, the turns served and degraded and the last error, kept in
//! memory as each turn is recorded in the session's ledger, so the answer costs a lock and a
//! copy, not a read of any file.

use std::collections::HashMap;
use std::sync::Mutex;

use schemars::JsonSchema;
use serde::Serialize;

use ctxhost::ledger::{LedgerRecord, TurnOutcome};

/// One session's turns since this server opened it.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionHealth {
    engine: String,
    contract: String,
    turns: u64,
    /// Turns served by a fallback engine or not served at all.
    degraded_turns: u64,
    last_outcome: Option<TurnOutcome>,
    last_turn_at: Option<String>,
    /// The last degraded turn's cause, with when it happened.
    last_error: Option<DegradedTurn>,
}

/// A turn not served by the configured engine, or not served at all.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(super) struct DegradedTurn {
    at: String,
    outcome: TurnOutcome,
    /// What went wrong.
    message: Option<String>,
}

/// Every session's health, shared by the server's actors.
#[derive(Debug, Default)]
pub(super) struct HealthBoard {
    sessions: Mutex<HashMap<String, SessionHealth>>,
    /// Whether turns are also written to each session's ledger (`ServeOptions::ledger`).
    ledger: bool,
    /// Engine instances given back by idle sessions.
    idle_releases: std::sync::atomic::AtomicU64,
}

impl HealthBoard {
    pub(super) fn new(ledger: bool) -> Self {
        Self {
            sessions: Mutex::default(),
            ledger,
            idle_releases: Default::default(),
        }
    }

    /// Counts an instance an idle session gave back.
    pub(super) fn count_idle_release(&self) {
        (self.idle_releases).fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Engine instances idle sessions gave back.
    pub(super) fn idle_releases(&self) -> u64 {
        self.idle_releases
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether each turn goes to the session's ledger too.
    pub(super) fn writes_ledger(&self) -> bool {
        self.ledger
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, SessionHealth>> {
        self.sessions.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts a turn the session's ledger just recorded.
    pub(super) fn record(&self, key: &str, record: &LedgerRecord) {
        let mut sessions = self.sessions();
        let health = sessions.entry(key.to_string()).or_default();
        health.engine.clone_from(&record.engine);
        health.contract.clone_from(&record.contract);
        health.turns += 1;
        health.last_outcome = Some(record.outcome);
        health.last_turn_at = Some(record.at.clone());
        if record.outcome != TurnOutcome::Ok {
            health.degraded_turns += 1;
            health.last_error = Some(DegradedTurn {
                at: record.at.clone(),
                outcome: record.outcome,
                message: record.error.clone(),
            });
        }
    }

    /// One session's health, or None when no turn of it was recorded by this server.
    pub(super) fn session(&self, key: &str) -> Option<SessionHealth> {
        self.sessions().get(key).cloned()
    }

    /// Totals over every session: (sessions, turns, degraded turns).
    pub(super) fn totals(&self) -> (usize, u64, u64) {
        let sessions = self.sessions();
        let turns = sessions.values().map(|h| h.turns).sum();
        let degraded = sessions.values().map(|h| h.degraded_turns).sum();
        (sessions.len(), turns, degraded)
    }

    /// The sessions whose last turn was degraded, with their health.
    pub(super) fn degraded(&self) -> Vec<(String, SessionHealth)> {
        let sessions = self.sessions();
        let mut degraded: Vec<_> = (sessions.iter())
            .filter(|(_, h)| h.last_outcome.is_some_and(|o| o != TurnOutcome::Ok))
            .map(|(key, h)| (key.clone(), h.clone()))
            .collect();
        degraded.sort_by(|a, b| a.0.cmp(&b.0));
        degraded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost::session::Prefix;

    fn record(outcome: TurnOutcome) -> LedgerRecord {
        LedgerRecord {
            at: "2026-11-26T00:00:00.000Z".into(),
            engine: "legacy".into(),
            contract: "0.2.0".into(),
            configured_engine: None,
            outcome,
            error: (outcome != TurnOutcome::Ok).then(|| "engine `x` trapped".into()),
            messages: 0,
            assembled_tokens: 1,
            prefix: Prefix::default(),
            request: None,
            compaction: None,
            engine_micros: 1,
            bridge_micros: 2,
        }
    }

    #[test]
    fn degraded_turns_are_counted_and_the_last_error_kept() {
        let board = HealthBoard::default();
        board.record("a", &record(TurnOutcome::Ok));
        board.record("a", &record(TurnOutcome::Failed));
        board.record("b", &record(TurnOutcome::Ok));
        let a = board.session("a").unwrap();
        assert_eq!((a.turns, a.degraded_turns), (2, 1));
        let last_error = a.last_error.unwrap().message;
        assert_eq!(last_error.as_deref(), Some("engine `x` trapped"));
        assert_eq!(board.totals(), (2, 3, 1));
        assert_eq!(board.degraded().len(), 1);
        board.record("a", &record(TurnOutcome::Ok));
        assert!(
            board.degraded().is_empty(),
            "a session that recovered is not degraded"
        );
        assert!(board.session("unknown").is_none());
    }
}
