//! Many sessions in one `ctxhost serve` on its unix socket, as a gateway runs it: what idle
//! sessions cost (memory, descriptors) at a normal descriptor limit, and what
//! `session.assemble` costs when many clients call at once.

use std::io::BufReader;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::Samples;
use crate::serve::{bench_home, exchange};

/// How the run is shaped.
#[derive(Debug, Clone, Copy)]
pub struct ScaleRun {
    pub sessions: usize,
    /// Clients opening the sessions, each its share in turn.
    pub opening_clients: usize,
    /// Clients calling `session.assemble` at once, each on its own share of the sessions.
    pub assembling_clients: usize,
    /// Assembles each of them makes (timed one by one, round trip).
    pub assembles_per_client: usize,
    /// In the paced phase, each client starts an assemble this often (an agent's turn is
    /// seconds apart; this is ten a second a client).
    pub pace: Duration,
    /// The server's descriptor limit (`ulimit -n`, soft and hard).
    pub descriptor_limit: u64,
}

impl Default for ScaleRun {
    fn default() -> Self {
        Self {
            sessions: 10_000,
            opening_clients: 8,
            assembling_clients: 100,
            assembles_per_client: 100,
            pace: Duration::from_millis(100),
            descriptor_limit: 1024,
        }
    }
}

/// What one run measured.
#[derive(Debug)]
pub struct Scale {
    pub run: ScaleRun,
    /// Opening every session (bootstrap, a two-message `commitTurn`, an assemble each).
    pub opened_in: Duration,
    /// The server's resident memory after `initialize`, and with every session open and idle.
    pub rss_empty: u64,
    pub rss_open: u64,
    /// Descriptors the server holds with every session open and idle.
    pub descriptors: usize,
    /// `health.sessions` at the end: `open`, `resident`, `residentLimit`, `evictions`.
    pub health: Value,
    /// Round trips of `session.assemble` under `assembling_clients` concurrent clients, each
    /// starting one every `pace`.
    pub assemble: Samples,
    /// The same clients sending the next as soon as the last is answered (the server saturated).
    pub assemble_saturated: Samples,
    /// How long the saturated phase took.
    pub saturated_in: Duration,
    /// The same assembles, one client alone (what the server's work is without queueing).
    pub assemble_alone: Samples,
}

/// One client on the server's socket.
struct Client {
    write: UnixStream,
    read: BufReader<UnixStream>,
    next_id: u64,
}

impl Client {
    fn connect(socket: &Path) -> Result<Client> {
        let write = UnixStream::connect(socket)
            .with_context(|| format!("cannot connect to {}", socket.display()))?;
        let read = BufReader::new(write.try_clone()?);
        Ok(Client {
            write,
            read,
            next_id: 0,
        })
    }

    fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.next_id += 1;
        let (result, ..) = exchange(
            &mut self.write,
            &mut self.read,
            self.next_id,
            method,
            params,
        )?;
        Ok(result)
    }

    /// An in-sync assemble of a session opened by [`open_session`], timed.
    fn assemble(&mut self, session: usize) -> Result<Duration> {
        let started = Instant::now();
        let answer = self.call("session.assemble", assemble_params(session))?;
        let took = started.elapsed();
        if answer["status"] != "ok" {
            bail!("session {session} answered {answer}");
        }
        Ok(took)
    }
}

fn key(session: usize) -> String {
    format!("agent:scale:s{session}")
}

fn assemble_params(session: usize) -> Value {
    json!({ "sessionKey": key(session), "messageCount": 2, "lastFingerprint": "f1" })
}

/// Bootstrap, one turn of two messages committed, and the turn's assemble.
fn open_session(client: &mut Client, session: usize) -> Result<()> {
    let key = key(session);
    client.call("session.bootstrap", json!({ "sessionKey": key }))?;
    let messages = [
        json!({ "role": "user", "content": format!("question {session}"), "timestamp": 1 }),
        json!({ "role": "assistant", "content": [{ "type": "text", "text": "answer" }],
                "timestamp": 2, "stopReason": "stop" }),
    ];
    client.call(
        "session.commitTurn",
        json!({ "sessionKey": key, "advancementKey": "t1", "messages": messages,
                "lastFingerprint": "f1" }),
    )?;
    client.assemble(session)?;
    Ok(())
}

/// `status` of `pid` in kB, the field `name`.
fn status_field(pid: u32, name: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let line = (status.lines())
        .find(|l| l.starts_with(name))
        .with_context(|| format!("no {name} in /proc/{pid}/status"))?;
    let kib: u64 = (line.split_whitespace().nth(1))
        .context("a number")?
        .parse()?;
    Ok(kib * 1024)
}

