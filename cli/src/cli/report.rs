//! `ctxhost report`: one self-contained HTML page (and a terminal summary) of what each turn
//! cost and what the engine did. For a session: its turn ledger (what `serve` recorded), else
//! the usage its transcript recorded. For a recorded transcript (`--replay`): a replay under
//! each `--engine`, side by side on the same axes.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use ctxhost::Host;
use ctxhost::ledger::{self, LedgerRecord};
use ctxhost::replay::ReplayReport;
use ctxhost::transcript::{Role, Transcript};
use ctxhost_report::{Compaction, Outcome, Report, Run, Turn};

use super::output::{Bar, print_json, stderr_line, stdout_line};
use super::sessions::{SessionFlag, load_transcript};

#[derive(clap::Args)]
pub(super) struct ReportArgs {
    /// A session (key or transcript path): its turns as `serve` recorded them in the ledger,
    /// or, without a ledger, as the transcript's recorded usage shows them.
    #[arg(
        long = "session",
        value_name = "SESSION",
        conflicts_with = "replay",
        required_unless_present = "replay"
    )]
    session: Option<String>,
    /// A recorded transcript to replay under each `--engine`, the runs side by side.
    #[arg(long, value_name = "FILE")]
    replay: Option<PathBuf>,
    /// An engine to replay through; repeat it to compare (default: the configured engine).
    #[arg(long = "engine", value_name = "ID", requires = "replay")]
    engines: Vec<String>,
    /// Context window of the replays, in tokens.
    #[arg(long, default_value_t = 32_000, requires = "replay")]
    window: u64,
    /// The page to write.
    #[arg(long, value_name = "FILE", default_value = "ctxhost-report.html")]
    out: PathBuf,
    /// Print the report's data as JSON instead of the summary.
    #[arg(long)]
    json: bool,
}

pub(super) async fn run(host: Host, args: ReportArgs) -> anyhow::Result<ExitCode> {
    let (report, guards) = match (&args.session, &args.replay) {
        (Some(session), _) => {
            let flag = SessionFlag {
                key_or_path: session.clone(),
            };
            let (_, path) = flag.existing(&host)?;
            (session_report(&host, &path)?, Vec::new())
        }
        (None, Some(file)) => replay_report(&host, file, &args.engines, args.window).await?,
        (None, None) => anyhow::bail!("give --session or --replay"),
    };
    let page = ctxhost_report::render_html(&report);
    std::fs::write(&args.out, &page)
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", args.out.display()))?;
    if args.json {
        print_json(&report)?;
    } else {
        for line in ctxhost_report::render_summary(&report).lines() {
            stdout_line!("{line}");
        }
        for guard in &guards {
            stdout_line!("{guard}");
        }
        stdout_line!("wrote {} ({} bytes)", args.out.display(), page.len());
    }
    Ok(ExitCode::SUCCESS)
}

fn base_report(title: String, session: &Path) -> Report {
    Report {
        title,
        session: session.display().to_string(),
        generated_at: ctxhost::timestamp::now_iso_seconds(),
        runs: Vec::new(),
    }
}

/// A session's report: the ledger when `serve` kept one, else the transcript's usage.
fn session_report(host: &Host, path: &Path) -> anyhow::Result<Report> {
    let settings = host.compaction_settings();
    let history = ledger::read_history(path)?;
    for warning in ctxhost_transcript::shown_warnings(&history.warnings) {
        stderr_line!("warning: {warning}");
    }
    let mut report = base_report(format!("ctxhost report: {}", file_name(path)), path);
    let mut run = Run {
        context_window: settings.context_window,
        threshold: settings.auto_threshold(),
        ..Run::default()
    };
    if history.records.is_empty() {
        let transcript = load_transcript(path)?;
        run.engine = "recorded".into();
        // Usage is what the original run's requests held, engine included.
        recorded_turns(&transcript, &mut run);
    } else {
        let last = history.records.last().expect("not empty");
        run.engine = last.engine.clone();
        run.contract_version = Some(last.contract.clone());
        ledger_turns(&history.records, &mut run);
    }
    report.runs.push(run);
    Ok(report)
}

/// Turns as `serve` recorded them.
fn ledger_turns(records: &[LedgerRecord], run: &mut Run) {
    for (n, record) in records.iter().enumerate() {
        // A ledger written before the message count was recorded numbers its turns instead.
        let message = if record.messages > 0 {
            record.messages + 1
        } else {
            n + 1
        };
        let outcome = serde_json::to_value(record.outcome)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .map_or(Outcome::Ok, Outcome::from);
        run.turns.push(Turn {
            message,
            tokens: u64::from(record.assembled_tokens),
            prefix_share: (n > 0).then(|| record.prefix.share()),
            kept_previous: (n > 0).then_some(record.prefix.kept_previous),
            engine_micros: Some(record.engine_micros),
            outcome,
            note: record.error.clone(),
        });
        if let Some(c) = record.compaction.as_ref().filter(|c| c.compacted) {
            run.compactions.push(Compaction {
                message,
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
                layer: c.layer.clone(),
            });
        }
    }
}

