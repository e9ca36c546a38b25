//! The host's agent tools over recall, `ctx_search` and `ctx_expand`: what the model is told
//! about them, their arguments checked with the failing field named, and the text it reads.
//! The names start with `ctx_`, which no engine tool may use.

use ctxhost_transcript::time::{format_iso_ms, parse_iso_ms};
use ctxhost_transcript::{Role, Transcript};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::RecallError;
use crate::expand::{ExpandRequest, ExpandTarget, expand};
use crate::index::{Hit, RecallIndex};
use crate::query::SearchQuery;

/// The search tool's name.
pub const SEARCH: &str = "ctx_search";
/// The expand tool's name.
pub const EXPAND: &str = "ctx_expand";
/// Tool names with this prefix belong to the host.
pub const HOST_PREFIX: &str = "ctx_";

/// A tool as the model sees it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// JSON Schema of its arguments.
    pub parameters: Value,
}

/// What a tool call answers the model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolOutput {
    /// The text the model reads.
    pub content: String,
    /// The call failed in a way the model should read (a bad argument, an unknown id).
    pub is_error: bool,
    /// The same result as data (hits, or the expansion), for clients and the CLI.
    pub details: Value,
}

impl ToolOutput {
    /// A failure the model reads and can correct.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: message.into(),
            is_error: true,
            details: Value::Null,
        }
    }
}

/// The host's recall tools.
pub fn specs() -> Vec<ToolSpec> {
    let roles = Role::NAMES;
    vec![
        ToolSpec {
            name: SEARCH.into(),
            description: "Search this conversation's full history, including messages that were \
                compacted out of your context, by keywords. Returns matching entry ids with \
                snippets; open one with ctx_expand. Use it when a summary mentions something \
                you need the exact text of (a request, an error, a file, a decision)."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 1, "maxLength": 1000,
                              "description": "Distinctive words to find (a file name, an error, a term the user used)."},
                    "role": {"type": "string", "enum": roles, "description": "Only entries of this role."},
                    "tool": {"type": "string", "description": "Only results of (and calls to) this tool."},
                    "isError": {"type": "boolean", "description": "Only failed (true) or successful (false) tool results."},
                    "after": {"type": "string", "description": "Only entries at or after this time (RFC 3339)."},
                    "before": {"type": "string", "description": "Only entries before this time (RFC 3339)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Hits to return (default 10)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        },
        ToolSpec {
            name: EXPAND.into(),
            description: "Open the original text of earlier messages of this conversation: one \
                entry id from ctx_search, a citation from a summary (#1a2b3c4d or \
                #1a2b3c4d..#5e6f7a8b), or a range. Long results stop at maxTokens and give a \
                cursor to continue."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "description": "An entry id or a summary's citation."},
                    "from": {"type": "string", "description": "First entry id of a range (with `to`)."},
                    "to": {"type": "string", "description": "Last entry id of a range (with `from`)."},
                    "cursor": {"type": "string", "description": "The cursor a cut expansion gave, to continue it."},
                    "maxTokens": {"type": "integer", "minimum": 100, "maximum": 16000, "description": "Cap on the text returned (default 2000)."}
                },
                "additionalProperties": false
            }),
        },
    ]
}

/// A host tool call, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `ctx_search`.
    Search(SearchQuery),
    /// `ctx_expand`.
    Expand(ExpandRequest),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct SearchArgs {
    query: String,
    role: Option<String>,
    tool: Option<String>,
    is_error: Option<bool>,
    after: Option<String>,
    before: Option<String>,
    limit: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExpandArgs {
    id: Option<String>,
    from: Option<String>,
    to: Option<String>,
    cursor: Option<String>,
    max_tokens: Option<u32>,
}

/// Decodes `arguments` of the host tool `name`; `None` when `name` is not a host tool. A
/// mismatch names the tool and the field.
pub fn decode(name: &str, arguments: &Value) -> Option<Result<Call, RecallError>> {
    let bad = |e: String| RecallError::invalid(format!("{name}: {e}"));
    Some(match name {
        SEARCH => decode_args::<SearchArgs>(arguments)
            .map_err(bad)
            .and_then(|a| search_query(a).map_err(|e| bad(e.to_string())))
            .map(Call::Search),
        EXPAND => decode_args::<ExpandArgs>(arguments)
            .map_err(bad)
            .and_then(|a| expand_request(a).map_err(|e| bad(e.to_string())))
            .map(Call::Expand),
        _ => return None,
    })
}

fn decode_args<T: for<'de> Deserialize<'de>>(arguments: &Value) -> Result<T, String> {
    if !arguments.is_object() {
        return Err("arguments must be a JSON object".into());
    }
    serde_path_to_error::deserialize(arguments).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.inner().to_string()
        } else {
            format!("arguments.{path}: {}", e.inner())
        }
    })
}

fn search_query(args: SearchArgs) -> Result<SearchQuery, RecallError> {
    let time = |field: &str, value: Option<String>| {
        value
            .map(|v| {
                parse_iso_ms(&v).ok_or_else(|| {
                    RecallError::invalid(format!(
                        "arguments.{field}: {v:?} is not an RFC 3339 time (2026-11-25T10:00:00Z)"
                    ))
                })
            })
            .transpose()
    };
    let role = args
        .role
        .map(|r| {
            Role::parse(&r).ok_or_else(|| {
                RecallError::invalid(format!(
                    "arguments.role: {r:?} is not a role (user, assistant, toolResult, \
                     bashExecution, custom, branchSummary, compactionSummary)"
                ))
            })
        })
        .transpose()?;
    Ok(SearchQuery {
        query: args.query,
        role,
        tool: args.tool,
        is_error: args.is_error,
        after_ms: time("after", args.after)?,
        before_ms: time("before", args.before)?,
        limit: args.limit,
    })
}

