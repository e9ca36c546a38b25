//! Replays a recorded transcript through an engine the way an agent runtime drives it:
//! append each message; before each assistant turn, run the session's turn driver
//! ([`crate::Session::assemble_turn`]: assemble, and compact when the context passes the
//! threshold), the same one `serve` runs.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ctxhost_transcript::Transcript;
use serde::Serialize;

use crate::auto_compaction::AutoCompaction;
use crate::error::Result;
use crate::host::{Host, SessionOptions, SessionTarget};
use crate::ledger::{Ledger, LedgerCompaction, LedgerRecord, TurnOutcome};
use crate::prompt::PromptSettings;
use crate::session::{Prefix, Session, Turn, TurnOptions, TurnRequest};
use ctxhost_runtime::PreparedEngine;
use ctxhost_transcript::compaction::Settings;

/// A compaction that ran during a replay.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactionEvent {
    /// The message number (1-based) before which it ran.
    pub at_message: usize,
    /// The context before it, in tokens.
    pub tokens_before: u64,
    /// The context after it, in tokens.
    pub tokens_after: u64,
    /// The layer of the built-in compaction its record names (prune, summarize, full), when it
    /// names one.
    pub layer: Option<String>,
    /// What its record warns of (the degradation guard past `warnAtCompaction`), for the
    /// report to show beside it.
    pub warnings: Vec<String>,
}

/// One assistant turn of a replay: what the model would have been sent.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TurnPoint {
    /// The message number (1-based) before which the turn ran.
    pub message: usize,
    /// The context measured (after any compaction), in tokens.
    pub tokens: u32,
    /// How much of the engine's request repeats the previous turn's from its first byte.
    pub prefix: Prefix,
    /// Wall time in the engine this turn (assemble, and compact when it ran), in microseconds.
    pub engine_micros: u64,
}

/// A system-prompt addition an engine made, and how many turns in a row carried it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromptAddition {
    /// The text added.
    pub text: String,
    /// Consecutive turns that carried it.
    pub turns: usize,
}

/// What a replay found, as `ctxhost replay` prints it (or its `--json`, whose documented
/// shape is `docs/cli-json/replay.schema.json`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReplayReport {
    /// The engine's id.
    pub engine: String,
    /// The transcript replayed.
    pub source: String,
    /// The transcript the replay wrote; `None` once the caller removed a scratch one (a
    /// report never names a file that is gone).
    pub output: Option<String>,
    /// Messages in the source transcript.
    pub messages: usize,
    /// Assistant turns, i.e. model requests measured.
    pub turns: usize,
    /// The window replayed at, in tokens.
    pub context_window: u64,
    /// The context size automatic compaction fires above.
    pub threshold: u64,
    /// False when the config turned automatic compaction off (`enabled: false`).
    pub auto_compaction: bool,
    /// Notices given before automatic compactions (`notifyBeforeAuto`).
    pub auto_notices: usize,
    /// The recent context compaction keeps verbatim, as scaled for the window.
    pub keep_recent_tokens: u64,
    /// Every compaction, automatic or forced by an overflow, in order.
    pub compactions: Vec<CompactionEvent>,
    /// The largest context measured before a turn, in tokens.
    pub peak_tokens: u32,
    /// `peak_tokens` as a share of the window (1.0 is full).
    pub peak_utilisation: f64,
    /// Assistant turns whose request (after any compaction) exceeded the window: a real
    /// runtime would have failed them.
    pub overflowing_turns: usize,
    /// The message number (1-based) before which the first of them ran.
    pub first_overflow_at: Option<usize>,
    /// The smallest context measured, in tokens.
    pub assembled_min: u32,
    /// The median context measured, in tokens.
    pub assembled_median: u32,
    /// The largest context measured, in tokens.
    pub assembled_max: u32,
    /// System-prompt additions the engine made, with how many turns carried each.
    pub system_prompt_additions: Vec<PromptAddition>,
    /// Messages the engine inserted (not from the transcript), over all turns.
    pub inserted_messages: usize,
    /// Turns between compactions whose request extended the previous one exactly (a prompt
    /// cache keeps all of it), out of `turns_between_compactions`.
    pub prefix_kept_turns: usize,
    /// Turns after the first that neither ran nor followed a compaction.
    pub turns_between_compactions: usize,
    /// The median share of a request that repeats the previous one from its first byte.
    pub prefix_share_median: f64,
    /// Every turn in order.
    pub turn_points: Vec<TurnPoint>,
    /// Wall time of the replay, in milliseconds.
    pub elapsed_ms: f64,
}

/// What the replay reports as it goes (a progress bar, or nothing).
pub trait Progress {
    /// `done` of `total` messages are replayed.
    fn advance(&mut self, done: usize, total: usize);

