//! The hostile-guest suite: a deliberately hostile engine (`tests/guests/hostile`, the session
//! key picks the attack) against the sandbox.
//!
//! Every attack asserts the exact error, and that
//! - a well-behaved session on another instance of the same engine, driven concurrently on its
//!   own tokio task, completed its work normally (and saw only its own messages),
//! - the host still serves (a new session works afterwards, and the attacked session's next
//!   call gets a fresh instance),
//! - the attacked session's transcript file is byte-identical after the failing call.
//!
//! Each attack prints how long the host took to stop it (`eprintln!`, shown with
//! `--nocapture`); the deadline tests print the overshoot past the deadline.

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use ctxhost::runtime::{EngineError, FaultKind, Function};
use ctxhost::{
    AssembleOptions, AssembledItem, CompactOptions, Error, Host, Session, SessionTarget,
};
use ctxhost_tests::{HOSTILE_WASM, Scratch, block_on, open_session};
use serde_json::{Value, json};

const CALL_TIMEOUT: Duration = Duration::from_millis(300);
const LONG_CALL_TIMEOUT: Duration = Duration::from_millis(600);
const MEMORY_MIB: usize = 64;
const LOG_BYTES_PER_CALL: usize = 16 << 10;
const HOST_BYTES_PER_CALL: usize = 1 << 20;
/// Marks the files planted outside the state dir (the guest's `SECRET_MARKER`).
const SECRET_MARKER: &str = "CTXHOST-OUTSIDE-SECRET";
const FAKE_KEY_VAR: &str = "CTXHOST_TEST_FAKE_API_KEY";
const FAKE_KEY: &str = "sk-test-123";

const SLOW_IMPORTS_PER_CALL: u32 = 4;
const STATE_DIR_QUOTA_MIB: u64 = 16;

fn config(faults_before_circuit_opens: u32) -> String {
    config_with(faults_before_circuit_opens, "", "{}")
}

/// The suite's config with more `limits` keys (`extra`, a JSON5 fragment, which may replace
/// the suite's `slowImportsPerCall`, `stateDirQuotaMiB` and deadlines) and an engine config.
fn config_with(faults_before_circuit_opens: u32, extra: &str, engine_config: &str) -> String {
    // The suite's own values of these keys, unless `extra` sets them.
    let defaults: String = [
        ("slowImportsPerCall", u64::from(SLOW_IMPORTS_PER_CALL)),
        ("stateDirQuotaMiB", STATE_DIR_QUOTA_MIB),
        ("longCallTimeoutMs", LONG_CALL_TIMEOUT.as_millis() as u64),
        ("callTimeoutMs", CALL_TIMEOUT.as_millis() as u64),
    ]
    .iter()
    .filter(|(key, _)| !extra.contains(&format!("{key}:")))
    .map(|(key, value)| format!("{key}: {value},"))
    .collect();
    format!(
        "{{ plugins: {{ slots: {{ contextEngine: 'hostile' }}, entries: {{ hostile: {{ config: {engine_config}, limits: {{
            {extra}
            {defaults}
            memoryMiB: {MEMORY_MIB},
            logBytesPerCall: {LOG_BYTES_PER_CALL},
            hostBytesPerCall: {HOST_BYTES_PER_CALL},
            faultsBeforeCircuitOpens: {faults_before_circuit_opens},
        }} }} }} }} }}"
    )
}

/// A home with the hostile engine installed, and a host over it.
struct Rig {
    scratch: Scratch,
    host: Arc<Host>,
}

impl Rig {
    fn new() -> Self {
        Self::with_breaker(1000)
    }

    fn with_breaker(faults_before_circuit_opens: u32) -> Self {
        Self::with_config(&config(faults_before_circuit_opens))
    }

    fn with_config(config: &str) -> Self {
        capture_guest_logs();
        let scratch = Scratch::new();
        scratch.install("hostile", Path::new(HOSTILE_WASM));
        let host = Arc::new(scratch.host(config));
        Self { scratch, host }
    }

    fn state_dir(&self) -> PathBuf {
        self.scratch.home().state_dir("hostile")
    }

    async fn open(&self, key: &str) -> Result<Session, Error> {
        self.host
            .open_session(
                &SessionTarget::Key(key.into()),
                &ctxhost::SessionOptions::default(),
            )
            .await
    }

    /// Files outside the state dir, each holding the secret marker; returns their paths.
    fn plant_secrets(&self) -> Vec<PathBuf> {
        let home = self.scratch.home();
        let paths = vec![
            home.root().join("state").join("secret.txt"),
            home.root().join("secret.txt"),
            self.scratch.path("secret.txt"),
        ];
        for path in &paths {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, format!("{SECRET_MARKER} at {}", path.display())).unwrap();
        }
        paths
    }
}

