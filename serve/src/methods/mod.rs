//! The protocol's methods: each is one params type whose handler runs it and answers its
//! result type, and [`METHODS`] maps every name to its handler. Decoding names the field path
//! of any mismatch; the schema (`docs/serve-protocol.schema.json`) is generated from the same
//! table, so what is written down is what is served.

use std::future::Future;
use std::pin::Pin;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use serde_json::value::RawValue;

use ctxhost::Host;

use crate::checks::{ProtocolVersion, SessionKey};
use crate::health::HealthBoard;
use crate::mirror::Mirror;
use crate::output::Notify;
use crate::protocol::*;
use crate::rpc::{self, ErrorData, RpcError, code};

/// A protocol method: the name a request gives, the params it is decoded into (this type) and
/// the result it answers.
pub(crate) trait Method: DeserializeOwned + JsonSchema + Send + 'static {
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

/// A method the server answers itself, from its own state rather than a session's.
pub(crate) trait ServerMethod: Method {
    fn call(self) -> ServerCall;
}

/// A decoded request the server answers itself.
pub(crate) enum ServerCall {
    Initialize(InitializeParams),
    Health(HealthParams),
}

/// A method one session's actor runs, in the order the session's requests were read.
pub(crate) trait SessionMethod: Method {
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
pub(crate) enum Route {
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
pub(crate) struct SessionContext<'a> {
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
pub(crate) fn answer<T: Serialize>(result: T) -> Value {
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
pub(crate) struct SessionCall {
    route: Route,
    handler: Box<dyn RunSession>,
}

impl SessionCall {
    pub(crate) fn opens(&self) -> bool {
        matches!(self.route, Route::Open(_))
    }
    /// The session id a `session.bootstrap` asks for, when the call opens the session.
    pub(crate) fn opening(&self) -> Option<Option<&str>> {
        match &self.route {
            Route::Open(session_id) => Some(session_id.as_deref()),
            _ => None,
        }
    }
    pub(crate) fn closes(&self) -> bool {
        self.route == Route::Close
    }
    /// The child session a `subagent.prepareSpawn` names.
    pub(crate) fn spawned_child(&self) -> Option<&str> {
        match &self.route {
            Route::Spawn(child) => Some(child),
            _ => None,
        }
    }
    /// The child session a `subagent.ended` names.
    pub(crate) fn ended_child(&self) -> Option<&str> {
        match &self.route {
            Route::EndChild(child) => Some(child),
            _ => None,
        }
    }
}

/// A request, decoded.
pub(crate) enum Call {
    /// Answered by the server itself.
    Server(ServerCall),
    /// `shutdown`: answered once every session is closed.
    Shutdown,
    /// A call to one session's actor, with its session's key.
    Session(Option<String>, SessionCall),
}

/// One row of [`METHODS`]: a name, how its params are decoded, and its schema.
pub(crate) struct Entry {
    pub(crate) name: &'static str,
    decode: fn(&RawValue) -> Result<Call, RpcError>,
    /// The schemas of its params (for decoding) and its result (as serialized).
    pub(crate) params_schema: fn(&mut SchemaGenerator) -> Schema,
    pub(crate) result_schema: fn(&mut SchemaGenerator) -> Schema,
}

const fn server<M: ServerMethod>() -> Entry {
    Entry {
        name: M::NAME,
        decode: |raw| {
            let params: M = decode(raw)?;
            Ok(Call::Server(params.call()))
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
pub(crate) const METHODS: &[Entry] = &[
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
pub(crate) fn parse(method: &str, raw: &RawValue) -> Result<Call, RpcError> {
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
pub(crate) async fn run(
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
    fn call(self) -> ServerCall {
        ServerCall::Initialize(self)
    }
}

impl Method for HealthParams {
    const NAME: &'static str = "health";
    type Result = HealthResult;
}

impl ServerMethod for HealthParams {
    fn call(self) -> ServerCall {
        ServerCall::Health(self)
    }
}

mod session;

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
