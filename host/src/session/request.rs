//! A whole model request around the engine's assembly: system prompt sections, the history
//! budget that remains, overflow recovery (the turn driver by its overflow rule: compact, then
//! assemble again), and the pre-compaction memory-flush signal.

use std::collections::HashSet;

use ctxhost_transcript::tokens::estimate_text;
use ctxhost_transcript::{CompactionRecord, Entry, PRUNED_TEXT, Role, Transcript};
use serde::Serialize;
use serde_json::Value;

use super::turn::{CompactionRule, Driven, TurnSize};
use super::{AssembleOptions, AssembledItem, Assembly, CompactOutcome, PendingCall, Session};
use crate::error::{ContextOverflow, Error, Result};
use crate::prompt::{
    PromptMode, PromptSettings, RuntimeFacts, Section, SectionKind, ToolSpec, WorkspaceMaterial,
    system,
};

/// What the embedding runtime asks for.
#[derive(Debug, Clone)]
pub struct TurnOptions {
    /// Full for the main agent, minimal for a subagent.
    pub mode: PromptMode,
    /// The tools the runtime offers this turn, listed in the system prompt.
    pub tools: Vec<ToolSpec>,
    /// The message about to be sent (counted, not yet in the transcript).
    pub current_message: Option<Value>,
}

impl Default for TurnOptions {
    fn default() -> Self {
        Self {
            mode: PromptMode::Full,
            tools: Vec::new(),
            current_message: None,
        }
    }
}

/// Tokens by part of the request; the parts add up to `total`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Breakdown {
    /// The rest of the system prompt (runtime, hints, extra prompt, subagent preamble).
    pub system: u64,
    /// The bootstrap files.
    pub bootstrap: u64,
    /// The skills list.
    pub skills: u64,
    /// The tools section.
    pub tools: u64,
    /// The history: the engine's assembled messages.
    pub history: u64,
    /// The engine's system-prompt addition.
    pub engine_additions: u64,
    /// The message about to be sent ([`TurnOptions::current_message`]).
    pub current_message: u64,
    /// The whole request: the parts above.
    pub total: u64,
    /// The model's context window.
    pub window: u64,
    /// The response reserve the window keeps free (`reserveTokens`, at least `reserveTokensFloor`).
    pub response_reserve: u64,
    /// What `assemble` was given for history.
    pub history_budget: u64,
}

/// The runtime should run a memory-flush turn before compaction.
#[derive(Debug, Clone, Serialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlushSignal {
    /// The flush turn's user message (`memoryFlush.prompt`).
    pub prompt: String,
    /// The flush turn's system prompt (`memoryFlush.systemPrompt`).
    pub system_prompt: String,
    /// The context's tokens now.
    pub context_tokens: u64,
    /// The flush threshold it passed: the automatic-compaction threshold less
    /// `memoryFlush.softThresholdTokens`.
    pub threshold: u64,
}

/// A model request, ready to send.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelRequest {
    /// The whole system prompt, rendered.
    pub system_prompt: String,
    /// Its sections in order, each with its tokens.
    pub sections: Vec<Section>,
    /// What each message is: a transcript entry (by index) or an engine insertion.
    #[serde(skip)]
    pub items: Vec<AssembledItem>,
    /// AgentMessage JSON, kept entries byte-identical to the transcript.
    pub messages: Vec<String>,
    /// Token count of each message, in order.
    pub message_tokens: Vec<u32>,
    /// How many of the messages the engine inserted (the rest are transcript entries).
    pub inserted_messages: usize,
    /// The engine's system-prompt addition, also the first section when present.
    pub engine_addition: Option<String>,
    /// Tokens by part of the request.
    pub breakdown: Breakdown,
    /// Bootstrap files cut to `bootstrapMaxChars`: (file, original characters).
    pub truncated: Vec<(String, usize)>,
    /// Problems reading the workspace (unreadable files, a workspace that is not a directory).
    pub warnings: Vec<String>,
    /// Set when the request did not fit and a compaction ran first.
    pub overflow_compaction: Option<CompactOutcome>,
    /// The request's total before that compaction.
    pub total_before_compaction: Option<u64>,
    /// Set once per compaction cycle when a memory-flush turn is due (see [`FlushSignal`]).
    pub flush: Option<FlushSignal>,
    /// Set (by [`Session::inspect_request`] only) when the request does not fit even after
    /// compacting; [`Session::prepare_request`] returns it as an error instead.
    pub overflow: Option<ContextOverflow>,
}

impl Breakdown {
    /// What the window leaves for the request after the response reserve.
    pub fn available(&self) -> u64 {
        self.window.saturating_sub(self.response_reserve)
    }
}

