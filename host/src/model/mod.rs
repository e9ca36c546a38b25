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
    pub system: Option<&'a str>,
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
    #[error("no completion model is configured: the summarizer is extractive")]
    NotConfigured,
    #[error("the model's API key variable {variable} is not set")]
    MissingKey { variable: String },
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
    #[default]
    Extractive,
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

    pub fn is_extractive(&self) -> bool {
        *self == ModelConfig::Extractive
    }
}
