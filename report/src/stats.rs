//! The per-run figures both renderings lead with, computed once so the page and the terminal
//! never disagree.

use crate::model::{Report, Run};
use crate::recut::{CompactedAt, recuts};
use crate::text::{duration, percent, thousands};

/// The share at or above which a turn counts as keeping the previous request as its prefix,
/// when the host did not say whether it did ([`crate::Turn::kept_previous`]).
pub const PREFIX_KEPT: f64 = 0.99;

/// A run's headline figures. Figures that need measurements the run lacks are `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStats {
    /// How many turns ran.
    pub turns: usize,
    /// How many compactions the host ran.
    pub compactions: usize,
    /// How many times the engine shrank its context on its own ([`crate::recuts`]).
    pub recuts: usize,
    /// The largest assembled request, in tokens (0 without turns).
    pub peak_tokens: u64,
    /// Tokens all compactions and re-cuts took out together (before minus after, summed).
    pub tokens_cut: u64,
    /// The median prefix share over the turns that measured one.
    pub median_prefix_share: Option<f64>,
    /// The share of measured turns that kept the previous request as their prefix.
    pub prefix_kept: Option<f64>,
    /// The same share, leaving out each first turn after a compaction (a compaction is
    /// expected to change the request, so this is the figure the goal is about).
    pub prefix_kept_between_compactions: Option<f64>,
    /// The median engine time over the turns that measured one, in microseconds.
    pub median_engine_micros: Option<f64>,
    /// Turns whose outcome was not `ok` (fallback, quarantine or unknown).
    pub degraded_turns: usize,
}

impl RunStats {
    /// Computes the figures for one run.
    pub fn of(run: &Run) -> RunStats {
        let shares: Vec<f64> = run
            .turns
            .iter()
            .filter_map(|t| clean_share(t.prefix_share))
            .collect();
        let kept: Vec<bool> = run.turns.iter().filter_map(kept_previous).collect();
        let compacted = CompactedAt::of(run);
        let mut between = Vec::new();
        let mut previous_message = 0;
        for turn in &run.turns {
            // A compaction between the previous turn and this one breaks the prefix on
            // purpose; leave this turn out.
            let after_compaction = compacted.between(previous_message, turn.message);
            previous_message = turn.message;
            if let (false, Some(kept)) = (after_compaction, kept_previous(turn)) {
                between.push(kept);
            }
        }
        let micros: Vec<f64> = run
            .turns
            .iter()
            .filter_map(|t| t.engine_micros)
            .map(|m| m as f64)
            .collect();
        let recuts = recuts(run);
        let cuts = (run.compactions.iter())
            .map(|c| (c.tokens_before, c.tokens_after))
            .chain(recuts.iter().map(|r| (r.tokens_before, r.tokens_after)));
        RunStats {
            turns: run.turns.len(),
            compactions: run.compactions.len(),
            recuts: recuts.len(),
            peak_tokens: run.turns.iter().map(|t| t.tokens).max().unwrap_or(0),
            tokens_cut: cuts
                .map(|(before, after)| before.saturating_sub(after))
                .sum(),
            median_prefix_share: median(shares.clone()),
            prefix_kept: kept_share(&kept),
            prefix_kept_between_compactions: kept_share(&between),
            median_engine_micros: median(micros),
            degraded_turns: run.turns.iter().filter(|t| t.outcome.is_degraded()).count(),
        }
    }
}

/// One line of the figures table both renderings show: a label and one cell per run.
pub(crate) struct FigureRow {
    pub(crate) label: &'static str,
    pub(crate) cells: Vec<String>,
}

/// The figures table, runs as columns: the same words and numbers on the page and in the
/// terminal. A figure a run could not measure reads "n/a".
pub(crate) fn figure_rows(report: &Report, stats: &[RunStats]) -> Vec<FigureRow> {
    let na = || "n/a".to_owned();
    let row = |label, cell: &dyn Fn(&Run, &RunStats) -> String| FigureRow {
        label,
        cells: report
            .runs
            .iter()
            .zip(stats)
            .map(|(r, s)| cell(r, s))
            .collect(),
    };
    let mut rows = Vec::new();
    if report.runs.iter().any(|r| r.contract_version.is_some()) {
        rows.push(row("contract", &|r, _| {
            r.contract_version.clone().unwrap_or_else(na)
        }));
    }
    rows.extend([
        row("window / threshold", &|r, _| {
            format!("{} / {}", known(r.context_window), known(r.threshold))
        }),
        row("turns", &|_, s| thousands(s.turns as u64)),
        row("compactions", &|_, s| thousands(s.compactions as u64)),
        row("engine re-cuts", &|_, s| thousands(s.recuts as u64)),
        row("tokens cut", &|_, s| thousands(s.tokens_cut)),
        row("peak tokens", &|r, s| match r.context_window {
            0 => thousands(s.peak_tokens),
            w => format!(
                "{} ({})",
                thousands(s.peak_tokens),
                percent(s.peak_tokens as f64 / w as f64)
            ),
        }),
        row("median prefix share", &|_, s| {
            s.median_prefix_share.map(percent).unwrap_or_else(na)
        }),
        row("turns keeping the previous request", &|_, s| {
            s.prefix_kept.map(percent).unwrap_or_else(na)
        }),
        row("  between compactions", &|_, s| {
            s.prefix_kept_between_compactions
                .map(percent)
                .unwrap_or_else(na)
        }),
        row("median engine time", &|_, s| {
            s.median_engine_micros.map(duration).unwrap_or_else(na)
        }),
        row("degraded turns", &|_, s| thousands(s.degraded_turns as u64)),
    ]);
    rows
}

