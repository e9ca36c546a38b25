//! The protocol's methods: each is one params type whose handler runs it and answers its
//! result type, and [`METHODS`] maps every name to its handler. Decoding names the field path
//! of any mismatch; the schema (`docs/serve-protocol.schema.json`) is generated from the same
//! table, so what is written down is what is served.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use super::checks::{Base, ProtocolVersion, SessionKey, base_mismatch};
use super::health::HealthBoard;
use super::mirror::Mirror;
use super::protocol::*;
use super::rpc::{self, ErrorData, RpcError, code};
use super::{Notify, Server};
use ctxhost::Host;
use ctxhost::auto_compaction::AutoCompaction;
use ctxhost::runtime::contract::CompactionTrigger;
use ctxhost::session::{CompactOptions, CompactOutcome, PendingCall, TurnRequest};

/// A protocol method: the name a request gives, the params it is decoded into (this type) and
/// the result it answers.
pub(super) trait Method: DeserializeOwned + JsonSchema + Send + 'static {
    const NAME: &'static str;
    type Result: Serialize + JsonSchema;

    /// Refuses params that decode but cannot be honoured, before anything runs.
    fn check(&self) -> Result<(), RpcError> {
        Ok(())
    }
}

/// A method's params, decoded and checked.
fn decode<M: Method>(raw: &RawValue) -> Result<M, RpcError> {
    let params: M = rpc::params(M::NAME, raw)?;
    params.check()?;
    Ok(params)
}

/// A method the server answers itself.
pub(super) trait ServerMethod: Method {
    fn run(
        self,
        server: Arc<Server>,
    ) -> impl Future<Output = Result<Self::Result, RpcError>> + Send;
}

/// A method one session's actor runs, in the order the session's requests were read.
pub(super) trait SessionMethod: Method {
    /// The session it runs on; None only for `subagent.ended` without `sessionKey`.
    fn session_key(&self) -> Option<&SessionKey>;

    /// What it means to the session's actor.
    fn route(&self) -> Route {
        Route::Call
    }

    fn run(
        self,
        session: SessionContext<'_>,
    ) -> impl Future<Output = Result<Self::Result, RpcError>> + Send;
}

/// What a session call means to the actors, beside what it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Route {
    /// Opens the session (starts its actor when none runs), with the session id the client
    /// asked for.
    Open(Option<String>),
    /// Closes it (its actor retires once it has run).
    Close,
    /// Spawns the child session named: `subagent.ended` finds its parent by it.
    Spawn(String),
    /// The child named ended: without a session key, its parent runs the call.
    EndChild(String),
    /// Anything else.
    Call,
}

/// What a session's handler runs on.
pub(super) struct SessionContext<'a> {
    host: &'a Host,
    key: &'a str,
    /// The session's mirror; None until `bootstrap` opens it and after `close`.
    slot: &'a mut Option<Mirror>,
    notify: &'a Notify,
    health: &'a HealthBoard,
}

impl SessionContext<'_> {
    /// The open mirror, or the error for a session that is not open.
    fn mirror(&mut self) -> Result<&mut Mirror, RpcError> {
        self.slot
            .as_mut()
            .ok_or_else(|| RpcError::unknown_session(self.key))
    }
}

type Answer<'a> = Pin<Box<dyn Future<Output = Result<Value, RpcError>> + Send + 'a>>;

/// A result as the response carries it.
pub(super) fn answer<T: Serialize>(result: T) -> Value {
    serde_json::to_value(result).expect("a protocol result serializes")
}

/// A decoded session call, its type erased so one queue carries them all.
trait RunSession: Send {
    fn run<'a>(self: Box<Self>, session: SessionContext<'a>) -> Answer<'a>;
}

impl<M: SessionMethod> RunSession for M {
    fn run<'a>(self: Box<Self>, session: SessionContext<'a>) -> Answer<'a> {
        Box::pin(async move { SessionMethod::run(*self, session).await.map(answer) })
    }
}

/// A session method's request, decoded, for its session's actor.
pub(super) struct SessionCall {
    route: Route,
    handler: Box<dyn RunSession>,
}

