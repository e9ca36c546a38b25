//! JSON-RPC 2.0 over newline-delimited JSON: reading capped lines, parsing requests, and the
//! error codes of the protocol (`docs/serve-protocol.md`).

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use ctxhost::error::{Error, QUOTE_BYTES, excerpt};

/// The longest error message sent; a longer one ends in an excerpt marker.
const MESSAGE_BYTES: usize = 4096;

/// `value` with every string cut to an excerpt.
fn capped(value: Value) -> Value {
    match value {
        Value::String(text) if text.len() > QUOTE_BYTES => {
            Value::String(excerpt(&text, QUOTE_BYTES).into_owned())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(capped).collect()),
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(name, value)| (name, capped(value)))
                .collect(),
        ),
        other => other,
    }
}

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
    /// Boxed: errors travel in every `Result` of the server, and most carry little or no data.
    pub(crate) data: Option<Box<ErrorData>>,
}

/// What an error's `data` carries: the members that apply to it, and no other.
#[derive(Debug, Clone, Default, PartialEq, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(deny_unknown_fields)]
pub(crate) struct ErrorData {
    /// The member of params at fault (`messages[2].role`, `sessionKey`; empty for a member
    /// missing from the top level).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) path: Option<String>,
    /// The method no one answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) method: Option<String>,
    /// The session that is not open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) session_key: Option<String>,
    /// The child session no open session spawned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) child_session_key: Option<String>,
    /// The engine that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) engine: Option<String>,
    /// The engine's function that failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) function: Option<String>,
    /// The tool whose arguments were refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool: Option<String>,
    /// The protocol versions this server speaks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) supported: Option<Vec<u32>>,
    /// Where a line that is not JSON went wrong.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) column: Option<usize>,
    /// The host limit a session could not be served within (`instances`, `descriptors`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) limit: Option<String>,
    /// The bytes of a line that was too long.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) bytes: Option<usize>,
    /// The longest line taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_line_bytes: Option<usize>,
    /// The history the mirror holds, when a `base` is not it.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(crate) mirror: Option<crate::sync::SyncState>,
}

impl ErrorData {
    /// The data of an error about the member of params at `path`.
    pub(crate) fn at(path: impl Into<String>) -> Self {
        Self {
            path: Some(path.into()),
            ..Self::default()
        }
    }
}

impl RpcError {
    pub(crate) fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub(crate) fn with_data(mut self, data: ErrorData) -> Self {
        self.data = Some(Box::new(data));
        self
    }

    pub(crate) fn unknown_session(key: &str) -> Self {
        Self::new(
            code::UNKNOWN_SESSION,
            format!(
                "session `{}` is not open in this server; call session.bootstrap first",
                excerpt(key, QUOTE_BYTES)
            ),
        )
        .with_data(ErrorData {
            session_key: Some(key.to_string()),
            ..ErrorData::default()
        })
    }

    /// The error object sent. What it quotes is capped here, where every error passes, so no
    /// path (a serde message quoting a value, a key in `data`) echoes a huge input back.
    fn into_object(self) -> ErrorObject {
        ErrorObject {
            code: self.code,
            message: excerpt(&self.message, MESSAGE_BYTES).into_owned(),
            data: (self.data.as_ref())
                .map(|data| capped(serde_json::to_value(data).expect("error data serializes"))),
        }
    }
}

/// The error of a response that failed.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ErrorObject {
    /// What kind of error (docs/serve-protocol.md, "Errors").
    code: i64,
    /// The problem and where it is, for a person.
    message: String,
    /// The details that apply.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<ErrorData>")]
    data: Option<Value>,
}

