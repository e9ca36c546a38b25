//! What the protocol's handshake and `session.bootstrap` take, checked: a version this server
//! does not speak, a `shutdown` with members, or a `sessionId` that cannot name a transcript is
//! refused instead of ignored.

use serde::Deserialize;
use serde_json::json;

use super::rpc::{RpcError, code};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct BootstrapParams {
    pub(super) session_key: String,
    pub(super) session_id: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct InitializeParams {
    protocol_version: Option<u32>,
    client: Option<ClientInfo>,
}

#[derive(Deserialize)]
pub(super) struct ClientInfo {
    name: String,
    version: Option<String>,
}

/// `shutdown` takes nothing; a member sent to it is a client's mistake worth hearing about.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ShutdownParams {}

/// `health`: the whole server, and one session when `sessionKey` names it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(super) struct HealthParams {
    pub(super) session_key: Option<String>,
}

/// The longest `sessionId` kept (the header id of a mirror); the same bound as a key.
const MAX_SESSION_ID_BYTES: usize = 200;

pub(super) fn check_initialize(p: InitializeParams) -> Result<(), RpcError> {
    if let Some(version) = p.protocol_version
        && version != super::PROTOCOL_VERSION
    {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!(
                "protocolVersion {version} is not supported: this server speaks version {}",
                super::PROTOCOL_VERSION
            ),
        )
        .with_data(json!({ "path": "protocolVersion", "supported": [super::PROTOCOL_VERSION] })));
    }
    if let Some(client) = p.client {
        tracing::info!(
            client = %client.name,
            version = client.version.as_deref().unwrap_or("?"),
            "initialize"
        );
    }
    Ok(())
}

pub(super) fn check_session_id(session_id: Option<&str>) -> Result<(), RpcError> {
    let problem = match session_id {
        Some("") => "it is empty",
        Some(id) if id.len() > MAX_SESSION_ID_BYTES => "it is longer than 200 bytes",
        Some(id) if id.chars().any(char::is_control) => "it contains a control character",
        _ => return Ok(()),
    };
    Err(RpcError::new(
        code::INVALID_PARAMS,
        format!("invalid `sessionId`: {problem}"),
    )
    .with_data(json!({ "path": "sessionId" })))
}

/// The history a commit or a tail sync extends, as the client has it: its length and its last
/// message's fingerprint. When given, the server refuses to extend anything else, so commits
/// sent out of order (or a sync over a history the mirror does not hold) are caught; with
/// fingerprints that chain (each one hashes the previous), a rewritten middle is caught too.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(super) struct Base {
    pub(super) message_count: usize,
    pub(super) last_fingerprint: Option<String>,
}

/// The error for a `base` that is not the mirror's history.
pub(super) fn base_mismatch(
    base: &Base,
    message_count: usize,
    last_fingerprint: Option<&str>,
) -> RpcError {
    RpcError::new(
        code::INVALID_PARAMS,
        format!(
            "`base` ({} messages) is not the history the mirror holds ({message_count} messages); nothing was written: sync from the mirror's state",
            base.message_count
        ),
    )
    .with_data(json!({
        "path": "base",
        "messageCount": message_count,
        "lastFingerprint": last_fingerprint,
    }))
}

#[cfg(test)]
mod tests {
    use serde_json::value::RawValue;

    use super::super::methods::{Call, SessionMethod, parse};

    fn parsed(method: &str, params: &str) -> Result<Call, String> {
        let raw = RawValue::from_string(params.into()).unwrap();
        parse(method, &raw).map_err(|e| e.message)
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
        let Ok(Call::Session(_, SessionMethod::Bootstrap { session_id })) = parsed(
            "session.bootstrap",
            r#"{"sessionKey":"s","sessionId":"abc-1"}"#,
        ) else {
            panic!("not a bootstrap");
        };
        assert_eq!(session_id.as_deref(), Some("abc-1"));
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
