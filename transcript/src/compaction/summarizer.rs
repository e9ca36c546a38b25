//! Summarizers: what turns the older part of a context into text. `extractive` needs no model
//! (the embedded default); a host may implement [`Summarizer`] on a model of its own.

use crate::message::MessageView;

use super::extractive;

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

/// Why a summarizer produced nothing: the cause kept whole (a model client's error, say).
/// Messages never contain credentials.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct SummarizeError(Box<dyn std::error::Error + Send + Sync>);

impl SummarizeError {
    pub fn new(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(cause.into())
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
