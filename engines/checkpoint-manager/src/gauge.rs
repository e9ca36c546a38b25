//! The token gauge: how full the context is, as one line the engine inserts where it was read
//! (never in the system prompt, which would change the start of every request), and when to
//! write a checkpoint before the runtime's compaction makes the context forget.

use crate::config::Config;

/// What `assemble` should do at the current utilisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// Below the gauge threshold: say nothing.
    Quiet,
    /// Between the thresholds: show the gauge line.
    Show,
    /// At or above the checkpoint threshold: write a checkpoint unless the last automatic one
    /// is recent enough (`write: false`), then show the line with "Checkpoint saved".
    Checkpoint { write: bool },
}

/// Utilisation in whole percent (rounded down, so 79.9% never reads as 80%).
pub fn percent(context_tokens: u32, context_window: u32) -> u64 {
    u64::from(context_tokens) * 100 / u64::from(context_window.max(1))
}

/// Reads the gauge. `last_auto_tokens` is the input-token count of the last automatic
/// checkpoint since the last compaction, if any.
pub fn read(
    context_tokens: u32,
    context_window: u32,
    config: &Config,
    last_auto_tokens: Option<u32>,
) -> Level {
    if context_window == 0 {
        return Level::Quiet;
    }
    // Compared exactly (not the rounded-down percent shown), so fractional thresholds work.
    let utilisation = f64::from(context_tokens) * 100.0 / f64::from(context_window);
    if utilisation < config.gauge_percent {
        Level::Quiet
    } else if utilisation < config.checkpoint_percent {
        Level::Show
    } else {
        Level::Checkpoint {
            write: !moved_less_than(last_auto_tokens, context_tokens, config.dedupe_percent),
        }
    }
}

/// The gauge line: `[Context: 74% | 148k/200k tokens]`, with ` | Checkpoint saved`
/// when a checkpoint covers this state.
pub fn line(context_tokens: u32, context_window: u32, saved: bool) -> String {
    format!(
        "[Context: {}% | {}/{} tokens{}]",
        percent(context_tokens, context_window),
        kilo(context_tokens),
        kilo(context_window),
        if saved { " | Checkpoint saved" } else { "" }
    )
}

/// Whether `now` is within `percent` % of `last`.
fn moved_less_than(last: Option<u32>, now: u32, percent: f64) -> bool {
    let Some(last) = last else {
        return false;
    };
    f64::from(now.abs_diff(last)) * 100.0 < percent * f64::from(last.max(1))
}

/// `148k` for 148,213; exact below a thousand.
fn kilo(tokens: u32) -> String {
    if tokens < 1000 {
        tokens.to_string()
    } else {
        format!("{}k", (tokens + 500) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: u32 = 200_000;

    fn at(tokens: u32, last: Option<u32>) -> Level {
        read(tokens, WINDOW, &Config::default(), last)
    }

    #[test]
    fn quiet_below_seventy_percent() {
        assert_eq!(at(0, None), Level::Quiet);
        assert_eq!(at(139_999, None), Level::Quiet);
        assert_eq!(read(10, 0, &Config::default(), None), Level::Quiet);
    }

    #[test]
    fn a_line_between_seventy_and_eighty() {
        assert_eq!(at(140_000, None), Level::Show);
        assert_eq!(at(148_000, None), Level::Show);
        assert_eq!(at(159_999, None), Level::Show);
        assert_eq!(
            line(148_000, WINDOW, false),
            "[Context: 74% | 148k/200k tokens]"
        );
    }

    #[test]
    fn a_checkpoint_from_eighty() {
        assert_eq!(at(160_000, None), Level::Checkpoint { write: true });
        assert_eq!(at(250_000, None), Level::Checkpoint { write: true });
        assert_eq!(
            line(162_000, WINDOW, true),
            "[Context: 81% | 162k/200k tokens | Checkpoint saved]"
        );
    }

    #[test]
    fn repeated_checkpoints_wait_for_five_percent_of_movement() {
        let last = Some(160_000);
        assert_eq!(at(160_000, last), Level::Checkpoint { write: false });
        assert_eq!(at(167_999, last), Level::Checkpoint { write: false });
        assert_eq!(at(168_000, last), Level::Checkpoint { write: true });
        let config = Config {
            dedupe_percent: 0.0,
            ..Config::default()
        };
        assert_eq!(
            read(160_000, WINDOW, &config, last),
            Level::Checkpoint { write: true }
        );
    }

    #[test]
    fn thresholds_come_from_the_config() {
        let config = Config {
            gauge_percent: 50.0,
            checkpoint_percent: 60.0,
            ..Config::default()
        };
        assert_eq!(read(400, 1000, &config, None), Level::Quiet);
        assert_eq!(read(500, 1000, &config, None), Level::Show);
        assert_eq!(line(500, 1000, false), "[Context: 50% | 500/1k tokens]");
        assert_eq!(
            read(600, 1000, &config, None),
            Level::Checkpoint { write: true }
        );
    }
}
