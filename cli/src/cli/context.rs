//! `ctxhost context {status,history,inspect,export,import,search,expand}`: what a session's
//! context holds, how it got there, a portable bundle to start a fresh session from it, and
//! (`super::recall`) everything it ever held. Each subcommand builds a report that prints as
//! lines or, with `--json`, as JSON.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Subcommand;
use ctxhost::bundle::ContextBundle;
use ctxhost::prompt::{PromptSettings, Section};
use ctxhost::session::{Breakdown, ContextOverflow, FlushSignal, ModelRequest, TurnOptions};
use ctxhost::timestamp::now_unix_ms;
use ctxhost::transcript::compaction::{Degradation, Layer, Trigger, degradation_at};
use ctxhost::transcript::status;
use ctxhost::transcript::time::format_iso_ms;
use ctxhost::{AssembledItem, CompactOutcome, Host, SessionTarget};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use super::output::stderr_line;
use super::output::{Bar, Report, emit, thousands};
use super::{SessionFlag, load_transcript, target};

/// How `context status` (and the transcript's `context_tokens`) measures a context, named in
/// both `status` and `inspect` so their figures are never mistaken for one another.
const RECORDED_METHOD: &str = "recorded-usage";
const RECORDED_METHOD_TEXT: &str = "recorded usage (the last assistant turn's usage + chars/4 of later messages; chars/4 of all without usage)";

