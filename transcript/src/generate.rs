//! Deterministic synthetic transcripts for tests, benchmarks and the `demo` command: a
//! realistic v3 coding-agent session (prompts, thinking, tool calls on files, results with
//! occasional failures, growing usage), identical for identical seeds.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::time::format_iso_ms;
use crate::tokens::estimate_message;

/// splitmix64: tiny, fast, and good enough to vary synthetic text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..hi` (lo when the range is empty).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next() % (hi - lo)
        }
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    /// A UUID-shaped (version 4) id.
    fn uuid_v4(&mut self) -> String {
        format!(
            "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
            self.next() as u32,
            self.next() as u16,
            self.next() & 0xfff,
            self.next() & 0xfff,
            self.next() & 0xffff_ffff_ffff
        )
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.range(0, items.len() as u64) as usize]
    }
}

const FILES: &[&str] = &[
    "src/main.rs",
    "src/lib.rs",
    "src/config.rs",
    "src/parser.rs",
    "src/server/mod.rs",
    "src/server/routes.rs",
    "src/db/schema.rs",
    "src/util.rs",
    "tests/integration.rs",
    "Cargo.toml",
    "README.md",
    "docs/design.md",
];

const PROMPTS: &[&str] = &[
    "Read {f} and explain how errors are handled there.",
    "The tests in {f} fail with a panic on empty input, can you fix it?",
    "Add a --verbose flag and wire it through {f}.",
    "Why does {f} allocate on every request?",
    "Refactor {f} to remove the duplicated parsing code.",
    "Can you write unit tests for {f}?",
    "Run the test suite and fix whatever breaks in {f}.",
    "Rename the config field `timeout` to `timeout_ms` in {f} and everywhere it is used.",
    "Is the retry logic in {f} safe to call concurrently?",
];

const REMARKS: &[&str] = &[
    "Let me look at the relevant code first.",
    "I'll check how this is wired before changing anything.",
    "The problem is in the error path; I'll fix it and rerun the tests.",
    "That change compiles; now let me verify the behaviour.",
    "I found the duplicated logic and will pull it into one helper.",
];

const THOUGHTS: &[&str] = &[
    "The user wants a minimal change. The parser returns early on empty input, so the panic must come from the unwrap after it.",
    "Two call sites build the same struct; a constructor would remove the duplication without changing behaviour.",
    "Before editing I should read the tests to see what behaviour is pinned.",
];