impl ContextOverflow {
    fn new(b: &Breakdown) -> Self {
        Self {
            total: b.total,
            window: b.window,
            reserve: b.response_reserve,
            available: b.available(),
            system: b.system,
            bootstrap: b.bootstrap,
            skills: b.skills,
            tools: b.tools,
            history: b.history,
            engine: b.engine_additions,
            current: b.current_message,
        }
    }
}

/// What compactions are measured by: the host's count of the context messages (chars/4, or
/// the configured token counter) — the part of the request a compaction changes. Recorded
/// usage is not comparable with it (it includes the system prompt, and a server that truncated
/// requests records less than the messages hold), so "before" and "after" are both this count.
pub(super) fn counted_context_tokens(transcript: &Transcript) -> u64 {
    let entries = transcript.entries();
    transcript
        .context()
        .iter()
        .copied()
        .map(|i| u64::from(entries[i].tokens()))
        .sum()
}

/// The context a compaction would leave, counted like [`counted_context_tokens`]: the summary,
/// then the context messages from the first kept entry on (tool results the compaction prunes
/// counted as the placeholder). None when `first_kept` is not in the context.
pub(super) fn counted_tokens_after(
    transcript: &Transcript,
    summary: &str,
    first_kept: usize,
    pruned_ids: &HashSet<&str>,
) -> Option<u64> {
    let entries = transcript.entries();
    let count = |text: &str| u64::from(counted_text(transcript, text));
    let ctx = transcript.context();
    let from = ctx.iter().position(|&i| i == first_kept)?;
    let placeholder = count(PRUNED_TEXT);
    let kept: u64 = (ctx[from..].iter())
        .map(|&i| &entries[i])
        .filter(|e| e.entry_type() != "compaction")
        .map(|e| tokens_once_pruned(e, pruned_ids, placeholder))
        .sum();
    Some(count(summary) + kept)
}

/// An entry's tokens once a compaction prunes the tool results `pruned_ids`: one it prunes
/// now counts as the `placeholder`.
fn tokens_once_pruned(entry: &Entry, pruned_ids: &HashSet<&str>, placeholder: u64) -> u64 {
    let pruned_now = entry.context_role() == Some(Role::ToolResult)
        && !entry.is_pruned()
        && pruned_ids.contains(entry.id());
    if pruned_now {
        placeholder
    } else {
        u64::from(entry.tokens())
    }
}

/// `text`'s tokens by the transcript's counter (chars/4 without one).
fn counted_text(transcript: &Transcript, text: &str) -> u32 {
    (transcript.token_counter()).map_or_else(|| estimate_text(text), |c| c.count_text(text))
}

/// The ids of a compaction's `details.prunedEntryIds`.
pub(super) fn pruned_ids(record: &CompactionRecord) -> HashSet<&str> {
    record.pruned_entry_ids.iter().map(String::as_str).collect()
}

impl Session {
    /// The two figures a compaction of `transcript` at a `window`-token context window starts
    /// from, as `Session::compact` takes them (a dry run must agree with it):
    /// `(counted, fullness)`. `counted` is the host's count of the context messages, what
    /// "before" and "after" are compared by; `fullness` is what the engine is told as current
    /// tokens, recorded usage (for this window) unless it is below `counted` (then it cannot
    /// describe this context).
    pub fn compaction_tokens(transcript: &Transcript, window: u64) -> (u64, u64) {
        let counted = counted_context_tokens(transcript);
        (
            counted,
            transcript.context_tokens_in_window(window).max(counted),
        )
    }

    /// The context a compaction (summary, first kept entry index, details) would leave in
    /// `transcript`, counted as `Session::compact` counts it before writing; None when the first
    /// kept entry is not in the context.
    pub fn compaction_tokens_after(
        transcript: &Transcript,
        summary: &str,
        first_kept: usize,
        details: &CompactionRecord,
    ) -> Option<u64> {
        counted_tokens_after(transcript, summary, first_kept, &pruned_ids(details))
    }

    /// Builds the next model request: system prompt, history from the engine within what the
    /// window leaves, and — when it does not fit — one compaction and a second assembly (the
    /// turn driver by its overflow rule), else a `ContextOverflow` with the numbers.
    pub async fn prepare_request(
        &mut self,
        settings: &PromptSettings,
        options: &TurnOptions,
    ) -> Result<ModelRequest> {
        let mut request = self.inspect_request(settings, options).await?;
        match request.overflow.take() {
            Some(overflow) => Err(Error::Overflow(overflow)),
            None => Ok(request),
        }
    }

