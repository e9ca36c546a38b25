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
use ctxhost::{CompactOptions, Host, Session, SessionTarget};
use serde_json::{Value, json};

use super::output::{Bar, Out, print_json, thousands};

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

/// What compacting now would do, by the measure `Session::compact` decides with: the host's
/// count of the context messages before and after (recorded usage is not comparable with it).
struct Forecast {
    /// The context messages now.
    before: u64,
    /// Recorded usage (plus estimates after it), when the transcript has any: shown beside the
    /// count so the two are never confused.
    recorded: u64,
    outcome: Result<Expected, String>,
}

struct Expected {
    estimate: compaction::Estimate,
    after: u64,
    /// True when `after` comes from running the (local, deterministic) extractive summarizer,
    /// as the real run will; otherwise the summary is counted at its bound.
    exact: bool,
}

impl Forecast {
    fn new(transcript: &Transcript, settings: &compaction::Settings, focus: Option<&str>) -> Self {
        let window = settings.context_window;
        let (before, fullness) = Session::compaction_tokens(transcript, window);
        // The same request `Session::compact` gives the runtime compaction.
        let request = Request {
            trigger: Trigger::Manual,
            focus,
            engine: None,
            context_tokens: Some(fullness),
        };
        let outcome = compaction::prepare(transcript, settings, &request)
            .map_err(|skip| skip.reason)
            .map(|job| {
                let estimate = job.estimate();
                let exact = (settings.summarizer == compaction::SummarizerConfig::Extractive)
                    .then(|| job.run(&compaction::Extractive, &mut |_, _| {}))
                    .and_then(|plan| {
                        Session::compaction_tokens_after(
                            transcript,
                            &plan.summary,
                            plan.first_kept_index,
                            &plan.details,
                        )
                    });
                Expected {
                    after: exact.unwrap_or(estimate.tokens_after),
                    exact: exact.is_some(),
                    estimate,
                }
            });
        Self {
            before,
            recorded: transcript.context_tokens_in_window(window),
            outcome,
        }
    }

    /// Why compacting would be refused (it would not shrink the context), if it would.
    fn refusal(&self) -> Option<String> {
        let after = self.outcome.as_ref().ok()?.after;
        (after >= self.before).then(|| {
            format!(
                "refused: the compaction would not make the context smaller ({} -> ~{} tokens, both counted from the context messages)",
                thousands(self.before),
                thousands(after)
            )
        })
    }
}

/// "1 summary", "2 summaries".
fn summaries(n: u64) -> String {
    if n == 1 {
        "1 summary".into()
    } else {
        format!("{n} summaries")
    }
}

