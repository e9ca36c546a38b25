//! One model turn's context, the way every runtime drives it: assemble; when the context is
//! too big by the turn's [`CompactionRule`], compact and assemble again. The turn driver
//! ([`Session::drive_turn`]) is the one place that loop is written. `serve`, `replay`, the
//! benches and embedders call [`Session::assemble_turn`] (the threshold rule), so what is
//! measured is the policy that runs; the whole-request builder (`prepare_request`, `context
//! inspect`) drives the same loop by the overflow rule.

use std::time::{Duration, Instant};

use super::prefix::{Prefix, RequestDigest};
use super::{AssembleOptions, Assembly, CompactOptions, CompactOutcome, PendingCall};
use super::{Session, tokens_u32};
use crate::auto_compaction::AutoCompaction;
use crate::error::{Error, Result};
use ctxhost_runtime::contract::CompactionTrigger;

/// What the agent asks of one turn.
#[derive(Debug, Clone, Default)]
pub struct TurnRequest {
    /// Names of the tools the model may call on this turn.
    pub available_tools: Vec<String>,
    /// What the agent knows of the coming model call.
    pub pending: PendingCall,
    /// Tokens the agent sends besides the engine's context (its system prompt, tool schemas,
    /// the prompt): counted toward the threshold, since the window holds them too.
    pub agent_tokens: u64,
}

/// One turn's context and what it took to build it.
#[derive(Debug, Clone)]
pub struct Turn {
    /// The context to send.
    pub assembly: Assembly,
    /// The automatic compaction the turn asked for, when the context passed the threshold.
    pub compaction: Option<TurnCompaction>,
    /// How much of this request repeats the previous turn's from its first byte.
    pub prefix: Prefix,
    /// This request in brief, for the next turn of another process to compare with.
    pub request_digest: RequestDigest,
    /// Wall time spent in the engine (assemble, and compact when it ran).
    pub engine_time: Duration,
}

/// An automatic compaction a turn asked for.
#[derive(Debug, Clone)]
pub struct TurnCompaction {
    /// The context measured before it, in tokens (the engine's assembly plus the runtime's part).
    pub measured_tokens: u64,
    /// What the engine did: compacted, declined (with its reason), or failed to (`Err`, the
    /// engine's reason; the turn goes on with the context as it is).
    pub outcome: std::result::Result<CompactOutcome, String>,
}

impl TurnCompaction {
    /// The outcome when a compaction entry was written.
    pub fn compacted(&self) -> Option<&CompactOutcome> {
        self.outcome.as_ref().ok().filter(|o| o.compacted)
    }
}

/// When the turn driver compacts, and how.
pub(super) enum CompactionRule<'a> {
    /// Automatic compaction, as a runtime runs it before each turn: when it is on and the
    /// context passes the threshold ([`AutoCompaction::due`]), tell the runtime first (the
    /// `notifyBeforeAuto` notice, through `before_compaction`), then compact. The context still
    /// fits the window, so a compaction the engine fails to make is reported and the turn goes
    /// on with the context as it is.
    Threshold {
        before_compaction: &'a mut (dyn FnMut(&AutoCompaction) + Send),
    },
    /// Overflow recovery: when the whole request passes the `available` tokens the window
    /// leaves after the response reserve, compact even below every threshold — unless
    /// automatic compaction is off (`enabled: false`): then the overflow is reported, never
    /// compacted behind the operator's back. A request that does not fit cannot be sent, so a
    /// compaction the engine fails to make fails the turn.
    Overflow { available: u64 },
}

impl CompactionRule<'_> {
    /// Whether a context measured at `tokens` is compacted; gives the threshold rule's notice
    /// when the operator asked for one.
    fn due(&mut self, session: &Session, tokens: u64) -> bool {
        match self {
            Self::Threshold { before_compaction } => {
                let due = AutoCompaction::due(&session.settings(), session.key(), tokens);
                if let Some(due) = due.as_ref().filter(|due| due.notify) {
                    before_compaction(due);
                }
                due.is_some()
            }
            Self::Overflow { available } => {
                tokens > *available && session.shared.settings().auto_enabled
            }
        }
    }

    /// The compaction the rule runs, to fit `token_budget`.
    fn compaction(&self, token_budget: Option<u32>) -> RuleCompaction {
        let (force, trigger) = match self {
            Self::Threshold { .. } => (false, CompactionTrigger::Auto),
            Self::Overflow { .. } => (true, CompactionTrigger::Overflow),
        };
        RuleCompaction {
            options: CompactOptions {
                force,
                trigger,
                token_budget,
                custom_instructions: None,
            },
            survives_failure: matches!(self, Self::Threshold { .. }),
        }
    }
}

