//! `ctxhost serve` as a runtime sees it: a child process spoken to over pipes.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::{Budget, Sampler, Samples};

/// The `ctxhost` binary beside this benchmark's own (built with `cargo build -p ctxhost-cli` in the
/// same profile when it is missing).
pub fn sidecar_binary() -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let dir = exe
        .parent()
        .context("the benchmark binary has a directory")?;
    let candidates = [dir.join("ctxhost"), dir.join("../ctxhost")];
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let mut build = Command::new(env!("CARGO"));
    build.args(["build", "-p", "ctxhost-cli", "--bin", "ctxhost"]);
    if !cfg!(debug_assertions) {
        build.arg("--release");
    }
    if !build.status()?.success() {
        bail!("cargo build -p ctxhost-cli failed");
    }
    candidates
        .into_iter()
        .find(|p| p.is_file())
        .context("ctxhost was built but not found beside the benchmark")
}

/// A running sidecar.
pub struct Sidecar {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// Bytes written to the sidecar and read from it.
    pub sent: usize,
    pub received: usize,
}

impl Sidecar {
    pub fn start(binary: &Path, home: &Path) -> Result<Sidecar> {
        Self::start_with(binary, home, &[])
    }

    /// [`Sidecar::start`] with more `serve` arguments.
    pub fn start_with(binary: &Path, home: &Path, args: &[&str]) -> Result<Sidecar> {
        let mut child = Command::new(binary)
            .arg("serve")
            .args(args)
            .env("CTXHOST_HOME", home)
            .env_remove("CTXHOST_CONFIG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("cannot start {}", binary.display()))?;
        Ok(Sidecar {
            stdin: child.stdin.take().context("stdin")?,
            stdout: BufReader::new(child.stdout.take().context("stdout")?),
            child,
            next_id: 0,
            sent: 0,
            received: 0,
        })
    }

    /// One request and its result (requests are sequential here, so the next line answers).
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let (result, sent, received) = exchange(
            &mut self.stdin,
            &mut self.stdout,
            self.next_id,
            method,
            params,
        )?;
        self.sent += sent;
        self.received += received;
        Ok(result)
    }

    /// Closes stdin and waits for the exit.
    pub fn finish(mut self) -> Result<()> {
        drop(self.stdin);
        let status = self.child.wait()?;
        if !status.success() {
            bail!("the sidecar exited with {status}");
        }
        Ok(())
    }
}

/// Sends one request and reads the next line as its answer: the result, and the bytes sent
/// and received.
pub fn exchange(
    write: &mut impl Write,
    read: &mut impl BufRead,
    id: u64,
    method: &str,
    params: Value,
) -> Result<(Value, usize, usize)> {
    let mut line =
        json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string();
    line.push('\n');
    write.write_all(line.as_bytes())?;
    write.flush()?;
    let mut response = String::new();
    read.read_line(&mut response)?;
    let received = response.len();
    let response: Value = serde_json::from_str(&response)
        .with_context(|| format!("{method}: the sidecar answered {response:?}"))?;
    match response.get("result") {
        Some(result) => Ok((result.clone(), line.len(), received)),
        None => bail!("{method} failed: {response}"),
    }
}

/// A home whose config keeps a 2,000-message session uncompacted (the window is 2M tokens).
pub fn bench_home() -> Result<tempfile::TempDir> {
    let home = tempfile::tempdir()?;
    std::fs::write(
        home.path().join("ctxhost.json"),
        r#"{ agents: { defaults: { contextWindow: 2000000 } } }"#,
    )?;
    Ok(home)
}

/// Per fresh sidecar: spawn to the answer of the first `session.bootstrap` (engine loaded from
/// the warm cache, instance created, mirror created), and spawn to the answer of the `assemble`
/// after that session's first `commitTurn` (what a runtime that starts a sidecar per turn pays
/// before its model call).
pub struct FirstCall {
    pub bootstrap: Samples,
    pub first_turn: Samples,
}

