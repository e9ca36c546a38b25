//! The protocol's params and results, one type each: what requests are decoded into, what
//! answers are serialized from, and what `docs/serve-protocol.schema.json` is generated from
//! (their doc comments are its descriptions).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checks::{AgentMessage, Base, ProtocolVersion, SessionId, SessionKey};
use crate::health::SessionHealth;
use crate::sync::{Commit, SyncState};
use ctxhost::runtime::contract::{CompactionTrigger, ContextMode, EngineInfo, SubagentEndReason};
use ctxhost::session::AgentTool;

/// A result with nothing to say: `{}`.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Done {}

// ---- initialize ----

/// The handshake: which protocol the client speaks and who it is.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct InitializeParams {
    /// The protocol version the client speaks; another than this server's is refused.
    pub(super) protocol_version: Option<ProtocolVersion>,
    /// The client, for the server's log.
    pub(super) client: Option<ClientInfo>,
}

/// A client, named for the server's log.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ClientInfo {
    pub(super) name: String,
    pub(super) version: Option<String>,
}

/// The server, the engine serving and the limits it runs under.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeResult {
    pub(super) protocol_version: ProtocolVersion,
    pub(super) host: HostInfo,
    pub(super) engine: EngineSummary,
    /// The configured `agents.defaults.contextWindow`, in tokens.
    pub(super) context_window: u64,
    pub(super) limits: Limits,
}

/// This program.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct HostInfo {
    pub(super) name: &'static str,
    pub(super) version: &'static str,
}

/// The active engine.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct EngineSummary {
    #[serde(flatten)]
    pub(super) info: EngineInfo,
    /// The contract version the engine was built against.
    pub(super) contract: String,
}

/// The engine's limits and the server's line cap.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Limits {
    pub(super) memory_bytes: usize,
    pub(super) call_timeout_ms: u64,
    pub(super) host_bytes_per_call: usize,
    /// The longest request line taken (`--max-line-bytes`).
    pub(super) max_line_bytes: usize,
}

// ---- shutdown, health ----

/// `shutdown` takes nothing; a member sent to it is a client's mistake worth hearing about.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ShutdownParams {}

/// `health`: the whole server, and one session when `sessionKey` names it.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct HealthParams {
    /// A session whose health to answer too (any string: it is only looked up).
    pub(super) session_key: Option<String>,
}

/// The server's health, answered from memory (no file is read).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct HealthResult {
    /// `degraded` while an engine is quarantined, its circuit is open, or a session's last turn
    /// was not served by the configured engine.
    pub(super) status: HealthStatus,
    pub(super) engine: EngineHealth,
    pub(super) quarantined: Vec<Quarantined>,
    pub(super) sessions: SessionCounts,
    pub(super) degraded_sessions: Vec<DegradedSession>,
    /// The session `sessionKey` named, when it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) session: Option<SessionReport>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum HealthStatus {
    Ok,
    Degraded,
}

/// The engine the config selects, and the one serving.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct EngineHealth {
    /// The engine `plugins.slots.contextEngine` selects.
    pub(super) configured: String,
    /// Its contract version, when it is loaded.
    pub(super) contract: Option<String>,
    /// Why its circuit breaker refuses it, when it does.
    pub(super) circuit_open: Option<String>,
}

/// An engine refused until restart, and why.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct Quarantined {
    pub(super) engine: String,
    pub(super) cause: String,
}

/// Sessions and their turns, over the server's life.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionCounts {
    /// Sessions open now.
    pub(super) open: usize,
    /// Sessions a turn of which was recorded.
    pub(super) recorded: usize,
    pub(super) turns: u64,
    pub(super) degraded_turns: u64,
    /// Engine instances idle sessions gave back.
    pub(super) idle_releases: u64,
    /// Sessions holding an engine instance (and their files) now.
    pub(super) resident: usize,
    /// The most that may: the instance pool or the descriptor limit, whichever is lower.
    pub(super) resident_limit: usize,
    /// Idle sessions that gave their instance up to make room for another.
    pub(super) evictions: u64,
}

