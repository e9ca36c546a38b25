//! The part of a session its engine instance can reach through host imports: the transcript
//! (read-only) and the built-in compaction.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};

use ctxhost_recall::{RecallError, RecallIndex, SearchQuery};

use ctxhost_transcript::Transcript;
use ctxhost_transcript::compaction::{self, Settings};

use super::convert;
use crate::model::{Completion, ModelConfig};
use ctxhost_runtime::contract::{
    CompactRequest, Compaction, Context, EntryRef, HostError, Message, Role, SearchHit,
    SearchRequest, SessionIdentity,
};
use ctxhost_runtime::{BoxFuture, SessionServices};

pub(super) struct Shared {
    pub session: SessionIdentity,
    pub file: PathBuf,
    /// Replaced when the runtime's window for the session changes (`Session::set_settings`).
    settings: RwLock<Settings>,
    /// The summarizer's model and what the `complete` import asks (checked at config load).
    model: ModelConfig,
    transcript: RwLock<Transcript>,
    /// The current context as engines receive it, kept between calls.
    pub context: convert::ContextCache,
    /// Call ids of tool results (the `tool-call-ids` import), read once per entry.
    pub call_ids: convert::CallIds,
    /// Whether appends are fsynced (`Session::set_sync`), and so the engine's own writes too.
    pub durable: AtomicBool,
    /// The full-text index beside the transcript, opened on the first search.
    recall: Mutex<Option<RecallIndex>>,
}

impl Shared {
    pub(super) fn new(
        session: SessionIdentity,
        file: PathBuf,
        settings: Settings,
        model: ModelConfig,
        transcript: Transcript,
    ) -> Self {
        Self {
            session,
            file,
            settings: RwLock::new(settings),
            model,
            transcript: RwLock::new(transcript),
            context: convert::ContextCache::default(),
            call_ids: convert::CallIds::default(),
            durable: AtomicBool::new(true),
            recall: Mutex::new(None),
        }
    }

