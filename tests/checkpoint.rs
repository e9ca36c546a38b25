//! The bundled checkpoint-manager engine in the real host: gauge lines, checkpoint files,
//! restores after a compaction and in a new session, and a replay of the shared transcript.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ctxhost::replay::replay;
use ctxhost::{
    AssembleOptions, AssembledItem, Assembly, CompactOptions, SessionTarget, TurnRequest,
};
use ctxhost_tests::{
    Scratch, block_on, last_compaction, open_session, recorded_messages, shared_transcript,
};
use serde_json::Value;

const WINDOW: u64 = 32_000;

fn config(extra_engine_config: &str) -> String {
    format!(
        "{{ plugins: {{ slots: {{ contextEngine: 'checkpoint-manager' }}, \
         entries: {{ 'checkpoint-manager': {{ config: {{ {extra_engine_config} }} }} }} }}, \
         agents: {{ defaults: {{ contextWindow: {WINDOW} }} }} }}"
    )
}

/// The checkpoint files of a session key, oldest first.
fn checkpoints(scratch: &Scratch, safe_session: &str) -> Vec<(String, String)> {
    let dir = scratch
        .home()
        .state_dir("checkpoint-manager")
        .join("context/checkpoints")
        .join(safe_session);
    let mut files: Vec<(u32, String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let number = name
                .strip_prefix("cp_")?
                .strip_suffix(".yaml")?
                .parse()
                .ok()?;
            let yaml = std::fs::read_to_string(entry.path()).unwrap();
            Some((number, name, yaml))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|(_, name, yaml)| (name, yaml))
        .collect()
}

/// A top-level `  key: value` of a section, as written (test-side reading, independent of the
/// engine's YAML code).
fn scalar<'a>(yaml: &'a str, key: &str) -> Option<&'a str> {
    yaml.lines()
        .find_map(|line| line.trim_start().strip_prefix(&format!("{key}: ")))
}

/// The items of a `  key:` list of plain or double-quoted scalars.
fn list(yaml: &str, key: &str) -> Vec<String> {
    let header = format!("  {key}:");
    let mut lines = yaml.lines().skip_while(|line| *line != header);
    if lines.next().is_none() {
        return Vec::new();
    }
    lines
        .map_while(|line| line.strip_prefix("  - "))
        .map(|item| {
            if item.starts_with('"') {
                serde_json::from_str(item).expect("a simple double-quoted scalar")
            } else {
                item.to_string()
            }
        })
        .collect()
}

/// The restore messages an assembly inserted.
fn inserted_texts(assembly: &Assembly) -> Vec<String> {
    inserted_of(assembly, "checkpoint-restore")
}

/// The texts of the custom messages of `custom_type` an assembly inserted.
fn inserted_of(assembly: &Assembly, custom_type: &str) -> Vec<String> {
    assembly
        .items()
        .filter_map(|item| match item {
            AssembledItem::Inserted(json) => {
                let message: Value = serde_json::from_str(&json).unwrap();
                (message["customType"] == custom_type)
                    .then(|| Some(message["content"].as_str()?.to_string()))
                    .flatten()
            }
            AssembledItem::Entry(_) => None,
        })
        .collect()
}

fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

