//! ctxhost's own terms for what crosses the engine boundary. Sessions, the CLI, `serve` and
//! embedders use these; each contract version's module (`v0_1`, `v0_2`, ...) converts its
//! generated bindings to and from them, so a new WIT version never ripples past the runtime.
//!
//! They follow the newest contract: a field an older version lacks is `None` / empty when it
//! comes from that version's guest, and is dropped on the way to it.

use std::fmt;

/// The position of an entry in its session's transcript (0-based, header excluded).
pub type EntryRef = u32;

/// The session a call is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SessionIdentity {
    /// The transcript's session id.
    pub id: String,
    /// The operator-facing key the session is stored under.
    pub key: String,
}

/// Message roles are the transcript's own: one enum from the file to the guest.
pub use ctxhost_transcript::Role;

/// A tool call an assistant message makes (the transcript's own type, as decoded from the
/// file: `id`, `name`, `arguments` as a JSON object's text).
pub use ctxhost_transcript::ToolCall;

/// Token usage an assistant message recorded, as the provider reported it (the transcript's
/// own type: the host hands engines what it read).
pub use ctxhost_transcript::Usage;

/// A message as handed to an engine: the decoded parts plus the AgentMessage verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Where the message is in the transcript.
    pub entry: EntryRef,
    /// The transcript entry id (8 hex digits in v2/v3 files; made up for v1).
    pub entry_id: String,
    /// Who said it.
    pub role: Role,
    /// Unix milliseconds, 0 when the message carries none.
    pub timestamp: u64,
    /// All text content joined by newlines (thinking and images left out).
    pub text: String,
    /// For assistant messages: the tool calls it makes, in order.
    pub tool_calls: Vec<ToolCall>,
    /// For tool results: the tool that produced it.
    pub tool_name: Option<String>,
    /// For tool results: the id of the call it answers (0.2 on).
    pub tool_call_id: Option<String>,
    /// For tool results: whether the tool reported an error.
    pub is_error: bool,
    /// For assistant messages: why generation stopped (`stop`, `toolUse`, `error`, ...).
    pub stop_reason: Option<String>,
    /// For assistant messages: the usage the provider reported.
    pub usage: Option<Usage>,
    /// The host's token estimate of the message.
    pub tokens: u32,
    /// The AgentMessage as a JSON object, byte for byte as in the transcript.
    pub json: String,
}

/// The current context: what `assemble` plans over, and what `context-entries` returns.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Context {
    /// Its entries, oldest first (after a compaction, the compaction summary first).
    pub entries: Vec<ContextEntry>,
    /// The names of the tools its tool results name; [`ContextEntry::tool`] points here.
    pub tool_names: Vec<String>,
}

impl Context {
    /// The tool an entry names (0.2 on): its `toolName` for tool results, else None.
    pub fn tool_name(&self, entry: &ContextEntry) -> Option<&str> {
        let index = entry.tool.checked_sub(1)?;
        self.tool_names.get(index as usize).map(String::as_str)
    }
}

/// One entry of the current context. Plain numbers only, so a context is copied, not
/// rebuilt, between calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextEntry {
    /// The entry's index in the session's transcript.
    pub entry: EntryRef,
    /// Who wrote it, as the model sees it.
    pub role: Role,
    /// The estimate the model will be charged (the placeholder's, when pruned).
    pub tokens: u32,
    /// For tool results: 1 + the index of the tool's name in [`Context::tool_names`]; 0 for
    /// other entries and tool results without a name (0.2 on).
    pub tool: u32,
    /// For tool results: whether the tool reported an error (0.2 on).
    pub is_error: bool,
    /// Whether a compaction already replaced this tool output by a placeholder (0.2 on).
    pub pruned: bool,
}

