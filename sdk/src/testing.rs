//! Unit-testing an engine natively, without wasm: a fake host behind the [`host`](crate::host)
//! imports, and constructors for the contract's request and message types.
//!
//! Only in native builds (`cfg(not(target_arch = "wasm32"))`), so `cargo test` on the engine's
//! crate exercises its logic and its calls into the host:
//!
//! ```
//! use ctxhost_sdk::testing::{TestHost, assemble_request, message};
//! use ctxhost_sdk::{ContextEngine, EngineInfo, Role, host, log};
//!
//! #[derive(Default)]
//! struct Quiet;
//! impl ContextEngine for Quiet {
//!     fn info() -> EngineInfo { EngineInfo::new("quiet", "Quiet", "0.1.0") }
//! }
//!
//! let history = [message(0, Role::User, "hi"), message(1, Role::Assistant, "hello")];
//! let test_host = TestHost::new()
//!     .config(ctxhost_sdk::serde_json::json!({"keep": 1}))
//!     .transcript(history.clone());
//! let plan = test_host.run(|| {
//!     log::info("assembling");
//!     assert_eq!(host::config()["keep"], 1);
//!     Quiet.assemble(assemble_request(&history))
//! });
//! // The default plan keeps both entries as one `keep-range`.
//! assert_eq!(plan.unwrap().estimated_tokens, history[0].tokens + history[1].tokens);
//! assert_eq!(test_host.calls(), ["log", "config"]);
//! assert_eq!(test_host.logs()[0].1, "assembling");
//! ```

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

// The import types straight from the bindings: `host` dispatches to this module.
use crate::context::{AssembleRequest, ContextEntry, Entries};
use crate::wit::host::{CompletionRequest, LogLevel};
use crate::wit::recall::{Hit as SearchHit, SearchRequest};
use crate::wit::types::{
    AfterTurnRequest, BootstrapRequest, CompactRequest, Compaction, CompactionTrigger, EntryRef,
    HostError, Message, Role, Session, ToolCall,
};

type DelegateFn = Box<dyn FnMut(&CompactRequest) -> Result<Option<Compaction>, HostError>>;
type CompleteFn = Box<dyn FnMut(&CompletionRequest) -> Result<String, HostError>>;

struct State {
    config: String,
    transcript: BTreeMap<EntryRef, Message>,
    context: Option<Vec<ContextEntry>>,
    delegate: DelegateFn,
    complete: CompleteFn,
    logs: Vec<(LogLevel, String)>,
    calls: Vec<&'static str>,
}

/// A fake ctxhost for native tests: answers the host imports from what the test gave it and
/// records what the engine asked for. Cheap to clone (clones share state).
///
/// Defaults follow the real host: config `{}`; an empty transcript (reading an unknown entry is
/// `invalid-argument`); the context is every transcript message in order;
/// `delegate-compaction` finds nothing to compact; `complete` is `permission-denied` (as for an
/// engine without the `llm` grant).
#[derive(Clone)]
pub struct TestHost(Rc<RefCell<State>>);

impl Default for TestHost {
    fn default() -> Self {
        Self::new()
    }
}

impl TestHost {
    /// A host with the defaults above.
    pub fn new() -> Self {
        TestHost(Rc::new(RefCell::new(State {
            config: "{}".into(),
            transcript: BTreeMap::new(),
            context: None,
            delegate: Box::new(|_| Ok(None)),
            complete: Box::new(|_| {
                Err(HostError::PermissionDenied(
                    "the `llm` capability is not granted (TestHost::on_complete sets an answer)"
                        .into(),
                ))
            }),
            logs: Vec::new(),
            calls: Vec::new(),
        })))
    }

    /// The engine's configuration, as the host hands it over after validating it.
    pub fn config(self, config: serde_json::Value) -> Self {
        self.0.borrow_mut().config = config.to_string();
        self
    }

    /// The session's transcript: what `read-entries` answers (by each message's `entry`).
    pub fn transcript(self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.0
            .borrow_mut()
            .transcript
            .extend(messages.into_iter().map(|m| (m.entry, m)));
        self
    }

    /// What `context-entries` answers; by default, every transcript message in order.
    pub fn context(self, entries: Vec<ContextEntry>) -> Self {
        self.0.borrow_mut().context = Some(entries);
        self
    }

    /// What `delegate-compaction` answers.
    pub fn on_delegate_compaction(
        self,
        answer: impl FnMut(&CompactRequest) -> Result<Option<Compaction>, HostError> + 'static,
    ) -> Self {
        self.0.borrow_mut().delegate = Box::new(answer);
        self
    }

