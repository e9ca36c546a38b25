//! What an engine instance asks of its session, without the runtime knowing what a session
//! or a transcript is (the dependency points from `session` to `runtime`, never back).

use std::future::Future;
use std::pin::Pin;

use super::contract::{CompactRequest, Compaction, ContextEntry, EntryRef, HostError, Message};

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The session-side services behind the host imports.
pub trait SessionServices: Send + Sync + 'static {
    /// The current context, as `assemble` would receive it. `tool_facts`: whether the caller's
    /// contract carries the tool facts of tool results (reading them scans each tool output
    /// once, a cost a 0.1 guest, which never sees them, must not pay).
    fn context_entries(&self, tool_facts: bool) -> Vec<ContextEntry>;

    /// Entries of this session's transcript; an unknown reference is an `invalid-argument`.
    fn read_entries(&self, refs: &[EntryRef]) -> Result<Vec<Message>, HostError>;

    /// Runs the runtime compaction and returns what it would write (nothing is written).
    fn delegate_compaction<'a>(
        &'a self,
        request: &'a CompactRequest,
    ) -> BoxFuture<'a, Result<Option<Compaction>, HostError>>;

    /// A completion through the operator's model (only reached when `llm` was granted).
    fn complete<'a>(
        &'a self,
        system: Option<&'a str>,
        prompt: &'a str,
        max_tokens: Option<u32>,
    ) -> BoxFuture<'a, Result<String, HostError>>;
}

/// Services of an instance that serves no session: used to ask a freshly loaded engine for
/// its `info` and to check that it instantiates.
pub struct Detached;

impl SessionServices for Detached {
    fn context_entries(&self, _tool_facts: bool) -> Vec<ContextEntry> {
        Vec::new()
    }

    fn read_entries(&self, refs: &[EntryRef]) -> Result<Vec<Message>, HostError> {
        match refs.first() {
            None => Ok(Vec::new()),
            Some(r) => Err(HostError::InvalidArgument(format!(
                "entry {r} does not exist: this instance serves no session"
            ))),
        }
    }

    fn delegate_compaction<'a>(
        &'a self,
        _request: &'a CompactRequest,
    ) -> BoxFuture<'a, Result<Option<Compaction>, HostError>> {
        Box::pin(async {
            Err(HostError::Unavailable(
                "this instance serves no session".into(),
            ))
        })
    }

    fn complete<'a>(
        &'a self,
        _system: Option<&'a str>,
        _prompt: &'a str,
        _max_tokens: Option<u32>,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async {
            Err(HostError::Unavailable(
                "this instance serves no session".into(),
            ))
        })
    }
}
