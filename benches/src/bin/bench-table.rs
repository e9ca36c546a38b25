//! Runs every benchmark of BENCHMARKS.md once and prints the table (markdown) on stdout; also
//! writes it to `target/ctxhost-bench/table.md`.
//!
//! ```sh
//! cargo run --release -p ctxhost-benches --bin bench-table            # the whole table
//! cargo run --release -p ctxhost-benches --bin bench-table -- --no-peer
//! BENCH_QUICK=1 cargo run --release -p ctxhost-benches --bin bench-table   # smoke run
//! cargo run --release -p ctxhost-benches --bin bench-table -- --serve  # the sidecar rows only
//! cargo run --release -p ctxhost-benches --bin bench-table -- --scale  # 10,000 sessions in one serve
//! cargo run --release -p ctxhost-benches --bin bench-table -- --instances  # load + instance rows
//! cargo run --release -p ctxhost-benches --bin bench-table -- --assemble  # assemble, 0.2 and 0.1
//! cargo run --release -p ctxhost-benches --bin bench-table -- --continuity  # what compaction keeps
//! cargo run --release -p ctxhost-benches --bin bench-table -- --continuity --window 16000 --session pi
//! cargo run --release -p ctxhost-benches --bin bench-table -- --probes  # in context / reachable by recall
//! cargo run --release -p ctxhost-benches --bin bench-table -- --recall  # the recall index rows
//! cargo run --release -p ctxhost-benches --bin bench-table -- --prefix  # prompt-cache prefix per engine
//! cargo run --release -p ctxhost-benches --bin bench-table -- --linear  # compaction by size, status by shape
//! ```
//!
//! Each row is its own timing loop; the figures are medians (and ratios of medians) of that
//! loop. Progress goes to stderr. The pi rows need node and npm (the harness in
//! `benches/peer` is installed with `npm ci` on first use); without them they are skipped
//! with the reason.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ctxhost_benches::{self as b, Budget, Fixture, Sampler, Samples, fmt_duration};
use serde_json::Value;

/// The `ctxhost` binary's allocator, so the in-process rows measure what the binary does.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const IDLE_SESSIONS: usize = 1000;
const IDLE_ARG: &str = "--idle-sessions-child";

struct Row {
    metric: String,
    goal: String,
    measured: String,
    met: Option<bool>,
}