/// Turns as the transcript recorded them: each assistant message is a turn, of the tokens its
/// recorded usage says; each compaction entry is a compaction. A request that was aborted or
/// failed records no usage: its turn is the context's estimate (counted since the last
/// compaction) plus how far the last recorded usage was above the estimate just after it, since
/// the estimate alone leaves out the runtime's system prompt and tools and such a turn would
/// look like a cut. Entries of other types count as messages and are otherwise left alone.
fn recorded_turns(transcript: &Transcript, run: &mut Run) {
    let mut messages = 0;
    let mut context = 0u64;
    let mut usage_above_estimate = 0i64;
    for index in transcript.active_branch() {
        let entry = &transcript.entries()[index];
        if entry.entry_type() == "compaction" {
            let record = entry.compaction_record();
            let after = record.and_then(|r| r.tokens_after);
            run.compactions.push(Compaction {
                message: messages + 1,
                tokens_before: entry.tokens_before(),
                tokens_after: after.unwrap_or_default(),
                layer: (record.and_then(|r| r.layer)).map(|layer| layer.to_string()),
            });
            context = after.unwrap_or_else(|| u64::from(entry.tokens()));
            continue;
        }
        messages += 1;
        let estimate_before = context;
        context += u64::from(entry.tokens());
        if entry.context_role() != Some(Role::Assistant) {
            continue;
        }
        let tokens = match entry.usage_total() {
            Some(usage) => {
                // The usage counts this reply's output too, as the estimate now does.
                usage_above_estimate = i64::try_from(usage).unwrap_or(i64::MAX)
                    - i64::try_from(context).unwrap_or(i64::MAX);
                usage
            }
            None => estimate_before.saturating_add_signed(usage_above_estimate),
        };
        run.turns.push(Turn {
            message: messages,
            tokens,
            ..Turn::default()
        });
    }
}

/// One replay per engine of the recorded transcript at `file`, and per run the latest
/// degradation warning its compactions gave (the summary's own line, not a log line).
async fn replay_report(
    host: &Host,
    file: &Path,
    engines: &[String],
    window: u64,
) -> anyhow::Result<(Report, Vec<String>)> {
    let mut report = base_report(
        format!(
            "ctxhost report: {} at a {window}-token window",
            file_name(file)
        ),
        file,
    );
    let engines = match engines {
        [] => vec![host.active_engine().await?],
        ids => {
            let mut loaded = Vec::new();
            for id in ids {
                loaded.push(host.engine(id).await?);
            }
            loaded
        }
    };
    let scratch = super::sessions::scratch_dir()?;
    let mut guards = Vec::new();
    for (n, engine) in engines.into_iter().enumerate() {
        let output = scratch.path().join(format!("replay-{n}.jsonl"));
        let contract = engine.contract_version().to_string();
        let mut bar = Bar::new(&format!("replaying through {}", engine.id()));
        let replayed = ctxhost::replay::replay(host, file, engine, window, &output, &mut bar).await;
        bar.finish();
        let replayed = replayed?;
        let warned = replayed
            .compactions
            .iter()
            .filter(|c| !c.warnings.is_empty());
        if let Some(last) = warned.clone().next_back() {
            guards.push(format!(
                "degradation  {}: {} compactions warned; the latest, before message {}: {}",
                replayed.engine,
                warned.count(),
                last.at_message,
                last.warnings.join("; ")
            ));
        }
        report.runs.push(replay_run(&replayed, contract));
    }
    Ok((report, guards))
}

fn replay_run(replay: &ReplayReport, contract: String) -> Run {
    Run {
        engine: replay.engine.clone(),
        contract_version: Some(contract),
        context_window: replay.context_window,
        threshold: replay.threshold,
        turns: (replay.turn_points.iter().enumerate())
            .map(|(n, turn)| Turn {
                message: turn.message,
                tokens: u64::from(turn.tokens),
                prefix_share: (n > 0).then(|| turn.prefix.share()),
                kept_previous: (n > 0).then_some(turn.prefix.kept_previous),
                engine_micros: Some(turn.engine_micros),
                ..Turn::default()
            })
            .collect(),
        compactions: (replay.compactions.iter())
            .map(|c| Compaction {
                message: c.at_message,
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
                layer: c.layer.clone(),
            })
            .collect(),
        probes: None,
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_aborted_request_without_usage_is_not_a_cut() {
        let text = ctxhost::transcript::generate::coding_session(7, 2_000);
        let transcript = Transcript::parse(&text, "generated").expect("parses");
        let entries = transcript.entries();
        let unmeasured = (transcript.active_branch().into_iter())
            .filter(|&i| entries[i].context_role() == Some(Role::Assistant))
            .filter(|&i| entries[i].usage_total().is_none())
            .count();
        assert!(unmeasured > 0, "the session has aborted requests");
        let mut run = Run::default();
        recorded_turns(&transcript, &mut run);
        assert!(run.compactions.is_empty());
        // Nothing cut this context, so no turn may be smaller than the one before it.
        assert_eq!(ctxhost_report::recuts(&run), vec![]);
    }
}
