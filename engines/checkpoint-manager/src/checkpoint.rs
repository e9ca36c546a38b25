//! The checkpoint file: schema `openclaw/checkpoint`, version 1, as YAML.
//!
//! The types below are the schema, field for field. Everything a user or a tool wrote lands in
//! a *value*, never in a key, and is emitted as a block scalar (free text) or a double-quoted
//! scalar (tool names), so no content can change the document's structure: a `---`, an anchor
//! `&a`, a `key: value` or a newline in a message is just text. Parsing goes through the same
//! crate, so a file this module wrote always reads back to the value it was written from.

use serde::{Deserialize, Serialize, Serializer};

/// The `schema` of every checkpoint.
pub const SCHEMA: &str = "openclaw/checkpoint";
/// The `schema_version` this engine writes and reads.
pub const SCHEMA_VERSION: u32 = 1;

/// One checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    #[serde(serialize_with = "quoted")]
    pub schema: String,
    pub schema_version: u32,
    pub meta: Meta,
    pub working: Working,
    pub decisions: Vec<Decision>,
    pub resources: Resources,
    pub thread: Thread,
    #[serde(serialize_with = "block_list")]
    pub open_items: Vec<String>,
    #[serde(serialize_with = "block_list")]
    pub learnings: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// `cp_NNN`, numbered per session key.
    pub checkpoint_id: String,
    pub session_key: String,
    pub session_file: String,
    /// ISO-8601 UTC.
    pub created_at: String,
    pub trigger: Trigger,
    pub compaction_count: u32,
    pub token_usage: TokenUsage,
    pub previous_checkpoint: Option<String>,
    pub channel: Option<String>,
    pub agent_id: Option<String>,
}

/// Why a checkpoint was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trigger {
    /// `assemble` saw utilisation at or above the checkpoint threshold.
    #[serde(rename = "auto-80pct")]
    Auto80Pct,
    /// `compact` was called: written before the summarizer runs.
    #[serde(rename = "compaction")]
    Compaction,
    /// The session closed (`dispose`).
    #[serde(rename = "session-end")]
    SessionEnd,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_tokens: u32,
    pub context_window: u32,
    /// `input_tokens / context_window`, two decimals.
    pub utilization: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Working {
    #[serde(serialize_with = "block")]
    pub topic: String,
    pub status: Status,
    /// The compaction fired mid-turn: the agent was between its tool calls.
    pub interrupted: bool,
    #[serde(serialize_with = "quoted_option")]
    pub last_tool_call: Option<String>,
    #[serde(serialize_with = "block")]
    pub next_action: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    InProgress,
    Idle,
    WaitingForUser,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// `d_NNN`.
    pub id: String,
    #[serde(serialize_with = "block")]
    pub what: String,
    /// ISO-8601 UTC of the user message that made it.
    pub when: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Resources {
    pub files_read: Vec<String>,
    pub files_modified: Vec<String>,
    #[serde(serialize_with = "quoted_list")]
    pub tools_used: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    #[serde(serialize_with = "block")]
    pub summary: String,
    pub key_exchanges: Vec<Exchange>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exchange {
    pub role: ExchangeRole,
    #[serde(serialize_with = "block")]
    pub gist: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExchangeRole {
    User,
    Agent,
}

/// Why a file is not a checkpoint this engine can use.
#[derive(Debug)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl Checkpoint {
    /// The YAML document.
    pub fn to_yaml(&self) -> Result<String, String> {
        let mut options = serde_saphyr::SerializerOptions::default();
        // Block scalars even for one-line text: the reader sees text exactly as it was said.
        options.min_fold_chars = 0;
        serde_saphyr::to_string_with_options(self, options).map_err(|e| e.to_string())
    }

    /// Parses a checkpoint and checks it is `openclaw/checkpoint` version 1.
    pub fn from_yaml(yaml: &str) -> Result<Checkpoint, ParseError> {
        let checkpoint: Checkpoint =
            serde_saphyr::from_str(yaml).map_err(|e| ParseError(e.to_string()))?;
        if checkpoint.schema != SCHEMA || checkpoint.schema_version != SCHEMA_VERSION {
            return Err(ParseError(format!(
                "schema {} version {} (this engine reads {SCHEMA} version {SCHEMA_VERSION})",
                checkpoint.schema, checkpoint.schema_version
            )));
        }
        Ok(checkpoint)
    }
}

// Emission styles. They only steer the serializer; parsing reads any YAML style back.

fn block<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    serde_saphyr::LitStr(text).serialize(s)
}

fn block_list<S: Serializer>(items: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(|item| serde_saphyr::LitStr(item)))
}

