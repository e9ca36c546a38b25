//! `ctxhost report`: a page and a summary from a transcript's recorded usage, and from replays
//! of one recorded session under two engines side by side.

use serde_json::Value;

use crate::common;

use crate::common::ctxhost;

fn points(html: &str, plot: &str, run: &str) -> Option<usize> {
    let plot_at = html.find(&format!(r#"data-plot="{plot}""#))?;
    let end = html[plot_at..].find("</svg>")? + plot_at;
    let needle = format!(r#"data-run="{run}" data-points=""#);
    let at = html[plot_at..end].find(&needle)? + plot_at + needle.len();
    html[at..].split('"').next()?.parse().ok()
}

#[test]
fn two_engines_replayed_side_by_side_plot_every_turn() {
    let home = tempfile::tempdir().unwrap();
    let transcript = common::generated_session(home.path().join("recorded.jsonl"), 11, 300);
    let page = home.path().join("side-by-side.html");
    let output = ctxhost(
        home.path(),
        &[
            "report",
            "--replay",
            transcript.to_str().unwrap(),
            "--engine",
            "legacy",
            "--engine",
            "checkpoint-manager",
            "--window",
            "16000",
            "--out",
            page.to_str().unwrap(),
            "--json",
        ],
    );
    let report = common::json_of(&output);
    common::check_cli_schema("report", &report);
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let turns = runs[0]["turns"].as_array().unwrap().len();
    assert!(turns > 100, "{turns} turns");
    let compactions = runs[0]["compactions"].as_array().unwrap();
    assert!(!compactions.is_empty(), "16k compacts");
    // legacy compacts through the built-in compaction, whose records name their layer.
    assert!(
        compactions
            .iter()
            .all(|c| ["prune", "summarize", "full"].contains(&c["layer"].as_str().unwrap_or(""))),
        "{compactions:?}"
    );
    assert_eq!(
        runs[1]["turns"].as_array().unwrap().len(),
        turns,
        "the same turns"
    );
    let html = std::fs::read_to_string(&page).unwrap();
    for engine in ["legacy", "checkpoint-manager"] {
        assert_eq!(points(&html, "tokens", engine), Some(turns), "{engine}");
        assert_eq!(
            points(&html, "engine-time", engine),
            Some(turns),
            "{engine}"
        );
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "the page loads nothing"
    );
}

#[test]
fn a_transcript_without_a_ledger_is_reported_from_its_recorded_usage() {
    let home = tempfile::tempdir().unwrap();
    let transcript = home.path().join("recorded.jsonl");
    // A line of a type this version does not know is shown as a message, never a failure.
    let mut text = ctxhost_transcript::generate::coding_session(5, 120);
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let unknown = serde_json::json!({
        "type": "future_thing", "id": "f1", "parentId": last["id"],
        "timestamp": "2026-11-26T00:00:00.000Z",
    });
    text.push_str(&format!("{unknown}\n"));
    std::fs::write(&transcript, text).unwrap();
    let page = home.path().join("recorded.html");
    let output = report_session(home.path(), &transcript, &page);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let summary = String::from_utf8_lossy(&output.stdout);
    assert!(summary.contains("recorded"), "{summary}");
    let html = std::fs::read_to_string(&page).unwrap();
    let plotted = points(&html, "tokens", "recorded").expect("a tokens series");
    assert!(plotted > 10, "{plotted} turns");
}

#[test]
fn a_missing_session_is_named() {
    let home = tempfile::tempdir().unwrap();
    let output = ctxhost(home.path(), &["report", "--session", "agent:main:nothing"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no session transcript at"), "{stderr}");
}

#[test]
fn a_kept_replay_has_a_ledger_the_report_reads() {
    let home = tempfile::tempdir().unwrap();
    let transcript = common::generated_session(home.path().join("recorded.jsonl"), 3, 120);
    let out = home.path().join("replayed.jsonl");
    let replay = ctxhost(
        home.path(),
        &[
            "replay",
            transcript.to_str().unwrap(),
            "--window",
            "16000",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ],
    );
    let replayed = common::json_of(&replay);
    common::check_cli_schema("replay", &replayed);
    let turns = replayed["turns"].as_u64().unwrap() as usize;
    let page = home.path().join("replayed.html");
    let output = ctxhost(
        home.path(),
        &[
            "report",
            "--session",
            out.to_str().unwrap(),
            "--out",
            page.to_str().unwrap(),
            "--json",
        ],
    );
    let report = common::json_of(&output);
    common::check_cli_schema("report", &report);
    assert_eq!(
        report["runs"][0]["engine"], "legacy",
        "from the ledger, not recorded usage"
    );
    assert_eq!(report["runs"][0]["turns"].as_array().unwrap().len(), turns);
}

#[test]
fn a_replay_report_under_an_ungranted_bundled_engine_warns_of_nothing() {
    let home = tempfile::tempdir().unwrap();
    let transcript = common::generated_session(home.path().join("recorded.jsonl"), 7, 400);
    let page = home.path().join("report.html");
    // lossless asks for `complete` without the `llm` grant (its default): told once at info,
    // not warned of; the replays' degradation guard is a line of the summary.
    let output = ctxhost(
        home.path(),
        &[
            "report",
            "--replay",
            transcript.to_str().unwrap(),
            "--engine",
            "legacy",
            "--engine",
            "lossless",
            "--out",
            page.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let stderr = common::stderr(&output);
    assert!(!stderr.contains("WARN"), "stderr has warnings:\n{stderr}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("degradation  legacy: ") && stdout.contains("risk of degraded context"),
        "{stdout}"
    );
    // lossless cuts its own context, which the host never compacts: the summary counts those
    // cuts as re-cuts (legacy column first, lossless second).
    let row = |label: &str| -> Vec<u64> {
        let line = (stdout.lines())
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row in\n{stdout}"));
        line[label.len()..]
            .split_whitespace()
            .map(|n| n.replace(',', "").parse().expect("a count"))
            .collect()
    };
    let (compactions, recuts) = (row("compactions"), row("engine re-cuts"));
    assert!(compactions[0] > 0 && compactions[1] == 0, "{stdout}");
    assert!(recuts[0] == 0 && recuts[1] > 0, "{stdout}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(r#"<g class="recuts s1" data-run="lossless">"#),
        "re-cuts are marked in the tokens plot"
    );
}

/// A ledger whose every line is unreadable: the report is made from the transcript, and the
/// warnings are the first ten and one line counting the rest, not one a line.
#[test]
fn an_unreadable_ledger_warns_in_eleven_lines_and_the_report_is_made() {
    let home = tempfile::tempdir().unwrap();
    let transcript = home.path().join("recorded.jsonl");
    let text = ctxhost_transcript::generate::coding_session(5, 60);
    std::fs::write(&transcript, text).unwrap();
    let ledger = home.path().join("recorded.jsonl.ledger.jsonl");
    std::fs::write(&ledger, "{not a record\n".repeat(500)).unwrap();
    let page = home.path().join("recorded.html");
    let output = report_session(home.path(), &transcript, &page);
    let err = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{err}");
    let warnings: Vec<&str> = err.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(
        warnings.len(),
        ctxhost_transcript::WARNINGS_SHOWN + 1,
        "{err}"
    );
    assert!(
        warnings[0].contains("recorded.jsonl.ledger.jsonl:1: not a ledger record"),
        "{err}"
    );
    assert!(
        warnings[warnings.len() - 1]
            .starts_with("warning: 490 more warnings, not shown one by one: 490 × "),
        "{err}"
    );
}

/// `ctxhost report --session TRANSCRIPT --out PAGE`.
fn report_session(
    home: &std::path::Path,
    transcript: &std::path::Path,
    page: &std::path::Path,
) -> std::process::Output {
    let (transcript, page) = (transcript.to_str().unwrap(), page.to_str().unwrap());
    ctxhost(home, &["report", "--session", transcript, "--out", page])
}
