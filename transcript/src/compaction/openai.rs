//! The `openai-compatible` summarizer: `POST {baseUrl}/chat/completions`, as OpenRouter,
//! Ollama, vLLM and llama.cpp's server all accept. Blocking (ureq); plain HTTP for local
//! servers, TLS (rustls, bundled web roots) for remote ones. The API key is read from the
//! environment variable the config names and is only ever put in the `Authorization` header:
//! it never appears in config, logs or errors.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::extractive;
use super::summarizer::{SummarizeError, Summarizer, SummaryRequest};
use crate::message::MessageView;

/// `agents.defaults.compaction.model` when `provider` is `openai-compatible`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// e.g. `http://127.0.0.1:11434/v1` or `https://openrouter.ai/api/v1`.
    pub base_url: String,
    pub model_name: String,
    /// The NAME of the environment variable holding the key (None: no key, e.g. Ollama).
    pub api_key_env: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: u32,
    pub timeout: Duration,
    /// Retries after the first attempt, on 429 / 5xx / timeouts / connection errors.
    pub retries: u32,
    /// Backoff before retry n is `min(backoff_min * 2^(n-1), backoff_max)`.
    pub backoff_min: Duration,
    pub backoff_max: Duration,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            base_url: "http://127.0.0.1:11434/v1".into(),
            model_name: String::new(),
            api_key_env: None,
            temperature: Some(0.2),
            max_tokens: 2048,
            timeout: Duration::from_secs(120),
            retries: 3,
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_millis(5000),
        }
    }
}

/// A configured client.
pub struct OpenAiCompatible {
    config: OpenAiConfig,
    key: Option<String>,
    agent: ureq::Agent,
    url: String,
}

impl fmt::Debug for OpenAiCompatible {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatible")
            .field("url", &self.url)
            .field("model", &self.config.model_name)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

const SYSTEM: &str = "You summarize the earlier part of a conversation between a user and a coding agent so the agent can continue without it. Write a structured markdown summary with these sections, in this order: Current task (the user's latest substantive request, quoted), Started with (the first request), Standing instructions (rules the user gave that still hold: don't/never/always/use X not Y; drop one only when the user replaced it), User requests (every request, oldest first, one line each; leave out acknowledgements like ok/yes/continue), Progress (what is done and what is next), Tool failures (the command or path, and the line naming the error), Files modified, Files read, Recent exchanges. Merge the previous summary in without losing any of its requests or instructions. Keep exact file paths, identifiers, commands and error messages. Be concise.";

const MERGE: &str = "Merge these partial summaries of consecutive parts of one conversation into a single summary with the same sections. The current task is the last part's; keep every user request, standing instruction, failure and file; drop only repetition.";

/// Heading of the facts the host appends to a model's summary.
const FACTS: &str = "## Facts extracted by the host";

/// The model's summary with the mechanical facts appended (a model may drop or garble paths
/// and errors; these are copied from the messages).
fn with_facts(model: String, facts: String) -> String {
    // A previous summary's appended facts are re-extracted, not repeated.
    let prose = match model.find(FACTS) {
        Some(i) => model[..i].trim_end().to_string(),
        None => model,
    };
    if facts.is_empty() {
        return prose;
    }
    format!("{prose}\n\n{FACTS}\n\n{facts}")
}

fn excerpt(text: &str) -> String {
    let flat: String = text.chars().take(200).collect();
    flat.replace(['\n', '\r'], " ")
}

/// The conversation as plain text for the prompt.
fn transcript_text(messages: &[MessageView]) -> String {
    let mut out = String::new();
    for m in messages {
        out.push_str(&format!("[{}", m.role.as_str()));
        if let Some(t) = &m.tool_name {
            out.push_str(&format!(" {t}"));
        }
        if m.is_error {
            out.push_str(" error");
        }
        out.push_str("]\n");
        out.push_str(&m.text);
        for c in &m.tool_calls {
            out.push_str(&format!("\n(tool call {} {})", c.name, c.arguments));
        }
        out.push_str("\n\n");
    }
    out
}

impl OpenAiCompatible {
    /// Reads the key from `api_key_env` (when set).
    pub fn from_env(config: &OpenAiConfig) -> Result<OpenAiCompatible, SummarizeError> {
        let key = match &config.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Some(v),
                _ => {
                    return Err(SummarizeError::Config(format!(
                        "the summarizer's API key variable {var} is not set"
                    )));
                }
            },
        };
        Ok(OpenAiCompatible::with_key(config, key))
    }

    /// A client with an explicit key (tests, embedding).
    pub fn with_key(config: &OpenAiConfig, key: Option<String>) -> OpenAiCompatible {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(config.timeout))
            .http_status_as_error(false)
            .build()
            .into();
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        OpenAiCompatible {
            config: config.clone(),
            key,
            agent,
            url,
        }
    }

    fn backoff(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.saturating_sub(1).min(16);
        (self.config.backoff_min * factor).min(self.config.backoff_max)
    }

    /// One chat completion with retries; returns the assistant's text.
    pub fn chat(
        &self,
        system: Option<&str>,
        user: &str,
        max_tokens: Option<u32>,
    ) -> Result<String, SummarizeError> {
        let mut messages = Vec::new();
        if let Some(s) = system {
            messages.push(json!({"role": "system", "content": s}));
        }
        messages.push(json!({"role": "user", "content": user}));
        let mut body = json!({
            "model": self.config.model_name,
            "messages": messages,
            "max_tokens": max_tokens.unwrap_or(self.config.max_tokens),
            "stream": false,
        });
        if let Some(t) = self.config.temperature {
            body["temperature"] = json!(t);
        }
        let body = body.to_string();
        let mut attempt = 0;
        loop {
            match self.attempt(&body) {
                Err(e) if e.is_retryable() && attempt < self.config.retries => {
                    attempt += 1;
                    std::thread::sleep(self.backoff(attempt));
                }
                other => return other,
            }
        }
    }

    fn attempt(&self, body: &str) -> Result<String, SummarizeError> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let url = self.url.clone();
        let transport = |e: ureq::Error| match e {
            ureq::Error::Timeout(_) => SummarizeError::Timeout {
                url: url.clone(),
                ms: self.config.timeout.as_millis() as u64,
            },
            other => SummarizeError::Transport {
                url: url.clone(),
                problem: other.to_string(),
            },
        };
        let mut response = request.send(body).map_err(transport)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_string()
            .map_err(transport)?;
        if !(200..300).contains(&status) {
            return Err(SummarizeError::Status {
                status,
                url,
                excerpt: excerpt(&text),
            });
        }
        let malformed = |problem: String| SummarizeError::Malformed {
            url: url.clone(),
            problem,
        };
        let value: Value =
            serde_json::from_str(&text).map_err(|e| malformed(format!("not JSON: {e}")))?;
        let content = value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("no choices[0].message.content".into()))?;
        if content.trim().is_empty() {
            return Err(malformed("the summary is empty".into()));
        }
        Ok(content.trim().to_string())
    }
}

