//! The part of a session its engine instance can reach through host imports: the transcript
//! (read-only) and the runtime compaction.

use std::path::PathBuf;
use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};

use ctxhost_transcript::Transcript;
use ctxhost_transcript::compaction::{self, Settings};

use super::convert;
use crate::runtime::contract::{
    CompactRequest, Compaction, ContextEntry, EntryRef, HostError, Message, Session,
};
use crate::runtime::{BoxFuture, SessionServices};

pub struct Shared {
    pub session: Session,
    pub file: PathBuf,
    pub settings: Settings,
    transcript: RwLock<Transcript>,
}

impl Shared {
    pub fn new(
        session: Session,
        file: PathBuf,
        settings: Settings,
        transcript: Transcript,
    ) -> Self {
        Self {
            session,
            file,
            settings,
            transcript: RwLock::new(transcript),
        }
    }

    /// Readers never observe a half-applied write: writers only append after validating, so a
    /// poisoned lock still guards a consistent transcript.
    pub fn read(&self) -> RwLockReadGuard<'_, Transcript> {
        self.transcript.read().unwrap_or_else(|e| e.into_inner())
    }

    pub fn write(&self) -> RwLockWriteGuard<'_, Transcript> {
        self.transcript.write().unwrap_or_else(|e| e.into_inner())
    }

    /// The runtime compaction's proposal, in the contract's terms.
    pub fn plan_compaction(&self, custom_instructions: Option<&str>) -> Option<Compaction> {
        let transcript = self.read();
        let plan = compaction::plan(&transcript, &self.settings, custom_instructions)?;
        Some(Compaction {
            summary: plan.summary,
            first_kept_entry: plan.first_kept_index as u32,
            tokens_before: convert::tokens_u32(plan.tokens_before),
            tokens_after: convert::tokens_u32(plan.tokens_after),
            details: Some(plan.details.to_string()),
            new_session_id: None,
            new_session_file: None,
        })
    }
}

impl SessionServices for Shared {
    fn context_entries(&self) -> Vec<ContextEntry> {
        convert::context_entries(&self.read())
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
        Box::pin(async move { Ok(self.plan_compaction(request.custom_instructions.as_deref())) })
    }

    fn complete<'a>(
        &'a self,
        _system: Option<&'a str>,
        _prompt: &'a str,
        _max_tokens: Option<u32>,
    ) -> BoxFuture<'a, Result<String, HostError>> {
        Box::pin(async {
            Err(HostError::Unavailable(
                "no completion model is configured: the embedded summarizer is extractive".into(),
            ))
        })
    }
}