/// A session whose last turn was degraded.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DegradedSession {
    pub(super) session_key: String,
    pub(super) health: SessionHealth,
}

/// One session's health; `known: false` for a session no turn of which this server recorded.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionReport {
    pub(super) session_key: String,
    pub(super) known: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) health: Option<SessionHealth>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) message: Option<String>,
}

impl SessionReport {
    /// The report on session `key`, which has `health` when a turn of it was recorded.
    pub(super) fn of(key: &str, health: Option<SessionHealth>) -> Self {
        let message = health.is_none().then(|| {
            format!(
                "no turn of session `{}` was recorded by this server",
                ctxhost::error::excerpt(key, ctxhost::error::QUOTE_BYTES)
            )
        });
        Self {
            session_key: key.to_string(),
            known: health.is_some(),
            health,
            message,
        }
    }
}

// ---- session methods ----

/// Opens the session (creating its mirror).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct BootstrapParams {
    pub(super) session_key: SessionKey,
    pub(super) session_id: Option<SessionId>,
}

/// The open session and where its mirror stands.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct BootstrapResult {
    pub(super) session_key: String,
    /// The mirror's header id (the runtime's `sessionId` when it created the mirror).
    pub(super) session_id: String,
    /// Whether this call created the mirror.
    pub(super) created: bool,
    /// Whether the mirror lives in a scratch directory removed on close.
    pub(super) ephemeral: bool,
    #[serde(flatten)]
    pub(super) state: SyncState,
    /// The mirror transcript's path.
    pub(super) mirror: String,
}

/// The tools the session offers.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ToolsParams {
    pub(super) session_key: SessionKey,
}

/// Closes the session, disposing its engine instance.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CloseParams {
    pub(super) session_key: SessionKey,
}

/// Whether `session.close` closed an open session.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct CloseResult {
    pub(super) closed: bool,
}

/// A turn's messages, appended with a marker in one write; idempotent by `advancementKey`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CommitTurnParams {
    pub(super) session_key: SessionKey,
    /// The turn's idempotency key: a key already in the mirror answers `duplicate`.
    pub(super) advancement_key: String,
    pub(super) messages: Vec<AgentMessage>,
    /// The client's fingerprint of the last message (opaque to the server).
    pub(super) last_fingerprint: Option<String>,
    /// The client's fingerprint of each message, in order: the server chains them.
    pub(super) fingerprints: Option<Vec<String>>,
    pub(super) base: Option<Base>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CommitTurnResult {
    pub(super) status: Commit,
    pub(super) message_count: usize,
}

/// Brings the mirror to the client's history: its tail from `from`, or with `reset` the whole
/// history as a new mirror.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct SyncParams {
    pub(super) session_key: SessionKey,
    /// The position of the first message sent (the mirror's `messageCount` for a tail).
    pub(super) from: usize,
    pub(super) messages: Vec<AgentMessage>,
    /// The client's fingerprint of the last message (opaque to the server).
    pub(super) last_fingerprint: Option<String>,
    /// The client's fingerprint of each message, in order: the server chains them.
    pub(super) fingerprints: Option<Vec<String>>,
    /// Replace the mirror by `messages` (the old file is kept whole).
    #[serde(default)]
    pub(super) reset: bool,
    pub(super) base: Option<Base>,
}

/// The context for the next model call, when the client's history is the mirror's.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AssembleParams {
    pub(super) session_key: SessionKey,
    /// Messages in the client's history.
    pub(super) message_count: usize,
    /// The client's fingerprint of its last message (opaque to the server).
    pub(super) last_fingerprint: Option<String>,
    /// The chain of the fingerprints of all its messages: with it, a history rewritten in the
    /// middle is not the mirror's.
    pub(super) chain: Option<String>,
    /// The window for this call: the smaller of this and the configured one.
    pub(super) token_budget: Option<u32>,
    /// Names of the tools the model may call on this turn.
    #[serde(default)]
    pub(super) available_tools: Vec<String>,
    /// The prompt about to be sent: a string, or a message whose text is used.
    pub(super) prompt: Option<Value>,
    /// The model the call goes to: its id, or an object with `id` (or `modelId`) and `provider`.
    pub(super) model: Option<Value>,
}

