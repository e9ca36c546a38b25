//! The `__NAME__` context engine.
//!
//! Only `info` is required; every other hook of `ContextEngine` has a default (pass-through
//! `assemble`, `ingest` ignored, `compact` delegated to the host's built-in compaction).
//! Override the ones you change. The SDK's crate docs say what each hook sees: `assemble` gets
//! the context as entries (role, tokens, and for tool results the tool's name and call id),
//! and a fresh instance of an existing session is not re-fed its old messages. `tools` offers
//! the model agent tools, each one typed function (the host checks the arguments against the
//! schema first).

use ctxhost_sdk::{
    AssembleRequest, AssembleResult, ContextEngine, EngineInfo, Plan, Result, Tools, host, log,
    serde_json::json,
};
use serde::Deserialize;

/// `plugins.entries.__NAME__.config`. The host checks it against `configSchema` in
/// ctxhost.plugin.json before the engine sees it; keep the two in step.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct Config {
    /// Keep only the newest N entries; all of them when unset.
    keep_last: Option<usize>,
}

/// `__NAME___recent_errors`' arguments.
#[derive(Deserialize)]
struct RecentErrors {
    /// Words the failure should contain.
    about: String,
}

/// One instance serves one session: per-session state lives in the fields.
#[derive(Default)]
pub struct __TYPE__ {
    /// Read on first use: the constructor must not call the host.
    config: Option<Config>,
}

impl ContextEngine for __TYPE__ {
    fn info() -> EngineInfo {
        EngineInfo::new("__NAME__", "__NAME__", env!("CARGO_PKG_VERSION"))
    }

    /// Decides what the model sees: here, the newest `keepLast` entries.
    fn assemble(&mut self, request: AssembleRequest) -> Result<AssembleResult> {
        if self.config.is_none() {
            self.config = Some(ctxhost_sdk::config()?);
        }
        let keep = self
            .config
            .as_ref()
            .and_then(|c| c.keep_last)
            .unwrap_or(usize::MAX);
        let start = request.entries.len().saturating_sub(keep);
        if start > 0 {
            log::debug(format!("leaving out the oldest {start} entries"));
        }
        // One `keep-range` item for the whole tail, however long.
        Ok(Plan::new().keep_range(&request.entries[start..]).build())
    }

    /// One tool: failed tool results of the whole session (compacted ones too) about some
    /// words, through the host's recall index.
    fn tools(&self) -> Tools<Self> {
        Tools::new().tool(
            "__NAME___recent_errors",
            "Find failed tool results of this session that mention some words.",
            json!({
                "type": "object",
                "properties": {"about": {"type": "string", "description": "Words to look for."}},
                "required": ["about"]
            }),
            |_engine: &mut Self, args: RecentErrors| {
                let hits = host::search(&host::SearchRequest {
                    query: args.about,
                    role: None,
                    tool: None,
                    is_error: Some(true),
                    limit: 5,
                })?;
                if hits.is_empty() {
                    return Ok("no failed tool result mentions that".into());
                }
                Ok(hits
                    .iter()
                    .map(|h| format!("{}: {}", h.entry_id, h.snippet))
                    .collect::<Vec<_>>()
                    .join("\n"))
            },
        )
    }
}

ctxhost_sdk::export_engine!(__TYPE__);

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost_sdk::testing::{TestHost, assemble_request, message};
    use ctxhost_sdk::{ContextItem, KeepRange, Role, serde_json::json};

    #[test]
    fn keeps_the_newest_entries_the_config_asks_for() {
        let history: Vec<_> = (0..5).map(|i| message(i, Role::User, "hello")).collect();
        let host = TestHost::new().config(json!({"keepLast": 2}));
        let plan = host
            .run(|| __TYPE__::default().assemble(assemble_request(&history)))
            .unwrap();
        assert_eq!(
            plan.items,
            [ContextItem::KeepRange(KeepRange { first: 3, last: 4 })]
        );
        assert_eq!(host.calls(), ["config", "log"]);
    }

    #[test]
    fn the_tool_finds_failures_through_the_host() {
        let mut failure = message(0, Role::ToolResult, "error: disk quota exceeded");
        failure.is_error = true;
        let host = TestHost::new().transcript([failure]);
        let engine = __TYPE__::default();
        let tools = engine.tools();
        let output = host.run(|| {
            tools.call(&mut __TYPE__::default(), "__NAME___recent_errors", r#"{"about": "quota"}"#)
        });
        assert!(!output.is_error, "{}", output.content);
        assert!(output.content.contains("disk quota exceeded"), "{}", output.content);
    }
}