impl Summarizer for OpenAiCompatible {
    fn name(&self) -> String {
        format!("openai-compatible:{}", self.config.model_name)
    }

    fn summarize(&self, r: &SummaryRequest<'_>) -> Result<String, SummarizeError> {
        let mut prompt = String::new();
        if let Some(prev) = r.previous_summary {
            prompt.push_str("Summary of the conversation before this part (merge it in):\n");
            prompt.push_str(prev);
            prompt.push_str("\n\n");
        }
        if let Some(f) = r.focus {
            prompt.push_str(&format!("Focus on: {f}\n\n"));
        }
        if let Some(current) = r.current_request {
            prompt.push_str(&format!(
                "The user's latest request (kept verbatim after this part): {current}\n\n"
            ));
        }
        prompt.push_str("Conversation:\n\n");
        prompt.push_str(&transcript_text(r.messages));
        let model = self.chat(Some(SYSTEM), &prompt, None)?;
        let facts = extractive::mechanical(r.messages, r.previous_summary, r.current_request);
        Ok(with_facts(model, facts))
    }

    fn merge(&self, parts: &[String], focus: Option<&str>) -> Result<String, SummarizeError> {
        let mut prompt = String::new();
        if let Some(f) = focus {
            prompt.push_str(&format!("Focus on: {f}\n\n"));
        }
        for (i, p) in parts.iter().enumerate() {
            prompt.push_str(&format!("## Part {}\n{p}\n\n", i + 1));
        }
        let model = self.chat(Some(MERGE), &prompt, None)?;
        Ok(with_facts(model, extractive::mechanical_merge(parts)))
    }

    fn complete(
        &self,
        system: Option<&str>,
        prompt: &str,
        max_tokens: Option<u32>,
    ) -> Result<String, SummarizeError> {
        self.chat(system, prompt, max_tokens)
    }
}

#[cfg(test)]
mod tests;