/// A fresh session key: `<prefix>-<n>`, unique in this test binary.
fn fresh_key(prefix: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    format!("{prefix}-{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn user(text: &str) -> Value {
    json!({ "role": "user", "content": [{ "type": "text", "text": text }], "timestamp": 0 })
}

/// The texts a benign instance says it has seen (its system-prompt addition).
fn seen(assembly: &ctxhost::Assembly) -> Vec<String> {
    let addition = assembly
        .system_prompt_addition
        .as_deref()
        .expect("a benign assemble lists what it saw");
    serde_json::from_str(addition).expect("the list is JSON")
}

// --- the well-behaved neighbour -----------------------------------------------------------

/// Sets the flag when dropped, so the neighbour stops even when the attack task panics.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

const NEIGHBOUR_MIN_ROUNDS: usize = 5;
const NEIGHBOUR_MAX_ROUNDS: usize = 400;

/// A normal append/assemble loop that runs until the attack is over (at least a few rounds),
/// checking every answer. Returns the rounds it completed.
async fn neighbour_work(mut session: Session, attack_over: Arc<AtomicBool>) -> usize {
    let key = session.key().to_string();
    let mut texts = Vec::new();
    let mut rounds = 0;
    while rounds < NEIGHBOUR_MIN_ROUNDS
        || (!attack_over.load(Ordering::SeqCst) && rounds < NEIGHBOUR_MAX_ROUNDS)
    {
        let text = format!("{key} says {rounds}");
        session.append(&user(&text)).await.unwrap();
        texts.push(text);
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert_eq!(
            assembly.kept(),
            texts.len(),
            "{key}: pass-through keeps all"
        );
        assert_eq!(seen(&assembly), texts, "{key} saw only its own messages");
        rounds += 1;
        tokio::task::yield_now().await;
    }
    session.close().await.unwrap();
    rounds
}

/// Runs `attack` on its own task while a benign session of the same engine works on another;
/// asserts the neighbour finished normally and returns what the attack returned.
async fn beside_neighbour<T, F>(rig: &Rig, name: &str, attack: F) -> T
where
    T: Send + 'static,
    F: Future<Output = T> + Send + 'static,
{
    let neighbour = rig
        .open(&fresh_key(&format!("benign-neighbour-of-{name}")))
        .await
        .expect("the neighbour opens");
    let attack_over = Arc::new(AtomicBool::new(false));
    let guard = SetOnDrop(attack_over.clone());
    let attack = tokio::spawn(async move {
        let _guard = guard;
        attack.await
    });
    let neighbour = tokio::spawn(neighbour_work(neighbour, attack_over));
    let (attack, neighbour) = tokio::join!(attack, neighbour);
    let rounds = neighbour.expect("the neighbour completed normally");
    assert!(rounds >= NEIGHBOUR_MIN_ROUNDS);
    attack.expect("the attack task itself did not panic")
}

/// A new session on the engine works: the host is still serving.
async fn assert_host_serves(rig: &Rig, name: &str) {
    let mut session = rig
        .open(&fresh_key(&format!("benign-after-{name}")))
        .await
        .expect("a new session opens after the attack");
    session.append(&user("still there?")).await.unwrap();
    let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
    assert_eq!(seen(&assembly), ["still there?"]);
    session.close().await.unwrap();
}

/// What an attack did: the error, how long the host took to stop it, and the transcript.
struct Attack {
    error: Error,
    elapsed: Duration,
}

impl Attack {
    fn engine_error(&self) -> &EngineError {
        match &self.error {
            Error::Engine(e) | Error::Ingest { source: e, .. } => e,
            other => panic!("expected an engine error, got {other:?}"),
        }
    }

    #[track_caller]
    fn assert_fault(&self, kind: FaultKind, function: Function) {
        match self.engine_error() {
            EngineError::Fault {
                kind: k,
                function: f,
                engine,
                ..
            } => {
                assert_eq!((*k, *f), (kind, function), "{}", self.error);
                assert_eq!(engine, "hostile");
            }
            other => panic!("expected a {kind} fault in {function}, got {other:?}"),
        }
    }

    /// A host-side limit ended the call; returns the error's text, which names it.
    #[track_caller]
    fn assert_limit(&self, function: Function, limit_key: &str) -> String {
        self.assert_fault(FaultKind::Limit, function);
        let text = self.error.to_string();
        assert!(text.contains(limit_key), "{text}");
        assert!(text.contains("engine `hostile`"), "{text}");
        text
    }

    #[track_caller]
    fn assert_invalid(&self, function: Function, problem_contains: &str) {
        match self.engine_error() {
            EngineError::InvalidOutput {
                function: f,
                problem,
                ..
            } => {
                assert_eq!(*f, function, "{}", self.error);
                assert!(problem.contains(problem_contains), "{}", self.error);
            }
            other => panic!("expected invalid output from {function}, got {other:?}"),
        }
    }

    /// The sandbox held: the guest reported `blocked: …` and leaked nothing.
    #[track_caller]
    fn assert_blocked(&self) -> &str {
        match self.engine_error() {
            EngineError::Failed {
                function, message, ..
            } => {
                assert_eq!(*function, Function::Assemble);
                assert!(message.starts_with("blocked: "), "{message}");
                assert!(!message.contains(SECRET_MARKER), "{message}");
                assert!(!message.contains(FAKE_KEY), "{message}");
                message
            }
            other => panic!("expected the guest to report `blocked`, got {other:?}"),
        }
    }

    fn report(&self, name: &str) {
        eprintln!(
            "attack {name:<22} stopped after {:>7.1} ms: {}",
            self.elapsed.as_secs_f64() * 1000.0,
            self.error
        );
    }
}

fn deadline_overshoot(name: &str, elapsed: Duration, deadline: Duration) {
    let overshoot = elapsed.as_secs_f64() * 1000.0 - deadline.as_secs_f64() * 1000.0;
    eprintln!(
        "deadline {name:<22} {:>5} ms deadline, stopped after {:>7.1} ms: overshoot {overshoot:+.1} ms",
        deadline.as_millis(),
        elapsed.as_secs_f64() * 1000.0,
    );
    assert!(
        elapsed >= deadline.mul_f64(0.9),
        "{name}: stopped before its deadline ({elapsed:?} < {deadline:?})"
    );
    assert!(
        elapsed < deadline * 5,
        "{name}: the deadline of {deadline:?} did not hold ({elapsed:?})"
    );
}

#[derive(Clone, Copy)]
enum Call {
    Assemble,
    Compact,
}

/// Opens `key`, appends `setup` (the attack keys ingest benignly), then makes the attacking
/// call beside a neighbour. Asserts the transcript is byte-identical across the call, that the
/// session's next call works on a fresh instance, and that the host still serves.
fn attack(key: &str, setup: &[String], call: Call) -> Attack {
    let rig = Rig::new();
    attack_on(&rig, key, setup, call)
}

fn attack_on(rig: &Rig, key: &str, setup: &[String], call: Call) -> Attack {
    block_on(async {
        let mut session = rig.open(key).await.expect("the attack session opens");
        for text in setup {
            session.append(&user(text)).await.unwrap();
        }
        let path = session.path().to_path_buf();
        let before = std::fs::read(&path).unwrap();
        let (session, error, elapsed) = beside_neighbour(rig, key, async move {
            let started = Instant::now();
            let result = match call {
                Call::Assemble => session
                    .assemble(&AssembleOptions::default())
                    .await
                    .map(|_| ()),
                Call::Compact => session.compact(&CompactOptions::forced()).await.map(|_| ()),
            };
            let elapsed = started.elapsed();
            (session, result.err(), elapsed)
        })
        .await;
        let error = error.unwrap_or_else(|| panic!("attack `{key}` was not stopped"));
        let after = std::fs::read(&path).unwrap();
        assert!(before == after, "{key}: the transcript changed");

        // The session itself goes on: its next (benign) call works, on a fresh instance when
        // the attack faulted (bootstrapped from the transcript).
        let mut session = session;
        if matches!(call, Call::Compact) {
            // The attack was in compact: assemble is benign and shows the rebuilt state.
            let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
            assert_eq!(
                seen(&assembly),
                setup,
                "{key}: the instance knows the transcript"
            );
        }
        let entries = session.transcript().entries().len();
        session.append(&user("after the attack")).await.unwrap();
        let reread = ctxhost::transcript::Transcript::load(&path).unwrap();
        assert_eq!(reread.entries().len(), entries + 1);
        drop(session);

        assert_host_serves(rig, key).await;
        Attack { error, elapsed }
    })
}

// --- deadlines ----------------------------------------------------------------------------

#[test]
fn infinite_loop_in_ingest_hits_the_deadline() {
    let rig = Rig::new();
    let outcome = block_on(async {
        let mut session = rig.open("loop-ingest").await.unwrap();
        let path = session.path().to_path_buf();
        let before = std::fs::read(&path).unwrap();
        let (session, error, elapsed) = beside_neighbour(&rig, "loop-ingest", async move {
            let started = Instant::now();
            let result = session.append(&user("spin on this")).await;
            (session, result.err(), started.elapsed())
        })
        .await;
        let attack = Attack {
            error: error.expect("the loop was stopped"),
            elapsed,
        };
        // `append` writes the message first (the transcript is the record), then ingests it:
        // the file gained exactly that one line, intact, and nothing else.
        let after = std::fs::read(&path).unwrap();
        assert!(after.starts_with(&before), "the old bytes are untouched");
        let added = std::str::from_utf8(&after[before.len()..]).unwrap();
        assert_eq!(added.lines().count(), 1, "{added}");
        let line: Value = serde_json::from_str(added.trim_end()).unwrap();
        assert_eq!(line["type"], "message");
        assert_eq!(line["message"], user("spin on this"));
        match &attack.error {
            Error::Ingest { entry_id, .. } => assert_eq!(line["id"], entry_id.as_str()),
            other => panic!("expected Error::Ingest, got {other:?}"),
        }

        // The next call gets a fresh instance, bootstrapped from the transcript, which
        // includes the message whose ingest faulted.
        let mut session = session;
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert_eq!(seen(&assembly), ["spin on this"]);
        assert_eq!(std::fs::read(&path).unwrap(), after);
        assert_host_serves(&rig, "loop-ingest").await;
        attack
    });
    outcome.assert_fault(FaultKind::Deadline, Function::Ingest);
    outcome.report("loop-ingest");
    deadline_overshoot("ingest", outcome.elapsed, CALL_TIMEOUT);
}

#[test]
fn infinite_loop_in_assemble_hits_the_deadline_every_time() {
    let rig = Rig::new();
    let setup = vec!["one".to_string(), "two".to_string()];
    let mut overshoots = Vec::new();
    for _ in 0..5 {
        let outcome = attack_on(&rig, "loop-assemble", &setup, Call::Assemble);
        outcome.assert_fault(FaultKind::Deadline, Function::Assemble);
        outcome.report("loop-assemble");
        deadline_overshoot("assemble", outcome.elapsed, CALL_TIMEOUT);
        overshoots.push(outcome.elapsed.as_secs_f64() * 1000.0 - 300.0);
    }
    overshoots.sort_by(f64::total_cmp);
    eprintln!(
        "deadline assemble over 5 runs: overshoot min {:+.1} ms, median {:+.1} ms, max {:+.1} ms",
        overshoots[0], overshoots[2], overshoots[4]
    );
}

#[test]
fn a_guest_asleep_in_wasi_is_stopped_at_its_deadline() {
    let setup = vec!["one".to_string()];
    let outcome = attack("sleep-assemble", &setup, Call::Assemble);
    outcome.assert_fault(FaultKind::Deadline, Function::Assemble);
    outcome.report("sleep-assemble");
    deadline_overshoot("sleep", outcome.elapsed, CALL_TIMEOUT);
}

#[test]
fn infinite_loop_in_compact_hits_the_long_deadline() {
    let setup = vec!["to be compacted".to_string()];
    let outcome = attack("loop-compact", &setup, Call::Compact);
    outcome.assert_fault(FaultKind::Deadline, Function::Compact);
    outcome.report("loop-compact");
    deadline_overshoot("compact", outcome.elapsed, LONG_CALL_TIMEOUT);
}

#[test]
fn infinite_loop_in_bootstrap_fails_the_open_and_leaves_the_transcript() {
    let rig = Rig::new();
    // The session key is the file stem: a transcript named loop-bootstrap.jsonl.
    let path = rig.scratch.path("loop-bootstrap.jsonl");
    std::fs::write(&path, ctxhost::transcript::generate::coding_session(7, 20)).unwrap();
    let before = std::fs::read(&path).unwrap();
    let outcome = block_on(async {
        let host = rig.host.clone();
        let target = SessionTarget::Path(path.clone());
        let (error, elapsed) = beside_neighbour(&rig, "loop-bootstrap", async move {
            let started = Instant::now();
            let result = host
                .open_session(&target, &ctxhost::SessionOptions::default())
                .await;
            (result.err(), started.elapsed())
        })
        .await;
        assert_host_serves(&rig, "loop-bootstrap").await;
        Attack {
            error: error.expect("the open failed"),
            elapsed,
        }
    });
    assert_eq!(std::fs::read(&path).unwrap(), before);
    outcome.assert_fault(FaultKind::Deadline, Function::Bootstrap);
    outcome.report("loop-bootstrap");
    deadline_overshoot("bootstrap", outcome.elapsed, LONG_CALL_TIMEOUT);
}

#[test]
fn a_loop_of_cheap_imports_counts_against_the_deadline() {
    let rig = Rig::new();
    let setup = vec!["a".to_string(), "b".to_string(), "c".to_string()];
    for (key, import) in [
        ("slow-import", "estimate-tokens"),
        ("slow-import-entries", "context-entries"),
    ] {
        let outcome = attack_on(&rig, key, &setup, Call::Assemble);
        outcome.assert_fault(FaultKind::Deadline, Function::Assemble);
        outcome.report(key);
        deadline_overshoot(import, outcome.elapsed, CALL_TIMEOUT);
    }
}

#[test]
fn after_a_fault_the_fresh_instance_sees_each_message_once() {
    let rig = Rig::new();
    block_on(async {
        let mut session = rig.open("panic-compact").await.unwrap();
        session.append(&user("before")).await.unwrap();
        let error = session
            .compact(&CompactOptions::forced())
            .await
            .unwrap_err();
        assert_eq!(error_kind(&error), Some(FaultKind::Panic), "{error}");
        // The instance was discarded: this append starts a fresh one, which bootstraps from
        // the transcript and is then handed the new message.
        session.append(&user("after")).await.unwrap();
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        assert_eq!(
            seen(&assembly),
            ["before", "after"],
            "ingest hands the engine each message once (the bootstrap of the fresh instance \
             must not already include the message it is about to ingest)"
        );
    });
}

// --- traps --------------------------------------------------------------------------------

#[test]
fn memory_bomb_is_refused_at_the_memory_limit() {
    let outcome = attack("memory-bomb", &["x".into()], Call::Assemble);
    outcome.assert_fault(FaultKind::OutOfMemory, Function::Assemble);
    assert!(
        outcome
            .error
            .to_string()
            .contains(&format!("{MEMORY_MIB} MiB")),
        "{}",
        outcome.error
    );
    outcome.report("memory-bomb");
}

#[test]
fn unbounded_recursion_is_a_stack_overflow() {
    let rig = Rig::new();
    let outcome = attack_on(&rig, "stack-overflow", &["x".into()], Call::Assemble);
    outcome.assert_fault(FaultKind::StackOverflow, Function::Assemble);
    outcome.report("stack-overflow");

    // Big frames overflow the shadow stack in linear memory first; Rust's wasm targets put
    // it below the data, so the overflow is an out-of-bounds access: a trap, still contained.
    let outcome = attack_on(&rig, "stack-overflow-frames", &["x".into()], Call::Assemble);
    match outcome.engine_error().fault_kind() {
        Some(FaultKind::StackOverflow | FaultKind::Trap) => {}
        other => panic!(
            "expected a stack overflow or a trap, got {other:?}: {}",
            outcome.error
        ),
    }
    outcome.report("stack-overflow-frames");
}

#[test]
fn a_panic_fails_the_call_and_discards_the_instance() {
    let outcome = attack("panic", &["x".into()], Call::Assemble);
    outcome.assert_fault(FaultKind::Panic, Function::Assemble);
    outcome.report("panic");
}

// --- oversized output ---------------------------------------------------------------------

/// Where physics decides (the guest may not even build the value within its memory limit),
/// either refusal is right; anything else is not.
#[track_caller]
fn assert_refused_as_too_big(outcome: &Attack) {
    match outcome.engine_error() {
        EngineError::InvalidOutput {
            function: Function::Assemble,
            ..
        } => {}
        EngineError::Fault {
            kind: FaultKind::OutOfMemory,
            function: Function::Assemble,
            ..
        } => {}
        other => panic!("expected invalid output or out of memory, got {other:?}"),
    }
}

#[test]
fn a_one_gib_string_is_refused() {
    let outcome = attack("huge-string", &["x".into()], Call::Assemble);
    assert_refused_as_too_big(&outcome);
    outcome.report("huge-string (1 GiB)");
}

#[test]
fn a_list_of_a_hundred_million_ids_is_refused() {
    let outcome = attack("huge-list", &["x".into()], Call::Assemble);
    assert_refused_as_too_big(&outcome);
    outcome.report("huge-list (10^8 ids)");
}

#[test]
fn ranges_over_the_whole_request_are_refused_before_expanding() {
    // 200 entries x 200,000 ranges: 40 million keeps (about 1 GB) if expanded first.
    let setup: Vec<String> = (0..200).map(|n| format!("message {n}")).collect();
    let outcome = attack("range-flood", &setup, Call::Assemble);
    // Refused while converting the plan, which reports as the engine's failed call.
    match outcome.engine_error() {
        EngineError::Failed { message, .. } => {
            assert!(message.contains("more entries than the 200"), "{message}")
        }
        other => panic!("expected the plan refused, got {other:?}"),
    }
    outcome.report("range-flood (200k ranges)");
}

#[test]
fn output_over_the_host_bytes_cap_is_invalid() {
    let rig = Rig::new();
    // 2 MiB the guest can build within its 64 MiB: the host's cap (1 MiB) must refuse it.
    for key in ["big-addition", "big-inserts"] {
        let outcome = attack_on(&rig, key, &["x".into()], Call::Assemble);
        match outcome.engine_error() {
            EngineError::InvalidOutput { function, .. } => {
                assert_eq!(*function, Function::Assemble)
            }
            other => panic!("{key}: expected invalid output, got {other:?}"),
        }
        outcome.report(key);
    }
}

// --- plans and compactions ----------------------------------------------------------------

#[test]
fn an_assemble_plan_with_forged_or_duplicate_ids_is_invalid() {
    let rig = Rig::new();
    let setup = vec!["one".to_string(), "two".to_string()];
    let forged = attack_on(&rig, "forged-ids", &setup, Call::Assemble);
    forged.assert_invalid(Function::Assemble, "not in the context it was given");
    forged.report("forged-ids");
    let duplicate = attack_on(&rig, "duplicate-ids", &setup, Call::Assemble);
    duplicate.assert_invalid(Function::Assemble, "second time");
    duplicate.report("duplicate-ids");
}

#[test]
fn a_compaction_pointing_outside_the_transcript_is_invalid_and_not_written() {
    let setup: Vec<String> = (0..6).map(|i| format!("message {i}")).collect();
    let outcome = attack("bad-compaction", &setup, Call::Compact);
    outcome.assert_invalid(Function::Compact, "first-kept-entry 1000000");
    outcome.report("bad-compaction");
}

// --- host-side work, wall time, disk and strings ---------------------------------------------

/// Resident set of this process, in bytes (Linux; 0 elsewhere).
fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

#[test]
fn a_flood_of_entry_references_is_refused_before_the_host_builds_it() {
    let rig = Rig::new();
    // ~1 KiB per message: a million copies would be gigabytes on the host.
    let setup = vec!["r".repeat(1024)];
    // Loaded (compiled) first, so the growth measured is the attack's.
    assert_host_serves_blocking(&rig, "read-flood");
    let before = rss_bytes();
    let flood = attack_on(&rig, "read-flood", &setup, Call::Assemble);
    let grown = rss_bytes().saturating_sub(before);
    let text = flood.assert_limit(Function::Assemble, "limits.importBytesPerCall");
    assert!(text.contains("`read-entries`"), "{text}");
    flood.report("read-flood (10^6 refs)");
    eprintln!("read-flood: host RSS grew by {} MiB", grown >> 20);
    // Many smaller requests add up to the same per-call budget.
    // A smaller budget, so the loop reaches it well within the deadline in a debug build.
    let rig = Rig::with_config(&config_with(1000, "importBytesPerCall: 4194304,", "{}"));
    let looped = attack_on(&rig, "read-loop", &setup, Call::Assemble);
    looped.assert_limit(Function::Assemble, "limits.importBytesPerCall");
    looped.report("read-loop (10^3 refs, repeated)");
    assert!(
        rss_bytes().saturating_sub(before) < 512 << 20,
        "the host stayed within a few budgets"
    );
}

#[test]
fn a_count_of_cheap_imports_is_capped_per_call() {
    let rig = Rig::with_config(&config_with(1000, "importCallsPerCall: 1000,", "{}"));
    let outcome = attack_on(&rig, "slow-import", &["a".into()], Call::Assemble);
    outcome.assert_limit(Function::Assemble, "limits.importCallsPerCall");
    outcome.report("estimate-tokens x 10^7");
}

#[test]
fn a_loop_of_delegated_compactions_hits_the_slow_import_cap() {
    let setup: Vec<String> = (0..20)
        .map(|i| format!("message {i} {}", "w ".repeat(200)))
        .collect();
    let outcome = attack("delegate-loop", &setup, Call::Compact);
    let text = outcome.assert_limit(Function::Compact, "limits.slowImportsPerCall");
    assert!(text.contains("more than 4 times"), "{text}");
    outcome.report("delegate-loop (cap)");
}

#[test]
fn time_inside_imports_is_bounded_by_the_wall_time_cap() {
    const WALL: Duration = Duration::from_millis(1500);
    // A summarizer that accepts and never answers: a delegated compaction blocks in the host
    // far longer than the cap (the model's own timeout is 8 s; the abandoned request runs out
    // on its blocking thread, which the test's runtime waits for when it shuts down).
    let stall = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = stall.local_addr().unwrap().port();
    let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in stall.incoming().flatten() {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            held.push(stream);
        }
    });
    let limits = format!(
        "slowImportsPerCall: 10000, longCallTimeoutMs: 30000, importTimeoutMs: 120000, wallTimeoutMs: {},",
        WALL.as_millis()
    );
    let plugins = config_with(1000, &limits, "{}");
    let config = format!(
        "{{ agents: {{ defaults: {{ compaction: {{ model: {{ provider: 'openai-compatible', baseUrl: 'http://127.0.0.1:{port}/v1', modelName: 'stall', timeoutMs: 8000, retries: 0 }}, preserveRecentTokens: 500 }} }} }}, {}",
        &plugins[1..]
    );
    let rig = Rig::with_config(&config);
    let setup: Vec<String> = (0..80)
        .map(|i| format!("message {i} {}", "w ".repeat(400)))
        .collect();
    let outcome = attack_on(&rig, "delegate-loop", &setup, Call::Compact);
    // Keeping only 500 recent tokens leaves a span to summarize, so the very first delegated
    // compaction reaches the model: the cap must not depend on how fast the machine is.
    assert_eq!(connections.load(std::sync::atomic::Ordering::SeqCst), 1);
    let text = outcome.assert_limit(Function::Compact, "limits.wallTimeoutMs");
    assert!(text.contains("in host imports"), "{text}");
    outcome.report("delegate-loop (wall)");
    // The guest's own deadline (30 s here, and it excludes import time) and the import's
    // timeout (2 min) are far off: only the wall cap stopped it.
    assert!(
        outcome.elapsed >= WALL.mul_f64(0.9),
        "{:?}",
        outcome.elapsed
    );
    assert!(outcome.elapsed < WALL * 3, "{:?}", outcome.elapsed);
}

