//! `ctxhost compact --session S [--focus TEXT] [--dry-run] [--yes] [--json]`: compacts a
//! session through its active engine (the legacy engine delegates to the runtime compaction);
//! a dry run shows what the runtime compaction would do without writing anything.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use clap::Args;
use ctxhost::config::{Config, Home};
use ctxhost::transcript::Transcript;
use ctxhost::transcript::compaction::{self, Request, Trigger};
use ctxhost::{CompactOptions, Host, SessionTarget};
use serde_json::{Value, json};

use super::output::{Bar, print_json, thousands};

#[derive(Args)]
pub struct CompactArgs {
    /// A transcript path, or a session key under $CTXHOST_HOME/sessions/.
    #[arg(long)]
    session: String,
    /// A custom instruction for the summary (what to keep).
    #[arg(long, value_name = "TEXT")]
    focus: Option<String>,
    /// Show what would happen; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Do not ask before writing.
    #[arg(long)]
    yes: bool,
    #[arg(long)]
    json: bool,
}

/// A `--session` value: an existing file or anything that looks like a path is a path;
/// otherwise a key under `$CTXHOST_HOME/sessions/`.
pub fn target(session: &str) -> SessionTarget {
    let path = Path::new(session);
    if path.exists() || session.contains('/') || session.ends_with(".jsonl") {
        SessionTarget::Path(path.to_path_buf())
    } else {
        SessionTarget::Key(session.to_string())
    }
}

/// The transcript file of `--session`, which must exist.
pub fn existing_path(host: &Host, session: &str) -> anyhow::Result<(SessionTarget, PathBuf)> {
    let target = target(session);
    let (_, path) = host.session_path(&target)?;
    if !path.is_file() {
        bail!("no session transcript at {}", path.display());
    }
    Ok((target, path))
}

pub fn host(home: Home, config: Config) -> anyhow::Result<Host> {
    Ok(Host::new(home, config)?)
}

