//! What an engine instance asks of its session, without the runtime knowing what a session
//! or a transcript is (the dependency points from `session` to `runtime`, never back).

use std::future::Future;
use std::pin::Pin;

use super::contract::{
    CompactRequest, Compaction, Context, EntryRef, HostError, Message, SearchHit, SearchRequest,
};

/// The boxed future the host's session services return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The session-side services behind the host imports.
pub trait SessionServices: Send + Sync + 'static {
    /// The current context, as `assemble` would receive it.
    fn context(&self) -> Context;

    /// Whether the engine's own writes must reach the disk when it asks (`sync`, `sync-data`):
    /// false while the session's transcript is not fsynced either (a replay into a scratch
    /// file), where an engine's fsyncs would only make the replay wait on the disk.
    fn durable(&self) -> bool {
        true
    }

    /// The call ids of tool results in the current context (None for other entries); an
    /// entry outside it is an `invalid-argument`.
    fn tool_call_ids(&self, refs: &[EntryRef]) -> Result<Vec<Option<String>>, HostError>;

    /// Entries of this session's transcript; an unknown reference is an `invalid-argument`.
    fn read_entries(&self, refs: &[EntryRef]) -> Result<Vec<Message>, HostError>;

    /// Runs the built-in compaction and returns what it would write (nothing is written).
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

    /// Full-text search over every message of the session (the `recall` import); a bad
    /// request is an `invalid-argument` naming the field.
    fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, HostError>;
}

/// Services of an instance that serves no session: used to ask a freshly loaded engine for
/// its `info` and to check that it instantiates.
pub struct Detached;

impl SessionServices for Detached {
    fn search(&self, _request: &SearchRequest) -> Result<Vec<SearchHit>, HostError> {
        Err(HostError::Unavailable(
            "this instance serves no session".into(),
        ))
    }

    fn context(&self) -> Context {
        Context::default()
    }

    fn tool_call_ids(&self, refs: &[EntryRef]) -> Result<Vec<Option<String>>, HostError> {
        match refs.first() {
            None => Ok(Vec::new()),
            Some(r) => Err(HostError::InvalidArgument(format!(
                "entry {r} is not in the current context: this instance serves no session"
            ))),
        }
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
