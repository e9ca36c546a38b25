//! What each turn a runtime asked for leaves in the session's ledger.

use ctxhost::Host;
use ctxhost::error::Error;
use ctxhost::ledger::{LedgerCompaction, LedgerRecord, TurnOutcome};
use ctxhost::session::{Turn, TurnCompaction};

use super::{ClientAssembly, Mirror};

impl Mirror {
    /// The record of an assemble the runtime asked for, kept for the session's ledger when
    /// `write` (written by [`Mirror::write_ledger`] after the answer is sent, so the runtime
    /// never waits on the disk for it).
    pub(crate) fn record_turn(
        &mut self,
        host: &Host,
        assembly: Result<&ClientAssembly, &Error>,
        bridge_time: std::time::Duration,
        write: bool,
    ) -> LedgerRecord {
        let mut record = self.engine_record(host, bridge_time);
        match assembly {
            Ok(assembly) => self.record_assembly(&mut record, &assembly.turn),
            Err(e) => {
                record.outcome = TurnOutcome::Failed;
                record.error = Some(ctxhost::error::chain(e));
            }
        }
        if write {
            self.write_ledger();
            self.unwritten = Some(record.clone());
        }
        record
    }

    /// What the turn the session's driver ran leaves in its record.
    fn record_assembly(&self, record: &mut LedgerRecord, turn: &Turn) {
        record.assembled_tokens = turn.assembly.estimated_tokens;
        record.prefix = turn.prefix;
        record.request = Some(turn.request_digest.clone());
        record.engine_micros = micros(turn.engine_time);
        record.compaction = turn.compaction.as_ref().map(|c| self.ledger_compaction(c));
    }

    /// A turn's record before its assembly is known: which engine served it (a fallback when
    /// the configured one is quarantined) and the time the bridge took.
    fn engine_record(&self, host: &Host, bridge_time: std::time::Duration) -> LedgerRecord {
        let engine = self.session.engine();
        let configured = host.config().engine_for(self.session.key()).engine;
        let fallback = (engine.id() != configured).then(|| configured.to_string());
        let record = LedgerRecord {
            at: ctxhost::timestamp::now_iso(),
            engine: engine.id().to_string(),
            contract: engine.contract_version().to_string(),
            outcome: TurnOutcome::Ok,
            error: None,
            messages: self.state.message_count,
            assembled_tokens: 0,
            prefix: Default::default(),
            request: None,
            compaction: None,
            engine_micros: 0,
            bridge_micros: micros(bridge_time),
            configured_engine: fallback,
        };
        fallen_back(record, configured)
    }

    /// Appends the last turn's record to the ledger, if one is waiting (a failure to write it
    /// is logged, never the turn's failure).
    pub(crate) fn write_ledger(&mut self) {
        if let Some(record) = self.unwritten.take()
            && let Err(e) = self.ledger.append(&record)
        {
            tracing::warn!(session = %self.session.key(), "the turn ledger was not written: {e}");
        }
    }

    /// A turn's compaction as the ledger keeps it, with the layer the transcript recorded.
    fn ledger_compaction(&self, compaction: &TurnCompaction) -> LedgerCompaction {
        let measured = compaction.measured_tokens;
        match &compaction.outcome {
            Ok(outcome) => LedgerCompaction {
                compacted: outcome.compacted,
                layer: (outcome.compacted)
                    .then(|| self.last_compaction_layer())
                    .flatten(),
                tokens_before: measured,
                tokens_after: if outcome.compacted {
                    outcome.tokens_after
                } else {
                    measured
                },
                reason: outcome.reason.clone().filter(|_| !outcome.compacted),
            },
            Err(reason) => LedgerCompaction {
                compacted: false,
                layer: None,
                tokens_before: measured,
                tokens_after: measured,
                reason: Some(reason.clone()),
            },
        }
    }

    fn last_compaction_layer(&self) -> Option<String> {
        let transcript = self.session.transcript();
        let entry = (transcript.entries().iter().rev()).find(|e| e.entry_type() == "compaction")?;
        let layer = entry.compaction_record()?.layer?;
        serde_json::to_value(layer)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
    }
}

/// A record served by another engine than the configured one says so, and why.
fn fallen_back(mut record: LedgerRecord, configured: &str) -> LedgerRecord {
    if record.configured_engine.is_some() {
        record.outcome = TurnOutcome::Fallback;
        record.error = Some(format!(
            "the configured engine `{configured}` is quarantined; `{}` serves (plugins.contextEngineFallback)",
            record.engine
        ));
    }
    record
}

fn micros(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}