impl From<Error> for RpcError {
    fn from(error: Error) -> Self {
        use ctxhost::runtime::EngineError;
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
            ErrorData {
                engine: Some(engine),
                function: Some(function),
                ..ErrorData::default()
            }
        };
        let message = ctxhost::error::chain(&error);
        match &error {
            Error::Engine(e) => {
                RpcError::new(code::ENGINE_FAULT, message).with_data(engine_fault(e))
            }
            Error::Ingest { source, .. } => {
                RpcError::new(code::ENGINE_FAULT, message).with_data(engine_fault(source))
            }
            Error::CompactionFailed { engine, .. } => RpcError::new(code::ENGINE_FAULT, message)
                .with_data(ErrorData {
                    engine: Some(engine.clone()),
                    function: Some("compact".into()),
                    ..ErrorData::default()
                }),
            Error::Transcript(_) | Error::Io { .. } => RpcError::new(code::TRANSCRIPT, message),
            Error::Config(_) | Error::Plugin(_) | Error::Runtime(_) => {
                RpcError::new(code::ENGINE_UNAVAILABLE, message)
            }
            Error::Overflow(_) => RpcError::new(code::OVERFLOW, message),
            Error::InvalidMessage { index, .. } => RpcError::new(code::INVALID_PARAMS, message)
                .with_data(ErrorData::at(format!("messages[{index}]"))),
            Error::SyncFrom { .. } => {
                RpcError::new(code::INVALID_PARAMS, message).with_data(ErrorData::at("from"))
            }
            Error::SessionKey { .. } => {
                RpcError::new(code::INVALID_PARAMS, message).with_data(ErrorData::at("sessionKey"))
            }
            Error::UnknownRollback { .. } => RpcError::new(code::INVALID_PARAMS, message)
                .with_data(ErrorData::at("rollbackHandle")),
            Error::ToolCall { tool, .. } => {
                RpcError::new(code::INVALID_PARAMS, message).with_data(ErrorData {
                    tool: Some(tool.clone()),
                    ..ErrorData::at("arguments")
                })
            }
            Error::Recall(_) => RpcError::new(code::TRANSCRIPT, message),
            // Not UNKNOWN_SESSION: a client would bootstrap again and be refused again.
            Error::SessionInUse { key, .. } => {
                RpcError::new(code::HOST_ERROR, message).with_data(ErrorData {
                    session_key: Some(key.clone()),
                    ..ErrorData::default()
                })
            }
        }
    }
}

/// A request id exactly as the client wrote it: echoed byte for byte, because a big or
/// negative integer read into a number would come back as a float the client cannot match.
pub(crate) type Id = Box<RawValue>;

/// The id of an answer to a line whose own id could not be read.
pub(crate) fn null_id() -> Id {
    RawValue::NULL.to_owned()
}

/// One parsed request. `params` stays raw until the method knows its type.
#[derive(Debug)]
pub(crate) struct Request {
    /// None for a notification (no answer is sent).
    pub(crate) id: Option<Id>,
    pub(crate) method: String,
    pub(crate) params: Box<RawValue>,
}

/// Every member raw, so a wrong-typed one is reported by name with the request's id instead
/// of failing the whole object (and losing the id).
#[derive(Deserialize)]
struct Envelope {
    #[serde(default, deserialize_with = "present")]
    jsonrpc: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    id: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    method: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    params: Option<Box<RawValue>>,
}

/// A member that is present (even `null`) is `Some`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// The first byte of a raw JSON value says its type.
fn first_byte(raw: &RawValue) -> u8 {
    raw.get().as_bytes().first().copied().unwrap_or(b' ')
}

/// A line that is not a request: the error to answer with, and the id when it could be read.
#[derive(Debug)]
pub(crate) struct Rejected {
    pub(crate) id: Id,
    pub(crate) error: RpcError,
}

fn rejected(id: Id, error: RpcError) -> Box<Rejected> {
    Box::new(Rejected { id, error })
}