#[derive(Subcommand)]
pub(super) enum ContextCommand {
    /// Tokens / window, compaction count, last compaction, degradation risk (reads only the
    /// end of the transcript).
    Status {
        #[command(flatten)]
        session: SessionFlag,
        /// Count the system prompt this workspace adds (bootstrap files, skills) too.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Every compaction on the active branch, and every turn `serve` answered (the ledger).
    History {
        #[command(flatten)]
        session: SessionFlag,
        #[arg(long)]
        json: bool,
    },
    /// The request exactly as the next model call would get it: system prompt sections,
    /// truncation notes, messages, with tokens per block and a breakdown that adds up.
    Inspect {
        #[command(flatten)]
        session: SessionFlag,
        /// The agent's workspace (bootstrap files, skills); default agents.defaults.workspace.
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        #[arg(long)]
        json: bool,
    },
    /// Writes a portable bundle (latest summary, checkpoint data, recent entries, metadata).
    Export {
        #[command(flatten)]
        session: SessionFlag,
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
    /// Searches every message of the session, compacted ones included (what the agent's
    /// ctx_search tool sees).
    Search(super::recall::SearchArgs),
    /// Shows the original text of entries: an id, a summary's citation, a range (what the
    /// agent's ctx_expand tool returns).
    Expand(super::recall::ExpandArgs),
}

pub(super) async fn run(host: Host, command: ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Status {
            session,
            workspace,
            json,
        } => emit(&status(&host, &session, workspace)?, json)?,
        ContextCommand::History { session, json } => emit(&history(&host, &session)?, json)?,
        ContextCommand::Inspect {
            session,
            workspace,
            json,
        } => {
            let (_, path) = session.existing(&host)?;
            let settings = prompt_settings(&host, workspace);
            let inspected = inspect(&host, &path, &settings).await?;
            emit(&InspectReport::new(&path, &settings, &inspected), json)?
        }
        ContextCommand::Export {
            session,
            file,
            json,
        } => emit(&export(&host, &session, file)?, json)?,
        ContextCommand::Import {
            file,
            session,
            json,
        } => emit(&import(&host, file, session.as_deref())?, json)?,
        ContextCommand::Search(args) => emit(&super::recall::search(&host, &args)?, args.json())?,
        ContextCommand::Expand(args) => emit(&super::recall::expand(&host, &args)?, args.json())?,
    }
    Ok(ExitCode::SUCCESS)
}

/// "3 hours 2 minutes ago", "6 months 24 days ago": the two largest units are enough to
/// place an event; more ("6months 24days 8h 48m 24s") is noise.
fn ago(ms: Option<u64>) -> String {
    match ms {
        Some(ms) if ms > 0 => elapsed_text(now_unix_ms().saturating_sub(ms) / 1000),
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

/// `context status`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct StatusReport {
    session: String,
    session_id: String,
    context_tokens: u64,
    context_tokens_method: &'static str,
    system_tokens: u64,
    context_window: u64,
    utilisation: f64,
    context_messages: usize,
    compaction_count: u64,
    summary_count: u64,
    count_source: &'static str,
    last_compaction: Option<LastCompaction>,
    degradation: Degradation,
    file_bytes: u64,
    bytes_scanned: u64,
    elapsed_ms: f64,
}

/// The latest compaction on the active branch, as `context status` shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LastCompaction {
    id: String,
    timestamp: Option<String>,
    ago: String,
    tokens_before: u64,
    tokens_after: Option<u64>,
    layer: Option<Layer>,
    trigger: Option<Trigger>,
}

fn status(
    host: &Host,
    session: &SessionFlag,
    workspace: Option<PathBuf>,
) -> anyhow::Result<StatusReport> {
    let window = host.compaction_settings().context_window;
    let system_tokens = workspace
        .map(|dir| ctxhost::prompt::system_tokens(&prompt_settings(host, Some(dir))))
        .unwrap_or(0);
    let (_, path) = session.existing(host)?;
    let started = std::time::Instant::now();
    let s = status::scan_for_window(&path, window)?;
    let elapsed = started.elapsed();
    for w in &s.warnings {
        stderr_line!("warning: {w}");
    }
    let last_compaction = s.last_compaction.as_ref().map(|c| {
        let record = c.details.as_ref();
        LastCompaction {
            id: c.id.clone(),
            timestamp: c.timestamp.map(format_iso_ms),
            ago: ago(c.timestamp),
            tokens_before: c.tokens_before,
            tokens_after: record.and_then(|r| r.tokens_after),
            layer: record.and_then(|r| r.layer),
            trigger: record.and_then(|r| r.trigger),
        }
    });
    let utilisation = (s.context_tokens + system_tokens) as f64 / window.max(1) as f64;
    Ok(StatusReport {
        session: path.display().to_string(),
        session_id: s.session_id,
        context_tokens: s.context_tokens,
        context_tokens_method: RECORDED_METHOD,
        system_tokens,
        context_window: window,
        utilisation,
        context_messages: s.context_messages,
        compaction_count: s.compaction_count,
        summary_count: s.summary_count,
        count_source: s.count_source.as_str(),
        last_compaction,
        degradation: degradation_at(s.summary_count, utilisation),
        file_bytes: s.file_bytes,
        bytes_scanned: s.bytes_scanned,
        elapsed_ms: elapsed.as_secs_f64() * 1e3,
    })
}

impl Report for StatusReport {
    fn lines(&self) -> Vec<String> {
        let window = self.context_window;
        let used = self.context_tokens + self.system_tokens;
        let d = &self.degradation;
        vec![
            format!("session       {} ({})", self.session, self.session_id),
            format!(
                "context       {} / {} tokens ({:.1}%), {} messages{}",
                thousands(used),
                thousands(window),
                used as f64 * 100.0 / window.max(1) as f64,
                self.context_messages,
                if self.system_tokens > 0 {
                    format!(" (+{} system prompt)", thousands(self.system_tokens))
                } else {
                    String::new()
                }
            ),
            // Two commands, two measures: say which this is and where the other is.
            format!(
                "              by {RECORDED_METHOD_TEXT}; `context inspect` counts the whole request by chars/4"
            ),
            // The count is exact now (active branch only), so it needs no qualifier.
            format!("compactions   {}", self.compaction_count),
            match &self.last_compaction {
                Some(c) => format!(
                    "last          {} ({}), {} tokens before",
                    c.ago,
                    c.layer
                        .map_or_else(|| "layer not recorded".into(), |l| l.to_string()),
                    thousands(c.tokens_before)
                ),
                None => "last          never compacted".into(),
            },
            format!("degradation   {} risk: {}", d.risk, d.recommendation),
        ]
    }
}

/// `context history`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HistoryReport {
    session: String,
    compactions: Vec<HistoryRow>,
    /// Every turn `serve` answered, from the session's ledger.
    turns: super::turns::TurnLedger,
}

/// One compaction on the active branch.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HistoryRow {
    id: String,
    line: usize,
    timestamp: Option<String>,
    ago: String,
    layer: Option<Layer>,
    trigger: Option<Trigger>,
    tokens_before: u64,
    tokens_after: Option<u64>,
    messages_compacted: Option<u64>,
    summarizer: Option<String>,
    first_kept_entry_id: Option<String>,
}

fn history(host: &Host, session: &SessionFlag) -> anyhow::Result<HistoryReport> {
    let (_, path) = session.existing(host)?;
    let t = load_transcript(&path)?;
    let compactions = t
        .active_branch()
        .into_iter()
        .map(|i| &t.entries()[i])
        .filter(|e| e.entry_type() == "compaction")
        .map(|e| {
            let record = e.compaction_record();
            HistoryRow {
                id: e.id().to_string(),
                line: e.line_number(),
                timestamp: e.timestamp().map(format_iso_ms),
                ago: ago(e.timestamp()),
                layer: record.and_then(|r| r.layer),
                trigger: record.and_then(|r| r.trigger),
                tokens_before: e.tokens_before(),
                tokens_after: record.and_then(|r| r.tokens_after),
                messages_compacted: record.and_then(|r| r.messages_compacted),
                summarizer: record.and_then(|r| r.summarizer.clone()).flatten(),
                first_kept_entry_id: e.first_kept_entry_id().map(str::to_string),
            }
        })
        .collect();
    Ok(HistoryReport {
        session: path.display().to_string(),
        compactions,
        turns: super::turns::TurnLedger::read(&path)?,
    })
}

