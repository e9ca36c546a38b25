//! Built-in compaction (what an engine's `delegate-compaction` runs): decide when and which
//! layer ([`builtin::prepare`]), prune old tool outputs, choose the cut so that recent context
//! stays, and summarize the older part in stages ([`builtin::Job::run`]) with a pluggable
//! [`Summarizer`]. What a compaction records in its entry's `details` is a
//! [`CompactionRecord`].

pub mod builtin;
pub mod citations;
pub mod extractive;
#[cfg(test)]
mod golden;
pub mod summarizer;

pub use crate::record::{CompactionRecord, Degradation, Layer, Risk, Tier, Trigger};
pub use builtin::{Estimate, Job, Policy, Request, Skip, degradation, degradation_at, prepare};
pub use summarizer::{Extractive, SummarizeError, Summarizer, SummaryRequest};

/// Compaction thresholds (pi / OpenClaw `compaction` settings) and the layered policy. Which
/// summarizer writes the summary is the host's business (it may be a model on the network).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub context_window: u64,
    pub reserve_tokens: u64,
    /// `reserve_tokens` is never taken below this; 0 disables the floor.
    pub reserve_tokens_floor: u64,
    pub keep_recent_tokens: u64,
    /// False: no automatic (or overflow) compaction; a manual one still runs.
    pub auto_enabled: bool,
    /// Automatic compaction fires at this share of the window when that comes before the
    /// reserve threshold (`autoThresholdPercent` / 100).
    pub auto_threshold_ratio: Option<f64>,
    /// The runtime is told before an automatic compaction (`notifyBeforeAuto`).
    pub notify_before_auto: bool,
    pub policy: Policy,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            context_window: 200_000,
            reserve_tokens: 16_384,
            reserve_tokens_floor: 20_000,
            keep_recent_tokens: 20_000,
            auto_enabled: true,
            auto_threshold_ratio: None,
            notify_before_auto: false,
            policy: Policy::default(),
        }
    }
}

impl Settings {
    /// These settings at another `window` (a replay, a runtime that names its window): scaled
    /// down when the window is too small for them (a 20,000-token reserve floor leaves nothing
    /// of a 32k window). Scaled, the threshold sits at 90% of the window, where the defaults put
    /// it for 200k and where the layered built-in compaction summarizes (it does nothing below
    /// 80%).
    pub fn for_window(&self, window: u64) -> Settings {
        let mut settings = self.clone();
        settings.context_window = window;
        if settings.threshold() < window / 2 {
            settings.reserve_tokens = window / 10;
            settings.reserve_tokens_floor = 0;
        }
        settings.keep_recent_tokens = settings.keep_recent_tokens.min(settings.threshold() / 2);
        settings
    }

    /// The context size the window leaves after the response reserve: a request above it does
    /// not fit.
    pub fn threshold(&self) -> u64 {
        self.context_window
            .saturating_sub(self.reserve_tokens.max(self.reserve_tokens_floor))
    }

    /// The context size above which automatic compaction fires: the reserve threshold, or
    /// `autoThresholdPercent` of the window when that is lower.
    pub fn auto_threshold(&self) -> u64 {
        let threshold = self.threshold();
        match self.auto_threshold_ratio {
            Some(ratio) => threshold.min((self.context_window as f64 * ratio) as u64),
            None => threshold,
        }
    }

    /// Whether an automatic compaction is due (never when automatic compaction is off).
    pub fn should_compact(&self, context_tokens: u64) -> bool {
        self.auto_enabled && context_tokens > self.auto_threshold()
    }
}

/// A compaction ready to append (`Transcript::append_compaction`).
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub first_kept_index: usize,
    pub tokens_before: u64,
    pub tokens_after: u64,
    pub messages_compacted: usize,
    pub details: CompactionRecord,
    pub layer: Layer,
    /// For the operator (full layer ran, degradation).
    pub warnings: Vec<String>,
    pub degradation: Degradation,
}

impl Plan {
    pub fn to_new_compaction(&self) -> crate::NewCompaction {
        crate::NewCompaction {
            summary: self.summary.clone(),
            first_kept_entry_id: self.first_kept_entry_id.clone(),
            tokens_before: self.tokens_before,
            details: Some(self.details.to_value()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_windows_get_a_usable_threshold_and_keep_recent_below_it() {
        let settings = Settings::default().for_window(32_000);
        assert_eq!(settings.threshold(), 28_800);
        assert_eq!(settings.keep_recent_tokens, 14_400);
        let settings = Settings::default().for_window(200_000);
        assert_eq!(settings.threshold(), 180_000);
        assert_eq!(settings.keep_recent_tokens, 20_000);
    }

    #[test]
    fn thresholds() {
        let s = Settings::default();
        assert_eq!(
            s.threshold(),
            200_000 - 20_000,
            "the floor wins over 16,384"
        );
        assert!(!s.should_compact(180_000));
        assert!(s.should_compact(180_001));
        let no_floor = Settings {
            reserve_tokens_floor: 0,
            ..Settings::default()
        };
        assert_eq!(no_floor.threshold(), 200_000 - 16_384);
        let tiny = Settings {
            context_window: 1000,
            ..Settings::default()
        };
        assert_eq!(tiny.threshold(), 0);
    }

    #[test]
    fn the_auto_threshold_comes_earlier_never_later_and_the_switch_stops_it() {
        let at_70 = Settings {
            auto_threshold_ratio: Some(0.70),
            ..Settings::default()
        };
        assert_eq!(at_70.auto_threshold(), 140_000);
        assert_eq!(
            at_70.threshold(),
            180_000,
            "the response reserve is unchanged"
        );
        assert!(at_70.should_compact(140_001));
        let at_99 = Settings {
            auto_threshold_ratio: Some(0.99),
            ..Settings::default()
        };
        assert_eq!(at_99.auto_threshold(), 180_000, "never past the reserve");
        let off = Settings {
            auto_enabled: false,
            ..Settings::default()
        };
        assert!(!off.should_compact(199_999));
    }
}
