//! What a report is made of: one session, one or more engine runs over it, and per run the
//! turns, the compactions and the recall probes. The host fills these in (or reads them from
//! JSON); nothing here renders.
//!
//! Every optional figure may be missing and every list may be empty: a ledger cut short or a
//! replay that failed early still makes a report, it just says less.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A whole report: the session it is about and the runs to show side by side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// The page's heading (for example "Session 5e1f: legacy vs checkpoint-manager").
    #[serde(default)]
    pub title: String,
    /// The session the runs are over: its transcript path or its name.
    #[serde(default)]
    pub session: String,
    /// When the report was made, as the host words it (shown as is, never parsed).
    #[serde(default)]
    pub generated_at: String,
    /// One run per engine (or per configuration); plotted on shared axes in this order.
    #[serde(default)]
    pub runs: Vec<Run>,
}

impl Report {
    /// The title, or a plain one when the host gave none.
    pub(crate) fn heading(&self) -> &str {
        if self.title.is_empty() {
            "ctxhost report"
        } else {
            &self.title
        }
    }
}

/// One engine's run over the session: every turn it assembled and every compaction.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Run {
    /// The engine's name, which labels the run's series and columns.
    pub engine: String,
    /// The WIT contract version the engine was built against, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract_version: Option<String>,
    /// The model's context window in tokens; 0 when unknown (no window line is drawn).
    #[serde(default)]
    pub context_window: u64,
    /// The compaction threshold in tokens; 0 when unknown (no threshold line is drawn).
    #[serde(default)]
    pub threshold: u64,
    /// The turns in the order they ran.
    #[serde(default)]
    pub turns: Vec<Turn>,
    /// The compactions in the order they happened.
    #[serde(default)]
    pub compactions: Vec<Compaction>,
    /// The recall probe results, when the probes were run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probes: Option<ProbeSummary>,
}

/// One model turn: the request the engine assembled before a message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Turn {
    /// The 1-based number of the message the turn ran before (the x axis of every plot).
    pub message: usize,
    /// Tokens in the assembled request.
    pub tokens: u64,
    /// The share (0 to 1) of this request that is a byte-identical prefix of the previous turn's
    /// request, which is what a provider's prompt cache can reuse. None for the first turn or
    /// when it was not measured; a value outside 0..=1 is clamped when shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix_share: Option<f64>,
    /// Whether the previous turn's request is an exact prefix of this one (the request only
    /// grew), when the host measured it. Without it a turn counts as keeping its prefix when its
    /// share is at least [`crate::PREFIX_KEPT`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept_previous: Option<bool>,
    /// Time spent inside the engine for this turn, in microseconds, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_micros: Option<u64>,
    /// Whether the engine ran, or what the host did instead.
    #[serde(default)]
    pub outcome: Outcome,
    /// Why, when the outcome needs explaining (the fallback's cause, the quarantine's error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What happened on a turn. Serialized as a lower-case string; a string this version does not
/// know is kept as [`Outcome::Other`], so a newer host's ledger still renders.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(from = "String", into = "String")]
pub enum Outcome {
    /// The engine ran and its answer was used.
    #[default]
    Ok,
    /// The engine failed or timed out and the host used its built-in fallback for the turn.
    Fallback,
    /// The engine is quarantined after repeated faults; the host did the turn without it.
    Quarantined,
    /// An outcome this version does not know, kept as written.
    Other(String),
}

impl Outcome {
    /// The outcome as written in JSON: `ok`, `fallback`, `quarantined` or the unknown word.
    pub fn as_str(&self) -> &str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Fallback => "fallback",
            Outcome::Quarantined => "quarantined",
            Outcome::Other(word) => word,
        }
    }

    /// True when the engine's own answer was not what the model got.
    pub fn is_degraded(&self) -> bool {
        *self != Outcome::Ok
    }
}

impl From<String> for Outcome {
    fn from(word: String) -> Self {
        match word.as_str() {
            "ok" => Outcome::Ok,
            "fallback" => Outcome::Fallback,
            "quarantined" => Outcome::Quarantined,
            _ => Outcome::Other(word),
        }
    }
}

impl From<Outcome> for String {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::Other(word) => word,
            known => known.as_str().to_owned(),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One compaction: what the context held before and after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Compaction {
    /// The 1-based number of the message before which the compaction ran.
    pub message: usize,
    /// Context tokens before the compaction.
    pub tokens_before: u64,
    /// Context tokens after the compaction.
    pub tokens_after: u64,
    /// Who compacted (for example "engine" or "runtime"), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
}

/// The recall probes' results for a run: can the agent still reach what compaction took out.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeSummary {
    /// One row per probe kind.
    #[serde(default)]
    pub rows: Vec<ProbeRow>,
}

/// One kind of probe: how many of its facts were reachable.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProbeRow {
    /// What was probed (for example "in context" or "via ctx_search").
    pub label: String,
    /// How many probes found their fact.
    pub reachable: u32,
    /// How many probes ran.
    pub total: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_camel_case_and_round_trips() {
        let run = Run {
            engine: "legacy".into(),
            contract_version: Some("0.3.0".into()),
            context_window: 32_000,
            threshold: 24_000,
            turns: vec![Turn {
                message: 2,
                tokens: 900,
                prefix_share: Some(0.5),
                kept_previous: Some(false),
                engine_micros: Some(12),
                outcome: Outcome::Quarantined,
                note: Some("why".into()),
            }],
            compactions: vec![Compaction {
                message: 3,
                tokens_before: 9,
                tokens_after: 2,
                layer: Some("engine".into()),
            }],
            probes: Some(ProbeSummary {
                rows: vec![ProbeRow {
                    label: "l".into(),
                    reachable: 1,
                    total: 2,
                }],
            }),
        };
        let report = Report {
            title: "t".into(),
            session: "s".into(),
            generated_at: "g".into(),
            runs: vec![run],
        };
        let json = serde_json::to_string(&report).expect("serializes");
        for key in [
            "generatedAt",
            "contractVersion",
            "contextWindow",
            "prefixShare",
            "engineMicros",
            "tokensBefore",
        ] {
            assert!(json.contains(&format!("\"{key}\"")), "{key} in {json}");
        }
        assert!(json.contains(r#""outcome":"quarantined""#));
        assert_eq!(
            serde_json::from_str::<Report>(&json).expect("parses"),
            report
        );
    }

    #[test]
    fn missing_optional_values_and_unknown_words_still_parse() {
        let json = r#"{"runs":[{"engine":"e","turns":[{"message":1,"tokens":5},
            {"message":2,"tokens":6,"outcome":"skipped","futureField":true}]}],"alsoNew":1}"#;
        let report: Report = serde_json::from_str(json).expect("parses");
        let run = &report.runs[0];
        assert_eq!(
            (run.context_window, run.threshold, run.probes.is_none()),
            (0, 0, true)
        );
        assert_eq!(run.turns[0].outcome, Outcome::Ok);
        assert_eq!(run.turns[1].outcome, Outcome::Other("skipped".into()));
        assert!(run.turns[1].outcome.is_degraded());
        assert_eq!(
            serde_json::to_string(&run.turns[1].outcome).expect("serializes"),
            r#""skipped""#
        );
    }
}