fn known(tokens: u64) -> String {
    if tokens == 0 {
        "n/a".to_owned()
    } else {
        thousands(tokens)
    }
}

/// A prefix share as shown: clamped into 0..=1, and dropped when it is not a number at all.
pub(crate) fn clean_share(share: Option<f64>) -> Option<f64> {
    share.filter(|s| s.is_finite()).map(|s| s.clamp(0.0, 1.0))
}

/// Whether a turn kept the previous request as its prefix: as the host measured it, else by
/// its share; None when neither was measured.
fn kept_previous(turn: &crate::model::Turn) -> Option<bool> {
    turn.kept_previous
        .or_else(|| clean_share(turn.prefix_share).map(|share| share >= PREFIX_KEPT))
}

fn kept_share(kept: &[bool]) -> Option<f64> {
    if kept.is_empty() {
        return None;
    }
    Some(kept.iter().filter(|&&k| k).count() as f64 / kept.len() as f64)
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Compaction, Outcome, Turn};

    fn turn(message: usize, tokens: u64, share: Option<f64>, micros: Option<u64>) -> Turn {
        Turn {
            message,
            tokens,
            prefix_share: share,
            engine_micros: micros,
            ..Turn::default()
        }
    }

    #[test]
    fn figures_of_a_small_run() {
        let mut run = Run {
            engine: "legacy".into(),
            turns: vec![
                turn(2, 100, None, Some(10)),
                turn(4, 300, Some(1.0), Some(30)),
                turn(6, 120, Some(0.2), Some(20)),
                turn(8, 200, Some(0.995), None),
            ],
            compactions: vec![Compaction {
                message: 5,
                tokens_before: 320,
                tokens_after: 100,
                layer: None,
            }],
            ..Run::default()
        };
        run.turns[3].outcome = Outcome::Fallback;
        let stats = RunStats::of(&run);
        assert_eq!(stats.turns, 4);
        assert_eq!(stats.compactions, 1);
        // 300 → 120 follows the compaction; the fallback's 200 is the host's, not compared.
        assert_eq!(stats.recuts, 0);
        assert_eq!(stats.peak_tokens, 300);
        assert_eq!(stats.tokens_cut, 220);
        assert_eq!(stats.median_prefix_share, Some(0.995));
        assert_eq!(stats.prefix_kept, Some(2.0 / 3.0));
        // The turn at message 6 follows the compaction at 5, so only 1.0 and 0.995 count.
        assert_eq!(stats.prefix_kept_between_compactions, Some(1.0));
        assert_eq!(stats.median_engine_micros, Some(20.0));
        assert_eq!(stats.degraded_turns, 1);
    }

    #[test]
    fn tokens_cut_counts_compactions_and_recuts() {
        let run = Run {
            turns: vec![
                turn(2, 900, None, None),
                turn(4, 250, None, None),
                turn(6, 400, None, None),
                turn(8, 100, None, None),
            ],
            compactions: vec![Compaction {
                message: 4,
                tokens_before: 1_000,
                tokens_after: 250,
                layer: None,
            }],
            ..Run::default()
        };
        let stats = RunStats::of(&run);
        assert_eq!((stats.compactions, stats.recuts), (1, 1));
        assert_eq!(stats.tokens_cut, 750 + 300);
    }

    #[test]
    fn the_hosts_kept_flag_wins_over_the_share() {
        let mut grown = turn(4, 300, Some(0.9), None);
        grown.kept_previous = Some(true);
        let mut changed = turn(6, 300, Some(0.999), None);
        changed.kept_previous = Some(false);
        let run = Run {
            turns: vec![turn(2, 100, None, None), grown, changed],
            ..Run::default()
        };
        assert_eq!(RunStats::of(&run).prefix_kept, Some(0.5));
    }

    #[test]
    fn an_empty_run_has_no_medians() {
        let stats = RunStats::of(&Run::default());
        assert_eq!(stats.turns, 0);
        assert_eq!(stats.peak_tokens, 0);
        assert_eq!(stats.median_prefix_share, None);
        assert_eq!(stats.prefix_kept, None);
        assert_eq!(stats.median_engine_micros, None);
    }

    #[test]
    fn shares_out_of_range_are_clamped_and_nan_is_dropped() {
        assert_eq!(clean_share(Some(1.5)), Some(1.0));
        assert_eq!(clean_share(Some(-0.5)), Some(0.0));
        assert_eq!(clean_share(Some(f64::NAN)), None);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }
}