fn descriptors(pid: u32) -> Result<usize> {
    Ok(std::fs::read_dir(format!("/proc/{pid}/fd"))?.count())
}

/// A pseudo-random sequence (the same every run) for picking sessions.
fn picks(seed: u64) -> impl Iterator<Item = u64> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    std::iter::repeat_with(move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    })
}

/// Runs `work(client number)` on `clients` threads started together; their results in order.
fn on_clients<T: Send + 'static>(
    clients: usize,
    work: impl Fn(usize) -> Result<T> + Send + Sync + 'static,
) -> Result<Vec<T>> {
    let work = Arc::new(work);
    let start = Arc::new(Barrier::new(clients));
    let threads: Vec<_> = (0..clients)
        .map(|n| {
            let (work, start) = (work.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                work(n)
            })
        })
        .collect();
    threads
        .into_iter()
        .map(|t| t.join().map_err(|_| anyhow::anyhow!("a client panicked"))?)
        .collect()
}

/// Starts `binary serve --socket` under the descriptor limit, opens the sessions, measures the
/// idle server, then times assembles under many clients and one alone, and shuts it down.
pub fn scale(binary: &Path, run: ScaleRun) -> Result<Scale> {
    let home = bench_home()?;
    let socket = home.path().join("serve.sock");
    let mut server = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -n {}; exec \"$0\" serve --socket \"$1\"",
            run.descriptor_limit
        ))
        .arg(binary)
        .arg(&socket)
        .env("CTXHOST_HOME", home.path())
        .env_remove("CTXHOST_CONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("cannot start {}", binary.display()))?;
    let result = measure(&mut server, &socket, run);
    if result.is_err() {
        let _ = server.kill();
    }
    let _ = server.wait();
    result
}

fn measure(server: &mut Child, socket: &Path, run: ScaleRun) -> Result<Scale> {
    let started = Instant::now();
    while !socket.exists() {
        if started.elapsed() > Duration::from_secs(60) || server.try_wait()?.is_some() {
            bail!("the server never listened on {}", socket.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let pid = server.id();
    Client::connect(socket)?.call("initialize", json!({}))?;
    let rss_empty = status_field(pid, "VmRSS:")?;

    let started = Instant::now();
    let socket_path = socket.to_path_buf();
    on_clients(run.opening_clients, move |n| {
        let mut client = Client::connect(&socket_path)?;
        for session in (n..run.sessions).step_by(run.opening_clients) {
            open_session(&mut client, session)?;
        }
        Ok(())
    })?;
    let opened_in = started.elapsed();
    std::thread::sleep(Duration::from_millis(500));
    let rss_open = status_field(pid, "VmRSS:")?;
    let descriptors = descriptors(pid)?;

    let assemble = assemble_phase(socket, run, Some(run.pace))?;
    let started = Instant::now();
    let assemble_saturated = assemble_phase(socket, run, None)?;
    let saturated_in = started.elapsed();

    let mut alone = Client::connect(socket)?;
    let mut took = Vec::new();
    for pick in picks(0).take(run.assembles_per_client * 10) {
        took.push(alone.assemble(pick as usize % run.sessions)?);
    }
    let health = alone.call("health", json!({}))?["sessions"].clone();
    alone.call("shutdown", json!({}))?;
    Ok(Scale {
        run,
        opened_in,
        rss_empty,
        rss_open,
        descriptors,
        health,
        assemble,
        assemble_saturated,
        saturated_in,
        assemble_alone: Samples(took),
    })
}

/// Every client assembles random sessions of its own share (client `n` has sessions `n`,
/// `n + clients`, ...), one every `pace` (staggered across clients), or back to back.
fn assemble_phase(socket: &Path, run: ScaleRun, pace: Option<Duration>) -> Result<Samples> {
    let socket = socket.to_path_buf();
    let clients = run.assembling_clients;
    let per_client = run.sessions / clients;
    let timed = on_clients(clients, move |n| {
        let mut client = Client::connect(&socket)?;
        let mut took = Vec::with_capacity(run.assembles_per_client);
        let start = Instant::now() + pace.map_or(Duration::ZERO, |p| p * n as u32 / clients as u32);
        let sessions = picks(n as u64 + 1).take(run.assembles_per_client);
        for (i, pick) in sessions.enumerate() {
            if let Some(pace) = pace {
                let due = start + pace * i as u32;
                std::thread::sleep(due.saturating_duration_since(Instant::now()));
            }
            took.push(client.assemble(n + clients * (pick as usize % per_client))?);
        }
        Ok(took)
    })?;
    Ok(Samples(timed.into_iter().flatten().collect()))
}
