//! The page: one HTML file with its CSS, its plots as inline SVG, its tables, the per-turn
//! numbers the hover reads, and a short script. It loads nothing: a Content-Security-Policy
//! forbids every fetch, so a page that tried would fail visibly in a browser test.

use std::fmt::Write as _;

use crate::model::{Report, Run, Turn};
use crate::recut::recuts;
use crate::segments::segments;
use crate::stats::{PREFIX_KEPT, RunStats, clean_share, figure_rows};
use crate::svg::{Plot, ticks_from_zero};
use crate::text::{escape, json_string, thousands, tick};

/// How many series colours the stylesheet defines; more runs than this reuse them.
const COLOURS: usize = 6;

/// Degraded turns and engine re-cuts listed (and titled one by one in the plot) per run; the
/// plot marks all of them.
const LISTED_ROWS: usize = 100;

/// Tables longer than this start folded, so the plots stay near each other.
const FOLD_ROWS: usize = 30;

/// Renders the report as one self-contained HTML page.
///
/// The page holds three plots, each an `<svg data-plot="tokens|prefix|engine-time">` with one
/// `<g class="series" data-run="{engine}" data-points="{n}">` per run (every turn is drawn, none
/// is sampled away; its line breaks where the run had no turn for a stretch of messages or a
/// turn lacks the figure), then the compactions, the engine re-cuts, the recall probes when any
/// run has them, and the degraded turns. The output depends only on `report`, so the same report
/// gives the same bytes.
pub fn render_html(report: &Report) -> String {
    let stats: Vec<RunStats> = report.runs.iter().map(RunStats::of).collect();
    let turns: usize = report.runs.iter().map(|r| r.turns.len()).sum();
    let mut page = String::with_capacity(16 * 1024 + turns * 64);
    let title = report.heading();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'\">\
         <title>{}</title><style>{STYLE}</style></head>\n<body>\n<header><h1>{}</h1>",
        escape(title),
        escape(title)
    );
    let mut meta = Vec::new();
    if !report.session.is_empty() {
        meta.push(format!("session <code>{}</code>", escape(&report.session)));
    }
    if !report.generated_at.is_empty() {
        meta.push(format!("generated {}", escape(&report.generated_at)));
    }
    meta.push(match report.runs.len() {
        1 => "1 run".to_owned(),
        n => format!("{n} runs"),
    });
    let _ = writeln!(page, "<p class=\"meta\">{}</p></header>", meta.join(" · "));

    figures_table(&mut page, report, &stats);
    figure(
        &mut page,
        "Tokens per turn",
        "Tokens in each assembled request, against the context window (dashed) and the compaction threshold (dotted). A vertical bar is a compaction, from the tokens before it down to the crossbar after it; a dashed bar is the engine re-cutting its context on its own (the request shrank with no compaction). Ticks on the x axis are turns where the engine did not answer (fallback or quarantine). A line breaks where the run had no turn for a stretch of messages far longer than its usual rhythm.",
        &tokens_plot(report),
        report,
        &[
            "dashed: window",
            "dotted: threshold",
            "bar: compaction",
            "dashed bar: engine re-cut",
            "axis tick: degraded turn",
        ],
    );
    figure(
        &mut page,
        "Cache-prefix share per turn",
        "The share of each request that is a byte-identical prefix of the previous turn's request: what a provider's prompt cache can reuse. The dashed rule is 99%.",
        &prefix_plot(report),
        report,
        &[],
    );
    figure(
        &mut page,
        "Engine time per turn",
        "Time spent inside the engine for each turn; the line breaks at turns the engine did not serve.",
        &engine_time_plot(report),
        report,
        &[],
    );
    tables::compactions_section(&mut page, report);
    tables::recuts_section(&mut page, report);
    tables::probes_section(&mut page, report);
    tables::degraded_section(&mut page, report);
    page.push_str(
        "<div id=\"tip\" hidden></div>\n<script type=\"application/json\" id=\"report-data\">",
    );
    hover_data(&mut page, report);
    let _ = write!(
        page,
        "</script>\n<script>{SCRIPT}</script>\n</body></html>\n"
    );
    page
}

