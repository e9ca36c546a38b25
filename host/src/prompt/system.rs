//! The system prompt, assembled in sections in a fixed order, each with its token count so
//! the budget and `inspect` can account for every part of a model request.

use serde::Serialize;

use super::bootstrap::BootstrapFiles;
use super::skills::Skill;

/// What a section holds; `inspect --json` breaks the total down by these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum SectionKind {
    /// The engine's `system-prompt-addition`, prepended as OpenClaw does.
    EngineAddition,
    /// Host, OS, model and time.
    Runtime,
    /// The bootstrap files (full mode only).
    Identity,
    /// The skills list.
    Skills,
    /// The tools the runtime offers.
    Tools,
    /// The host's standing hints on working well (full mode only).
    Hints,
    /// The operator's `extraSystemPrompt`.
    Extra,
    /// The subagent preamble of minimal mode.
    Subagent,
}

/// One titled section of the system prompt.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Section {
    /// What it holds.
    pub kind: SectionKind,
    /// Its heading in the rendered prompt.
    pub title: String,
    /// Its text, without the heading.
    pub text: String,
    /// Its size in tokens, estimated from the text.
    pub tokens: u32,
}

/// A tool the embedding runtime offers the model.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ToolSpec {
    /// The tool's name as the model calls it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
}

/// Facts for the runtime section.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeFacts {
    /// The machine's host name (`unknown` when it cannot be read).
    pub host: String,
    /// The operating system, e.g. `linux`.
    pub os: String,
    /// The CPU architecture, e.g. `x86_64`.
    pub arch: String,
    /// The model's name, without the provider.
    pub model: Option<String>,
    /// The provider, from `provider/model`; None when the model names none.
    pub provider: Option<String>,
    /// ISO-8601 UTC.
    pub now: String,
    /// `$TZ`, else `UTC`.
    pub timezone: String,
}

impl RuntimeFacts {
    /// This machine, now; the model as configured (`provider/model`).
    pub fn current(model: Option<&str>) -> Self {
        let (provider, model) = match model.and_then(|m| m.split_once('/')) {
            Some((provider, model)) => (Some(provider.to_string()), Some(model.to_string())),
            None => (None, model.map(str::to_string)),
        };
        Self {
            host: std::fs::read_to_string("/etc/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "unknown".into()),
            os: std::env::consts::OS.into(),
            arch: std::env::consts::ARCH.into(),
            model,
            provider,
            now: crate::timestamp::now_iso_seconds(),
            timezone: std::env::var("TZ").unwrap_or_else(|_| "UTC".into()),
        }
    }
}

/// Full for the main agent; minimal for subagents (no identity, no proactive hints, a short
/// preamble carrying the task).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PromptMode {
    /// The main agent's prompt.
    Full,
    /// A subagent's prompt, carrying its task.
    Minimal {
        /// What the parent asked the subagent to do.
        task: String,
    },
}

/// Everything the system prompt is made of.
pub struct PromptParts<'a> {
    /// Full or minimal.
    pub mode: &'a PromptMode,
    /// Facts for the runtime section.
    pub runtime: &'a RuntimeFacts,
    /// The bootstrap files (left out in minimal mode).
    pub bootstrap: &'a BootstrapFiles,
    /// The skills found in the workspace.
    pub skills: &'a [Skill],
    /// The tools the runtime offers this turn.
    pub tools: &'a [ToolSpec],
    /// The operator's `extraSystemPrompt`.
    pub extra: Option<&'a str>,
    /// The engine's `system-prompt-addition`, which goes first.
    pub engine_addition: Option<&'a str>,
}

const HINTS: &str = "Work step by step and verify what you change. Prefer reading a file before editing it. \
Keep answers short; say what you did and what is left. When a tool fails, read its error before retrying.";

const SUBAGENT_PREAMBLE: &str = "You are a subagent spawned for one task. Do only that task, report the result \
concisely, and stop. You do not see the parent conversation.";

fn section(kind: SectionKind, title: &str, text: String) -> Section {
    Section {
        kind,
        title: title.to_string(),
        tokens: ctxhost_transcript::tokens::estimate_text(&text),
        text,
    }
}

