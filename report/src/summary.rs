//! The terminal summary: the same figures as the page's summary table, as aligned plain text.

use crate::model::Report;
use crate::stats::{RunStats, figure_rows};

/// Renders the report's per-run figures as plain text for a terminal: a heading line, then one
/// row per figure and one right-aligned column per run. Ends with a newline.
pub fn render_summary(report: &Report) -> String {
    let mut out = String::new();
    let title = report.heading();
    out.push_str(title);
    out.push('\n');
    if !report.session.is_empty() {
        out.push_str(&format!("session: {}\n", report.session));
    }
    if report.runs.is_empty() {
        out.push_str("no runs\n");
        return out;
    }
    let stats: Vec<RunStats> = report.runs.iter().map(RunStats::of).collect();
    let rows = figure_rows(report, &stats);
    let mut table: Vec<Vec<String>> = vec![
        std::iter::once(String::new())
            .chain(report.runs.iter().map(|r| r.engine.clone()))
            .collect(),
    ];
    table.extend(rows.into_iter().map(|row| {
        std::iter::once(row.label.to_owned())
            .chain(row.cells)
            .collect()
    }));
    // Widths in characters, not bytes, so a non-ASCII engine name does not shift its column.
    let columns = report.runs.len() + 1;
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            table
                .iter()
                .map(|row| row[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &table {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let pad = " ".repeat(widths[c] - cell.chars().count());
            if c == 0 {
                line.push_str(cell);
                line.push_str(&pad);
            } else {
                line.push_str("  ");
                line.push_str(&pad);
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Run, Turn};

    #[test]
    fn columns_line_up_whatever_the_names() {
        let turn = |message, tokens| Turn {
            message,
            tokens,
            engine_micros: Some(1_500),
            ..Turn::default()
        };
        let report = Report {
            title: "two engines".into(),
            session: "s.jsonl".into(),
            runs: vec![
                Run {
                    engine: "légacy-ünï".into(),
                    context_window: 32_000,
                    turns: vec![turn(2, 1_234_567)],
                    ..Run::default()
                },
                Run {
                    engine: "b".into(),
                    ..Run::default()
                },
            ],
            ..Report::default()
        };
        let text = render_summary(&report);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "two engines");
        assert_eq!(lines[1], "session: s.jsonl");
        // Every table line ends where the last (right-aligned) column ends.
        let width = lines[2].chars().count();
        assert!(
            lines[2..].iter().all(|l| l.chars().count() == width),
            "{text}"
        );
        let row = |label: &str| *lines.iter().find(|l| l.starts_with(label)).expect(label);
        // The first run's column ends at the same character in the heading and in a row.
        let end_of = |line: &str, cell: &str| {
            line[..line.find(cell).expect(cell) + cell.len()]
                .chars()
                .count()
        };
        assert_eq!(
            end_of(lines[2], "légacy-ünï"),
            end_of(row("turns "), "1"),
            "{text}"
        );
        assert!(
            lines[2].ends_with(" b") && row("turns ").ends_with(" 0"),
            "{text}"
        );
        assert!(row("peak tokens").contains("1,234,567 (3858.0%)"), "{text}");
        assert!(
            row("median engine time").contains("1.50 ms  ")
                && row("median engine time").ends_with(" n/a"),
            "{text}"
        );
        assert!(row("window / threshold").contains("32,000 / n/a"), "{text}");
    }

    #[test]
    fn no_runs_says_so() {
        assert_eq!(
            render_summary(&Report::default()),
            "ctxhost report\nno runs\n"
        );
    }
}