/// The CSS class that gives run `index` its colour.
fn colour(index: usize) -> String {
    format!("s{}", index % COLOURS)
}

/// A run's name after a swatch of its colour, as every table and legend labels a run.
fn run_label(index: usize, run: &Run) -> String {
    format!(
        "<span class=\"swatch {}\"></span>{}",
        colour(index),
        escape(&run.engine)
    )
}

fn figures_table(page: &mut String, report: &Report, stats: &[RunStats]) {
    page.push_str("<section><h2>Summary</h2>");
    if report.runs.is_empty() {
        page.push_str("<p class=\"empty\">No runs in this report.</p></section>\n");
        return;
    }
    page.push_str("<table class=\"figures\"><thead><tr><th></th>");
    for (i, run) in report.runs.iter().enumerate() {
        let _ = write!(page, "<th>{}</th>", run_label(i, run));
    }
    page.push_str("</tr></thead><tbody>");
    for row in figure_rows(report, stats) {
        // An indented label qualifies the row above it.
        let class = if row.label.starts_with(' ') {
            " class=\"sub\""
        } else {
            ""
        };
        let _ = write!(
            page,
            "<tr><th{class}>{}</th>",
            escape(row.label.trim_start())
        );
        for cell in &row.cells {
            let _ = write!(page, "<td>{}</td>", escape(cell));
        }
        page.push_str("</tr>");
    }
    page.push_str("</tbody></table></section>\n");
}

fn figure(
    page: &mut String,
    heading: &str,
    caption: &str,
    svg: &str,
    report: &Report,
    keys: &[&str],
) {
    let _ = write!(
        page,
        "<section><h2>{}</h2><figure>{svg}<ul class=\"legend\">",
        escape(heading)
    );
    for (i, run) in report.runs.iter().enumerate() {
        let _ = write!(page, "<li>{}</li>", run_label(i, run));
    }
    for key in keys {
        let _ = write!(page, "<li>{}</li>", escape(key));
    }
    let _ = writeln!(
        page,
        "</ul><figcaption>{}</figcaption></figure></section>",
        escape(caption)
    );
}

/// The x axis every plot shares: the message numbers any run or compaction mentions.
fn message_domain(report: &Report) -> (f64, f64) {
    let messages = report.runs.iter().flat_map(|r| {
        r.turns
            .iter()
            .map(|t| t.message)
            .chain(r.compactions.iter().map(|c| c.message))
    });
    let (lo, hi) = messages.fold((usize::MAX, 0), |(lo, hi), m| (lo.min(m), hi.max(m)));
    if lo > hi {
        (0.0, 1.0)
    } else if lo == hi {
        (lo as f64 - 1.0, hi as f64 + 1.0)
    } else {
        (lo as f64, hi as f64)
    }
}

/// Says in the plot which runs have nothing to draw in it (or that none has).
fn missing_note(plot: &mut Plot, report: &Report, what: &str, has: impl Fn(&Turn) -> bool) {
    let missing: Vec<&str> = report
        .runs
        .iter()
        .filter(|r| !r.turns.iter().any(&has))
        .map(|r| r.engine.as_str())
        .collect();
    if report.runs.is_empty() || missing.len() == report.runs.len() {
        plot.note(&format!("no {what} recorded"));
    } else if !missing.is_empty() {
        plot.note(&format!("no {what} recorded for {}", missing.join(", ")));
    }
}

/// A plot over the shared message axis whose y axis runs from 0 to the last of `y_ticks`.
fn open_plot(
    report: &Report,
    kind: &str,
    y_ticks: &[f64],
    y_title: &str,
    y_label: fn(f64) -> String,
) -> Plot {
    let top = y_ticks.last().copied().unwrap_or(1.0);
    let mut plot = Plot::new(
        kind,
        &format!("{y_title} per turn"),
        message_domain(report),
        (0.0, top),
    );
    plot.axes("message", y_title, y_ticks, y_label);
    plot
}

