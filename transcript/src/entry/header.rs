//! The session header: the first line of a transcript, its version, id and working
//! directory.

use super::*;

/// The session header (first line).
#[derive(Debug, Clone)]
pub struct Header {
    raw: String,
    id: String,
    version: u32,
    cwd: Option<String>,
    timestamp: Option<String>,
}

impl Header {
    pub(crate) fn parse(line: &str) -> Result<Header, String> {
        let value: Value = serde_json::from_str(line)
            .map_err(|e| format!("first line is not a session header (invalid JSON: {e})"))?;
        if value.get("type").and_then(Value::as_str) != Some("session") {
            return Err("first line is not a session header (no \"type\":\"session\")".into());
        }
        let id = match value.get("id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err("session header has no \"id\"".into()),
        };
        let version = version_of(&value)?;
        let text = |k: &str| value.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(Header {
            raw: line.to_string(),
            id,
            version,
            cwd: text("cwd"),
            timestamp: text("timestamp"),
        })
    }

    pub(crate) fn new_v3(session_id: &str, cwd: &str, timestamp_iso: &str) -> Header {
        let raw = serde_json::json!({
            "type": "session", "version": 3, "id": session_id,
            "timestamp": timestamp_iso, "cwd": cwd,
        })
        .to_string();
        Header {
            raw,
            id: session_id.to_string(),
            version: 3,
            cwd: Some(cwd.to_string()),
            timestamp: Some(timestamp_iso.to_string()),
        }
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// The version the file was written in (1 when absent); entries are v3 in memory regardless.
    pub fn version(&self) -> u32 {
        self.version
    }

    pub fn cwd(&self) -> Option<&str> {
        self.cwd.as_deref()
    }

    pub fn timestamp(&self) -> Option<&str> {
        self.timestamp.as_deref()
    }

    /// The header line as read.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The header line as written in a v3 file.
    pub fn v3_line(&self) -> Cow<'_, str> {
        if self.version == 3 {
            Cow::Borrowed(&self.raw)
        } else {
            Cow::Owned(crate::migrate::header_v3(&self.raw))
        }
    }
}

/// The header's `version`: 1 when absent (v1 files have none), else 1 to 3.
fn version_of(header: &Value) -> Result<u32, String> {
    match header.get("version") {
        None | Some(Value::Null) => Ok(1),
        Some(v) => match v.as_u64() {
            Some(n @ 1..=3) => Ok(n as u32),
            _ => Err(format!("unsupported transcript version {v}")),
        },
    }
}