/// Bytes under `dir`, symlinks not followed.
fn dir_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            dir_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// Opens `key` on `rig`; its bootstrap must fail.
fn failed_open(rig: &Rig, key: &str) -> Attack {
    block_on(async {
        let started = Instant::now();
        let error = rig.open(key).await.err().expect("the open failed");
        Attack {
            error,
            elapsed: started.elapsed(),
        }
    })
}

#[test]
fn the_state_dir_quota_stops_a_guest_filling_the_disk() {
    // Writing is slow on a loaded debug build: a deadline far off, so only the quota decides.
    let rig = Rig::with_config(&config_with(1000, "longCallTimeoutMs: 30000,", "{}"));
    let quota = STATE_DIR_QUOTA_MIB << 20;
    let outcome = failed_open(&rig, "disk-hog");
    let text = outcome.assert_limit(Function::Bootstrap, "limits.stateDirQuotaMiB");
    assert!(
        text.contains(&format!("quota of {STATE_DIR_QUOTA_MIB} MiB")),
        "{text}"
    );
    outcome.report("disk-hog");
    let used = dir_bytes(&rig.state_dir());
    eprintln!("disk-hog: {used} bytes in the state dir against a {quota}-byte quota");
    assert!(used <= quota, "{used} bytes written past the quota");
    assert!(
        used >= quota / 2,
        "the guest could use its quota ({used} bytes)"
    );
    // Another instance (another session) of the engine is held to the same quota.
    let again = failed_open(&rig, "disk-hog");
    again.assert_limit(Function::Bootstrap, "limits.stateDirQuotaMiB");
    assert!(dir_bytes(&rig.state_dir()) <= quota);
    assert_host_serves_blocking(&rig, "disk-hog");

    // Empty files cost an entry each: a flood of them is stopped too.
    // Creating a file is slow in a debug build: more guest time than the suite's deadline.
    let rig = Rig::with_config(&config_with(
        1000,
        "stateDirQuotaMiB: 1, longCallTimeoutMs: 30000,",
        "{}",
    ));
    // What the disk spends is charged: a block and an inode per file or directory, so tiny
    // files and empty directories stay within the quota as measured by the filesystem.
    for key in ["disk-files", "disk-tiny-files", "disk-dirs"] {
        let outcome = failed_open(&rig, key);
        outcome.assert_limit(Function::Bootstrap, "quota of 1 MiB");
        let (entries, spent) = disk_spent(&rig.state_dir());
        eprintln!("{key}: {entries} entries spending {spent} bytes before the quota of 1 MiB");
        assert!(
            spent <= 1 << 20,
            "{key}: {entries} entries spent {spent} bytes"
        );
        outcome.report(key);
        std::fs::remove_dir_all(rig.state_dir()).unwrap();
        std::fs::create_dir(rig.state_dir()).unwrap();
    }
}

