//! `context inspect`: the request exactly as the next model call would get it, from the engine
//! run on a scratch copy of the session.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ctxhost::prompt::{PromptSettings, Section};
use ctxhost::session::{Breakdown, ContextOverflow, FlushSignal, ModelRequest, TurnOptions};
use ctxhost::{AssembledItem, CompactOutcome, Host, SessionTarget};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::measure::{RECORDED_METHOD, RECORDED_METHOD_TEXT};
use crate::cli::output::{Report, thousands};
use crate::cli::sessions::load_transcript;

/// What `context inspect` found by running the engine on a scratch copy.
pub(super) struct Inspected {
    request: ModelRequest,
    blocks: Vec<Block>,
    engine: String,
    method: String,
    /// What `context status` shows for the same session.
    recorded: u64,
}

/// One message of the request.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Block {
    /// `preamble` (the summary), `message`, or `inserted` (by the engine).
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    entry_id: Option<String>,
    role: Value,
    tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pruned: Option<bool>,
    message: Value,
}

pub(super) async fn inspect(
    host: &Host,
    path: &Path,
    settings: &PromptSettings,
) -> anyhow::Result<Inspected> {
    let window = host.compaction_settings().context_window;
    // Validate (file:line errors) before the engine sees it; and the figure `status` shows,
    // named beside this command's own count.
    let recorded = load_transcript(path)?.context_tokens_in_window(window);
    // The engine runs on a scratch copy: inspecting never rewrites the session.
    let scratch = crate::cli::sessions::scratch_dir()?;
    let copy = scratch
        .path()
        .join(path.file_name().unwrap_or("session.jsonl".as_ref()));
    std::fs::copy(path, &copy).with_context(|| format!("cannot copy {}", path.display()))?;
    // ... and with a scratch state dir: an engine that writes as it assembles (the
    // checkpoint-manager's checkpoints) must not change what it keeps for real.
    let engine = host.active_engine_in(scratch.path().join("state")).await?;
    let target = SessionTarget::Copy {
        copy,
        original: path.to_path_buf(),
    };
    let mut session = host
        .open_session(&target, &ctxhost::SessionOptions::on(engine))
        .await?;
    // A request that does not fit is what needs inspecting: shown, and marked.
    let request = session
        .inspect_request(settings, &TurnOptions::default())
        .await?;
    let (method, blocks) = {
        let t = session.transcript();
        let method = t
            .token_counter()
            .map_or("chars/4", |c| c.encoding().as_str())
            .to_string();
        let blocks = request
            .items
            .iter()
            .zip(&request.messages)
            .zip(&request.message_tokens)
            .map(|((item, json_text), &tokens)| {
                let message = serde_json::from_str::<Value>(json_text).unwrap_or(Value::Null);
                match item {
                    AssembledItem::Entry(i) => {
                        let e = &t.entries()[*i];
                        Block {
                            kind: if e.entry_type() == "compaction" {
                                "preamble"
                            } else {
                                "message"
                            },
                            entry_id: Some(e.id().to_string()),
                            role: e.context_role().map_or("?", |r| r.as_str()).into(),
                            tokens,
                            pruned: Some(e.is_pruned()),
                            message,
                        }
                    }
                    AssembledItem::Inserted(_) => Block {
                        kind: "inserted",
                        entry_id: None,
                        role: message.get("role").cloned().unwrap_or(Value::Null),
                        tokens,
                        pruned: None,
                        message,
                    },
                }
            })
            .collect();
        (method, blocks)
    };
    let engine = session.engine().id().to_string();
    session.close().await?;
    Ok(Inspected {
        request,
        blocks,
        engine,
        method,
        recorded,
    })
}

