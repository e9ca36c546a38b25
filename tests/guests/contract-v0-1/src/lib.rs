//! An engine of contract `ctxhost:engine@0.1.0`, built with wit-bindgen directly against the
//! frozen `wit/0.1.0` (no SDK, which now targets 0.2): what the bundled legacy engine was
//! before 0.2. `assemble` keeps every entry, one `keep` each (0.1 has no ranges); `ingest`
//! keeps nothing; `compact` delegates to the host's runtime compaction; the other hooks answer
//! what the SDK's 0.1 defaults answered. So a 0.1 engine must give the same results through the
//! host's conversion layer as the 0.2 legacy engine gives natively, and the bench measures the
//! 0.1 path with the same assemble logic.
//!
//! `after-turn` also calls every host import once and fails naming the first that answered
//! wrongly, so the test sees the 0.1 imports work without changing any result.
//!
//! Only the wasm build is the engine: a native cdylib cannot carry the component export names,
//! so natively the crate is empty.

#[cfg(target_arch = "wasm32")]
mod engine {
    wit_bindgen::generate!({
        path: "../../../wit/0.1.0",
        world: "context-engine",
    });

    use ctxhost::engine::host;
    use ctxhost::engine::types::{
        AfterTurnRequest, AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult,
        CompactRequest, CompactResult, ContextItem, EngineInfo, HostError, IngestResult, Message,
        Session, SubagentEndReason, SubagentSpawn,
    };
    use exports::ctxhost::engine::engine::Guest;

    struct Legacy01;

    /// Every import once; the first wrong answer is the error.
    fn check_imports() -> Result<(), String> {
        host::log(host::LogLevel::Debug, "0.1 guest: checking imports");
        if host::estimate_tokens("abcde") != 2 {
            return Err("estimate-tokens(\"abcde\") is not 2".into());
        }
        let entries = host::context_entries();
        if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
            let read = host::read_entries(&[first.entry, last.entry])
                .map_err(|e| format!("read-entries: {e:?}"))?;
            if read.len() != 2 || read[0].entry != first.entry || read[1].role != last.role {
                return Err("read-entries disagrees with context-entries".into());
            }
        }
        if !host::config().starts_with('{') {
            return Err("config is not a JSON object".into());
        }
        let completion = host::complete(&host::CompletionRequest {
            system: None,
            prompt: "hi".into(),
            max_tokens: Some(1),
        });
        if !matches!(completion, Err(HostError::PermissionDenied(_))) {
            return Err(format!("complete without the llm grant: {completion:?}"));
        }
        Ok(())
    }

    impl Guest for Legacy01 {
        fn info() -> EngineInfo {
            EngineInfo {
                id: "legacy-0-1".into(),
                name: "Legacy (pass-through), contract 0.1".into(),
                version: "0.1.0".into(),
                owns_compaction: false,
            }
        }

        fn bootstrap(_request: BootstrapRequest) -> Result<BootstrapResult, String> {
            Ok(BootstrapResult {
                bootstrapped: false,
                imported_messages: None,
                reason: Some("engine keeps no state".into()),
            })
        }

        fn ingest(_: Session, _: Message, _: bool) -> Result<IngestResult, String> {
            Ok(IngestResult { ingested: false })
        }

        fn ingest_batch(_: Session, _: Vec<Message>, _: bool) -> Result<u32, String> {
            Ok(0)
        }

        fn assemble(request: AssembleRequest) -> Result<AssembleResult, String> {
            let mut items = Vec::with_capacity(request.entries.len());
            let mut tokens = 0u32;
            for entry in &request.entries {
                items.push(ContextItem::Keep(entry.entry));
                tokens = tokens.saturating_add(entry.tokens);
            }
            Ok(AssembleResult {
                items,
                estimated_tokens: tokens,
                system_prompt_addition: None,
            })
        }

        fn compact(request: CompactRequest) -> Result<CompactResult, String> {
            Ok(match host::delegate_compaction(&request) {
                Ok(Some(compaction)) => CompactResult {
                    ok: true,
                    compacted: true,
                    reason: None,
                    compaction: Some(compaction),
                },
                Ok(None) => CompactResult {
                    ok: true,
                    compacted: false,
                    reason: Some("nothing to compact".into()),
                    compaction: None,
                },
                Err(error) => CompactResult {
                    ok: false,
                    compacted: false,
                    reason: Some(format!("delegate-compaction failed: {error:?}")),
                    compaction: None,
                },
            })
        }

        fn after_turn(_request: AfterTurnRequest) -> Result<(), String> {
            check_imports()
        }

        fn prepare_subagent_spawn(_spawn: SubagentSpawn) -> Result<Option<u64>, String> {
            Ok(None)
        }

        fn rollback_subagent_spawn(_handle: u64) -> Result<(), String> {
            Ok(())
        }

        fn on_subagent_ended(_: String, _: SubagentEndReason) -> Result<(), String> {
            Ok(())
        }

        fn dispose(_session: Session) -> Result<(), String> {
            Ok(())
        }
    }

    export!(Legacy01);
}