fn row(metric: &str, goal: &str, measured: String, met: Option<bool>) -> Row {
    Row {
        metric: metric.to_string(),
        goal: goal.to_string(),
        measured,
        met,
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some(IDLE_ARG) {
        return idle_child(
            args.get(1)
                .and_then(|n| n.parse().ok())
                .unwrap_or(IDLE_SESSIONS),
        );
    }
    if args.first().map(String::as_str) == Some(STATUS_ARG) {
        let path = args.get(1).context("--status-child needs a path")?;
        return status_child(std::path::Path::new(path));
    }
    let no_peer = args.iter().any(|a| a == "--no-peer");
    let out_path = args
        .iter()
        .position(|a| a == "--out")
        .and_then(|i| args.get(i + 1))
        .map(PathBuf::from)
        .unwrap_or_else(|| b::data_dir().join("table.md"));
    if cfg!(debug_assertions) {
        eprintln!("warning: a debug build; run with --release for meaningful figures");
    }

    let probes = args.iter().any(|a| a == "--probes");
    let prefix = args.iter().any(|a| a == "--prefix");
    if probes || prefix || args.iter().any(|a| a == "--continuity") {
        // `--window 16000,32000` (default both) and `--session pi` (a substring of the names).
        let value = |flag: &str| {
            args.iter()
                .position(|a| a == flag)
                .map(|i| {
                    args.get(i + 1)
                        .with_context(|| format!("{flag} needs a value"))
                })
                .transpose()
        };
        let windows = match value("--window")? {
            Some(list) => list
                .split(',')
                .map(|w| {
                    w.trim()
                        .parse::<u64>()
                        .with_context(|| format!("--window: {w:?} is not a token count"))
                })
                .collect::<Result<Vec<_>>>()?,
            None => ctxhost_benches::continuity::WINDOWS.to_vec(),
        };
        for window in windows {
            let only = value("--session")?.map(String::as_str);
            let table = if probes {
                probe_table(window, only)?
            } else if prefix {
                prefix_table(window, only)?
            } else {
                continuity_table(window, only)?
            };
            println!("{table}");
        }
        return Ok(());
    }
    if args.iter().any(|a| a == "--instances") {
        // Only the load and instance rows, every language (quick to rerun while tuning them).
        return only_rows(load_and_instance_rows);
    }
    if args.iter().any(|a| a == "--assemble") {
        // Only the assemble rows, 0.2 and 0.1 (quick to rerun while tuning the contract).
        return only_rows(assemble_rows);
    }
    if args.iter().any(|a| a == "--recall") {
        // Only the recall index rows (the 1 GB session is generated once and kept).
        return only_rows(|_, _, rows| recall_rows(rows));
    }
    if args.iter().any(|a| a == "--compaction") {
        // Only the built-in compaction rows (quick to rerun while working on the compaction).
        return only_rows(|_, fx, rows| compaction_rows(fx, rows));
    }
    if args.iter().any(|a| a == "--linear") {
        // Only the linear-path rows (issue 26): compaction by session size, status by shape.
        let mut rows = Vec::new();
        linear_rows(&mut rows)?;
        print_rows(&rows);
        return Ok(());
    }
    if args.iter().any(|a| a == "--transcript") {
        // Only the transcript rows and pi side by side, on big files too (issue 15).
        return transcript_table(no_peer, &out_path);
    }
    if args.iter().any(|a| a == "--scale") {
        let mut rows = Vec::new();
        scale_rows(&mut rows)?;
        print_rows(&rows);
        return Ok(());
    }
    if args.iter().any(|a| a == "--serve") {
        // Only the sidecar rows (quick to rerun while working on `serve`).
        let mut rows = Vec::new();
        serve_rows(&mut rows)?;
        print_rows(&rows);
        return Ok(());
    }
    let load_before = loadavg();
    let rt = b::tokio_runtime();
    let fx = Fixture::new()?;
    let mut rows = Vec::new();

    step("cold compile (legacy)");
    let cold = b::compile_cold(Budget::SLOW.from_env())?;
    rows.push(row(
        "cold compile of the legacy component",
        "report",
        format!(
            "{} ({} B component)",
            fmt_duration(cold.median()),
            ctxhost::plugins::LEGACY_WASM.len()
        ),
        None,
    ));
    load_and_instance_rows(&rt, &fx, &mut rows)?;

    step("ingest 2 KB (legacy)");
    let ingest = rt.block_on(b::ingest(&fx, Budget::FAST.from_env()))?;
    rows.push(goal_row(
        "`ingest` of one 2 KB message (engine call)",
        Duration::from_nanos(500),
        &ingest,
    ));
    step("Session::append 2 KB (legacy)");
    let append = rt.block_on(b::session_append(&fx, Budget::MEDIUM.from_env(), true))?;
    rows.push(row(
        "↳ `Session::append` of it (transcript write + fsync + ingest), the default",
        "report",
        fmt_duration(append.median()),
        None,
    ));

    let append_nosync = rt.block_on(b::session_append(&fx, Budget::FAST.from_env(), false))?;
    rows.push(row(
        "↳ the same with `Session::set_sync(false)` (write + flush, no fsync)",
        "report",
        fmt_duration(append_nosync.median()),
        None,
    ));

    assemble_rows(&rt, &fx, &mut rows)?;

    compaction_rows(&fx, &mut rows)?;

    step("checkpoint write (native)");
    let (checkpoint, cp) = b::checkpoint_write(&fx, Budget::MEDIUM.from_env())?;
    rows.push(goal_row_with(
        "checkpoint-manager: checkpoint write (native)",
        Duration::from_millis(1),
        &checkpoint,
        &format!(" ({} B YAML)", cp.yaml_bytes),
    ));
    let cp_build = b::checkpoint_build_yaml(&fx, Budget::MEDIUM.from_env())?;
    rows.push(row(
        "↳ of which building + YAML (no disk)",
        "report",
        fmt_duration(cp_build.median()),
        None,
    ));

    transcript_rows(&mut rows)?;
    linear_rows(&mut rows)?;
    recall_rows(&mut rows)?;

    let shared = b::shared_transcript();
    match &shared {
        Some(path) => {
            for engine in ["legacy", "checkpoint-manager"] {
                step(&format!("replay ({engine})"));
                let run = rt.block_on(b::replay(
                    &fx,
                    path,
                    engine,
                    b::REPLAY_WINDOW,
                    Budget::SLOW.from_env(),
                ))?;
                let median = run.samples.median();
                let secs = median.as_secs_f64();
                rows.push(row(
                    &format!("replay of the shared transcript at 32k, {engine}"),
                    "report s, messages/s",
                    format!(
                        "{}, {:.0} messages/s ({} messages, {} turns, {} compactions)",
                        fmt_duration(median),
                        run.messages as f64 / secs,
                        run.messages,
                        run.turns,
                        run.compactions
                    ),
                    None,
                ));
            }
        }
        None => {
            let msg = "skipped: ../shared/data/pi-large-session.jsonl is absent in this checkout";
            eprintln!("{msg}");
            rows.push(row(
                "replay of the shared transcript at 32k",
                "report",
                msg.into(),
                None,
            ));
        }
    }

    serve_rows(&mut rows)?;

    step(&format!("{IDLE_SESSIONS} idle sessions (child process)"));
    match idle_in_child(IDLE_SESSIONS) {
        Ok(idle) => {
            let after = idle["afterKiB"].as_u64().unwrap_or(0);
            let before = idle["beforeKiB"].as_u64().unwrap_or(0);
            let mib = after as f64 / 1024.0;
            let delta = after.saturating_sub(before) as f64 / 1024.0;
            rows.push(row(
                &format!("{IDLE_SESSIONS} concurrent idle sessions on the legacy engine"),
                "≤ 512 MiB RSS",
                format!(
                    "{mib:.0} MiB process RSS ({delta:.0} MiB for the sessions, {:.0} KiB each; opened in {:.2} s)",
                    (after.saturating_sub(before)) as f64 / IDLE_SESSIONS as f64,
                    idle["openSeconds"].as_f64().unwrap_or(0.0)
                ),
                Some(mib <= 512.0),
            ));
        }
        Err(e) => {
            eprintln!("idle sessions failed: {e:#}");
            rows.push(row(
                &format!("{IDLE_SESSIONS} concurrent idle sessions on the legacy engine"),
                "≤ 512 MiB RSS",
                format!("failed: {e:#}"),
                Some(false),
            ));
        }
    }

    let files = peer_files(shared.as_ref(), false)?;
    side_by_side_and_write(&rows, &files, no_peer, &load_before, &out_path)
}

/// The rows of `ctxhost serve` spoken to over pipes, as a runtime's plugin does.
fn serve_rows(rows: &mut Vec<Row>) -> Result<()> {
    step("ctxhost serve over pipes");
    let sidecar = b::serve::sidecar_binary()?;
    let first = b::serve::first_call(&sidecar, Budget::SLOW.from_env())?;
    rows.push(goal_row_with(
        "`ctxhost serve`: first call of a fresh sidecar (spawn + cached engine load + instance + mirror)",
        Duration::from_millis(3),
        &first.bootstrap,
        "",
    ));
    rows.push(goal_row_with(
        "↳ spawn to the answer of a new session's first `assemble` (bootstrap, `commitTurn`, `assemble`)",
        Duration::from_millis(5),
        &first.first_turn,
        "",
    ));
    let messages = b::generated_messages();
    let history_bytes: usize = messages.iter().map(|m| m.to_string().len()).sum();
    let pipe = b::serve::assemble_over_pipe(&sidecar, &messages, Budget::MEDIUM.from_env())?;
    rows.push(goal_row_with(
        &format!(
            "`session.assemble` over the pipe, in sync, {} messages (round trip)",
            pipe.messages
        ),
        Duration::from_micros(50),
        &pipe.samples,
        &format!(
            "; {} B request, {} B answer",
            pipe.request_bytes, pipe.response_bytes
        ),
    ));
    rows.push(goal_row_with(
        "↳ the same with `--no-ledger` (the turn not written to the session's ledger)",
        Duration::from_micros(50),
        &pipe.without_ledger,
        &format!(
            "; sampled alternately with the row above: the ledger adds {:+.1}% (goal ≤ 2%)",
            (pipe.samples.median().as_secs_f64() / pipe.without_ledger.median().as_secs_f64()
                - 1.0)
                * 100.0
        ),
    ));
    step("serve: in-sync assemble after one commit, 2,000 and 20,000 messages");
    let messages_20k = b::generated_messages_of(20_000);
    let frozen = Some((
        b::FROZEN_0_3,
        std::path::Path::new(ctxhost_tests::CONTRACT_V0_3_WASM),
    ));
    let [after_commit, after_commit_20k, frozen_2k, frozen_20k] = [
        (&messages, None),
        (&messages_20k, None),
        (&messages, frozen),
        (&messages_20k, frozen),
    ]
    .map(|(messages, engine)| {
        b::serve::assemble_after_commit(&sidecar, messages, Budget::MEDIUM.from_env(), engine)
    });
    let (after_commit, after_commit_20k) = (after_commit?, after_commit_20k?);
    let (frozen_2k, frozen_20k) = (frozen_2k?, frozen_20k?);
    rows.push(goal_row_with(
        &format!(
            "`session.assemble` over the pipe right after one more message was committed, {} messages (legacy, 0.4)",
            messages.len()
        ),
        Duration::from_micros(50),
        &after_commit,
        &format!(
            "; the frozen 0.3 pass-through: {}",
            fmt_duration(frozen_2k.median())
        ),
    ));
    let growth = ratio_of(&after_commit_20k, &after_commit);
    rows.push(row(
        "↳ the same at 20,000 messages",
        "within 20% of 2,000",
        format!(
            "{} (p90 {}, n={}); {growth:.2}× the 2,000-message one; the frozen 0.3 pass-through: {} ({:.2}×)",
            fmt_duration(after_commit_20k.median()),
            fmt_duration(after_commit_20k.percentile(90.0)),
            after_commit_20k.len(),
            fmt_duration(frozen_20k.median()),
            ratio_of(&frozen_20k, &frozen_2k)
        ),
        Some(growth <= 1.2),
    ));
    let append = ledger_append(Budget::MEDIUM.from_env())?;
    rows.push(goal_row_with(
        "↳ what the ledger costs a turn: one record appended (in-process), written after the answer is sent",
        Duration::from_micros(8),
        &append,
        &format!(
            "; {:.1}% of the round trip above (goal ≤ 2%)",
            append.median().as_secs_f64() / pipe.samples.median().as_secs_f64() * 100.0
        ),
    ));
    rows.push(goal_row_with(
        "`health` over the pipe, one session's and the server's (round trip)",
        Duration::from_micros(30),
        &pipe.health,
        "",
    ));
    rows.push(row(
        "↳ bytes a turn sends (commitTurn of its 2 messages + assemble), first 10 vs last 10 turns",
        "grows with the new messages, not the history",
        format!(
            "{} B vs {} B per turn (history {} KB by the end)",
            pipe.turn_bytes_early,
            pipe.turn_bytes_late,
            history_bytes / 1000
        ),
        None,
    ));
    Ok(())
}

/// 10,000 sessions in one `ctxhost serve` on its socket at `ulimit -n` 1024 (`--scale`).
fn scale_rows(rows: &mut Vec<Row>) -> Result<()> {
    step("10,000 sessions in one ctxhost serve");
    let sidecar = b::serve::sidecar_binary()?;
    let mut run = b::scale::ScaleRun::default();
    if std::env::var_os("BENCH_QUICK").is_some() {
        run.sessions = 1_000;
        run.assembles_per_client = 10;
    }
    let scale = b::scale::scale(&sidecar, run)?;
    let n = run.sessions;
    rows.push(row(
        &format!(
            "{n} sessions opened in one `serve` over its socket by {} clients (bootstrap, a 2-message `commitTurn`, an assemble each), `ulimit -n` {}",
            run.opening_clients, run.descriptor_limit
        ),
        "all open",
        format!(
            "{} ({:.0} sessions/s), none refused",
            fmt_duration(scale.opened_in),
            n as f64 / scale.opened_in.as_secs_f64()
        ),
        None,
    ));
    let mib = |bytes: u64| bytes as f64 / f64::from(1 << 20);
    rows.push(row(
        &format!("memory of the server with {n} sessions open and idle (RSS)"),
        "≤ 1 GiB for 10,000",
        format!(
            "{:.0} MiB: {:.1} KiB a session ({:.0} MiB before the first)",
            mib(scale.rss_open),
            (scale.rss_open - scale.rss_empty) as f64 / 1024.0 / n as f64,
            mib(scale.rss_empty)
        ),
        Some(scale.rss_open * 10_000 / n as u64 <= 1 << 30),
    ));
    let health = &scale.health;
    rows.push(row(
        &format!("descriptors the server holds with {n} sessions open"),
        &format!("< {} (`ulimit -n`)", run.descriptor_limit),
        format!(
            "{} ({} sessions hold an instance, at most {}; {} gave theirs up for another)",
            scale.descriptors, health["resident"], health["residentLimit"], health["evictions"]
        ),
        Some((scale.descriptors as u64) < run.descriptor_limit),
    ));
    let p = |samples: &Samples| {
        format!(
            "p50 {}, p99 {} (n={})",
            fmt_duration(samples.median()),
            fmt_duration(samples.percentile(99.0)),
            samples.len()
        )
    };
    rows.push(row(
        &format!(
            "`session.assemble` round trip, {} clients at once, each every {} on a random one of its {} sessions",
            run.assembling_clients,
            fmt_duration(run.pace),
            n / run.assembling_clients
        ),
        "p99 ≤ 2 ms",
        p(&scale.assemble),
        Some(scale.assemble.percentile(99.0) <= Duration::from_millis(2)),
    ));
    rows.push(row(
        "↳ the same clients back to back (each sends its next as soon as it is answered)",
        "report",
        format!(
            "{}; {:.0} assembles/s",
            p(&scale.assemble_saturated),
            scale.assemble_saturated.len() as f64 / scale.saturated_in.as_secs_f64()
        ),
        None,
    ));
    rows.push(row(
        &format!("↳ the same, one client alone, a random one of the {n} sessions"),
        "report",
        p(&scale.assemble_alone),
        None,
    ));
    Ok(())
}

/// One ledger record appended, as `serve` writes one per answered turn.
fn ledger_append(budget: Budget) -> Result<Samples> {
    use ctxhost::ledger::{Ledger, LedgerCompaction, LedgerRecord, TurnOutcome};
    let dir = tempfile::tempdir()?;
    let mut ledger = Ledger::new(&dir.path().join("session.jsonl"));
    let mut record = LedgerRecord {
        at: ctxhost::timestamp::now_iso(),
        engine: "checkpoint-manager".into(),
        contract: "0.3.0".into(),
        configured_engine: None,
        outcome: TurnOutcome::Ok,
        error: None,
        messages: 2000,
        assembled_tokens: 120_000,
        prefix: Default::default(),
        request: Some(ctxhost::RequestDigest {
            parts: 2001,
            hash: "0123456789abcdef".into(),
        }),
        compaction: Some(LedgerCompaction {
            compacted: true,
            layer: Some("summarize".into()),
            tokens_before: 180_000,
            tokens_after: 60_000,
            reason: None,
        }),
        engine_micros: 180,
        bridge_micros: 400,
    };
    let mut sampler = Sampler::new(budget);
    while sampler.more() {
        record.messages += 1;
        let started = Instant::now();
        ledger.append(&record)?;
        sampler.push(started.elapsed());
    }
    Ok(sampler.done())
}

/// The generated stress sessions and the shared transcript when present; only those whose name
/// holds `only`.
fn continuity_subjects(only: Option<&str>) -> Result<Vec<ctxhost_benches::continuity::Subject>> {
    use ctxhost_benches::continuity as cont;
    let mut subjects = cont::generated();
    match b::shared_transcript() {
        Some(path) => subjects.push(cont::shared(&path)?),
        None => eprintln!("skipped: no ../shared/data/pi-large-session.jsonl, so no pi rows"),
    }
    subjects.retain(|x| only.is_none_or(|o| x.name.contains(o)));
    Ok(subjects)
}

/// The probe rows (`--probes`): every bundled engine replays the continuity sessions at
/// `window` tokens; after each compaction, probes drawn from what was compacted away are
/// checked in the assembled context and through the recall tools (`ctxhost_benches::probes`).
fn probe_table(window: u64, only: Option<&str>) -> Result<String> {
    use ctxhost_benches::probes;
    let rt = b::tokio_runtime();
    let fx = Fixture::new()?;
    let subjects = continuity_subjects(only)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Window {}k; in context / reachable in at most two tool calls.\n",
        window / 1000
    );
    let _ = writeln!(
        s,
        "| engine | session | compactions | {} | tool calls |",
        probes::KINDS.join(" | ")
    );
    let _ = writeln!(s, "|---|---|---|{}---|", "---|".repeat(probes::KINDS.len()));
    for engine in ["legacy", "checkpoint-manager", "lossless"] {
        let prepared = rt.block_on(fx.engine(engine))?;
        for subject in &subjects {
            step(&format!("probes: {engine} on {}", subject.name));
            let run = rt.block_on(probes::run(
                &fx.host,
                prepared.clone(),
                subject,
                fx.dir.path(),
                window,
            ))?;
            let cells: Vec<String> = run
                .kinds
                .iter()
                .map(|k| format!("{} / {}", k.in_context.show(), k.reachable.show()))
                .collect();
            let _ = writeln!(
                s,
                "| {engine} | {} | {} | {} | {} |",
                subject.name,
                run.replay.compactions,
                cells.join(" | "),
                run.tool_calls
            );
        }
    }
    Ok(s)
}