#[test]
fn gauge_checkpoints_and_restores_in_the_host() {
    let scratch = Scratch::new();
    let host = scratch.host(&config(""));
    let source = scratch.generated_transcript(7, 400);
    let first_file = scratch.path("a/work.jsonl");
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        assert_eq!(engine.info().id, "checkpoint-manager");
        assert!(!engine.info().owns_compaction);

        let mut session = open_session(&host, SessionTarget::Path(first_file.clone())).await;
        // The gauge reads the host's estimate of the context (the entries' counts), so the
        // loop below measures the same way.
        session.set_estimates_only(true);
        for message in recorded_messages(&source) {
            if message["role"] == "assistant" {
                let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
                assert!(
                    inserted_texts(&assembly).is_empty(),
                    "no restore before any compaction"
                );
                assert_eq!(
                    assembly.system_prompt_addition, None,
                    "the gauge is a message"
                );
            }
            session.append(&message).await.unwrap();
            if session.context_tokens() as f64 > 0.85 * WINDOW as f64 {
                break;
            }
        }
        // A reading taken inside a tool loop waits for the next turn: start one. Every reading
        // since the start stays where it was given.
        let prompt = serde_json::json!({
            "role": "user", "content": "next step", "timestamp": 1_700_000_000_000u64
        });
        session.append(&prompt).await.unwrap();
        let assembly = session.assemble(&AssembleOptions::default()).await.unwrap();
        let lines = inserted_of(&assembly, "checkpoint-gauge");
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("[Context: 7") && l.ends_with(" tokens]")),
            "{lines:?}"
        );
        assert!(
            lines
                .iter()
                .any(|l| l.ends_with("/32k tokens | Checkpoint saved]")),
            "{lines:?}"
        );
        let saved = checkpoints(&scratch, "work");
        assert!(!saved.is_empty());
        assert_eq!(scalar(&saved[0].1, "trigger"), Some("auto-80pct"));
        assert_eq!(
            scalar(&saved[0].1, "schema"),
            Some("\"openclaw/checkpoint\"")
        );
        assert_eq!(scalar(&saved[0].1, "session_key"), Some("work"));

        let outcome = session.compact(&CompactOptions::forced()).await.unwrap();
        assert!(outcome.compacted, "{outcome:?}");
        let saved = checkpoints(&scratch, "work");
        let (name, yaml) = saved.last().unwrap();
        assert_eq!(scalar(yaml, "trigger"), Some("compaction"), "{name}");
        assert_eq!(scalar(yaml, "compaction_count"), Some("1"));

        let after = session.assemble(&AssembleOptions::default()).await.unwrap();
        let summary = last_compaction(&session).unwrap();
        assert_eq!(after.items().next(), Some(AssembledItem::Entry(summary)));
        assert!(matches!(
            after.items().nth(1),
            Some(AssembledItem::Inserted(_))
        ));
        let restore = inserted_texts(&after);
        assert_eq!(restore.len(), 1);
        let id = name.trim_end_matches(".yaml");
        assert!(
            restore[0].starts_with(&format!("[Checkpoint {id} of work,")),
            "{}",
            restore[0]
        );
        assert!(restore[0].contains("the context was compacted"));
        eprintln!(
            "restore after compaction, {} tokens:\n{}",
            tokens(&restore[0]),
            restore[0]
        );
        // Something new since the compaction's checkpoint: closing writes a `session-end` one.
        session
            .append(&serde_json::json!({
                "role": "user", "content": "thanks, that is all", "timestamp": 1_700_000_000_000u64
            }))
            .await
            .unwrap();
        session.close().await.unwrap();

        let saved = checkpoints(&scratch, "work");
        assert_eq!(
            scalar(&saved.last().unwrap().1, "trigger"),
            Some("session-end")
        );
        assert!(saved.len() <= 5, "retention");

        // A new transcript under the same key starts with the restore.
        let mut next = open_session(&host, SessionTarget::Path(scratch.path("b/work.jsonl"))).await;
        let assembly = next.assemble(&AssembleOptions::default()).await.unwrap();
        let restore = inserted_texts(&assembly);
        assert_eq!(restore.len(), 1, "{assembly:?}");
        assert!(
            restore[0].contains("a new session started"),
            "{}",
            restore[0]
        );
        next.close().await.unwrap();

        // The same transcript reopened is not a new session.
        let mut reopened = open_session(&host, SessionTarget::Path(first_file.clone())).await;
        let assembly = reopened
            .assemble(&AssembleOptions::default())
            .await
            .unwrap();
        assert_eq!(assembly.inserted(), 0);
        reopened.close().await.unwrap();
    });
}

/// The files the transcript's `edit` / `write` calls name, read straight from the JSONL.
fn modified_files(path: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    for line in std::fs::read_to_string(path).unwrap().lines() {
        let Ok(entry) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let message = &entry["message"];
        if message["role"] != "assistant" {
            continue;
        }
        for block in message["content"].as_array().into_iter().flatten() {
            let name = block["name"].as_str().unwrap_or_default();
            if block["type"] == "toolCall" && matches!(name, "edit" | "write") {
                let arguments = &block["arguments"];
                if let Some(path) = arguments["path"]
                    .as_str()
                    .or(arguments["file_path"].as_str())
                {
                    files.insert(path.trim().to_string());
                }
            }
        }
    }
    files
}