fn quoted<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    serde_saphyr::DoubleQuoted(text).serialize(s)
}

fn quoted_option<S: Serializer>(text: &Option<String>, s: S) -> Result<S::Ok, S::Error> {
    match text {
        Some(text) => quoted(text, s),
        None => s.serialize_none(),
    }
}

fn quoted_list<S: Serializer>(items: &[String], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(serde_saphyr::DoubleQuoted))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A checkpoint with every field set, each free-text field to `text`.
    pub(crate) fn sample(text: &str) -> Checkpoint {
        Checkpoint {
            schema: SCHEMA.into(),
            schema_version: SCHEMA_VERSION,
            meta: Meta {
                checkpoint_id: "cp_007".into(),
                session_key: "agent:main:telegram:dm:42".into(),
                session_file: "/home/u/.ctxhost/sessions/agent%3Amain.jsonl".into(),
                created_at: "2025-03-01T09:30:00Z".into(),
                trigger: Trigger::Compaction,
                compaction_count: 2,
                token_usage: TokenUsage {
                    input_tokens: 162_000,
                    context_window: 200_000,
                    utilization: 0.81,
                },
                previous_checkpoint: Some("cp_006".into()),
                channel: Some("telegram".into()),
                agent_id: Some("main".into()),
            },
            working: Working {
                topic: text.into(),
                status: Status::InProgress,
                interrupted: true,
                last_tool_call: Some(text.into()),
                next_action: text.into(),
            },
            decisions: vec![Decision {
                id: "d_001".into(),
                what: text.into(),
                when: "2025-03-01T09:00:00Z".into(),
            }],
            resources: Resources {
                files_read: vec!["src/main.rs".into(), text.into()],
                files_modified: vec![text.into()],
                tools_used: vec!["read".into(), text.into()],
            },
            thread: Thread {
                summary: text.into(),
                key_exchanges: vec![
                    Exchange {
                        role: ExchangeRole::User,
                        gist: text.into(),
                    },
                    Exchange {
                        role: ExchangeRole::Agent,
                        gist: "done".into(),
                    },
                ],
            },
            open_items: vec![text.into()],
            learnings: vec![text.into(), String::new()],
        }
    }

    /// The golden file: what `sample("Fix the parser")` must look like, byte for byte.
    const GOLDEN: &str = r#"schema: "openclaw/checkpoint"
schema_version: 1
meta:
  checkpoint_id: cp_007
  session_key: agent:main:telegram:dm:42
  session_file: /home/u/.ctxhost/sessions/agent%3Amain.jsonl
  created_at: "2025-03-01T09:30:00Z"
  trigger: compaction
  compaction_count: 2
  token_usage:
    input_tokens: 162000
    context_window: 200000
    utilization: 0.81
  previous_checkpoint: cp_006
  channel: telegram
  agent_id: main
working:
  topic: |-
    Fix the parser
  status: in_progress
  interrupted: true
  last_tool_call: "Fix the parser"
  next_action: |-
    Fix the parser
decisions:
- id: d_001
  what: |-
    Fix the parser
  when: "2025-03-01T09:00:00Z"