    /// What `complete` answers (the model's reply, or an error).
    pub fn on_complete(
        self,
        answer: impl FnMut(&CompletionRequest) -> Result<String, HostError> + 'static,
    ) -> Self {
        self.0.borrow_mut().complete = Box::new(answer);
        self
    }

    /// Runs `test` with this host behind the imports on this thread; the previous one (if
    /// any) is restored afterwards, also when `test` panics.
    pub fn run<T>(&self, test: impl FnOnce() -> T) -> T {
        struct Restore(Option<TestHost>);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| *c.borrow_mut() = self.0.take());
            }
        }
        let previous = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _restore = Restore(previous);
        test()
    }

    /// Everything the engine logged, in order.
    pub fn logs(&self) -> Vec<(LogLevel, String)> {
        self.0.borrow().logs.clone()
    }

    /// The imports the engine called, in order, by their contract names (`read-entries`, …).
    pub fn calls(&self) -> Vec<&'static str> {
        self.0.borrow().calls.clone()
    }

    pub(crate) fn log(&self, level: LogLevel, message: &str) {
        self.0.borrow_mut().logs.push((level, message.to_string()));
    }

    pub(crate) fn config_json(&self) -> String {
        self.0.borrow().config.clone()
    }

    pub(crate) fn context_entries(&self) -> Entries {
        let state = self.0.borrow();
        match &state.context {
            Some(entries) => entries.clone().into(),
            None => state.transcript.values().map(entry).collect(),
        }
    }

    /// The call ids of the transcript's messages; an entry outside the context is an error.
    pub(crate) fn tool_call_ids(
        &self,
        entries: &[EntryRef],
    ) -> Result<Vec<Option<String>>, HostError> {
        let in_context = self.context_entries();
        let state = self.0.borrow();
        entries
            .iter()
            .map(|e| match state.transcript.get(e) {
                Some(message) if in_context.refs().contains(e) => Ok(message.tool_call_id.clone()),
                _ => Err(HostError::InvalidArgument(format!(
                    "entry {e} is not in the current context"
                ))),
            })
            .collect()
    }

    pub(crate) fn read_entries(&self, entries: &[EntryRef]) -> Result<Vec<Message>, HostError> {
        let state = self.0.borrow();
        entries
            .iter()
            .map(|e| {
                state.transcript.get(e).cloned().ok_or_else(|| {
                    HostError::InvalidArgument(format!("entry {e} is not in this session"))
                })
            })
            .collect()
    }

    pub(crate) fn delegate_compaction(
        &self,
        request: &CompactRequest,
    ) -> Result<Option<Compaction>, HostError> {
        // Taken out while it runs, so the answer may itself call the host (e.g. log).
        let mut answer =
            std::mem::replace(&mut self.0.borrow_mut().delegate, Box::new(|_| Ok(None)));
        let result = answer(request);
        self.0.borrow_mut().delegate = answer;
        result
    }

    /// Entries of the transcript holding any word of the query (case-insensitively) and
    /// passing the request's filters, in entry order: a stand-in for the host's ranked
    /// full-text search.
    pub(crate) fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, HostError> {
        let words: Vec<String> = request
            .query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect();
        if words.is_empty() {
            return Err(HostError::InvalidArgument("query has no words".into()));
        }
        let limit = if request.limit == 0 {
            10
        } else {
            request.limit as usize
        };
        let state = self.0.borrow();
        Ok(state
            .transcript
            .values()
            .filter(|m| {
                let text = m.text.to_lowercase();
                words.iter().any(|w| text.contains(w.as_str()))
                    && request.role.as_deref().is_none_or(|r| r == m.role.as_str())
                    && request
                        .tool
                        .as_ref()
                        .is_none_or(|t| m.tool_name.as_ref() == Some(t))
                    && request.is_error.is_none_or(|e| m.is_error == e)
            })
            .take(limit)
            .map(|m| SearchHit {
                entry: m.entry,
                entry_id: m.entry_id.clone(),
                role: m.role.as_str().into(),
                timestamp: m.timestamp,
                snippet: m.text.chars().take(200).collect(),
            })
            .collect())
    }

    pub(crate) fn complete(&self, request: &CompletionRequest) -> Result<String, HostError> {
        let placeholder: CompleteFn = Box::new(|_| Err(HostError::Failed("re-entered".into())));
        let mut answer = std::mem::replace(&mut self.0.borrow_mut().complete, placeholder);
        let result = answer(request);
        self.0.borrow_mut().complete = answer;
        result
    }
}

thread_local! {
    static CURRENT: RefCell<Option<TestHost>> = const { RefCell::new(None) };
}

/// Calls `f` with the current test host, recording the import; panics without one.
pub(crate) fn with_host<T>(import: &'static str, f: impl FnOnce(&TestHost) -> T) -> T {
    let host = CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        panic!(
            "ctxhost_sdk::host `{import}` called outside a component: run the test inside \
             ctxhost_sdk::testing::TestHost::new().run(|| ...)"
        )
    });
    host.0.borrow_mut().calls.push(import);
    f(&host)
}