    /// Tokens the agent's own part of a request takes (system prompt, bootstrap files,
    /// skills, tool schemas, the prompt): what a [`super::TurnRequest`] counts toward the
    /// threshold besides the engine's context.
    pub fn agent_tokens(&self, settings: &PromptSettings, options: &TurnOptions) -> u64 {
        let material = WorkspaceMaterial::read(settings);
        let runtime = RuntimeFacts::current(settings.model.as_deref());
        let base_parts = base_parts(settings, options, &runtime, &material);
        let (fixed, current) = Self::agent_parts(&base_parts, options);
        fixed + current
    }

    /// The system prompt without the engine's addition, and the prompt, in tokens.
    fn agent_parts(base_parts: &system::PromptParts<'_>, options: &TurnOptions) -> (u64, u64) {
        let fixed = (system::sections(base_parts).iter())
            .map(|s| u64::from(s.tokens))
            .sum();
        let current = options.current_message.as_ref().map_or(0, |m| {
            u64::from(ctxhost_transcript::tokens::estimate_message(m))
        });
        (fixed, current)
    }

    /// [`Session::prepare_request`] for diagnostics (`context inspect`, replays): a request that
    /// does not fit even after compacting is returned whole, with `overflow` set, because the
    /// sessions that overflow are the ones whose request needs looking at.
    pub async fn inspect_request(
        &mut self,
        settings: &PromptSettings,
        options: &TurnOptions,
    ) -> Result<ModelRequest> {
        let material = WorkspaceMaterial::read(settings);
        let runtime = RuntimeFacts::current(settings.model.as_deref());
        let base_parts = base_parts(settings, options, &runtime, &material);
        let frame = self.request_frame(&base_parts, options);
        // Before the turn: a compaction it runs starts a new cycle.
        let flush = self.flush_signal(settings, &material);
        let assemble = AssembleOptions {
            token_budget: Some(super::tokens_u32(frame.history_budget)),
            available_tools: options.tools.iter().map(|t| t.name.clone()).collect(),
        };
        let available = frame.available();
        let rule = CompactionRule::Overflow { available };
        let measure = |session: &Session, assembly: &Assembly| {
            session.measure_request(&base_parts, assembly, &frame)
        };
        let pending = PendingCall::default();
        let driven = self.drive_turn(&assemble, &pending, rule, measure).await?;
        Ok(self.model_request(driven, material, flush))
    }

    /// What every measure of a request shares (`measure_request` fills in the rest): the
    /// window, the response reserve, the message about to be sent, and the history budget
    /// that leaves beside the agent's own part of the request.
    fn request_frame(
        &self,
        base_parts: &system::PromptParts<'_>,
        options: &TurnOptions,
    ) -> Breakdown {
        let (fixed, current) = Self::agent_parts(base_parts, options);
        let window = self.context_window();
        // The response reserve is the session's compaction reserve (reserveTokens, never below
        // its floor): what compaction keeps free is what the model's answer may use.
        let reserve = window.saturating_sub(self.shared.settings().threshold());
        let available = window - reserve;
        Breakdown {
            current_message: current,
            window,
            response_reserve: reserve,
            history_budget: available.saturating_sub(fixed + current),
            ..Breakdown::default()
        }
    }

    /// The request around the context the turn driver settled on.
    fn model_request(
        &self,
        driven: Driven<MeasuredRequest>,
        material: WorkspaceMaterial,
        flush: Option<FlushSignal>,
    ) -> ModelRequest {
        let (assembly, measured) = (driven.assembly, driven.measured);
        // The overflow rule fails the request when the engine fails to compact, so a
        // compaction here is one that ran.
        let (overflow_compaction, total_before_compaction) = (driven.compaction)
            .and_then(|c| Some((c.outcome.ok()?, c.measured_tokens)))
            .unzip();
        let breakdown = measured.breakdown;
        ModelRequest {
            system_prompt: system::render(&measured.sections),
            sections: measured.sections,
            messages: self.render(&assembly),
            message_tokens: measured.message_tokens,
            inserted_messages: assembly.inserted(),
            items: assembly.items().collect(),
            engine_addition: assembly.system_prompt_addition,
            overflow: (breakdown.total > breakdown.available())
                .then(|| ContextOverflow::new(&breakdown)),
            breakdown,
            truncated: material.bootstrap.truncated_files(),
            warnings: material.warnings,
            overflow_compaction,
            total_before_compaction,
            flush,
        }
    }

    fn sections_with_addition(
        &self,
        base: &system::PromptParts<'_>,
        assembly: &Assembly,
    ) -> Vec<Section> {
        let parts = system::PromptParts {
            engine_addition: assembly.system_prompt_addition.as_deref(),
            ..*base
        };
        system::sections(&parts)
    }

