//! The OpenAI-compatible model client: `POST {baseUrl}/chat/completions`, as OpenAI,
//! OpenRouter, Groq, Together, Mistral, DeepSeek, Ollama, vLLM and llama.cpp's server accept. Blocking (ureq); plain HTTP for local
//! servers, TLS (rustls, bundled web roots) for remote ones. The API key is read from the
//! environment variable the config names and is only ever put in the `Authorization` header:
//! it never appears in config, logs or errors.

use std::fmt;
use std::time::Duration;

use serde_json::{Value, json};

use super::{Completion, Model, ModelError};

/// `agents.defaults.compaction.model` with an OpenAI-compatible provider, resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAiConfig {
    /// e.g. `http://127.0.0.1:11434/v1` or `https://openrouter.ai/api/v1`.
    pub base_url: String,
    /// The model to ask, as the provider names it (`modelName`).
    pub model_name: String,
    /// The NAME of the environment variable holding the key (None: no key, e.g. Ollama).
    pub api_key_env: Option<String>,
    /// Sampling temperature, 0–2; None leaves it to the server.
    pub temperature: Option<f64>,
    /// The answer's length cap in tokens when a request sets none (`maxTokens`).
    pub max_tokens: u32,
    /// How long one request may take (`timeoutMs`).
    pub timeout: Duration,
    /// Retries after the first attempt, on 429 / 5xx / timeouts / connection errors.
    pub retries: u32,
    /// Backoff before retry n is `min(backoff_min * 2^(n-1), backoff_max)`.
    pub backoff_min: Duration,
    /// The longest backoff between retries.
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

fn excerpt(text: &str) -> String {
    let flat: String = text.chars().take(200).collect();
    flat.replace(['\n', '\r'], " ")
}

impl OpenAiCompatible {
    /// Reads the key from `api_key_env` (when set).
    pub fn from_env(config: &OpenAiConfig) -> Result<OpenAiCompatible, ModelError> {
        let key = match &config.api_key_env {
            None => None,
            Some(var) => match std::env::var(var) {
                Ok(v) if !v.is_empty() => Some(v),
                _ => {
                    return Err(ModelError::MissingKey {
                        variable: var.clone(),
                    });
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
    ) -> Result<String, ModelError> {
        let body = self.request_body(system, user, max_tokens);
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

    /// The chat completion request, as JSON text.
    fn request_body(&self, system: Option<&str>, user: &str, max_tokens: Option<u32>) -> String {
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
        body.to_string()
    }

    /// One request: the response's text, or why there is none.
    fn attempt(&self, body: &str) -> Result<String, ModelError> {
        let mut request = self
            .agent
            .post(&self.url)
            .header("Content-Type", "application/json");
        if let Some(key) = &self.key {
            request = request.header("Authorization", &format!("Bearer {key}"));
        }
        let transport = |e: ureq::Error| self.transport_error(e);
        let mut response = request.send(body).map_err(transport)?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .with_config()
            .limit(16 << 20)
            .read_to_string()
            .map_err(transport)?;
        if !(200..300).contains(&status) {
            return Err(ModelError::Status {
                status,
                url: self.url.clone(),
                excerpt: excerpt(&text),
            });
        }
        self.completion(&text)
    }

    /// A request that got no response, or lost it.
    fn transport_error(&self, e: ureq::Error) -> ModelError {
        match e {
            ureq::Error::Timeout(_) => ModelError::Timeout {
                url: self.url.clone(),
                ms: self.config.timeout.as_millis() as u64,
            },
            other => ModelError::Transport {
                url: self.url.clone(),
                problem: other.to_string(),
            },
        }
    }

    /// The assistant's text in a successful response's body.
    fn completion(&self, text: &str) -> Result<String, ModelError> {
        let malformed = |problem: String| ModelError::Malformed {
            url: self.url.clone(),
            problem,
        };
        let value: Value =
            serde_json::from_str(text).map_err(|e| malformed(format!("not JSON: {e}")))?;
        let content = value
            .pointer("/choices/0/message/content")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("no choices[0].message.content".into()))?;
        if content.trim().is_empty() {
            return Err(malformed("the completion is empty".into()));
        }
        Ok(content.trim().to_string())
    }
}

impl Model for OpenAiCompatible {
    fn name(&self) -> String {
        format!("openai-compatible:{}", self.config.model_name)
    }

    fn complete(&self, request: &Completion<'_>) -> Result<String, ModelError> {
        self.chat(request.system, request.prompt, request.max_tokens)
    }
}

#[cfg(test)]
mod tests;
