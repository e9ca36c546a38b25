//! A 0.3 engine, built with wit-bindgen directly against `wit/0.3.0` (no SDK), so 0.3 stays
//! tested as the SDK moves on: the host must drive it exactly as before 0.4.
//!
//! `assemble` keeps the whole context as one `keep-range`, with the sum of its tokens, and
//! reports in its system-prompt addition how many entries it was handed (a 0.3 engine always
//! gets the whole context). `tools` offers `echo` (answers its `text`) and `recall` (runs the
//! `search` import with its `query`; one line per hit: entry id, role, snippet). Every other
//! hook keeps no state.
//!
//! Only the wasm build is the engine: a native cdylib cannot carry the component export names,
//! so natively the crate is empty.

#[cfg(target_arch = "wasm32")]
mod engine {
    wit_bindgen::generate!({
        path: "../../../wit/0.3.0",
        world: "context-engine",
        // 0.3 includes 0.2's interfaces from its `deps/`.
        generate_all,
    });

    use ctxhost::engine0_2_0::host;
    use ctxhost::engine0_2_0::types::{
        AfterTurnRequest, AssembleRequest, AssembleResult, BootstrapRequest, BootstrapResult,
        CompactRequest, CompactResult, ContextItem, EngineInfo, IngestResult, KeepRange, Message,
        Session, SubagentEndReason, SubagentSpawn,
    };
    use ctxhost::engine0_3_0::recall;
    use exports::ctxhost::engine0_2_0::engine::Guest;
    use exports::ctxhost::engine0_3_0::tools::{Guest as ToolsGuest, Tool, ToolOutput};

    struct Probe;

    /// The string value of `key` in a flat JSON object of strings (the host checked the
    /// arguments against the tool's schema, so they are such an object).
    fn argument(json: &str, key: &str) -> Option<String> {
        let start = json.find(&format!("\"{key}\""))? + key.len() + 2;
        let rest = &json[start..];
        let open = rest.find('"')? + 1;
        let close = rest[open..].find('"')? + open;
        Some(rest[open..close].to_string())
    }

    fn schema(field: &str) -> String {
        format!(
            r#"{{"type":"object","properties":{{"{field}":{{"type":"string"}}}},"required":["{field}"],"additionalProperties":false}}"#
        )
    }

    impl Guest for Probe {
        fn info() -> EngineInfo {
            EngineInfo {
                id: "v0-3-probe".into(),
                name: "0.3 probe".into(),
                version: "0.3.0".into(),
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
            let context = &request.context;
            let items = match (context.entries.first(), context.entries.last()) {
                (Some(&first), Some(&last)) => {
                    vec![ContextItem::KeepRange(KeepRange { first, last })]
                }
                _ => Vec::new(),
            };
            Ok(AssembleResult {
                items,
                estimated_tokens: context.tokens.iter().sum(),
                system_prompt_addition: Some(format!("handed {} entries", context.entries.len())),
            })
        }

        fn compact(request: CompactRequest) -> Result<CompactResult, String> {
            match host::delegate_compaction(&request) {
                Ok(compaction) => Ok(CompactResult {
                    ok: true,
                    compacted: compaction.is_some(),
                    reason: None,
                    compaction,
                }),
                Err(e) => Err(format!("delegate-compaction: {e:?}")),
            }
        }

        fn after_turn(_: AfterTurnRequest) -> Result<(), String> {
            Ok(())
        }

        fn prepare_subagent_spawn(_: SubagentSpawn) -> Result<Option<u64>, String> {
            Ok(None)
        }

        fn rollback_subagent_spawn(_: u64) -> Result<(), String> {
            Ok(())
        }

        fn on_subagent_ended(_: String, _: SubagentEndReason) -> Result<(), String> {
            Ok(())
        }

        fn dispose(_: Session) -> Result<(), String> {
            Ok(())
        }
    }

    impl ToolsGuest for Probe {
        fn list_tools() -> Vec<Tool> {
            vec![
                Tool {
                    name: "echo".into(),
                    description: "Answers its text.".into(),
                    parameters: schema("text"),
                },
                Tool {
                    name: "recall".into(),
                    description: "Searches the session through the host's recall import.".into(),
                    parameters: schema("query"),
                },
            ]
        }

        fn call_tool(name: String, arguments: String) -> Result<ToolOutput, String> {
            let content = match name.as_str() {
                "echo" => argument(&arguments, "text").ok_or("echo: no `text`")?,
                "recall" => {
                    let query = argument(&arguments, "query").ok_or("recall: no `query`")?;
                    let hits = recall::search(&recall::SearchRequest {
                        query,
                        role: None,
                        tool: None,
                        is_error: None,
                        limit: 0,
                    })
                    .map_err(|e| format!("search: {e:?}"))?;
                    hits.iter()
                        .map(|h| format!("{} {} {}", h.entry_id, h.role, h.snippet))
                        .collect::<Vec<_>>()
                        .join("\n")
                }
                other => return Err(format!("no tool `{other}`")),
            };
            Ok(ToolOutput {
                content,
                is_error: false,
            })
        }
    }

    export!(Probe);
}
