//! `ctxhost serve` as a child process: requests written to its stdin, responses read from its
//! stdout and checked against `docs/serve-protocol.schema.json`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

/// A running `ctxhost serve` and the lines it writes.
pub(crate) struct Server {
    pub(crate) child: Child,
    pub(crate) stdin: Option<ChildStdin>,
    pub(crate) lines: mpsc::Receiver<String>,
    /// Responses read while waiting for another id.
    pub(crate) pending: HashMap<String, Value>,
    pub(crate) next_id: u64,
}

impl Server {
    pub(crate) fn start(home: &Path, args: &[&str]) -> Server {
        let mut command = super::command(home);
        command.arg("serve").args(args);
        Self::start_command(command)
    }

    /// Starts `command`, which runs `ctxhost serve` (perhaps through a shell that sets a limit
    /// first).
    pub(crate) fn start_command(mut command: std::process::Command) -> Server {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start ctxhost serve");
        let stdout = child.stdout.take().expect("piped");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Server {
            stdin: child.stdin.take(),
            child,
            lines,
            pending: HashMap::new(),
            next_id: 0,
        }
    }

    /// `ctxhost serve` in a shell that sets `limits` first (e.g. `ulimit -n 96`), once the
    /// engine's compiled form is cached (so the limits are for the sessions, not the compile).
    pub(crate) fn start_limited(home: &Path, limits: &str) -> Server {
        Self::start_limited_with(home, limits, &[])
    }

    /// [`Server::start_limited`] with arguments after `serve`.
    pub(crate) fn start_limited_with(home: &Path, limits: &str, args: &[&str]) -> Server {
        let mut warm = Server::start(home, &[]);
        warm.call("initialize", json!({}));
        warm.finish();
        let command = super::command(home);
        let program = command.get_program().to_owned();
        let mut shell = std::process::Command::new("sh");
        shell
            .arg("-c")
            .arg(format!("{limits}; exec \"$0\" serve \"$@\""))
            .arg(program)
            .args(args)
            .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .env_remove("CTXHOST_CONFIG");
        Self::start_command(shell)
    }

    pub(crate) fn write_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write request");
        stdin.write_all(b"\n").expect("write newline");
        stdin.flush().expect("flush");
    }

    /// Sends a request without waiting; returns its id.
    pub(crate) fn send(&mut self, method: &str, params: Value) -> String {
        self.next_id += 1;
        let id = format!("r{}", self.next_id);
        let request = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        self.write_line(&request.to_string());
        id
    }

    pub(crate) fn next_line(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(Duration::from_secs(60))
            .expect("a response line within 60 s");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {line}"))
    }

    /// The response to request `id` (others read meanwhile are kept).
    pub(crate) fn response(&mut self, id: &str) -> Value {
        if let Some(response) = self.pending.remove(id) {
            return response;
        }
        loop {
            let response = self.next_line();
            assert_eq!(response["jsonrpc"], "2.0", "{response}");
            let got = response["id"].as_str().unwrap_or_default().to_string();
            if got == id {
                return response;
            }
            self.pending.insert(got, response);
        }
    }

    /// A request's result; panics on an error response.
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let response = self.response(&id);
        let result = response
            .get("result")
            .unwrap_or_else(|| panic!("{method} failed: {response}"))
            .clone();
        check_schema(method, "result", &result);
        result
    }

    /// A request's error object; panics on success.
    pub(crate) fn error(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        let response = self.response(&id);
        response
            .get("error")
            .unwrap_or_else(|| panic!("{method} succeeded: {response}"))
            .clone()
    }

    /// Closes stdin and waits for a clean exit.
    pub(crate) fn finish(mut self) {
        drop(self.stdin.take());
        let status = wait_with_timeout(&mut self.child, Duration::from_secs(30));
        assert!(status.success(), "serve exited with {status}");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub(crate) fn wait_with_timeout(child: &mut Child, timeout: Duration) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        assert!(
            start.elapsed() < timeout,
            "serve did not exit within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub(crate) fn schema() -> &'static Value {
    static SCHEMA: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    SCHEMA.get_or_init(|| {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/serve-protocol.schema.json");
        serde_json::from_str(&std::fs::read_to_string(path).expect("schema file"))
            .expect("schema JSON")
    })
}

/// The written protocol is the one served: every result matches its schema.
pub(crate) fn check_schema(method: &str, part: &str, value: &Value) {
    let schema = schema();
    let mut sub = schema["methods"][method][part].clone();
    assert!(!sub.is_null(), "the schema has no {part} for {method}");
    sub["$defs"] = schema["$defs"].clone();
    let validator = jsonschema::validator_for(&sub).expect("valid schema");
    if let Err(error) = validator.validate(value) {
        panic!("{method} {part} does not match the schema: {error}\n{value}");
    }
}

pub(crate) fn user(text: &str) -> Value {
    json!({ "role": "user", "content": text, "timestamp": 1_700_000_000_000u64 })
}

pub(crate) fn assistant(text: &str) -> Value {
    json!({
        "role": "assistant",
        "content": [{ "type": "text", "text": text }],
        "api": "openai-completions", "provider": "fake", "model": "fake-model",
        "usage": { "input": 10, "output": 5, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 15,
                   "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 } },
        "stopReason": "stop", "timestamp": 1_700_000_000_001u64
    })
}

/// The client positions an assembly keeps, ranges expanded.
pub(crate) fn kept_positions(items: &[Value]) -> Vec<u64> {
    items
        .iter()
        .filter(|item| item.get("message").is_none())
        .flat_map(|item| {
            match (
                item["index"].as_u64(),
                item["from"].as_u64(),
                item["to"].as_u64(),
            ) {
                (Some(index), _, _) => index..=index,
                (None, Some(from), Some(to)) => from..=to,
                _ => panic!("neither a kept item nor a message: {item}"),
            }
        })
        .collect()
}

pub(crate) fn mirror_file(result: &Value) -> PathBuf {
    PathBuf::from(result["mirror"].as_str().expect("mirror path"))
}

/// The entries of a mirror file (after its header).
pub(crate) fn entries(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("mirror file")
        .lines()
        .skip(1)
        .map(|l| serde_json::from_str(l).expect("entry JSON"))
        .collect()
}

pub(crate) fn markers(path: &Path) -> Vec<Value> {
    entries(path)
        .into_iter()
        .filter(|e| e["customType"] == "ctxhost.mirror")
        .collect()
}
