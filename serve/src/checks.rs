//! What the protocol's inputs must be, checked as they are decoded: a key that cannot name a
//! session, a `sessionId` that cannot be a header id or a message that is not an object is
//! refused with the field's path, before any session state exists; a version this server does
//! not speak is refused instead of ignored.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::rpc::{ErrorData, RpcError, code};
use crate::sync::SyncState;

/// The longest key or `sessionId` taken, in bytes.
const MAX_ID_BYTES: usize = 200;

/// The schema of a name of 1 to [`MAX_ID_BYTES`] bytes.
fn name_schema(description: &str) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_ID_BYTES,
        "description": description,
    })
}

/// A session key (`agent:main:main`): 1–200 bytes, stored as a file name.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct SessionKey(String);

impl TryFrom<String> for SessionKey {
    type Error = ctxhost::Error;

    fn try_from(key: String) -> Result<Self, Self::Error> {
        ctxhost::encode_key(&key)?;
        Ok(Self(key))
    }
}

impl SessionKey {
    pub(super) fn as_str(&self) -> &str {
        &self.0
    }
}

impl JsonSchema for SessionKey {
    fn schema_name() -> Cow<'static, str> {
        "SessionKey".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        name_schema(
            "The session key (e.g. agent:main:main); refused when it is empty, longer than 200 bytes, `.` or `..`.",
        )
    }
}

/// The runtime's own id for a session, the header id of a mirror created for it: 1–200 bytes,
/// no control character.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub(super) struct SessionId(String);

impl TryFrom<String> for SessionId {
    type Error = String;

    fn try_from(id: String) -> Result<Self, String> {
        let problem = if id.is_empty() {
            "it is empty"
        } else if id.len() > MAX_ID_BYTES {
            "it is longer than 200 bytes"
        } else if id.chars().any(char::is_control) {
            "it contains a control character"
        } else {
            return Ok(Self(id));
        };
        Err(format!("invalid `sessionId`: {problem}"))
    }
}

impl SessionId {
    pub(super) fn as_str(&self) -> &str {
        &self.0
    }
}

impl JsonSchema for SessionId {
    fn schema_name() -> Cow<'static, str> {
        "SessionId".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        name_schema(
            "The runtime's own id for the session: the header id of a mirror created for it (no control characters).",
        )
    }
}

/// An AgentMessage (pi / OpenClaw) as the client wrote it, kept byte for byte: fields ctxhost
/// does not model survive. Only its being an object is checked here; the session checks the
/// rest before writing anything.
#[derive(Debug)]
pub(crate) struct AgentMessage(Box<RawValue>);

impl AgentMessage {
    pub(crate) fn json(&self) -> &str {
        self.0.get()
    }
}

impl<'de> Deserialize<'de> for AgentMessage {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        if !raw.get().starts_with('{') {
            return Err(serde::de::Error::custom("not an AgentMessage object"));
        }
        Ok(Self(raw))
    }
}

impl JsonSchema for AgentMessage {
    fn schema_name() -> Cow<'static, str> {
        "AgentMessage".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "required": ["role"],
            "properties": { "role": { "type": "string" } },
            "description": "An AgentMessage (pi / OpenClaw); fields ctxhost does not model are kept byte for byte."
        })
    }
}

/// The protocol version `initialize` reports.
pub const PROTOCOL_VERSION: u32 = 1;

/// The version of this protocol: an integer, the one [`PROTOCOL_VERSION`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub(super) struct ProtocolVersion(pub(super) u32);

impl ProtocolVersion {
    /// The version this server speaks.
    pub(super) const SPOKEN: Self = Self(PROTOCOL_VERSION);

    /// Refuses a version this server does not speak (with the one it does in `data`).
    pub(super) fn check(self) -> Result<(), RpcError> {
        if self == Self::SPOKEN {
            return Ok(());
        }
        Err(RpcError::new(
            code::INVALID_PARAMS,
            format!(
                "protocolVersion {} is not supported: this server speaks version {}",
                self.0,
                Self::SPOKEN.0
            ),
        )
        .with_data(ErrorData {
            supported: Some(vec![Self::SPOKEN.0]),
            ..ErrorData::at("protocolVersion")
        }))
    }
}

