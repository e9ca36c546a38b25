//! Measured figures (run with `cargo test --release -p ctxhost-transcript --test measure --
//! --ignored --nocapture`): status on a 1 GB transcript, extractive compaction of a 200k-token
//! session, and the savings of each layer on the shared pi session.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use ctxhost_transcript::compaction::{self, Extractive, Layer, Request, Settings, Trigger};
use ctxhost_transcript::generate::coding_session;
use ctxhost_transcript::{Transcript, status};

/// `CTXHOST_BENCH_DIR` (default /tmp): where the 1 GB file is written, then deleted.
#[test]
#[ignore]
fn status_on_a_1gb_transcript() {
    let dir = PathBuf::from(std::env::var("CTXHOST_BENCH_DIR").unwrap_or("/tmp".into()));
    let path = dir.join(format!("ctxhost-1gb-{}.jsonl", std::process::id()));
    // The tail: a ~10 MB session with a compaction near its end.
    let mut tail = Transcript::parse(&coding_session(77, 6000), "tail").unwrap();
    let mut s = Settings {
        context_window: (tail.context_tokens() as f64 / 0.9) as u64,
        ..Settings::default()
    };
    s.policy.prune_minimum_tokens = u64::MAX;
    let plan = compaction::prepare(&tail, &s, &Request::default())
        .unwrap()
        .run(&Extractive);
    tail.append_compaction(&plan.to_new_compaction(), "2026-01-01T00:00:00.000Z")
        .unwrap();
    // ~10 MB of session after the compaction: the scan reads and parses all of it.
    let more = Transcript::parse(&coding_session(78, 4000), "more").unwrap();
    for e in more
        .entries()
        .iter()
        .filter(|e| e.entry_type() == "message")
    {
        let m: serde_json::Value = serde_json::from_str(&e.message_json()).unwrap();
        tail.append_message(&m, "2026-01-01T00:00:01.000Z").unwrap();
    }
    let tail_text = tail.to_v3_string();
    let (header, tail_body) = tail_text.split_once('\n').unwrap();
    // The filler: another session's lines repeated with distinct ids, up to 1 GB in total.
    let filler = coding_session(5, 4000);
    let filler_body = filler.split_once('\n').unwrap().1;
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "{header}").unwrap();
    let target = 1u64 << 30;
    let mut written = header.len() as u64 + 1;
    let mut k = 0;
    while written + (tail_body.len() as u64) < target {
        let body = filler_body
            .replace("\"id\":\"", &format!("\"id\":\"r{k}-"))
            .replace("\"parentId\":\"", &format!("\"parentId\":\"r{k}-"));
        let take = ((target - written - tail_body.len() as u64) as usize).min(body.len());
        let cut = body[..take].rfind('\n').map_or(0, |i| i + 1);
        if cut == 0 {
            break;
        }
        f.write_all(&body.as_bytes()[..cut]).unwrap();
        written += cut as u64;
        k += 1;
    }
    f.write_all(tail_body.as_bytes()).unwrap();
    f.flush().unwrap();
    drop(f);
    let size = std::fs::metadata(&path).unwrap().len();
    let _ = status::scan(&path).unwrap(); // warm the page cache for the tail
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..5 {
        let started = Instant::now();
        last = Some(status::scan(&path).unwrap());
        times.push(started.elapsed());
    }
    times.sort();
    let st = last.unwrap();
    println!(
        "status on {:.2} GB ({:.1} MB tail read): median {:?}, min {:?}, max {:?}; {} context tokens, {} compaction(s) ({})",
        size as f64 / 1e9,
        st.bytes_scanned as f64 / 1048576.0,
        times[2],
        times[0],
        times[4],
        st.context_tokens,
        st.compaction_count,
        st.count_source.as_str()
    );
    assert_eq!(st.context_tokens, tail.context_tokens());
    assert_eq!(st.compaction_count, 1);
    std::fs::remove_file(&path).unwrap();
    assert!(times[2].as_millis() < 1000);
}

#[test]
#[ignore]
fn extractive_compaction_of_a_200k_token_session() {
    let mut n = 1000;
    let t = loop {
        let t = Transcript::parse(&coding_session(21, n), "g").unwrap();
        if t.context_tokens() >= 200_000 {
            break t;
        }
        n += 200;
    };
    let s = Settings {
        context_window: 210_000,
        ..Settings::default()
    };
    let mut s = s;
    s.policy.prune_minimum_tokens = u64::MAX;
    let started = Instant::now();
    let plan = compaction::prepare(&t, &s, &Request::default())
        .unwrap()
        .run(&Extractive);
    let elapsed = started.elapsed();
    println!(
        "extractive compaction of a {}-token session ({n} messages): {:?}; {} -> {} tokens, {} messages summarized, summary {} chars, layer {}",
        t.context_tokens(),
        elapsed,
        plan.tokens_before,
        plan.tokens_after,
        plan.messages_compacted,
        plan.summary.chars().count(),
        plan.layer
    );
}