/// The prefix rows (`--prefix`): every bundled engine replays the continuity sessions at
/// `window` tokens through the turn driver `serve` runs; per turn, whether the request extended
/// the previous one exactly (what a provider's prompt cache bills at the cached rate).
fn prefix_table(window: u64, only: Option<&str>) -> Result<String> {
    use ctxhost_benches::compacting;
    let rt = b::tokio_runtime();
    let fx = Fixture::new()?;
    let subjects = continuity_subjects(only)?;
    let mut s = String::new();
    let _ = writeln!(s, "Window {}k.\n", window / 1000);
    let _ = writeln!(
        s,
        "| engine | session | turns | compactions | kept between compactions | kept, all turns | median share |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|");
    for engine in ["legacy", "checkpoint-manager", "lossless"] {
        let prepared = rt.block_on(fx.engine(engine))?;
        for subject in &subjects {
            step(&format!("prefix: {engine} on {}", subject.name));
            let run = rt.block_on(compacting::replay(
                &fx.host,
                prepared.clone(),
                subject,
                fx.dir.path(),
                window,
                |_| {},
            ))?;
            let mut shares = run.prefix_shares.clone();
            shares.sort_by(f64::total_cmp);
            let median = shares.get(shares.len() / 2).copied().unwrap_or(1.0);
            let _ = writeln!(
                s,
                "| {engine} | {} | {} | {} | {} of {} ({:.1}%) | {:.1}% | {:.1}% |",
                subject.name,
                run.turns,
                run.compactions,
                run.prefix_kept_turns,
                run.turns_between_compactions,
                percent(run.prefix_kept_turns, run.turns_between_compactions),
                percent(run.prefix_kept_all, run.turns.saturating_sub(1)),
                median * 100.0
            );
        }
    }
    Ok(s)
}

fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        100.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// The continuity rows (`--continuity`): every bundled engine replays the generated stress
/// sessions (and the shared transcript when present; only those whose name holds `only`) at
/// `window` tokens; recall is pooled over the states right after the 1st, 2nd, 3rd and 10th
/// compaction, over every state from the 3rd on, and per session at its final compaction.
fn continuity_table(window: u64, only: Option<&str>) -> Result<String> {
    use ctxhost_benches::continuity as cont;
    let rt = b::tokio_runtime();
    let fx = Fixture::new()?;
    let subjects = continuity_subjects(only)?;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Window {}k; sessions: {}.\n",
        window / 1000,
        subjects
            .iter()
            .map(|x| format!("{} ({} messages)", x.name, x.messages.len()))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "| engine | states | files modified | files read | tool failures | user requests | current request | standing instructions | non-verbatim tokens mean / max |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for engine in ["legacy", "checkpoint-manager"] {
        let prepared = rt.block_on(fx.engine(engine))?;
        let mut runs = Vec::new();
        for subject in &subjects {
            step(&format!("continuity: {engine} on {}", subject.name));
            let run = rt.block_on(cont::run(
                &fx.host,
                prepared.clone(),
                subject,
                fx.dir.path(),
                window,
            ))?;
            notes.push(format!(
                "{engine} on {}: {} compactions, {} ended in \"no cut point\", {} turns over the window; replayed in {}",
                subject.name,
                run.states.len(),
                run.no_cut_point,
                run.overflowing_turns,
                fmt_duration(run.elapsed)
            ));
            runs.push(run);
        }
        let mut line = |label: String, p: cont::Pooled| {
            let _ = writeln!(
                s,
                "| {engine} | {label} ({}) | {} | {} | {} | {} | {} | {} | {} / {} |",
                p.states,
                p.modified.show(),
                p.read.show(),
                p.failures.show(),
                p.requests.show(),
                p.current.show(),
                p.instructions.show(),
                p.tokens_mean,
                p.tokens_max
            );
        };
        for &n in cont::AT {
            let states = runs.iter().filter_map(|r| r.states.get(n - 1));
            line(format!("after compaction {n}"), cont::pool(states));
        }
        let from_third = runs.iter().flat_map(|r| r.states.iter().skip(2));
        line("every state from the 3rd".into(), cont::pool(from_third));
        for r in &runs {
            if let Some(last) = r.states.last() {
                line(
                    format!("{}: final, #{}", r.session, last.compaction),
                    cont::pool(std::iter::once(last)),
                );
            }
        }
    }
    let _ = writeln!(s);
    for n in notes {
        let _ = writeln!(s, "- {n}");
    }
    Ok(s)
}

/// Cached load, and a new session instance of the Rust (legacy), Python and JavaScript engines.
fn load_and_instance_rows(
    rt: &tokio::runtime::Runtime,
    fx: &Fixture,
    rows: &mut Vec<Row>,
) -> Result<()> {
    step("cached load (legacy)");
    let cached = b::load_cached(Budget::MEDIUM.from_env())?;
    rows.push(goal_row(
        "cached load (precompiled, verified)",
        Duration::from_micros(50),
        &cached,
    ));

    let (own, cache_bytes) = b::cache_key_and_check(Budget::MEDIUM.from_env())?;
    rows.push(row(
        "↳ of which the cache's own work (key hash of the component, stat, `.check`)",
        "report",
        format!(
            "{} ({} KB file, mapped; the rest is `Component::deserialize_file`)",
            fmt_duration(own.median()),
            cache_bytes / 1000
        ),
        None,
    ));

    step("instantiate (legacy)");
    let inst = rt.block_on(b::instantiate(fx, Budget::FAST.from_env()))?;
    rows.push(goal_row(
        "new session instance (warm engine)",
        Duration::from_micros(5),
        &inst,
    ));

    let syscalls = b::state_dir_syscalls(fx, Budget::FAST.from_env())?;
    rows.push(row(
        "↳ of which (approx.) `create_dir_all` + open of the state dir for the preopen",
        "report",
        fmt_duration(syscalls.median()),
        None,
    ));
    for engine in b::instances::FOREIGN_ENGINES {
        let metric = format!(
            "new session instance, {} example `{}` (warm engine)",
            engine.language, engine.id
        );
        let Some(path) = b::instances::foreign_component(engine) else {
            rows.push(row(
                &metric,
                "≤ 5 ms",
                format!("skipped: not built (`{}`)", engine.build),
                None,
            ));
            continue;
        };
        step(&metric);
        let samples = rt.block_on(b::instances::instantiate_component(
            engine.id,
            &path,
            Budget::MEDIUM.from_env(),
        ))?;
        let size = std::fs::metadata(&path)?.len();
        rows.push(goal_row_with(
            &metric,
            Duration::from_millis(5),
            &samples,
            &format!(", {:.1} MB component", size as f64 / 1e6),
        ));
    }
    Ok(())
}

