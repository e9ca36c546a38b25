//! `lossless`: every message of a session stays reachable through a hierarchy of summaries.
//!
//! A bundled engine after the design of lossless-claw (its documents, not its code):
//!
//! - **tree** ([`tree`]): messages go into leaves of a few messages each, and every `fanIn`
//!   nodes of a level are condensed into one a level up, as soon as they exist; nodes never
//!   change, so the work is done once per message, not per turn;
//! - **summaries** ([`summary`]): extractive by default (requests, standing rules, failures
//!   with their error line, files changed, where the span ended), written by the operator's
//!   model when `llm` is granted, falling back to extraction when it fails;
//! - **assemble** ([`window`]): the newest messages verbatim within the recent share of the
//!   budget, and for everything older the highest nodes that cover it, each naming its id and
//!   span; stubs or one line when even those do not fit, so the plan is always within budget;
//! - **compaction** is the engine's own: the cut assemble makes, with the covering nodes as
//!   the summary, at no model cost; the transcript keeps every message, and the tree points
//!   into it;
//! - **tools** ([`tools`]): `lossless_describe`, `lossless_expand` (down to the original
//!   messages, paged) and `lossless_grep` (the host's search, each hit placed in the tree);
//! - **state** ([`store`]): an append-only log per session in the state dir, a torn last line
//!   dropped on start, rebuilt from the transcript when missing or inconsistent.

pub mod config;
pub mod state;
pub mod store;
pub mod summary;
pub mod tools;
pub mod tree;
pub mod window;

use std::path::Path;

use ctxhost_sdk::serde_json::json;
use ctxhost_sdk::{
    AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult, CompactRequest,
    CompactResult, ContextEngine, EngineInfo, IngestResult, Message, Result, Session, Tools, host,
    log,
};

use crate::config::Config;
use crate::state::SessionState;
use crate::tools::{ExpandArgs, GrepArgs, NodeArgs};

/// The engine's private state dir: the host preopens it as `/`.
const ROOT: &str = "/";

/// The engine: one session's tree, opened at `bootstrap`.
#[derive(Debug, Default)]
pub struct Lossless {
    session: Option<SessionState>,
}

impl Lossless {
    fn open(&mut self, session: &Session, entry_count: Option<u32>) -> &mut SessionState {
        let (config, problem) = Config::read();
        if let Some(problem) = problem {
            log::warn(problem);
        }
        // A hook before `bootstrap` (a host that skipped it): the context says how far the
        // transcript goes.
        let entry_count = entry_count.unwrap_or_else(|| {
            host::context_entries()
                .refs()
                .iter()
                .max()
                .map_or(0, |&last| last + 1)
        });
        let state = SessionState::open(Path::new(ROOT), &session.id, config, entry_count);
        self.session.insert(state)
    }

    /// The session's state (opened if no hook did yet), its warnings logged afterwards.
    fn with<T>(&mut self, session: &Session, hook: impl FnOnce(&mut SessionState) -> T) -> T {
        let state = match self.session.take() {
            Some(state) => self.session.insert(state),
            None => self.open(session, None),
        };
        let result = hook(state);
        for warning in state.take_warnings() {
            log::warn(warning);
        }
        result
    }

    /// The tree for a tool call: tools come after `bootstrap`, so a state exists.
    fn tree(&self) -> Result<&tree::Tree> {
        self.session
            .as_ref()
            .map(|s| &s.tree)
            .ok_or_else(|| "the session has not started yet (no bootstrap)".into())
    }
}

impl ContextEngine for Lossless {
    fn info() -> EngineInfo {
        EngineInfo::new(
            "lossless",
            "Lossless (summary tree)",
            env!("CARGO_PKG_VERSION"),
        )
        .owns_compaction(true)
    }

    fn bootstrap(&mut self, request: BootstrapRequest) -> Result<BootstrapResult> {
        let state = self.open(&request.session, Some(request.entry_count));
        let reason = format!(
            "{} summary nodes over {} leaves, {} messages open",
            state.tree.node_count(),
            state.tree.leaves().len(),
            state.tree.open().len()
        );
        for warning in state.take_warnings() {
            log::warn(warning);
        }
        Ok(BootstrapResult::bootstrapped(reason))
    }

    fn ingest(&mut self, session: &Session, message: Message, _: bool) -> Result<IngestResult> {
        self.with(session, |state| state.ingest(message));
        Ok(IngestResult { ingested: true })
    }

    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        let budget = request.budget().saturating_sub(request.prompt_tokens());
        let entries = &request.entries;
        Ok(self.with(&request.session, |state| {
            state.assemble(entries.refs(), entries.tokens(), budget)
        }))
    }

    fn compact(&mut self, request: CompactRequest) -> Result<CompactResult> {
        Ok(self.with(&request.session, |state| state.compact(&request)))
    }

    fn tools(&self) -> Tools<Self> {
        let node = json!({
            "type": "object",
            "properties": {"node": {"type": "string", "description": "a node id, e.g. s0-12 or s2-1"}},
            "required": ["node"],
            "additionalProperties": false
        });
        let expand = json!({
            "type": "object",
            "properties": {
                "node": {"type": "string", "description": "a node id, e.g. s0-12 or s2-1"},
                "offset": {"type": "integer", "minimum": 0, "description": "where a continued leaf resumes (characters)"}
            },
            "required": ["node"],
            "additionalProperties": false
        });
        let grep = json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "minLength": 1, "description": "words to find"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50}
            },
            "required": ["query"],
            "additionalProperties": false
        });
        Tools::new()
            .tool(
                "lossless_describe",
                "What a lossless summary node covers: its entry span, parent, children and summary. Node ids (s0-12, s2-1) appear in the inserted summaries.",
                node,
                |engine: &mut Lossless, args: NodeArgs| tools::describe(engine.tree()?, args),
            )
            .tool(
                "lossless_expand",
                "Opens a lossless summary node: a higher node shows its children's summaries; a leaf (s0-N) shows its original messages in full, paged with `offset`.",
                expand,
                |engine: &mut Lossless, args: ExpandArgs| tools::expand(engine.tree()?, args),
            )
            .tool(
                "lossless_grep",
                "Full-text search over every message of the session, summarized or not; each hit names the leaf that holds it, to open with lossless_expand.",
                grep,
                |engine: &mut Lossless, args: GrepArgs| tools::grep(engine.tree()?, args),
            )
    }
}

ctxhost_sdk::export_engine!(Lossless);

#[cfg(test)]
mod tests;
