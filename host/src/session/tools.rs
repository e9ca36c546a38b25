//! Agent tools a session offers the model: the host's recall tools (`ctx_search`,
//! `ctx_expand`, unless the operator turned them off) and the engine's own (contract 0.3 on),
//! each engine tool checked before the model sees it and each call's arguments checked against
//! its schema before the engine runs. A tool's answer is bounded; an engine can neither take a
//! host tool's name nor answer for one.

use ctxhost_recall::tools::{self as recall_tools, HOST_PREFIX};
use ctxhost_recall::{ExpandRequest, Expansion, Hit, SearchQuery};
use serde_json::Value;

pub use ctxhost_recall::tools::ToolOutput;

use super::Session;
use crate::error::{Error, Result};
use ctxhost_runtime::Function;
use ctxhost_runtime::contract::EngineTool;

/// Tools an engine may offer at most; more is the engine's error.
const MAX_ENGINE_TOOLS: usize = 32;
const MAX_DESCRIPTION_CHARS: usize = 1_024;
const MAX_SCHEMA_BYTES: usize = 16 << 10;
/// Bytes of arguments a call may carry.
const MAX_ARGUMENT_BYTES: usize = 64 << 10;

/// Who answers a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum ToolSource {
    /// ctxhost's own recall tools (`ctx_search`, `ctx_expand`).
    // "host" on the wire, as it was before the variant was named for what it is.
    #[serde(rename = "host")]
    #[schemars(rename = "host")]
    Recall,
    /// The session's engine.
    Engine,
}

/// A tool as the model is offered it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct AgentTool {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
    /// Who answers it.
    pub source: ToolSource,
}

/// An engine's tool, checked, with its schema compiled once.
pub(super) struct CheckedTool {
    tool: AgentTool,
    validator: jsonschema::Validator,
}

impl Session {
    /// Whether the session offers the host's recall tools (on by default; the host sets it
    /// from `recall.tools`).
    pub fn set_recall_tools(&mut self, enabled: bool) {
        self.recall_tools = enabled;
    }

    /// The tools the session offers: the host's recall tools, then the engine's. An engine
    /// tool that breaks a rule (its name, a host name, a duplicate, its schema) is left out
    /// with a warning naming it; the rest are offered.
    pub async fn tools(&mut self) -> Result<Vec<AgentTool>> {
        let mut tools = Vec::new();
        if self.recall_tools {
            tools.extend(recall_tools::specs().into_iter().map(|s| AgentTool {
                name: s.name,
                description: s.description,
                parameters: s.parameters,
                source: ToolSource::Recall,
            }));
        }
        tools.extend(self.engine_tools().await?.iter().map(|t| t.tool.clone()));
        Ok(tools)
    }

    /// The engine's checked tools, asked of the instance once (again after it is replaced).
    async fn engine_tools(&mut self) -> Result<&[CheckedTool]> {
        if self.engine_tools.is_none() {
            let instance = self.instance().await?;
            let listed = instance.list_tools().await;
            let listed = self.settle(listed)?;
            let checked = self.check_engine_tools(listed)?;
            self.engine_tools = Some(checked);
        }
        Ok(self.engine_tools.as_deref().unwrap_or_default())
    }

    fn check_engine_tools(&self, listed: Vec<EngineTool>) -> Result<Vec<CheckedTool>> {
        if listed.len() > MAX_ENGINE_TOOLS {
            return Err(self.invalid(
                Function::ListTools,
                format!("offers {} tools; at most {MAX_ENGINE_TOOLS}", listed.len()),
            ));
        }
        let mut checked: Vec<CheckedTool> = Vec::new();
        for tool in listed {
            let name = tool.name.clone();
            let taken = checked.iter().any(|t| t.tool.name == name);
            match check_engine_tool(tool, taken) {
                Ok(tool) => checked.push(tool),
                Err(problem) => tracing::warn!(
                    engine = self.engine.id(),
                    session = self.key(),
                    "engine tool {:?} left out: {problem}",
                    shown(&name)
                ),
            }
        }
        Ok(checked)
    }

    /// Calls the tool `name` with `arguments` (a JSON object). A name the session does not
    /// offer, or arguments that do not match the tool's schema, are [`Error::ToolCall`]
    /// naming the field; nothing runs. A host tool's bad id or query is an error output the
    /// model reads; an engine tool's failure is the engine's error.
    pub async fn call_tool(&mut self, name: &str, arguments: &Value) -> Result<ToolOutput> {
        if name.starts_with(HOST_PREFIX) {
            self.call_host_tool(name, arguments)
        } else {
            self.call_engine_tool(name, arguments).await
        }
    }

    /// One of the host's recall tools, when they are on.
    fn call_host_tool(&self, name: &str, arguments: &Value) -> Result<ToolOutput> {
        if !self.recall_tools {
            let problem = "the host's recall tools are off (recall.tools)";
            return Err(refused(name, problem.into()));
        }
        let call = recall_tools::decode(name, arguments)
            .ok_or_else(|| refused(name, self.unknown_tool_problem()))?
            .map_err(|e| refused(name, e.to_string()))?;
        Ok(self
            .shared
            .with_recall(|transcript, index| recall_tools::run(&call, transcript, index))?)
    }