fn step(name: &str) {
    eprintln!("measuring: {name}");
}

/// One group of rows alone, printed as table rows (the quick reruns: `--assemble`, ...).
fn only_rows(
    rows_of: impl FnOnce(&tokio::runtime::Runtime, &Fixture, &mut Vec<Row>) -> Result<()>,
) -> Result<()> {
    let rt = b::tokio_runtime();
    let fx = Fixture::new()?;
    let mut rows = Vec::new();
    rows_of(&rt, &fx, &mut rows)?;
    print_rows(&rows);
    Ok(())
}

/// Rows alone, as table rows (no header: they go into a table of BENCHMARKS.md).
fn print_rows(rows: &[Row]) {
    for row in rows {
        println!("| {} | {} | {} |", row.metric, row.goal, row.measured);
    }
}

/// The recall index on the shared session (when present) and the generated 210 MB and 1 GB
/// ones: first index, size against the transcript, search p50 / p99, catch-up per message.
fn recall_rows(rows: &mut Vec<Row>) -> Result<()> {
    let dir = tempfile::tempdir()?;
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    if let Some(path) = b::shared_transcript() {
        files.push(("pi session".into(), path));
    }
    step("210 MB generated session (generated once)");
    files.push((
        "generated 210 MB session".into(),
        b::generated_file("generated-210m.jsonl", b::SESSION_210M_MESSAGES)?,
    ));
    if std::env::var_os("BENCH_QUICK").is_none() {
        step("1 GB generated session (generated once)");
        files.push((
            "generated 1 GB session".into(),
            b::generated_file("generated-1g.jsonl", b::SESSION_1G_MESSAGES)?,
        ));
    }
    for (name, path) in files {
        step(&format!("recall index: {name}"));
        let f = ctxhost_benches::recall::measure(&path, dir.path(), Budget::MEDIUM.from_env())?;
        let ratio = f.index_bytes as f64 / f.transcript_bytes as f64;
        rows.push(row(
            &format!("recall: first index of the {name} ({} entries)", f.entries),
            "reported",
            format!(
                "{} ({:.0} MB of transcript → {:.1} MB index, {:.0}%)",
                b::fmt_duration(f.first_index),
                f.transcript_bytes as f64 / 1e6,
                f.index_bytes as f64 / 1e6,
                ratio * 100.0
            ),
            None,
        ));
        rows.push(row(
            &format!("recall: index size / transcript size, {name}"),
            "≤ 30%",
            format!("{:.0}%", ratio * 100.0),
            Some(ratio <= 0.30),
        ));
        rows.push(goal_row_with(
            &format!("recall: `ctx_search` (three words), {name}"),
            Duration::from_millis(20),
            &f.search,
            &format!(" (p99 {})", b::fmt_duration(f.search.percentile(99.0))),
        ));
        rows.push(row(
            &format!("recall: index catch-up per appended message, {name}"),
            "≤ 1 ms",
            b::fmt_duration(f.catch_up_per_message),
            Some(f.catch_up_per_message <= Duration::from_millis(1)),
        ));
    }
    Ok(())
}

/// The built-in compaction on the generated 200k-token session, whole and its preparation alone.
fn compaction_rows(fx: &Fixture, rows: &mut Vec<Row>) -> Result<()> {
    step("built-in compaction");
    let (compaction, prepare, info) = b::builtin_compaction(fx, Budget::MEDIUM.from_env())?;
    rows.push(goal_row_with(
        "built-in compaction, extractive, 200k-token session",
        Duration::from_millis(20),
        &compaction,
        &format!(
            " ({} layer, {} messages summarized, {}k → {}k tokens)",
            info.layer,
            info.messages_compacted,
            info.tokens_before / 1000,
            info.tokens_after / 1000
        ),
    ));
    rows.push(row(
        "↳ of which `compaction::prepare` (layer, prune candidates, the cut; no summary)",
        "report",
        fmt_duration(prepare.median()),
        None,
    ));
    Ok(())
}

/// `assemble` on the generated 2,000-entry session: the legacy engine (contract 0.2, one
/// `keep-range`) as the engine call, through `Session::assemble`, and natively; then the 0.1
/// guest (the same pass-through built against `wit/0.1.0`, 2,000 `keep`s) through the host's
/// 0.1 conversion layer.
fn assemble_rows(rt: &tokio::runtime::Runtime, fx: &Fixture, rows: &mut Vec<Row>) -> Result<()> {
    step("assemble, wasm (legacy, 0.4, whole context)");
    let (assemble, entries) =
        rt.block_on(b::assemble_call(fx, Budget::FAST.from_env(), "legacy"))?;
    let tokens = ctxhost_transcript::Transcript::load(&fx.generated)?.context_tokens();
    rows.push(goal_row(
        &format!(
            "`assemble`, 0.4: legacy guest, {entries} entries / {}k tokens, the whole context sent (engine call, p50)",
            tokens / 1000
        ),
        Duration::from_micros(20),
        &assemble,
    ));
    step("Session::assemble (legacy, 0.4)");
    let session_assemble =
        rt.block_on(b::session_assemble(fx, Budget::FAST.from_env(), "legacy"))?;
    rows.push(goal_row(
        "↳ `Session::assemble` (host side + engine call + validation)",
        Duration::from_micros(30),
        &session_assemble,
    ));
    step("assemble after an append, engine call (legacy 0.4, frozen 0.3)");
    let appending = rt.block_on(b::assemble_call_appending(
        fx,
        Budget::FAST.from_env(),
        "legacy",
    ))?;
    let appending_0_3 = rt.block_on(b::assemble_call_appending(
        fx,
        Budget::FAST.from_env(),
        b::FROZEN_0_3,
    ))?;
    rows.push(goal_row_with(
        "`assemble`, 0.4: legacy guest, one row appended before each call (engine call: that row sent, the SDK's kept columns extended)",
        Duration::from_nanos(500),
        &appending,
        &format!(
            "; the frozen 0.3 pass-through, sent the whole context: {}",
            fmt_duration(appending_0_3.median())
        ),
    ));
    step("Session::assemble after an append (legacy 0.4 at 2k and 20k, frozen 0.3 at 2k)");
    let turn = rt.block_on(b::session_turn_assemble(
        fx,
        Budget::FAST.from_env(),
        "legacy",
        b::SESSION_MESSAGES,
    ))?;
    let turn_20k = rt.block_on(b::session_turn_assemble(
        fx,
        Budget::FAST.from_env(),
        "legacy",
        20_000,
    ))?;
    let turn_0_3 = rt.block_on(b::session_turn_assemble(
        fx,
        Budget::FAST.from_env(),
        b::FROZEN_0_3,
        b::SESSION_MESSAGES,
    ))?;
    rows.push(goal_row_with(
        "↳ `Session::assemble` per turn: one message appended before each call, 2,000 entries",
        Duration::from_micros(5),
        &turn,
        &format!(
            "; the frozen 0.3 pass-through: {}",
            fmt_duration(turn_0_3.median())
        ),
    ));
    let growth = ratio_of(&turn_20k, &turn);
    rows.push(row(
        "↳ the same at 20,000 entries",
        "≤ 5 µs, within 20% of 2,000",
        format!(
            "{} (p90 {}, n={}); {growth:.2}× the 2,000-entry turn",
            fmt_duration(turn_20k.median()),
            fmt_duration(turn_20k.percentile(90.0)),
            turn_20k.len()
        ),
        Some(turn_20k.median() <= Duration::from_micros(5) && growth <= 1.2),
    ));
    step("assemble, native (legacy)");
    let native = b::assemble_native(fx, Budget::FAST.from_env())?;
    let ratio = ratio_of(&appending, &native);
    rows.push(row(
        "the same assemble compiled natively, in-process",
        "wasm / native ≤ 2",
        format!(
            "{} native; ratio {ratio:.1}× (engine call, one row appended) / {:.1}× (engine call, whole context) / {:.1}× (`Session::assemble` per turn)",
            fmt_duration(native.median()),
            ratio_of(&assemble, &native),
            ratio_of(&turn, &native)
        ),
        Some(ratio <= 2.0),
    ));
    step("assemble, wasm (0.1 guest)");
    let (old, _) = rt.block_on(b::assemble_call(fx, Budget::FAST.from_env(), b::LEGACY_0_1))?;
    let old_session = rt.block_on(b::session_assemble(
        fx,
        Budget::FAST.from_env(),
        b::LEGACY_0_1,
    ))?;
    rows.push(row(
        "`assemble`, the 0.1 guest through the conversion layer (same pass-through, one `keep` per entry)",
        "report, beside 0.2",
        format!(
            "{} engine call (p90 {}, n={}); {} `Session::assemble`",
            fmt_duration(old.median()),
            fmt_duration(old.percentile(90.0)),
            old.len(),
            fmt_duration(old_session.median()),
        ),
        None,
    ));
    Ok(())
}

