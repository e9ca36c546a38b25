//! `ctxhost demo`: the main job on embedded defaults — no config, no network, no model server.
//! A deterministic coding-agent session is generated, replayed through the bundled legacy
//! engine in a scratch home, and what happened is shown.

use std::process::ExitCode;

use ctxhost::config::{Config, Home};
use ctxhost::transcript::{Transcript, generate};

use super::output::{Bar, print_json};

const SEED: u64 = 7;

pub(super) async fn run(messages: usize, window: u64, json: bool) -> anyhow::Result<ExitCode> {
    let scratch = super::scratch_dir()?;
    let home = Home::new(scratch.path().join("home"));
    let host = ctxhost::Host::new(home.clone(), Config::defaults(&home))?;
    let engine = host.active_engine().await?;

    let source = scratch.path().join("generated.jsonl");
    std::fs::write(&source, generate::coding_session(SEED, messages))?;
    let output = scratch.path().join("replayed.jsonl");
    let mut bar = Bar::new("replaying");
    let report =
        ctxhost::replay::replay(&host, &source, engine.clone(), window, &output, &mut bar).await;
    bar.finish();
    let report = report?;

    let replayed = Transcript::load(&output)?;
    let latest_summary = replayed
        .entries()
        .iter()
        .rev()
        .find(|e| e.entry_type() == "compaction")
        .and_then(|e| e.view())
        .map(|v| v.text);

    if json {
        print_json(&serde_json::json!({
            "report": report,
            "latestSummary": latest_summary,
        }))?;
        return Ok(ExitCode::SUCCESS);
    }
    let info = engine.info();
    println!(
        "ctxhost demo: a generated {messages}-message coding-agent session (seed {SEED}), replayed through the bundled `{}` engine",
        info.id
    );
    println!(
        "engine        {} {} (contract {}), {} in {:.1} ms",
        info.name,
        info.version,
        engine.contract_version(),
        match engine.load_source() {
            ctxhost::runtime::LoadSource::Cache => "loaded from the precompiled cache",
            _ => "compiled",
        },
        engine.load_time().as_secs_f64() * 1e3
    );
    super::replay::print_report(&report);
    if let Some(summary) = latest_summary {
        println!("\nlatest compaction summary (first lines):");
        for line in summary.lines().take(16) {
            println!("  {line}");
        }
    }
    println!(
        "\nEverything ran offline in a scratch home ({}); nothing was kept.",
        scratch.path().display()
    );
    Ok(ExitCode::SUCCESS)
}