/// Parses one line into a request, or the error response to send.
pub(crate) fn parse_request(line: &str) -> Result<Request, Box<Rejected>> {
    let envelope = envelope(line)?;
    let id = envelope.id.clone().unwrap_or_else(null_id);
    let invalid = |kind: i64, message: &str| rejected(id.clone(), RpcError::new(kind, message));
    let version = envelope.jsonrpc.as_ref();
    if version.and_then(|v| serde_json::from_str::<String>(v.get()).ok()) != Some("2.0".into()) {
        return Err(invalid(code::INVALID_REQUEST, "`jsonrpc` must be \"2.0\""));
    }
    let method = (envelope.method.as_ref())
        .ok_or_else(|| invalid(code::INVALID_REQUEST, "the request has no `method`"))?;
    let method = serde_json::from_str::<String>(method.get())
        .map_err(|_| invalid(code::INVALID_REQUEST, "`method` must be a string"))?;
    let params = request_params(envelope.params).map_err(|(kind, why)| invalid(kind, why))?;
    Ok(Request {
        id: envelope.id,
        method,
        params,
    })
}

/// A line's request object with its members raw and its `id` checked; what is not one is
/// refused with a null id.
fn envelope(line: &str) -> Result<Envelope, Box<Rejected>> {
    let refused = |kind: i64, message: String| rejected(null_id(), RpcError::new(kind, message));
    // Checked as JSON without building it: `params` must reach the methods as the client's
    // own text (messages are kept byte for byte).
    let value: &RawValue = serde_json::from_str(line).map_err(not_json)?;
    let first = value.get().trim_start().as_bytes().first().copied();
    if first != Some(b'{') {
        let what = match first == Some(b'[') {
            true => "a batch (JSON array); batches are not supported, send one request per line",
            false => "not a JSON-RPC request object",
        };
        return Err(refused(
            code::INVALID_REQUEST,
            format!("the line is {what}"),
        ));
    }
    let envelope: Envelope = serde_json::from_str(value.get())
        .map_err(|e| refused(code::INVALID_REQUEST, format!("bad request object: {e}")))?;
    if let Some(id) = &envelope.id
        && !matches!(first_byte(id), b'"' | b'-' | b'0'..=b'9' | b'n')
    {
        let message = "`id` must be a string or a number".to_string();
        return Err(refused(code::INVALID_REQUEST, message));
    }
    Ok(envelope)
}

/// The refusal of a line that is not JSON, with the column where it stops being so.
fn not_json(error: serde_json::Error) -> Box<Rejected> {
    let message = format!("the line is not JSON: {error}");
    let error = RpcError::new(code::PARSE_ERROR, message).with_data(ErrorData {
        column: Some(error.column()),
        ..ErrorData::default()
    });
    rejected(null_id(), error)
}

/// A request's `params`: an object, or `{}` when left out; else the code and why not.
fn request_params(params: Option<Box<RawValue>>) -> Result<Box<RawValue>, (i64, &'static str)> {
    match params {
        Some(params) if first_byte(&params) == b'{' => Ok(params),
        Some(params) if first_byte(&params) == b'[' => Err((
            code::INVALID_PARAMS,
            "positional `params` (an array) are not supported; pass an object of named members",
        )),
        Some(_) => Err((
            code::INVALID_REQUEST,
            "`params` must be an object (or left out)",
        )),
        None => Ok(RawValue::from_string("{}".into()).expect("valid JSON")),
    }
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
        let (path, at) = match path.as_str() {
            "." => (String::new(), String::new()),
            _ => (path.clone(), format!(" at `{path}`")),
        };
        RpcError::new(
            code::INVALID_PARAMS,
            format!("bad params for `{method}`{at}: {}", e.inner()),
        )
        .with_data(ErrorData::at(path))
    })
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<ErrorObject>,
}

/// The response line for a request id.
pub(crate) fn response(id: &RawValue, result: Result<Value, RpcError>) -> String {
    let (result, error) = match result {
        Ok(result) => (Some(result), None),
        Err(error) => (None, Some(error.into_object())),
    };
    let body = Response {
        jsonrpc: "2.0",
        id,
        result,
        error,
    };
    serde_json::to_string(&body).expect("a response serializes")
}