/// What `assemble` plans over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleRequest {
    /// The session the context is for.
    pub session: SessionIdentity,
    /// Tokens the assembled messages may use, when the runtime set a budget.
    pub token_budget: Option<u32>,
    /// The model's context window, in tokens.
    pub context_window: u32,
    /// The host's count of the current context: the last valid assistant usage plus the estimate of
    /// what follows it.
    pub context_tokens: u32,
    /// Names of the tools the model may call on this turn.
    pub available_tools: Vec<String>,
    /// The current context the plan keeps entries of (shared with the session, which keeps it
    /// between calls).
    pub context: std::sync::Arc<Context>,
    /// Names the history of `context`: it stays the same while the context only grows by rows
    /// appended at its end, and changes whenever anything else changed it (a compaction). An
    /// engine of contract 0.4 that holds the context of this revision is sent only the rows
    /// appended since; 0 means unknown, and the context is always sent whole.
    pub context_revision: u64,
    /// The model the next call goes to, when the runtime named it (0.2 on).
    pub model: Option<String>,
    /// The prompt about to be sent, not yet in the transcript, when the runtime has it (0.2 on).
    pub prompt: Option<String>,
}

/// One element of a plan, as the runtime read it from the engine's `assemble` answer, whatever
/// its contract version: the engine's keeps and keep-ranges become runs of positions in the
/// request's context, checked (each inside the context, none running backwards, no entry kept
/// twice across the plan) and never expanded into one item per entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextItem {
    /// Insert a message the engine made (an AgentMessage JSON object).
    Insert(String),
    /// Keep the entries at positions `first..=last` of the request's context, in order.
    KeepPositions {
        /// The position in the context of the first entry kept.
        first: u32,
        /// The position of the last entry kept.
        last: u32,
    },
}

/// The context for the next model call, as the engine planned it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleResult {
    /// The plan, in order; runs that follow each other are one.
    pub items: Vec<ContextItem>,
    /// The engine's estimate of the tokens `items` amount to; passed back as
    /// [`CompactRequest::assembled_tokens`].
    pub estimated_tokens: u32,
    /// Text the runtime adds to the system prompt for this call.
    pub system_prompt_addition: Option<String>,
}

/// Why a compaction runs: the trigger its record carries (`manual`, `auto`, `overflow`, lower
/// case in JSON).
pub use ctxhost_transcript::compaction::Trigger as CompactionTrigger;

/// What `compact` (and `delegate-compaction`) is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactRequest {
    /// The session to compact.
    pub session: SessionIdentity,
    /// The transcript's path on the host, for messages (the engine cannot open it).
    pub session_file: String,
    /// Compact even when the context is below the threshold.
    pub force: bool,
    /// Tokens the compacted context should fit, when the runtime set a budget.
    pub token_budget: Option<u32>,
    /// The host's count of the context (the fuller of recorded usage and estimates).
    pub current_tokens: Option<u32>,
    /// What the summary should focus on, from the operator or the agent.
    pub custom_instructions: Option<String>,
    /// Why the compaction runs.
    pub trigger: CompactionTrigger,
    /// The model's context window; `None` when a 0.1 guest built the request.
    pub context_window: Option<u32>,
    /// What the engine's last `assemble` said it sends; the built-in compaction picks its layer
    /// from this when present, since it is what the model actually receives (0.2 on).
    pub assembled_tokens: Option<u32>,
}

/// What a compaction produced; the host validates it, then writes the `compaction` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    /// The summary of everything before `first_kept_entry`.
    pub summary: String,
    /// The first entry kept verbatim after the summary; it must be in the current context.
    pub first_kept_entry: EntryRef,
    /// The context's tokens before the compaction.
    pub tokens_before: u32,
    /// The context's tokens after it (summary plus kept entries).
    pub tokens_after: u32,
    /// Extra structured details as a JSON object.
    pub details: Option<String>,
}

/// What `compact` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactResult {
    /// False when the engine failed to compact (the host reports `reason`).
    pub ok: bool,
    /// True when `compaction` should be written.
    pub compacted: bool,
    /// Why the engine did not compact, or failed.
    pub reason: Option<String>,
    /// Set when `compacted` is true.
    pub compaction: Option<Compaction>,
}

/// The first call of an instance. Entries written before it are not fed through `ingest`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRequest {
    /// The session the instance serves.
    pub session: SessionIdentity,
    /// The transcript's path on the host, for messages (the engine cannot open it).
    pub session_file: String,
    /// Entries in the transcript when the instance starts.
    pub entry_count: u32,
}

/// What `bootstrap` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapResult {
    /// Whether the engine did its start-up work.
    pub bootstrapped: bool,
    /// How many existing messages it took in, when it read any.
    pub imported_messages: Option<u32>,
    /// Why it did not bootstrap.
    pub reason: Option<String>,
}