/// `context inspect` (docs/cli-json/context-inspect.schema.json).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct InspectReport<'a> {
    session: String,
    engine: &'a str,
    workspace: &'a Option<PathBuf>,
    sections: &'a [Section],
    truncated: Vec<Truncated<'a>>,
    warnings: &'a [String],
    blocks: &'a [Block],
    breakdown: &'a Breakdown,
    total_tokens: u64,
    total_tokens_method: &'a str,
    recorded_context_tokens: u64,
    recorded_context_tokens_method: &'static str,
    overflow: &'a Option<ContextOverflow>,
    overflow_compaction: &'a Option<CompactOutcome>,
    flush: &'a Option<FlushSignal>,
    #[serde(skip)]
    bootstrap_max_chars: usize,
}

/// A bootstrap file cut to `bootstrapMaxChars`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Truncated<'a> {
    file: &'a str,
    original_chars: usize,
}

impl<'a> InspectReport<'a> {
    pub(super) fn new(path: &Path, settings: &'a PromptSettings, inspected: &'a Inspected) -> Self {
        let request = &inspected.request;
        InspectReport {
            session: path.display().to_string(),
            engine: &inspected.engine,
            workspace: &settings.workspace,
            sections: &request.sections,
            truncated: request
                .truncated
                .iter()
                .map(|(file, chars)| Truncated {
                    file,
                    original_chars: *chars,
                })
                .collect(),
            warnings: &request.warnings,
            blocks: &inspected.blocks,
            breakdown: &request.breakdown,
            total_tokens: request.breakdown.total,
            total_tokens_method: &inspected.method,
            recorded_context_tokens: inspected.recorded,
            recorded_context_tokens_method: RECORDED_METHOD,
            overflow: &request.overflow,
            overflow_compaction: &request.overflow_compaction,
            flush: &request.flush,
            bootstrap_max_chars: settings.bootstrap_max_chars,
        }
    }
}

impl Report for InspectReport<'_> {
    fn lines(&self) -> Vec<String> {
        let b = self.breakdown;
        let mut lines = vec![format!(
            "{} through engine `{}`: {} tokens (counted by {}) of a {}-token window ({} kept free for the response)",
            self.session,
            self.engine,
            thousands(b.total),
            self.total_tokens_method,
            thousands(b.window),
            thousands(b.response_reserve)
        )];
        lines.push(format!(
            "  = system {} + bootstrap {} + skills {} + tools {} + history {} + engine {} + current message {}",
            thousands(b.system),
            thousands(b.bootstrap),
            thousands(b.skills),
            thousands(b.tools),
            thousands(b.history),
            thousands(b.engine_additions),
            thousands(b.current_message)
        ));
        lines.push(format!(
            "  (`context status` shows {} tokens: {RECORDED_METHOD_TEXT})",
            thousands(self.recorded_context_tokens)
        ));
        if let Some(o) = self.overflow {
            lines.push(format!(
                "OVERFLOW: the request needs {} tokens but the window leaves {} after the {}-token response reserve, even after compaction; the model call would fail",
                thousands(o.total),
                thousands(o.available),
                thousands(o.reserve)
            ));
        }
        for t in &self.truncated {
            lines.push(format!(
                "note: {} truncated from {} characters (agents.defaults.bootstrapMaxChars {})",
                t.file,
                thousands(t.original_chars as u64),
                thousands(self.bootstrap_max_chars as u64)
            ));
        }
        for warning in self.warnings {
            lines.push(format!("warning: {warning}"));
        }
        if let Some(outcome) = self.overflow_compaction {
            lines.push(format!(
                "note: the request overflowed; a compaction ran first ({} -> {} tokens)",
                thousands(outcome.tokens_before),
                thousands(outcome.tokens_after)
            ));
        }
        for section in self.sections {
            lines.push(format!(
                "[system: {}] {} tokens: {}",
                section.title,
                section.tokens,
                clip(&section.text, 100)
            ));
        }
        for b in self.blocks {
            lines.push(format!(
                "[{} {}{}] {} tokens: {}",
                b.kind,
                b.role.as_str().unwrap_or(""),
                if b.pruned == Some(true) {
                    ", pruned"
                } else {
                    ""
                },
                b.tokens,
                clip(&b.message.to_string(), 100)
            ));
        }
        lines
    }
}

fn clip(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c == '\n' { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        flat.chars().take(max).collect::<String>() + "…"
    }
}