/// A message of the server's own: no id, and no answer wanted.
#[derive(Serialize)]
struct Notification<'a> {
    jsonrpc: &'static str,
    method: &'a str,
    params: Value,
}

/// The line of a notification.
pub(crate) fn notification(method: &str, params: Value) -> String {
    let body = Notification {
        jsonrpc: "2.0",
        method,
        params,
    };
    serde_json::to_string(&body).expect("a notification serializes")
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
    use serde_json::json;

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
        assert_eq!(request.id.unwrap().get(), "7");
        assert_eq!(request.params.get(), "{}");
        let notification = parse_request(r#"{"jsonrpc":"2.0","method":"x","params":{}}"#).unwrap();
        assert!(notification.id.is_none());

        let e = parse_request("{nope").unwrap_err().error;
        assert_eq!(e.code, code::PARSE_ERROR);
        let e = parse_request("[1]").unwrap_err().error;
        assert_eq!(e.code, code::INVALID_REQUEST);
        assert!(e.message.contains("batch"), "{}", e.message);
        let r = parse_request(r#"{"jsonrpc":"1.0","id":"a","method":"m"}"#).unwrap_err();
        assert_eq!((r.id.get(), r.error.code), ("\"a\"", code::INVALID_REQUEST));
    }

    /// The id a rejected line is answered with, as written.
    fn rejected_id(line: &str) -> String {
        parse_request(line).unwrap_err().id.get().to_string()
    }

    #[test]
    fn ids_come_back_exactly_as_sent_even_when_the_request_is_refused() {
        for id in [
            "18446744073709551616000",
            "-9223372036854775809",
            "-12",
            "1.50",
            "\"a\\u0062\"",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"m"}}"#);
            let request = parse_request(&line).unwrap();
            let answer = response(request.id.as_deref().unwrap(), Ok(json!({})));
            assert!(answer.contains(&format!(r#""id":{id},"#)), "{answer}");
            // A wrong-typed `jsonrpc` (or `method`) must not lose the id either.
            let wrong = format!(r#"{{"jsonrpc":2,"id":{id},"method":"m"}}"#);
            assert_eq!(rejected_id(&wrong), id);
            let wrong = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":7}}"#);
            assert_eq!(rejected_id(&wrong), id);
        }
        let e = parse_request(r#"{"jsonrpc":"2.0","id":[1],"method":"m"}"#).unwrap_err();
        assert_eq!((e.id.get(), e.error.code), ("null", code::INVALID_REQUEST));
    }

    #[test]
    fn params_must_be_named() {
        let e =
            parse_request(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":["s"]}"#).unwrap_err();
        assert_eq!(e.error.code, code::INVALID_PARAMS);
        assert!(
            e.error.message.contains("positional"),
            "{}",
            e.error.message
        );
        for params in ["3", "\"s\"", "null", "true"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#);
            let e = parse_request(&line).unwrap_err();
            assert_eq!(e.error.code, code::INVALID_REQUEST, "{params}");
        }
    }

    #[test]
    fn an_error_never_quotes_a_huge_input_back() {
        let huge = "k".repeat(10 << 20);
        let answers = [
            RpcError::unknown_session(&huge),
            RpcError::new(code::INVALID_PARAMS, format!("bad `{huge}`")).with_data(ErrorData {
                method: Some(huge.clone()),
                mirror: Some(crate::sync::SyncState {
                    message_count: 0,
                    last_fingerprint: Some(huge.clone()),
                    chain: None,
                }),
                ..ErrorData::at(&huge)
            }),
        ];
        for error in answers {
            let line = response(RawValue::NULL, Err(error));
            assert!(line.len() < 8 * 1024, "{} bytes", line.len());
            assert!(line.contains("(10485760 bytes)"), "{}", &line[..200]);
        }
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
        assert_eq!(e.data.as_deref(), Some(&ErrorData::at("messages[1].role")));
    }
}
