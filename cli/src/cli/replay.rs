//! `ctxhost replay FILE`: a recorded transcript, turn by turn, through an engine.

use std::path::PathBuf;
use std::process::ExitCode;

use ctxhost::Host;
use ctxhost::config::{Config, Home};
use ctxhost::replay::ReplayReport;

use super::output::{Bar, Out, print_json, thousands};

#[derive(clap::Args)]
pub(super) struct ReplayArgs {
    /// The transcript to replay (pi / OpenClaw JSONL, version 1, 2 or 3).
    file: PathBuf,
    /// Context window in tokens.
    #[arg(long, default_value_t = 32_000)]
    window: u64,
    /// Engine to replay through (default: the one the config's slot selects).
    #[arg(long)]
    engine: Option<String>,
    /// Count the whole request built around the engine: system prompt, this workspace's
    /// bootstrap files and skills (default: the engine's assembly alone).
    #[arg(long, value_name = "DIR")]
    workspace: Option<PathBuf>,
    /// Keep the replayed transcript here (default: a scratch file, removed afterwards).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    #[arg(long)]
    json: bool,
}

pub(super) async fn run(home: Home, config: Config, args: ReplayArgs) -> anyhow::Result<ExitCode> {
    let host = Host::new(home, config)?;
    let engine = match &args.engine {
        Some(id) => host.engine(id).await?,
        None => host.active_engine().await?,
    };
    let scratch = super::sessions::scratch_dir()?;
    let output = match &args.out {
        Some(path) => {
            if path.exists() {
                anyhow::bail!(
                    "{} already exists; replay writes a new transcript",
                    path.display()
                );
            }
            path.clone()
        }
        None => scratch.path().join("replay.jsonl"),
    };
    let mut bar = Bar::new("replaying");
    let prompt = args.workspace.as_ref().map(|dir| {
        let mut settings =
            ctxhost::prompt::PromptSettings::from_config(&host.config().settings.agents.defaults);
        settings.workspace = Some(dir.clone());
        settings
    });
    let report = ctxhost::replay::replay_with(
        &host,
        &args.file,
        engine,
        args.window,
        &output,
        prompt.as_ref(),
        &mut bar,
    )
    .await;
    bar.finish();
    let mut report = report?;
    if args.out.is_none() {
        // The scratch transcript goes with `scratch` when this returns.
        report.output = None;
    }
    if args.json {
        print_json(&report)?;
    } else {
        print_report(&report);
    }
    Ok(ExitCode::SUCCESS)
}

pub(super) fn print_report(r: &ReplayReport) {
    let mut out = Out::new();
    out.line(format!("engine        {}", r.engine));
    out.line(format!("source        {}", r.source));
    out.line(format!(
        "messages      {} ({} assistant turns) in {:.0} ms ({:.0} messages/s)",
        r.messages,
        r.turns,
        r.elapsed_ms,
        r.messages as f64 / (r.elapsed_ms / 1e3).max(1e-9)
    ));
    out.line(format!(
        "window        {} tokens (compact above {}, keep {} recent)",
        thousands(r.context_window),
        thousands(r.threshold),
        thousands(r.keep_recent_tokens)
    ));
    out.line(format!(
        "assembled     min {} / median {} / max {} tokens; peak utilisation {:.0}%",
        thousands(r.assembled_min.into()),
        thousands(r.assembled_median.into()),
        thousands(r.assembled_max.into()),
        r.peak_utilisation * 100.0
    ));
    out.line(match r.first_overflow_at {
        Some(first) => format!(
            "overflowing   {} of {} turns exceeded the window (first before message {first})",
            r.overflowing_turns, r.turns
        ),
        None => "overflowing   none: every turn fit the window".into(),
    });
    out.line(format!(
        "prefix        {} of {} turns between compactions extended the previous request exactly; median share {:.1}%",
        r.prefix_kept_turns,
        r.turns_between_compactions,
        r.prefix_share_median * 100.0
    ));
    out.line(format!("compactions   {}", r.compactions.len()));
    for c in &r.compactions {
        out.line(format!(
            "  before message {:>4}: {} -> {} tokens",
            c.at_message,
            thousands(c.tokens_before),
            thousands(c.tokens_after)
        ));
        // The degradation guard belongs beside the compaction it is about, not in the log.
        for warning in &c.warnings {
            out.line(format!("      ! {warning}"));
        }
    }
    if r.inserted_messages > 0 {
        out.line(format!(
            "inserted      {} engine messages",
            r.inserted_messages
        ));
    }
    for addition in &r.system_prompt_additions {
        out.line(format!(
            "system prompt {}  (x{})",
            addition.text, addition.turns
        ));
    }
}