/// Entries under `dir` and the bytes the filesystem spends on them: allocated blocks and an
/// inode (256 bytes) each, as `du` counts.
fn disk_spent(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let (mut entries, mut bytes) = (0, 0);
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        entries += 1;
        bytes += meta.blocks() * 512 + 256;
        if meta.is_dir() {
            let (e, b) = disk_spent(&entry.path());
            entries += e;
            bytes += b;
        }
    }
    (entries, bytes)
}

fn assert_host_serves_blocking(rig: &Rig, name: &str) {
    block_on(assert_host_serves(rig, name));
}

#[test]
fn a_compaction_that_grows_the_context_is_invalid_and_not_written() {
    let setup: Vec<String> = (0..6).map(|i| format!("message {i}")).collect();
    let outcome = attack("bad-figures", &setup, Call::Compact);
    outcome.assert_invalid(
        Function::Compact,
        "tokens-after 5000 is larger than tokens-before 1000",
    );
    outcome.report("bad-figures");
}

#[test]
fn huge_or_escaping_engine_info_is_cut_before_it_is_kept_or_printed() {
    const HUGE: usize = 16 << 20;
    // Generous deadlines: building and copying 2 x 16 MiB is slow on a loaded debug build.
    let slow = "callTimeoutMs: 20000, longCallTimeoutMs: 20000,";
    let rig = Rig::with_config(&config_with(1000, slow, &format!("{{ hugeInfo: {HUGE} }}")));
    block_on(async {
        let engine = rig.host.engine("hostile").await.expect("it loads");
        let info = engine.info();
        assert!(
            info.name.len() < 512,
            "name of {} bytes kept",
            info.name.len()
        );
        assert!(
            info.version.len() < 512,
            "version of {} bytes kept",
            info.version.len()
        );
        assert!(!info.name.contains('\x1b'), "a terminal escape survived");
        assert!(info.name.contains("more bytes"), "{}", info.name);
    });
    let rig = Rig::with_config(&config_with(1000, slow, &format!("{{ hugeId: {HUGE} }}")));
    block_on(async {
        let err = rig
            .open("benign-huge-id")
            .await
            .err()
            .expect("the id does not match");
        let text = err.to_string();
        assert!(text.len() < 4096, "an error of {} bytes", text.len());
    });
}