/// `ok` with the assembled context, or `mismatch` with the mirror's state (sync, then ask again).
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "status", rename_all = "lowercase")]
pub(super) enum AssembleResult {
    Ok(Assembled),
    Mismatch(SyncState),
}

/// The context of the next model call.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct Assembled {
    pub(super) items: Vec<ClientItem>,
    /// The engine's estimate of the items (the pending prompt not included).
    pub(super) estimated_tokens: u32,
    /// Text to add to the system prompt for this call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) system_prompt_addition: Option<String>,
    /// The automatic compaction that ran first, when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) compaction: Option<CompactResult>,
}

/// One item of an assembled context, in the client's terms.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(untagged)]
pub(crate) enum ClientItem {
    /// The client's own message at position `index`, sent as the client has it.
    Index { index: usize },
    /// The client's own messages at positions `from` to `to`, both included.
    Range { from: usize, to: usize },
    /// A message the engine or the compaction inserted, or (with `replaces`) position
    /// `replaces` as the engine wants it shown.
    Message {
        #[schemars(with = "AgentMessage")]
        message: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        replaces: Option<usize>,
    },
}

impl ClientItem {
    /// A message that replaces no position.
    pub(crate) fn message(message: Value) -> Self {
        Self::Message {
            message,
            replaces: None,
        }
    }
}

/// A prompt as the engine gets it: the string, or the text of a message's content.
pub(super) fn prompt_text(prompt: Option<Value>) -> Option<String> {
    match prompt? {
        Value::String(text) => Some(text),
        Value::Object(message) => content_text(message.get("content")?),
        _ => None,
    }
}

/// The text of an AgentMessage's `content`: the string, or its text blocks one per line; None
/// for any other shape.
pub(crate) fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(text) => Some(text.clone()),
        Value::Array(blocks) => Some(
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        _ => None,
    }
}

/// A model as the engine gets it: `provider/id` when both are known, else what there is.
pub(super) fn model_id(model: Option<Value>) -> Option<String> {
    match model? {
        Value::String(id) => Some(id),
        Value::Object(model) => {
            let field = |name: &str| model.get(name).and_then(Value::as_str);
            match (field("provider"), field("id").or_else(|| field("modelId"))) {
                (Some(provider), Some(id)) => Some(format!("{provider}/{id}")),
                (None, Some(id)) => Some(id.to_string()),
                _ => None,
            }
        }
        _ => None,
    }
}

/// A compaction of the session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CompactParams {
    pub(super) session_key: SessionKey,
    /// Compact even when the context is below every threshold.
    #[serde(default)]
    pub(super) force: bool,
    pub(super) token_budget: Option<u32>,
    /// What the summary should focus on.
    pub(super) custom_instructions: Option<String>,
    /// Why it runs, as compaction records name it; `manual` when absent.
    pub(super) trigger: Option<CompactionTrigger>,
}

/// What a compaction did.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactResult {
    /// Always true: a compaction that failed is an error.
    #[schemars(extend("const" = true))]
    pub(super) ok: bool,
    pub(super) compacted: bool,
    /// Why nothing was compacted, when the engine says.
    pub(super) reason: Option<String>,
    pub(super) tokens_before: u64,
    pub(super) tokens_after: u64,
    /// The client position of the first message kept after the summary.
    pub(super) first_kept_index: Option<usize>,
}

/// Tells the engine a turn ended.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct AfterTurnParams {
    pub(super) session_key: SessionKey,
    /// Context messages before this turn's prompt was appended.
    #[serde(default)]
    pub(super) pre_prompt_message_count: u32,
    /// The summary of a compaction the runtime ran during the turn.
    pub(super) auto_compaction_summary: Option<String>,
    /// The turn was a heartbeat, not the user's.
    #[serde(default)]
    pub(super) is_heartbeat: bool,
    pub(super) token_budget: Option<u32>,
}

