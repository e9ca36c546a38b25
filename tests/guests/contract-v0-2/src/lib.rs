//! A probe engine of contract `ctxhost:engine@0.2.0`, built with wit-bindgen directly against
//! `wit/0.2.0` (no SDK), so the test sees exactly what the host hands a 0.2 guest.
//!
//! `assemble` inserts one user message describing what it saw (tool names from the context's
//! columns and the call ids `tool-call-ids` gives for them, errors, pruned entries, model,
//! prompt, state from the other hooks), then keeps every entry with one `keep-range`. A pending prompt of `trim` makes it claim it sends 100 tokens,
//! which the runtime compaction must then believe. `compact` delegates and reports the window
//! and assembled size it was given.
//!
//! Only the wasm build is the engine: a native cdylib cannot carry the component export names,
//! so natively the crate is empty.

#[cfg(target_arch = "wasm32")]
mod engine {
    use std::cell::RefCell;

    wit_bindgen::generate!({
        path: "../../../wit/0.2.0",
        world: "context-engine",
        additional_derives: [PartialEq],
    });

    use ctxhost::engine::host;
    use ctxhost::engine::types::{
        AfterTurnRequest, AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult,
        CompactRequest, CompactResult, ContextItem, EngineInfo, IngestResult, KeepRange, Message,
        Session, SubagentEndReason, SubagentSpawn,
    };
    use exports::ctxhost::engine::engine::Guest;

    /// What the hooks other than `assemble` saw; one instance serves one session.
    #[derive(Default)]
    struct Seen {
        bootstrap_entries: Option<u32>,
        ingested_call_ids: Vec<String>,
        after_turns: u32,
        spawned: Vec<String>,
        rolled_back: Vec<u64>,
        ended: Vec<String>,
    }

    thread_local! {
        static SEEN: RefCell<Seen> = RefCell::new(Seen::default());
    }

    fn note(message: &Message) {
        if let Some(id) = &message.tool_call_id {
            SEEN.with_borrow_mut(|s| s.ingested_call_ids.push(id.clone()));
        }
    }

    /// A JSON string literal (the report is built without a JSON library).
    fn quoted(text: &str) -> String {
        let mut out = String::from("\"");
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    struct Probe;

    impl Guest for Probe {
        fn info() -> EngineInfo {
            EngineInfo {
                id: "v0-2-probe".into(),
                name: "0.2 probe".into(),
                version: "0.2.0".into(),
                owns_compaction: false,
            }
        }

        fn bootstrap(request: BootstrapRequest) -> Result<BootstrapResult, String> {
            SEEN.with_borrow_mut(|s| s.bootstrap_entries = Some(request.entry_count));
            Ok(BootstrapResult {
                bootstrapped: true,
                imported_messages: None,
                reason: None,
            })
        }

        fn ingest(
            _session: Session,
            message: Message,
            _is_heartbeat: bool,
        ) -> Result<IngestResult, String> {
            note(&message);
            Ok(IngestResult { ingested: true })
        }

        fn ingest_batch(
            _session: Session,
            messages: Vec<Message>,
            _is_heartbeat: bool,
        ) -> Result<u32, String> {
            messages.iter().for_each(note);
            Ok(messages.len() as u32)
        }

        fn assemble(request: AssembleRequest) -> Result<AssembleResult, String> {
            let context = &request.context;
            let mut tools: Vec<&str> = context
                .tools
                .iter()
                .filter(|&&t| t > 0)
                .map(|&t| context.tool_names[t as usize - 1].as_str())
                .collect();
            tools.sort_unstable();
            tools.dedup();
            let tool_results: Vec<u32> = context
                .entries
                .iter()
                .zip(&context.roles)
                // 2: `tool-result`, the role's position in the enum.
                .filter(|(_, role)| **role == 2)
                .map(|(entry, _)| *entry)
                .collect();
            let ids =
                host::tool_call_ids(&tool_results).map_err(|e| format!("tool-call-ids: {e:?}"))?;
            let call_ids = ids.iter().filter(|id| id.is_some()).count();
            let flagged = |bit: u8| context.flags.iter().filter(|f| *f & bit != 0).count();
            let errors = flagged(1);
            let pruned = flagged(2);
            // The import and the request must agree; `read-entries` must carry the same call id.
            let same_as_import = host::context_entries() == *context;
            let read_matches = match tool_results.first() {
                Some(&e) => host::read_entries(&[e])
                    .map_err(|e| format!("read-entries: {e:?}"))?
                    .first()
                    .is_some_and(|m| m.tool_call_id == ids[0]),
                None => true,
            };
            let report = SEEN.with_borrow(|s| {
                format!(
                    "tools={} call_ids={call_ids} errors={errors} pruned={pruned} model={} prompt={} \
                     import_agrees={same_as_import} read_matches={read_matches} bootstrap={:?} \
                     ingested_ids={} after_turns={} spawned={} rolled_back={:?} ended={}",
                    tools.join(","),
                    request.model.as_deref().unwrap_or("-"),
                    request.prompt.as_deref().unwrap_or("-"),
                    s.bootstrap_entries,
                    s.ingested_call_ids.len(),
                    s.after_turns,
                    s.spawned.join(","),
                    s.rolled_back,
                    s.ended.join(","),
                )
            });
            let mut items = vec![ContextItem::Insert(format!(
                r#"{{"role":"user","content":[{{"type":"text","text":{}}}]}}"#,
                quoted(&report)
            ))];
            if let (Some(&first), Some(&last)) = (context.entries.first(), context.entries.last()) {
                items.push(ContextItem::KeepRange(KeepRange { first, last }));
            }
            let estimated_tokens = if request.prompt.as_deref() == Some("trim") {
                100
            } else {
                context.tokens.iter().sum()
            };
            Ok(AssembleResult {
                items,
                estimated_tokens,
                system_prompt_addition: request.model.map(|m| format!("model {m}")),
            })
        }

        fn compact(request: CompactRequest) -> Result<CompactResult, String> {
            let seen = format!(
                "window={} assembled={:?}",
                request.context_window, request.assembled_tokens
            );
            match host::delegate_compaction(&request) {
                Ok(Some(compaction)) => Ok(CompactResult {
                    ok: true,
                    compacted: true,
                    reason: Some(seen),
                    compaction: Some(compaction),
                }),
                Ok(None) => Ok(CompactResult {
                    ok: true,
                    compacted: false,
                    reason: Some(format!("nothing to compact; {seen}")),
                    compaction: None,
                }),
                Err(e) => Err(format!("delegate-compaction: {e:?}")),
            }
        }

        fn after_turn(_request: AfterTurnRequest) -> Result<(), String> {
            SEEN.with_borrow_mut(|s| s.after_turns += 1);
            Ok(())
        }

        fn prepare_subagent_spawn(spawn: SubagentSpawn) -> Result<Option<u64>, String> {
            SEEN.with_borrow_mut(|s| {
                s.spawned.push(spawn.child_session_key);
                Ok(Some(s.spawned.len() as u64))
            })
        }

        fn rollback_subagent_spawn(handle: u64) -> Result<(), String> {
            SEEN.with_borrow_mut(|s| s.rolled_back.push(handle));
            Ok(())
        }

        fn on_subagent_ended(
            child_session_key: String,
            reason: SubagentEndReason,
        ) -> Result<(), String> {
            SEEN.with_borrow_mut(|s| s.ended.push(format!("{child_session_key}:{reason:?}")));
            Ok(())
        }

        fn dispose(_session: Session) -> Result<(), String> {
            Ok(())
        }
    }

    export!(Probe);
}