/// What `ingest` did with one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestResult {
    /// Whether the engine kept the message (false: it chose to skip it).
    pub ingested: bool,
}

/// A turn of the session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterTurnRequest {
    /// The session whose turn ended.
    pub session: SessionIdentity,
    /// The transcript's path on the host, for messages (the engine cannot open it).
    pub session_file: String,
    /// Messages in the context before this turn's prompt was added.
    pub pre_prompt_message_count: u32,
    /// Messages in the context now.
    pub message_count: u32,
    /// The summary of a compaction the runtime ran during the turn.
    pub auto_compaction_summary: Option<String>,
    /// Whether the turn was a heartbeat rather than a user turn.
    pub is_heartbeat: bool,
    /// The turn's token budget, when the runtime set one.
    pub token_budget: Option<u32>,
}

/// How a subagent's context starts (`isolated` / `fork` in JSON, as `serve` takes it).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum ContextMode {
    /// Empty: the subagent sees only its task.
    #[default]
    Isolated,
    /// A copy of the parent's context.
    Fork,
}

/// A subagent about to be spawned from a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentSpawn {
    /// The session spawning it.
    pub parent_session_key: String,
    /// The subagent's own session.
    pub child_session_key: String,
    /// How the child's context starts.
    pub context_mode: ContextMode,
    /// How long the child may live, in milliseconds; None: no limit.
    pub ttl_ms: Option<u64>,
}

/// Why a subagent's session ended (lower case in JSON, as `serve` takes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum SubagentEndReason {
    /// `deleted`: its session was deleted.
    Deleted,
    /// `completed`: it finished.
    Completed,
    /// `swept`: a cleanup sweep removed it (e.g. its time to live passed).
    Swept,
    /// `released`: its parent let it go.
    Released,
}

/// Who an engine is, as `info` answers (and `serve`'s `initialize`, in camelCase).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EngineInfo {
    /// The engine's id, what operators select it by.
    pub id: String,
    /// A human-readable name.
    pub name: String,
    /// The engine's own version.
    pub version: String,
    /// True when the engine compacts by itself.
    pub owns_compaction: bool,
}

/// Errors the host returns to a guest's import call: values, never traps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    /// The engine was not granted the capability the import needs.
    PermissionDenied(String),
    /// An argument was wrong (e.g. an unknown entry reference).
    InvalidArgument(String),
    /// The service behind the import is not configured or not reachable.
    Unavailable(String),
    /// The service ran and failed.
    Failed(String),
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PermissionDenied(m) => write!(f, "permission denied: {m}"),
            Self::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Self::Unavailable(m) => write!(f, "unavailable: {m}"),
            Self::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl std::error::Error for HostError {}

/// How much a guest's log line matters, lowest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    /// The finest detail.
    Trace,
    /// Detail for debugging an engine.
    Debug,
    /// Normal operation.
    Info,
    /// Something unexpected the engine recovered from.
    Warn,
    /// A failure.
    Error,
}

/// One completion through the operator's configured model (the `complete` import).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The user prompt.
    pub prompt: String,
    /// An upper bound on the answer's length, in tokens; None: the model config's `maxTokens`.
    pub max_tokens: Option<u32>,
}

/// An agent tool an engine offers (contract 0.3 on), as it declared it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments, as JSON text.
    pub parameters: String,
}

/// What an engine's tool answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineToolOutput {
    /// The text the model receives.
    pub content: String,
    /// A failure the model should read.
    pub is_error: bool,
}

/// A search an engine asks of the session's recall index (the `recall` import, 0.3 on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchRequest {
    /// Words to find.
    pub query: String,
    /// Only entries of this role (v3 spelling).
    pub role: Option<String>,
    /// Only tool results of this tool.
    pub tool: Option<String>,
    /// Only failed (true) or successful (false) tool results.
    pub is_error: Option<bool>,
    /// Hits to return (0: the default).
    pub limit: u32,
}

/// One entry a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchHit {
    /// Where the entry is in the transcript.
    pub entry: EntryRef,
    /// Its id in the file.
    pub entry_id: String,
    /// Its role (v3 spelling).
    pub role: String,
    /// Unix milliseconds, 0 when it has none.
    pub timestamp: u64,
    /// The text around the first match.
    pub snippet: String,
}