pub async fn run(home: Home, config: Config, args: CompactArgs) -> anyhow::Result<ExitCode> {
    let host = host(home, config)?;
    let (target, path) = existing_path(&host, &args.session)?;
    // Validate before anything can write: errors name the file, line and problem.
    let transcript = Transcript::load(&path)?;
    for w in transcript.warnings() {
        eprintln!("warning: {w}");
    }
    let settings = host.compaction_settings();
    if let Err(problem) = host
        .config()
        .settings
        .agents
        .defaults
        .compaction
        .summarizer()
    {
        bail!(
            "config {}: {problem}",
            host.config().source.path().display()
        );
    }
    let window = settings.context_window;
    let request = Request {
        trigger: Trigger::Manual,
        focus: args.focus.as_deref(),
        engine: None,
        context_tokens: None,
    };
    let prepared = compaction::prepare(&transcript, &settings, &request);
    let tokens_now = transcript.context_tokens();
    let pct = |t: u64| t as f64 * 100.0 / window.max(1) as f64;

    if args.dry_run {
        let value = match &prepared {
            Ok(job) => {
                let e = job.estimate();
                json!({
                    "session": path.display().to_string(),
                    "dryRun": true,
                    "wouldCompact": true,
                    "layer": e.layer.as_str(),
                    "contextWindow": window,
                    "tokensBefore": e.tokens_before,
                    "estimatedTokensAfter": e.tokens_after,
                    "estimatedSavings": e.tokens_before.saturating_sub(e.tokens_after),
                    "messagesToSummarize": e.messages_to_summarize,
                    "toolOutputsPruned": e.tool_outputs_pruned,
                    "summarizer": settings.summarizer.name(),
                })
            }
            Err(skip) => json!({
                "session": path.display().to_string(),
                "dryRun": true,
                "wouldCompact": false,
                "tokensBefore": tokens_now,
                "contextWindow": window,
                "reason": skip.reason,
            }),
        };
        if args.json {
            print_json(&value)?;
        } else if let Ok(job) = &prepared {
            let e = job.estimate();
            println!("session            {}", path.display());
            println!(
                "current tokens     {} / {} ({:.1}%)",
                thousands(e.tokens_before),
                thousands(window),
                pct(e.tokens_before)
            );
            println!(
                "estimated after    ~{} ({:.1}%)",
                thousands(e.tokens_after),
                pct(e.tokens_after)
            );
            println!(
                "savings            ~{}",
                thousands(e.tokens_before.saturating_sub(e.tokens_after))
            );
            println!(
                "layer              {} ({} messages summarized, {} tool outputs pruned, summarizer {})",
                e.layer.as_str(),
                e.messages_to_summarize,
                e.tool_outputs_pruned,
                settings.summarizer.name()
            );
            println!("(dry run: nothing written)");
        } else if let Err(skip) = &prepared {
            println!("nothing to compact: {}", skip.reason);
        }
        return Ok(ExitCode::SUCCESS);
    }

    let estimate = match &prepared {
        Ok(job) => job.estimate(),
        Err(skip) => {
            if args.json {
                print_json(
                    &json!({"session": path.display().to_string(), "compacted": false, "reason": skip.reason}),
                )?;
            } else {
                println!("nothing to compact: {}", skip.reason);
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    drop(transcript);
    if !args.yes && std::io::stdin().is_terminal() && !args.json {
        print!(
            "compact {} ({} layer, {} -> ~{} tokens)? [y/N] ",
            path.display(),
            estimate.layer.as_str(),
            thousands(estimate.tokens_before),
            thousands(estimate.tokens_after)
        );
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("not compacted");
            return Ok(ExitCode::SUCCESS);
        }
    }

    let bar = Bar::new("compacting");
    let outcome = async {
        let mut session = host.open_session(&target).await?;
        let outcome = session
            .compact(&CompactOptions {
                force: true,
                custom_instructions: args.focus.clone(),
                ..CompactOptions::default()
            })
            .await?;
        let details = {
            let t = session.transcript();
            t.entries()
                .iter()
                .rev()
                .find(|e| e.entry_type() == "compaction")
                .and_then(|e| serde_json::from_str::<Value>(e.line()).ok())
                .and_then(|v| v.get("details").cloned())
        };
        session.close().await?;
        anyhow::Ok((outcome, details))
    }
    .await;
    bar.finish();
    let (outcome, details) = outcome.with_context(|| format!("compacting {}", path.display()))?;
    let details = details.filter(|_| outcome.compacted).unwrap_or(Value::Null);
    let value = json!({
        "session": path.display().to_string(),
        "compacted": outcome.compacted,
        "reason": outcome.reason,
        "tokensBefore": outcome.tokens_before,
        "tokensAfter": outcome.tokens_after,
        "firstKeptEntryId": outcome.first_kept_entry_id,
        "layer": details.get("layer"),
        "degradation": details.get("degradation"),
        "warnings": details.get("warnings"),
        "details": details,
    });
    if args.json {
        print_json(&value)?;
        return Ok(ExitCode::SUCCESS);
    }
    if !outcome.compacted {
        println!(
            "not compacted: {}",
            outcome.reason.as_deref().unwrap_or("the engine declined")
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "compacted {}: {} -> {} tokens ({} layer), first kept entry {}",
        path.display(),
        thousands(outcome.tokens_before),
        thousands(outcome.tokens_after),
        details
            .get("layer")
            .and_then(Value::as_str)
            .unwrap_or("engine"),
        outcome.first_kept_entry_id.as_deref().unwrap_or("?")
    );
    if let Some(d) = details.get("degradation") {
        println!(
            "degradation        {} risk after {} summaries: {}",
            d["risk"].as_str().unwrap_or("?"),
            d["count"],
            d["recommendation"].as_str().unwrap_or("")
        );
    }
    for w in details
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        println!("warning: {}", w.as_str().unwrap_or_default());
    }
    Ok(ExitCode::SUCCESS)
}