/// A subagent about to be spawned from the session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct PrepareSpawnParams {
    pub(super) session_key: SessionKey,
    pub(super) child_session_key: String,
    #[serde(default)]
    pub(super) context_mode: ContextMode,
    /// How long the child may live, in milliseconds.
    pub(super) ttl_ms: Option<u64>,
}

#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct PrepareSpawnResult {
    /// What `subagent.rollback` takes to undo the spawn; null when there is nothing to undo.
    pub(super) rollback_handle: Option<u64>,
}

/// Undoes a `subagent.prepareSpawn`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct RollbackParams {
    pub(super) session_key: SessionKey,
    pub(super) rollback_handle: u64,
}

/// A subagent's session ended; without `sessionKey` the parent is the session whose
/// `prepareSpawn` named the child.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct EndedParams {
    pub(super) session_key: Option<SessionKey>,
    pub(super) child_session_key: String,
    pub(super) reason: SubagentEndReason,
}

/// The tools the session offers the model: the host's recall tools, then the engine's.
#[derive(Debug, Serialize, JsonSchema)]
pub(super) struct ToolsResult {
    pub(super) tools: Vec<AgentTool>,
}

/// Runs one tool the session offers.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct CallToolParams {
    pub(super) session_key: SessionKey,
    pub(super) name: String,
    /// The tool's arguments (an object; `{}` when absent).
    #[serde(default = "empty_object")]
    pub(super) arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

/// What the tool answers the model.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CallToolResult {
    /// The text the model reads.
    pub(super) content: String,
    /// The call failed in a way the model should read.
    pub(super) is_error: bool,
}

// ---- notifications ----

/// Sent by the server (no id, not answered) before an automatic compaction runs, when
/// `agents.defaults.compaction.notifyBeforeAuto` is true; the `session.assemble` that runs it
/// answers after.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct CompactionPending {
    pub(super) session_key: String,
    /// Always `auto`.
    pub(super) trigger: CompactionTrigger,
    /// The session's context now, by the count compaction decides with.
    pub(super) context_tokens: u64,
    /// The context size automatic compaction fires above.
    pub(super) threshold: u64,
    /// The window the threshold is a share of.
    pub(super) context_window: u64,
    /// A sentence for a person.
    pub(super) message: String,
}

impl CompactionPending {
    /// The notification's method.
    pub(super) const METHOD: &'static str = "session.compactionPending";
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serde_json::value::RawValue;

    use super::*;

    #[test]
    fn prompts_and_models_reach_the_engine_in_its_terms() {
        assert_eq!(
            prompt_text(Some(json!("next step"))),
            Some("next step".into())
        );
        let message = json!({ "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "image" }, { "type": "text", "text": "b" }] });
        assert_eq!(prompt_text(Some(message)), Some("a\nb".into()));
        assert_eq!(prompt_text(Some(json!(5))), None);
        assert_eq!(
            model_id(Some(json!("fake/fake-model"))),
            Some("fake/fake-model".into())
        );
        assert_eq!(
            model_id(Some(
                json!({ "provider": "fake", "id": "m1", "contextWindow": 32000 })
            )),
            Some("fake/m1".into())
        );
        assert_eq!(model_id(Some(json!({ "id": "m1" }))), Some("m1".into()));
        assert_eq!(model_id(None), None);
    }

    #[test]
    fn assemble_params_carry_the_pending_call() {
        let raw = RawValue::from_string(
            r#"{"sessionKey":"s","messageCount":3,"prompt":"go","model":"p/m"}"#.into(),
        )
        .unwrap();
        let p: AssembleParams = crate::rpc::params("session.assemble", &raw).unwrap();
        assert_eq!((p.session_key.as_str(), p.message_count), ("s", 3));
        assert_eq!(prompt_text(p.prompt).as_deref(), Some("go"));
        assert_eq!(model_id(p.model).as_deref(), Some("p/m"));
    }
}