impl SessionCall {
    pub(super) fn opens(&self) -> bool {
        matches!(self.route, Route::Open(_))
    }
    /// The session id a `session.bootstrap` asks for, when the call opens the session.
    pub(super) fn opening(&self) -> Option<Option<&str>> {
        match &self.route {
            Route::Open(session_id) => Some(session_id.as_deref()),
            _ => None,
        }
    }
    pub(super) fn closes(&self) -> bool {
        self.route == Route::Close
    }
    /// The child session a `subagent.prepareSpawn` names.
    pub(super) fn spawned_child(&self) -> Option<&str> {
        match &self.route {
            Route::Spawn(child) => Some(child),
            _ => None,
        }
    }
    /// The child session a `subagent.ended` names.
    pub(super) fn ended_child(&self) -> Option<&str> {
        match &self.route {
            Route::EndChild(child) => Some(child),
            _ => None,
        }
    }
}

/// A request, decoded.
pub(super) enum Call {
    /// Answered by the server itself.
    Server(Box<dyn FnOnce(Arc<Server>) -> Answer<'static> + Send>),
    /// `shutdown`: answered once every session is closed.
    Shutdown,
    /// A call to one session's actor, with its session's key.
    Session(Option<String>, SessionCall),
}

/// One row of [`METHODS`]: a name, how its params are decoded, and its schema.
pub(super) struct Entry {
    pub(super) name: &'static str,
    decode: fn(&RawValue) -> Result<Call, RpcError>,
    /// The schemas of its params (for decoding) and its result (as serialized).
    pub(super) params_schema: fn(&mut SchemaGenerator) -> Schema,
    pub(super) result_schema: fn(&mut SchemaGenerator) -> Schema,
}

const fn server<M: ServerMethod>() -> Entry {
    Entry {
        name: M::NAME,
        decode: |raw| {
            let params: M = decode(raw)?;
            Ok(Call::Server(Box::new(move |server| {
                Box::pin(async move { params.run(server).await.map(answer) })
            })))
        },
        params_schema: M::json_schema,
        result_schema: M::Result::json_schema,
    }
}

const fn session<M: SessionMethod>() -> Entry {
    Entry {
        name: M::NAME,
        decode: |raw| {
            let params: M = decode(raw)?;
            let key = params.session_key().map(|key| key.as_str().to_string());
            let route = params.route();
            Ok(Call::Session(
                key,
                SessionCall {
                    route,
                    handler: Box::new(params),
                },
            ))
        },
        params_schema: M::json_schema,
        result_schema: M::Result::json_schema,
    }
}

/// Every method of the protocol, once.
pub(super) const METHODS: &[Entry] = &[
    server::<InitializeParams>(),
    Entry {
        name: "shutdown",
        decode: |raw| {
            let ShutdownParams {} = rpc::params("shutdown", raw)?;
            Ok(Call::Shutdown)
        },
        params_schema: ShutdownParams::json_schema,
        result_schema: Done::json_schema,
    },
    server::<HealthParams>(),
    session::<BootstrapParams>(),
    session::<CommitTurnParams>(),
    session::<SyncParams>(),
    session::<AssembleParams>(),
    session::<CompactParams>(),
    session::<AfterTurnParams>(),
    session::<ToolsParams>(),
    session::<CallToolParams>(),
    session::<PrepareSpawnParams>(),
    session::<RollbackParams>(),
    session::<EndedParams>(),
    session::<CloseParams>(),
];

/// Decodes a request's params for the method it names.
pub(super) fn parse(method: &str, raw: &RawValue) -> Result<Call, RpcError> {
    match METHODS.iter().find(|entry| entry.name == method) {
        Some(entry) => (entry.decode)(raw),
        None => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "unknown method `{}` (see docs/serve-protocol.md for the methods)",
                ctxhost::error::excerpt(method, ctxhost::error::QUOTE_BYTES)
            ),
        )
        .with_data(ErrorData {
            method: Some(method.to_string()),
            ..ErrorData::default()
        })),
    }
}

/// Runs one call on a session's mirror.
pub(super) async fn run(
    host: &Host,
    key: &str,
    slot: &mut Option<Mirror>,
    call: SessionCall,
    notify: &Notify,
    health: &HealthBoard,
) -> Result<Value, RpcError> {
    let session = SessionContext {
        host,
        key,
        slot,
        notify,
        health,
    };
    call.handler.run(session).await
}

// ---- the server's own methods ----

impl Method for InitializeParams {
    const NAME: &'static str = "initialize";
    type Result = InitializeResult;

    fn check(&self) -> Result<(), RpcError> {
        self.protocol_version.map_or(Ok(()), ProtocolVersion::check)
    }
}