// --- the sandbox --------------------------------------------------------------------------

#[test]
fn reading_parent_directories_is_blocked() {
    let rig = Rig::new();
    let secrets = rig.plant_secrets();
    let outcome = attack_on(&rig, "fs-parent", &[], Call::Assemble);
    let message = outcome.assert_blocked();
    assert!(message.contains("../secret.txt"), "{message}");
    outcome.report("fs-parent");
    assert_secrets_untouched(&secrets);
}

#[test]
fn reading_absolute_host_paths_is_blocked() {
    let rig = Rig::new();
    let secrets = rig.plant_secrets();
    let paths: Vec<String> = secrets.iter().map(|p| p.display().to_string()).collect();
    let outcome = attack_on(&rig, "fs-absolute", &paths, Call::Assemble);
    let message = outcome.assert_blocked();
    assert!(message.contains(&paths[0]), "{message}");
    outcome.report("fs-absolute");
    assert_secrets_untouched(&secrets);
}

#[test]
fn symlinks_in_the_state_dir_do_not_lead_outside() {
    let rig = Rig::new();
    let secrets = rig.plant_secrets();
    // Links planted on the host side too (a leftover of an older, unsandboxed version).
    let state = rig.state_dir();
    std::fs::create_dir_all(&state).unwrap();
    std::os::unix::fs::symlink(&secrets[0], state.join("planted-abs")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", state.join("planted-rel")).unwrap();
    let paths: Vec<String> = secrets.iter().map(|p| p.display().to_string()).collect();
    let outcome = attack_on(&rig, "fs-symlink", &paths, Call::Assemble);
    let message = outcome.assert_blocked();
    assert!(message.contains("/planted-abs"), "{message}");
    assert!(message.contains("read /escape-rel:"), "{message}");
    // Creating links that lead out is refused (host tools and operators browsing the dir
    // might follow them even though the guest cannot), relative or absolute.
    for (link, target) in [
        ("escape-rel", "../secret.txt"),
        ("escape-rel2", "../../secret.txt"),
        ("escape-dir", "../.."),
        ("escape-abs-0", secrets[0].to_str().unwrap()),
    ] {
        assert!(
            message.contains(&format!("symlink /{link} -> {target}: ")),
            "{message}"
        );
        assert!(
            std::fs::symlink_metadata(state.join(link)).is_err(),
            "{link} was created"
        );
    }
    outcome.report("fs-symlink");
    assert_secrets_untouched(&secrets);

    // Links planted by someone else stay possible, so no host path may follow one: the quota's
    // measurement counts them as entries (not their 4 MiB targets), and purging the engine
    // removes the links, not what they point at.
    let outside = rig.scratch.path("outside-dir");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("big"), vec![7u8; 4 << 20]).unwrap();
    std::os::unix::fs::symlink(&outside, state.join("planted-dir")).unwrap();
    std::os::unix::fs::symlink("../../../outside-dir", state.join("planted-dir-rel")).unwrap();
    // With a 1 MiB quota, the guest still writes most of its MiB: the 4 MiB behind each link
    // were not counted.
    let tiny = rig.scratch.host(&config_with(
        1000,
        "stateDirQuotaMiB: 1, longCallTimeoutMs: 30000,",
        "{}",
    ));
    let err = block_on(tiny.open_session(
        &SessionTarget::Key("disk-hog".into()),
        &ctxhost::SessionOptions::default(),
    ))
    .err()
    .expect("the hog is stopped");
    assert!(err.to_string().contains("quota of 1 MiB"), "{err}");
    let hogged = std::fs::metadata(state.join("hog.bin")).unwrap().len();
    assert!(hogged >= 512 << 10, "only {hogged} bytes written");
    ctxhost::plugin_ops::uninstall(&rig.host, "hostile", true).unwrap();
    assert!(!state.exists(), "the state dir was purged");
    assert_eq!(std::fs::read(outside.join("big")).unwrap().len(), 4 << 20);
    assert_secrets_untouched(&secrets);
}