    /// An automatic compaction is about to run and the operator asked to be told
    /// (`notifyBeforeAuto`): the CLI prints the notice on stderr.
    fn before_auto_compaction(&mut self, _notice: &AutoCompaction) {}
}

impl Progress for () {
    fn advance(&mut self, _done: usize, _total: usize) {}
}

/// Replays `source` into a new transcript at `output`, measuring the engine's assembly alone.
pub async fn replay(
    host: &Host,
    source: &Path,
    engine: Arc<PreparedEngine>,
    window: u64,
    output: &Path,
    progress: &mut dyn Progress,
) -> Result<ReplayReport> {
    replay_with(host, source, engine, window, output, None, progress).await
}

/// What one turn's context measured.
struct Measured {
    tokens: u32,
    inserted: usize,
    addition: Option<String>,
    /// A compaction the request path ran because the request overflowed.
    overflow_compaction: Option<CompactionEvent>,
}

/// The engine's assembly alone, or — with prompt settings — the whole model request around it
/// (system prompt, bootstrap files, skills), through the same path as `context inspect`.
async fn measure(
    session: &mut Session,
    turn: &Turn,
    prompt: Option<&PromptSettings>,
) -> Result<Measured> {
    match prompt {
        None => Ok(Measured {
            tokens: turn.assembly.estimated_tokens,
            inserted: turn.assembly.inserted(),
            addition: turn.assembly.system_prompt_addition.clone(),
            overflow_compaction: None,
        }),
        Some(settings) => measure_request(session, settings).await,
    }
}

/// The whole model request, built as `context inspect` builds it.
async fn measure_request(session: &mut Session, settings: &PromptSettings) -> Result<Measured> {
    // A request that still overflows is measured, not fatal: the report counts it.
    let request = session
        .inspect_request(settings, &TurnOptions::default())
        .await?;
    let total = request.breakdown.total;
    let overflow_compaction = (request.overflow_compaction)
        .filter(|c| c.compacted)
        .zip(request.total_before_compaction)
        .map(|(c, before)| CompactionEvent {
            at_message: 0,
            tokens_before: before,
            tokens_after: total,
            layer: newest_compaction_layer(session),
            warnings: c.warnings,
        });
    Ok(Measured {
        tokens: u32::try_from(total).unwrap_or(u32::MAX),
        inserted: request.inserted_messages,
        addition: request.engine_addition,
        overflow_compaction,
    })
}

/// `replay`, optionally counting the whole request built around the engine (`prompt`).
pub async fn replay_with(
    host: &Host,
    source: &Path,
    engine: Arc<PreparedEngine>,
    window: u64,
    output: &Path,
    prompt: Option<&PromptSettings>,
    progress: &mut dyn Progress,
) -> Result<ReplayReport> {
    let messages = replayed_messages(source)?;
    let settings = host.compaction_settings().for_window(window);
    let mut replay = Replay::open(host, engine, &settings, output, prompt).await?;
    let started = Instant::now();
    for (n, message) in messages.iter().enumerate() {
        if message.get("role").and_then(|r| r.as_str()) == Some("assistant") {
            replay.turn(n, progress).await?;
        }
        replay.session.append(message).await?;
        progress.advance(n + 1, messages.len());
    }
    let elapsed = started.elapsed();
    replay.session.close().await?;
    Ok(ReplayReport {
        engine: replay.engine.id().to_string(),
        source: source.display().to_string(),
        output: Some(output.display().to_string()),
        messages: messages.len(),
        threshold: settings.auto_threshold(),
        auto_compaction: settings.auto_enabled,
        keep_recent_tokens: settings.keep_recent_tokens,
        elapsed_ms: duration_ms(elapsed),
        ..replay.tally.finish()
    })
}

/// A replay under way: the scratch session it feeds, what it counts, the ledger it writes.
struct Replay<'a> {
    session: Session,
    engine: Arc<PreparedEngine>,
    /// With prompt settings, each turn's whole request is measured, not the assembly alone.
    prompt: Option<&'a PromptSettings>,
    tally: Tally,
    /// The replayed transcript gets a turn ledger like a served one (`ctxhost report` reads it).
    ledger: Ledger,
    output: &'a Path,
}

impl<'a> Replay<'a> {
    /// Opens the session at `output`, measured by estimates (the source's usage was recorded
    /// at another window) and written without syncing (it is a scratch file).
    async fn open(
        host: &Host,
        engine: Arc<PreparedEngine>,
        settings: &Settings,
        output: &'a Path,
        prompt: Option<&'a PromptSettings>,
    ) -> Result<Self> {
        let target = SessionTarget::Path(output.to_path_buf());
        let options = SessionOptions::on(engine.clone()).with_settings(settings.clone());
        let mut session = host.open_session(&target, &options).await?;
        session.set_estimates_only(true);
        session.set_sync(false);
        Ok(Self {
            session,
            engine,
            prompt,
            tally: Tally::new(settings.context_window),
            ledger: Ledger::new(output),
            output,
        })
    }