impl ServerMethod for InitializeParams {
    async fn run(self, server: Arc<Server>) -> Result<InitializeResult, RpcError> {
        if let Some(client) = &self.client {
            tracing::info!(
                client = %client.name,
                version = client.version.as_deref().unwrap_or("?"),
                "initialize"
            );
        }
        server.initialize().await
    }
}

impl Method for HealthParams {
    const NAME: &'static str = "health";
    type Result = HealthResult;
}

impl ServerMethod for HealthParams {
    async fn run(self, server: Arc<Server>) -> Result<HealthResult, RpcError> {
        Ok(server.health(self.session_key.as_deref()).await)
    }
}

// ---- session methods ----

impl Method for BootstrapParams {
    const NAME: &'static str = "session.bootstrap";
    type Result = BootstrapResult;
}

impl SessionMethod for BootstrapParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    fn route(&self) -> Route {
        Route::Open(self.session_id.as_ref().map(|id| id.as_str().to_string()))
    }
    async fn run(self, session: SessionContext<'_>) -> Result<BootstrapResult, RpcError> {
        let mirror = match session.slot {
            Some(mirror) => mirror,
            None => {
                let id = self.session_id.as_ref().map(|id| id.as_str());
                let opened = Mirror::open(session.host, session.key, id).await?;
                session.slot.insert(opened)
            }
        };
        Ok(BootstrapResult {
            session_key: session.key.to_string(),
            session_id: mirror.session().id().to_string(),
            created: mirror.created(),
            ephemeral: mirror.is_ephemeral(),
            state: mirror.state().clone(),
            mirror: mirror.session().path().display().to_string(),
        })
    }
}

impl Method for ToolsParams {
    const NAME: &'static str = "session.tools";
    type Result = ToolsResult;
}

impl SessionMethod for ToolsParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<ToolsResult, RpcError> {
        let tools = session.mirror()?.session_mut().tools().await?;
        Ok(ToolsResult { tools })
    }
}

impl Method for CallToolParams {
    const NAME: &'static str = "session.callTool";
    type Result = CallToolResult;
}

impl SessionMethod for CallToolParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<CallToolResult, RpcError> {
        let output = (session.mirror()?.session_mut())
            .call_tool(&self.name, &self.arguments)
            .await?;
        Ok(CallToolResult {
            content: output.content,
            is_error: output.is_error,
        })
    }
}

impl Method for CloseParams {
    const NAME: &'static str = "session.close";
    type Result = CloseResult;
}

impl SessionMethod for CloseParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    fn route(&self) -> Route {
        Route::Close
    }
    async fn run(self, session: SessionContext<'_>) -> Result<CloseResult, RpcError> {
        let Some(mirror) = session.slot.take() else {
            return Ok(CloseResult { closed: false });
        };
        mirror.close().await?;
        Ok(CloseResult { closed: true })
    }
}

impl Method for SyncParams {
    const NAME: &'static str = "session.sync";
    type Result = super::sync::SyncState;
}

impl SessionMethod for SyncParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(
        self,
        mut session: SessionContext<'_>,
    ) -> Result<super::sync::SyncState, RpcError> {
        // A reset replaces the history whatever it was; a tail must extend the mirror's.
        if let (Some(base), false) = (&self.base, self.reset) {
            check_base(session.mirror()?, base)?;
        }
        let mirror = (session.slot.take()).ok_or_else(|| RpcError::unknown_session(session.key))?;
        let (mirror, result) = mirror
            .sync(
                session.host,
                self.from,
                &self.messages,
                self.last_fingerprint,
                self.reset,
            )
            .await;
        *session.slot = mirror;
        result?;
        Ok((session.slot.as_ref()).map_or_else(Default::default, |m| m.state().clone()))
    }
}

impl Method for CommitTurnParams {
    const NAME: &'static str = "session.commitTurn";
    type Result = CommitTurnResult;
}

impl SessionMethod for CommitTurnParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<CommitTurnResult, RpcError> {
        let mirror = session.mirror()?;
        // A commit already made answers `duplicate` whatever its base says now.
        if let Some(base) = &self.base
            && !mirror.is_committed(&self.advancement_key)
        {
            check_base(mirror, base)?;
        }
        let status = mirror
            .commit(&self.advancement_key, &self.messages, self.last_fingerprint)
            .await?;
        Ok(CommitTurnResult {
            status,
            message_count: mirror.state().message_count,
        })
    }
}

