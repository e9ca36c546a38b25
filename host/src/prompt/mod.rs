//! What the host builds around the engine's messages for a model call: the system prompt
//! (runtime facts, bootstrap files, skills, tools, hints, operator text, the engine's addition)
//! and the token budget that remains for history. Pure functions of files and config; the
//! session puts them together with the engine's assembly.

pub mod bootstrap;
pub mod skills;
pub mod system;

use std::path::PathBuf;

pub use bootstrap::{BootstrapFile, BootstrapFiles};
pub use skills::Skill;
pub use system::{PromptMode, RuntimeFacts, Section, SectionKind, ToolSpec};

use crate::config::{AgentDefaults, MemoryFlushSettings};

/// The prompt-related settings of `agents.defaults`.
#[derive(Debug, Clone)]
pub struct PromptSettings {
    /// `workspace`: where bootstrap files and skills are read; None: neither.
    pub workspace: Option<PathBuf>,
    /// `bootstrapMaxChars`: cap per bootstrap file, in characters.
    pub bootstrap_max_chars: usize,
    /// `bootstrapFiles`: extra files (relative to the workspace), after the standard ones.
    pub bootstrap_files: Vec<String>,
    /// `extraSystemPrompt`: operator text appended to the system prompt.
    pub extra_system_prompt: Option<String>,
    /// `model` (`provider/model`), for the runtime section.
    pub model: Option<String>,
    /// `compaction.memoryFlush`: when to signal a memory-flush turn.
    pub memory_flush: MemoryFlushSettings,
}

impl PromptSettings {
    /// The prompt settings of the loaded `agents.defaults`.
    pub fn from_config(defaults: &AgentDefaults) -> Self {
        Self {
            workspace: defaults.workspace.clone(),
            bootstrap_max_chars: defaults.bootstrap_max_chars,
            bootstrap_files: defaults.bootstrap_files.clone(),
            extra_system_prompt: defaults.extra_system_prompt.clone(),
            model: defaults.model.clone(),
            memory_flush: defaults.compaction.memory_flush.clone(),
        }
    }
}

/// The workspace's prompt material, read once per request.
#[derive(Debug, Clone, Default)]
pub struct WorkspaceMaterial {
    /// The bootstrap files read.
    pub bootstrap: BootstrapFiles,
    /// The skills found under `skills/`.
    pub skills: Vec<Skill>,
    /// Files that exist but could not be read, and a workspace that is not a directory.
    pub warnings: Vec<String>,
    /// False when the workspace cannot be written (no memory flush then).
    pub writable: bool,
}

impl WorkspaceMaterial {
    /// Reads the workspace `settings` names; empty when it names none.
    pub fn read(settings: &PromptSettings) -> Self {
        let Some(dir) = &settings.workspace else {
            return Self::default();
        };
        let bootstrap =
            bootstrap::load(dir, &settings.bootstrap_files, settings.bootstrap_max_chars);
        let (skills, mut warnings) = skills::load(dir);
        warnings.extend(bootstrap.warnings.iter().cloned());
        if !dir.is_dir() {
            warnings.push(format!("workspace {} is not a directory", dir.display()));
        }
        // Permission bits first: as root a probe write succeeds even in a read-only tree.
        let read_only = std::fs::metadata(dir).is_ok_and(|m| m.permissions().readonly());
        let writable = !read_only && tempfile::NamedTempFile::new_in(dir).is_ok();
        Self {
            bootstrap,
            skills,
            warnings,
            writable,
        }
    }
}

/// Tokens of the system prompt the host would build before any engine addition or tools:
/// what a workspace adds to every request (`context status --workspace`).
pub fn system_tokens(settings: &PromptSettings) -> u64 {
    let material = WorkspaceMaterial::read(settings);
    let runtime = RuntimeFacts::current(settings.model.as_deref());
    let parts = system::PromptParts {
        mode: &PromptMode::Full,
        runtime: &runtime,
        bootstrap: &material.bootstrap,
        skills: &material.skills,
        tools: &[],
        extra: settings.extra_system_prompt.as_deref(),
        engine_addition: None,
    };
    system::sections(&parts)
        .iter()
        .map(|s| u64::from(s.tokens))
        .sum()
}