fn assert_secrets_untouched(secrets: &[PathBuf]) {
    for path in secrets {
        let text = std::fs::read_to_string(path).unwrap();
        assert_eq!(text, format!("{SECRET_MARKER} at {}", path.display()));
    }
}

#[test]
fn the_host_environment_is_invisible() {
    static SET: std::sync::Once = std::sync::Once::new();
    SET.call_once(|| {
        // SAFETY: set once, before this test starts any thread of its own. Other tests of
        // this binary may run concurrently, but nothing in them reads the environment except
        // through std, whose env lock serialises it with this write (no C code here calls
        // getenv: guests' name lookups are refused inside wasmtime, never reaching libc).
        unsafe { std::env::set_var(FAKE_KEY_VAR, FAKE_KEY) };
    });
    assert_eq!(std::env::var(FAKE_KEY_VAR).as_deref(), Ok(FAKE_KEY));
    let outcome = attack("env", &[], Call::Assemble);
    let message = outcome.assert_blocked();
    assert!(
        message.contains("the environment has 0 variables"),
        "{message}"
    );
    outcome.report("env");
}

#[test]
fn sockets_cannot_be_opened() {
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let setup = vec![
        format!("tcp:{}", tcp.local_addr().unwrap().port()),
        format!("udp:{}", udp.local_addr().unwrap().port()),
    ];
    let outcome = attack("net", &setup, Call::Assemble);
    let message = outcome.assert_blocked();
    assert!(message.contains("tcp connect 127.0.0.1"), "{message}");
    outcome.report("net (tcp + udp)");
    // The guest's calls are synchronous: a connection or datagram would be queued by now.
    let accepted = tcp.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the listener accepted a connection: {accepted:?}"
    );
    let mut buf = [0u8; 64];
    let received = udp.recv_from(&mut buf);
    assert!(
        matches!(&received, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a datagram arrived: {received:?}"
    );
}