#[test]
fn replay_of_the_shared_transcript_records_the_files_it_modified() {
    let Some(source) = shared_transcript("checkpoint-manager replay") else {
        return;
    };
    let expected = modified_files(&source);
    assert!(expected.len() > 3, "{expected:?}");
    let scratch = Scratch::new();
    let host = scratch.host(&config("retention: 100"));
    let output: PathBuf = scratch.path("replay.jsonl");
    let report = block_on(async {
        let engine = host.active_engine().await.unwrap();
        replay(&host, &source, engine, WINDOW, &output, &mut ())
            .await
            .unwrap()
    });
    assert!(!report.compactions.is_empty(), "{report:?}");
    // The gauge is inserted where it was read, never a system-prompt line that would change
    // the start of every request.
    assert!(
        report.system_prompt_additions.is_empty(),
        "{:?}",
        report.system_prompt_additions
    );
    assert!(report.inserted_messages > 0, "restores and gauge notes");
    assert_eq!(
        report.prefix_kept_turns, report.turns_between_compactions,
        "between compactions every request extends the previous one"
    );

    let saved = checkpoints(&scratch, "replay");
    let compaction_checkpoints = saved
        .iter()
        .filter(|(_, yaml)| scalar(yaml, "trigger") == Some("compaction"))
        .count();
    assert_eq!(compaction_checkpoints, report.compactions.len());
    let mut previous = BTreeSet::new();
    for (name, yaml) in &saved {
        let files: BTreeSet<String> = list(yaml, "files_modified").into_iter().collect();
        assert!(
            files.is_subset(&expected),
            "{name}: {:?}",
            files.difference(&expected)
        );
        assert!(previous.is_subset(&files), "{name} forgot files");
        previous = files;
    }
    let (name, last) = saved.last().unwrap();
    assert_eq!(scalar(last, "trigger"), Some("session-end"), "{name}");
    assert_eq!(
        previous, expected,
        "the session-end checkpoint lists every modified file"
    );
    eprintln!(
        "replay: {} checkpoints ({compaction_checkpoints} at compaction), {} compactions, {} files modified",
        saved.len(),
        report.compactions.len(),
        expected.len()
    );
}

/// Drives the shared transcript the way `replay` does, collecting the restore messages the
/// engine inserts, and prints their sizes (the closing note reports them).
#[test]
fn restore_messages_on_the_shared_transcript_stay_lean() {
    let Some(source) = shared_transcript("checkpoint-manager restore sizes") else {
        return;
    };
    let scratch = Scratch::new();
    let host = scratch.host(&config(""));
    let mut restores: Vec<String> = Vec::new();
    let mut compact_ms = Vec::new();
    block_on(async {
        let engine = host.active_engine().await.unwrap();
        let settings = host.compaction_settings().for_window(WINDOW);
        let mut session = host
            .open_session(
                &SessionTarget::Path(scratch.path("measure.jsonl")),
                &ctxhost::SessionOptions::on(engine).with_settings(settings),
            )
            .await
            .unwrap();
        // As `replay` does: the recorded usage is the original session's, not this one's.
        session.set_estimates_only(true);
        for message in recorded_messages(&source) {
            if message["role"] == "assistant" {
                let turn = session
                    .assemble_turn(&TurnRequest::default(), &mut |_| {})
                    .await
                    .unwrap();
                if let Some(compaction) = &turn.compaction {
                    // The turn's engine time: checkpoint + built-in compaction, and the assemble
                    // around them.
                    compact_ms.push(turn.engine_time.as_secs_f64() * 1e3);
                    if compaction.compacted().is_some() {
                        let inserted = inserted_texts(&turn.assembly);
                        assert_eq!(inserted.len(), 1, "a restore after each compaction");
                        restores.extend(inserted);
                    }
                }
            }
            session.append(&message).await.unwrap();
        }
        session.close().await.unwrap();
    });
    assert!(!restores.is_empty());
    let mut sizes: Vec<usize> = restores.iter().map(|r| tokens(r)).collect();
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    let max = sizes[sizes.len() - 1];
    let largest = restores.iter().max_by_key(|r| tokens(r)).unwrap();
    eprintln!(
        "restore messages on the shared transcript at a {WINDOW}-token window: {} restores, median {median} tokens, max {max} tokens (chars/4); compact calls (checkpoint + built-in compaction) median {:.1} ms",
        sizes.len(),
        {
            compact_ms.sort_by(f64::total_cmp);
            compact_ms[compact_ms.len() / 2]
        }
    );
    eprintln!("largest restore:\n{largest}");
    assert!(
        max <= 700,
        "restores stay within the spec's 600–700 token target: {max}"
    );
}
