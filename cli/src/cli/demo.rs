//! `ctxhost demo`: the main job on embedded defaults — no config, no network, no model server.
//! A deterministic coding-agent session is generated, replayed through the bundled legacy
//! engine in a scratch home, and what happened is shown; it ends by finding a request the
//! compaction summary left out and opening it again, as the agent's recall tools would.

use std::path::Path;
use std::process::ExitCode;

use ctxhost::config::{Config, Home};
use ctxhost::recall::RecallIndex;
use ctxhost::recall::tools::{self, ToolOutput};
use ctxhost::transcript::{Role, Transcript, generate};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

use super::output::stdout_line;
use super::output::{Bar, print_json};

const SEED: u64 = 7;

pub(super) async fn run(messages: usize, window: u64, json: bool) -> anyhow::Result<ExitCode> {
    let scratch = super::sessions::scratch_dir()?;
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
    let mut report = report?;
    // Both files are scratch, gone when this returns: the report names neither as a path.
    report.source = format!("<generated: {messages} messages, seed {SEED}>");
    report.output = None;

    let replayed = Transcript::load(&output)?;
    let latest_summary = replayed
        .entries()
        .iter()
        .rev()
        .find(|e| e.entry_type() == "compaction")
        .and_then(|e| e.view())
        .map(|v| v.text);

    let recall = recall_example(&replayed, &output, latest_summary.as_deref().unwrap_or(""))?;

    if json {
        print_json(&DemoOutput {
            report,
            latest_summary,
            recall,
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let info = engine.info();
    stdout_line!(
        "ctxhost demo: a generated {messages}-message coding-agent session (seed {SEED}), replayed through the bundled `{}` engine",
        info.id
    );
    stdout_line!(
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
        stdout_line!("\nlatest compaction summary (first lines):");
        for line in summary.lines().take(16) {
            stdout_line!("  {line}");
        }
    }
    if let Some(recall) = &recall {
        recall.print();
    }
    stdout_line!(
        "\nEverything ran offline in a scratch home ({}); nothing was kept.",
        scratch.path().display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `ctxhost demo --json` (docs/cli-json/demo.schema.json).
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct DemoOutput {
    /// The replay, as `ctxhost replay --json` reports it.
    report: ctxhost::replay::ReplayReport,
    /// The text of the last compaction entry; null when none ran.
    latest_summary: Option<String>,
    /// A compacted request found again; null when no request was compacted.
    recall: Option<RecallExample>,
}

/// A request the compaction took out of the context and its summary does not quote, found
/// with `ctx_search` from a few of its own words and opened with `ctx_expand`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct RecallExample {
    entry_id: String,
    /// The summary does not cite it (else it is only out of the verbatim context).
    elided: bool,
    request: String,
    /// `ctx_search`'s arguments, as an agent sends them.
    search: serde_json::Value,
    #[schemars(with = "ToolAnswer")]
    found: ToolOutput,
    /// Its place among the hits (1 is first); null when it was not among them.
    rank: Option<usize>,
    /// `ctx_expand`'s arguments.
    expand: serde_json::Value,
    #[schemars(with = "ToolAnswer")]
    opened: ToolOutput,
}

/// What a recall tool answers, as the recall crate serializes it (the validation test of the
/// demo's output holds this to what is written).
#[derive(JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[allow(dead_code)]
struct ToolAnswer {
    /// The text the model reads.
    content: String,
    /// The call failed in a way the model should read.
    is_error: bool,
    /// The same result as data (hits, or the expansion).
    details: serde_json::Value,
}

impl RecallExample {
    fn print(&self) {
        let what = if self.elided {
            "a request the summary left out"
        } else {
            "a request compacted out of the context (the summary quotes its start)"
        };
        stdout_line!("\nrecall: {what}, found again with the agent's tools");
        stdout_line!("  asked        {}", first_line(&self.request, 100));
        stdout_line!("  ctx_search   {}", self.search);
        match self.rank {
            Some(rank) => stdout_line!("               → entry {} is hit #{rank}", self.entry_id),
            None => stdout_line!(
                "               → entry {} was not among the hits",
                self.entry_id
            ),
        }
        stdout_line!("  ctx_expand   {}", self.expand);
        for line in self.opened.content.lines().take(6) {
            stdout_line!("               {}", first_line(line, 100));
        }
    }
}

fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    match line.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_string(),
    }
}

fn recall_example(
    transcript: &Transcript,
    path: &Path,
    summary: &str,
) -> anyhow::Result<Option<RecallExample>> {
    let in_context = transcript.context();
    let compacted_requests = transcript
        .entries()
        .iter()
        .enumerate()
        .filter_map(|(i, e)| {
            let view = e.view().filter(|v| v.role == Role::User)?;
            (!in_context.contains(&i)).then_some((e.id().to_string(), view.text))
        });
    // Prefer one the summary does not cite: a request line it keeps cites its message's id
    // (its words may be clipped or shortened, so they are no test).
    let mut chosen = None;
    for (id, text) in compacted_requests {
        let elided = !summary.contains(&format!("[#{id}]"));
        if chosen.is_none() || elided {
            chosen = Some((id, text, elided));
        }
        if elided {
            break;
        }
    }
    let Some((entry_id, request, elided)) = chosen else {
        return Ok(None);
    };
    let search = json!({ "query": query_words(&request) });
    let expand = json!({ "id": entry_id, "maxTokens": 300 });
    let mut index = RecallIndex::open(path)?;
    index.sync(transcript)?;
    let call = |name: &str, args: &serde_json::Value| -> anyhow::Result<ToolOutput> {
        let call = tools::decode(name, args).expect("a recall tool")?;
        Ok(tools::run(&call, transcript, &index)?)
    };
    let found = call(tools::SEARCH, &search)?;
    let rank = found.details["hits"]
        .as_array()
        .and_then(|hits| hits.iter().position(|h| h["id"] == entry_id.as_str()))
        .map(|p| p + 1);
    let opened = call(tools::EXPAND, &expand)?;
    Ok(Some(RecallExample {
        entry_id,
        elided,
        request,
        search,
        found,
        rank,
        expand,
        opened,
    }))
}

/// Four of the request's longest words: what an agent remembering it vaguely would type.
fn query_words(request: &str) -> String {
    let mut words: Vec<&str> = request
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() >= 4)
        .collect();
    words.sort_by_key(|w| std::cmp::Reverse(w.len()));
    words.dedup();
    words.truncate(4);
    words.join(" ")
}