impl JsonSchema for ProtocolVersion {
    fn schema_name() -> Cow<'static, str> {
        "ProtocolVersion".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "const": PROTOCOL_VERSION })
    }
}

/// The history a commit or a tail sync extends, as the client has it: its length, its last
/// message's fingerprint and the chain of all of them. When given, the server refuses to extend
/// anything else, so commits sent out of order (or a sync over a history the mirror does not
/// hold) are caught when they arrive; with `chain`, a rewritten middle is caught too.
/// Refused (-32602, `data.path` "base") when it is not the mirror's.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Base {
    /// Messages in the client's history.
    pub(super) message_count: usize,
    /// The client's fingerprint of its last message.
    pub(super) last_fingerprint: Option<String>,
    /// The chain of the fingerprints of all its messages.
    pub(super) chain: Option<String>,
}

/// Refuses `fingerprints` that are not one for each message, or whose last is not the
/// `lastFingerprint` sent beside them.
pub(super) fn check_fingerprints(
    messages: usize,
    fingerprints: Option<&[String]>,
    last_fingerprint: Option<&str>,
) -> Result<(), RpcError> {
    let Some(fingerprints) = fingerprints else {
        return Ok(());
    };
    let problem = if fingerprints.len() != messages {
        format!(
            "`fingerprints` has {} entries for {messages} messages; send one for each message",
            fingerprints.len()
        )
    } else if last_fingerprint
        .is_some_and(|last| fingerprints.last().map(String::as_str) != Some(last))
    {
        "`lastFingerprint` is not the last of `fingerprints`; send either, or both alike"
            .to_string()
    } else {
        return Ok(());
    };
    Err(RpcError::new(code::INVALID_PARAMS, problem).with_data(ErrorData::at("fingerprints")))
}

/// The error for a `base` that is not the mirror's history.
pub(super) fn base_mismatch(base: &Base, mirror: &SyncState) -> RpcError {
    RpcError::new(
        code::INVALID_PARAMS,
        format!(
            "`base` ({} messages) is not the history the mirror holds ({} messages); nothing was written: sync from the mirror's state",
            base.message_count, mirror.message_count
        ),
    )
    .with_data(ErrorData {
        mirror: Some(mirror.clone()),
        ..ErrorData::at("base")
    })
}

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    use crate::methods::parse;

    fn parsed(method: &str, params: &str) -> Result<(), String> {
        let raw = RawValue::from_string(params.into()).unwrap();
        parse(method, &raw).map(|_| ()).map_err(|e| e.message)
    }

    #[test]
    fn initialize_and_shutdown_refuse_what_they_cannot_honour() {
        assert!(parsed("initialize", "{}").is_ok());
        assert!(
            parsed(
                "initialize",
                r#"{"protocolVersion":1,"client":{"name":"oc"}}"#
            )
            .is_ok()
        );
        let e = parsed("initialize", r#"{"protocolVersion":2}"#)
            .err()
            .unwrap();
        assert!(e.contains("protocolVersion 2 is not supported"), "{e}");
        let e = parsed("initialize", r#"{"client":{"version":"1"}}"#)
            .err()
            .unwrap();
        assert!(e.contains("`client`"), "{e}");
        let e = parsed("initialize", r#"{"protocolVersion":"1"}"#)
            .err()
            .unwrap();
        assert!(e.contains("protocolVersion"), "{e}");
        assert!(parsed("shutdown", "{}").is_ok());
        let e = parsed("shutdown", r#"{"force":true}"#).err().unwrap();
        assert!(e.contains("force"), "{e}");
    }

    #[test]
    fn bootstrap_reads_the_session_id_and_refuses_one_that_cannot_be_a_header_id() {
        assert!(
            parsed(
                "session.bootstrap",
                r#"{"sessionKey":"s","sessionId":"abc-1"}"#
            )
            .is_ok()
        );
        let long = format!(r#"{{"sessionKey":"s","sessionId":"{}"}}"#, "x".repeat(201));
        for params in [
            r#"{"sessionKey":"s","sessionId":5}"#,
            r#"{"sessionKey":"s","sessionId":""}"#,
            r#"{"sessionKey":"s","sessionId":"a\nb"}"#,
            &long,
        ] {
            let e = parsed("session.bootstrap", params).err().unwrap();
            assert!(e.contains("sessionId"), "{params}: {e}");
        }
    }
}