fn tokens_plot(report: &Report) -> String {
    let runs = &report.runs;
    let highest = runs
        .iter()
        .flat_map(|r| {
            let turns = r.turns.iter().map(|t| t.tokens);
            let cuts = r
                .compactions
                .iter()
                .map(|c| c.tokens_before.max(c.tokens_after));
            turns.chain(cuts).chain([r.context_window, r.threshold])
        })
        .max()
        .unwrap_or(0);
    // A little headroom, so a window line at the top keeps its label inside the plot.
    let y_ticks = ticks_from_zero(highest as f64 * 1.04, 6);
    let mut plot = open_plot(report, "tokens", &y_ticks, "tokens", tick);
    let lines: [(&str, PerRun); 2] = [
        ("window", |r| r.context_window),
        ("threshold", |r| r.threshold),
    ];
    for (kind, of) in lines {
        for (value, label) in rule_labels(runs, kind, of) {
            plot.rule(value as f64, kind, &label);
        }
    }
    for (i, run) in runs.iter().enumerate() {
        let drawn = segments(run, |t| Some(t.tokens as f64));
        plot.series(&colour(i), &run.engine, &drawn);
    }
    for (i, run) in runs.iter().enumerate() {
        let marks: Vec<_> = run
            .compactions
            .iter()
            .map(|c| {
                let title = format!(
                    "{}: compaction before message {}: {} → {} tokens{}",
                    run.engine,
                    c.message,
                    thousands(c.tokens_before),
                    thousands(c.tokens_after),
                    c.layer
                        .as_deref()
                        .map(|l| format!(" ({l})"))
                        .unwrap_or_default()
                );
                (
                    c.message as f64,
                    c.tokens_before as f64,
                    c.tokens_after as f64,
                    title,
                )
            })
            .collect();
        if !marks.is_empty() {
            plot.strokes(&format!("cuts {}", colour(i)), &run.engine, &marks);
        }
        recut_marks(&mut plot, i, run);
        let degraded: Vec<f64> = run
            .turns
            .iter()
            .filter(|t| t.outcome.is_degraded())
            .map(|t| t.message as f64)
            .collect();
        let title = format!("{}: {} degraded turns", run.engine, degraded.len());
        plot.floor_ticks(
            &format!("degraded {}", colour(i)),
            &run.engine,
            &degraded,
            &title,
        );
    }
    missing_note(&mut plot, report, "turns", |_| true);
    plot.finish()
}

/// The engine's re-cuts as dashed bars, each titled while they are few enough to list.
fn recut_marks(plot: &mut Plot, index: usize, run: &Run) {
    let found = recuts(run);
    let class = format!("recuts {}", colour(index));
    if found.is_empty() {
        return;
    }
    if found.len() > LISTED_ROWS {
        let marks: Vec<_> = (found.iter())
            .map(|r| {
                (
                    r.message as f64,
                    r.tokens_before as f64,
                    r.tokens_after as f64,
                )
            })
            .collect();
        let title = format!("{}: {} engine re-cuts", run.engine, found.len());
        plot.strokes_as_one(&class, &run.engine, &marks, &title);
        return;
    }
    let marks: Vec<_> = (found.iter())
        .map(|r| {
            let title = format!(
                "{}: the engine re-cut its context before message {}: {} → {} tokens",
                run.engine,
                r.message,
                thousands(r.tokens_before),
                thousands(r.tokens_after),
            );
            let (x, before, after) = (r.message as f64, r.tokens_before, r.tokens_after);
            (x, before as f64, after as f64, title)
        })
        .collect();
    plot.strokes(&class, &run.engine, &marks);
}

/// Reads one per-run number (the window or the threshold).
type PerRun = fn(&Run) -> u64;