    /// The host's own count of each assembled item (kept entries as the transcript has them,
    /// inserted messages estimated), so the engine's arithmetic is never trusted for budgets.
    fn item_tokens(&self, assembly: &Assembly) -> Vec<u32> {
        let transcript = self.shared.read();
        assembly
            .items()
            .map(|item| match item {
                AssembledItem::Entry(index) => transcript.entries()[index].tokens(),
                AssembledItem::Inserted(json) => serde_json::from_str::<Value>(&json)
                    .map_or(0, |m| ctxhost_transcript::tokens::estimate_message(&m)),
            })
            .collect()
    }

    /// An assembly measured by the host: each item's tokens (counted once: the breakdown sums
    /// them, the request carries them), the system prompt with the engine's addition, and the
    /// breakdown of `frame`'s window.
    fn measure_request(
        &self,
        base: &system::PromptParts<'_>,
        assembly: &Assembly,
        frame: &Breakdown,
    ) -> MeasuredRequest {
        let message_tokens = self.item_tokens(assembly);
        let sections = self.sections_with_addition(base, assembly);
        let breakdown = Self::breakdown(&sections, &message_tokens, frame);
        MeasuredRequest {
            message_tokens,
            sections,
            breakdown,
        }
    }

    fn breakdown(sections: &[Section], message_tokens: &[u32], frame: &Breakdown) -> Breakdown {
        let mut b = Breakdown {
            history: message_tokens.iter().map(|&t| u64::from(t)).sum(),
            ..frame.clone()
        };
        for section in sections {
            let tokens = u64::from(section.tokens);
            match section.kind {
                SectionKind::EngineAddition => b.engine_additions += tokens,
                SectionKind::Identity => b.bootstrap += tokens,
                SectionKind::Skills => b.skills += tokens,
                SectionKind::Tools => b.tools += tokens,
                SectionKind::Runtime
                | SectionKind::Hints
                | SectionKind::Extra
                | SectionKind::Subagent => b.system += tokens,
            }
        }
        b.total = b.system
            + b.bootstrap
            + b.skills
            + b.tools
            + b.history
            + b.engine_additions
            + b.current_message;
        b
    }

    /// Once per compaction cycle, when the context nears the threshold: the runtime should let
    /// the agent write durable notes first. Never for a read-only (or no) workspace.
    fn flush_signal(
        &mut self,
        settings: &PromptSettings,
        material: &WorkspaceMaterial,
    ) -> Option<FlushSignal> {
        let flush = &settings.memory_flush;
        if !flush.enabled || !material.writable {
            return None;
        }
        // Before the automatic compaction, which `autoThresholdPercent` may bring forward.
        let threshold = self
            .shared
            .settings()
            .auto_threshold()
            .saturating_sub(flush.soft_threshold_tokens);
        let context_tokens = self.context_tokens();
        let cycle = self.shared.read().compaction_count();
        if context_tokens <= threshold || self.flush_signalled_in == Some(cycle) {
            return None;
        }
        self.flush_signalled_in = Some(cycle);
        Some(FlushSignal {
            prompt: flush.prompt.clone(),
            system_prompt: flush.system_prompt.clone(),
            context_tokens,
            threshold,
        })
    }
}

/// The runtime's part of the system prompt (everything but the engine's addition).
fn base_parts<'a>(
    settings: &'a PromptSettings,
    options: &'a TurnOptions,
    runtime: &'a RuntimeFacts,
    material: &'a WorkspaceMaterial,
) -> system::PromptParts<'a> {
    system::PromptParts {
        mode: &options.mode,
        runtime,
        bootstrap: &material.bootstrap,
        skills: &material.skills,
        tools: &options.tools,
        extra: settings.extra_system_prompt.as_deref(),
        engine_addition: None,
    }
}

/// [`Session::measure_request`]'s answer.
struct MeasuredRequest {
    message_tokens: Vec<u32>,
    sections: Vec<Section>,
    breakdown: Breakdown,
}

impl TurnSize for MeasuredRequest {
    /// The whole request, what the overflow rule compares with the window.
    fn tokens(&self) -> u64 {
        self.breakdown.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_names_every_part() {
        let b = Breakdown {
            system: 1,
            bootstrap: 2,
            skills: 3,
            tools: 4,
            history: 5,
            engine_additions: 6,
            current_message: 7,
            total: 28,
            window: 20,
            response_reserve: 4,
            history_budget: 0,
        };
        let text = ContextOverflow::new(&b).to_string();
        assert!(text.contains("needs 28 tokens"), "{text}");
        assert!(text.contains("leaves 16"), "{text}");
        assert!(
            text.contains("history 5") && text.contains("current message 7"),
            "{text}"
        );
    }
}