/// A session (`id` "test-session", `key` "agent:test:main").
pub fn session() -> Session {
    Session {
        id: "test-session".into(),
        key: "agent:test:main".into(),
    }
}

/// A message as the host hands it over: `text` as its only text block, the host's token
/// estimate, an AgentMessage JSON of its role, timestamp `entry` seconds after the epoch. A
/// `ToolResult` is [`tool_result`] of a tool named `tool`.
pub fn message(entry: EntryRef, role: Role, text: &str) -> Message {
    if role == Role::ToolResult {
        return tool_result(entry, "tool", text);
    }
    let timestamp = u64::from(entry) * 1000;
    let content = serde_json::json!([{ "type": "text", "text": text }]);
    let json = match role {
        Role::User => {
            serde_json::json!({"role": "user", "content": content, "timestamp": timestamp})
        }
        Role::Assistant => serde_json::json!({"role": "assistant", "content": content,
            "stopReason": "stop", "timestamp": timestamp}),
        _ => serde_json::json!({"role": "custom", "customType": "test", "content": text,
            "display": true, "timestamp": timestamp}),
    };
    Message {
        entry,
        entry_id: format!("{entry:08x}"),
        role,
        timestamp,
        text: text.into(),
        tool_calls: Vec::new(),
        tool_name: None,
        tool_call_id: None,
        is_error: false,
        stop_reason: (role == Role::Assistant).then(|| "stop".into()),
        usage: None,
        tokens: crate::tokens::estimate_tokens(text),
        json: json.to_string(),
    }
}

/// An assistant message that calls one tool with these JSON `arguments`.
pub fn tool_call(entry: EntryRef, name: &str, arguments: serde_json::Value) -> Message {
    let mut message = message(entry, Role::Assistant, "");
    message.tool_calls = vec![ToolCall {
        id: format!("call-{entry}"),
        name: name.into(),
        arguments: arguments.to_string(),
    }];
    message.stop_reason = Some("toolUse".into());
    message
}

/// The output of the tool `tool_name`, answering the call `call-{entry}`: `text` as its only
/// text block, not an error.
pub fn tool_result(entry: EntryRef, tool_name: &str, text: &str) -> Message {
    let timestamp = u64::from(entry) * 1000;
    let call_id = format!("call-{entry}");
    let json = serde_json::json!({"role": "toolResult", "toolCallId": call_id,
        "toolName": tool_name, "content": [{ "type": "text", "text": text }],
        "isError": false, "timestamp": timestamp});
    Message {
        entry,
        entry_id: format!("{entry:08x}"),
        role: Role::ToolResult,
        timestamp,
        text: text.into(),
        tool_calls: Vec::new(),
        tool_name: Some(tool_name.into()),
        tool_call_id: Some(call_id),
        is_error: false,
        stop_reason: None,
        usage: None,
        tokens: crate::tokens::estimate_tokens(text),
        json: json.to_string(),
    }
}

/// The context entry of a message, as a 0.2 host sends it: with the tool facts of a tool
/// result, never pruned.
pub fn entry(message: &Message) -> ContextEntry {
    ContextEntry {
        entry: message.entry,
        role: message.role,
        tokens: message.tokens,
        tool_name: message.tool_name.as_deref().map(Into::into),
        is_error: message.is_error,
        pruned: false,
    }
}

/// An `assemble` request over these messages: a 200,000-token window, no budget, the context
/// size their token sum, no model or pending prompt
/// ([`with_model`](AssembleRequest::with_model) and
/// [`with_prompt`](AssembleRequest::with_prompt) add them).
pub fn assemble_request(messages: &[Message]) -> AssembleRequest {
    let entries: Entries = messages.iter().map(entry).collect();
    AssembleRequest {
        session: session(),
        token_budget: None,
        context_window: 200_000,
        context_tokens: entries.total_tokens(),
        available_tools: Vec::new(),
        entries,
        model: None,
        prompt: None,
    }
}

/// A manual, unforced `compact` request with no budget: a 200,000-token window, no count of
/// the context and no earlier `assemble`
/// ([`with_assembled_tokens`](CompactRequest::with_assembled_tokens) adds one).
pub fn compact_request() -> CompactRequest {
    CompactRequest {
        session: session(),
        session_file: "test-session.jsonl".into(),
        force: false,
        token_budget: None,
        current_tokens: None,
        custom_instructions: None,
        trigger: CompactionTrigger::Manual,
        context_window: 200_000,
        assembled_tokens: None,
    }
}

