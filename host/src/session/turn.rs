//! One model turn's context, the way every runtime drives it: assemble; when automatic
//! compaction is on and that context passes its threshold, compact and assemble again. `serve`,
//! `replay`, the benches and embedders all call [`Session::assemble_turn`], so what is measured
//! is the policy that runs.

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
        let settings = self.settings();
        let budget = tokens_u32(settings.threshold());
        let options = AssembleOptions {
            token_budget: Some(budget),
            available_tools: request.available_tools.clone(),
        };
        let started = Instant::now();
        let mut assembly = self.assemble_for(&options, &request.pending).await?;
        let mut engine_time = started.elapsed();
        let mut compaction = None;
        let measured = self.turn_tokens(&assembly, request.agent_tokens);
        if let Some(due) = AutoCompaction::due(&self.settings(), self.key(), measured) {
            if due.notify {
                before_compaction(&due);
            }
            let started = Instant::now();
            let outcome = self
                .compact(&CompactOptions {
                    trigger: CompactionTrigger::Auto,
                    token_budget: Some(budget),
                    ..CompactOptions::default()
                })
                .await;
            let outcome = match outcome {
                Ok(outcome) => Ok(outcome),
                Err(Error::CompactionFailed { reason, .. }) => {
                    tracing::warn!(session = %self.key(), "automatic compaction did not run: {reason}");
                    Err(reason)
                }
                Err(e) => return Err(e),
            };
            if outcome.as_ref().is_ok_and(|o| o.compacted) {
                assembly = self.assemble_for(&options, &request.pending).await?;
            }
            engine_time += started.elapsed();
            compaction = Some(TurnCompaction {
                measured_tokens: measured,
                outcome,
            });
        }
        let (prefix, request_digest) = self.observe_prefix(&request.available_tools, &assembly);
        Ok(Turn {
            assembly,
            compaction,
            prefix,
            request_digest,
            engine_time,
        })
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
