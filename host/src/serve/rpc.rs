//! JSON-RPC 2.0 over newline-delimited JSON: reading capped lines, parsing requests, and the
//! error codes of the protocol (`docs/serve-protocol.md`).

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::error::Error;

/// The protocol's error codes.
pub(crate) mod code {
    pub(crate) const PARSE_ERROR: i64 = -32700;
    pub(crate) const INVALID_REQUEST: i64 = -32600;
    pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
    pub(crate) const INVALID_PARAMS: i64 = -32602;
    pub(crate) const HOST_ERROR: i64 = -32000;
    pub(crate) const UNKNOWN_SESSION: i64 = -32001;
    pub(crate) const ENGINE_FAULT: i64 = -32002;
    pub(crate) const LINE_TOO_LONG: i64 = -32003;
    pub(crate) const TRANSCRIPT: i64 = -32004;
    pub(crate) const ENGINE_UNAVAILABLE: i64 = -32005;
    pub(crate) const OVERFLOW: i64 = -32006;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RpcError {
    pub(crate) code: i64,
    pub(crate) message: String,
    pub(crate) data: Option<Value>,
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub(crate) fn unknown_session(key: &str) -> Self {
        Self::new(
            code::UNKNOWN_SESSION,
            format!("session `{key}` is not open in this server; call session.bootstrap first"),
        )
        .with_data(json!({ "sessionKey": key }))
    }

    fn to_json(&self) -> Value {
        let mut error = json!({ "code": self.code, "message": self.message });
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }
}

impl From<Error> for RpcError {
    fn from(error: Error) -> Self {
        use crate::runtime::EngineError;
        let engine_fault = |e: &EngineError| {
            let (engine, function) = match e {
                EngineError::Fault {
                    engine, function, ..
                }
                | EngineError::Failed {
                    engine, function, ..
                }
                | EngineError::CircuitOpen {
                    engine, function, ..
                }
                | EngineError::InvalidOutput {
                    engine, function, ..
                } => (engine.clone(), function.to_string()),
            };
            json!({ "engine": engine, "function": function })
        };
        let message = crate::error::chain(&error);
        match &error {
            Error::Engine(e) => {
                RpcError::new(code::ENGINE_FAULT, message).with_data(engine_fault(e))
            }
            Error::Ingest { source, .. } => {
                RpcError::new(code::ENGINE_FAULT, message).with_data(engine_fault(source))
            }
            Error::CompactionFailed { engine, .. } => RpcError::new(code::ENGINE_FAULT, message)
                .with_data(json!({ "engine": engine, "function": "compact" })),
            Error::Transcript(_) | Error::Io { .. } => RpcError::new(code::TRANSCRIPT, message),
            Error::Config(_) | Error::Plugin(_) | Error::Runtime(_) => {
                RpcError::new(code::ENGINE_UNAVAILABLE, message)
            }
            Error::Overflow(_) => RpcError::new(code::OVERFLOW, message),
            Error::InvalidMessage { index, .. } => RpcError::new(code::INVALID_PARAMS, message)
                .with_data(json!({ "path": format!("messages[{index}]") })),
            Error::SyncFrom { .. } => {
                RpcError::new(code::INVALID_PARAMS, message).with_data(json!({ "path": "from" }))
            }
            Error::SessionKey { .. } => RpcError::new(code::INVALID_PARAMS, message)
                .with_data(json!({ "path": "sessionKey" })),
            Error::UnknownRollback { .. } => RpcError::new(code::INVALID_PARAMS, message)
                .with_data(json!({ "path": "rollbackHandle" })),
            Error::ToolCall { tool, .. } => RpcError::new(code::INVALID_PARAMS, message)
                .with_data(json!({ "path": "arguments", "tool": tool })),
            Error::Recall(_) => RpcError::new(code::TRANSCRIPT, message),
        }
    }
}

/// One parsed request. `params` stays raw until the method knows its type.
#[derive(Debug)]
pub(crate) struct Request {
    /// None for a notification (no answer is sent).
    pub(crate) id: Option<Value>,
    pub(crate) method: String,
    pub(crate) params: Box<RawValue>,
}

#[derive(Deserialize)]
struct Envelope {
    jsonrpc: Option<String>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Value>,
    method: Option<Value>,
    params: Option<Box<RawValue>>,
}

/// An `id` member that is present (even `null`) is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A line that is not a request: the error to answer with, and the id when it could be read.
#[derive(Debug)]
pub(crate) struct Rejected {
    pub(crate) id: Value,
    pub(crate) error: RpcError,
}

fn rejected(id: Value, error: RpcError) -> Box<Rejected> {
    Box::new(Rejected { id, error })
}

/// Parses one line into a request, or the error response to send.
pub(crate) fn parse_request(line: &str) -> Result<Request, Box<Rejected>> {
    // Checked as JSON without building it: `params` must reach the methods as the client's
    // own text (messages are kept byte for byte).
    let value: &RawValue = serde_json::from_str(line).map_err(|e| {
        rejected(
            Value::Null,
            RpcError::new(code::PARSE_ERROR, format!("the line is not JSON: {e}"))
                .with_data(json!({ "column": e.column() })),
        )
    })?;
    let first = value.get().trim_start().as_bytes().first().copied();
    if first != Some(b'{') {
        let is_array = first == Some(b'[');
        let what = if is_array {
            "a batch (JSON array); batches are not supported, send one request per line"
        } else {
            "not a JSON-RPC request object"
        };
        return Err(rejected(
            Value::Null,
            RpcError::new(code::INVALID_REQUEST, format!("the line is {what}")),
        ));
    }
    let envelope: Envelope = serde_json::from_str(value.get()).map_err(|e| {
        rejected(
            Value::Null,
            RpcError::new(code::INVALID_REQUEST, format!("bad request object: {e}")),
        )
    })?;
    let id = envelope.id.clone().unwrap_or(Value::Null);
    let invalid =
        |message: String| rejected(id.clone(), RpcError::new(code::INVALID_REQUEST, message));
    if let Some(id) = &envelope.id
        && !(id.is_string() || id.is_number() || id.is_null())
    {
        return Err(rejected(
            Value::Null,
            RpcError::new(code::INVALID_REQUEST, "`id` must be a string or a number"),
        ));
    }
    if envelope.jsonrpc.as_deref() != Some("2.0") {
        return Err(invalid("`jsonrpc` must be \"2.0\"".into()));
    }
    let method = match envelope.method {
        Some(Value::String(method)) => method,
        Some(_) => return Err(invalid("`method` must be a string".into())),
        None => return Err(invalid("the request has no `method`".into())),
    };
    let params = match envelope.params {
        Some(params) => params,
        None => RawValue::from_string("{}".into()).expect("valid JSON"),
    };
    Ok(Request {
        id: envelope.id,
        method,
        params,
    })
}

/// Decodes a method's params, naming the field path of a mismatch.
pub(crate) fn params<T: DeserializeOwned>(method: &str, raw: &RawValue) -> Result<T, RpcError> {
    // The plain decoder first: `RawValue` members (messages kept byte for byte) only survive
    // serde_json's own deserializer. The path-tracking one runs only to explain a failure.
    if let Ok(params) = serde_json::from_str(raw.get()) {
        return Ok(params);
    }
    let mut deserializer = serde_json::Deserializer::from_str(raw.get());
    serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." { String::new() } else { path };
        RpcError::new(
            code::INVALID_PARAMS,
            format!("bad params for `{method}` at `{path}`: {}", e.inner()),
        )
        .with_data(json!({ "path": path }))
    })
}