impl Report for HistoryReport {
    fn lines(&self) -> Vec<String> {
        let mut lines = if self.compactions.is_empty() {
            vec![format!("{}: no compactions", self.session)]
        } else {
            history_table(&self.compactions)
        };
        lines.extend(self.turns.lines());
        lines
    }
}

/// `context history` as a table: a header row, then one row per compaction; token figures with
/// thousands separators, right-aligned.
fn history_table(rows: &[HistoryRow]) -> Vec<String> {
    let text = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let number = |n: Option<u64>| text(n.map(thousands));
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
            text(r.timestamp.clone()),
            format!("({})", r.ago),
            text(r.layer.map(|l| l.to_string())),
            text(r.trigger.map(|t| t.to_string())),
            number(Some(r.tokens_before)),
            number(r.tokens_after),
            number(r.messages_compacted),
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

/// What `context inspect` found by running the engine on a scratch copy.
struct Inspected {
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

async fn inspect(host: &Host, path: &Path, settings: &PromptSettings) -> anyhow::Result<Inspected> {
    let window = host.compaction_settings().context_window;
    // Validate (file:line errors) before the engine sees it; and the figure `status` shows,
    // named beside this command's own count.
    let recorded = load_transcript(path)?.context_tokens_in_window(window);
    // The engine runs on a scratch copy: inspecting never rewrites the session.
    let scratch = super::scratch_dir()?;
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
pub(super) struct InspectReport<'a> {
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
    fn new(path: &Path, settings: &'a PromptSettings, inspected: &'a Inspected) -> Self {
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

/// `context export`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct ExportReport {
    session: String,
    bundle: String,
    entries: usize,
    has_summary: bool,
    has_checkpoint: bool,
}

fn export(host: &Host, session: &SessionFlag, file: PathBuf) -> anyhow::Result<ExportReport> {
    let window = host.compaction_settings().context_window;
    let (_, path) = session.existing(host)?;
    let t = load_transcript(&path)?;
    let bundle = ContextBundle::export(&t, &path, window);
    bundle.write(&file)?;
    Ok(ExportReport {
        session: path.display().to_string(),
        bundle: file.display().to_string(),
        entries: bundle.entries.len(),
        has_summary: bundle.summary.is_some(),
        has_checkpoint: bundle.checkpoint.is_some(),
    })
}

impl Report for ExportReport {
    fn lines(&self) -> Vec<String> {
        vec![format!(
            "exported {} entries{} from {} to {}",
            self.entries,
            if self.has_summary {
                " and the latest summary"
            } else {
                ""
            },
            self.session,
            self.bundle
        )]
    }
}

/// `context import`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ImportReport {
    session: String,
    path: String,
    entries: usize,
    #[serde(skip)]
    bundle: String,
}

fn import(host: &Host, file: PathBuf, session: Option<&str>) -> anyhow::Result<ImportReport> {
    let name = file.display().to_string();
    let bundle = ContextBundle::read(&file)?;
    let session_id = uuid::Uuid::new_v4().to_string();
    let target = match session {
        Some(session) => target(session),
        None => SessionTarget::Key(format!("imported-{}", &session_id[..8])),
    };
    let (key, path) = host.session_path(&target)?;
    let bar = Bar::spinner("importing");
    let entries = bundle.create_session(&path, &session_id, &name);
    bar.finish();
    Ok(ImportReport {
        session: key,
        path: path.display().to_string(),
        entries: entries?,
        bundle: name,
    })
}

impl Report for ImportReport {
    fn lines(&self) -> Vec<String> {
        vec![format!(
            "imported {} into a fresh session `{}` ({}, {} entries)",
            self.bundle, self.session, self.path, self.entries
        )]
    }
}

/// The prompt settings of the config, with `--workspace` taking precedence.
fn prompt_settings(host: &Host, workspace: Option<PathBuf>) -> PromptSettings {
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
        let rows = vec![HistoryRow {
            id: "c1".into(),
            line: 9,
            timestamp: Some("2025-01-01T00:00:00.000Z".into()),
            ago: "2 days ago".into(),
            layer: Some(Layer::Summarize),
            trigger: Some(Trigger::Manual),
            tokens_before: 123_456,
            tokens_after: Some(20_000),
            messages_compacted: Some(1_024),
            summarizer: None,
            first_kept_entry_id: None,
        }];
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
