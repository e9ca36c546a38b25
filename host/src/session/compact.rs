//! [`Session::compact`]: ask the engine, judge what it returns against the host's own count,
//! and write it. A compaction that would not shrink the context is a skip, not a fault.

use ctxhost_transcript::{CompactionRecord, NewCompaction};

use super::{
    CompactOptions, CompactOutcome, Session, request, tokens_u32, validate, write_or_undo,
};
use crate::error::{Error, Result};
use crate::timestamp::now_iso;
use ctxhost_runtime::Function;
use ctxhost_runtime::contract::{CompactRequest, Compaction};

/// What the host makes of an engine's compaction before anything is written.
enum Verdict {
    /// Written as it is, with the host's record.
    Write {
        record: Box<CompactionRecord>,
        tokens_after: u64,
    },
    /// Not written, and why.
    Refuse(String),
}

impl CompactOutcome {
    fn unchanged(reason: Option<String>, tokens: u64) -> Self {
        CompactOutcome {
            compacted: false,
            reason,
            tokens_before: tokens,
            tokens_after: tokens,
            first_kept_entry_id: None,
            warnings: Vec::new(),
        }
    }
}

impl Session {
    /// Compacts through the engine; a compaction it returns is validated, then written as a
    /// `compaction` entry (and the next assemble starts from it).
    pub async fn compact(&mut self, options: &CompactOptions) -> Result<CompactOutcome> {
        let (request, tokens_before) = self.compact_request(options);
        let (compaction, reason) = self.proposed_compaction(&request).await?;
        let Some(compaction) = compaction else {
            return Ok(CompactOutcome::unchanged(reason, tokens_before));
        };
        let (record, tokens_after) = match self.judge(&compaction, options, tokens_before)? {
            Verdict::Write {
                record,
                tokens_after,
            } => (record, tokens_after),
            Verdict::Refuse(reason) => {
                return Ok(CompactOutcome::unchanged(Some(reason), tokens_before));
            }
        };
        let first_kept_entry_id = self.write_compaction(compaction, &record, tokens_before)?;
        // Told now that it is written, never about a proposal that was refused; the caller
        // shows them (`warnings`), so the log is not where an operator first meets them.
        for warning in &record.warnings {
            tracing::info!(session = %self.key(), "compaction: {warning}");
        }
        Ok(CompactOutcome {
            compacted: true,
            reason,
            tokens_before,
            tokens_after,
            first_kept_entry_id: Some(first_kept_entry_id),
            warnings: record.warnings.clone(),
        })
    }

    /// What the engine proposes: a compaction (None when it declined), and the reason it
    /// gives. An engine that says it could not compact fails the call.
    async fn proposed_compaction(
        &mut self,
        request: &CompactRequest,
    ) -> Result<(Option<Compaction>, Option<String>)> {
        let result = self.instance().await?.compact(request).await;
        let result = self.settle(result)?;
        if !result.ok {
            return Err(Error::CompactionFailed {
                engine: self.engine.id().to_string(),
                session: self.key().to_string(),
                reason: result.reason.unwrap_or_else(|| "no reason given".into()),
            });
        }
        match (result.compacted, result.compaction) {
            (true, Some(compaction)) => Ok((Some(compaction), result.reason)),
            (true, None) => Err(self.invalid(
                Function::Compact,
                "compacted is true but no compaction was returned".into(),
            )),
            (false, _) => Ok((None, result.reason)),
        }
    }

    /// The engine's request, and the context's tokens before. "Before" and "after" are both
    /// the host's count of the context messages: recorded usage compared with an estimate once
    /// let a compaction grow the context. The engine is told the fuller of usage and that
    /// count (with estimates only, the count).
    fn compact_request(&self, options: &CompactOptions) -> (CompactRequest, u64) {
        let (counted, fullness) = Self::compaction_tokens(&self.shared.read(), self.context_window);
        let current_tokens = if self.estimates_only {
            counted
        } else {
            fullness
        };
        let assembled_tokens = self
            .assembled_offset
            .map(|offset| tokens_u32(counted.saturating_add_signed(offset)));
        let request = CompactRequest {
            session: self.shared.session.clone(),
            session_file: self.path().display().to_string(),
            force: options.force,
            token_budget: options.token_budget,
            current_tokens: Some(tokens_u32(current_tokens)),
            custom_instructions: options.custom_instructions.clone(),
            trigger: options.trigger,
            context_window: Some(tokens_u32(self.context_window)),
            assembled_tokens,
        };
        (request, counted)
    }