resources:
  files_read:
  - src/main.rs
  - Fix the parser
  files_modified:
  - Fix the parser
  tools_used:
  - "read"
  - "Fix the parser"
thread:
  summary: |-
    Fix the parser
  key_exchanges:
  - role: user
    gist: |-
      Fix the parser
  - role: agent
    gist: |-
      done
open_items:
- |-
  Fix the parser
learnings:
- |-
  Fix the parser
- |-
"#;

    #[test]
    fn golden_yaml_is_emitted_and_parses_back_field_by_field() {
        let checkpoint = sample("Fix the parser");
        let yaml = checkpoint.to_yaml().unwrap();
        assert_eq!(yaml, GOLDEN, "actual:\n{yaml}");

        let back = Checkpoint::from_yaml(GOLDEN).unwrap();
        assert_eq!(back.schema, "openclaw/checkpoint");
        assert_eq!(back.schema_version, 1);
        assert_eq!(back.meta, checkpoint.meta);
        assert_eq!(back.meta.trigger, Trigger::Compaction);
        assert_eq!(back.meta.token_usage.utilization, 0.81);
        assert_eq!(back.working, checkpoint.working);
        assert_eq!(back.decisions, checkpoint.decisions);
        assert_eq!(back.resources, checkpoint.resources);
        assert_eq!(back.thread, checkpoint.thread);
        assert_eq!(back.open_items, checkpoint.open_items);
        assert_eq!(back.learnings, checkpoint.learnings);
        assert_eq!(back, checkpoint);
    }

    #[test]
    fn hostile_text_round_trips_unchanged_and_never_becomes_structure() {
        let long = "word ".repeat(60);
        let hostile = [
            "",
            "key: value",
            "decisions: []\nschema: evil",
            "\"double\" and 'single' quotes",
            "line one\nline two\n\nline four",
            "---\n...\n---",
            "&a anchor then *a alias",
            "<<: *a",
            "  leading spaces\n\ttab",
            "trailing spaces   ",
            "ends with newlines\n\n\n",
            "\n\nstarts with newlines",
            "# not a comment",
            "- not a list",
            "| not a block",
            "null",
            "~",
            "yes",
            "0x1F",
            "!!binary aGk=",
            "%YAML 1.2",
            "{flow: map}, [flow, seq]",
            "carriage\r\nreturn",
            "bell\u{7} and nul\u{0}",
            "\u{feff}byte order mark",
            "日本語のテキスト, русский текст, العربية, עברית, हिन्दी 🎉",
            long.as_str(),
        ];
        for text in hostile {
            let checkpoint = sample(text);
            let yaml = checkpoint.to_yaml().unwrap();
            let back = Checkpoint::from_yaml(&yaml)
                .unwrap_or_else(|e| panic!("{text:?} does not parse back: {e}\n{yaml}"));
            assert_eq!(back, checkpoint, "{text:?} changed:\n{yaml}");
            // Structure is untouched: the same keys at the top level, in order.
            let top: Vec<&str> = yaml
                .lines()
                .filter(|l| !l.starts_with([' ', '-']) && !l.is_empty())
                .collect();
            assert_eq!(top.len(), 9, "{text:?}:\n{yaml}");
        }
    }

    #[test]
    fn other_schemas_and_garbage_are_rejected() {
        let yaml = GOLDEN.replace("schema_version: 1", "schema_version: 2");
        assert!(Checkpoint::from_yaml(&yaml).is_err());
        let yaml = GOLDEN.replace("openclaw/checkpoint", "other/thing");
        assert!(Checkpoint::from_yaml(&yaml).is_err());
        assert!(Checkpoint::from_yaml("").is_err());
        assert!(Checkpoint::from_yaml(&GOLDEN[..GOLDEN.len() / 2]).is_err());
        assert!(Checkpoint::from_yaml("\u{0}\u{1}garbage: [").is_err());
    }
}