impl Method for AssembleParams {
    const NAME: &'static str = "session.assemble";
    type Result = AssembleResult;
}

impl SessionMethod for AssembleParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<AssembleResult, RpcError> {
        let (host, key, notify, health) =
            (session.host, session.key, session.notify, session.health);
        let mirror = session.mirror()?;
        if !mirror.in_sync(self.message_count, self.last_fingerprint.as_deref()) {
            return Ok(AssembleResult::Mismatch(mirror.state().clone()));
        }
        // `notifyBeforeAuto`: the client hears of an automatic compaction before the
        // assemble that runs it answers.
        let mut before_compaction = |due: &AutoCompaction| {
            let pending = CompactionPending {
                session_key: due.session_key.clone(),
                trigger: CompactionTrigger::Auto,
                context_tokens: due.context_tokens,
                threshold: due.threshold,
                context_window: due.context_window,
                message: due.to_string(),
            };
            notify(CompactionPending::METHOD, answer(pending));
        };
        let request = TurnRequest {
            available_tools: self.available_tools,
            pending: PendingCall {
                model: model_id(self.model),
                prompt: prompt_text(self.prompt),
            },
            runtime_tokens: 0,
        };
        let started = std::time::Instant::now();
        let assembly = mirror
            .assemble(self.token_budget, &request, &mut before_compaction)
            .await;
        let record = mirror.record_turn(
            host,
            assembly.as_ref(),
            started.elapsed(),
            health.writes_ledger(),
        );
        health.record(key, &record);
        let assembly = assembly?;
        let compaction =
            (assembly.compaction.as_ref()).map(|outcome| compact_result(mirror, outcome));
        Ok(AssembleResult::Ok(Assembled {
            items: assembly.items,
            estimated_tokens: assembly.estimated_tokens,
            system_prompt_addition: assembly.system_prompt_addition,
            compaction,
        }))
    }
}

impl Method for CompactParams {
    const NAME: &'static str = "session.compact";
    type Result = CompactResult;
}

impl SessionMethod for CompactParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<CompactResult, RpcError> {
        let mirror = session.mirror()?;
        mirror.set_budget(self.token_budget);
        let options = CompactOptions {
            force: self.force,
            trigger: self.trigger.unwrap_or(CompactionTrigger::Manual),
            token_budget: self.token_budget,
            custom_instructions: self.custom_instructions,
        };
        let outcome = mirror.session_mut().compact(&options).await?;
        Ok(compact_result(mirror, &outcome))
    }
}

impl Method for AfterTurnParams {
    const NAME: &'static str = "session.afterTurn";
    type Result = Done;
}

impl SessionMethod for AfterTurnParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<Done, RpcError> {
        let options = ctxhost::AfterTurnOptions {
            pre_prompt_message_count: self.pre_prompt_message_count,
            auto_compaction_summary: self.auto_compaction_summary,
            is_heartbeat: self.is_heartbeat,
            token_budget: self.token_budget,
        };
        session.mirror()?.session_mut().after_turn(&options).await?;
        Ok(Done {})
    }
}

impl Method for PrepareSpawnParams {
    const NAME: &'static str = "subagent.prepareSpawn";
    type Result = PrepareSpawnResult;
}

impl SessionMethod for PrepareSpawnParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    fn route(&self) -> Route {
        Route::Spawn(self.child_session_key.clone())
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<PrepareSpawnResult, RpcError> {
        let options = ctxhost::SpawnOptions {
            context_mode: self.context_mode,
            ttl_ms: self.ttl_ms,
        };
        let rollback_handle = (session.mirror()?.session_mut())
            .prepare_subagent_spawn(&self.child_session_key, &options)
            .await?;
        Ok(PrepareSpawnResult { rollback_handle })
    }
}

impl Method for RollbackParams {
    const NAME: &'static str = "subagent.rollback";
    type Result = Done;
}

