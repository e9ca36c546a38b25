//! Writes a generated two-engine report, for looking at the page and for the browser test: legacy,
//! which the host compacts, and lossless, which re-cuts its own context.
//!
//!   cargo run -p ctxhost-report --example fixture -- OUT.html [--turns N]
//!
//! Beside OUT.html it writes OUT.json, counted from the generated data (not from the page): per
//! plot and run the points its series must hold, the stretches its line may not join across,
//! the compactions and the re-cuts of each run, and the page's size. The data is pseudo-random
//! from a fixed seed, so the same arguments give the same bytes.

use std::path::PathBuf;
use std::process::ExitCode;

use ctxhost_report::{
    Compaction, Outcome, ProbeRow, ProbeSummary, Report, Run, Turn, render_html, render_summary,
};
use serde_json::json;

/// splitmix64: a small deterministic generator; the fixture needs repeatability, not quality.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A whole number in lo..hi.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }

    /// True with probability 1/n.
    fn one_in(&mut self, n: u64) -> bool {
        self.next().is_multiple_of(n)
    }
}

/// How an engine behaves in the simulation.
struct Profile {
    engine: &'static str,
    contract: &'static str,
    threshold: u64,
    system_tokens: u64,
    /// Share of the context a compaction keeps.
    keeps: f64,
    /// Who cuts: the host (a compaction of this layer), or the engine on its own (None: the host
    /// never hears of it, only the turns show it).
    layer: Option<&'static str>,
    /// Engine time per turn, in microseconds (a range).
    micros: (u64, u64),
    /// From this share of the window on, a gauge in the system prompt changes every turn.
    gauge_from: Option<f64>,
    /// A turn in this many falls back (the engine timed out).
    fallback_one_in: u64,
    /// Whether the engine is quarantined for three turns three fifths of the way in.
    quarantines: bool,
}

const WINDOW: u64 = 32_000;

/// The session: per turn the message it runs before and the tokens it adds.
struct Session {
    turns: Vec<(usize, u64)>,
}

/// One engine's run over the session, and how many times it re-cut its own context.
fn simulate(profile: &Profile, session: &Session, seed: u64) -> (Run, usize) {
    let mut rng = Rng(seed);
    let mut run = Run {
        engine: profile.engine.to_owned(),
        contract_version: Some(profile.contract.to_owned()),
        context_window: WINDOW,
        threshold: profile.threshold,
        ..Run::default()
    };
    let mut context = 0u64;
    let mut recuts = 0;
    let quarantine_at = session.turns.len() * 3 / 5;
    for (k, &(message, grow)) in session.turns.iter().enumerate() {
        context += grow;
        let quarantined = profile.quarantines && (quarantine_at..quarantine_at + 3).contains(&k);
        let fallback = !quarantined && rng.one_in(profile.fallback_one_in);
        // An engine that did not run this turn cannot cut its context; the host still can.
        let cuts_now = profile.layer.is_some() || !(quarantined || fallback);
        let mut compacted = false;
        if profile.system_tokens + context > profile.threshold && cuts_now {
            let before = profile.system_tokens + context;
            context = (context as f64 * profile.keeps) as u64;
            let after = profile.system_tokens + context;
            match profile.layer {
                Some(layer) => run.compactions.push(Compaction {
                    message,
                    tokens_before: before,
                    tokens_after: after,
                    layer: Some(layer.to_owned()),
                }),
                None => recuts += 1,
            }
            compacted = true;
        }
        let tokens = profile.system_tokens + context;
        let gauge = profile
            .gauge_from
            .is_some_and(|from| tokens as f64 >= from * WINDOW as f64);
        let prefix_share = match () {
            _ if k == 0 => None,
            _ if compacted => Some(profile.system_tokens as f64 / tokens as f64),
            _ if gauge => Some(0.55 + rng.range(0, 150) as f64 / 1000.0),
            // Now and then the runtime's own per-turn line changes near the end.
            _ if rng.one_in(40) => Some(0.97 + rng.range(0, 20) as f64 / 1000.0),
            _ => Some(1.0),
        };
        let mut engine_micros = Some(rng.range(profile.micros.0, profile.micros.1));
        if compacted {
            engine_micros = engine_micros.map(|m| m * 12);
        }
        let (outcome, note) = if quarantined {
            engine_micros = None;
            (
                Outcome::Quarantined,
                Some(
                    "quarantined after 3 faults: wasm trap: out of bounds memory access".to_owned(),
                ),
            )
        } else if fallback {
            engine_micros = None;
            (
                Outcome::Fallback,
                Some("assemble timed out after 5000 ms; used the legacy fallback".to_owned()),
            )
        } else {
            (Outcome::Ok, None)
        };
        run.turns.push(Turn {
            message,
            tokens,
            prefix_share,
            kept_previous: prefix_share.map(|share| share >= 1.0),
            engine_micros,
            outcome,
            note,
        });
    }
    let lost = (run.compactions.len() + recuts) as u32;
    run.probes = Some(ProbeSummary {
        rows: vec![
            ProbeRow {
                label: "in context".into(),
                reachable: 40 - lost.min(30),
                total: 40,
            },
            ProbeRow {
                label: "via ctx_search".into(),
                reachable: 38,
                total: 40,
            },
            ProbeRow {
                label: "via ctx_expand".into(),
                reachable: 40,
                total: 40,
            },
        ],
    });
    (run, recuts)
}