    /// The assistant turn before message `n` (0-based): driven, measured, counted, and
    /// recorded in the ledger.
    async fn turn(&mut self, n: usize, progress: &mut dyn Progress) -> Result<()> {
        let started = Instant::now();
        let turn = self.drive(progress).await?;
        let auto_layer = (turn.compaction.as_ref())
            .and_then(|c| c.compacted())
            .and_then(|_| newest_compaction_layer(&self.session));
        let measured = measure(&mut self.session, &turn, self.prompt).await?;
        let compaction = self.tally.count(n + 1, &turn, auto_layer, measured);
        let record = self.ledger_record(n, &turn, compaction, started.elapsed());
        if let Err(e) = self.ledger.append(&record) {
            let output = self.output.display();
            tracing::warn!("{output}: the turn ledger was not written: {e}");
        }
        Ok(())
    }

    /// The session's turn driver, as a runtime calls it (the agent's own tokens counted when
    /// the whole request is measured); its notices go to `progress`.
    async fn drive(&mut self, progress: &mut dyn Progress) -> Result<Turn> {
        let agent_tokens = self.prompt.map_or(0, |settings| {
            (self.session).agent_tokens(settings, &TurnOptions::default())
        });
        let request = TurnRequest {
            agent_tokens,
            ..TurnRequest::default()
        };
        let mut notices = Vec::new();
        let turn = (self.session)
            .assemble_turn(&request, &mut |due| notices.push(due.clone()))
            .await?;
        for due in &notices {
            progress.before_auto_compaction(due);
        }
        self.tally.auto_notices += notices.len();
        Ok(turn)
    }

    /// The ledger's record of the turn before message `n`, which took `bridge` in all.
    fn ledger_record(
        &self,
        n: usize,
        turn: &Turn,
        compaction: Option<LedgerCompaction>,
        bridge: Duration,
    ) -> LedgerRecord {
        LedgerRecord {
            at: crate::timestamp::now_iso(),
            engine: self.engine.id().to_string(),
            contract: self.engine.contract_version().to_string(),
            configured_engine: None,
            outcome: TurnOutcome::Ok,
            error: None,
            messages: n,
            assembled_tokens: self.tally.assembled.last().copied().unwrap_or_default(),
            prefix: turn.prefix,
            request: Some(turn.request_digest.clone()),
            compaction,
            engine_micros: micros(turn.engine_time),
            bridge_micros: micros(bridge),
        }
    }
}

/// The messages of `source`'s active branch a replay feeds in.
fn replayed_messages(source: &Path) -> Result<Vec<serde_json::Value>> {
    let recorded = Transcript::load(source)?;
    for warning in ctxhost_transcript::shown_warnings(recorded.warnings()) {
        tracing::warn!("{warning}");
    }
    Ok(recorded
        .active_branch()
        .into_iter()
        .filter_map(|index| {
            let entry = &recorded.entries()[index];
            replayed(entry.entry_type())
                .then(|| serde_json::from_str(&entry.message_json()).ok())
                .flatten()
        })
        .collect())
}

/// What a replay counts as it goes, turn by turn.
struct Tally {
    window: u64,
    assembled: Vec<u32>,
    compactions: Vec<CompactionEvent>,
    additions: Vec<PromptAddition>,
    inserted: usize,
    overflowing_turns: usize,
    first_overflow_at: Option<usize>,
    auto_notices: usize,
    turn_points: Vec<TurnPoint>,
    prefix_kept_turns: usize,
    turns_between_compactions: usize,
    /// Whether the previous turn compacted (the first turn counts as following one: it has no
    /// previous request to keep).
    compacted_last_turn: bool,
}

impl Tally {
    fn new(window: u64) -> Self {
        Self {
            window,
            assembled: Vec::new(),
            compactions: Vec::new(),
            additions: Vec::new(),
            inserted: 0,
            overflowing_turns: 0,
            first_overflow_at: None,
            auto_notices: 0,
            turn_points: Vec::new(),
            prefix_kept_turns: 0,
            turns_between_compactions: 0,
            compacted_last_turn: true,
        }
    }

