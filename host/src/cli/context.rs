//! `ctxhost context {status,history,inspect,export,import}`: what a session's context holds,
//! how it got there, and a portable bundle to start a fresh session from it.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
use super::output::{Bar, print_json, thousands};

/// The bundle format `export` writes and `import` reads.
const BUNDLE_FORMAT: &str = "ctxhost-context-bundle";

#[derive(Subcommand)]
pub enum ContextCommand {
    /// Tokens / window, compaction count, last compaction, degradation risk (reads only the
    /// end of the transcript).
    Status {
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
        #[arg(long)]
        session: String,
        #[arg(long)]
        json: bool,
    },
    /// The request exactly as the next model call would get it: system prompt sections,
    /// truncation notes, messages, with tokens per block and a breakdown that adds up.
    Inspect {
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
        #[arg(long)]
        session: String,
        file: PathBuf,
        #[arg(long)]
        json: bool,
    },
    /// Starts a fresh session from a bundle.
    Import {
        file: PathBuf,
        /// The new session (path or key); default `imported-<id>`.
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

/// "3h 2m ago" (to the minute; seconds for the last minute).
fn ago(ms: u64) -> String {
    if ms == 0 {
        return "at an unknown time".into();
    }
    let elapsed = now_ms().saturating_sub(ms) / 1000;
    let rounded = if elapsed >= 60 {
        elapsed - elapsed % 60
    } else {
        elapsed
    };
    format!(
        "{} ago",
        humantime::format_duration(Duration::from_secs(rounded))
    )
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
            let s = status::scan(&path)?;
            let elapsed = started.elapsed();
            for w in &s.warnings {
                eprintln!("warning: {w}");
            }
            let d = degradation(s.summary_count);
            let last = s.last_compaction.as_ref().map(|c| {
                json!({
                    "id": c.id,
                    "timestamp": format_iso_ms(c.timestamp_ms),
                    "ago": ago(c.timestamp_ms),
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
            println!("session       {} ({})", path.display(), s.session_id);
            let used = s.context_tokens + system_tokens;
            println!(
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
            );
            println!(
                "compactions   {}{}",
                s.compaction_count,
                if s.count_source == status::CountSource::ByteSearch {
                    " (byte search: every branch counted)"
                } else {
                    ""
                }
            );
            match &s.last_compaction {
                Some(c) => println!(
                    "last          {} ({}), {} tokens before",
                    ago(c.timestamp_ms),
                    c.details
                        .as_ref()
                        .and_then(|d| d.get("layer"))
                        .and_then(Value::as_str)
                        .unwrap_or("layer not recorded"),
                    thousands(c.tokens_before)
                ),
                None => println!("last          never compacted"),
            }
            println!(
                "degradation   {} risk: {}",
                d.risk.as_str(),
                d.recommendation
            );
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
                        "timestamp": format_iso_ms(e.timestamp_ms()),
                        "ago": ago(e.timestamp_ms()),
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
            if rows.is_empty() {
                println!("{}: no compactions", path.display());
            }
            let s = |v: &Value| match v {
                Value::Null => "-".to_string(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            for (n, r) in rows.iter().enumerate() {
                println!(
                    "#{:<3} {} ({})  {:<9} {:<8} {} -> {} tokens, {} messages compacted",
                    n + 1,
                    s(&r["timestamp"]),
                    s(&r["ago"]),
                    s(&r["layer"]),
                    s(&r["trigger"]),
                    s(&r["tokensBefore"]),
                    s(&r["tokensAfter"]),
                    s(&r["messagesCompacted"]),
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        ContextCommand::Inspect {
            session,
            workspace,
            json,
        } => {
            let (_, path) = existing_path(&host, &session)?;
            load(&path)?; // validate (file:line errors) before the engine sees it
            // The engine runs on a scratch copy: inspecting never rewrites the session.
            let scratch = super::scratch_dir()?;
            let copy = scratch
                .path()
                .join(path.file_name().unwrap_or("session.jsonl".as_ref()));
            std::fs::copy(&path, &copy)
                .with_context(|| format!("cannot copy {}", path.display()))?;
            let settings = prompt_settings(&host, workspace);
            let mut session = host.open_session(&SessionTarget::Path(copy)).await?;
            let request = session
                .prepare_request(&settings, &TurnOptions::default())
                .await?;
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
                    "overflowCompaction": request.overflow_compaction,
                    "flush": request.flush,
                }))?;
                return Ok(ExitCode::SUCCESS);
            }
            // Piped into `head`, stop quietly.
            let mut out = std::io::stdout().lock();
            let mut lines = vec![format!(
                "{} through engine `{engine}`: {} tokens of a {}-token window ({} kept free for the response)",
                path.display(),
                thousands(b.total),
                thousands(b.window),
                thousands(b.response_reserve)
            )];
            lines.push(format!(
                "  = system {} + bootstrap {} + skills {} + tools {} + history {} + engine {} + current message {}",
                b.system, b.bootstrap, b.skills, b.tools, b.history, b.engine_additions, b.current_message
            ));
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
            for line in lines {
                if writeln!(out, "{line}").is_err() {
                    break;
                }
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
            let bundle = export_bundle(&t, &path);
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
                println!(
                    "exported {} entries{} from {} to {}",
                    summary["entries"],
                    if summary["hasSummary"] == true {
                        " and the latest summary"
                    } else {
                        ""
                    },
                    path.display(),
                    file.display()
                );
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
                println!(
                    "imported {} into a fresh session `{key}` ({}, {entries} entries)",
                    file.display(),
                    path.display()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
    }
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
fn export_bundle(t: &Transcript, path: &Path) -> Value {
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
    let recent: Vec<Value> = ctx
        .iter()
        .filter(|&&i| Some(i) != boundary && entries[i].entry_type() == "message")
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
            "contextTokens": t.context_tokens(),
            "compactionCount": t.compaction_count(),
            "entriesInFile": entries.len(),
        },
        "summary": summary,
        "checkpoint": checkpoint,
        "entries": recent,
    })
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
        t.append_message(m, &now)
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