    /// One of the engine's tools, with arguments its schema accepts.
    async fn call_engine_tool(&mut self, name: &str, arguments: &Value) -> Result<ToolOutput> {
        let text = arguments.to_string();
        if text.len() > MAX_ARGUMENT_BYTES {
            let problem = format!(
                "arguments are {} bytes; at most {MAX_ARGUMENT_BYTES}",
                text.len()
            );
            return Err(refused(name, problem));
        }
        let tools = self.engine_tools().await?;
        let Some(tool) = tools.iter().find(|t| t.tool.name == name) else {
            return Err(refused(name, self.unknown_tool_problem()));
        };
        if let Some(problem) = argument_problem(&tool.validator, arguments) {
            return Err(refused(name, problem));
        }
        let instance = self.instance().await?;
        let output = instance.call_tool(name, &text).await;
        let output = self.settle(output)?;
        Ok(ToolOutput {
            content: output.content,
            is_error: output.is_error,
            details: Value::Null,
        })
    }

    fn unknown_tool_problem(&self) -> String {
        let offered: Vec<&str> = self
            .engine_tools
            .iter()
            .flatten()
            .map(|t| t.tool.name.as_str())
            .chain(
                self.recall_tools
                    .then_some([recall_tools::SEARCH, recall_tools::EXPAND])
                    .into_iter()
                    .flatten(),
            )
            .collect();
        format!(
            "no such tool in this session (offered: {})",
            if offered.is_empty() {
                "none".to_string()
            } else {
                offered.join(", ")
            }
        )
    }

    /// Ranked hits for `query` over the whole session, compacted entries included.
    pub fn search(&self, query: &SearchQuery) -> Result<Vec<Hit>> {
        Ok(self
            .shared
            .with_recall(|transcript, index| index.search(transcript, query))?)
    }

    /// The original text of the entries `request` names, under its token cap.
    pub fn expand(&self, request: &ExpandRequest) -> Result<Expansion> {
        Ok(ctxhost_recall::expand(&self.shared.read(), request)?)
    }
}

/// A name as an error quotes it: a model or engine can send megabytes where a name belongs.
fn shown(name: &str) -> String {
    const MAX: usize = 80;
    match name.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &name[..cut]),
        None => name.to_string(),
    }
}

/// A call of tool `name` refused before anything ran, and why.
fn refused(name: &str, problem: String) -> Error {
    Error::ToolCall {
        tool: shown(name),
        problem,
    }
}

/// Where `arguments` break the tool's schema, naming the field; None when they fit.
fn argument_problem(validator: &jsonschema::Validator, arguments: &Value) -> Option<String> {
    let error = validator.iter_errors(arguments).next()?;
    let at = error.instance_path().to_string();
    let field = if at.is_empty() {
        "arguments".to_string()
    } else {
        format!("arguments{}", at.replace('/', "."))
    };
    Some(format!("{field}: {error}"))
}

/// An engine tool as the model may see it, or why it may not.
fn check_engine_tool(tool: EngineTool, taken: bool) -> std::result::Result<CheckedTool, String> {
    check_tool_name(&tool.name, taken)?;
    let chars = tool.description.chars().count();
    if chars > MAX_DESCRIPTION_CHARS {
        return Err(format!(
            "its description is {chars} characters; at most {MAX_DESCRIPTION_CHARS}"
        ));
    }
    let (schema, validator) = checked_parameters(&tool.parameters)?;
    Ok(CheckedTool {
        tool: AgentTool {
            name: tool.name,
            description: tool.description,
            parameters: schema,
            source: ToolSource::Engine,
        },
        validator,
    })
}

/// An engine tool's name: well formed, not the host's, offered once (`taken`: already offered).
fn check_tool_name(name: &str, taken: bool) -> std::result::Result<(), String> {
    let well_formed = (1..=64).contains(&name.len())
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && (name.chars()).all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !well_formed {
        return Err("a name is 1-64 of a-z A-Z 0-9 _ -, starting with a letter".into());
    }
    if name.starts_with(HOST_PREFIX) {
        return Err(format!(
            "names starting with `{HOST_PREFIX}` are the host's"
        ));
    }
    if taken {
        return Err("offered twice".into());
    }
    Ok(())
}

/// An engine tool's parameters: an object schema, of bounded size, and its validator.
fn checked_parameters(
    parameters: &str,
) -> std::result::Result<(Value, jsonschema::Validator), String> {
    if parameters.len() > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its parameters schema is {} bytes; at most {MAX_SCHEMA_BYTES}",
            parameters.len()
        ));
    }
    let schema: Value = serde_json::from_str(parameters)
        .map_err(|e| format!("its parameters are not JSON: {e}"))?;
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("its parameters schema must be an object schema (\"type\": \"object\")".into());
    }
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| format!("its parameters are not a valid JSON Schema: {e}"))?;
    Ok((schema, validator))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(name: &str, parameters: &str) -> EngineTool {
        EngineTool {
            name: name.into(),
            description: "d".into(),
            parameters: parameters.into(),
        }
    }

    const OBJECT: &str =
        r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;

    #[test]
    fn engine_tools_are_checked_before_the_model_sees_them() {
        assert!(check_engine_tool(tool("lcm_grep", OBJECT), false).is_ok());
        let problem = |t, taken| check_engine_tool(t, taken).err().unwrap();
        assert!(problem(tool("ctx_search", OBJECT), false).contains("are the host's"));
        assert!(problem(tool("9lives", OBJECT), false).contains("starting with a letter"));
        assert!(problem(tool("a b", OBJECT), false).contains("a-z"));
        assert!(problem(tool("x", OBJECT), true).contains("offered twice"));
        assert!(problem(tool("x", "{not json"), false).contains("not JSON"));
        assert!(problem(tool("x", r#"{"type":"string"}"#), false).contains("object schema"));
        assert!(
            problem(
                tool("x", r#"{"type":"object","minProperties":"two"}"#),
                false
            )
            .contains("not a valid JSON Schema")
        );
        let long = EngineTool {
            description: "é".repeat(1_025),
            ..tool("x", OBJECT)
        };
        assert!(problem(long, false).contains("1025 characters"));
    }
}