/// [`FirstCall`], sampled over fresh sidecars on one home.
pub fn first_call(binary: &Path, budget: Budget) -> Result<FirstCall> {
    let home = bench_home()?;
    // Warm the component cache the way an operator's first run would.
    let mut warm = Sidecar::start(binary, home.path())?;
    warm.call("initialize", json!({}))?;
    warm.finish()?;
    let mut sampler = Sampler::new(budget);
    let mut turns = Sampler::new(budget);
    let mut n = 0;
    while sampler.more() {
        n += 1;
        let key = format!("agent:bench:first-{n}");
        let started = Instant::now();
        let mut sidecar = Sidecar::start(binary, home.path())?;
        sidecar.call("session.bootstrap", json!({ "sessionKey": key }))?;
        sampler.push(started.elapsed());
        let message = json!({ "role": "user", "content": "hi", "timestamp": 1 });
        sidecar.call(
            "session.commitTurn",
            json!({ "sessionKey": key, "advancementKey": "t1", "messages": [message] }),
        )?;
        sidecar.call(
            "session.assemble",
            json!({ "sessionKey": key, "messageCount": 1 }),
        )?;
        turns.push(started.elapsed());
        sidecar.finish()?;
    }
    Ok(FirstCall {
        bootstrap: sampler.done(),
        first_turn: turns.done(),
    })
}

/// What an in-sync `session.assemble` costs over the pipe on a long session.
pub struct AssembleOverPipe {
    pub samples: Samples,
    /// The same assembles in a sidecar run with `--no-ledger`, sampled alternately.
    pub without_ledger: Samples,
    pub messages: usize,
    /// Bytes of one assemble request and of its answer.
    pub request_bytes: usize,
    pub response_bytes: usize,
    /// Bytes sent per turn in steady state (commit of 2 new messages + assemble) at the start
    /// and at the end of the history.
    pub turn_bytes_early: usize,
    pub turn_bytes_late: usize,
    /// `health` round trips at the end (the session's turns all recorded).
    pub health: Samples,
}

/// A sidecar with a `messages`-long session built turn by turn through `commitTurn`.
struct Built {
    _home: tempfile::TempDir,
    sidecar: Sidecar,
    /// Bytes each turn sent.
    turn_bytes: Vec<usize>,
    /// An in-sync assemble of the whole session.
    params: Value,
}

const KEY: &str = "agent:bench:pipe";

fn build(binary: &Path, messages: &[Value], serve_args: &[&str]) -> Result<Built> {
    let home = bench_home()?;
    let mut sidecar = Sidecar::start_with(binary, home.path(), serve_args)?;
    sidecar.call("session.bootstrap", json!({ "sessionKey": KEY }))?;
    let mut turn_bytes = Vec::new();
    for (turn, pair) in messages.chunks(2).enumerate() {
        let before = sidecar.sent;
        sidecar.call(
            "session.commitTurn",
            json!({ "sessionKey": KEY, "advancementKey": format!("t{turn}"),
                    "messages": pair, "lastFingerprint": format!("f{turn}") }),
        )?;
        let count = (turn * 2 + pair.len()).min(messages.len());
        sidecar.call(
            "session.assemble",
            json!({ "sessionKey": KEY, "messageCount": count, "lastFingerprint": format!("f{turn}") }),
        )?;
        turn_bytes.push(sidecar.sent - before);
    }
    let last = format!("f{}", turn_bytes.len() - 1);
    let params =
        json!({ "sessionKey": KEY, "messageCount": messages.len(), "lastFingerprint": last });
    Ok(Built {
        _home: home,
        sidecar,
        turn_bytes,
        params,
    })
}

/// One timed in-sync assemble.
fn timed_assemble(built: &mut Built) -> Result<Duration> {
    let started = Instant::now();
    let result = built
        .sidecar
        .call("session.assemble", built.params.clone())?;
    let took = started.elapsed();
    if result["status"] != "ok" {
        bail!("the benchmark session fell out of sync: {result}");
    }
    Ok(took)
}

