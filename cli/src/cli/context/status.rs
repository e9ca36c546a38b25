//! `context status`: tokens / window, compactions and degradation risk, from the end of the
//! transcript.

use std::path::PathBuf;

use ctxhost::Host;
use ctxhost::timestamp::now_unix_ms;
use ctxhost::transcript::compaction::{Degradation, Layer, Trigger, degradation_at};
use ctxhost::transcript::status;
use ctxhost::transcript::time::format_iso_ms;
use schemars::JsonSchema;
use serde::Serialize;

use super::measure::{RECORDED_METHOD, RECORDED_METHOD_TEXT, prompt_settings};
use crate::cli::output::stderr_line;
use crate::cli::output::{Report, thousands};
use crate::cli::sessions::SessionFlag;

/// "3 hours 2 minutes ago", "6 months 24 days ago": the two largest units are enough to
/// place an event; more ("6months 24days 8h 48m 24s") is noise.
pub(super) fn ago(ms: Option<u64>) -> String {
    match ms {
        Some(ms) if ms > 0 => elapsed_text(now_unix_ms().saturating_sub(ms) / 1000),
        _ => "at an unknown time".into(),
    }
}

fn elapsed_text(secs: u64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (365 * 86_400, "year"),
        (30 * 86_400, "month"),
        (86_400, "day"),
        (3_600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    // Under a second: the last unit, so every answer reads "... ago".
    let first = UNITS
        .iter()
        .position(|&(size, _)| secs >= size)
        .unwrap_or(UNITS.len() - 1);
    let plural = |n: u64, name: &str| format!("{n} {name}{}", if n == 1 { "" } else { "s" });
    let (size, name) = UNITS[first];
    let mut text = plural(secs / size, name);
    if let Some(&(next, next_name)) = UNITS.get(first + 1) {
        let n = secs % size / next;
        if n > 0 {
            text = format!("{text} {}", plural(n, next_name));
        }
    }
    text + " ago"
}

/// `context status`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct StatusReport {
    session: String,
    session_id: String,
    context_tokens: u64,
    context_tokens_method: &'static str,
    system_tokens: u64,
    context_window: u64,
    utilisation: f64,
    context_messages: usize,
    compaction_count: u64,
    summary_count: u64,
    count_source: &'static str,
    last_compaction: Option<LastCompaction>,
    degradation: Degradation,
    file_bytes: u64,
    bytes_scanned: u64,
    elapsed_ms: f64,
}

/// The latest compaction on the active branch, as `context status` shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct LastCompaction {
    id: String,
    timestamp: Option<String>,
    ago: String,
    tokens_before: u64,
    tokens_after: Option<u64>,
    layer: Option<Layer>,
    trigger: Option<Trigger>,
}

pub(super) fn status(
    host: &Host,
    session: &SessionFlag,
    workspace: Option<PathBuf>,
) -> anyhow::Result<StatusReport> {
    let window = host.compaction_settings().context_window;
    let system_tokens = workspace
        .map(|dir| ctxhost::prompt::system_tokens(&prompt_settings(host, Some(dir))))
        .unwrap_or(0);
    let (_, path) = session.existing(host)?;
    let started = std::time::Instant::now();
    // What the check verified of the file is kept with the other caches, so the next status
    // of a session only checks what was appended since.
    let checked = host.home().cache_dir().join("checked");
    let s = status::scan_remembering(&path, window, &checked)?;
    let elapsed = started.elapsed();
    for w in ctxhost_transcript::shown_warnings(&s.warnings) {
        stderr_line!("warning: {w}");
    }
    let last_compaction = s.last_compaction.as_ref().map(|c| {
        let record = c.details.as_ref();
        LastCompaction {
            id: c.id.clone(),
            timestamp: c.timestamp.map(format_iso_ms),
            ago: ago(c.timestamp),
            tokens_before: c.tokens_before,
            tokens_after: record.and_then(|r| r.tokens_after),
            layer: record.and_then(|r| r.layer),
            trigger: record.and_then(|r| r.trigger),
        }
    });
    let utilisation = (s.context_tokens + system_tokens) as f64 / window.max(1) as f64;
    Ok(StatusReport {
        session: path.display().to_string(),
        session_id: s.session_id,
        context_tokens: s.context_tokens,
        context_tokens_method: RECORDED_METHOD,
        system_tokens,
        context_window: window,
        utilisation,
        context_messages: s.context_messages,
        compaction_count: s.compaction_count,
        summary_count: s.summary_count,
        count_source: s.count_source.as_str(),
        last_compaction,
        degradation: degradation_at(s.summary_count, utilisation),
        file_bytes: s.file_bytes,
        bytes_scanned: s.bytes_scanned,
        elapsed_ms: elapsed.as_secs_f64() * 1e3,
    })
}

impl Report for StatusReport {
    fn lines(&self) -> Vec<String> {
        let window = self.context_window;
        let used = self.context_tokens + self.system_tokens;
        let d = &self.degradation;
        vec![
            format!("session       {} ({})", self.session, self.session_id),
            format!(
                "context       {} / {} tokens ({:.1}%), {} messages{}",
                thousands(used),
                thousands(window),
                used as f64 * 100.0 / window.max(1) as f64,
                self.context_messages,
                if self.system_tokens > 0 {
                    format!(" (+{} system prompt)", thousands(self.system_tokens))
                } else {
                    String::new()
                }
            ),
            // Two commands, two measures: say which this is and where the other is.
            format!(
                "              by {RECORDED_METHOD_TEXT}; `context inspect` counts the whole request by chars/4"
            ),
            // The count is exact now (active branch only), so it needs no qualifier.
            format!("compactions   {}", self.compaction_count),
            match &self.last_compaction {
                Some(c) => format!(
                    "last          {} ({}), {} tokens before",
                    c.ago,
                    c.layer
                        .map_or_else(|| "layer not recorded".into(), |l| l.to_string()),
                    thousands(c.tokens_before)
                ),
                None => "last          never compacted".into(),
            },
            format!("degradation   {} risk: {}", d.risk, d.recommendation),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elapsed_time_is_one_or_two_units() {
        assert_eq!(elapsed_text(0), "0 seconds ago");
        assert_eq!(elapsed_text(1), "1 second ago");
        assert_eq!(elapsed_text(59), "59 seconds ago");
        assert_eq!(
            elapsed_text(3_600 * 3 + 60 * 2 + 5),
            "3 hours 2 minutes ago"
        );
        assert_eq!(elapsed_text(86_400), "1 day ago");
        // The "6months 24days 8h 48m 24s ago".
        let secs = (6 * 30 + 24) * 86_400 + 8 * 3_600 + 48 * 60 + 24;
        assert_eq!(elapsed_text(secs), "6 months 24 days ago");
        assert_eq!(elapsed_text(400 * 86_400), "1 year 1 month ago");
    }
}
