//! Full-load throughput, without the bench harness around it:
//! `cargo run --release -p ctxhost-transcript --example load -- FILE...` loads each file
//! (`Transcript::load` + `active_branch`, as the bench's row) at least five times and for at
//! least two seconds, and prints the median wall time and MB/s, and on Linux the median time
//! on a CPU too (the thread's run time: what a machine shared with other work does not add).
//!
//! `--write-huge PATH` first writes a session of few huge messages there (8 tool results of
//! 16 MiB each, between short requests and answers), the shape a session that read big files
//! or logs has.

use std::time::{Duration, Instant};

use ctxhost_transcript::Transcript;

fn main() {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("--write-huge") {
        args.next();
        let Some(path) = args.next() else {
            eprintln!("usage: load [--write-huge PATH] FILE...");
            std::process::exit(2)
        };
        std::fs::write(&path, huge_messages(8, 16 << 20)).unwrap_or_else(|e| {
            eprintln!("{path}: {e}");
            std::process::exit(1)
        });
    }
    for path in args {
        let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
        let mut times = Vec::new();
        let mut on_cpu = Vec::new();
        let started = Instant::now();
        while times.len() < 5 || started.elapsed() < Duration::from_secs(2) {
            let cpu = run_time();
            let t = Instant::now();
            let loaded = Transcript::load(path.as_ref()).unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(1)
            });
            std::hint::black_box(loaded.active_branch());
            times.push(t.elapsed());
            on_cpu.extend(run_time().zip(cpu).map(|(after, before)| after - before));
        }
        times.sort();
        on_cpu.sort();
        let median = times[times.len() / 2];
        let mb = bytes as f64 / 1e6;
        print!(
            "{path}: {mb:.1} MB, median {:.1} ms of {} loads, {:.0} MB/s",
            median.as_secs_f64() * 1e3,
            times.len(),
            mb / median.as_secs_f64()
        );
        match on_cpu.get(on_cpu.len() / 2) {
            Some(cpu) => println!(
                "; on a CPU {:.1} ms, {:.0} MB/s",
                cpu.as_secs_f64() * 1e3,
                mb / cpu.as_secs_f64()
            ),
            None => println!(),
        }
    }
}

/// The time this thread has run on a CPU (Linux: `/proc/thread-self/schedstat`).
fn run_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(ns))
}

/// A v3 session of `n` tool results of `size` bytes of text each (lines of code and logs,
/// escapes included), each after a request and a tool call, as one chain.
fn huge_messages(n: usize, size: usize) -> String {
    let header = r#"{"type":"session","version":3,"id":"huge","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/w"}"#;
    let mut out = format!("{header}\n");
    let mut parent = serde_json::Value::Null;
    let mut push = |out: &mut String, k: usize, message: serde_json::Value| {
        let id = format!("{k:08x}");
        let line = serde_json::json!({
            "type": "message", "id": id, "parentId": parent,
            "timestamp": "2025-01-01T00:00:00.000Z", "message": message,
        });
        out.push_str(&line.to_string());
        out.push('\n');
        parent = serde_json::Value::String(id);
    };
    let text: String = (0..)
        .map(|i| {
            format!("    let value_{i} = config.get(\"key_{i}\").ok_or(Error::Missing)?; // é\n")
        })
        .scan(0, |len, l| {
            *len += l.len();
            (*len <= size).then_some(l)
        })
        .collect();
    for k in 0..n {
        let user = serde_json::json!({"role": "user", "content": format!("read file {k}")});
        push(&mut out, 3 * k, user);
        let call = serde_json::json!({"role": "assistant", "content": [
            {"type": "toolCall", "id": format!("c{k}"), "name": "read", "arguments": {"path": format!("f{k}.rs")}}],
            "usage": {"input": 10, "output": 5, "totalTokens": 15}, "stopReason": "toolUse"});
        push(&mut out, 3 * k + 1, call);
        let result = serde_json::json!({"role": "toolResult", "toolCallId": format!("c{k}"),
            "toolName": "read", "content": [{"type": "text", "text": text}], "isError": false});
        push(&mut out, 3 * k + 2, result);
    }
    out
}