/// An in-sync `session.assemble` right after one more message was committed, as every turn
/// makes it: the session is built from `messages` (committed 200 at a time), then each sample
/// commits one more message (untimed) and times the assemble that follows. The session grows by
/// one message per sample (capped at 200 samples).
///
/// `engine`: the bundled `legacy` (`None`), or `(id, component)` installed and made the active
/// engine (the frozen 0.3 guest, sent the whole context on every call, beside it).
pub fn assemble_after_commit(
    binary: &Path,
    messages: &[Value],
    budget: Budget,
    engine: Option<(&str, &Path)>,
) -> Result<Samples> {
    let budget = budget.growing();
    let home = bench_home()?;
    // A window the 20,000-message session (4.9M tokens) fits, so no turn compacts.
    let mut slot = String::new();
    if let Some((id, component)) = engine {
        crate::install(&ctxhost::config::Home::new(home.path()), id, component)?;
        slot = format!("plugins: {{ slots: {{ contextEngine: '{id}' }} }}, ");
    }
    std::fs::write(
        home.path().join("ctxhost.json"),
        format!("{{ {slot}agents: {{ defaults: {{ contextWindow: 20000000 }} }} }}"),
    )?;
    let mut sidecar = Sidecar::start(binary, home.path())?;
    sidecar.call("session.bootstrap", json!({ "sessionKey": KEY }))?;
    let mut synced = Synced::default();
    for batch in messages.chunks(200) {
        synced.commit(&mut sidecar, batch)?;
    }
    synced.assemble(&mut sidecar)?;
    let mut sampler = Sampler::new(budget);
    let mut next = messages.iter().cycle();
    while sampler.more() {
        let message = next.next().context("messages to commit")?.clone();
        synced.commit(&mut sidecar, &[message])?;
        sampler.push(synced.assemble(&mut sidecar)?);
    }
    sidecar.finish()?;
    Ok(sampler.done())
}

/// What a runtime's plugin tracks to stay in sync: messages committed, turns committed.
#[derive(Default)]
struct Synced {
    messages: usize,
    turns: usize,
}

impl Synced {
    fn fingerprint(&self) -> String {
        format!("f{}", self.turns)
    }

    fn commit(&mut self, sidecar: &mut Sidecar, batch: &[Value]) -> Result<()> {
        self.turns += 1;
        sidecar.call(
            "session.commitTurn",
            json!({ "sessionKey": KEY, "advancementKey": format!("t{}", self.turns),
                    "messages": batch, "lastFingerprint": self.fingerprint() }),
        )?;
        self.messages += batch.len();
        Ok(())
    }

    /// One timed in-sync assemble.
    fn assemble(&self, sidecar: &mut Sidecar) -> Result<Duration> {
        let started = Instant::now();
        let result = sidecar.call(
            "session.assemble",
            json!({ "sessionKey": KEY, "messageCount": self.messages,
                    "lastFingerprint": self.fingerprint() }),
        )?;
        let took = started.elapsed();
        if result["status"] != "ok" {
            bail!("the benchmark session fell out of sync: {result}");
        }
        Ok(took)
    }
}

/// Builds a `messages`-long session turn by turn through `commitTurn` (measuring the bytes each
/// turn sends) in two sidecars, one writing the turn ledger and one with `--no-ledger`, then
/// times in-sync assembles alternately in both (so a load that comes and goes weighs on both
/// alike), then `health`.
pub fn assemble_over_pipe(
    binary: &Path,
    messages: &[Value],
    budget: Budget,
) -> Result<AssembleOverPipe> {
    let mut recorded = build(binary, messages, &[])?;
    let mut unrecorded = build(binary, messages, &["--no-ledger"])?;
    let mut sampler = Sampler::new(budget);
    let mut without = Sampler::new(budget);
    let (mut request_bytes, mut response_bytes) = (0, 0);
    while sampler.more() {
        let (sent, received) = (recorded.sidecar.sent, recorded.sidecar.received);
        sampler.push(timed_assemble(&mut recorded)?);
        request_bytes = recorded.sidecar.sent - sent;
        response_bytes = recorded.sidecar.received - received;
        without.push(timed_assemble(&mut unrecorded)?);
    }
    let mut health = Sampler::new(budget);
    while health.more() {
        let started = Instant::now();
        let answer = recorded
            .sidecar
            .call("health", json!({ "sessionKey": KEY }))?;
        health.push(started.elapsed());
        if answer["session"]["known"] != true {
            bail!("health does not know the benchmark session: {answer}");
        }
    }
    unrecorded.sidecar.finish()?;
    let turn_bytes = recorded.turn_bytes;
    recorded.sidecar.finish()?;
    let early = turn_bytes.iter().take(10).sum::<usize>() / turn_bytes.len().clamp(1, 10);
    let late_n = turn_bytes.len().min(10);
    let late = turn_bytes.iter().rev().take(10).sum::<usize>() / late_n.max(1);
    Ok(AssembleOverPipe {
        samples: sampler.done(),
        without_ledger: without.done(),
        messages: messages.len(),
        request_bytes,
        response_bytes,
        turn_bytes_early: early,
        turn_bytes_late: late,
        health: health.done(),
    })
}