    /// Counts the turn before message `message` (1-based), whose automatic compaction (when
    /// it ran) was of `auto_layer`; returns its compaction as the ledger keeps it, when it
    /// compacted.
    fn count(
        &mut self,
        message: usize,
        turn: &Turn,
        auto_layer: Option<String>,
        mut measured: Measured,
    ) -> Option<LedgerCompaction> {
        let compacted_now = self.count_compactions(message, turn, auto_layer, &mut measured);
        if !compacted_now && !self.compacted_last_turn {
            self.turns_between_compactions += 1;
            self.prefix_kept_turns += usize::from(turn.prefix.kept_previous);
        }
        self.compacted_last_turn = compacted_now;
        if u64::from(measured.tokens) > self.window {
            self.overflowing_turns += 1;
            self.first_overflow_at.get_or_insert(message);
        }
        self.assembled.push(measured.tokens);
        self.inserted += measured.inserted;
        if let Some(addition) = measured.addition {
            self.count_addition(addition);
        }
        self.turn_points.push(TurnPoint {
            message,
            tokens: measured.tokens,
            prefix: turn.prefix,
            engine_micros: micros(turn.engine_time),
        });
        compacted_now
            .then(|| self.ledger_compaction(message))
            .flatten()
    }

    /// Lists the turn's compactions, automatic and forced by an overflow (taken out of
    /// `measured`); whether there were any.
    fn count_compactions(
        &mut self,
        message: usize,
        turn: &Turn,
        auto_layer: Option<String>,
        measured: &mut Measured,
    ) -> bool {
        let auto = turn.compaction.as_ref().and_then(|c| c.compacted());
        if let Some((compaction, outcome)) = turn.compaction.as_ref().zip(auto) {
            self.compactions.push(CompactionEvent {
                at_message: message,
                tokens_before: compaction.measured_tokens,
                tokens_after: u64::from(measured.tokens),
                layer: auto_layer,
                warnings: outcome.warnings.clone(),
            });
        }
        let overflow = measured.overflow_compaction.take();
        let overflowed = overflow.is_some();
        if let Some(overflow) = overflow {
            self.compactions.push(CompactionEvent {
                at_message: message,
                ..overflow
            });
        }
        auto.is_some() || overflowed
    }

    /// A system-prompt addition: one more turn of the last one, or a new one.
    fn count_addition(&mut self, addition: String) {
        match self.additions.last_mut() {
            Some(last) if last.text == addition => last.turns += 1,
            _ => self.additions.push(PromptAddition {
                text: addition,
                turns: 1,
            }),
        }
    }

    /// The last compaction listed, as the ledger keeps it, when it ran before `message`.
    fn ledger_compaction(&self, message: usize) -> Option<LedgerCompaction> {
        (self.compactions.last())
            .filter(|c| c.at_message == message)
            .map(|c| LedgerCompaction {
                compacted: true,
                layer: c.layer.clone(),
                tokens_before: c.tokens_before,
                tokens_after: c.tokens_after,
                reason: None,
            })
    }

    /// The report's figures; the caller fills in what the replay knows beyond the turns.
    fn finish(self) -> ReplayReport {
        let mut sorted = self.assembled.clone();
        sorted.sort_unstable();
        let peak = sorted.last().copied().unwrap_or(0);
        ReplayReport {
            engine: String::new(),
            source: String::new(),
            output: None,
            messages: 0,
            turns: self.assembled.len(),
            context_window: self.window,
            threshold: 0,
            auto_compaction: false,
            auto_notices: self.auto_notices,
            keep_recent_tokens: 0,
            compactions: self.compactions,
            peak_tokens: peak,
            peak_utilisation: peak as f64 / self.window.max(1) as f64,
            overflowing_turns: self.overflowing_turns,
            first_overflow_at: self.first_overflow_at,
            assembled_min: sorted.first().copied().unwrap_or(0),
            assembled_median: sorted.get(sorted.len() / 2).copied().unwrap_or(0),
            assembled_max: peak,
            system_prompt_additions: self.additions,
            inserted_messages: self.inserted,
            prefix_kept_turns: self.prefix_kept_turns,
            turns_between_compactions: self.turns_between_compactions,
            prefix_share_median: median_share(&self.turn_points),
            turn_points: self.turn_points,
            elapsed_ms: 0.0,
        }
    }
}

/// Entries a replay feeds in: everything the model was sent but compactions, which the replay
/// makes itself. `custom_message` entries are sent to the model too (as `custom` messages), and
/// so are branch summaries.
fn replayed(entry_type: &str) -> bool {
    matches!(entry_type, "message" | "custom_message" | "branch_summary")
}

/// The layer the newest compaction entry's record names, as its JSON spells it.
fn newest_compaction_layer(session: &Session) -> Option<String> {
    let transcript = session.transcript();
    let newest = (transcript.entries().iter().rev()).find(|e| e.entry_type() == "compaction")?;
    newest
        .compaction_record()?
        .layer
        .map(|layer| layer.to_string())
}

/// The median prefix share over the turns after the first.
fn median_share(turns: &[TurnPoint]) -> f64 {
    let mut shares: Vec<f64> = (turns.iter().skip(1))
        .map(|turn| turn.prefix.share())
        .collect();
    shares.sort_unstable_by(f64::total_cmp);
    shares.get(shares.len() / 2).copied().unwrap_or(1.0)
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

fn duration_ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