/// The distinct values of a per-run line (window or threshold), each labelled; a value only
/// some runs share names them.
fn rule_labels(runs: &[Run], kind: &str, of: PerRun) -> Vec<(u64, String)> {
    let mut values: Vec<u64> = runs.iter().map(of).filter(|&v| v > 0).collect();
    values.sort_unstable();
    values.dedup();
    values
        .into_iter()
        .map(|value| {
            let sharing: Vec<&str> = runs
                .iter()
                .filter(|r| of(r) == value)
                .map(|r| r.engine.as_str())
                .collect();
            let mut label = format!("{kind} {}", thousands(value));
            if sharing.len() < runs.len() {
                let _ = write!(label, " ({})", sharing.join(", "));
            }
            (value, label)
        })
        .collect()
}

fn prefix_plot(report: &Report) -> String {
    let y_ticks = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0];
    let mut plot = open_plot(report, "prefix", &y_ticks, "prefix share", |v| {
        format!("{:.0}%", v * 100.0)
    });
    plot.rule(PREFIX_KEPT, "kept", "99%");
    for (i, run) in report.runs.iter().enumerate() {
        let drawn = segments(run, |t| clean_share(t.prefix_share));
        plot.series(&colour(i), &run.engine, &drawn);
    }
    missing_note(&mut plot, report, "prefix shares", |t| {
        clean_share(t.prefix_share).is_some()
    });
    plot.finish()
}

fn engine_time_plot(report: &Report) -> String {
    let millis = |t: &Turn| t.engine_micros.map(|m| m as f64 / 1000.0);
    let highest = report
        .runs
        .iter()
        .flat_map(|r| r.turns.iter().filter_map(millis))
        .fold(0.0, f64::max);
    let y_ticks = ticks_from_zero(highest, 6);
    let mut plot = open_plot(report, "engine-time", &y_ticks, "engine time (ms)", tick);
    for (i, run) in report.runs.iter().enumerate() {
        plot.series(&colour(i), &run.engine, &segments(run, millis));
    }
    missing_note(&mut plot, report, "engine times", |t| {
        t.engine_micros.is_some()
    });
    plot.finish()
}

/// The per-turn numbers the hover shows, as JSON: per run its name and parallel arrays sorted by
/// message (m: message, t: tokens, p: prefix share in tenths of a percent, e: engine µs,
/// o: index into `outcomes`). Integers only, so 10,000 turns stay a few hundred kilobytes.
fn hover_data(page: &mut String, report: &Report) {
    let mut outcomes: Vec<String> = vec!["ok".to_owned()];
    page.push_str("{\"runs\":[");
    for (i, run) in report.runs.iter().enumerate() {
        let mut turns: Vec<&Turn> = run.turns.iter().collect();
        turns.sort_by_key(|t| t.message);
        if i > 0 {
            page.push(',');
        }
        let _ = write!(page, "{{\"name\":{}", json_string(&run.engine));
        let mut column = |key: &str, cell: &mut dyn FnMut(&Turn) -> Option<u64>| {
            let _ = write!(page, ",\"{key}\":[");
            for (j, t) in turns.iter().enumerate() {
                if j > 0 {
                    page.push(',');
                }
                match cell(t) {
                    Some(v) => {
                        let _ = write!(page, "{v}");
                    }
                    None => page.push_str("null"),
                }
            }
            page.push(']');
        };
        column("m", &mut |t| Some(t.message as u64));
        column("t", &mut |t| Some(t.tokens));
        column("p", &mut |t| {
            clean_share(t.prefix_share).map(|s| (s * 1000.0).round() as u64)
        });
        column("e", &mut |t| t.engine_micros);
        column("o", &mut |t| {
            let word = t.outcome.as_str();
            let index = outcomes.iter().position(|o| o == word).unwrap_or_else(|| {
                outcomes.push(word.to_owned());
                outcomes.len() - 1
            });
            Some(index as u64)
        });
        page.push('}');
    }
    page.push_str("],\"outcomes\":[");
    let words: Vec<String> = outcomes.iter().map(|o| json_string(o)).collect();
    page.push_str(&words.join(","));
    page.push_str("]}");
}

const STYLE: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

mod tables;

#[cfg(test)]
mod tests;