    /// Measures the compaction by the host's count before its figures are judged: one that
    /// would not shrink the context is refused as a skip, not an engine fault (the runtime
    /// compaction reports one honestly). Only results within the size limit are looked at; an
    /// invalid one is the engine's fault.
    fn judge(
        &self,
        compaction: &Compaction,
        options: &CompactOptions,
        tokens_before: u64,
    ) -> Result<Verdict> {
        let (mut record, tokens_after) = self.measure_compaction(compaction);
        if let Some(after) = tokens_after
            && after >= tokens_before
        {
            return Ok(Verdict::Refuse(format!(
                "refused: the compaction would not make the context smaller ({tokens_before} -> {after} tokens, both counted from the context messages); nothing written"
            )));
        }
        let context = self.shared.context.context(&self.shared.read()).context;
        validate::compaction(&context.entries, compaction, self.host_bytes_limit())
            .map_err(|problem| self.invalid(Function::Compact, problem))?;
        let tokens_after = tokens_after.ok_or_else(|| {
            self.invalid(
                Function::Compact,
                "first-kept-entry is not in the current context".into(),
            )
        })?;
        self.complete_record(&mut record, compaction, options, tokens_after);
        Ok(Verdict::Write {
            record: Box::new(record),
            tokens_after,
        })
    }

    /// The engine's record of a compaction, and the context it would leave by the host's
    /// count (None when its first kept entry is not in the context). A result over the size
    /// limit is not read: an empty record, no count.
    fn measure_compaction(&self, compaction: &Compaction) -> (CompactionRecord, Option<u64>) {
        let within_limit = compaction.summary.len()
            + compaction.details.as_ref().map_or(0, String::len)
            <= self.host_bytes_limit();
        if !within_limit {
            return (CompactionRecord::default(), None);
        }
        let record = (compaction.details.as_deref())
            .and_then(CompactionRecord::from_json)
            .unwrap_or_default();
        let tokens_after = request::counted_tokens_after(
            &self.shared.read(),
            &compaction.summary,
            compaction.first_kept_entry as usize,
            &request::pruned_ids(&record),
        );
        (record, tokens_after)
    }

    /// The engine's record with what the host measured and was asked added (keys the engine
    /// wrote are kept).
    fn complete_record(
        &self,
        record: &mut CompactionRecord,
        compaction: &Compaction,
        options: &CompactOptions,
        tokens_after: u64,
    ) {
        if u64::from(compaction.tokens_after) != tokens_after {
            record.engine_tokens_after = Some(compaction.tokens_after.into());
        }
        record.tokens_after = Some(tokens_after);
        record.engine = Some(self.engine.id().to_string());
        record.trigger = Some(options.trigger);
        if let Some(focus) = &options.custom_instructions {
            record.custom_instructions = Some(focus.clone());
        }
    }

    /// Appends the compaction entry (undone if the file write fails); returns the id of the
    /// first entry it keeps.
    fn write_compaction(
        &mut self,
        compaction: Compaction,
        record: &CompactionRecord,
        tokens_before: u64,
    ) -> Result<String> {
        let mut transcript = self.shared.write();
        let first_kept_entry_id = transcript.entries()[compaction.first_kept_entry as usize]
            .id()
            .to_string();
        let index = transcript.append_compaction(
            &NewCompaction {
                summary: compaction.summary,
                first_kept_entry_id: first_kept_entry_id.clone(),
                tokens_before,
                details: Some(record.to_value()),
            },
            &now_iso(),
        )?;
        write_or_undo(&mut self.file, &mut transcript, index)?;
        Ok(first_kept_entry_id)
    }
}