/// Messages in the stretch without turns two fifths of the way in (a sub-agent's transcript
/// pasted in, say): no line may cross it.
const STRETCH: usize = 400;

/// The session both runs go over: a turn before each reply, after one to four tool results
/// (or a user message), a big tool result now and then, and one long stretch without turns.
fn session(turns: usize) -> Session {
    let mut rng = Rng(0x5e1f);
    let mut message = 0;
    let turns = (0..turns)
        .map(|k| {
            message += 1 + rng.range(1, 5) as usize;
            if k == turns * 2 / 5 {
                message += STRETCH;
            }
            let grow = if rng.one_in(25) {
                rng.range(3_000, 6_000)
            } else {
                rng.range(120, 900)
            };
            (message, grow)
        })
        .collect();
    Session { turns }
}

/// The generated report, and per run how many times its engine re-cut its own context.
fn report(turns: usize) -> (Report, Vec<usize>) {
    let session = session(turns);
    let profiles = [
        Profile {
            engine: "legacy",
            contract: "0.3.0",
            threshold: 24_000,
            system_tokens: 1_800,
            keeps: 0.3,
            layer: Some("summarize"),
            micros: (90, 400),
            gauge_from: None,
            fallback_one_in: 1_000_000,
            quarantines: false,
        },
        Profile {
            engine: "lossless",
            contract: "0.3.0",
            threshold: 25_600,
            system_tokens: 2_300,
            keeps: 0.4,
            layer: None,
            micros: (600, 2_500),
            gauge_from: Some(0.7),
            fallback_one_in: 300,
            quarantines: true,
        },
    ];
    let (runs, recuts) = (profiles.iter().enumerate())
        .map(|(i, p)| simulate(p, &session, 0xc0ffee + i as u64))
        .unzip();
    let report = Report {
        title: format!("Generated session: legacy vs lossless, {turns} turns"),
        session: "generated/fixture.jsonl".into(),
        generated_at: "2026-11-26 00:00 UTC (fixture)".into(),
        runs,
    };
    (report, recuts)
}

/// The pairs of neighbouring points (as messages) of one plot's series that its line may not
/// join: a turn without the figure lies between them, or the stretch without turns does.
fn gaps(run: &Run, has: &dyn Fn(&Turn) -> bool) -> Vec<(usize, usize)> {
    let mut found = Vec::new();
    let mut last_point: Option<usize> = None;
    let mut broken = false;
    let mut previous_turn = 0;
    for turn in &run.turns {
        broken |= turn.message - previous_turn > STRETCH;
        previous_turn = turn.message;
        if !has(turn) {
            broken = true;
            continue;
        }
        if let (Some(before), true) = (last_point, broken) {
            found.push((before, turn.message));
        }
        last_point = Some(turn.message);
        broken = false;
    }
    found
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let mut out: Option<PathBuf> = None;
    let mut turns = 10_000usize;
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--turns" => match args.next().and_then(|n| n.parse().ok()) {
                Some(n) => turns = n,
                None => return usage("--turns takes a whole number"),
            },
            _ if out.is_none() && !arg.starts_with("--") => out = Some(arg.into()),
            _ => return usage(&format!("unexpected argument {arg}")),
        }
    }
    let Some(out) = out else {
        return usage("name the HTML file to write");
    };
    let (report, recuts) = report(turns);
    let html = render_html(&report);
    let plot = |has: &dyn Fn(&Turn) -> bool| -> serde_json::Map<String, serde_json::Value> {
        (report.runs.iter())
            .map(|r| {
                let points = r.turns.iter().filter(|t| has(t)).count();
                let gaps = gaps(r, has);
                let series = json!({"points": points, "lines": gaps.len() + 1, "gaps": gaps});
                (r.engine.clone(), series)
            })
            .collect()
    };
    let per_run =
        |of: &dyn Fn(usize, &Run) -> usize| -> serde_json::Map<String, serde_json::Value> {
            (report.runs.iter().enumerate())
                .map(|(i, r)| (r.engine.clone(), json!(of(i, r))))
                .collect()
        };
    let expected = json!({
        "turns": turns,
        "bytes": html.len(),
        "runs": report.runs.iter().map(|r| r.engine.clone()).collect::<Vec<_>>(),
        "plots": {
            "tokens": plot(&|_| true),
            "prefix": plot(&|t| t.prefix_share.is_some()),
            "engine-time": plot(&|t| t.engine_micros.is_some()),
        },
        "compactions": per_run(&|_, r| r.compactions.len()),
        "recuts": per_run(&|i, _| recuts[i]),
    });
    let json_path = out.with_extension("json");
    if let Err(e) = std::fs::write(&out, &html).and_then(|()| {
        std::fs::write(
            &json_path,
            serde_json::to_string_pretty(&expected).unwrap_or_default(),
        )
    }) {
        eprintln!("fixture: cannot write {}: {e}", out.display());
        return ExitCode::FAILURE;
    }
    print!("{}", render_summary(&report));
    println!(
        "wrote {} ({} bytes) and {}",
        out.display(),
        html.len(),
        json_path.display()
    );
    ExitCode::SUCCESS
}

fn usage(problem: &str) -> ExitCode {
    eprintln!(
        "fixture: {problem}\nusage: cargo run -p ctxhost-report --example fixture -- OUT.html [--turns N]"
    );
    ExitCode::from(2)
}
