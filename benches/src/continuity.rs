//! Continuity: what an engine's context still holds of the past after 1, 2, 3 and 10
//! compactions — files, tool failures, the user's requests, the request the user was on when
//! compaction ran, and standing instructions — and what that costs in non-verbatim tokens.
//!
//! A session is replayed the way `ctxhost replay` drives an engine (append each message;
//! before each assistant turn assemble, and compact when the context passes the threshold).
//! After each compaction the next assembly is rendered and split into what is verbatim (kept
//! transcript messages) and what is not (the compaction summary, the engine's inserted
//! messages, its system-prompt addition). Ground truth is drawn mechanically from the
//! messages that were compacted away; an item counts as kept when its key text appears in the
//! non-verbatim part (lower-cased, whitespace folded, `dir/{a, b}` groups expanded):
//!
//! - a file: its full path; a failure: the first 40 characters of the first output line that
//!   names an error (else the first line); a request or instruction: its first 40 characters;
//! - requests are user messages that are not acknowledgements (`ok`, `yes, do it`, `continue`)
//!   or bare slash commands; the current request is the newest of them when compaction ran
//!   (even when it is still kept verbatim: the summary must carry it on).
//!
//! Sessions: generated ones made to stress continuity (long, hundreds of files, many failures
//! whose first output line is boilerplate, rules given in the second turn, turns bigger than
//! the window) and `../shared/data/pi-large-session.jsonl` when present.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use ctxhost::runtime::PreparedEngine;
use ctxhost::{AssembledItem, Host};
use ctxhost_transcript::Transcript;
use serde_json::{Value, json};

/// The windows the sessions are replayed at unless told otherwise (the outside testers replay
/// real sessions at both).
pub const WINDOWS: &[u64] = &[16_000, 32_000];
/// Compaction counts the table reports.
pub const AT: &[usize] = &[1, 2, 3, 10];

pub use crate::compacting::Subject;

/// Recall of one kind at one state: (kept, total).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub kept: usize,
    pub total: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.kept += other.kept;
        self.total += other.total;
    }
    pub(crate) fn count(&mut self, kept: bool) {
        self.total += 1;
        self.kept += usize::from(kept);
    }
    /// `93% (41/44)`, or `—` when there was nothing to keep.
    pub fn show(&self) -> String {
        if self.total == 0 {
            return "—".into();
        }
        format!(
            "{:.0}% ({}/{})",
            self.kept as f64 * 100.0 / self.total as f64,
            self.kept,
            self.total
        )
    }
}

/// What the context held right after one compaction.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// 1-based compaction number.
    pub compaction: usize,
    pub modified: Tally,
    pub read: Tally,
    pub failures: Tally,
    pub requests: Tally,
    pub current: Tally,
    pub instructions: Tally,
    pub non_verbatim_tokens: usize,
}

/// One session replayed on one engine.
#[derive(Debug, Clone, Default)]
pub struct Run {
    pub engine: String,
    pub session: String,
    pub messages: usize,
    pub states: Vec<State>,
    /// Compactions asked for that found no cut point.
    pub no_cut_point: usize,
    /// Assistant turns whose context still passed the window after compaction.
    pub overflowing_turns: usize,
    /// Wall clock of the replay, measurements included.
    pub elapsed: std::time::Duration,
}

// ---------------------------------------------------------------------------------------------
// Ground truth

// The ground truth's own, stricter list on purpose: the benchmark must not grade the summarizer
// by the summarizer's rule (`extractive::is_acknowledgement`).
const ACKS: &[&str] = &[
    "ok", "okay", "k", "yes", "yep", "yeah", "sure", "continue", "go", "on", "ahead", "do", "it",
    "all", "thanks", "thank", "you", "great", "nice", "cool", "good", "done", "next", "alright",
    "please", "proceed", "fine",
];