/// A `bootstrap` request for a transcript of `entry_count` entries. A fresh instance of an
/// existing session is bootstrapped, not re-fed the old messages through `ingest`.
pub fn bootstrap_request(entry_count: u32) -> BootstrapRequest {
    BootstrapRequest {
        session: session(),
        session_file: "test-session.jsonl".into(),
        entry_count,
    }
}

/// An `after-turn` request: the context grew from `before` to `after` messages.
pub fn after_turn_request(before: u32, after: u32) -> AfterTurnRequest {
    AfterTurnRequest {
        session: session(),
        session_file: "test-session.jsonl".into(),
        pre_prompt_message_count: before,
        message_count: after,
        auto_compaction_summary: None,
        is_heartbeat: false,
        token_budget: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ContextEngine;
    use crate::error::Result;
    use crate::host;
    use crate::wit::types::{EngineInfo, IngestResult};

    /// Remembers tool results; compacts through the host and logs what it got.
    #[derive(Default)]
    struct Recorder {
        ingested: Vec<EntryRef>,
    }

    impl ContextEngine for Recorder {
        fn info() -> EngineInfo {
            EngineInfo::new("recorder", "Recorder", "0.1.0")
        }

        fn ingest(&mut self, _: &Session, message: Message, _: bool) -> Result<IngestResult> {
            self.ingested.push(message.entry);
            Ok(IngestResult { ingested: true })
        }

        fn compact(&mut self, request: CompactRequest) -> Result<crate::wit::types::CompactResult> {
            let result = crate::engine::delegate_compact(&request);
            crate::log::info(format!("compacted: {}", result.compacted));
            Ok(result)
        }
    }

    #[test]
    fn imports_answer_from_the_test_host_and_calls_are_recorded() {
        let history = vec![
            message(0, Role::User, "read main.rs"),
            tool_call(1, "read", serde_json::json!({"path": "main.rs"})),
            message(2, Role::ToolResult, "fn main() {}"),
        ];
        let test_host = TestHost::new()
            .transcript(history.clone())
            .on_delegate_compaction(|request| {
                crate::log::debug("built-in compaction asked");
                Ok(Some(Compaction {
                    summary: format!("summary ({:?})", request.trigger),
                    first_kept_entry: 2,
                    tokens_before: 10,
                    tokens_after: 3,
                    details: None,
                }))
            });
        let mut engine = Recorder::default();
        test_host.run(|| {
            assert_eq!(
                *host::context_entries(),
                history.iter().map(entry).collect::<Vec<_>>()
            );
            assert_eq!(
                host::tool_call_ids(&[2, 0]).unwrap(),
                [Some("call-2".to_string()), None]
            );
            assert!(host::tool_call_ids(&[9]).is_err());
            let read = host::read_entries(&[2, 0]).unwrap();
            assert_eq!(read[0].text, "fn main() {}");
            assert_eq!(read[1].role, Role::User);
            assert!(matches!(
                host::read_entries(&[9]),
                Err(HostError::InvalidArgument(_))
            ));
            engine
                .ingest(&session(), history[2].clone(), false)
                .unwrap();
            let result = engine.compact(compact_request()).unwrap();
            assert_eq!(
                result.compaction.unwrap().summary,
                "summary (CompactionTrigger::Manual)"
            );
            assert!(matches!(
                host::complete(&CompletionRequest {
                    system: None,
                    prompt: "hi".into(),
                    max_tokens: None,
                }),
                Err(HostError::PermissionDenied(_))
            ));
        });
        assert_eq!(engine.ingested, [2]);
        assert_eq!(
            test_host.calls(),
            [
                "context-entries",
                "tool-call-ids",
                "tool-call-ids",
                "read-entries",
                "read-entries",
                "delegate-compaction",
                "log",
                "log",
                "complete"
            ]
        );
        let logs = test_host.logs();
        assert_eq!(
            logs[0],
            (LogLevel::Debug, "built-in compaction asked".into())
        );
        assert_eq!(logs[1], (LogLevel::Info, "compacted: true".into()));
        let parsed: serde_json::Value = serde_json::from_str(&history[2].json).unwrap();
        assert_eq!(parsed["role"], "toolResult");
    }

    #[test]
    fn without_a_test_host_an_import_panics_naming_the_fix() {
        let panic = std::panic::catch_unwind(host::config_json).unwrap_err();
        let text = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(
            text.contains("`config`") && text.contains("TestHost"),
            "{text}"
        );
        // `run` restores the previous host even when the test inside it panics.
        let outer = TestHost::new().config(serde_json::json!({"a": 1}));
        outer.run(|| {
            let inner = TestHost::new();
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                inner.run(|| panic!("inside"))
            }));
            assert_eq!(host::config()["a"], 1);
        });
    }
}