// --- logs ---------------------------------------------------------------------------------

/// Bytes and lines of guest output (events with a `stream` field) per session key, as the
/// host handed them to `tracing`.
fn guest_log_counts() -> &'static Mutex<BTreeMap<String, (usize, usize)>> {
    static COUNTS: OnceLock<Mutex<BTreeMap<String, (usize, usize)>>> = OnceLock::new();
    COUNTS.get_or_init(Default::default)
}

fn capture_guest_logs() {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::{Layer, filter};

    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let layer = GuestLogCounter.with_filter(filter::filter_fn(|meta| {
            meta.target().starts_with("ctxhost")
        }));
        let subscriber = tracing_subscriber::registry().with(layer);
        tracing::subscriber::set_global_default(subscriber).expect("one global subscriber");
    });
}

struct GuestLogCounter;

#[derive(Default)]
struct GuestLogFields {
    session: Option<String>,
    stream: bool,
    engine: Option<String>,
    message_len: usize,
}

impl tracing::field::Visit for GuestLogFields {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        match field.name() {
            "session" => self.session = Some(value.to_string()),
            "engine" => self.engine = Some(value.to_string()),
            "stream" => self.stream = true,
            "message" => self.message_len = value.len(),
            _ => {}
        }
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        match field.name() {
            "message" => self.message_len = text.len(),
            "session" => self.session = Some(text.trim_matches('"').to_string()),
            "engine" => self.engine = Some(text.trim_matches('"').to_string()),
            "stream" => self.stream = true,
            _ => {}
        }
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for GuestLogCounter {
    fn on_event(
        &self,
        event: &tracing::Event<'_>,
        _ctx: tracing_subscriber::layer::Context<'_, S>,
    ) {
        let mut fields = GuestLogFields::default();
        event.record(&mut fields);
        if let (true, Some(session), Some("hostile")) =
            (fields.stream, fields.session, fields.engine.as_deref())
        {
            let mut counts = guest_log_counts().lock().unwrap();
            let entry = counts.entry(session).or_default();
            entry.0 += fields.message_len;
            entry.1 += 1;
        }
    }
}

#[test]
fn a_log_flood_is_capped_and_stopped_by_the_deadline() {
    let outcome = attack("log-flood", &["x".into()], Call::Assemble);
    outcome.assert_fault(FaultKind::Deadline, Function::Assemble);
    outcome.report("log-flood");
    deadline_overshoot("log-flood", outcome.elapsed, CALL_TIMEOUT);
    let (bytes, lines) = guest_log_counts()
        .lock()
        .unwrap()
        .get("log-flood")
        .copied()
        .unwrap_or_default();
    eprintln!("log-flood: {lines} lines, {bytes} bytes reached the host's logs");
    assert!(lines > 0, "the first lines of the flood are logged");
    // One flooding call, plus the benign calls of the session's setup and aftermath.
    assert!(
        bytes <= LOG_BYTES_PER_CALL,
        "{bytes} bytes logged in one call over the {LOG_BYTES_PER_CALL}-byte cap"
    );
}

// --- the circuit breaker ------------------------------------------------------------------

#[test]
fn consecutive_faults_open_the_circuit_until_reset() {
    let rig = Rig::with_breaker(3);
    block_on(async {
        let mut neighbour = rig.open("benign-neighbour").await.unwrap();
        neighbour.append(&user("hello")).await.unwrap();
        let mut attacker = rig.open("panic").await.unwrap();
        for round in 1..=3 {
            let started = Instant::now();
            let error = attacker
                .assemble(&AssembleOptions::default())
                .await
                .unwrap_err();
            let outcome = Attack {
                error,
                elapsed: started.elapsed(),
            };
            outcome.assert_fault(FaultKind::Panic, Function::Assemble);
            outcome.report(&format!("panic #{round}"));
        }
        let started = Instant::now();
        let error = attacker
            .assemble(&AssembleOptions::default())
            .await
            .unwrap_err();
        let elapsed = started.elapsed();
        eprintln!(
            "circuit open: refused in {:.3} ms: {error}",
            elapsed.as_secs_f64() * 1000.0
        );
        match &error {
            Error::Engine(EngineError::CircuitOpen { engine, faults, .. }) => {
                assert_eq!(engine, "hostile");
                assert!(*faults >= 3, "{error}");
            }
            other => panic!("expected the circuit to be open, got {other:?}"),
        }
        assert!(elapsed < CALL_TIMEOUT, "an open circuit fails fast");

        // Open for every session of the engine, including new ones.
        let error = neighbour
            .assemble(&AssembleOptions::default())
            .await
            .unwrap_err();
        assert!(
            matches!(error, Error::Engine(EngineError::CircuitOpen { .. })),
            "{error:?}"
        );
        let path = neighbour.path().to_path_buf();
        let before = std::fs::read(&path).unwrap();
        let error = neighbour.append(&user("while open")).await.unwrap_err();
        assert!(
            matches!(
                error,
                Error::Ingest {
                    source: EngineError::CircuitOpen { .. },
                    ..
                } | Error::Engine(EngineError::CircuitOpen { .. })
            ),
            "{error:?}"
        );
        // The message is on record whether or not the engine could take it.
        let reread = ctxhost::transcript::Transcript::load(&path).unwrap();
        assert!(std::fs::read(&path).unwrap().starts_with(&before));
        assert_eq!(reread.entries().len(), 2);

        assert!(rig.host.reset_engine("hostile").await);
        let assembly = neighbour
            .assemble(&AssembleOptions::default())
            .await
            .unwrap();
        assert_eq!(assembly.kept(), 2);
        assert_host_serves(&rig, "circuit").await;
        // The attacker is an ordinary faulting engine again, not refused.
        let error = attacker
            .assemble(&AssembleOptions::default())
            .await
            .unwrap_err();
        Attack {
            error,
            elapsed: Duration::ZERO,
        }
        .assert_fault(FaultKind::Panic, Function::Assemble);
    });
}

#[test]
fn success_in_between_keeps_the_circuit_closed() {
    let rig = Rig::with_breaker(3);
    block_on(async {
        let mut attacker = rig.open("panic").await.unwrap();
        let mut neighbour = rig.open("benign-neighbour").await.unwrap();
        for _ in 0..5 {
            for _ in 0..2 {
                let error = attacker
                    .assemble(&AssembleOptions::default())
                    .await
                    .unwrap_err();
                assert_eq!(
                    error_kind(&error),
                    Some(FaultKind::Panic),
                    "only two in a row: {error}"
                );
            }
            neighbour
                .assemble(&AssembleOptions::default())
                .await
                .unwrap();
        }
    });
}

fn error_kind(error: &Error) -> Option<FaultKind> {
    match error {
        Error::Engine(e) | Error::Ingest { source: e, .. } => e.fault_kind(),
        _ => None,
    }
}

// --- many sessions ------------------------------------------------------------------------

#[test]
fn a_hundred_concurrent_sessions_see_only_their_own_messages() {
    const SESSIONS: usize = 100;
    const MESSAGES: usize = 5;
    let rig = Rig::new();
    let started = Instant::now();
    let paths = block_on(async {
        // All instances are live at once: every session opens before any appends.
        let barrier = Arc::new(tokio::sync::Barrier::new(SESSIONS));
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..SESSIONS {
            let host = rig.host.clone();
            let barrier = barrier.clone();
            tasks.spawn(async move {
                let key = format!("benign-{i}");
                let mut session = open_session(&host, SessionTarget::Key(key.clone())).await;
                barrier.wait().await;
                let mut texts = Vec::new();
                for j in 0..MESSAGES {
                    let text = format!("{key} message {j}");
                    session.append(&user(&text)).await.unwrap();
                    texts.push(text);
                    tokio::task::yield_now().await;
                }
                let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
                assert_eq!(seen(&assembly), texts, "{key} saw only its own messages");
                assert_eq!(assembly.kept(), MESSAGES);
                assert!(
                    assembly
                        .items()
                        .all(|item| matches!(item, AssembledItem::Entry(_)))
                );
                for (rendered, text) in session.render(&assembly).iter().zip(&texts) {
                    let message: Value = serde_json::from_str(rendered).unwrap();
                    assert_eq!(message, user(text));
                }
                let path = session.path().to_path_buf();
                session.close().await.unwrap();
                (key, path, texts)
            });
        }
        let mut done = Vec::new();
        while let Some(result) = tasks.join_next().await {
            done.push(result.expect("a session task failed"));
        }
        done
    });
    assert_eq!(paths.len(), SESSIONS);
    for (key, path, texts) in &paths {
        let file = std::fs::read_to_string(path).unwrap();
        for (other, _, other_texts) in &paths {
            if other != key {
                assert!(
                    !other_texts.iter().any(|t| file.contains(t.as_str())),
                    "{key}'s transcript holds a message of {other}"
                );
            }
        }
        assert!(texts.iter().all(|t| file.contains(t.as_str())));
    }
    eprintln!(
        "{SESSIONS} concurrent sessions x {MESSAGES} messages: {:.0} ms (pooling allocator: {})",
        started.elapsed().as_secs_f64() * 1000.0,
        rig.host.runtime().uses_pooling()
    );
}
