use super::*;
use crate::Transcript;
use crate::entry::Entry;
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

/// The answer of [`check_remembering`] with its records in `dir`, in words.
fn remembering_verdict(path: &Path, dir: &Path, chunk: u64) -> String {
    let Some((head, len)) = head_of(path) else {
        return "no header".into();
    };
    match check_remembering_in_chunks(path, &head, len, dir, chunk) {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {e}"),
    }
}

/// The file holds `earlier`, is checked (and remembered), then is written `now` in place (the
/// same inode): the check then gives the answer of a whole check of `now`. Returns whether
/// the first check left a record, so that the second could resume from it.
fn resumed_agrees(path: &Path, earlier: &[u8], now: &[u8], what: &str) -> bool {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(path, earlier).unwrap();
    remembering_verdict(path, dir.path(), 1024);
    let recorded = std::fs::read_dir(dir.path()).unwrap().count() > 0;
    std::fs::write(path, now).unwrap();
    assert_eq!(
        remembering_verdict(path, dir.path(), 1024),
        verdict(path, 1 << 40),
        "{what}, resumed, on {}",
        String::from_utf8_lossy(now)
    );
    recorded
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
    // The same answers from a check resumed after what a check of an earlier content of the
    // file remembered: appended to, truncated, rewritten in place at the same length,
    // appended with a malformed line.
    let mut resumed = 0;
    for input in inputs().into_iter().step_by(2) {
        let half = memchr::memrchr(b'\n', &input[..input.len() / 2]).map_or(0, |n| n + 1);
        resumed += usize::from(resumed_agrees(&path, &input[..half], &input, "appended"));
        let cut = &input[..input.len() * 2 / 3];
        resumed_agrees(&path, &input, cut, "truncated");
        let mut rewritten = input.clone();
        let at = input.len() / 3;
        rewritten[at] = if rewritten[at] == b'"' { b'x' } else { b'"' };
        resumed_agrees(&path, &input, &rewritten, "rewritten in place");
        let malformed = [&input[..], b"{\"type\":\"message\",\"id\":\n"].concat();
        resumed_agrees(&path, &input, &malformed, "appended a malformed line");
    }
    assert!(resumed > 50, "only {resumed} checks resumed");
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

/// A record is taken only while the file still starts with the bytes it was made of: appended
/// to, yes; truncated, replaced by another file, or rewritten in place where its hash looks,
/// no. The file is larger than what is hashed whole: its edges and samples tell.
#[test]
fn a_record_is_recalled_only_while_the_file_starts_with_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let checked = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let session = coding_session(5, 5000).into_bytes();
    assert!(session.len() > 5 << 20, "{}", session.len());
    std::fs::write(&path, &session).unwrap();
    let (head, len) = head_of(&path).unwrap();
    check_remembering(&path, &head, len, checked.path()).unwrap();
    let recalled = |bytes: &[u8]| {
        std::fs::write(&path, bytes).unwrap();
        let (head, len) = head_of(&path).unwrap();
        remembered::recall(checked.path(), &path, &head, len, "s").map(|(_, end)| end)
    };
    assert_eq!(recalled(&session), Some(len));
    let appended = [&session[..], b"{\"type\":\"mess"].concat();
    assert_eq!(recalled(&appended), Some(len));
    assert_eq!(recalled(&session[..session.len() - 1]), None, "truncated");
    // A byte of the first line after the header, of the last 64 KiB and of the first
    // sampled block.
    let first_line = head.body_start as usize + 20;
    for at in [first_line, session.len() - 100, (64 << 10) + 5] {
        let mut rewritten = session.clone();
        rewritten[at] ^= 1;
        assert_eq!(recalled(&rewritten), None, "rewritten at {at}");
    }
    assert_eq!(recalled(&session), Some(len));
    // Another file with the same bytes renamed over it (both exist at once: another inode).
    let other = dir.path().join("other.jsonl");
    std::fs::write(&other, &session).unwrap();
    std::fs::rename(&other, &path).unwrap();
    let (head, len) = head_of(&path).unwrap();
    assert!(remembered::recall(checked.path(), &path, &head, len, "s").is_none());
}
