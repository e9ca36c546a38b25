//! The recall index's figures: the first index of a session (time, size against the
//! transcript's), a search, and catching up with appended messages.
//!
//! Clocks:
//! - first index: `RecallIndex::open` of a missing index + `sync` of the loaded transcript
//!   (the transcript's own load is not in it);
//! - search: `RecallIndex::search` for one query of three words drawn from the session's user
//!   messages (deterministically), the index level with the transcript;
//! - catch-up: `sync` after appending a batch of messages in memory, per message.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Result;
use ctxhost::recall::{RecallIndex, SearchQuery};
use ctxhost_transcript::{Role, Transcript};
use serde_json::json;

use crate::{Budget, Sampler, Samples};

/// What the recall rows report for one session file.
pub struct RecallFigures {
    pub transcript_bytes: u64,
    pub entries: usize,
    pub first_index: Duration,
    pub index_bytes: u64,
    pub search: Samples,
    pub catch_up_per_message: Duration,
}

/// Measures the index of the transcript at `path`, building it beside a copy's name in `dir`
/// (the transcript itself is only read).
pub fn measure(path: &Path, dir: &Path, budget: Budget) -> Result<RecallFigures> {
    let mut transcript = Transcript::load(path)?;
    let index_file = dir.join("bench.recall.sqlite");
    let _ = std::fs::remove_file(&index_file);
    let started = Instant::now();
    let mut index = RecallIndex::open_file(&index_file)?;
    index.sync(&transcript)?;
    let first_index = started.elapsed();
    let index_bytes = index.size_bytes();

    let queries = queries(&transcript);
    anyhow::ensure!(!queries.is_empty(), "no user messages to draw queries from");
    let mut sampler = Sampler::new(budget);
    let mut n = 0;
    while sampler.more() {
        let query = SearchQuery::words(queries[n % queries.len()].clone());
        n += 1;
        let t = Instant::now();
        let hits = index.search(&transcript, &query)?;
        sampler.push(t.elapsed());
        std::hint::black_box(hits);
    }

    const BATCH: usize = 200;
    for i in 0..BATCH {
        transcript.append_message(
            &json!({"role": "user", "content": format!("appended message {i} about the quarterly zeppelin report")}),
            "2026-11-25T10:00:00.000Z",
        )?;
    }
    let t = Instant::now();
    index.sync(&transcript)?;
    let catch_up_per_message = t.elapsed() / BATCH as u32;
    let _ = std::fs::remove_file(&index_file);
    Ok(RecallFigures {
        transcript_bytes: std::fs::metadata(path)?.len(),
        entries: transcript.entries().len(),
        first_index,
        index_bytes,
        search: sampler.done(),
        catch_up_per_message,
    })
}

/// Three-word queries from user messages: words of five letters or more, taken in order, from
/// every 7th user message (a fixed pick, so runs compare).
fn queries(transcript: &Transcript) -> Vec<String> {
    transcript
        .entries()
        .iter()
        .filter_map(|e| e.view().filter(|v| v.role == Role::User))
        .step_by(7)
        .filter_map(|v| {
            let words: Vec<&str> = v
                .text
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| w.len() >= 5)
                .take(3)
                .collect();
            (words.len() == 3).then(|| words.join(" "))
        })
        .take(200)
        .collect()
}