/// The response line for a request id.
pub(crate) fn response(id: &Value, result: Result<Value, RpcError>) -> String {
    let body = match result {
        Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
        Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_json() }),
    };
    body.to_string()
}

/// What reading one line produced.
#[derive(Debug, PartialEq)]
pub(crate) enum Line {
    Text(String),
    /// The line was longer than the cap; its bytes were skipped up to the next newline.
    TooLong(usize),
    /// The line was not UTF-8.
    NotUtf8,
    Eof,
}

/// Reads one `\n`-terminated line, keeping at most `max` bytes in memory: a longer line is
/// consumed and reported, never buffered whole.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut total = 0usize;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            if total == 0 {
                return Ok(Line::Eof);
            }
            break;
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..at], Some(at + 1)),
            None => (available, None),
        };
        total += chunk.len();
        if total <= max {
            buf.extend_from_slice(chunk);
        }
        let used = found.unwrap_or(available.len());
        reader.consume(used);
        if found.is_some() {
            break;
        }
    }
    if total > max {
        buf.clear();
        return Ok(Line::TooLong(total));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    match String::from_utf8(std::mem::take(buf)) {
        Ok(text) => Ok(Line::Text(text)),
        Err(_) => Ok(Line::NotUtf8),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn long_lines_are_skipped_without_buffering_and_the_next_line_reads() {
        let input = format!("{}\n{{\"a\":1}}\n", "x".repeat(100));
        let mut reader = tokio::io::BufReader::with_capacity(16, input.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut buf, 50).await.unwrap(),
            Line::TooLong(100)
        );
        assert!(buf.capacity() <= 64, "kept {} bytes", buf.capacity());
        assert_eq!(
            read_line(&mut reader, &mut buf, 50).await.unwrap(),
            Line::Text("{\"a\":1}".into())
        );
        assert_eq!(
            read_line(&mut reader, &mut buf, 50).await.unwrap(),
            Line::Eof
        );
    }

    #[tokio::test]
    async fn an_unterminated_last_line_and_invalid_utf8_are_reported() {
        let mut reader = tokio::io::BufReader::new(&b"\xff\xfe\n{}"[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut reader, &mut buf, 50).await.unwrap(),
            Line::NotUtf8
        );
        assert_eq!(
            read_line(&mut reader, &mut buf, 50).await.unwrap(),
            Line::Text("{}".into())
        );
    }

    #[test]
    fn requests_parse_and_bad_ones_name_the_problem() {
        let request = parse_request(r#"{"jsonrpc":"2.0","id":7,"method":"initialize"}"#).unwrap();
        assert_eq!(request.id, Some(json!(7)));
        assert_eq!(request.params.get(), "{}");
        let notification = parse_request(r#"{"jsonrpc":"2.0","method":"x","params":{}}"#).unwrap();
        assert_eq!(notification.id, None);

        let e = parse_request("{nope").unwrap_err().error;
        assert_eq!(e.code, code::PARSE_ERROR);
        let e = parse_request("[1]").unwrap_err().error;
        assert_eq!(e.code, code::INVALID_REQUEST);
        assert!(e.message.contains("batch"), "{}", e.message);
        let r = parse_request(r#"{"jsonrpc":"1.0","id":"a","method":"m"}"#).unwrap_err();
        assert_eq!((r.id, r.error.code), (json!("a"), code::INVALID_REQUEST));
    }

    #[test]
    fn params_errors_carry_the_field_path() {
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct P {
            messages: Vec<Inner>,
        }
        #[derive(Deserialize, Debug)]
        #[allow(dead_code)]
        struct Inner {
            role: String,
        }
        let raw =
            RawValue::from_string(r#"{"messages":[{"role":"user"},{"role":5}]}"#.into()).unwrap();
        let e = params::<P>("session.commitTurn", &raw).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert_eq!(e.data, Some(json!({ "path": "messages[1].role" })));
    }
}
