//! ctxhost's own terms for what crosses the engine boundary. Sessions, the CLI, `serve` and
//! embedders use these; each contract version's module (`v0_1`, `v0_2`, ...) converts its
//! generated bindings to and from them, so a new WIT version never ripples past the runtime.
//!
//! They follow the newest contract: a field an older version lacks is `None` / empty when it
//! comes from that version's guest, and is dropped on the way to it.

use std::fmt;
use std::sync::Arc;

/// The position of an entry in its session's transcript (0-based, header excluded).
pub type EntryRef = u32;

/// The session a call is about.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Session {
    /// The transcript's session id.
    pub id: String,
    /// The operator-facing key the session is stored under.
    pub key: String,
}

/// Message roles are the transcript's own: one enum from the file to the guest.
pub use ctxhost_transcript::Role;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The call's arguments as a JSON object.
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
}

/// A message as handed to an engine: the decoded parts plus the AgentMessage verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub entry: EntryRef,
    pub entry_id: String,
    pub role: Role,
    /// Unix milliseconds, 0 when the message carries none.
    pub timestamp: u64,
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    /// For tool results: the tool that produced it.
    pub tool_name: Option<String>,
    /// For tool results: the id of the call it answers (0.2 on).
    pub tool_call_id: Option<String>,
    pub is_error: bool,
    pub stop_reason: Option<String>,
    pub usage: Option<Usage>,
    pub tokens: u32,
    pub json: String,
}

/// One entry of the current context: what `assemble` plans over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextEntry {
    pub entry: EntryRef,
    pub role: Role,
    /// The estimate the model will be charged (the placeholder's, when pruned).
    pub tokens: u32,
    /// For tool results: the tool's name (0.2 on). Shared: the host reads it once per entry.
    pub tool_name: Option<Arc<str>>,
    /// For tool results: whether the tool reported an error (0.2 on).
    pub is_error: bool,
    /// Whether a compaction already replaced this tool output by a placeholder (0.2 on).
    pub pruned: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleRequest {
    pub session: Session,
    pub token_budget: Option<u32>,
    pub context_window: u32,
    pub context_tokens: u32,
    pub available_tools: Vec<String>,
    pub entries: Vec<ContextEntry>,
    /// The model the next call goes to, when the runtime named it (0.2 on).
    pub model: Option<String>,
    /// The prompt about to be sent, not yet in the transcript, when the runtime has it (0.2 on).
    pub prompt: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContextItem {
    /// Keep this entry of the request.
    Keep(EntryRef),
    /// Insert a message the engine made (an AgentMessage JSON object).
    Insert(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssembleResult {
    pub items: Vec<ContextItem>,
    pub estimated_tokens: u32,
    pub system_prompt_addition: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompactionTrigger {
    Manual,
    Auto,
    Overflow,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactRequest {
    pub session: Session,
    pub session_file: String,
    pub force: bool,
    pub token_budget: Option<u32>,
    pub current_tokens: Option<u32>,
    pub custom_instructions: Option<String>,
    pub trigger: CompactionTrigger,
    /// The model's context window; `None` when a 0.1 guest built the request.
    pub context_window: Option<u32>,
    /// What the engine's last `assemble` said it sends; the runtime compaction picks its layer
    /// from this when present, since it is what the model actually receives (0.2 on).
    pub assembled_tokens: Option<u32>,
}

/// What a compaction produced; the host validates it, then writes the `compaction` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compaction {
    pub summary: String,
    pub first_kept_entry: EntryRef,
    pub tokens_before: u32,
    pub tokens_after: u32,
    /// Extra structured details as a JSON object.
    pub details: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactResult {
    pub ok: bool,
    pub compacted: bool,
    pub reason: Option<String>,
    pub compaction: Option<Compaction>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapRequest {
    pub session: Session,
    pub session_file: String,
    pub entry_count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BootstrapResult {
    pub bootstrapped: bool,
    pub imported_messages: Option<u32>,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IngestResult {
    pub ingested: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfterTurnRequest {
    pub session: Session,
    pub session_file: String,
    pub pre_prompt_message_count: u32,
    pub message_count: u32,
    pub auto_compaction_summary: Option<String>,
    pub is_heartbeat: bool,
    pub token_budget: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ContextMode {
    Isolated,
    Fork,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentSpawn {
    pub parent_session_key: String,
    pub child_session_key: String,
    pub context_mode: ContextMode,
    pub ttl_ms: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SubagentEndReason {
    Deleted,
    Completed,
    Swept,
    Released,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineInfo {
    pub id: String,
    pub name: String,
    pub version: String,
    /// True when the engine compacts by itself.
    pub owns_compaction: bool,
}

/// Errors the host returns to a guest's import call: values, never traps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostError {
    PermissionDenied(String),
    InvalidArgument(String),
    Unavailable(String),
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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    pub system: Option<String>,
    pub prompt: String,
    pub max_tokens: Option<u32>,
}