pub(crate) fn fold(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

/// A user message that asks for nothing.
pub fn acknowledgement(text: &str) -> bool {
    let t = text.trim();
    if t.is_empty() || (t.starts_with('/') && !t.contains(char::is_whitespace)) {
        return true;
    }
    ctxhost_heuristics::only_words_of(t, ACKS)
}

/// The first 40 characters, folded: what identifies a request, rule or error line.
pub(crate) fn key(text: &str) -> String {
    fold(text).chars().take(40).collect()
}

pub(crate) fn text_of(message: &Value) -> String {
    match message.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn transient(path: &str) -> bool {
    path.ends_with('/')
        || path.starts_with("/tmp/")
        || path.starts_with("/var/folders/")
        || path.contains("/TemporaryItems/")
}

/// The key line of a failed tool's output: the first line naming an error, else the first.
fn failure_key(output: &str) -> String {
    const WORDS: &[&str] = &[
        "error",
        "fail",
        "cannot",
        "could not",
        "not found",
        "no such",
        "denied",
        "rejected",
        "invalid",
        "panic",
    ];
    let lines: Vec<&str> = output
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let line = lines
        .iter()
        .find(|l| {
            let l = l.to_lowercase();
            WORDS.iter().any(|w| l.contains(w))
        })
        .or(lines.first())
        .copied()
        .unwrap_or("");
    key(line)
}

/// What the messages hold that should survive.
#[derive(Debug, Default)]
pub(crate) struct Truth {
    pub(crate) modified: Vec<String>,
    pub(crate) read: Vec<String>,
    pub(crate) failures: Vec<String>,
    pub(crate) requests: Vec<String>,
}

pub(crate) fn truth(messages: &[Value]) -> Truth {
    let mut t = Truth::default();
    for m in messages {
        match m["role"].as_str() {
            Some("user") => {
                let text = text_of(m);
                if !acknowledgement(&text) {
                    let k = key(&text);
                    if !t.requests.contains(&k) {
                        t.requests.push(k);
                    }
                }
            }
            Some("assistant") => {
                for call in m["content"].as_array().into_iter().flatten() {
                    if call["type"] != "toolCall" {
                        continue;
                    }
                    let args = &call["arguments"];
                    let Some(path) = args["path"].as_str().or(args["file_path"].as_str()) else {
                        continue;
                    };
                    if transient(path) {
                        continue;
                    }
                    let list = match call["name"].as_str().unwrap_or("") {
                        "read" => &mut t.read,
                        "edit" | "write" => &mut t.modified,
                        _ => continue,
                    };
                    if !list.iter().any(|p| p == path) {
                        list.push(path.to_string());
                    }
                }
            }
            Some("toolResult") if m["isError"] == true => {
                let k = failure_key(&text_of(m));
                if !k.is_empty() && !t.failures.contains(&k) {
                    t.failures.push(k);
                }
            }
            _ => {}
        }
    }
    let modified = t.modified.clone();
    t.read.retain(|p| !modified.contains(p));
    t
}

/// `dir/{a, b}` → `dir/a dir/b`, appended, so full paths can be searched for.
pub(crate) fn expand_groups(text: &str) -> String {
    let mut out = text.to_string();
    for line in text.lines() {
        let mut rest = line;
        while let Some(open) = rest.find('{') {
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            let start = rest[..open]
                .rfind(|c: char| c.is_whitespace() || c == ',' || c == ':')
                .map_or(0, |i| i + 1);
            let prefix = &rest[start..open];
            for item in rest[open + 1..open + close].split(", ") {
                out.push('\n');
                out.push_str(prefix);
                out.push_str(item);
            }
            rest = &rest[open + close + 1..];
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Replay

/// Replays `subject` on `engine` at `window` tokens, measuring after every compaction.
pub async fn run(
    host: &Host,
    engine: Arc<PreparedEngine>,
    subject: &Subject,
    dir: &Path,
    window: u64,
) -> Result<Run> {
    let mut states = Vec::new();
    let replay = crate::compacting::replay(host, engine, subject, dir, window, |point| {
        let parts = non_verbatim(point.session, point.assembly);
        let cut = compacted_messages(&point.session.transcript(), point.first_kept);
        states.push(measure(
            states.len() + 1,
            &parts,
            &subject.messages[..cut.min(point.appended)],
            &subject.messages[..point.appended],
            &subject.instructions,
        ));
    })
    .await?;
    Ok(Run {
        engine: replay.engine,
        session: replay.session,
        messages: replay.messages,
        states,
        no_cut_point: replay.no_cut_point,
        overflowing_turns: replay.overflowing_turns,
        elapsed: replay.elapsed,
    })
}

/// What the assembly holds that is not a kept transcript message: the compaction summary, the
/// engine's inserted messages, its system-prompt addition.
fn non_verbatim(session: &ctxhost::Session, assembly: &ctxhost::Assembly) -> Vec<String> {
    let t = session.transcript();
    let mut parts: Vec<String> = Vec::new();
    for item in assembly.items() {
        match item {
            AssembledItem::Entry(i) => {
                let e = &t.entries()[i];
                if e.entry_type() != "message" {
                    parts.extend(e.view().map(|v| v.text));
                }
            }
            AssembledItem::Inserted(json) => {
                let v: Value = serde_json::from_str(&json).unwrap_or_default();
                parts.push(text_of(&v));
            }
        }
    }
    parts.extend(assembly.system_prompt_addition.clone());
    parts
}

/// How many message entries lie before the first kept entry (the compacted-away messages).
pub(crate) fn compacted_messages(t: &Transcript, first_kept: Option<&str>) -> usize {
    let entries = t.entries();
    let Some(first) = first_kept.and_then(|id| entries.iter().position(|e| e.id() == id)) else {
        return 0;
    };
    entries[..first]
        .iter()
        .filter(|e| e.entry_type() == "message")
        .count()
}

fn measure(
    compaction: usize,
    parts: &[String],
    compacted: &[Value],
    so_far: &[Value],
    instructions: &[String],
) -> State {
    let haystack = fold(&expand_groups(&parts.join("\n")));
    let found = |k: &str| haystack.contains(&fold(k));
    let t = truth(compacted);
    let mut s = State {
        compaction,
        // Each message counted as the host counts it: chars / 4, rounded up.
        non_verbatim_tokens: parts.iter().map(|p| p.chars().count().div_ceil(4)).sum(),
        ..State::default()
    };
    t.modified.iter().for_each(|p| s.modified.count(found(p)));
    t.read.iter().for_each(|p| s.read.count(found(p)));
    t.failures.iter().for_each(|f| s.failures.count(found(f)));
    t.requests.iter().for_each(|r| s.requests.count(found(r)));
    if let Some(current) = so_far
        .iter()
        .rev()
        .filter(|m| m["role"] == "user")
        .map(text_of)
        .find(|t| !acknowledgement(t))
    {
        s.current.count(found(&key(&current)));
    }
    // A rule counts once it has been compacted away.
    let compacted_text = fold(
        &compacted
            .iter()
            .filter(|m| m["role"] == "user")
            .map(text_of)
            .collect::<Vec<_>>()
            .join("\n"),
    );
    for rule in instructions {
        if compacted_text.contains(&fold(rule)) {
            s.instructions.count(found(&key(rule)));
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Sessions

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const DIRS: &[&str] = &[
    "src/core",
    "src/net/http",
    "src/ui/widgets",
    "src/cli",
    "src/storage",
    "tests/integration",
    "crates/parser/src",
    "crates/codegen/src/backend",
    "docs/guide",
    "benches",
    "src/auth",
    "src/config",
];
const NOUNS: &[&str] = &[
    "retry",
    "cache",
    "session",
    "token",
    "parser",
    "layout",
    "theme",
    "router",
    "index",
    "queue",
    "scheduler",
    "manifest",
];
const VERBS: &[&str] = &[
    "Refactor",
    "Fix",
    "Add tests for",
    "Document",
    "Speed up",
    "Simplify",
    "Port",
    "Harden",
];

/// Rules given in the second and third turns of every generated session.
const RULES: &[&str] = &[
    "Never push to main directly.",
    "Always run the formatter before you commit.",
    "Use tracing not println for diagnostics.",
];

struct Builder {
    rng: Rng,
    messages: Vec<Value>,
    call: usize,
    clock: u64,
    files: Vec<String>,
    failure: usize,
}

impl Builder {
    fn new(seed: u64) -> Self {
        Builder {
            rng: Rng(seed.max(1)),
            messages: Vec::new(),
            call: 0,
            clock: 1_763_000_000_000,
            files: Vec::new(),
            failure: 0,
        }
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1000;
        self.clock
    }

    fn user(&mut self, text: &str) {
        let ts = self.tick();
        self.messages
            .push(json!({"role": "user", "content": text, "timestamp": ts}));
    }

    fn say(&mut self, text: &str) {
        let ts = self.tick();
        self.messages.push(json!({
            "role": "assistant", "content": [{"type": "text", "text": text}],
            "api": "bench", "provider": "bench", "model": "bench", "stopReason": "stop",
            "timestamp": ts,
        }));
    }

    /// One step: a call and its result.
    fn step(&mut self, tool: &str, arguments: Value, output: &str, is_error: bool) {
        self.call += 1;
        let id = format!("call_{}", self.call);
        let ts = self.tick();
        self.messages.push(json!({
            "role": "assistant",
            "content": [{"type": "toolCall", "id": id, "name": tool, "arguments": arguments}],
            "api": "bench", "provider": "bench", "model": "bench", "stopReason": "toolUse",
            "timestamp": ts,
        }));
        let ts = self.tick();
        self.messages.push(json!({
            "role": "toolResult", "toolCallId": id, "toolName": tool,
            "content": [{"type": "text", "text": output}], "isError": is_error, "timestamp": ts,
        }));
    }

    /// Parallel reads in one assistant message, then their results: no cut can fall between
    /// them.
    fn batch(&mut self, calls: usize, chars: usize) {
        let ts = self.tick();
        let mut blocks = Vec::new();
        let mut results = Vec::new();
        for _ in 0..calls {
            self.call += 1;
            let id = format!("call_{}", self.call);
            let file = self.some_file();
            blocks.push(json!({"type": "toolCall", "id": id, "name": "read",
                               "arguments": {"path": file}}));
            results.push((id, self.body(chars)));
        }
        self.messages.push(json!({
            "role": "assistant", "content": blocks, "api": "bench", "provider": "bench",
            "model": "bench", "stopReason": "toolUse", "timestamp": ts,
        }));
        for (id, body) in results {
            let ts = self.tick();
            self.messages.push(json!({
                "role": "toolResult", "toolCallId": id, "toolName": "read",
                "content": [{"type": "text", "text": body}], "isError": false, "timestamp": ts,
            }));
        }
    }

    fn new_file(&mut self) -> String {
        let dir = DIRS[self.rng.below(DIRS.len())];
        let noun = NOUNS[self.rng.below(NOUNS.len())];
        let path = format!("{dir}/{noun}_{}.rs", self.files.len());
        self.files.push(path.clone());
        path
    }

    fn some_file(&mut self) -> String {
        if self.files.is_empty() || self.rng.chance(45) {
            self.new_file()
        } else {
            let i = self.files.len() - 1 - self.rng.below(self.files.len().min(40));
            self.files[i].clone()
        }
    }

    fn body(&mut self, chars: usize) -> String {
        let mut s = String::with_capacity(chars + 80);
        let mut line = 0;
        while s.len() < chars {
            line += 1;
            let noun = NOUNS[self.rng.below(NOUNS.len())];
            s.push_str(&format!(
                "    let {noun}_{line} = {noun}::build(&config, {line}); // {}\n",
                self.rng.next() % 10_000
            ));
        }
        s
    }

    /// A failure whose first line is boilerplate and whose error line is unique.
    fn failing_bash(&mut self) {
        self.failure += 1;
        let n = self.failure;
        let file = self.some_file();
        let (command, output) = match self.rng.below(4) {
            0 => (
                "npm run check".to_string(),
                format!(
                    "\n> acme@1.4.0 check\n> tsc --noEmit && biome check\n\n{file}(12,{n}): error TS2339: Property 'field{n}' does not exist on type 'Options'.\n"
                ),
            ),
            1 => (
                format!("git push origin feature-{n}"),
                format!(
                    "To https://github.com/acme/app.git\n ! [rejected]        feature-{n} -> feature-{n} (non-fast-forward)\nerror: failed to push some refs to 'https://github.com/acme/app.git'\nhint: Updates were rejected because the tip of your current branch is behind"
                ),
            ),
            2 => (
                "cargo test --workspace".to_string(),
                format!(
                    "   Compiling acme v0.3.0\nrunning 41 tests\ntest {file}::case_{n} ... FAILED\n\nthread 'case_{n}' panicked at {file}:{n}:5: assertion failed: left == right\n"
                ),
            ),
            _ => (
                format!("make release-{n}"),
                format!(
                    "mkdir -p build\ncc -O2 -c main.c\nmain.c:{n}:7: error: use of undeclared identifier 'limit_{n}'\nmake: *** [release-{n}] Error 1"
                ),
            ),
        };
        self.step("bash", json!({"command": command}), &output, true);
    }

    /// One request and the agent's turn on it.
    fn turn(&mut self, request: &str, steps: usize, fail_percent: usize, result_chars: usize) {
        self.user(request);
        for s in 0..steps {
            match self.rng.below(10) {
                0..=3 => {
                    let file = self.some_file();
                    let body = self.body(result_chars);
                    self.step("read", json!({"path": file}), &body, false);
                }
                4..=6 => {
                    let file = self.some_file();
                    if self.rng.chance(fail_percent) {
                        self.failure += 1;
                        let n = self.failure;
                        let output = format!(
                            "Could not find the exact text in {file} (edit {n}). The old text must match exactly including all whitespace and newlines."
                        );
                        self.step(
                            "edit",
                            json!({"path": file, "oldText": "a", "newText": "b"}),
                            &output,
                            true,
                        );
                    }
                    let output = format!("Successfully replaced text in {file}.");
                    self.step(
                        "edit",
                        json!({"path": file, "oldText": "a", "newText": "b"}),
                        &output,
                        false,
                    );
                }
                7 => {
                    let file = self.new_file();
                    self.step(
                        "write",
                        json!({"path": file, "content": "pub fn f() {}"}),
                        &format!("Wrote {file}"),
                        false,
                    );
                }
                _ => {
                    if self.rng.chance(fail_percent * 2) {
                        self.failing_bash();
                    } else {
                        let body = self.body(result_chars / 3);
                        self.step("bash", json!({"command": "cargo build"}), &body, false);
                    }
                }
            }
            if s == steps / 2 {
                self.say("Halfway there; continuing with the remaining changes.");
            }
        }
        self.say(&format!(
            "Done with: {}",
            request.chars().take(80).collect::<String>()
        ));
    }

    fn request(&mut self, n: usize) -> String {
        let verb = VERBS[self.rng.below(VERBS.len())];
        let noun = NOUNS[self.rng.below(NOUNS.len())];
        let file = self.some_file();
        let mut r = format!("{verb} the {noun} handling in {file} (task {n})");
        if self.rng.chance(25) {
            r.push_str(
                ", and while you are there make sure the error messages name the input that \
                 was rejected, because users keep asking what went wrong; keep the public API \
                 as it is and add a note to the changelog",
            );
        }
        r
    }

    fn acknowledge(&mut self) {
        if self.rng.chance(35) {
            let ack = ["ok", "continue", "yes, go ahead", "ok thanks", "/status"];
            let a = ack[self.rng.below(ack.len())];
            self.user(a);
            self.say("Continuing.");
        }
    }

    fn rules(&mut self) {
        self.user(&format!(
            "Before you start, two rules for the whole session: {} {}",
            RULES[0], RULES[1]
        ));
        self.say("Understood.");
        self.user(&format!("And one more: {}", RULES[2]));
        self.say("Noted.");
    }
}

/// The generated sessions: long with many files, failure-heavy, and one with turns bigger
/// than the window.
pub fn generated() -> Vec<Subject> {
    let rules: Vec<String> = RULES.iter().map(|r| r.to_string()).collect();
    let mut out = Vec::new();

    let mut b = Builder::new(11);
    let first = b.request(0);
    b.turn(&first, 4, 5, 2400);
    b.rules();
    for n in 1..130 {
        let r = b.request(n);
        let steps = 6 + b.rng.below(10);
        b.turn(&r, steps, 6, 2400);
        b.acknowledge();
    }
    out.push(Subject {
        name: "long, many files".into(),
        messages: b.messages,
        instructions: rules.clone(),
    });

    let mut b = Builder::new(23);
    let first = b.request(0);
    b.turn(&first, 3, 30, 1600);
    b.rules();
    for n in 1..50 {
        let r = b.request(n);
        b.turn(&r, 8, 30, 1600);
        b.acknowledge();
    }
    out.push(Subject {
        name: "many failures".into(),
        messages: b.messages,
        instructions: rules.clone(),
    });

    let mut b = Builder::new(37);
    let first = b.request(0);
    b.turn(&first, 3, 5, 2000);
    b.rules();
    for n in 1..30 {
        let r = b.request(n);
        match n % 3 {
            // Files of ~9k tokens each: the turn outgrows the window.
            0 => b.turn(&r, 5, 10, 36_000),
            // Batches of two ~8k-token reads and single ~14k-token ones: once a cut lands on a
            // batch, the next cut can only fall inside this turn.
            1 => {
                b.user(&r);
                for _ in 0..3 {
                    b.batch(2, 32_000);
                    b.batch(1, 56_000);
                }
                b.say("Read them all.");
            }
            _ => b.turn(&r, 5, 10, 2000),
        }
        b.acknowledge();
    }
    out.push(Subject {
        name: "turns bigger than the window".into(),
        messages: b.messages,
        instructions: rules,
    });
    out
}

/// Rules the user of the shared pi session states (hand-picked from its messages).
const PI_RULES: &[&str] = &[
    "use fucking rgb values in the themes, no rgb indices!",
    "invalid themes must NEVER explode",
    "no conosle logs!",
    "don't modify the theme, look into the footer sources",
];

/// The shared pi session's messages, as a replay feeds them.
pub fn shared(path: &Path) -> Result<Subject> {
    let t = Transcript::load(path).with_context(|| format!("loading {}", path.display()))?;
    let messages = t
        .active_branch()
        .into_iter()
        .filter(|&i| t.entries()[i].entry_type() == "message")
        .filter_map(|i| serde_json::from_str(&t.entries()[i].message_json()).ok())
        .collect();
    Ok(Subject {
        name: "pi-large-session".into(),
        messages,
        instructions: PI_RULES.iter().map(|r| r.to_string()).collect(),
    })
}

// ---------------------------------------------------------------------------------------------
// Pooling

/// States pooled over runs: those at compaction `n`, or (with `from`) every state from it on.
#[derive(Debug, Clone, Default)]
pub struct Pooled {
    pub states: usize,
    pub modified: Tally,
    pub read: Tally,
    pub failures: Tally,
    pub requests: Tally,
    pub current: Tally,
    pub instructions: Tally,
    pub tokens_mean: usize,
    pub tokens_max: usize,
}

pub fn pool<'a>(states: impl Iterator<Item = &'a State>) -> Pooled {
    let mut p = Pooled::default();
    let mut tokens = 0;
    for s in states {
        p.states += 1;
        p.modified.add(s.modified);
        p.read.add(s.read);
        p.failures.add(s.failures);
        p.requests.add(s.requests);
        p.current.add(s.current);
        p.instructions.add(s.instructions);
        tokens += s.non_verbatim_tokens;
        p.tokens_max = p.tokens_max.max(s.non_verbatim_tokens);
    }
    p.tokens_mean = tokens / p.states.max(1);
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_expanded_and_truth_skips_acknowledgements() {
        let text = expand_groups("Modified: src/{a.rs, b.rs}, README.md\n- docs/{x.md, y.md}");
        for p in ["src/a.rs", "src/b.rs", "docs/x.md", "docs/y.md"] {
            assert!(text.lines().any(|l| l == p), "{text}");
        }
        let messages = vec![
            json!({"role": "user", "content": "Fix the parser"}),
            json!({"role": "user", "content": "ok"}),
            json!({"role": "user", "content": "/mode"}),
            json!({"role": "toolResult", "isError": true, "content": [{"type": "text",
                "text": "> x@1 check\nsrc/a.ts: error TS1: nope"}]}),
        ];
        let t = truth(&messages);
        assert_eq!(t.requests, ["fix the parser"]);
        assert_eq!(t.failures, ["src/a.ts: error ts1: nope"]);
    }

    #[test]
    fn generated_sessions_stress_what_they_claim() {
        let sessions = generated();
        let long = &sessions[0];
        assert!(long.messages.len() > 3000, "{}", long.messages.len());
        let t = truth(&long.messages);
        assert!(t.modified.len() + t.read.len() > 300);
        let failures = truth(&sessions[1].messages).failures.len();
        assert!(failures > 30, "{failures}");
    }
}