    /// Readers never observe a half-applied write: writers only append after validating, so a
    /// poisoned lock still guards a consistent transcript.
    pub(super) fn read(&self) -> RwLockReadGuard<'_, Transcript> {
        self.transcript.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, Transcript> {
        self.transcript.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `work` on the session's recall index, opened on first use and brought level with
    /// the transcript first, so it sees exactly what the transcript holds.
    pub(super) fn with_recall<T>(
        &self,
        work: impl FnOnce(&Transcript, &RecallIndex) -> Result<T, RecallError>,
    ) -> Result<T, RecallError> {
        let mut slot = self.recall.lock().unwrap_or_else(|e| e.into_inner());
        let index = match &mut *slot {
            Some(index) => index,
            empty => empty.insert(RecallIndex::open(&self.file)?),
        };
        let transcript = self.read();
        index.sync(&transcript)?;
        work(&transcript, index)
    }

    /// Closes the recall index (its database's descriptors) until the next search reopens it.
    pub(super) fn release_recall(&self) {
        *self.recall.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    pub(super) fn settings(&self) -> RwLockReadGuard<'_, Settings> {
        self.settings.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn set_settings(&self, settings: Settings) {
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = settings;
    }

    /// The built-in compaction's proposal, in the contract's terms: the layered policy picks
    /// prune / summarize / full, and the configured summarizer writes the summary. Blocking
    /// when the summarizer is a remote model; the transcript lock is released before it runs.
    /// None when there is nothing to do (the reason is logged).
    pub(super) fn plan_compaction(&self, request: &CompactRequest) -> Option<Compaction> {
        let job = self.compaction_job(request)?;
        // The model was checked when the config loaded; only its key variable can be missing
        // now, and a compaction must not fail for it: the extractive summary stands in, and
        // the reason is logged (and the summary's record names the summarizer that wrote it).
        let summarizer = self.model.summarizer().unwrap_or_else(|e| {
            tracing::warn!(session = %self.session.key, "{e}; using the extractive summarizer");
            Box::new(compaction::Extractive)
        });
        // Its warnings travel in `details` and are told when the compaction is written: this
        // is only a proposal, which the engine or the host may still refuse.
        let plan = job.run(summarizer.as_ref());
        Some(Compaction {
            summary: plan.summary,
            first_kept_entry: plan.first_kept_index as u32,
            tokens_before: convert::tokens_u32(plan.tokens_before),
            tokens_after: convert::tokens_u32(plan.tokens_after),
            details: Some(plan.details.to_value().to_string()),
        })
    }

    /// What the layered policy would compact for `request`, read under the transcript lock;
    /// None, with the reason logged, when there is nothing to do.
    fn compaction_job(&self, request: &CompactRequest) -> Option<compaction::Job> {
        let prepared = compaction::prepare(
            &self.read(),
            &self.settings(),
            &compaction::Request {
                trigger: request.trigger,
                focus: request.custom_instructions.as_deref(),
                engine: None,
                context_tokens: request.current_tokens.map(u64::from),
            },
        );
        match prepared {
            Ok(job) => Some(job),
            Err(skip) if skip.capped => {
                tracing::warn!(session = %self.session.key, "{}", skip.reason);
                None
            }
            Err(skip) => {
                tracing::info!(session = %self.session.key, "no compaction: {}", skip.reason);
                None
            }
        }
    }
}

impl SessionServices for Shared {
    fn search(&self, request: &SearchRequest) -> Result<Vec<SearchHit>, HostError> {
        let query = search_query(request)?;
        let hits = self
            .with_recall(|transcript, index| index.search(transcript, &query))
            .map_err(|e| match e {
                RecallError::InvalidArgument(m) => HostError::InvalidArgument(m),
                other => HostError::Failed(other.to_string()),
            })?;
        Ok(hits
            .into_iter()
            .map(|h| SearchHit {
                entry: h.entry,
                entry_id: h.id,
                role: h.role,
                timestamp: h.timestamp.unwrap_or(0),
                snippet: h.snippet,
            })
            .collect())
    }

    fn context(&self) -> Context {
        self.context.owned_context(&self.read())
    }

    fn tool_call_ids(&self, refs: &[EntryRef]) -> Result<Vec<Option<String>>, HostError> {
        self.call_ids.of(&self.read(), refs)
    }

    fn durable(&self) -> bool {
        self.durable.load(Ordering::Relaxed)
    }

    fn read_entries(&self, refs: &[EntryRef]) -> Result<Vec<Message>, HostError> {
        let transcript = self.read();
        let entries = transcript.entries();
        refs.iter()
            .map(|&r| {
                let entry = entries.get(r as usize).ok_or_else(|| {
                    HostError::InvalidArgument(format!(
                        "entry {r} does not exist (the transcript has {} entries)",
                        entries.len()
                    ))
                })?;
                convert::message(r as usize, entry).ok_or_else(|| {
                    HostError::InvalidArgument(format!(
                        "entry {r} is a `{}` entry, which carries no message",
                        entry.entry_type()
                    ))
                })
            })
            .collect()
    }

    fn delegate_compaction<'a>(
        &'a self,
        request: &'a CompactRequest,
    ) -> BoxFuture<'a, Result<Option<Compaction>, HostError>> {
        // A remote summarizer blocks; keep the executor's other tasks running meanwhile.
        let multi_thread = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        Box::pin(async move {
            Ok(if multi_thread {
                tokio::task::block_in_place(|| self.plan_compaction(request))
            } else {
                self.plan_compaction(request)
            })
        })
    }

    fn complete<'a>(
        &'a self,
        system: Option<&'a str>,
        prompt: &'a str,
        max_tokens: Option<u32>,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        let config = self.model.clone();
        let system = system.map(str::to_string);
        let prompt = prompt.to_string();
        Box::pin(async move {
            let call = tokio::task::spawn_blocking(move || {
                config.model()?.complete(&Completion {
                    system: system.as_deref(),
                    prompt: &prompt,
                    max_tokens,
                })
            });
            match call.await {
                Ok(Ok(text)) => Ok(text),
                Ok(Err(e)) => Err(HostError::Unavailable(e.to_string())),
                Err(e) => Err(HostError::Unavailable(format!(
                    "completion task failed: {e}"
                ))),
            }
        })
    }
}

/// An engine's `search` request as the recall index's query.
fn search_query(request: &SearchRequest) -> Result<SearchQuery, HostError> {
    let role = (request.role.as_deref())
        .map(|r| {
            Role::parse(r).ok_or_else(|| {
                HostError::InvalidArgument(format!("search-request.role: {r:?} is not a role"))
            })
        })
        .transpose()?;
    Ok(SearchQuery {
        query: request.query.clone(),
        role,
        tool: request.tool.clone(),
        is_error: request.is_error,
        limit: (request.limit != 0).then_some(request.limit),
        ..SearchQuery::default()
    })
}