/// The sections in order: engine addition, runtime, identity, skills, tools, hints, extra
/// (minimal mode: engine addition, subagent preamble, runtime, tools, extra).
pub fn sections(parts: &PromptParts<'_>) -> Vec<Section> {
    let full = !matches!(parts.mode, PromptMode::Minimal { .. });
    let hints = || section(SectionKind::Hints, "Working style", HINTS.to_string());
    let skills = parts.skills.iter().map(|s| (&s.name, &s.description));
    let tools = parts.tools.iter().map(|t| (&t.name, &t.description));
    [
        (parts.engine_addition)
            .and_then(|text| written(SectionKind::EngineAddition, "Context engine", text)),
        subagent_section(parts.mode),
        Some(runtime_section(parts.runtime)),
        full.then(|| identity_section(parts.bootstrap)).flatten(),
        full.then(|| listed(SectionKind::Skills, "Skills", skills))
            .flatten(),
        listed(SectionKind::Tools, "Tools", tools),
        full.then(hints),
        (parts.extra).and_then(|text| written(SectionKind::Extra, "Operator instructions", text)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A section of text someone wrote (the engine, the operator); none when it is blank.
fn written(kind: SectionKind, title: &str, text: &str) -> Option<Section> {
    (!text.trim().is_empty()).then(|| section(kind, title, text.to_string()))
}

/// The subagent preamble with its task, in minimal mode.
fn subagent_section(mode: &PromptMode) -> Option<Section> {
    let PromptMode::Minimal { task } = mode else {
        return None;
    };
    let text = format!("{SUBAGENT_PREAMBLE}\n\nTask: {task}");
    Some(section(SectionKind::Subagent, "Subagent", text))
}

fn runtime_section(r: &RuntimeFacts) -> Section {
    let mut runtime = format!(
        "Host: {}\nOS: {} ({})\nTime: {} ({})",
        r.host, r.os, r.arch, r.now, r.timezone
    );
    if let Some(model) = &r.model {
        runtime.push_str(&format!("\nModel: {model}"));
    }
    if let Some(provider) = &r.provider {
        runtime.push_str(&format!("\nProvider: {provider}"));
    }
    section(SectionKind::Runtime, "Runtime", runtime)
}

/// The bootstrap files, each under its name; none without files.
fn identity_section(bootstrap: &BootstrapFiles) -> Option<Section> {
    if bootstrap.files.is_empty() {
        return None;
    }
    let text = (bootstrap.files.iter())
        .map(|f| format!("## {}\n{}", f.name, f.content))
        .collect::<Vec<_>>()
        .join("\n\n");
    Some(section(SectionKind::Identity, "Agent identity", text))
}

/// A list of named things (skills, tools) as bullets; none for an empty list.
fn listed<'a>(
    kind: SectionKind,
    title: &str,
    items: impl ExactSizeIterator<Item = (&'a String, &'a String)>,
) -> Option<Section> {
    (items.len() > 0).then(|| section(kind, title, bullets(items)))
}

/// `- name: description` lines.
fn bullets<'a>(items: impl Iterator<Item = (&'a String, &'a String)>) -> String {
    items
        .map(|(name, description)| format!("- {name}: {description}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sections as one prompt.
pub fn render(sections: &[Section]) -> String {
    sections
        .iter()
        .map(|s| format!("# {}\n{}", s.title, s.text))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompt::bootstrap::BootstrapFile;

    fn facts() -> RuntimeFacts {
        RuntimeFacts {
            host: "h".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            model: Some("m".into()),
            provider: Some("p".into()),
            now: "2026-01-01T00:00:00Z".into(),
            timezone: "UTC".into(),
        }
    }

    fn bootstrap() -> BootstrapFiles {
        BootstrapFiles {
            files: vec![BootstrapFile {
                name: "AGENTS.md".into(),
                content: "rules".into(),
                original_chars: 5,
                truncated: false,
            }],
            warnings: vec![],
        }
    }

    #[test]
    fn sections_come_in_order_with_the_engine_addition_first() {
        let skills = [Skill {
            name: "pdf".into(),
            description: "PDFs".into(),
        }];
        let tools = [ToolSpec {
            name: "read".into(),
            description: "Read a file".into(),
        }];
        let boot = bootstrap();
        let runtime = facts();
        let parts = PromptParts {
            mode: &PromptMode::Full,
            runtime: &runtime,
            bootstrap: &boot,
            skills: &skills,
            tools: &tools,
            extra: Some("Be terse."),
            engine_addition: Some("[Context: 74%]"),
        };
        let kinds: Vec<SectionKind> = sections(&parts).iter().map(|s| s.kind).collect();
        use SectionKind::*;
        assert_eq!(
            kinds,
            [
                EngineAddition,
                Runtime,
                Identity,
                Skills,
                Tools,
                Hints,
                Extra
            ]
        );
        let text = render(&sections(&parts));
        assert!(text.starts_with("# Context engine\n[Context: 74%]"));
        assert!(text.contains("Model: m") && text.contains("Provider: p"));
    }

    #[test]
    fn minimal_mode_omits_identity_skills_and_hints_and_carries_the_task() {
        let boot = bootstrap();
        let runtime = facts();
        let skills = [Skill {
            name: "pdf".into(),
            description: "PDFs".into(),
        }];
        let mode = PromptMode::Minimal {
            task: "Count the TODOs".into(),
        };
        let parts = PromptParts {
            mode: &mode,
            runtime: &runtime,
            bootstrap: &boot,
            skills: &skills,
            tools: &[],
            extra: None,
            engine_addition: None,
        };
        let out = sections(&parts);
        let kinds: Vec<SectionKind> = out.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, [SectionKind::Subagent, SectionKind::Runtime]);
        assert!(out[0].text.contains("Task: Count the TODOs"));
        assert!(
            out.iter()
                .all(|s| s.tokens == ctxhost_transcript::tokens::estimate_text(&s.text))
        );
    }
}
