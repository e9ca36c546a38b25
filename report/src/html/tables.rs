//! The page's tables below the plots: the compactions, the engines' own re-cuts, the recall
//! probes and the degraded turns.

use std::fmt::Write as _;

use super::{FOLD_ROWS, LISTED_ROWS, run_label};
use crate::model::{Report, Run, Turn};
use crate::recut::recuts;
use crate::text::{escape, percent, thousands};

fn table_open(page: &mut String, rows: usize, what: &str, head: &[&str]) {
    if rows > FOLD_ROWS {
        let _ = write!(
            page,
            "<details><summary>{} {what}</summary>",
            thousands(rows as u64)
        );
    }
    let _ = write!(
        page,
        "<table class=\"{}\"><thead><tr>",
        what.replace(' ', "-")
    );
    for h in head {
        let _ = write!(page, "<th>{}</th>", escape(h));
    }
    page.push_str("</tr></thead><tbody>");
}

fn table_close(page: &mut String, rows: usize) {
    page.push_str("</tbody></table>");
    if rows > FOLD_ROWS {
        page.push_str("</details>");
    }
}

/// One row of the compactions or the re-cuts table.
struct CutRow<'a> {
    run: usize,
    message: usize,
    before: u64,
    after: u64,
    layer: Option<&'a str>,
}

pub(super) fn compactions_section(page: &mut String, report: &Report) {
    page.push_str("<section><h2>Compactions</h2>");
    let rows: Vec<CutRow> = (report.runs.iter().enumerate())
        .flat_map(|(run, r)| {
            r.compactions.iter().map(move |c| CutRow {
                run,
                message: c.message,
                before: c.tokens_before,
                after: c.tokens_after,
                layer: c.layer.as_deref(),
            })
        })
        .collect();
    if rows.is_empty() {
        page.push_str("<p class=\"empty\">No compactions.</p></section>\n");
        return;
    }
    cuts_table(page, report, "compactions", &rows);
    page.push_str("</section>\n");
}

/// The engines' own re-cuts, when any run has one; at most [`LISTED_ROWS`] per run.
pub(super) fn recuts_section(page: &mut String, report: &Report) {
    let mut rows = Vec::new();
    let mut more = Vec::new();
    for (run, r) in report.runs.iter().enumerate() {
        let found = recuts(r);
        rows.extend(found.iter().take(LISTED_ROWS).map(|c| CutRow {
            run,
            message: c.message,
            before: c.tokens_before,
            after: c.tokens_after,
            layer: None,
        }));
        if found.len() > LISTED_ROWS {
            more.push(not_listed(found.len(), r));
        }
    }
    if rows.is_empty() {
        return;
    }
    page.push_str(
        "<section><h2>Engine re-cuts</h2><p class=\"empty\">The request shrank from one turn the engine served to the next with no compaction between them: the engine cut its own context.</p>",
    );
    cuts_table(page, report, "engine re-cuts", &rows);
    not_listed_note(page, &more);
    page.push_str("</section>\n");
}

/// How many of a run's rows the table leaves out.
fn not_listed(rows: usize, run: &Run) -> String {
    format!(
        "{} more for {}",
        thousands((rows - LISTED_ROWS) as u64),
        run.engine
    )
}

fn not_listed_note(page: &mut String, more: &[String]) {
    if !more.is_empty() {
        let _ = write!(
            page,
            "<p class=\"empty\">Not listed: {} (all are marked in the tokens plot).</p>",
            escape(&more.join("; "))
        );
    }
}

/// A table of cuts, one row each; the layer column only when some row names its layer.
fn cuts_table(page: &mut String, report: &Report, what: &str, rows: &[CutRow]) {
    let layered = rows.iter().any(|r| r.layer.is_some());
    let head = [
        "run",
        "before message",
        "tokens before",
        "after",
        "cut",
        "layer",
    ];
    let columns = if layered { &head[..] } else { &head[..5] };
    table_open(page, rows.len(), what, columns);
    for row in rows {
        let cut = row.before.saturating_sub(row.after);
        let share = if row.before > 0 {
            percent(cut as f64 / row.before as f64)
        } else {
            "n/a".into()
        };
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{} ({share})</td>",
            run_label(row.run, &report.runs[row.run]),
            row.message,
            thousands(row.before),
            thousands(row.after),
            thousands(cut),
        );
        if layered {
            let _ = write!(page, "<td>{}</td>", escape(row.layer.unwrap_or("n/a")));
        }
        page.push_str("</tr>");
    }
    table_close(page, rows.len());
}

/// The probe rows side by side: one row per label (in the order first seen), one column per run
/// that has probes.
pub(super) fn probes_section(page: &mut String, report: &Report) {
    let probed: Vec<(usize, &Run)> = report
        .runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.probes.is_some())
        .collect();
    if probed.is_empty() {
        return;
    }
    let mut labels: Vec<&str> = Vec::new();
    for (_, run) in &probed {
        for row in run.probes.iter().flat_map(|p| &p.rows) {
            if !labels.contains(&row.label.as_str()) {
                labels.push(&row.label);
            }
        }
    }
    page.push_str("<section><h2>Recall probes</h2><table><thead><tr><th>probe</th>");
    for (i, run) in &probed {
        let _ = write!(page, "<th>{}</th>", run_label(*i, run));
    }
    page.push_str("</tr></thead><tbody>");
    for label in &labels {
        let _ = write!(page, "<tr><td>{}</td>", escape(label));
        for (_, run) in &probed {
            let row = run
                .probes
                .iter()
                .flat_map(|p| &p.rows)
                .find(|r| r.label == *label);
            let cell = match row {
                Some(r) if r.total > 0 => format!(
                    "{} / {} ({})",
                    r.reachable,
                    r.total,
                    percent(f64::from(r.reachable) / f64::from(r.total))
                ),
                Some(r) => format!("{} / {}", r.reachable, r.total),
                None => "n/a".to_owned(),
            };
            let _ = write!(page, "<td>{cell}</td>");
        }
        page.push_str("</tr>");
    }
    page.push_str("</tbody></table></section>\n");
}

pub(super) fn degraded_section(page: &mut String, report: &Report) {
    let rows: usize = report
        .runs
        .iter()
        .map(|r| {
            r.turns
                .iter()
                .filter(|t| t.outcome.is_degraded())
                .count()
                .min(LISTED_ROWS)
        })
        .sum();
    if rows == 0 {
        return;
    }
    page.push_str("<section><h2>Degraded turns</h2>");
    table_open(
        page,
        rows,
        "degraded turns",
        &["run", "message", "outcome", "why"],
    );
    let mut more = Vec::new();
    for (i, run) in report.runs.iter().enumerate() {
        let degraded: Vec<&Turn> = run
            .turns
            .iter()
            .filter(|t| t.outcome.is_degraded())
            .collect();
        for t in degraded.iter().take(LISTED_ROWS) {
            let _ = write!(
                page,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"why\">{}</td></tr>",
                run_label(i, run),
                t.message,
                escape(t.outcome.as_str()),
                escape(t.note.as_deref().unwrap_or("")),
            );
        }
        if degraded.len() > LISTED_ROWS {
            more.push(not_listed(degraded.len(), run));
        }
    }
    table_close(page, rows);
    not_listed_note(page, &more);
    page.push_str("</section>\n");
}
