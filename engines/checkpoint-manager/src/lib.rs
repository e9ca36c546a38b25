//! `checkpoint-manager`: structured state written down before compaction forgets it.
//!
//! A bundled reference engine ("OpenClaw Context Manager v1"). It never calls a model:
//!
//! - **capture** ([`capture`], [`thread`]): `ingest` keeps the few facts a resumed agent needs —
//!   files read and modified, tools used, failures, decisions, the conversation's thread — and
//!   saves them as small state files at a bounded rate (every 2 s or 50 messages, and in every
//!   checkpoint), so a crash loses little and a long replay does not rewrite them per message;
//! - **gauge** ([`gauge`]): `assemble` shows how full the context is (by the host's estimate of
//!   what it sends) in the system prompt, and at 80% writes a checkpoint;
//! - **checkpoint** ([`checkpoint`], [`store`]): `compact` writes a YAML checkpoint *before* the
//!   runtime's compaction (its safety net) summarizes the context away;
//! - **restore** ([`restore`]): after a compaction, and in a new session with the same key, the
//!   checkpoint is rendered into a lean message at the start of the kept context.
//!
//! The hooks below only talk to the host (configuration, logs, the runtime's compaction);
//! everything they decide lives in [`session::SessionState`], which runs natively in tests.

pub mod capture;
pub mod checkpoint;
pub mod config;
pub mod gauge;
pub mod restore;
pub mod session;
pub mod store;
pub mod thread;
pub mod time;

use std::path::Path;

use ctxhost_sdk::{
    AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult, CompactRequest,
    CompactResult, ContextEngine, EngineInfo, IngestResult, Message, Result, Role, Session,
    delegate_compact, host, log,
};

use crate::config::Config;
use crate::session::{SessionState, Start};

/// The engine's private state dir: the host preopens it as `/`.
const ROOT: &str = "/";

/// The engine: one session's state, opened at `bootstrap`.
#[derive(Debug, Default)]
pub struct CheckpointManager {
    session: Option<SessionState>,
}

impl CheckpointManager {
    /// The session's state, opened from the host's view of it (at `bootstrap`, or lazily if a
    /// host calls another hook first).
    fn open(
        &mut self,
        session: &Session,
        file: &str,
        entry_count: Option<u32>,
    ) -> &mut SessionState {
        let (config, warnings) = Config::from_json(&host::config());
        for warning in warnings {
            log::warn(warning);
        }
        let leading_summary = host::context_entries()
            .first()
            .filter(|entry| entry.role == Role::CompactionSummary)
            .map(|entry| entry.entry);
        let state = SessionState::open(
            Path::new(ROOT),
            Start {
                key: &session.key,
                session_file: file,
                entry_count,
                leading_summary,
                config,
            },
        );
        self.session.insert(state)
    }

    /// The session's state, and afterwards its warnings go to the host's log.
    fn with<T>(&mut self, session: &Session, hook: impl FnOnce(&mut SessionState) -> T) -> T {
        let state = match self.session.take() {
            Some(state) => self.session.insert(state),
            None => self.open(session, "", None),
        };
        let result = hook(state);
        for warning in state.take_warnings() {
            log::warn(warning);
        }
        result
    }
}

impl ContextEngine for CheckpointManager {
    fn info() -> EngineInfo {
        EngineInfo::new(
            "checkpoint-manager",
            "Checkpoint manager",
            env!("CARGO_PKG_VERSION"),
        )
    }

    fn bootstrap(&mut self, request: BootstrapRequest) -> Result<BootstrapResult> {
        let state = self.open(
            &request.session,
            &request.session_file,
            Some(request.entry_count),
        );
        let reason = match state.latest() {
            Some(checkpoint) => format!("resumed from {}", checkpoint.meta.checkpoint_id),
            None => "no checkpoint yet".to_string(),
        };
        for warning in state.take_warnings() {
            log::warn(warning);
        }
        Ok(BootstrapResult::bootstrapped(reason))
    }

    fn ingest(&mut self, session: &Session, message: Message, _: bool) -> Result<IngestResult> {
        self.with(session, |state| state.ingest(&message, time::now_ms()));
        Ok(IngestResult { ingested: true })
    }

    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        Ok(self.with(&request.session, |state| {
            // Read once per compaction, so the restore does not repeat what the summary says;
            // without it (the host refused the read) the restore still stands on its own.
            let summary = state.new_summary(&request).and_then(|entry| {
                host::read_entries(&[entry])
                    .ok()
                    .and_then(|read| read.into_iter().next())
                    .map(|m| m.text)
            });
            state.assemble_after(&request, time::now_ms(), summary.as_deref())
        }))
    }

    fn compact(&mut self, request: CompactRequest) -> Result<CompactResult> {
        self.with(&request.session, |state| {
            state.before_compaction(request.current_tokens, time::now_ms());
        });
        let result = delegate_compact(&request);
        self.with(&request.session, |state| {
            state.after_compaction(result.compacted)
        });
        Ok(result)
    }

    fn dispose(&mut self, session: &Session) -> Result<()> {
        self.with(session, |state| state.end(time::now_ms()));
        Ok(())
    }
}

ctxhost_sdk::export_engine!(CheckpointManager);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_names_the_engine_and_leaves_compaction_to_the_runtime() {
        let info = CheckpointManager::info();
        assert_eq!(info.id, "checkpoint-manager");
        assert!(!info.owns_compaction);
    }
}