#[test]
#[ignore]
fn layer_savings_on_the_shared_pi_session() {
    let path = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data"))
        .join("pi-large-session.jsonl");
    if !path.exists() {
        println!("skipped: ../shared/data absent");
        return;
    }
    let t = Transcript::load(&path).unwrap();
    let tokens = t.context_tokens();
    for (layer, share) in [
        (Layer::Prune, 0.84),
        (Layer::Summarize, 0.90),
        (Layer::Full, 0.96),
    ] {
        let mut s = Settings {
            context_window: (tokens as f64 / share) as u64,
            ..Settings::default()
        };
        if layer != Layer::Prune {
            s.policy.prune_minimum_tokens = u64::MAX; // each layer on its own
        }
        let started = Instant::now();
        let job = compaction::prepare(
            &t,
            &s,
            &Request {
                trigger: Trigger::Auto,
                ..Request::default()
            },
        )
        .unwrap();
        assert_eq!(job.layer(), layer);
        let plan = job.run(&Extractive);
        let mut after = t.clone();
        after
            .append_compaction(&plan.to_new_compaction(), "2026-01-01T00:00:00.000Z")
            .unwrap();
        println!(
            "{:<9} at {:.0}% of a {}-token window: {} -> {} tokens (context after: {}), saved {} ({:.1}%), {} summarized, {} tool outputs pruned, {:?}",
            layer,
            share * 100.0,
            s.context_window,
            plan.tokens_before,
            plan.tokens_after,
            after.context_tokens(),
            plan.tokens_before.saturating_sub(after.context_tokens()),
            (1.0 - after.context_tokens() as f64 / plan.tokens_before as f64) * 100.0,
            plan.messages_compacted,
            plan.details.pruned_entry_ids.len(),
            started.elapsed()
        );
    }
}

/// A file written by another tool (no counters in the compaction's details), whose active
/// branch runs through the whole file: status walks all of it to count the compactions.
#[test]
#[ignore]
fn status_walk_on_a_foreign_1gb_transcript() {
    let dir = PathBuf::from(std::env::var("CTXHOST_BENCH_DIR").unwrap_or("/tmp".into()));
    let path = dir.join(format!("ctxhost-1gb-walk-{}.jsonl", std::process::id()));
    let chunk = coding_session(5, 4000);
    let (header, body) = chunk.split_once('\n').unwrap();
    let last_id = {
        let last = body.lines().last().unwrap();
        let v: serde_json::Value = serde_json::from_str(last).unwrap();
        v["id"].as_str().unwrap().to_string()
    };
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    writeln!(f, "{header}").unwrap();
    let target = 1u64 << 30;
    let mut written = header.len() as u64 + 1;
    let mut k = 0;
    while written + body.len() as u64 <= target {
        // Each copy hangs under the previous one's last entry: one branch through the file.
        let root = if k == 0 {
            "null".to_string()
        } else {
            format!("\"r{}-{last_id}\"", k - 1)
        };
        let copy = body
            .replace("\"id\":\"", &format!("\"id\":\"r{k}-"))
            .replace("\"parentId\":\"", &format!("\"parentId\":\"r{k}-"))
            .replacen("\"parentId\":null", &format!("\"parentId\":{root}"), 1);
        f.write_all(copy.as_bytes()).unwrap();
        written += copy.len() as u64;
        k += 1;
    }
    let leaf = format!("r{}-{last_id}", k - 1);
    writeln!(
        f,
        "{{\"type\":\"compaction\",\"id\":\"c1\",\"parentId\":\"{leaf}\",\"timestamp\":\"2026-01-01T00:00:00.000Z\",\"summary\":\"s\",\"firstKeptEntryId\":\"{leaf}\",\"tokensBefore\":1000}}"
    )
    .unwrap();
    writeln!(
        f,
        "{{\"type\":\"message\",\"id\":\"u1\",\"parentId\":\"c1\",\"message\":{{\"role\":\"user\",\"content\":\"go on\"}}}}"
    )
    .unwrap();
    drop(f);
    let size = std::fs::metadata(&path).unwrap().len();
    let _ = status::scan(&path).unwrap(); // warm the page cache
    let mut times = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let started = Instant::now();
        last = Some(status::scan(&path).unwrap());
        times.push(started.elapsed());
    }
    times.sort();
    let st = last.unwrap();
    let started = Instant::now();
    let bytes = std::fs::read(&path).unwrap();
    let read_whole = started.elapsed();
    drop(bytes);
    println!(
        "status walk on {:.2} GB ({k} copies, one branch): median {:?}, min {:?}; {} compaction(s) ({}); reading the file whole takes {read_whole:?}",
        size as f64 / 1e9,
        times[1],
        times[0],
        st.compaction_count,
        st.count_source.as_str()
    );
    assert_eq!(st.compaction_count, 1);
    assert_eq!(st.count_source, status::CountSource::ActiveBranch);
    std::fs::remove_file(&path).unwrap();
}
