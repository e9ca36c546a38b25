//! The protocol's methods: their params (decoded with the field path of any mismatch) and what
//! each does to a session's mirror.

use ctxhost_transcript::compaction::Trigger;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::checks::{
    Base, BootstrapParams, HealthParams, ShutdownParams, base_mismatch, check_initialize,
    check_session_id,
};
use super::health::HealthBoard;
use super::mirror::{Commit, Mirror};
use super::rpc::{self, RpcError, code};
use crate::auto_compaction::AutoCompaction;
use crate::host::Host;
use crate::runtime::contract::{CompactionTrigger, ContextMode, SubagentEndReason};
use crate::session::{CompactOptions, CompactOutcome, PendingCall, TurnRequest};

/// The notification sent before an automatic compaction when `notifyBeforeAuto` is on.
pub(super) const COMPACTION_PENDING: &str = "session.compactionPending";

/// A request, decoded.
pub(super) enum Call {
    Initialize,
    Shutdown,
    /// `health`, optionally about one session.
    Health(Option<String>),
    /// A call to one session's actor; the key is `None` only for `subagent.ended` without
    /// `sessionKey` (the parent is looked up from `prepareSpawn`).
    Session(Option<String>, SessionMethod),
}

pub(super) enum SessionMethod {
    Bootstrap {
        /// The runtime's own id for the session: the header id of a mirror created for it.
        session_id: Option<String>,
    },
    CommitTurn {
        advancement_key: String,
        messages: Vec<Box<RawValue>>,
        last_fingerprint: Option<String>,
        base: Option<Base>,
    },
    Sync {
        from: usize,
        messages: Vec<Box<RawValue>>,
        last_fingerprint: Option<String>,
        reset: bool,
        base: Option<Base>,
    },
    Assemble {
        message_count: usize,
        last_fingerprint: Option<String>,
        token_budget: Option<u32>,
        available_tools: Vec<String>,
        pending: PendingCall,
    },
    Compact {
        force: bool,
        token_budget: Option<u32>,
        custom_instructions: Option<String>,
        trigger: CompactionTrigger,
    },
    AfterTurn {
        pre_prompt_message_count: u32,
        auto_compaction_summary: Option<String>,
        is_heartbeat: bool,
        token_budget: Option<u32>,
    },
    PrepareSpawn {
        child: String,
        context_mode: ContextMode,
        ttl_ms: Option<u64>,
    },
    Rollback {
        handle: u64,
    },
    Ended {
        child: String,
        reason: SubagentEndReason,
    },
    Close,
    Tools,
    CallTool {
        name: String,
        arguments: Value,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KeyParams {
    session_key: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CallToolParams {
    session_key: String,
    name: String,
    #[serde(default = "empty_object")]
    arguments: Value,
}

fn empty_object() -> Value {
    Value::Object(serde_json::Map::new())
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitParams {
    session_key: String,
    advancement_key: String,
    messages: Vec<Box<RawValue>>,
    last_fingerprint: Option<String>,
    base: Option<Base>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SyncParams {
    session_key: String,
    from: usize,
    messages: Vec<Box<RawValue>>,
    last_fingerprint: Option<String>,
    #[serde(default)]
    reset: bool,
    base: Option<Base>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AssembleParams {
    session_key: String,
    message_count: usize,
    last_fingerprint: Option<String>,
    token_budget: Option<u32>,
    #[serde(default)]
    available_tools: Vec<String>,
    /// The prompt about to be sent (a string, or a message whose text is used).
    prompt: Option<Value>,
    /// The model the call goes to (its id, or an object with `id` / `provider`).
    model: Option<Value>,
}

/// A prompt as the engine gets it: the string, or the text of a message's content.
fn prompt_text(prompt: Option<Value>) -> Option<String> {
    match prompt? {
        Value::String(text) => Some(text),
        Value::Object(message) => match message.get("content") {
            Some(Value::String(text)) => Some(text.clone()),
            Some(Value::Array(blocks)) => Some(
                blocks
                    .iter()
                    .filter_map(|b| b.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join("\n"),
            ),
            _ => None,
        },
        _ => None,
    }
}

/// A model as the engine gets it: `provider/id` when both are known, else what there is.
fn model_id(model: Option<Value>) -> Option<String> {
    match model? {
        Value::String(id) => Some(id),
        Value::Object(model) => {
            let field = |name: &str| model.get(name).and_then(Value::as_str);
            match (field("provider"), field("id").or_else(|| field("modelId"))) {
                (Some(provider), Some(id)) => Some(format!("{provider}/{id}")),
                (None, Some(id)) => Some(id.to_string()),
                _ => None,
            }
        }
        _ => None,
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CompactParams {
    session_key: String,
    #[serde(default)]
    force: bool,
    token_budget: Option<u32>,
    custom_instructions: Option<String>,
    /// Named as compaction records name it; `manual` when absent.
    trigger: Option<Trigger>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AfterTurnParams {
    session_key: String,
    #[serde(default)]
    pre_prompt_message_count: u32,
    auto_compaction_summary: Option<String>,
    #[serde(default)]
    is_heartbeat: bool,
    token_budget: Option<u32>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpawnParams {
    session_key: String,
    child_session_key: String,
    #[serde(default)]
    context_mode: ContextMode,
    ttl_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RollbackParams {
    session_key: String,
    rollback_handle: u64,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct EndedParams {
    session_key: Option<String>,
    child_session_key: String,
    reason: SubagentEndReason,
}

/// Messages must be JSON objects; the session checks the rest before writing anything.
fn objects(messages: &[Box<RawValue>]) -> Result<(), RpcError> {
    match messages.iter().position(|m| !m.get().starts_with('{')) {
        None => Ok(()),
        Some(n) => Err(RpcError::new(
            code::INVALID_PARAMS,
            format!("messages[{n}] is not an AgentMessage object"),
        )
        .with_data(json!({ "path": format!("messages[{n}]") }))),
    }
}

/// Decodes a request's method and params.
pub(super) fn parse(method: &str, raw: &RawValue) -> Result<Call, RpcError> {
    // A key that cannot name a session is refused here, before any session state exists.
    let session = |key: String, call| {
        crate::host::encode_key(&key).map_err(RpcError::from)?;
        Ok(Call::Session(Some(key), call))
    };
    match method {
        "initialize" => {
            check_initialize(rpc::params(method, raw)?)?;
            Ok(Call::Initialize)
        }
        "shutdown" => {
            let ShutdownParams {} = rpc::params(method, raw)?;
            Ok(Call::Shutdown)
        }
        "health" => {
            let HealthParams { session_key } = rpc::params(method, raw)?;
            Ok(Call::Health(session_key))
        }
        "session.bootstrap" => {
            let p: BootstrapParams = rpc::params(method, raw)?;
            check_session_id(p.session_id.as_deref())?;
            session(
                p.session_key,
                SessionMethod::Bootstrap {
                    session_id: p.session_id,
                },
            )
        }
        "session.close" => {
            let p: KeyParams = rpc::params(method, raw)?;
            session(p.session_key, SessionMethod::Close)
        }
        "session.tools" => {
            let p: KeyParams = rpc::params(method, raw)?;
            session(p.session_key, SessionMethod::Tools)
        }
        "session.callTool" => {
            let p: CallToolParams = rpc::params(method, raw)?;
            session(
                p.session_key,
                SessionMethod::CallTool {
                    name: p.name,
                    arguments: p.arguments,
                },
            )
        }
        "session.commitTurn" => {
            let p: CommitParams = rpc::params(method, raw)?;
            objects(&p.messages)?;
            session(
                p.session_key,
                SessionMethod::CommitTurn {
                    advancement_key: p.advancement_key,
                    messages: p.messages,
                    last_fingerprint: p.last_fingerprint,
                    base: p.base,
                },
            )
        }
        "session.sync" => {
            let p: SyncParams = rpc::params(method, raw)?;
            objects(&p.messages)?;
            session(
                p.session_key,
                SessionMethod::Sync {
                    from: p.from,
                    messages: p.messages,
                    last_fingerprint: p.last_fingerprint,
                    reset: p.reset,
                    base: p.base,
                },
            )
        }
        "session.assemble" => {
            let p: AssembleParams = rpc::params(method, raw)?;
            session(
                p.session_key,
                SessionMethod::Assemble {
                    message_count: p.message_count,
                    last_fingerprint: p.last_fingerprint,
                    token_budget: p.token_budget,
                    available_tools: p.available_tools,
                    pending: PendingCall {
                        model: model_id(p.model),
                        prompt: prompt_text(p.prompt),
                    },
                },
            )
        }
        "session.compact" => {
            let p: CompactParams = rpc::params(method, raw)?;
            let trigger = p.trigger.unwrap_or(Trigger::Manual);
            session(
                p.session_key,
                SessionMethod::Compact {
                    force: p.force,
                    token_budget: p.token_budget,
                    custom_instructions: p.custom_instructions,
                    trigger,
                },
            )
        }
        "session.afterTurn" => {
            let p: AfterTurnParams = rpc::params(method, raw)?;
            session(
                p.session_key,
                SessionMethod::AfterTurn {
                    pre_prompt_message_count: p.pre_prompt_message_count,
                    auto_compaction_summary: p.auto_compaction_summary,
                    is_heartbeat: p.is_heartbeat,
                    token_budget: p.token_budget,
                },
            )
        }
        "subagent.prepareSpawn" => {
            let p: SpawnParams = rpc::params(method, raw)?;
            session(
                p.session_key,
                SessionMethod::PrepareSpawn {
                    child: p.child_session_key,
                    context_mode: p.context_mode,
                    ttl_ms: p.ttl_ms,
                },
            )
        }
        "subagent.rollback" => {
            let p: RollbackParams = rpc::params(method, raw)?;
            session(
                p.session_key,
                SessionMethod::Rollback {
                    handle: p.rollback_handle,
                },
            )
        }
        "subagent.ended" => {
            let p: EndedParams = rpc::params(method, raw)?;
            if let Some(key) = &p.session_key {
                crate::host::encode_key(key).map_err(RpcError::from)?;
            }
            Ok(Call::Session(
                p.session_key,
                SessionMethod::Ended {
                    child: p.child_session_key,
                    reason: p.reason,
                },
            ))
        }
        other => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method `{}` (see docs/serve-protocol.md for the methods)",
                crate::error::excerpt(other, crate::error::QUOTE_BYTES)
            ),
        )
        .with_data(json!({ "method": other }))),
    }
}

/// Runs one call on a session's mirror.
pub(super) async fn run(
    host: &Host,
    key: &str,
    slot: &mut Option<Mirror>,
    call: SessionMethod,
    notify: &super::Notify,
    health: &HealthBoard,
) -> Result<Value, RpcError> {
    match call {
        SessionMethod::Bootstrap { session_id } => {
            let mirror = match slot {
                Some(mirror) => mirror,
                None => slot.insert(Mirror::open(host, key, session_id.as_deref()).await?),
            };
            Ok(json!({
                "sessionKey": key,
                "sessionId": mirror.session().id(),
                "created": mirror.created(),
                "ephemeral": mirror.is_ephemeral(),
                "messageCount": mirror.state().message_count,
                "lastFingerprint": mirror.state().last_fingerprint,
                "mirror": mirror.session().path().display().to_string(),
            }))
        }
        SessionMethod::Tools => {
            let tools = open(slot, key)?.session_mut().tools().await?;
            Ok(json!({ "tools": tools }))
        }
        SessionMethod::CallTool { name, arguments } => {
            let output = open(slot, key)?
                .session_mut()
                .call_tool(&name, &arguments)
                .await?;
            Ok(json!({ "content": output.content, "isError": output.is_error }))
        }
        SessionMethod::Close => {
            let Some(mirror) = slot.take() else {
                return Ok(json!({ "closed": false }));
            };
            mirror.close().await?;
            Ok(json!({ "closed": true }))
        }
        SessionMethod::Sync {
            from,
            messages,
            last_fingerprint,
            reset,
            base,
        } => {
            // A reset replaces the history whatever it was; a tail must extend the mirror's.
            if let (Some(base), false) = (&base, reset) {
                check_base(open(slot, key)?, base)?;
            }
            let mirror = slot.take().ok_or_else(|| RpcError::unknown_session(key))?;
            let (mirror, result) = mirror
                .sync(host, from, &messages, last_fingerprint, reset)
                .await;
            *slot = mirror;
            result?;
            let state = slot.as_ref().map(|m| m.state().clone()).unwrap_or_default();
            Ok(json!({
                "messageCount": state.message_count,
                "lastFingerprint": state.last_fingerprint,
            }))
        }
        SessionMethod::CommitTurn {
            advancement_key,
            messages,
            last_fingerprint,
            base,
        } => {
            let mirror = open(slot, key)?;
            // A commit already made answers `duplicate` whatever its base says now.
            if let Some(base) = &base
                && !mirror.is_committed(&advancement_key)
            {
                check_base(mirror, base)?;
            }
            let status = mirror
                .commit(&advancement_key, &messages, last_fingerprint)
                .await?;
            let status = match status {
                Commit::Committed => "committed",
                Commit::Duplicate => "duplicate",
            };
            Ok(json!({ "status": status, "messageCount": mirror.state().message_count }))
        }
        SessionMethod::Assemble {
            message_count,
            last_fingerprint,
            token_budget,
            available_tools,
            pending,
        } => {
            let mirror = open(slot, key)?;
            if !mirror.in_sync(message_count, last_fingerprint.as_deref()) {
                let state = mirror.state();
                return Ok(json!({
                    "status": "mismatch",
                    "messageCount": state.message_count,
                    "lastFingerprint": state.last_fingerprint,
                }));
            }
            // `notifyBeforeAuto`: the client hears of an automatic compaction before the
            // assemble that runs it answers.
            let mut before_compaction = |due: &AutoCompaction| {
                notify(
                    COMPACTION_PENDING,
                    json!({
                        "sessionKey": due.session_key,
                        "trigger": "auto",
                        "contextTokens": due.context_tokens,
                        "threshold": due.threshold,
                        "contextWindow": due.context_window,
                        "message": due.to_string(),
                    }),
                );
            };
            let request = TurnRequest {
                available_tools,
                pending,
                runtime_tokens: 0,
            };
            let started = std::time::Instant::now();
            let assembly = mirror
                .assemble(token_budget, &request, &mut before_compaction)
                .await;
            let record = mirror.record_turn(
                host,
                assembly.as_ref(),
                started.elapsed(),
                health.writes_ledger(),
            );
            health.record(key, &record);
            let assembly = assembly?;
            let mut result = json!({
                "status": "ok",
                "items": assembly.items,
                "estimatedTokens": assembly.estimated_tokens,
            });
            if let Some(addition) = assembly.system_prompt_addition {
                result["systemPromptAddition"] = addition.into();
            }
            if let Some(outcome) = assembly.compaction {
                result["compaction"] = compact_result(mirror, &outcome);
            }
            Ok(result)
        }
        SessionMethod::Compact {
            force,
            token_budget,
            custom_instructions,
            trigger,
        } => {
            let mirror = open(slot, key)?;
            mirror.set_budget(token_budget);
            let options = CompactOptions {
                force,
                trigger,
                token_budget,
                custom_instructions,
            };
            let outcome = mirror.session_mut().compact(&options).await?;
            Ok(compact_result(mirror, &outcome))
        }
        SessionMethod::AfterTurn {
            pre_prompt_message_count,
            auto_compaction_summary,
            is_heartbeat,
            token_budget,
        } => {
            open(slot, key)?
                .session_mut()
                .after_turn(&crate::AfterTurnOptions {
                    pre_prompt_message_count,
                    auto_compaction_summary,
                    is_heartbeat,
                    token_budget,
                })
                .await?;
            Ok(json!({}))
        }
        SessionMethod::PrepareSpawn {
            child,
            context_mode,
            ttl_ms,
        } => {
            let handle = open(slot, key)?
                .session_mut()
                .prepare_subagent_spawn(
                    &child,
                    &crate::SpawnOptions {
                        context_mode,
                        ttl_ms,
                    },
                )
                .await?;
            Ok(json!({ "rollbackHandle": handle }))
        }
        SessionMethod::Rollback { handle } => {
            open(slot, key)?
                .session_mut()
                .rollback_subagent_spawn(handle)
                .await?;
            Ok(json!({}))
        }
        SessionMethod::Ended { child, reason } => {
            open(slot, key)?
                .session_mut()
                .on_subagent_ended(&child, reason)
                .await?;
            Ok(json!({}))
        }
    }
}

/// The open mirror, or the error for a session that is not open.
/// Refuses to extend a history other than the one the client says it extends.
fn check_base(mirror: &Mirror, base: &Base) -> Result<(), RpcError> {
    if mirror.in_sync(base.message_count, base.last_fingerprint.as_deref()) {
        return Ok(());
    }
    let state = mirror.state();
    Err(base_mismatch(
        base,
        state.message_count,
        state.last_fingerprint.as_deref(),
    ))
}

fn open<'a>(slot: &'a mut Option<Mirror>, key: &str) -> Result<&'a mut Mirror, RpcError> {
    slot.as_mut().ok_or_else(|| RpcError::unknown_session(key))
}

fn compact_result(mirror: &Mirror, outcome: &CompactOutcome) -> Value {
    let first_kept_index = outcome
        .first_kept_entry_id
        .as_deref()
        .and_then(|id| mirror.position_of(id));
    json!({
        "ok": true,
        "compacted": outcome.compacted,
        "reason": outcome.reason,
        "tokensBefore": outcome.tokens_before,
        "tokensAfter": outcome.tokens_after,
        "firstKeptIndex": first_kept_index,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_and_models_reach_the_engine_in_its_terms() {
        assert_eq!(
            prompt_text(Some(json!("next step"))),
            Some("next step".into())
        );
        let message = json!({ "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "image" }, { "type": "text", "text": "b" }] });
        assert_eq!(prompt_text(Some(message)), Some("a\nb".into()));
        assert_eq!(prompt_text(Some(json!(5))), None);
        assert_eq!(
            model_id(Some(json!("fake/fake-model"))),
            Some("fake/fake-model".into())
        );
        assert_eq!(
            model_id(Some(
                json!({ "provider": "fake", "id": "m1", "contextWindow": 32000 })
            )),
            Some("fake/m1".into())
        );
        assert_eq!(model_id(Some(json!({ "id": "m1" }))), Some("m1".into()));
        assert_eq!(model_id(None), None);
    }

    #[test]
    fn assemble_params_carry_the_pending_call() {
        let raw = RawValue::from_string(
            r#"{"sessionKey":"s","messageCount":3,"prompt":"go","model":"p/m"}"#.into(),
        )
        .unwrap();
        let Ok(Call::Session(
            Some(key),
            SessionMethod::Assemble {
                pending,
                message_count,
                ..
            },
        )) = parse("session.assemble", &raw)
        else {
            panic!("not an assemble call");
        };
        assert_eq!((key.as_str(), message_count), ("s", 3));
        assert_eq!(pending.prompt.as_deref(), Some("go"));
        assert_eq!(pending.model.as_deref(), Some("p/m"));
    }

    #[test]
    fn compact_triggers_are_named_as_records_name_them_and_default_to_manual() {
        let trigger = |params: &str| {
            let raw = RawValue::from_string(params.into()).unwrap();
            match parse("session.compact", &raw) {
                Ok(Call::Session(_, SessionMethod::Compact { trigger, .. })) => Ok(trigger),
                Ok(_) => panic!("not a compact call"),
                Err(e) => Err(e.message),
            }
        };
        assert_eq!(
            trigger(r#"{"sessionKey":"s"}"#),
            Ok(CompactionTrigger::Manual)
        );
        for (name, expected) in [
            ("manual", CompactionTrigger::Manual),
            ("auto", CompactionTrigger::Auto),
            ("overflow", CompactionTrigger::Overflow),
        ] {
            let params = format!(r#"{{"sessionKey":"s","trigger":"{name}"}}"#);
            assert_eq!(trigger(&params), Ok(expected));
            assert_eq!(expected.to_string(), name);
        }
        let refused = trigger(r#"{"sessionKey":"s","trigger":"later"}"#).unwrap_err();
        assert!(refused.contains("trigger"), "{refused}");
    }
}
