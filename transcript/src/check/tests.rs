use super::*;
use crate::Transcript;
use crate::generate::{Mutator, coding_session, to_v1, with_outside_parent};

/// Fragments that reach the readers' special cases.
const TOKENS: &[&[u8]] = &[
    b"}{",
    b"\n",
    b"\r\n",
    b"\xff",
    b"\"type\":\"compaction\",\"summary\":\"s\",\"firstKeptEntryId\":\"x\",",
    b"\"parentId\":null,",
    b"\"usage\":{\"totalTokens\":1e300},",
    b"\\ud83d",
    b"\\ud83d\\ude00",
    b"\\u0041",
    b"\t",
    b"\x01",
    b"\"role\":\"narrator\",",
    b"\"",
    b"\\",
];

fn head_of(path: &Path) -> Option<(Head, u64)> {
    let mut file = crate::read::open_transcript(path).unwrap();
    let head = crate::read::read_head(&mut file, path).ok()?;
    Some((head, std::fs::metadata(path).unwrap().len()))
}

/// The check's answer, in words (the chunk size must not change it).
fn verdict(path: &Path, chunk: u64) -> String {
    let Some((head, len)) = head_of(path) else {
        return "no header".into();
    };
    match check_in_chunks(path, &head, len, chunk) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {e}"),
    }
}

/// The check agrees with loading: what loads is valid with loading's warnings (or left to
/// it), what does not is refused in the same words; a chain's messages are its context's.
fn agrees_with_loading(path: &Path) {
    let Some((head, len)) = head_of(path) else {
        return;
    };
    let case = || String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned();
    match (Transcript::load(path), check(path, &head, len)) {
        (_, Ok(Verdict::AskTheLoader)) => {}
        (Ok(t), Ok(Verdict::Valid(warnings, shape))) => {
            assert_eq!(warnings, t.warnings(), "{}", case());
            if let Some(messages) = shape.chain_messages {
                assert_eq!(messages, t.context().len(), "{}", case());
                assert_eq!(t.compaction_count(), 0, "{}", case());
            }
        }
        (Err(e), Err(refused)) => assert_eq!(refused.to_string(), e.to_string(), "{}", case()),
        (loaded, checked) => panic!("load {loaded:?}, check {checked:?} on {}", case()),
    }
}

fn inputs() -> Vec<Vec<u8>> {
    let session = coding_session(21, 30);
    let mut inputs = vec![
        session.clone().into_bytes(),
        to_v1(&session).into_bytes(),
        with_outside_parent(&session, "elsewhere").into_bytes(),
    ];
    // A line written twice: two entries with one id, which linking refuses.
    let again = session.lines().nth(3).unwrap_or_default();
    inputs.push(format!("{session}{again}\n").into_bytes());
    let mut rng = Mutator::new(0x00c0_ffee);
    for k in 0..240 {
        let mutant = rng.mutate(&inputs[k % 3], TOKENS);
        inputs.push(mutant);
    }
    inputs
}

#[test]
fn every_chunk_size_gives_one_verdict_and_it_is_loadings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut kinds = std::collections::BTreeSet::new();
    for input in inputs() {
        std::fs::write(&path, &input).unwrap();
        agrees_with_loading(&path);
        let whole = verdict(&path, 1 << 40);
        kinds.insert(whole.split([' ', '(']).next().unwrap_or("").to_string());
        for chunk in [5, 97, 1024] {
            assert_eq!(
                verdict(&path, chunk),
                whole,
                "chunks of {chunk} bytes on {}",
                String::from_utf8_lossy(&input)
            );
        }
    }
    // The mutants reach every kind of answer ("no": the header is broken).
    assert_eq!(
        kinds.into_iter().collect::<Vec<_>>(),
        ["AskTheLoader", "Valid", "error", "no"]
    );
}

/// A line the scan answers for is one `Entry::decode` reads, with the same ids and note.
#[test]
fn the_scan_answers_only_what_decoding_answers() {
    let mut answered = 0;
    for input in inputs() {
        let Ok(text) = String::from_utf8(input) else {
            continue;
        };
        let version = if text.contains("\"version\":1") { 1 } else { 3 };
        for line in text.lines().skip(1) {
            let Some(fast) = crate::envelope::message_line_unmeasured(line) else {
                continue;
            };
            let Some(ids) = fast_ids(&fast, line, version) else {
                continue;
            };
            let decode = Decode {
                version,
                index: 5,
                entry_count: usize::MAX,
            };
            let lenient = crate::lenient::str(line);
            assert_eq!(lenient, line, "a line with a lone surrogate was answered");
            let mut e = Entry::decode(Line::from(line), 1, &decode)
                .unwrap_or_else(|p| panic!("{p}: {line}"));
            assert_eq!(e.take_note(), fast.summary.usage_problem, "{line}");
            if let FastIds::Own(id, parent) = ids {
                assert_eq!(e.id(), &line[id], "{line}");
                assert_eq!(e.parent_id(), parent.map(|p| &line[p]), "{line}");
            }
            assert_eq!(e.context_role().is_some(), !fast.summary.excluded, "{line}");
            answered += 1;
        }
    }
    assert!(answered > 1000, "{answered}");
}
