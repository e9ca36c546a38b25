//! `ctxhost context {status,history,inspect,export,import}`: what a session's context holds,
//! how it got there, and a portable bundle to start a fresh session from it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use clap::Subcommand;
use ctxhost::config::{Config, Home};
use ctxhost::prompt::PromptSettings;
use ctxhost::session::TurnOptions;
use ctxhost::transcript::compaction::degradation;
use ctxhost::transcript::store::{TranscriptFile, rewrite_atomically};
use ctxhost::transcript::time::format_iso_ms;
use ctxhost::transcript::{Transcript, status};
use ctxhost::{AssembledItem, SessionTarget};
use serde_json::{Value, json};

use super::compact::{existing_path, host, target};
use super::output::{Bar, Out, print_json, thousands};

/// How `context status` (and the transcript's `context_tokens`) measures a context, named in
/// both `status` and `inspect` so their figures are never mistaken for one another.
const RECORDED_METHOD: &str = "recorded-usage";
const RECORDED_METHOD_TEXT: &str = "recorded usage (the last assistant turn's usage + chars/4 of later messages; chars/4 of all without usage)";

/// The bundle format `export` writes and `import` reads.
const BUNDLE_FORMAT: &str = "ctxhost-context-bundle";

#[derive(Subcommand)]
pub enum ContextCommand {
    /// Tokens / window, compaction count, last compaction, degradation risk (reads only the
    /// end of the transcript).
    Status {
        /// A transcript path, or a session key under $CTXHOST_HOME/sessions/.
        #[arg(long)]
        session: String,
        /// Count the system prompt this workspace adds (bootstrap files, skills) too.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Every compaction on the active branch.
    History {
        /// A transcript path, or a session key under $CTXHOST_HOME/sessions/.
        #[arg(long)]
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// The request exactly as the next model call would get it: system prompt sections,
    /// truncation notes, messages, with tokens per block and a breakdown that adds up.
    Inspect {
        /// A transcript path, or a session key under $CTXHOST_HOME/sessions/.
        #[arg(long)]
        session: String,
        /// The agent's workspace (bootstrap files, skills); default agents.defaults.workspace.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Writes a portable bundle (latest summary, checkpoint data, recent entries, metadata).
    Export {
        /// A transcript path, or a session key under $CTXHOST_HOME/sessions/.
        #[arg(long)]
        session: String,
        /// The bundle to write.
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Starts a fresh session from a bundle.
    Import {
        /// The bundle to read.
        file: PathBuf,
        /// The new session (a transcript path, or a key under $CTXHOST_HOME/sessions/);
        /// default `imported-<id>`.
        #[arg(long)]
        session: Option<String>,
        #[arg(long)]
        json: bool,
    },
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// "3 hours 2 minutes ago", "6 months 24 days ago": the two largest units are enough to
/// place an event; more ("6months 24days 8h 48m 24s") is noise.
fn ago(ms: Option<u64>) -> String {
    match ms {
        Some(ms) if ms > 0 => elapsed_text(now_ms().saturating_sub(ms) / 1000),
        _ => "at an unknown time".into(),
    }
}

fn elapsed_text(secs: u64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (365 * 86_400, "year"),
        (30 * 86_400, "month"),
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    // Under a second: the last unit, so every answer reads "... ago".
    let first = UNITS
        .iter()
        .position(|&(size, _)| secs >= size)
        .unwrap_or(UNITS.len() - 1);
    let plural = |n: u64, name: &str| format!("{n} {name}{}", if n == 1 { "" } else { "s" });
    let (size, name) = UNITS[first];
    let mut text = plural(secs / size, name);
    if let Some(&(next, next_name)) = UNITS.get(first + 1) {
        let n = secs % size / next;
        if n > 0 {
            text = format!("{text} {}", plural(n, next_name));
        }
    }
    text + " ago"
}

pub async fn run(home: Home, config: Config, command: ContextCommand) -> anyhow::Result<ExitCode> {
    let host = host(home, config)?;
    let window = host.compaction_settings().context_window;
    match command {
        ContextCommand::Status {
            session,
            workspace,
            json,
        } => {
            let system_tokens = workspace
                .map(|dir| ctxhost::prompt::system_tokens(&prompt_settings(&host, Some(dir))))
                .unwrap_or(0);
            let (_, path) = existing_path(&host, &session)?;
            let started = std::time::Instant::now();
            let s = status::scan_for_window(&path, window)?;
            let elapsed = started.elapsed();
            for w in &s.warnings {
                eprintln!("warning: {w}");
            }
            let d = degradation(s.summary_count);
            let last = s.last_compaction.as_ref().map(|c| {
                json!({
                    "id": c.id,
                    "timestamp": c.timestamp.map(format_iso_ms),
                    "ago": ago(c.timestamp),
                    "tokensBefore": c.tokens_before,
                    "tokensAfter": c.details.as_ref().and_then(|d| d.get("tokensAfter")),
                    "layer": c.details.as_ref().and_then(|d| d.get("layer")),
                    "trigger": c.details.as_ref().and_then(|d| d.get("trigger")),
                })
            });
            if json {
                print_json(&json!({
                    "session": path.display().to_string(),
                    "sessionId": s.session_id,
                    "contextTokens": s.context_tokens,
                    "contextTokensMethod": RECORDED_METHOD,
                    "systemTokens": system_tokens,
                    "contextWindow": window,
                    "utilisation": (s.context_tokens + system_tokens) as f64 / window.max(1) as f64,
                    "contextMessages": s.context_messages,
                    "compactionCount": s.compaction_count,
                    "summaryCount": s.summary_count,
                    "countSource": s.count_source.as_str(),
                    "lastCompaction": last,
                    "degradation": {"count": d.count, "risk": d.risk.as_str(), "recommendation": d.recommendation},
                    "fileBytes": s.file_bytes,
                    "bytesScanned": s.bytes_scanned,
                    "elapsedMs": elapsed.as_secs_f64() * 1e3,
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut out = Out::new();
            out.line(format!(
                "session       {} ({})",
                path.display(),
                s.session_id
            ));
            let used = s.context_tokens + system_tokens;
            out.line(format!(
                "context       {} / {} tokens ({:.1}%), {} messages{}",
                thousands(used),
                thousands(window),
                used as f64 * 100.0 / window.max(1) as f64,
                s.context_messages,
                if system_tokens > 0 {
                    format!(" (+{} system prompt)", thousands(system_tokens))
                } else {
                    String::new()
                }
            ));
            // Two commands, two measures: say which this is and where the other is.
            out.line(format!(
                "              by {RECORDED_METHOD_TEXT}; `context inspect` counts the whole request by chars/4"
            ));
            // The count is exact now (active branch only), so it needs no qualifier.
            out.line(format!("compactions   {}", s.compaction_count));
            out.line(match &s.last_compaction {
                Some(c) => format!(
                    "last          {} ({}), {} tokens before",
                    ago(c.timestamp),
                    c.details
                        .as_ref()
                        .and_then(|d| d.get("layer"))
                        .and_then(Value::as_str)
                        .unwrap_or("layer not recorded"),
                    thousands(c.tokens_before)
                ),
                None => "last          never compacted".into(),
            });
            out.line(format!(
                "degradation   {} risk: {}",
                d.risk.as_str(),
                d.recommendation
            ));
            Ok(ExitCode::SUCCESS)
        }
        ContextCommand::History { session, json } => {
            let (_, path) = existing_path(&host, &session)?;
            let t = load(&path)?;
            let rows: Vec<Value> = t
                .active_branch()
                .into_iter()
                .map(|i| &t.entries()[i])
                .filter(|e| e.entry_type() == "compaction")
                .map(|e| {
                    let details = serde_json::from_str::<Value>(e.line())
                        .ok()
                        .and_then(|v| v.get("details").cloned())
                        .unwrap_or(Value::Null);
                    json!({
                        "id": e.id(),
                        "line": e.line_number(),
                        "timestamp": e.timestamp().map(format_iso_ms),
                        "ago": ago(e.timestamp()),
                        "layer": details.get("layer"),
                        "trigger": details.get("trigger"),
                        "tokensBefore": e.tokens_before(),
                        "tokensAfter": details.get("tokensAfter"),
                        "messagesCompacted": details.get("messagesCompacted"),
                        "summarizer": details.get("summarizer"),
                        "firstKeptEntryId": e.first_kept_entry_id(),
                    })
                })
                .collect();
            if json {
                print_json(&json!({"session": path.display().to_string(), "compactions": rows}))?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut out = Out::new();
            if rows.is_empty() {
                out.line(format!("{}: no compactions", path.display()));
                return Ok(ExitCode::SUCCESS);
            }
            for line in history_table(&rows) {
                out.line(line);
            }
            Ok(ExitCode::SUCCESS)
        }
        ContextCommand::Inspect {
            session,
            workspace,
            json,
        } => {
            let (_, path) = existing_path(&host, &session)?;
            // Validate (file:line errors) before the engine sees it; and the figure `status`
            // shows, named beside this command's own count.
            let recorded = load(&path)?.context_tokens_in_window(window);
            // The engine runs on a scratch copy: inspecting never rewrites the session.
            let scratch = super::scratch_dir()?;
            let copy = scratch
                .path()
                .join(path.file_name().unwrap_or("session.jsonl".as_ref()));
            std::fs::copy(&path, &copy)
                .with_context(|| format!("cannot copy {}", path.display()))?;
            let settings = prompt_settings(&host, workspace);
            // ... and with a scratch state dir: an engine that writes as it assembles (the
            // checkpoint-manager's checkpoints) must not change what it keeps for real.
            let engine = host.active_engine_in(scratch.path().join("state")).await?;
            let mut session = host
                .open_session_on(
                    &SessionTarget::Copy {
                        copy,
                        original: path.clone(),
                    },
                    engine,
                )
                .await?;
            // A request that does not fit is what needs inspecting: shown, and marked.
            let request = session
                .inspect_request(&settings, &TurnOptions::default())
                .await?;
            let method = session
                .transcript()
                .token_counter()
                .map_or("chars/4", |c| c.encoding().as_str());
            let blocks: Vec<Value> = {
                let t = session.transcript();
                request
                    .items
                    .iter()
                    .zip(&request.messages)
                    .zip(&request.message_tokens)
                    .map(|((item, json_text), tokens)| {
                        let message =
                            serde_json::from_str::<Value>(json_text).unwrap_or(Value::Null);
                        match item {
                            AssembledItem::Entry(i) => {
                                let e = &t.entries()[*i];
                                json!({
                                    "kind": if e.entry_type() == "compaction" { "preamble" } else { "message" },
                                    "entryId": e.id(),
                                    "role": e.context_role().map_or("?", |r| r.as_str()),
                                    "tokens": tokens,
                                    "pruned": e.is_pruned(),
                                    "message": message,
                                })
                            }
                            AssembledItem::Inserted(_) => json!({
                                "kind": "inserted",
                                "role": message.get("role"),
                                "tokens": tokens,
                                "message": message,
                            }),
                        }
                    })
                    .collect()
            };
            let engine = session.engine().id().to_string();
            session.close().await?;
            let b = &request.breakdown;
            if json {
                print_json(&json!({
                    "session": path.display().to_string(),
                    "engine": engine,
                    "workspace": settings.workspace,
                    "sections": request.sections,
                    "truncated": request.truncated.iter().map(|(file, chars)| json!({"file": file, "originalChars": chars})).collect::<Vec<_>>(),
                    "warnings": request.warnings,
                    "blocks": blocks,
                    "breakdown": b,
                    "totalTokens": b.total,
                    "totalTokensMethod": method,
                    "recordedContextTokens": recorded,
                    "recordedContextTokensMethod": RECORDED_METHOD,
                    "overflow": request.overflow,
                    "overflowCompaction": request.overflow_compaction,
                    "flush": request.flush,
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            let mut lines = vec![format!(
                "{} through engine `{engine}`: {} tokens (counted by {method}) of a {}-token window ({} kept free for the response)",
                path.display(),
                thousands(b.total),
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
                thousands(recorded)
            ));
            if let Some(o) = &request.overflow {
                lines.push(format!(
                    "OVERFLOW: the request needs {} tokens but the window leaves {} after the {}-token response reserve, even after compaction; the model call would fail",
                    thousands(o.total),
                    thousands(o.available),
                    thousands(o.reserve)
                ));
            }
            for (file, chars) in &request.truncated {
                lines.push(format!(
                    "note: {file} truncated from {} characters (agents.defaults.bootstrapMaxChars {})",
                    thousands(*chars as u64),
                    thousands(settings.bootstrap_max_chars as u64)
                ));
            }
            for warning in &request.warnings {
                lines.push(format!("warning: {warning}"));
            }
            if let Some(outcome) = &request.overflow_compaction {
                lines.push(format!(
                    "note: the request overflowed; a compaction ran first ({} -> {} tokens)",
                    thousands(outcome.tokens_before),
                    thousands(outcome.tokens_after)
                ));
            }
            for section in &request.sections {
                lines.push(format!(
                    "[system: {}] {} tokens: {}",
                    section.title,
                    section.tokens,
                    clip(&section.text, 100)
                ));
            }
            for b in &blocks {
                lines.push(format!(
                    "[{} {}{}] {} tokens: {}",
                    b["kind"].as_str().unwrap_or(""),
                    b["role"].as_str().unwrap_or(""),
                    if b["pruned"] == true { ", pruned" } else { "" },
                    b["tokens"],
                    clip(&b["message"].to_string(), 100)
                ));
            }
            let mut out = Out::new();
            for line in lines {
                out.line(line);
            }
            Ok(ExitCode::SUCCESS)
        }
        ContextCommand::Export {
            session,
            file,
            json,
        } => {
            let (_, path) = existing_path(&host, &session)?;
            let t = load(&path)?;
            let bundle = export_bundle(&t, &path, window);
            let text = serde_json::to_string_pretty(&bundle)? + "\n";
            rewrite_atomically(&file, &text)?;
            let summary = json!({
                "session": path.display().to_string(),
                "bundle": file.display().to_string(),
                "entries": bundle["entries"].as_array().map_or(0, Vec::len),
                "hasSummary": !bundle["summary"].is_null(),
                "hasCheckpoint": !bundle["checkpoint"].is_null(),
            });
            if json {
                print_json(&summary)?;
            } else {
                Out::new().line(format!(
                    "exported {} entries{} from {} to {}",
                    summary["entries"],
                    if summary["hasSummary"] == true {
                        " and the latest summary"
                    } else {
                        ""
                    },
                    path.display(),
                    file.display()
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
        ContextCommand::Import {
            file,
            session,
            json,
        } => {
            let bar = Bar::new("importing");
            let result = import_bundle(&host, &file, session.as_deref());
            bar.finish();
            let (key, path, entries) = result?;
            if json {
                print_json(
                    &json!({"session": key, "path": path.display().to_string(), "entries": entries}),
                )?;
            } else {
                Out::new().line(format!(
                    "imported {} into a fresh session `{key}` ({}, {entries} entries)",
                    file.display(),
                    path.display()
                ));
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// `context history` as a table: a header row, then one row per compaction; token figures with
/// thousands separators, right-aligned.
fn history_table(rows: &[Value]) -> Vec<String> {
    let text = |v: &Value| match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        Value::Number(n) => n.as_u64().map_or_else(|| n.to_string(), thousands),
        other => other.to_string(),
    };
    let header = [
        "#",
        "when",
        "",
        "layer",
        "trigger",
        "tokens before",
        "tokens after",
        "messages compacted",
    ];
    let mut table: Vec<[String; 8]> = vec![header.map(str::to_string)];
    for (n, r) in rows.iter().enumerate() {
        table.push([
            (n + 1).to_string(),
            text(&r["timestamp"]),
            format!("({})", text(&r["ago"])),
            text(&r["layer"]),
            text(&r["trigger"]),
            text(&r["tokensBefore"]),
            text(&r["tokensAfter"]),
            text(&r["messagesCompacted"]),
        ]);
    }
    let mut widths = [0; 8];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    table
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    // Numbers right-aligned, words left-aligned.
                    if i == 0 || i >= 5 {
                        format!("{cell:>w$}")
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

/// The prompt settings of the config, with `--workspace` taking precedence.
fn prompt_settings(host: &ctxhost::Host, workspace: Option<PathBuf>) -> PromptSettings {
    let mut settings = PromptSettings::from_config(&host.config().settings.agents.defaults);
    if workspace.is_some() {
        settings.workspace = workspace;
    }
    settings
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

fn load(path: &Path) -> anyhow::Result<Transcript> {
    let t = Transcript::load(path)?;
    for w in t.warnings() {
        eprintln!("warning: {w}");
    }
    Ok(t)
}

/// Latest summary, checkpoint data (the newest `custom` entry whose type names a checkpoint),
/// the context entries after the boundary (v3 lines) and metadata.
fn export_bundle(t: &Transcript, path: &Path, window: u64) -> Value {
    let ctx = t.context();
    let entries = t.entries();
    let boundary = ctx
        .first()
        .copied()
        .filter(|&i| entries[i].entry_type() == "compaction");
    let summary = boundary.and_then(|b| entries[b].view()).map(|v| v.text);
    let checkpoint = t
        .active_branch()
        .into_iter()
        .rev()
        .map(|i| &entries[i])
        .find(|e| {
            e.entry_type() == "custom"
                && serde_json::from_str::<Value>(e.line())
                    .ok()
                    .is_some_and(|v| {
                        v.get("customType")
                            .and_then(Value::as_str)
                            .is_some_and(|t| t.contains("checkpoint"))
                    })
        })
        .and_then(|e| serde_json::from_str::<Value>(e.line()).ok())
        .map(|v| json!({"customType": v.get("customType"), "data": v.get("data")}));
    // Every context entry after the boundary is sent to the model — `custom_message` and
    // `branch_summary` entries as much as messages — so each goes in, as its AgentMessage.
    let recent: Vec<Value> = ctx
        .iter()
        .filter(|&&i| Some(i) != boundary)
        .filter_map(|&i| serde_json::from_str::<Value>(&entries[i].message_json()).ok())
        .collect();
    json!({
        "format": BUNDLE_FORMAT,
        "version": 1,
        "exportedAt": format_iso_ms(now_ms()),
        "source": {
            "path": path.display().to_string(),
            "sessionId": t.header().id(),
            "cwd": t.header().cwd(),
            "transcriptVersion": t.header().version(),
        },
        "metadata": {
            "contextTokens": t.context_tokens_in_window(window),
            "compactionCount": t.compaction_count(),
            "entriesInFile": entries.len(),
        },
        "summary": summary,
        "checkpoint": checkpoint,
        "entries": recent,
    })
}

/// Appends one bundled AgentMessage as the entry it came from: `custom` messages as
/// `custom_message` entries and branch summaries as `branch_summary` entries (what pi writes
/// for them), everything else as a `message` entry.
fn append_bundled(
    t: &mut Transcript,
    message: &Value,
    now: &str,
) -> Result<usize, ctxhost::transcript::TranscriptError> {
    let member = |k: &str| message.get(k).cloned().unwrap_or(Value::Null);
    match message.get("role").and_then(Value::as_str) {
        Some("custom") => {
            let mut members = json!({
                "customType": member("customType"),
                "content": member("content"),
                "display": message.get("display").cloned().unwrap_or(Value::Bool(true)),
            });
            if let Some(details) = message.get("details") {
                members["details"] = details.clone();
            }
            t.append_other("custom_message", &members, now)
        }
        Some("branchSummary") => t.append_other(
            "branch_summary",
            &json!({"summary": member("summary"), "fromId": member("fromId")}),
            now,
        ),
        _ => t.append_message(message, now),
    }
}

/// A fresh session from a bundle: the recent messages, then (with a summary) a compaction
/// whose first kept entry is the first of them, and the checkpoint data as a `custom` entry.
fn import_bundle(
    host: &ctxhost::Host,
    file: &Path,
    session: Option<&str>,
) -> anyhow::Result<(String, PathBuf, usize)> {
    let name = file.display().to_string();
    let text = std::fs::read_to_string(file).with_context(|| format!("cannot read {name}"))?;
    let bundle: Value = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("{name}:{}:{}: not a JSON bundle: {e}", e.line(), e.column())
    })?;
    if bundle.get("format").and_then(Value::as_str) != Some(BUNDLE_FORMAT) {
        bail!("{name}:1: not a context bundle (no \"format\": \"{BUNDLE_FORMAT}\")");
    }
    let messages = bundle
        .get("entries")
        .and_then(Value::as_array)
        .ok_or_else(|| anyhow::anyhow!("{name}: the bundle has no \"entries\" list"))?;
    let new_id = uuid::Uuid::new_v4().to_string();
    let target = match session {
        Some(s) => target(s),
        None => SessionTarget::Key(format!("imported-{}", &new_id[..8])),
    };
    let (key, path) = host.session_path(&target)?;
    if path.exists() {
        bail!(
            "{} already exists: import starts a fresh session",
            path.display()
        );
    }
    let now = format_iso_ms(now_ms());
    let cwd = bundle
        .pointer("/source/cwd")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let mut t = Transcript::new(&new_id, &cwd, &now);
    for (n, m) in messages.iter().enumerate() {
        append_bundled(&mut t, m, &now)
            .map_err(|e| anyhow::anyhow!("{name}: entries[{n}]: {e}"))?;
    }
    if let Some(summary) = bundle.get("summary").and_then(Value::as_str)
        && let Some(first) = t.entries().first().map(|e| e.id().to_string())
    {
        t.append_compaction(
            &ctxhost::transcript::NewCompaction {
                summary: summary.to_string(),
                first_kept_entry_id: first,
                tokens_before: bundle
                    .pointer("/metadata/contextTokens")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                details: Some(json!({
                    "layer": "import",
                    "trigger": "manual",
                    "importedFrom": bundle.get("source"),
                })),
            },
            &now,
        )?;
    }
    if let Some(cp) = bundle.get("checkpoint").filter(|c| !c.is_null()) {
        let custom_type = cp
            .get("customType")
            .and_then(Value::as_str)
            .unwrap_or("checkpoint");
        t.append_other(
            "custom",
            &json!({"customType": custom_type, "data": cp.get("data")}),
            &now,
        )?;
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    TranscriptFile::create(&path, &t)?;
    Ok((key, path, t.entries().len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_is_one_or_two_units() {
        assert_eq!(elapsed_text(0), "0 seconds ago");
        assert_eq!(elapsed_text(1), "1 second ago");
        assert_eq!(elapsed_text(59), "59 seconds ago");
        assert_eq!(
            elapsed_text(3_600 * 3 + 60 * 2 + 5),
            "3 hours 2 minutes ago"
        );
        assert_eq!(elapsed_text(86_400), "1 day ago");
        // The "6months 24days 8h 48m 24s ago".
        let secs = (6 * 30 + 24) * 86_400 + 8 * 3_600 + 48 * 60 + 24;
        assert_eq!(elapsed_text(secs), "6 months 24 days ago");
        assert_eq!(elapsed_text(400 * 86_400), "1 year 1 month ago");
    }

    #[test]
    fn history_has_headers_and_separators() {
        let rows = vec![json!({
            "timestamp": "2025-01-01T00:00:00.000Z", "ago": "2 days ago", "layer": "summarize",
            "trigger": "manual", "tokensBefore": 123_456, "tokensAfter": 20_000,
            "messagesCompacted": 1_024,
        })];
        let lines = history_table(&rows);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("#  when"), "{}", lines[0]);
        assert!(lines[0].contains("tokens before"), "{}", lines[0]);
        assert!(
            lines[1].contains("123,456") && lines[1].contains("20,000"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("1,024"), "{}", lines[1]);
    }
}