fn expand_request(args: ExpandArgs) -> Result<ExpandRequest, RecallError> {
    let target = match (args.id, args.from, args.to, args.cursor) {
        (Some(id), None, None, None) => ExpandTarget::Entry(id),
        (None, Some(from), Some(to), None) => ExpandTarget::Range { from, to },
        (None, None, None, Some(cursor)) => ExpandTarget::Cursor(cursor),
        _ => {
            return Err(RecallError::invalid(
                "give exactly one of: `id`, `from` with `to`, or `cursor`",
            ));
        }
    };
    Ok(ExpandRequest {
        target,
        max_tokens: args.max_tokens,
    })
}

/// Runs a decoded call against `transcript`, whose `index` was brought level with it
/// ([`RecallIndex::sync`]). A bad argument found while running (an unknown id) is an error
/// output the model reads; only a failing index is an `Err`.
pub fn run(
    call: &Call,
    transcript: &Transcript,
    index: &RecallIndex,
) -> Result<ToolOutput, RecallError> {
    let result = match call {
        Call::Search(query) => index
            .search(transcript, query)
            .map(|hits| search_output(&query.query, &hits)),
        Call::Expand(request) => expand(transcript, request).map(|e| ToolOutput {
            content: match &e.next {
                Some(next) => format!(
                    "{}(cut at {} tokens; continue with ctx_expand {{\"cursor\": \"{next}\"}})",
                    e.text, e.tokens
                ),
                None => e.text.clone(),
            },
            is_error: false,
            details: serde_json::to_value(&e).unwrap_or(Value::Null),
        }),
    };
    match result {
        Err(RecallError::InvalidArgument(message)) => Ok(ToolOutput::error(message)),
        other => other,
    }
}

fn search_output(query: &str, hits: &[Hit]) -> ToolOutput {
    let mut content = if hits.is_empty() {
        format!(
            "No entry of this conversation matches {query:?}. Try other words: a file name, an \
             error code, a distinctive term."
        )
    } else {
        format!("{} entries match {query:?}, best first:\n", hits.len())
    };
    for hit in hits {
        let mut line = format!("- {} · {}", hit.id, hit.role);
        if let Some(tool) = &hit.tool {
            line.push_str(&format!(" {tool}"));
        }
        if hit.is_error {
            line.push_str(" · error");
        }
        if let Some(ms) = hit.timestamp {
            line.push_str(&format!(" · {}", format_iso_ms(ms)));
        }
        if !hit.in_context {
            line.push_str(" · compacted");
        }
        line.push_str(&format!(": {}\n", hit.snippet));
        content.push_str(&line);
    }
    if !hits.is_empty() {
        content.push_str("Open one with ctx_expand {\"id\": \"<id>\"}.");
    }
    ToolOutput {
        content,
        is_error: false,
        details: json!({ "hits": hits }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_specs_are_object_schemas_with_host_names() {
        for spec in specs() {
            assert!(spec.name.starts_with(HOST_PREFIX));
            assert_eq!(spec.parameters["type"], "object");
            assert_eq!(spec.parameters["additionalProperties"], false);
        }
    }

    #[test]
    fn arguments_that_do_not_match_name_the_field() {
        let err = |name, args| decode(name, &args).unwrap().unwrap_err().to_string();
        let e = err(SEARCH, json!({"query": "x", "limit": "ten"}));
        assert!(
            e.starts_with("ctx_search: arguments.limit: invalid type"),
            "{e}"
        );
        let e = err(SEARCH, json!({"query": "x", "colour": 1}));
        assert!(e.contains("unknown field `colour`"), "{e}");
        let e = err(SEARCH, json!({}));
        assert!(e.contains("missing field `query`"), "{e}");
        let e = err(SEARCH, json!({"query": "x", "role": "robot"}));
        assert!(e.contains("arguments.role: \"robot\" is not a role"), "{e}");
        let e = err(SEARCH, json!({"query": "x", "after": "yesterday"}));
        assert!(e.contains("arguments.after"), "{e}");
        let e = err(EXPAND, json!({"id": "a", "cursor": "b"}));
        assert!(e.contains("exactly one of"), "{e}");
        let e = err(EXPAND, json!(["a"]));
        assert!(e.contains("must be a JSON object"), "{e}");
        assert!(decode("bash", &json!({})).is_none());
    }

    #[test]
    fn good_arguments_decode() {
        let call = decode(SEARCH, &json!({"query": "socket", "role": "toolResult", "isError": true, "after": "2026-11-25T00:00:00Z", "limit": 3}))
            .unwrap()
            .unwrap();
        let Call::Search(q) = call else { panic!() };
        assert_eq!(q.role, Some(Role::ToolResult));
        assert_eq!(q.is_error, Some(true));
        assert_eq!(q.limit, Some(3));
        assert!(q.after_ms.is_some());
        let call = decode(EXPAND, &json!({"from": "a", "to": "b", "maxTokens": 500}))
            .unwrap()
            .unwrap();
        assert_eq!(
            call,
            Call::Expand(ExpandRequest {
                target: ExpandTarget::Range {
                    from: "a".into(),
                    to: "b".into()
                },
                max_tokens: Some(500)
            })
        );
    }
}
