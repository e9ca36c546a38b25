//! `ctxhost compact --session S [--focus TEXT] [--dry-run] [--yes] [--json]`: compacts a
//! session through its active engine (the legacy engine delegates to the built-in compaction);
//! a dry run shows what the built-in compaction would do without writing anything.

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use ctxhost::transcript::Transcript;
use ctxhost::transcript::compaction::{
    self, CompactionRecord, Degradation, Layer, Request, Trigger,
};
use ctxhost::{CompactOptions, Host, Session, SessionTarget};
use schemars::JsonSchema;
use serde::Serialize;

use super::output::stdout_line;
use super::output::{Bar, Report, emit, thousands};
use super::sessions::{SessionFlag, load_transcript};

#[derive(Args)]
pub(super) struct CompactArgs {
    #[command(flatten)]
    session: SessionFlag,
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
    fn new(
        transcript: &Transcript,
        settings: &compaction::Settings,
        extractive: bool,
        focus: Option<&str>,
    ) -> Self {
        let window = settings.context_window;
        let (before, fullness) = Session::compaction_tokens(transcript, window);
        // The same request `Session::compact` gives the built-in compaction.
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
                let exact = extractive
                    .then(|| job.run(&compaction::Extractive))
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

pub(super) async fn run(host: Host, args: CompactArgs) -> anyhow::Result<ExitCode> {
    let (target, path) = args.session.existing(&host)?;
    // Validate before anything can write: errors name the file, line and problem.
    let mut transcript = load_transcript(&path)?;
    let settings = host.compaction_settings();
    // Count as the session will (the configured counter), so the forecast matches the run.
    let counter = host
        .config()
        .settings
        .agents
        .defaults
        .compaction
        .token_counter
        .counter();
    if counter.is_some() {
        transcript.set_token_counter(counter);
    }
    let forecast = Forecast::new(
        &transcript,
        &settings,
        host.model_config().is_extractive(),
        args.focus.as_deref(),
    );
    if args.dry_run {
        let report = DryRun::new(
            &path,
            &forecast,
            settings.context_window,
            host.model_config().name(),
        );
        emit(&report, args.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let expected = match &forecast.outcome {
        Ok(x) => x,
        Err(reason) => {
            let report = NothingToCompact {
                session: path.display().to_string(),
                compacted: false,
                reason: reason.clone(),
            };
            emit(&report, args.json)?;
            return Ok(ExitCode::SUCCESS);
        }
    };
    if !args.yes && std::io::stdin().is_terminal() && !args.json {
        // A question, so no newline: written (not `print!`, which panics on a closed pipe).
        write!(
            std::io::stdout(),
            "compact {} ({} layer, {} -> {}{} tokens)? [y/N] ",
            path.display(),
            expected.estimate.layer,
            thousands(forecast.before),
            if expected.exact { "" } else { "~" },
            thousands(expected.after)
        )?;
        std::io::stdout().flush()?;
        let mut answer = String::new();
        std::io::stdin().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            stdout_line!("not compacted");
            return Ok(ExitCode::SUCCESS);
        }
    }
    drop(transcript);
    let report = compact(&host, &target, &path, args.focus)
        .await
        .with_context(|| format!("compacting {}", path.display()))?;
    emit(&report, args.json)?;
    Ok(ExitCode::SUCCESS)
}

/// Compacts through the engine, with what it recorded.
async fn compact(
    host: &Host,
    target: &SessionTarget,
    path: &Path,
    focus: Option<String>,
) -> anyhow::Result<Compacted> {
    let bar = Bar::spinner("compacting");
    let outcome = async {
        let mut session = host
            .open_session(target, &ctxhost::SessionOptions::default())
            .await?;
        let options = CompactOptions {
            force: true,
            custom_instructions: focus,
            ..CompactOptions::default()
        };
        let outcome = session.compact(&options).await?;
        let record = outcome
            .compacted
            .then(|| {
                let t = session.transcript();
                t.entries()
                    .iter()
                    .rev()
                    .find(|e| e.entry_type() == "compaction")
                    .and_then(|e| e.compaction_record().cloned())
            })
            .flatten();
        let backup = session.transcript_backup().map(|p| p.display().to_string());
        session.close().await?;
        anyhow::Ok((outcome, record, backup))
    }
    .await;
    bar.finish();
    let (outcome, record, backup) = outcome?;
    Ok(Compacted {
        session: path.display().to_string(),
        compacted: outcome.compacted,
        reason: outcome.reason,
        tokens_before: outcome.tokens_before,
        tokens_after: outcome.tokens_after,
        first_kept_entry_id: outcome.first_kept_entry_id,
        layer: record.as_ref().and_then(|r| r.layer),
        degradation: record.as_ref().and_then(|r| r.degradation.clone()),
        warnings: record
            .as_ref()
            .map(|r| r.warnings.clone())
            .filter(|w| !w.is_empty()),
        details: record,
        backup,
    })
}

/// A dry run.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) struct DryRun {
    session: String,
    dry_run: bool,
    would_compact: bool,
    /// Why it would not compact.
    reason: Option<String>,
    context_window: u64,
    tokens_before: u64,
    recorded_context_tokens: u64,
    /// What it would do, when there is something to do.
    #[serde(flatten)]
    expected: Option<ExpectedFigures>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ExpectedFigures {
    layer: Layer,
    estimated_tokens_after: u64,
    estimate_exact: bool,
    estimated_savings: u64,
    messages_to_summarize: usize,
    tool_outputs_pruned: usize,
    summarizer: String,
}

impl DryRun {
    fn new(path: &Path, forecast: &Forecast, window: u64, summarizer: String) -> Self {
        let refusal = forecast.refusal();
        let (reason, expected) = match &forecast.outcome {
            Ok(x) => (
                refusal,
                Some(ExpectedFigures {
                    layer: x.estimate.layer,
                    estimated_tokens_after: x.after,
                    estimate_exact: x.exact,
                    estimated_savings: forecast.before.saturating_sub(x.after),
                    messages_to_summarize: x.estimate.messages_to_summarize,
                    tool_outputs_pruned: x.estimate.tool_outputs_pruned,
                    summarizer,
                }),
            ),
            Err(reason) => (Some(reason.clone()), None),
        };
        DryRun {
            session: path.display().to_string(),
            dry_run: true,
            would_compact: expected.is_some() && reason.is_none(),
            reason,
            context_window: window,
            tokens_before: forecast.before,
            recorded_context_tokens: forecast.recorded,
            expected,
        }
    }
}

impl Report for DryRun {
    fn lines(&self) -> Vec<String> {
        let Some(x) = &self.expected else {
            return vec![format!(
                "nothing to compact: {}",
                self.reason.as_deref().unwrap_or_default()
            )];
        };
        let window = self.context_window;
        let pct = |t: u64| t as f64 * 100.0 / window.max(1) as f64;
        let mut lines = vec![
            format!("session            {}", self.session),
            format!(
                "current tokens     {} / {} ({:.1}%), counted from the context messages",
                thousands(self.tokens_before),
                thousands(window),
                pct(self.tokens_before)
            ),
        ];
        if self.recorded_context_tokens != self.tokens_before {
            lines.push(format!(
                "recorded usage     {} (the last assistant turn's usage + estimates after it; not comparable)",
                thousands(self.recorded_context_tokens)
            ));
        }
        let exact = x.estimate_exact;
        lines.push(format!(
            "{:<19}{}{} ({:.1}%)",
            if exact { "after" } else { "estimated after" },
            if exact { "" } else { "~" },
            thousands(x.estimated_tokens_after),
            pct(x.estimated_tokens_after)
        ));
        lines.push(format!(
            "savings            {}",
            thousands(x.estimated_savings)
        ));
        lines.push(format!(
            "layer              {} ({} messages summarized, {} tool outputs pruned, summarizer {})",
            x.layer, x.messages_to_summarize, x.tool_outputs_pruned, x.summarizer
        ));
        if let Some(refusal) = &self.reason {
            lines.push(format!("would not compact: {refusal}"));
        }
        lines.push("(dry run: nothing written)".into());
        lines
    }
}

/// The built-in compaction would not do anything.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NothingToCompact {
    session: String,
    compacted: bool,
    reason: String,
}

impl Report for NothingToCompact {
    fn lines(&self) -> Vec<String> {
        vec![format!("nothing to compact: {}", self.reason)]
    }
}

/// What `compact` did, with the record the compaction left.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Compacted {
    session: String,
    compacted: bool,
    reason: Option<String>,
    tokens_before: u64,
    tokens_after: u64,
    first_kept_entry_id: Option<String>,
    layer: Option<Layer>,
    degradation: Option<Degradation>,
    warnings: Option<Vec<String>>,
    /// The compaction entry's record as the transcript keeps it (its `details`; every key
    /// optional, see the transcript format).
    #[schemars(with = "Option<serde_json::Map<String, serde_json::Value>>")]
    details: Option<CompactionRecord>,
    /// Where the file's previous bytes were kept, when writing the compaction rewrote it (an
    /// older version migrated, a torn last line set aside).
    backup: Option<String>,
}

impl Report for Compacted {
    fn lines(&self) -> Vec<String> {
        if !self.compacted {
            return vec![format!(
                "not compacted: {}",
                self.reason.as_deref().unwrap_or("the engine declined")
            )];
        }
        let mut lines = vec![format!(
            "compacted {}: {} -> {} tokens ({} layer), first kept entry {}",
            self.session,
            thousands(self.tokens_before),
            thousands(self.tokens_after),
            self.layer
                .map_or_else(|| "engine".into(), |l| l.to_string()),
            self.first_kept_entry_id.as_deref().unwrap_or("?")
        )];
        if let Some(d) = &self.degradation {
            lines.push(format!(
                "degradation        {} risk after {}: {}",
                d.risk,
                summaries(d.count),
                d.recommendation
            ));
        }
        for w in self.warnings.iter().flatten() {
            lines.push(format!("warning: {w}"));
        }
        if let Some(backup) = &self.backup {
            lines.push(format!(
                "rewritten as version 3; the previous file is kept in {backup}"
            ));
        }
        lines
    }
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
