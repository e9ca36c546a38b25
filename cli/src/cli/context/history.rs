//! `context history`: every compaction on the active branch, and every turn `serve` answered.

use ctxhost::Host;
use ctxhost::transcript::compaction::{Layer, Trigger};
use ctxhost::transcript::time::format_iso_ms;
use schemars::JsonSchema;
use serde::Serialize;

use super::status::ago;
use crate::cli::output::{Report, thousands};
use crate::cli::sessions::{SessionFlag, load_transcript};

/// `context history`.
#[derive(Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct HistoryReport {
    session: String,
    compactions: Vec<HistoryRow>,
    /// Every turn `serve` answered, from the session's ledger.
    turns: crate::cli::turns::TurnLedger,
}

/// One compaction on the active branch.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct HistoryRow {
    id: String,
    line: usize,
    timestamp: Option<String>,
    ago: String,
    layer: Option<Layer>,
    trigger: Option<Trigger>,
    tokens_before: u64,
    tokens_after: Option<u64>,
    messages_compacted: Option<u64>,
    summarizer: Option<String>,
    first_kept_entry_id: Option<String>,
}

pub(super) fn history(host: &Host, session: &SessionFlag) -> anyhow::Result<HistoryReport> {
    let (_, path) = session.existing(host)?;
    let t = load_transcript(&path)?;
    let compactions = t
        .active_branch()
        .into_iter()
        .map(|i| &t.entries()[i])
        .filter(|e| e.entry_type() == "compaction")
        .map(|e| {
            let record = e.compaction_record();
            HistoryRow {
                id: e.id().to_string(),
                line: e.line_number(),
                timestamp: e.timestamp().map(format_iso_ms),
                ago: ago(e.timestamp()),
                layer: record.and_then(|r| r.layer),
                trigger: record.and_then(|r| r.trigger),
                tokens_before: e.tokens_before(),
                tokens_after: record.and_then(|r| r.tokens_after),
                messages_compacted: record.and_then(|r| r.messages_compacted),
                summarizer: record.and_then(|r| r.summarizer.clone()).flatten(),
                first_kept_entry_id: e.first_kept_entry_id().map(str::to_string),
            }
        })
        .collect();
    Ok(HistoryReport {
        session: path.display().to_string(),
        compactions,
        turns: crate::cli::turns::TurnLedger::read(&path)?,
    })
}

impl Report for HistoryReport {
    fn lines(&self) -> Vec<String> {
        let mut lines = if self.compactions.is_empty() {
            vec![format!("{}: no compactions", self.session)]
        } else {
            history_table(&self.compactions)
        };
        lines.extend(self.turns.lines());
        lines
    }
}

/// `context history` as a table: a header row, then one row per compaction; token figures with
/// thousands separators, right-aligned.
fn history_table(rows: &[HistoryRow]) -> Vec<String> {
    let text = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let number = |n: Option<u64>| text(n.map(thousands));
    let header = [
        "#",
        "when",
        "",
        "layer",
        "trigger",
        "tokens before",
        "tokens after",
        "messages compacted",
    ];
    let mut table: Vec<[String; 8]> = vec![header.map(str::to_string)];
    for (n, r) in rows.iter().enumerate() {
        table.push([
            (n + 1).to_string(),
            text(r.timestamp.clone()),
            format!("({})", r.ago),
            text(r.layer.map(|l| l.to_string())),
            text(r.trigger.map(|t| t.to_string())),
            number(Some(r.tokens_before)),
            number(r.tokens_after),
            number(r.messages_compacted),
        ]);
    }
    let mut widths = [0; 8];
    for row in &table {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    table
        .iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .zip(widths)
                .enumerate()
                .map(|(i, (cell, w))| {
                    // Numbers right-aligned, words left-aligned.
                    if i == 0 || i >= 5 {
                        format!("{cell:>w$}")
                    } else {
                        format!("{cell:<w$}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn history_has_headers_and_separators() {
        let rows = vec![HistoryRow {
            id: "c1".into(),
            line: 9,
            timestamp: Some("2025-01-01T00:00:00.000Z".into()),
            ago: "2 days ago".into(),
            layer: Some(Layer::Summarize),
            trigger: Some(Trigger::Manual),
            tokens_before: 123_456,
            tokens_after: Some(20_000),
            messages_compacted: Some(1_024),
            summarizer: None,
            first_kept_entry_id: None,
        }];
        let lines = history_table(&rows);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("#  when"), "{}", lines[0]);
        assert!(lines[0].contains("tokens before"), "{}", lines[0]);
        assert!(
            lines[1].contains("123,456") && lines[1].contains("20,000"),
            "{}",
            lines[1]
        );
        assert!(lines[1].contains("1,024"), "{}", lines[1]);
    }
}