impl SessionMethod for RollbackParams {
    fn session_key(&self) -> Option<&SessionKey> {
        Some(&self.session_key)
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<Done, RpcError> {
        (session.mirror()?.session_mut())
            .rollback_subagent_spawn(self.rollback_handle)
            .await?;
        Ok(Done {})
    }
}

impl Method for EndedParams {
    const NAME: &'static str = "subagent.ended";
    type Result = Done;
}

impl SessionMethod for EndedParams {
    fn session_key(&self) -> Option<&SessionKey> {
        self.session_key.as_ref()
    }
    fn route(&self) -> Route {
        Route::EndChild(self.child_session_key.clone())
    }
    async fn run(self, mut session: SessionContext<'_>) -> Result<Done, RpcError> {
        (session.mirror()?.session_mut())
            .on_subagent_ended(&self.child_session_key, self.reason)
            .await?;
        Ok(Done {})
    }
}

/// Refuses to extend a history other than the one the client says it extends.
fn check_base(mirror: &Mirror, base: &Base) -> Result<(), RpcError> {
    if mirror.in_sync(base.message_count, base.last_fingerprint.as_deref()) {
        return Ok(());
    }
    Err(base_mismatch(base, mirror.state()))
}

fn compact_result(mirror: &Mirror, outcome: &CompactOutcome) -> CompactResult {
    let first_kept_index =
        (outcome.first_kept_entry_id.as_deref()).and_then(|id| mirror.position_of(id));
    CompactResult {
        ok: true,
        compacted: outcome.compacted,
        reason: outcome.reason.clone(),
        tokens_before: outcome.tokens_before,
        tokens_after: outcome.tokens_after,
        first_kept_index,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ctxhost::runtime::contract::CompactionTrigger;

    fn params<M: Method>(json: &str) -> Result<M, RpcError> {
        rpc::params(M::NAME, &RawValue::from_string(json.into()).unwrap())
    }

    #[test]
    fn every_method_is_listed_once() {
        let mut names: Vec<_> = METHODS.iter().map(|entry| entry.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), METHODS.len());
        assert!(parse("session.frobnicate", RawValue::NULL).is_err());
    }

    #[test]
    fn compact_triggers_are_named_as_records_name_them_and_default_to_manual() {
        let trigger = |json: &str| {
            params::<CompactParams>(json)
                .map(|p| p.trigger.unwrap_or(CompactionTrigger::Manual))
                .map_err(|e| e.message)
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
            let json = format!(r#"{{"sessionKey":"s","trigger":"{name}"}}"#);
            assert_eq!(trigger(&json), Ok(expected));
            assert_eq!(expected.to_string(), name);
        }
        let refused = trigger(r#"{"sessionKey":"s","trigger":"later"}"#).unwrap_err();
        assert!(refused.contains("trigger"), "{refused}");
    }

    #[test]
    fn bootstrap_reads_the_session_id() {
        let p: BootstrapParams = params(r#"{"sessionKey":"s","sessionId":"abc-1"}"#).unwrap();
        assert_eq!(p.session_id.unwrap().as_str(), "abc-1");
    }

    #[test]
    fn unknown_members_wrong_types_and_missing_fields_name_the_method_and_the_field() {
        let refused = |method: &str, json: &str| {
            let e = parse(method, &RawValue::from_string(json.into()).unwrap())
                .err()
                .expect("refused");
            assert_eq!(e.code, code::INVALID_PARAMS, "{}", e.message);
            assert!(e.message.contains(method), "{}", e.message);
            e
        };
        let e = refused(
            "session.assemble",
            r#"{"sessionKey":"s","messageCount":1,"extra":1}"#,
        );
        assert!(e.message.contains("`extra`"), "{}", e.message);
        assert_eq!(e.data.as_deref(), Some(&ErrorData::at("extra")));
        let e = refused("session.sync", r#"{"sessionKey":"s","messages":[]}"#);
        assert!(e.message.contains("missing field `from`"), "{}", e.message);
        let e = refused(
            "session.commitTurn",
            r#"{"sessionKey":"s","advancementKey":"k","messages":[{"role":"user"},5]}"#,
        );
        assert_eq!(e.data.as_deref(), Some(&ErrorData::at("messages[1]")));
        assert!(
            e.message.contains("not an AgentMessage object"),
            "{}",
            e.message
        );
        let e = refused("session.close", r#"{"sessionKey":""}"#);
        assert_eq!(e.data.as_deref(), Some(&ErrorData::at("sessionKey")));
        let e = refused(
            "subagent.ended",
            r#"{"childSessionKey":"c","reason":"gone"}"#,
        );
        assert_eq!(e.data.as_deref(), Some(&ErrorData::at("reason")));
    }
}
