//! Summarizers: what turns the older part of a context into text. `extractive` needs no model
//! (the embedded default); `openai-compatible` calls a chat-completions endpoint.

use std::fmt;

use crate::message::MessageView;

use super::extractive;
use super::openai::{OpenAiCompatible, OpenAiConfig};

/// What to summarize.
#[derive(Debug, Clone, Copy)]
pub struct SummaryRequest<'a> {
    /// Oldest first, full text (pruning never hides anything from the summarizer).
    pub messages: &'a [MessageView],
    /// The summary of the compaction this one replaces, to be merged in.
    pub previous_summary: Option<&'a str>,
    /// The operator's custom instruction (`--focus`).
    pub focus: Option<&'a str>,
    /// The user's newest request when it lies in the part kept verbatim: the task the user is
    /// on at compaction time, which the summary must name so it survives the next compaction.
    pub current_request: Option<&'a str>,
}

/// Why a summarizer produced nothing. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SummarizeError {
    #[error("{0}")]
    Config(String),
    #[error("HTTP {status} from {url}: {excerpt}")]
    Status {
        status: u16,
        url: String,
        excerpt: String,
    },
    #[error("request to {url} timed out after {ms} ms")]
    Timeout { url: String, ms: u64 },
    #[error("request to {url} failed: {problem}")]
    Transport { url: String, problem: String },
    #[error("malformed response from {url}: {problem}")]
    Malformed { url: String, problem: String },
}

impl SummarizeError {
    /// Worth another attempt: 429, 5xx, timeouts, connection trouble.
    pub fn is_retryable(&self) -> bool {
        match self {
            SummarizeError::Status { status, .. } => *status == 429 || *status >= 500,
            SummarizeError::Timeout { .. } | SummarizeError::Transport { .. } => true,
            SummarizeError::Config(_) | SummarizeError::Malformed { .. } => false,
        }
    }
}

/// A summarizer. Calls are blocking; async hosts run them on a blocking thread.
pub trait Summarizer: Send + Sync {
    /// `extractive`, `openai-compatible:<model>`, ... (recorded in the compaction details).
    fn name(&self) -> String;

    fn summarize(&self, request: &SummaryRequest<'_>) -> Result<String, SummarizeError>;

    /// One summary from partial ones, preserving decisions, TODOs, open questions and
    /// constraints.
    fn merge(&self, parts: &[String], focus: Option<&str>) -> Result<String, SummarizeError>;

    /// A plain completion (the `complete` import), for summarizers backed by a model.
    fn complete(
        &self,
        _system: Option<&str>,
        _prompt: &str,
        _max_tokens: Option<u32>,
    ) -> Result<String, SummarizeError> {
        Err(SummarizeError::Config(
            "no completion model is configured: the summarizer is extractive".into(),
        ))
    }
}

/// The embedded summarizer: deterministic, bounded, offline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Extractive;

impl Summarizer for Extractive {
    fn name(&self) -> String {
        "extractive".into()
    }

    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        Ok(extractive::summarize_at(
            r.messages,
            r.previous_summary,
            r.focus,
            r.current_request,
        ))
    }

    fn merge(&self, parts: &[String], _focus: Option<&str>) -> Result<String, SummarizeError> {
        Ok(extractive::merge(parts))
    }
}

/// `agents.defaults.compaction.model`.
#[derive(Clone, PartialEq, Default)]
pub enum SummarizerConfig {
    #[default]
    Extractive,
    OpenAiCompatible(OpenAiConfig),
}

impl fmt::Debug for SummarizerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SummarizerConfig::Extractive => f.write_str("Extractive"),
            SummarizerConfig::OpenAiCompatible(c) => {
                f.debug_tuple("OpenAiCompatible").field(c).finish()
            }
        }
    }
}

impl SummarizerConfig {
    /// The summarizer this config selects. The API key is read from the named environment
    /// variable here; a missing variable is an error naming the variable (never a value).
    pub fn build(&self) -> Result<Box<dyn Summarizer>, SummarizeError> {
        Ok(match self {
            SummarizerConfig::Extractive => Box::new(Extractive),
            SummarizerConfig::OpenAiCompatible(c) => Box::new(OpenAiCompatible::from_env(c)?),
        })
    }

    pub fn name(&self) -> String {
        match self {
            SummarizerConfig::Extractive => "extractive".into(),
            SummarizerConfig::OpenAiCompatible(c) => format!("openai-compatible:{}", c.model_name),
        }
    }
}
