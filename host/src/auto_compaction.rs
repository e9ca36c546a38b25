//! Automatic compaction as a runtime drives it: whether one is due now (the `enabled` switch
//! and the threshold, `autoThresholdPercent` included), and the notice `notifyBeforeAuto`
//! asks for before it runs. `replay` prints the notice on stderr, `serve` sends it as the
//! `session.compactionPending` notification, and an embedding runtime reads it here.

use serde::Serialize;

use ctxhost_transcript::compaction::Settings;

/// An automatic compaction about to run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AutoCompaction {
    /// The session's key, for the notice and the runtime's log.
    pub session_key: String,
    /// The session's context now, by the count compaction decides with.
    pub context_tokens: u64,
    /// The context size automatic compaction fires above.
    pub threshold: u64,
    /// The model's context window in tokens (`agents.defaults.contextWindow`), which the threshold
    /// is a share of.
    pub context_window: u64,
    /// `notifyBeforeAuto`: the runtime should tell its user before compacting.
    pub notify: bool,
}

impl AutoCompaction {
    /// Whether the session with these settings is due an automatic compaction at
    /// `context_tokens` (by the count compaction decides with): automatic compaction is on and
    /// the context passed its threshold. None otherwise.
    pub fn due(settings: &Settings, session_key: &str, context_tokens: u64) -> Option<Self> {
        settings.should_compact(context_tokens).then(|| Self {
            session_key: session_key.to_string(),
            context_tokens,
            threshold: settings.auto_threshold(),
            context_window: settings.context_window,
            notify: settings.notify_before_auto,
        })
    }

    /// The notice to show, when the operator asked for one.
    pub fn notice(&self) -> Option<String> {
        self.notify.then(|| self.to_string())
    }
}

impl std::fmt::Display for AutoCompaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "automatic compaction of session `{}`: the context is at {} tokens, above the threshold of {} ({:.0}% of the {}-token window)",
            self.session_key,
            self.context_tokens,
            self.threshold,
            self.threshold as f64 * 100.0 / self.context_window.max(1) as f64,
            self.context_window
        )
    }
}
