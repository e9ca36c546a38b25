//! The lossless engine's `assemble` on the generated 2,000-entry session (the legacy rows'
//! session and 200k window), natively: its tree is built first by ingesting every message
//! through the SDK's test host (untimed, with its state in a temp dir), then each timed call is
//! `SessionState::assemble` over the request's columns — the kept layout checked against the
//! token column, its summaries copied, one `keep-range` (the first call cut it). In steady
//! state nothing is summarized or written per call. The wasm boundary adds what it adds to legacy's call (the columns in, a
//! few inserted messages out); `Session::assemble` with this engine measures the whole.

use anyhow::{Result, bail};
use ctxhost_lossless::config::Config;
use ctxhost_lossless::state::SessionState;
use ctxhost_sdk::AssembleResult;
use ctxhost_sdk::testing::TestHost;
use ctxhost_transcript::Transcript;

use crate::{Budget, Fixture, Sampler, Samples, assemble_request, sdk_message};

/// The engine's state over the generated session, and the columns of its assemble request.
pub struct Built {
    host: TestHost,
    state: SessionState,
    refs: Vec<u32>,
    tokens: Vec<u32>,
    window: u32,
    _root: tempfile::TempDir,
}

impl Built {
    /// Ingests every message of the generated session (untimed).
    pub fn new(fx: &Fixture) -> Result<Self> {
        let t = Transcript::load(&fx.generated)?;
        let request = assemble_request(&t, 200_000);
        let messages: Vec<_> = t
            .entries()
            .iter()
            .enumerate()
            .filter_map(|(i, e)| sdk_message(i, e))
            .collect();
        let root = tempfile::tempdir()?;
        let host = TestHost::new().transcript(messages.clone());
        let mut state = host.run(|| {
            let mut state = SessionState::open(root.path(), "bench", Config::default(), 0);
            for message in messages {
                state.ingest(message);
            }
            state
        });
        let warnings = state.take_warnings();
        if !warnings.is_empty() {
            bail!("lossless warnings: {warnings:?}");
        }
        Ok(Built {
            host,
            state,
            // The columns the guest receives.
            refs: request.context.entries.iter().map(|e| e.entry).collect(),
            tokens: request.context.entries.iter().map(|e| e.tokens).collect(),
            window: request.context_window,
            _root: root,
        })
    }

    /// One `assemble` at the window.
    pub fn assemble(&mut self) -> AssembleResult {
        let Built {
            host,
            state,
            refs,
            tokens,
            window,
            ..
        } = self;
        host.run(|| state.assemble(refs, tokens, *window))
    }

    pub fn entries(&self) -> usize {
        self.refs.len()
    }

    pub fn nodes(&self) -> usize {
        self.state.tree.node_count()
    }
}

/// `SessionState::assemble` timed under `budget`; see the module docs. Also returns the
/// plan's inserted summaries and estimate.
pub fn assemble_native(fx: &Fixture, budget: Budget) -> Result<(Samples, Built, usize, u32)> {
    let mut built = Built::new(fx)?;
    // The first call may seal open messages; the timed ones are the steady state.
    let plan = built.assemble();
    let summaries = plan.items.len().saturating_sub(1);
    let samples = Sampler::time(budget, || Ok::<_, anyhow::Error>(built.assemble()))?;
    Ok((samples, built, summaries, plan.estimated_tokens))
}