/// The compaction a [`CompactionRule`] runs.
struct RuleCompaction {
    options: CompactOptions,
    /// Whether the turn goes on when the engine fails to compact.
    survives_failure: bool,
}

/// How big a turn's context is, for a [`CompactionRule`] to decide on.
pub(super) trait TurnSize {
    /// The context's size in tokens.
    fn tokens(&self) -> u64;
}

impl TurnSize for u64 {
    fn tokens(&self) -> u64 {
        *self
    }
}

/// The context the turn driver settled on, with its measure.
pub(super) struct Driven<M> {
    pub(super) assembly: Assembly,
    /// The measure of `assembly`.
    pub(super) measured: M,
    /// The compaction the rule asked for, with the measure of the context before it.
    pub(super) compaction: Option<TurnCompaction>,
    /// Wall time spent in the engine (assemble, and compact when it ran).
    pub(super) engine_time: Duration,
}

impl Session {
    /// One turn: assembles within the threshold; when automatic compaction is on and the
    /// context (the engine's assembly, the session's usage-based count when that is higher, and
    /// the runtime's own tokens) passes the threshold, calls `before_compaction` (the
    /// `notifyBeforeAuto` notice), compacts to fit the threshold and assembles again.
    ///
    /// A compaction the engine fails to make is reported in the turn, not an error: the turn
    /// goes on with the context as it is, as a runtime would.
    pub async fn assemble_turn(
        &mut self,
        request: &TurnRequest,
        before_compaction: &mut (dyn FnMut(&AutoCompaction) + Send),
    ) -> Result<Turn> {
        let options = AssembleOptions {
            token_budget: Some(tokens_u32(self.settings().threshold())),
            available_tools: request.available_tools.clone(),
        };
        let rule = CompactionRule::Threshold { before_compaction };
        let measure = |session: &Session, assembly: &Assembly| {
            session.turn_tokens(assembly, request.agent_tokens)
        };
        let driven = (self.drive_turn(&options, &request.pending, rule, measure)).await?;
        let (prefix, request_digest) =
            self.observe_prefix(&request.available_tools, &driven.assembly);
        Ok(Turn {
            assembly: driven.assembly,
            compaction: driven.compaction,
            prefix,
            request_digest,
            engine_time: driven.engine_time,
        })
    }

    /// The turn driver: assembles within `options`' budget and measures the context with
    /// `measure`; when `rule` finds it too big, compacts to the same budget and, when the
    /// engine compacted, assembles and measures again.
    pub(super) async fn drive_turn<M: TurnSize>(
        &mut self,
        options: &AssembleOptions,
        pending: &PendingCall,
        mut rule: CompactionRule<'_>,
        measure: impl Fn(&Session, &Assembly) -> M,
    ) -> Result<Driven<M>> {
        let started = Instant::now();
        let assembly = self.assemble_for(options, pending).await?;
        let mut driven = Driven {
            engine_time: started.elapsed(),
            measured: measure(self, &assembly),
            assembly,
            compaction: None,
        };
        if !rule.due(self, driven.measured.tokens()) {
            return Ok(driven);
        }
        let started = Instant::now();
        let rule_compaction = rule.compaction(options.token_budget);
        let compaction = TurnCompaction {
            measured_tokens: driven.measured.tokens(),
            outcome: self.compact_for_turn(&rule_compaction).await?,
        };
        if compaction.compacted().is_some() {
            driven.assembly = self.assemble_for(options, pending).await?;
            driven.measured = measure(self, &driven.assembly);
        }
        driven.engine_time += started.elapsed();
        driven.compaction = Some(compaction);
        Ok(driven)
    }

    /// A turn's compaction; when the turn survives a failed one, the failure comes back as the
    /// engine's reason.
    async fn compact_for_turn(
        &mut self,
        compaction: &RuleCompaction,
    ) -> Result<std::result::Result<CompactOutcome, String>> {
        match self.compact(&compaction.options).await {
            Ok(outcome) => Ok(Ok(outcome)),
            Err(Error::CompactionFailed { reason, .. }) if compaction.survives_failure => {
                tracing::warn!(session = %self.key(), "automatic compaction did not run: {reason}");
                Ok(Err(reason))
            }
            Err(e) => Err(e),
        }
    }

    /// The context a turn sends, by the count automatic compaction decides with.
    fn turn_tokens(&self, assembly: &Assembly, agent_tokens: u64) -> u64 {
        let assembled = u64::from(assembly.estimated_tokens);
        // With real usage recorded, the count the provider reported is the better figure
        // for what was sent; a replay at another window has only estimates.
        let engine_part = if self.estimates_only {
            assembled
        } else {
            assembled.max(self.context_tokens())
        };
        engine_part.saturating_add(agent_tokens)
    }
}
