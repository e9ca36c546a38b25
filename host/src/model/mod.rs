//! The operator's model: a [`Model`] answers a plain completion (the `complete` import engines
//! call), [`openai::OpenAiCompatible`] is the one client (any OpenAI-compatible
//! chat-completions endpoint), and [`ModelSummarizer`] writes compaction summaries with a
//! model. The transcript crate only knows the [`Summarizer`] trait this module implements: the
//! network stays on the host.

pub mod openai;
mod summarizer;

pub use openai::{OpenAiCompatible, OpenAiConfig};
pub use summarizer::ModelSummarizer;

use ctxhost_transcript::compaction::{Extractive, Summarizer};

/// One completion asked of a model.
#[derive(Debug, Clone, Copy)]
pub struct Completion<'a> {
    /// The system prompt, if any.
    pub system: Option<&'a str>,
    /// The user prompt.
    pub prompt: &'a str,
    /// None: the configured `maxTokens`.
    pub max_tokens: Option<u32>,
}

/// A language model. Calls are blocking; async hosts run them on a blocking thread.
pub trait Model: Send + Sync {
    /// `openai-compatible:<model>` (recorded in compaction details).
    fn name(&self) -> String;

    /// The assistant's text for one completion.
    fn complete(&self, request: &Completion<'_>) -> Result<String, ModelError>;
}

/// Why a model call produced nothing. Messages never contain credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The config names no model (`model: "extractive"`, the default).
    #[error("no completion model is configured: the summarizer is extractive")]
    NotConfigured,
    /// The environment variable that should hold the API key is not set.
    #[error("the model's API key variable {variable} is not set")]
    MissingKey {
        /// The variable's name (never its value).
        variable: String,
    },
    /// The endpoint answered with an error status.
    #[error("HTTP {status} from {url}: {excerpt}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The URL asked.
        url: String,
        /// The start of the response body, for the reason.
        excerpt: String,
    },
    /// No answer within the configured `timeoutMs`.
    #[error("request to {url} timed out after {ms} ms")]
    Timeout {
        /// The URL asked.
        url: String,
        /// The timeout, in milliseconds.
        ms: u64,
    },
    /// The request failed without an HTTP answer (e.g. DNS, a refused connection, TLS).
    #[error("request to {url} failed: {problem}")]
    Transport {
        /// The URL asked.
        url: String,
        /// What failed.
        problem: String,
    },
    /// The answer is not a chat completion with text.
    #[error("malformed response from {url}: {problem}")]
    Malformed {
        /// The URL asked.
        url: String,
        /// What is missing or wrong.
        problem: String,
    },
}

impl ModelError {
    /// Worth another attempt: 429, 5xx, timeouts, connection trouble.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Status { status, .. } => *status == 429 || *status >= 500,
            ModelError::Timeout { .. } | ModelError::Transport { .. } => true,
            ModelError::NotConfigured
            | ModelError::MissingKey { .. }
            | ModelError::Malformed { .. } => false,
        }
    }
}

/// `agents.defaults.compaction.model`, checked when the config loaded: no model (the
/// extractive summarizer) or an OpenAI-compatible endpoint.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ModelConfig {
    /// No model: compactions summarize extractively, offline, and `complete` is unavailable.
    #[default]
    Extractive,
    /// An OpenAI-compatible chat-completions endpoint.
    OpenAiCompatible(OpenAiConfig),
}

impl ModelConfig {
    /// The model client, when one is configured. The API key is read from its environment
    /// variable here; a missing variable is an error naming the variable (never a value).
    pub fn model(&self) -> Result<Box<dyn Model>, ModelError> {
        match self {
            ModelConfig::Extractive => Err(ModelError::NotConfigured),
            ModelConfig::OpenAiCompatible(config) => {
                Ok(Box::new(OpenAiCompatible::from_env(config)?))
            }
        }
    }

    /// The summarizer compactions use: extractive, or one written by the model.
    pub fn summarizer(&self) -> Result<Box<dyn Summarizer>, ModelError> {
        Ok(match self {
            ModelConfig::Extractive => Box::new(Extractive),
            ModelConfig::OpenAiCompatible(_) => Box::new(ModelSummarizer::new(self.model()?)),
        })
    }

    /// The summarizer's name as compaction details record it.
    pub fn name(&self) -> String {
        match self {
            ModelConfig::Extractive => "extractive".into(),
            ModelConfig::OpenAiCompatible(c) => format!("openai-compatible:{}", c.model_name),
        }
    }

    /// Whether no model is configured.
    pub fn is_extractive(&self) -> bool {
        *self == ModelConfig::Extractive
    }
}