pub async fn run(home: Home, config: Config, args: CompactArgs) -> anyhow::Result<ExitCode> {
    let host = host(home, config)?;
    let (target, path) = existing_path(&host, &args.session)?;
    // Validate before anything can write: errors name the file, line and problem.
    let mut transcript = Transcript::load(&path)?;
    for w in transcript.warnings() {
        eprintln!("warning: {w}");
    }
    let settings = host.compaction_settings();
    let defaults = &host.config().settings.agents.defaults.compaction;
    let config_problem = |problem: String| {
        anyhow::anyhow!(
            "config {}: {problem}",
            host.config().source.path().display()
        )
    };
    defaults.summarizer().map_err(config_problem)?;
    // Count as the session will (the configured counter), so the forecast matches the run.
    let counter = defaults.token_counter().map_err(config_problem)?;
    if counter.is_some() {
        transcript.set_token_counter(counter);
    }
    let window = settings.context_window;
    let forecast = Forecast::new(&transcript, &settings, args.focus.as_deref());
    let pct = |t: u64| t as f64 * 100.0 / window.max(1) as f64;

    if args.dry_run {
        let refusal = forecast.refusal();
        let value = match &forecast.outcome {
            Ok(x) => json!({
                "session": path.display().to_string(),
                "dryRun": true,
                "wouldCompact": refusal.is_none(),
                "reason": refusal,
                "layer": x.estimate.layer.as_str(),
                "contextWindow": window,
                "tokensBefore": forecast.before,
                "recordedContextTokens": forecast.recorded,
                "estimatedTokensAfter": x.after,
                "estimateExact": x.exact,
                "estimatedSavings": forecast.before.saturating_sub(x.after),
                "messagesToSummarize": x.estimate.messages_to_summarize,
                "toolOutputsPruned": x.estimate.tool_outputs_pruned,
                "summarizer": settings.summarizer.name(),
            }),
            Err(reason) => json!({
                "session": path.display().to_string(),
                "dryRun": true,
                "wouldCompact": false,
                "tokensBefore": forecast.before,
                "recordedContextTokens": forecast.recorded,
                "contextWindow": window,
                "reason": reason,
            }),
        };
        if args.json {
            print_json(&value)?;
            return Ok(ExitCode::SUCCESS);
        }
        let mut out = Out::new();
        match &forecast.outcome {
            Ok(x) => {
                out.line(format!("session            {}", path.display()));
                out.line(format!(
                    "current tokens     {} / {} ({:.1}%), counted from the context messages",
                    thousands(forecast.before),
                    thousands(window),
                    pct(forecast.before)
                ));
                if forecast.recorded != forecast.before {
                    out.line(format!(
                        "recorded usage     {} (the last assistant turn's usage + estimates after it; not comparable)",
                        thousands(forecast.recorded)
                    ));
                }
                out.line(format!(
                    "{:<19}{}{} ({:.1}%)",
                    if x.exact { "after" } else { "estimated after" },
                    if x.exact { "" } else { "~" },
                    thousands(x.after),
                    pct(x.after)
                ));
                out.line(format!(
                    "savings            {}",
                    thousands(forecast.before.saturating_sub(x.after))
                ));
                out.line(format!(
                    "layer              {} ({} messages summarized, {} tool outputs pruned, summarizer {})",
                    x.estimate.layer.as_str(),
                    x.estimate.messages_to_summarize,
                    x.estimate.tool_outputs_pruned,
                    settings.summarizer.name()
                ));
                if let Some(refusal) = &refusal {
                    out.line(format!("would not compact: {refusal}"));
                }
                out.line("(dry run: nothing written)".into());
            }
            Err(reason) => out.line(format!("nothing to compact: {reason}")),
        }
        return Ok(ExitCode::SUCCESS);
    }

    let expected = match &forecast.outcome {
        Ok(x) => x,
        Err(reason) => {
            if args.json {
                print_json(
                    &json!({"session": path.display().to_string(), "compacted": false, "reason": reason}),
                )?;
            } else {
                Out::new().line(format!("nothing to compact: {reason}"));
            }
            return Ok(ExitCode::SUCCESS);
        }
    };
    if !args.yes && std::io::stdin().is_terminal() && !args.json {
        print!(
            "compact {} ({} layer, {} -> {}{} tokens)? [y/N] ",
            path.display(),
            expected.estimate.layer.as_str(),
            thousands(forecast.before),
            if expected.exact { "" } else { "~" },
            thousands(expected.after)
        );
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            println!("not compacted");
            return Ok(ExitCode::SUCCESS);
        }
    }
    drop(transcript);

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
    let mut out = Out::new();
    if !outcome.compacted {
        out.line(format!(
            "not compacted: {}",
            outcome.reason.as_deref().unwrap_or("the engine declined")
        ));
        return Ok(ExitCode::SUCCESS);
    }
    out.line(format!(
        "compacted {}: {} -> {} tokens ({} layer), first kept entry {}",
        path.display(),
        thousands(outcome.tokens_before),
        thousands(outcome.tokens_after),
        details
            .get("layer")
            .and_then(Value::as_str)
            .unwrap_or("engine"),
        outcome.first_kept_entry_id.as_deref().unwrap_or("?")
    ));
    if let Some(d) = details.get("degradation") {
        out.line(format!(
            "degradation        {} risk after {}: {}",
            d["risk"].as_str().unwrap_or("?"),
            summaries(d["count"].as_u64().unwrap_or(0)),
            d["recommendation"].as_str().unwrap_or("")
        ));
    }
    for w in details
        .get("warnings")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        out.line(format!("warning: {}", w.as_str().unwrap_or_default()));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn summaries_agree_in_number() {
        assert_eq!(super::summaries(1), "1 summary");
        assert_eq!(super::summaries(0), "0 summaries");
        assert_eq!(super::summaries(3), "3 summaries");
    }
}