fn code_lines(rng: &mut Rng, path: &str, lines: u64) -> String {
    let mut out = format!("// {path}\n");
    for k in 0..lines {
        let line = match rng.range(0, 5) {
            0 => format!("pub fn handler_{k}(req: &Request) -> Result<Response, Error> {{"),
            1 => format!("    let value_{k} = config.get(\"key_{k}\").ok_or(Error::Missing)?;"),
            2 => format!("    tracing::debug!(step = {k}, \"processing request\");"),
            3 => "}".to_string(),
            _ => format!("    // TODO({k}): handle the timeout case explicitly"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

struct Session {
    rng: Rng,
    lines: Vec<String>,
    ids: HashSet<String>,
    parent: Option<String>,
    now_ms: u64,
    messages: usize,
    limit: usize,
    context_tokens: u64,
    last_total: u64,
}

impl Session {
    fn full(&self) -> bool {
        self.messages >= self.limit
    }

    fn fresh_id(&mut self) -> String {
        loop {
            let id = format!("{:08x}", self.rng.next() as u32);
            if self.ids.insert(id.clone()) {
                return id;
            }
        }
    }

    fn entry(&mut self, mut fields: Value) {
        let id = self.fresh_id();
        let mut entry = json!({
            "type": fields["type"].clone(),
            "id": id,
            "parentId": self.parent,
            "timestamp": format_iso_ms(self.now_ms),
        });
        if let (Some(e), Some(f)) = (entry.as_object_mut(), fields.as_object_mut()) {
            f.remove("type");
            e.append(f);
        }
        self.lines.push(entry.to_string());
        self.parent = Some(id);
    }

    /// Push a message entry; returns false once the message budget is used up.
    fn message(&mut self, mut message: Value) -> bool {
        if self.full() {
            return false;
        }
        self.now_ms += self.rng.range(150, 4000);
        message["timestamp"] = json!(self.now_ms);
        self.context_tokens += u64::from(estimate_message(&message));
        self.entry(json!({"type": "message", "message": message}));
        self.messages += 1;
        true
    }

    fn usage(&mut self, output: u64) -> Value {
        let cache_read = self.last_total.min(self.context_tokens);
        let input = self.context_tokens - cache_read;
        let total = self.context_tokens + output;
        self.last_total = total;
        json!({
            "input": input, "output": output, "cacheRead": cache_read, "cacheWrite": 0,
            "totalTokens": total,
            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0},
        })
    }

    fn assistant(&mut self, content: Vec<Value>, stop: &str) -> bool {
        let probe = json!({"role": "assistant", "content": content});
        let output = u64::from(estimate_message(&probe));
        let usage = self.usage(output);
        self.message(json!({
            "role": "assistant", "content": content, "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sonnet-4-5", "usage": usage,
            "stopReason": stop,
        }))
    }

    fn tool_call(&mut self, focus: &str) -> (String, String, Value) {
        let id = format!("toolu_{:016x}", self.rng.next());
        let path = if self.rng.chance(60) {
            focus.to_string()
        } else {
            self.rng.pick(FILES).to_string()
        };
        let (name, args) = match self.rng.range(0, 10) {
            0..=3 => ("read", json!({"path": path})),
            4..=6 => (
                "bash",
                json!({"command": self.rng.pick(&["cargo test", "cargo build", "rg -n timeout src", "ls src"])}),
            ),
            7..=8 => (
                "edit",
                json!({"path": path, "oldText": "let value = parse(input).unwrap();", "newText": "let value = parse(input)?;"}),
            ),
            _ => (
                "write",
                json!({"path": path, "content": code_lines(&mut self.rng, &path, 12)}),
            ),
        };
        (id, name.to_string(), args)
    }

    fn tool_result(&mut self, id: &str, name: &str, args: &Value) -> bool {
        let path = args["path"].as_str().unwrap_or("");
        let failed = self.rng.chance(8);
        let text = match (name, failed) {
            ("read", false) => {
                let n = self.rng.range(20, 160);
                code_lines(&mut self.rng, path, n)
            }
            ("read", true) => format!("ENOENT: no such file or directory, open '{path}'"),
            ("bash", false) => {
                let n = self.rng.range(3, 40);
                (0..n).map(|k| format!("test module::case_{k} ... ok\n")).collect::<String>()
                    + "\ntest result: ok."
            }
            ("bash", true) => "error[E0308]: mismatched types\n  --> src/lib.rs:42:5\nCommand exited with code 101".into(),
            ("edit", false) => format!("Successfully replaced text in {path}."),
            ("edit", true) => format!("Could not find the exact text in {path}. The old text must match exactly."),
            (_, false) => format!("Successfully wrote to {path}."),
            (_, true) => format!("EACCES: permission denied, open '{path}'"),
        };
        self.tool_result_message(id, name, &text, failed)
    }

    fn tool_result_message(&mut self, id: &str, name: &str, text: &str, failed: bool) -> bool {
        self.message(json!({
            "role": "toolResult", "toolCallId": id, "toolName": name,
            "content": [{"type": "text", "text": text}], "isError": failed,
        }))
    }

    /// Turn `k` of a chat of short messages: a distinct one-line request and a one-line
    /// answer; every third turn the answer calls a tool on a file of its own, every seventh
    /// such call fails with an error line of its own, and a later call on the same file
    /// succeeds (so every list a summary keeps grows with the session).
    fn short_turn(&mut self, k: u64) -> bool {
        self.now_ms += self.rng.range(2_000, 30_000);
        let verb = self
            .rng
            .pick(&["check", "rename", "test", "document", "simplify"]);
        let request = format!("Step {k}: {verb} the handler in module {}.", k % 89);
        if !self.message(json!({"role": "user", "content": request})) {
            return false;
        }
        if !k.is_multiple_of(3) {
            let answer = format!("Done with step {k}; the {verb} is in.");
            return self.assistant(vec![json!({"type": "text", "text": answer})], "stop");
        }
        self.short_tool_call(k)
    }

    /// The answer of short turn `k` calling its tool, and the tool's result.
    fn short_tool_call(&mut self, k: u64) -> bool {
        let call = k / 3;
        let (name, path) = short_call_target(call);
        let id = format!("toolu_{k:016x}");
        let args = json!({"path": path});
        let content = vec![
            json!({"type": "text", "text": format!("Looking at {path}.")}),
            json!({"type": "toolCall", "id": id, "name": name, "arguments": args}),
        ];
        if !self.assistant(content, "toolUse") {
            return false;
        }
        let failed = call.is_multiple_of(7);
        let text = if failed {
            format!("error: step {k} cannot open {path}")
        } else {
            format!("ok: {path}")
        };
        self.tool_result_message(&id, name, &text, failed)
    }

    /// One user prompt and the agent's work on it.
    fn turn(&mut self) -> bool {
        self.now_ms += self.rng.range(10_000, 120_000);
        let focus = self.rng.pick(FILES).to_string();
        let prompt = self.rng.pick(PROMPTS).replace("{f}", &focus);
        if !self.message(json!({"role": "user", "content": [{"type": "text", "text": prompt}]})) {
            return false;
        }
        if self.rng.chance(3) {
            return self.aborted();
        }
        for _ in 0..self.rng.range(1, 5) {
            if !self.tool_round(&focus) {
                return false;
            }
        }
        self.done(&focus)
    }

    /// The agent's closing answer on `focus`.
    fn done(&mut self, focus: &str) -> bool {
        let done = format!(
            "Done. I changed {focus} and the tests pass. {}",
            if self.rng.chance(25) {
                "Do you want me to also update the docs?"
            } else {
                ""
            }
        );
        self.assistant(
            vec![json!({"type": "text", "text": done.trim_end()})],
            "stop",
        )
    }

    /// An interrupted request: pi records it with zero usage and stopReason "aborted".
    fn aborted(&mut self) -> bool {
        self.message(json!({
            "role": "assistant", "content": [], "api": "anthropic-messages",
            "provider": "anthropic", "model": "claude-sonnet-4-5",
            "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "aborted", "errorMessage": "Request was aborted",
        }))
    }

    /// One assistant message calling tools on or near `focus`, and their results.
    fn tool_round(&mut self, focus: &str) -> bool {
        let mut content = Vec::new();
        if self.rng.chance(30) {
            content.push(json!({"type": "thinking", "thinking": self.rng.pick(THOUGHTS), "thinkingSignature": "sig"}));
        }
        content.push(json!({"type": "text", "text": self.rng.pick(REMARKS)}));
        let calls: Vec<_> = (0..self.rng.range(1, 4))
            .map(|_| self.tool_call(focus))
            .collect();
        for (id, name, args) in &calls {
            content.push(json!({"type": "toolCall", "id": id, "name": name, "arguments": args}));
        }
        if !self.assistant(content, "toolUse") {
            return false;
        }
        (calls.iter()).all(|(id, name, args)| self.tool_result(id, name, args))
    }
}

/// The tool and file of a short session's call number `call`: a failed call is retried (and
/// so resolved) two calls later, on the same file.
fn short_call_target(call: u64) -> (&'static str, String) {
    let retry = call % 7 == 2;
    let file = if retry { call - 2 } else { call };
    if call.is_multiple_of(2) {
        ("edit", format!("src/m{}/f{file}.rs", file % 40))
    } else {
        ("read", format!("docs/d{}/n{file}.md", file % 25))
    }
}

/// A v3 session of `messages` short messages (see `Session::short_turn`), deterministic for
/// `seed`: the shape whose summaries and compactions must stay linear in the message count.
pub fn short_message_session(seed: u64, messages: usize) -> String {
    let mut s = Session::start(seed, messages);
    let mut k = 0;
    while s.short_turn(k) {
        k += 1;
    }
    s.finish()
}

/// `text` (a generated v3 session) with its first entry hanging off `parent`, an entry outside
/// the file: what a session continued from another file looks like (OpenClaw writes these).
pub fn with_outside_parent(text: &str, parent: &str) -> String {
    let Some((header, body)) = text.split_once('\n') else {
        return text.to_string();
    };
    let replaced = body.replacen(
        "\"parentId\":null",
        &format!("\"parentId\":{}", Value::String(parent.into())),
        1,
    );
    format!("{header}\n{replaced}")
}

/// `text` (a generated v3 session, one branch) as a version 1 file: no `version` in the header
/// and no `id` / `parentId` in the entries, which v1 readers derive from the line order.
pub fn to_v1(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for (n, line) in text.lines().enumerate() {
        if n == 0 {
            out.push_str(&line.replacen("\"version\":3,", "", 1));
        } else {
            // Generated entries start `{"type":"…","id":"…","parentId":…,"timestamp":…`.
            match (line.find(",\"id\":"), line.find(",\"timestamp\":")) {
                (Some(from), Some(to)) if from < to => {
                    out.push_str(&line[..from]);
                    out.push_str(&line[to..]);
                }
                _ => out.push_str(line),
            }
        }
        out.push('\n');
    }
    out
}

/// A v3 coding-agent session with exactly `messages` message entries (plus the header and a
/// `model_change` entry), deterministic for `seed`.
pub fn coding_session(seed: u64, messages: usize) -> String {
    let mut s = Session::start(seed, messages);
    while s.turn() {}
    s.finish()
}

impl Session {
    /// The header and a `model_change` entry; the messages follow.
    fn start(seed: u64, messages: usize) -> Session {
        let mut rng = Rng(seed ^ 0x005E_ED0F_C7A5);
        let session_id = rng.uuid_v4();
        let start = start_ms(seed);
        let header = json!({
            "type": "session", "version": 3, "id": session_id,
            "timestamp": format_iso_ms(start), "cwd": format!("/home/dev/project-{}", seed % 100),
        });
        let mut s = Session {
            rng,
            lines: vec![header.to_string()],
            ids: HashSet::new(),
            parent: None,
            now_ms: start,
            messages: 0,
            limit: messages,
            context_tokens: 1500, // system prompt and tool definitions
            last_total: 0,
        };
        s.entry(
            json!({"type": "model_change", "provider": "anthropic", "modelId": "claude-sonnet-4-5"}),
        );
        s
    }

    fn finish(self) -> String {
        let mut out = self.lines.join("\n");
        out.push('\n');
        out
    }
}

/// When the session of `seed` starts: 2025-01-01 plus a seed-dependent day, so sessions of
/// different seeds do not overlap.
fn start_ms(seed: u64) -> u64 {
    1_735_689_600_000 + (seed % 365) * 86_400_000
}

/// Damage done to transcripts the way crashes, editors and other writers do it, reproducibly
/// (xorshift64*), for the tests that check every reader gives one verdict.
pub struct Mutator(u64);

impl Mutator {
    /// The sequence for `seed` (any value).
    pub fn new(seed: u64) -> Mutator {
        Mutator(seed | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    /// `input` changed in one to three places: a bit flipped, bytes cut, one of `tokens`
    /// inserted, the end cut off, two lines glued, a line written again elsewhere (duplicate
    /// ids, branches), a digit changed (ids, counts, indices).
    pub fn mutate(&mut self, input: &[u8], tokens: &[&[u8]]) -> Vec<u8> {
        let mut out = input.to_vec();
        for _ in 0..1 + self.below(3) {
            let len = out.len();
            let at = self.below(len + 1);
            match self.below(7) {
                0 if len > 0 => self.flip_bit(&mut out),
                1 => {
                    let end = (at + 1 + self.below(64)).min(len);
                    out.drain(at..end);
                }
                2 if !tokens.is_empty() => {
                    let t = tokens[self.below(tokens.len())];
                    out.splice(at..at, t.iter().copied());
                }
                3 => out.truncate(at),
                4 => glue_lines(&mut out, at),
                5 => self.repeat_line(&mut out),
                _ => self.change_digit(&mut out),
            }
        }
        out
    }

    fn flip_bit(&mut self, out: &mut [u8]) {
        let i = self.below(out.len());
        out[i] ^= 1 << self.below(8);
    }

    /// A line of `out` written again at a random place (duplicate ids, branches).
    fn repeat_line(&mut self, out: &mut Vec<u8>) {
        let lines: Vec<&[u8]> = out.split(|&b| b == b'\n').collect();
        let mut line = lines[self.below(lines.len())].to_vec();
        line.push(b'\n');
        let to = self.below(out.len() + 1);
        out.splice(to..to, line);
    }

    /// A digit of `out` changed (ids, counts, indices), when it has one.
    fn change_digit(&mut self, out: &mut [u8]) {
        let digits: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].is_ascii_digit())
            .collect();
        if !digits.is_empty() {
            let i = digits[self.below(digits.len())];
            out[i] = b'0' + self.below(10) as u8;
        }
    }
}

/// The first line break at or after `at` removed: two lines glued.
fn glue_lines(out: &mut Vec<u8>, at: usize) {
    let len = out.len();
    if let Some(nl) = out[at.min(len)..].iter().position(|&b| b == b'\n') {
        out.remove(at + nl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Role, Transcript};

    #[test]
    fn deterministic_and_exact_message_count() {
        let a = coding_session(7, 120);
        assert_eq!(a, coding_session(7, 120));
        assert_ne!(a, coding_session(8, 120));
        let t = Transcript::parse(&a, "gen").unwrap();
        assert_eq!(t.header().version(), 3);
        let messages = t
            .entries()
            .iter()
            .filter(|e| e.entry_type() == "message")
            .count();
        assert_eq!(messages, 120);
        assert!(t.warnings().is_empty());
        assert_eq!(
            t.to_v3_string(),
            a,
            "generated text is already canonical v3"
        );
    }

    #[test]
    fn short_messages_are_short_distinct_and_exactly_counted() {
        let text = short_message_session(5, 300);
        assert_eq!(text, short_message_session(5, 300));
        let t = Transcript::parse(&text, "gen").unwrap();
        assert!(t.warnings().is_empty(), "{:?}", t.warnings());
        let views: Vec<_> = t.entries().iter().filter_map(|e| e.view()).collect();
        assert_eq!(views.len(), 300);
        assert!(views.iter().all(|v| v.text.len() < 80), "short messages");
        let requests: HashSet<&str> = views
            .iter()
            .filter(|v| v.role == Role::User)
            .map(|v| v.text.as_str())
            .collect();
        let asked = views.iter().filter(|v| v.role == Role::User).count();
        assert_eq!(requests.len(), asked, "every request is distinct");
        assert!(views.iter().any(|v| v.is_error));
        assert!(views.iter().any(|v| !v.tool_calls.is_empty()));
    }

    #[test]
    fn outside_parents_and_v1_files_read_as_the_same_session() {
        let text = coding_session(2, 60);
        let v3 = Transcript::parse(&text, "v3").unwrap();
        let outside = Transcript::parse(&with_outside_parent(&text, "feedf00d"), "o").unwrap();
        assert_eq!(outside.entries()[0].parent_id(), Some("feedf00d"));
        assert_eq!(outside.warnings().len(), 1, "{:?}", outside.warnings());
        assert_eq!(outside.context_tokens(), v3.context_tokens());
        let v1_text = to_v1(&text);
        assert!(!v1_text.contains("\"parentId\"") && !v1_text.contains("\"version\""));
        let v1 = Transcript::parse(&v1_text, "v1").unwrap();
        assert_eq!(v1.header().version(), 1);
        assert!(v1.warnings().is_empty(), "{:?}", v1.warnings());
        assert_eq!(v1.context().len(), v3.context().len());
        assert_eq!(v1.context_tokens(), v3.context_tokens());
    }

    #[test]
    fn realistic_content() {
        let t = Transcript::parse(&coding_session(3, 400), "gen").unwrap();
        let views: Vec<_> = t.entries().iter().filter_map(|e| e.view()).collect();
        let has = |r: Role| views.iter().any(|v| v.role == r);
        assert!(has(Role::User) && has(Role::Assistant) && has(Role::ToolResult));
        assert!(views.iter().any(|v| v.is_error));
        let names: HashSet<&str> = views
            .iter()
            .flat_map(|v| &v.tool_calls)
            .map(|c| c.name.as_str())
            .collect();
        for tool in ["read", "bash", "edit", "write"] {
            assert!(names.contains(tool), "{tool}");
        }
        // usage totals grow over the session
        let totals: Vec<u64> = t.entries().iter().filter_map(|e| e.usage_total()).collect();
        assert!(totals.len() > 10);
        assert!(totals.windows(2).all(|w| w[0] < w[1]), "{totals:?}");
        // timestamps increase
        let ts: Vec<u64> = views.iter().map(|v| v.timestamp).collect();
        assert!(ts.windows(2).all(|w| w[0] < w[1]));
    }
}