fn ratio_of(a: &Samples, b: &Samples) -> f64 {
    a.median().as_secs_f64() / b.median().as_secs_f64().max(1e-12)
}

fn goal_row(metric: &str, goal: Duration, samples: &Samples) -> Row {
    goal_row_with(metric, goal, samples, "")
}

fn goal_row_with(metric: &str, goal: Duration, samples: &Samples, extra: &str) -> Row {
    let median = samples.median();
    row(
        metric,
        &format!("≤ {}", fmt_duration(goal)),
        format!(
            "{} (p90 {}, n={}){extra}",
            fmt_duration(median),
            fmt_duration(samples.percentile(90.0)),
            samples.len()
        ),
        Some(median <= goal),
    )
}

/// The idle-sessions measurement in a process of its own (RSS is per process).
fn idle_in_child(n: usize) -> Result<Value> {
    child_json(
        &[IDLE_ARG.as_ref(), n.to_string().as_ref()],
        "the idle-sessions child",
    )
}

/// Runs this binary again with `args` and reads the JSON line it prints last.
fn child_json(args: &[&std::ffi::OsStr], what: &str) -> Result<Value> {
    let exe = std::env::current_exe()?;
    let output = Command::new(exe)
        .args(args)
        .output()
        .with_context(|| format!("running {what}"))?;
    if !output.status.success() {
        bail!(
            "child failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8(output.stdout)?;
    let line = stdout.lines().last().context("no output from the child")?;
    Ok(serde_json::from_str(line)?)
}

fn idle_child(n: usize) -> Result<()> {
    let rt = b::tokio_runtime();
    let idle = rt.block_on(b::idle_sessions(n))?;
    println!(
        "{}",
        serde_json::json!({
            "sessions": idle.sessions,
            "beforeKiB": idle.before_kib,
            "afterKiB": idle.after_kib,
            "openSeconds": idle.open_time.as_secs_f64(),
        })
    );
    Ok(())
}

/// Runs the pi harness (installing it with npm first when needed) and returns its JSON.
fn run_peer(files: &[(&str, PathBuf)]) -> Result<Value> {
    let dir = b::workspace().join("benches/peer");
    let version = Command::new("node").arg("--version").output();
    match version {
        Ok(o) if o.status.success() => {}
        _ => bail!("node is not available"),
    }
    let installed = dir.join("node_modules/@mariozechner/pi-coding-agent/package.json");
    if !installed.is_file() {
        let lock = dir.join("package-lock.json").is_file();
        eprintln!(
            "installing the pi harness: npm {} in {}",
            if lock { "ci" } else { "install" },
            dir.display()
        );
        let status = Command::new("npm")
            .arg(if lock { "ci" } else { "install" })
            .args(["--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()
            .map_err(|e| anyhow::anyhow!("npm is not available: {e}"))?;
        if !status.success() || !installed.is_file() {
            bail!("npm could not install @mariozechner/pi-coding-agent ({status})");
        }
    }
    let budget_ms = if std::env::var_os("BENCH_QUICK").is_some_and(|v| v != "0") {
        "300"
    } else {
        "3000"
    };
    let mut cmd = Command::new("node");
    cmd.arg("harness.mjs")
        .args(["--budget-ms", budget_ms])
        .current_dir(&dir);
    for (i, (_, path)) in files.iter().enumerate() {
        cmd.arg(format!("f{i}={}", path.display()));
    }
    let output = cmd.output().context("running node harness.mjs")?;
    if !output.status.success() {
        bail!(
            "the harness failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    let stdout = String::from_utf8(output.stdout)?;
    Ok(serde_json::from_str(stdout.trim())?)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or_else(
            || "unknown".into(),
            |kib| format!("{:.1} GiB", kib as f64 / 1048576.0),
        );
    format!("{cpus} CPUs (nproc), {mem} memory, {cpu}")
}

fn now_utc() -> String {
    Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown date".into())
}

fn ms(v: &Value) -> Option<f64> {
    v["medianMs"].as_f64()
}

fn fmt_ratio(r: f64) -> String {
    if r < 1.0 {
        format!("{r:.2}×")
    } else {
        format!("{r:.1}×")
    }
}

fn fmt_ms(ms: f64) -> String {
    fmt_duration(Duration::from_secs_f64(ms / 1e3))
}

fn render(
    rows: &[Row],
    peer_rows: &[(String, PathBuf, b::PeerSteps)],
    peer: &Result<Value, String>,
    load_before: &str,
    load_after: &str,
) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "- Machine: {}", machine());
    let _ = writeln!(s, "- Date: {}", now_utc());
    let _ = writeln!(
        s,
        "- Load average (1/5/15 min): {load_before} before, {load_after} after"
    );
    let _ = writeln!(
        s,
        "- Command: `cargo run --release -p ctxhost-benches --bin bench-table`\n"
    );
    let _ = writeln!(s, "| metric | goal | measured (median) | met? |");
    let _ = writeln!(s, "|---|---|---|---|");
    for r in rows {
        let met = match r.met {
            Some(true) => "yes",
            Some(false) => "**no**",
            None => "—",
        };
        let _ = writeln!(s, "| {} | {} | {} | {met} |", r.metric, r.goal, r.measured);
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "### Side by side with pi (load + compaction preparation)\n"
    );
    match peer {
        Err(reason) => {
            let _ = writeln!(s, "pi: {reason}\n");
            let _ = writeln!(s, "| file | step | ctxhost |");
            let _ = writeln!(s, "|---|---|---|");
            for (label, _, ours) in peer_rows {
                for (step, samples) in [
                    ("load", &ours.load),
                    ("estimate", &ours.estimate),
                    ("prepare", &ours.prepare),
                    ("load + prepare", &ours.total),
                ] {
                    let _ = writeln!(
                        s,
                        "| {label} | {step} | {} |",
                        fmt_duration(samples.median())
                    );
                }
            }
        }
        Ok(json) => {
            let _ = writeln!(
                s,
                "pi: `@mariozechner/pi-coding-agent` {} on node {}; ctxhost's prepare chose the layer noted per file.\n",
                json["pi"].as_str().unwrap_or("?"),
                json["node"].as_str().unwrap_or("?")
            );
            let _ = writeln!(s, "| file | step | pi | ctxhost | pi / ctxhost | goal |");
            let _ = writeln!(s, "|---|---|---|---|---|---|");
            for (i, (label, _, ours)) in peer_rows.iter().enumerate() {
                let theirs = &json["files"][format!("f{i}")];
                if let Some(error) = theirs["error"].as_str() {
                    let _ = writeln!(
                        s,
                        "| {label} | pi cannot open it | {} | | | |",
                        error.replace('|', "/")
                    );
                }
                let steps: [(&str, &str, &Samples); 5] = [
                    ("load (parse + migrate + branch)", "load", &ours.load),
                    ("estimate context tokens", "estimate", &ours.estimate),
                    (
                        "prepare compaction (estimate + cut + gather)",
                        "prepare",
                        &ours.prepare,
                    ),
                    ("**load + prepare**", "total", &ours.total),
                    (
                        "**open + prepare** (pi: `SessionManager.open` + `getBranch` + `prepareCompaction`, as its agent session does; ctxhost: load + prepare)",
                        "openPrepare",
                        &ours.total,
                    ),
                ];
                for (step, key, samples) in steps {
                    let ours_ms = samples.median().as_secs_f64() * 1e3;
                    let (pi, ratio) = match ms(&theirs[key]) {
                        Some(p) => (fmt_ms(p), fmt_ratio(p / ours_ms)),
                        None => ("—".into(), "—".into()),
                    };
                    let goal = if key == "total" || key == "openPrepare" {
                        match ms(&theirs[key]) {
                            Some(p) if p / ours_ms >= 5.0 => "≥ 5×: yes",
                            Some(_) => "≥ 5×: **no**",
                            None => "≥ 5×",
                        }
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        s,
                        "| {label} | {step} | {pi} | {} | {ratio} | {goal} |",
                        fmt_duration(samples.median())
                    );
                }
                let _ = writeln!(
                    s,
                    "| {label} | ctxhost: `MessageView`s of the whole context (what a summarizer run decodes) | | {} | | |",
                    fmt_duration(ours.views.median())
                );
                if let Some(p) = ms(&theirs["cut"]) {
                    let _ = writeln!(
                        s,
                        "| {label} | pi's `findCutPoint` alone | {} | (in prepare) | | |",
                        fmt_ms(p)
                    );
                }
                if let Some(p) = ms(&theirs["sessionManagerOpen"]) {
                    let ratio = p / (ours.load.median().as_secs_f64() * 1e3);
                    let _ = writeln!(
                        s,
                        "| {label} | pi's `SessionManager.open` (reads the file twice) | {} | {} (load) | {} | |",
                        fmt_ms(p),
                        fmt_duration(ours.load.median()),
                        fmt_ratio(ratio)
                    );
                }
                let _ = writeln!(
                    s,
                    "| {label} | context tokens / prepare layer | {} | {} / {} | | |",
                    theirs["contextTokens"], ours.context_tokens, ours.layer
                );
            }
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Transcripts at memory speed (issue 15): status, load throughput, the peer on big files

const STATUS_ARG: &str = "--status-child";

/// The transcript rows: `context status` on 1 GB with and without a compaction near the end
/// (the second in a child process, for its peak RSS) and full load throughput.
fn transcript_rows(rows: &mut Vec<Row>) -> Result<()> {
    step("1 GB status file");
    let status_path = b::status_file()?;
    step("context status (1 GB, compaction in the last 10 MB)");
    let (status, st) = b::status_scan(&status_path, Budget::MEDIUM.from_env())?;
    rows.push(goal_row_with(
        "`context status` on a 1 GB transcript, last compaction in the final 10 MB",
        Duration::from_millis(20),
        &status,
        &format!(
            " ({:.1} MB measured from the end of {:.0} MB, all of it checked; count from {})",
            st.bytes_scanned as f64 / 1e6,
            st.file_bytes as f64 / 1e6,
            st.count_source.as_str()
        ),
    ));
    step("context status (1 GB, compaction in the last 10 MB, checked before)");
    rows.push(goal_row(
        "↳ the same file checked before (its verdict kept per file prefix, nothing appended since)",
        Duration::from_millis(20),
        &b::status_scan_remembering(&status_path, Budget::MEDIUM.from_env())?,
    ));
    step("1 GB never-compacted session (generated once)");
    let big = b::generated_file("generated-1g.jsonl", b::SESSION_1G_MESSAGES)?;
    step("context status (1 GB, never compacted; child process)");
    rows.push(status_row(
        "`context status` on a 1 GB transcript, never compacted",
        &big,
        250.0,
    ));
    step("context status (1 GB, never compacted, checked before)");
    rows.push(goal_row(
        "↳ the same file checked before (nothing appended since)",
        Duration::from_millis(20),
        &b::status_scan_remembering(&big, Budget::MEDIUM.from_env())?,
    ));
    let mut files = vec![(
        "generated 210 MB session",
        b::generated_file("generated-210m.jsonl", b::SESSION_210M_MESSAGES)?,
    )];
    if let Some(path) = b::shared_transcript() {
        files.insert(0, ("`pi-large-session.jsonl`", path));
    }
    for (label, path) in files {
        step(&format!("full load throughput ({label})"));
        let budget = if label.contains("210") {
            Budget::SLOW
        } else {
            Budget::MEDIUM
        };
        let (load, mb_s) = b::load_throughput(&path, budget.from_env())?;
        rows.push(row(
            &format!("full load throughput, {label} (parse + migrate + active branch)"),
            "≥ 1.5 GB/s",
            format!(
                "{mb_s:.0} MB/s ({} for {:.1} MB, n={})",
                fmt_duration(load.median()),
                std::fs::metadata(&path)?.len() as f64 / 1e6,
                load.len()
            ),
            Some(mb_s >= 1500.0),
        ));
    }
    Ok(())
}

/// Linear paths (issue 26): a manual compaction (as `compact --dry-run` computes it) of
/// sessions of short messages from 25,000 to 200,000 messages, and `context status` on the
/// 1 GB never-compacted session in the shapes that used to fall back to a full load (its first
/// parent outside the file; version 1), each in a child process for its peak RSS.
fn linear_rows(rows: &mut Vec<Row>) -> Result<()> {
    let mut medians = Vec::new();
    for messages in b::SHORT_SESSION_MESSAGES {
        step(&format!("compaction, {messages} short messages"));
        let path = b::short_session_file(messages)?;
        let (samples, info) = b::manual_compaction(&path, Budget::SLOW.from_env())?;
        let per_message = samples.median().as_secs_f64() / messages as f64;
        rows.push(row(
            &format!(
                "manual compaction (prepare + extractive summary, as `compact --dry-run`), {messages} short messages"
            ),
            "≤ 2 s at 200,000, linear",
            format!(
                "{} (n={}, {:.2} µs per message; {} messages summarized, {}k → {}k tokens)",
                fmt_duration(samples.median()),
                samples.len(),
                per_message * 1e6,
                info.messages_compacted,
                info.tokens_before / 1000,
                info.tokens_after / 1000
            ),
            (messages == 200_000).then(|| samples.median() <= Duration::from_secs(2)),
        ));
        medians.push((messages, samples.median()));
    }
    if let (Some((first_n, first)), Some((last_n, last))) = (medians.first(), medians.last()) {
        let growth = last.as_secs_f64() / first.as_secs_f64();
        let size = (*last_n / *first_n) as f64;
        rows.push(row(
            &format!("↳ time at {last_n} / time at {first_n} messages"),
            &format!("≤ {:.0}× (the size ratio, +25%)", size * 1.25),
            format!("{growth:.2}× for {size:.0}× the messages"),
            Some(growth <= size * 1.25),
        ));
    }
    type Reshape = fn(&str) -> String;
    let shapes: [(&str, &str, Reshape); 2] = [
        (
            "first entry's parent outside the file (a continued OpenClaw session)",
            "generated-1g-outside-parent.jsonl",
            |text| ctxhost_transcript::generate::with_outside_parent(text, "0ffc0ffe"),
        ),
        (
            "version 1 (no ids)",
            "generated-1g-v1.jsonl",
            ctxhost_transcript::generate::to_v1,
        ),
    ];
    for (shape, name, reshape) in shapes {
        step(&format!(
            "1 GB never-compacted session, {shape} (generated once)"
        ));
        let path = b::reshaped_1g_file(name, reshape)?;
        step(&format!("context status (1 GB, {shape}; child process)"));
        rows.push(status_row(
            &format!("`context status` on a 1 GB transcript, never compacted, {shape}"),
            &path,
            250.0,
        ));
    }
    Ok(())
}

/// `context status` of `path` timed in a child process (for its peak RSS), against a goal of
/// `goal_ms` and 64 MiB.
fn status_row(metric: &str, path: &std::path::Path, goal_ms: f64) -> Row {
    let goal = format!("≤ {}, ≤ 64 MiB RSS", fmt_ms(goal_ms));
    match status_in_child(path) {
        Ok(v) => {
            let ms = v["medianMs"].as_f64().unwrap_or(f64::NAN);
            let mib = v["peakKiB"].as_f64().unwrap_or(f64::NAN) / 1024.0;
            let after_all = v["peakAfterAllKiB"].as_f64().unwrap_or(f64::NAN) / 1024.0;
            row(
                metric,
                &goal,
                format!(
                    "{} (n={}), {mib:.0} MiB peak RSS after one scan ({after_all:.0} MiB after all) ({:.0} MB file, {} context tokens, count from {})",
                    fmt_ms(ms),
                    v["samples"],
                    v["bytes"].as_f64().unwrap_or(0.0) / 1e6,
                    v["contextTokens"],
                    v["countSource"].as_str().unwrap_or("?")
                ),
                Some(ms <= goal_ms && mib <= 64.0),
            )
        }
        Err(e) => row(metric, &goal, format!("failed: {e:#}"), Some(false)),
    }
}

/// The files of the side-by-side rows; with `big`, the generated 210 MB and 1 GB sessions too.
fn peer_files(shared: Option<&PathBuf>, big: bool) -> Result<Vec<(&'static str, PathBuf)>> {
    let generated_path = b::data_dir().join("generated-200k.jsonl");
    std::fs::create_dir_all(b::data_dir())?;
    std::fs::write(&generated_path, b::generated_200k())?;
    let mut files = Vec::new();
    if let Some(path) = shared {
        files.push(("pi-large-session.jsonl", path.clone()));
    }
    files.push(("generated 200k-token session", generated_path));
    if big {
        files.push((
            "generated 210 MB session",
            b::generated_file("generated-210m.jsonl", b::SESSION_210M_MESSAGES)?,
        ));
        files.push((
            "generated 1 GB session",
            b::generated_file("generated-1g.jsonl", b::SESSION_1G_MESSAGES)?,
        ));
    }
    Ok(files)
}

/// ctxhost's side of the peer rows; big files get fewer samples.
fn peer_rows_for(files: &[(&str, PathBuf)]) -> Result<Vec<(String, PathBuf, b::PeerSteps)>> {
    let mut rows = Vec::new();
    for (label, path) in files {
        step(&format!("ctxhost peer steps ({label})"));
        let big = std::fs::metadata(path)?.len() > 100_000_000;
        let budget = if big { Budget::SLOW } else { Budget::MEDIUM };
        rows.push((
            label.to_string(),
            path.clone(),
            b::peer_steps(path, budget.from_env())?,
        ));
    }
    Ok(rows)
}

/// `--transcript`: only the transcript rows and the side by side with pi, big files included.
fn transcript_table(no_peer: bool, out_path: &std::path::Path) -> Result<()> {
    let load_before = loadavg();
    let mut rows = Vec::new();
    transcript_rows(&mut rows)?;
    let files = peer_files(b::shared_transcript().as_ref(), true)?;
    side_by_side_and_write(&rows, &files, no_peer, &load_before, out_path)
}

/// The side by side with pi on `files` (pi left out with `--no-peer`), then the whole table,
/// printed and written to `out_path`.
fn side_by_side_and_write(
    rows: &[Row],
    files: &[(&str, PathBuf)],
    no_peer: bool,
    load_before: &str,
    out_path: &std::path::Path,
) -> Result<()> {
    let peer = if no_peer {
        Err("skipped: --no-peer".to_string())
    } else {
        step("pi (node harness)");
        run_peer(files).map_err(|e| format!("skipped: {e:#}"))
    };
    let peer_rows = peer_rows_for(files)?;
    let table = render(rows, &peer_rows, &peer, load_before, &loadavg());
    println!("{table}");
    if let Some(dir) = out_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(out_path, &table)?;
    eprintln!("written to {}", out_path.display());
    Ok(())
}

/// `context status` of `path` in a process of its own: its peak RSS is the status's alone.
fn status_in_child(path: &std::path::Path) -> Result<Value> {
    child_json(&[STATUS_ARG.as_ref(), path.as_os_str()], "the status child")
}

fn status_child(path: &std::path::Path) -> Result<()> {
    // The memory of one `context status`: the peak after a first scan, before the timed ones
    // (which add the allocator's leftovers of repeated scans in one process).
    drop(ctxhost_transcript::status::scan(path)?);
    let one_scan_kib = b::peak_rss_kib();
    let (samples, status) = b::status_scan(path, Budget::SLOW.from_env())?;
    println!(
        "{}",
        serde_json::json!({
            "medianMs": samples.median().as_secs_f64() * 1e3,
            "samples": samples.len(),
            "peakKiB": one_scan_kib,
            "peakAfterAllKiB": b::peak_rss_kib(),
            "bytes": status.file_bytes,
            "contextTokens": status.context_tokens,
            "countSource": status.count_source.as_str(),
        })
    );
    Ok(())
}
