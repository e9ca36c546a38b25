//! Set-up the binary's tests share: `ctxhost` run as an operator runs it, in a scratch home.

// The test model endpoint the host's own model-client tests use too.
#[path = "../../../host/tests/common/http.rs"]
pub(crate) mod http;
pub(crate) mod serve;

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// `ctxhost` over `home`: no config from the caller's environment, stdin closed. Callers add
/// their own flags, directory and variables.
pub(crate) fn command(home: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_ctxhost"));
    command
        .env("CTXHOST_HOME", home)
        .env_remove("CTXHOST_CONFIG")
        .stdin(Stdio::null());
    command
}

/// Runs `ctxhost args…` over `home` to completion.
pub(crate) fn ctxhost(home: &Path, args: &[&str]) -> Output {
    command(home).args(args).output().expect("run ctxhost")
}

/// Stdout of a run that must have succeeded, as JSON.
pub(crate) fn json_of(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "ctxhost failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("stdout is JSON")
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes a generated coding session (`seed`, `messages` messages) at `path` and returns the
/// path.
pub(crate) fn generated_session(
    path: std::path::PathBuf,
    seed: u64,
    messages: usize,
) -> std::path::PathBuf {
    std::fs::write(
        &path,
        ctxhost_transcript::generate::coding_session(seed, messages),
    )
    .expect("write the generated session");
    path
}

/// A command's `--json` output matches its documented schema (`docs/cli-json/<command>`).
pub(crate) fn check_cli_schema(command: &str, value: &Value) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(format!("../docs/cli-json/{command}.schema.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).expect("schema JSON");
    let validator = jsonschema::validator_for(&schema).expect("a valid schema");
    if let Err(error) = validator.validate(value) {
        panic!("`{command} --json` does not match its schema: {error}\n{value}");
    }
}
