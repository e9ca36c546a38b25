use super::leftovers::STALE_AFTER;
use super::*;

#[test]
fn a_rewrite_keeps_the_permissions_of_the_file_it_replaces() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, "old\n").unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    rewrite_atomically(&path, "new\n").unwrap();
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
}
use serde_json::json;

fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn rewrite_keeps_a_backup_and_no_temp_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    rewrite_atomically(&path, "one\n").unwrap();
    assert_eq!(files_in(dir.path()), ["s.jsonl"], "no backup of nothing");
    rewrite_atomically(&path, "two\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    assert_eq!(
        std::fs::read_to_string(backup_path(&path)).unwrap(),
        "one\n"
    );
    assert_eq!(files_in(dir.path()), ["s.jsonl", "s.jsonl.bak"]);
    // a failed rewrite (no such directory) names the path and leaves nothing behind
    let err = rewrite_atomically(&dir.path().join("missing/x.jsonl"), "x").unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    assert_eq!(files_in(dir.path()), ["s.jsonl", "s.jsonl.bak"]);
}

#[test]
fn append_and_reload_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let mut t = Transcript::new("sess", "/w", "2025-01-01T00:00:00.000Z");
    t.append_message(
        &json!({"role":"user","content":"a"}),
        "2025-01-01T00:00:01.000Z",
    )
    .unwrap();
    let mut f = TranscriptFile::create(&path, &t).unwrap();
    assert_eq!(f.path(), path);
    f.set_sync(false);
    assert!(!f.sync());
    let from = t.entries().len();
    t.append_message(
        &json!({"role":"assistant","content":[{"type":"text","text":"b"}],"stopReason":"stop"}),
        "2025-01-01T00:00:02.000Z",
    )
    .unwrap();
    t.append_message(
        &json!({"role":"user","content":"c"}),
        "2025-01-01T00:00:03.000Z",
    )
    .unwrap();
    f.append(&t, from).unwrap();
    f.append(&t, t.entries().len()).unwrap(); // nothing new: no-op
    assert!(f.append(&t, 99).is_err());
    drop(f);

    let (mut f2, loaded) = TranscriptFile::open(&path).unwrap();
    assert_eq!(loaded.to_v3_string(), t.to_v3_string());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), t.to_v3_string());
    assert!(
        !backup_path(&path).exists(),
        "a v3 file is not rewritten on open"
    );
    let mut loaded = loaded;
    let from = loaded.entries().len();
    loaded
        .append_message(&json!({"role":"user","content":"d"}), "t")
        .unwrap();
    f2.append(&loaded, from).unwrap();
    let again = Transcript::load(&path).unwrap();
    assert_eq!(again.entries().len(), 4);
    assert_eq!(again.context(), vec![0, 1, 2, 3]);
}

/// Every file (name and bytes) in `dir`.
fn snapshot(dir: &Path) -> Vec<(String, Vec<u8>)> {
    files_in(dir)
        .into_iter()
        .map(|name| {
            let bytes = std::fs::read(dir.join(&name)).unwrap();
            (name, bytes)
        })
        .collect()
}

#[test]
fn opening_writes_nothing_and_the_first_append_migrates_or_repairs() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.jsonl");
    let v1 = "{\"type\":\"session\",\"id\":\"s\"}\n{\"type\":\"message\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n";
    std::fs::write(&path, v1).unwrap();
    let private = std::fs::Permissions::from_mode(0o600);
    std::fs::set_permissions(&path, private).unwrap();
    let before = snapshot(dir.path());
    let (mut f, mut t) = TranscriptFile::open(&path).unwrap();
    assert_eq!(
        snapshot(dir.path()),
        before,
        "opening a v1 file writes nothing"
    );
    assert_eq!(f.backup(), None);
    let from = t.entries().len();
    t.append_message(&json!({"role":"user","content":"y"}), "t")
        .unwrap();
    f.append(&t, from).unwrap();
    assert_eq!(f.backup(), Some(backup_path(&path).as_path()));
    assert_eq!(std::fs::read_to_string(backup_path(&path)).unwrap(), v1);
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(on_disk.starts_with("{\"type\":\"session\",\"version\":3,"));
    assert_eq!(on_disk, t.to_v3_string());
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&path), 0o600, "the migrated file stays private");
    assert_eq!(mode(&backup_path(&path)), 0o600);
    // appends after the rewrite go to the new file
    let from = t.entries().len();
    t.append_message(&json!({"role":"user","content":"w"}), "t")
        .unwrap();
    f.append(&t, from).unwrap();
    assert_eq!(Transcript::load(&path).unwrap().entries().len(), 3);

    // a crash mid-append: the torn tail is dropped by the next write, which starts a
    // fresh line, and kept in the backup
    let torn = dir.path().join("torn.jsonl");
    let torn_text = format!("{}{{\"type\":\"mess", t.to_v3_string());
    std::fs::write(&torn, &torn_text).unwrap();
    let before = snapshot(dir.path());
    let (mut f, mut t2) = TranscriptFile::open(&torn).unwrap();
    assert_eq!(
        snapshot(dir.path()),
        before,
        "opening a torn file writes nothing"
    );
    assert_eq!(t2.warnings().len(), 1);
    assert!(
        t2.warnings()[0]
            .message
            .contains("keeps its bytes in a backup"),
        "{}",
        t2.warnings()[0]
    );
    let from = t2.entries().len();
    t2.append_message(&json!({"role":"user","content":"z"}), "t")
        .unwrap();
    f.append(&t2, from).unwrap();
    assert_eq!(
        std::fs::read_to_string(backup_path(&torn)).unwrap(),
        torn_text
    );
    let back = Transcript::load(&torn).unwrap();
    assert!(back.warnings().is_empty());
    assert_eq!(back.entries().len(), 4);
}

/// A v1 file as real pi files have it, two entries on one line: pi skips the line, and
/// so does the context, but the rewrite that migrates the file keeps them.
#[test]
fn entries_on_one_line_of_a_v1_file_survive_its_migration() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.jsonl");
    let message = |text: &str| {
        format!("{{\"type\":\"message\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}")
    };
    let (a, b, c) = (message("first"), message("glued one"), message("glued two"));
    let v1 = format!(
        "{{\"type\":\"session\",\"id\":\"s\"}}\n{a}\n{b}{c}\n{}\n",
        message("last")
    );
    std::fs::write(&path, &v1).unwrap();
    let (mut f, mut t) = TranscriptFile::open(&path).unwrap();
    let context: Vec<String> = (t.context().iter())
        .map(|&i| t.entries()[i].id().to_string())
        .collect();
    let from = t.entries().len();
    t.append_message(&json!({"role":"user","content":"new"}), "t")
        .unwrap();
    f.append(&t, from).unwrap();
    let on_disk = std::fs::read_to_string(&path).unwrap();
    assert!(on_disk.contains(&format!("[{b},{c}]")), "{on_disk}");
    let back = Transcript::load(&path).unwrap();
    assert!(back.warnings().is_empty(), "{:?}", back.warnings());
    let after: Vec<String> = (back.context().iter())
        .map(|&i| back.entries()[i].id().to_string())
        .collect();
    assert_eq!(
        after[..after.len() - 1],
        context[..],
        "the context is what it was"
    );
    assert_eq!(std::fs::read_to_string(f.backup().unwrap()).unwrap(), v1);
}

/// A v2 file opened by two writers: the one that migrates it first wins, the other's
/// handle reaches only the backup, so its append is refused instead of going there.
#[test]
fn an_append_after_another_writers_migration_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.jsonl");
    let v2 = crate::generate::coding_session(3, 4).replacen("\"version\":3", "\"version\":2", 1);
    std::fs::write(&path, &v2).unwrap();
    let (mut first, mut first_view) = TranscriptFile::open(&path).unwrap();
    let (mut second, mut second_view) = TranscriptFile::open(&path).unwrap();
    let message = json!({"role":"user","content":"m"});
    let at = first_view.entries().len();
    first_view.append_message(&message, "t").unwrap();
    first.append(&first_view, at).unwrap();
    let at = second_view.entries().len();
    second_view.append_message(&message, "t").unwrap();
    let refused = second.append(&second_view, at).unwrap_err();
    assert!(
        matches!(refused, TranscriptError::Changed { .. }),
        "{refused}"
    );
    assert_eq!(std::fs::read_to_string(backup_path(&path)).unwrap(), v2);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        first_view.to_v3_string()
    );
}

#[test]
fn a_backup_of_another_file_is_never_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let bak = backup_path(&path);
    // an earlier version's backup (the v1 file before its migration), then the file grows
    std::fs::write(&bak, "the v1 original\n").unwrap();
    std::fs::write(&path, "v3 one\n").unwrap();
    let kept = rewrite_atomically(&path, "v3 two\n").unwrap().unwrap();
    assert_eq!(std::fs::read_to_string(&bak).unwrap(), "the v1 original\n");
    assert_eq!(kept, dir.path().join("s.jsonl.bak.1"));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "v3 one\n");
    // the file grown by appends since: its backup holds nothing it lacks, so it is reused
    std::fs::write(&path, "v3 one\nmore\n").unwrap();
    let reused = rewrite_atomically(&path, "v3 three\n").unwrap().unwrap();
    assert_eq!(reused, dir.path().join("s.jsonl.bak.1"));
    assert_eq!(std::fs::read_to_string(&reused).unwrap(), "v3 one\nmore\n");
    assert_eq!(std::fs::read_to_string(&bak).unwrap(), "the v1 original\n");
    assert_eq!(
        files_in(dir.path()),
        ["s.jsonl", "s.jsonl.bak", "s.jsonl.bak.1"]
    );
}

/// A crash at every step of a rewrite (each temp chunk, fsync, backup, rename) leaves the
/// file as the old version or the new one, loadable, never a mix; the next rewrite works.
#[test]
fn a_crash_at_any_point_of_a_rewrite_leaves_old_or_new() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let old = crate::generate::coding_session(1, 60);
    let new_t = Transcript::parse(&crate::generate::coding_session(2, 80), "n").unwrap();
    let new = new_t.to_v3_string();
    let chunk = new.len() / 7 + 1;
    let mut saw_old = 0;
    let mut saw_new = 0;
    for crash_before in 0.. {
        std::fs::write(&path, &old).unwrap();
        let tmp = dir.path().join(format!("s.jsonl.tmp-crash-{crash_before}"));
        let result =
            write_and_swap_steps(&path, &tmp, new.as_bytes(), chunk, Some(crash_before), true);
        let on_disk = std::fs::read_to_string(&path).unwrap();
        assert!(
            on_disk == old || on_disk == new,
            "a mix after crash at step {crash_before}"
        );
        let loaded = Transcript::load(&path).unwrap();
        assert!(loaded.warnings().is_empty());
        if on_disk == old {
            saw_old += 1;
        } else {
            saw_new += 1;
            // the backup holds the old version once the new one is in place
            assert_eq!(std::fs::read_to_string(backup_path(&path)).unwrap(), old);
        }
        // recovery: the next rewrite succeeds whatever was left behind
        rewrite_atomically(&path, &new).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), new);
        let _ = std::fs::remove_file(&tmp);
        if result.is_ok() {
            break;
        }
    }
    assert!(saw_old >= 8, "crash points before the rename: {saw_old}");
    assert!(saw_new >= 1);
}

#[test]
fn stale_temp_files_are_removed_on_open_and_a_writers_own_never() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let t = Transcript::parse(&crate::generate::coding_session(1, 10), "g").unwrap();
    std::fs::write(&path, t.to_v3_string()).unwrap();
    // a pid that has exited: a child we waited for
    let dead = std::process::Command::new("true")
        .spawn()
        .and_then(|mut c| c.wait().map(|_| c.id()))
        .unwrap();
    let aged = std::time::SystemTime::now() - 2 * STALE_AFTER;
    let make = |name: String, old: bool| {
        let p = dir.path().join(name);
        let mut f = File::create(&p).unwrap();
        f.write_all(b"partial").unwrap();
        if old {
            f.set_modified(aged).unwrap();
        }
        p
    };
    // A killed rewrite's file is stale at once: its writer is gone and holds no lock.
    let killed = make(format!("s.jsonl.tmp-{dead}-0"), false);
    // An unlocked file of a live process left for long: a reused pid, say.
    let abandoned = make(format!("s.jsonl.tmp-{}-7", std::process::id()), true);
    // A rewrite in progress holds its lock, however dead its pid looks (another pid
    // namespace) and however long it has been writing.
    let writing = make(format!("s.jsonl.tmp-{dead}-1"), true);
    let writer = File::open(&writing).unwrap();
    writer.lock().unwrap();
    // This process's own, just created: maybe a rewrite about to take its lock.
    let starting = make(format!("s.jsonl.tmp-{}-8", std::process::id()), false);
    let other = make(format!("other.jsonl.tmp-{dead}-0"), true);
    let odd = make("s.jsonl.tmp-crash-3".to_string(), true);
    let _ = TranscriptFile::open(&path).unwrap();
    assert!(!killed.exists(), "a killed rewrite's temp file is removed");
    assert!(!abandoned.exists(), "an idle unlocked temp file is removed");
    for kept in [&writing, &starting, &other, &odd] {
        assert!(kept.exists(), "{} kept", kept.display());
    }
    drop(writer);
    // the same on the next rewrite, once the writer is gone
    rewrite_atomically(&path, &t.to_v3_string()).unwrap();
    assert!(!writing.exists());
}

#[test]
fn an_append_after_another_writers_writes_nothing_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, crate::generate::coding_session(1, 6)).unwrap();
    // Two writers, as two processes would have them: each read the file and holds a handle.
    let (mut first, mut first_view) = TranscriptFile::open(&path).unwrap();
    let (mut second, mut second_view) = TranscriptFile::open(&path).unwrap();
    let message = |text: &str| serde_json::json!({ "role": "user", "content": text });
    let at = first_view.entries().len();
    first_view
        .append_message(&message("from the first"), "2026-11-26T00:00:00.000Z")
        .unwrap();
    first.append(&first_view, at).unwrap();
    let before = std::fs::read_to_string(&path).unwrap();

    let at = second_view.entries().len();
    second_view
        .append_message(&message("from the second"), "2026-11-26T00:00:01.000Z")
        .unwrap();
    let refused = second.append(&second_view, at).unwrap_err();
    assert!(
        matches!(refused, TranscriptError::Changed { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("another writer appended"),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        before,
        "nothing written"
    );

    // The first writer goes on: its own appends are what it expects.
    let at = first_view.entries().len();
    first_view
        .append_message(&message("again"), "2026-11-26T00:00:02.000Z")
        .unwrap();
    first.append(&first_view, at).unwrap();
    let (_, reloaded) = TranscriptFile::open(&path).unwrap();
    assert_eq!(reloaded.entries().len(), first_view.entries().len());
}

#[test]
fn missing_file_error_names_the_path() {
    let err = TranscriptFile::open(Path::new("/nonexistent/dir/s.jsonl")).unwrap_err();
    assert!(
        err.to_string().starts_with("/nonexistent/dir/s.jsonl: "),
        "{err}"
    );
}

#[test]
fn write_atomically_replaces_whole_keeps_no_backup_and_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("file.bin");
    write_atomically(&path, b"first").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"first");
    write_atomically(&path, b"second, longer").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"second, longer");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["file.bin"]);
}

#[test]
fn a_failed_write_atomically_leaves_what_was_there_and_no_temp_file() {
    let dir = tempfile::tempdir().unwrap();
    // A non-empty directory cannot be renamed over: the write fails after the temp file.
    let blocked = dir.path().join("blocked");
    std::fs::create_dir_all(blocked.join("child")).unwrap();
    assert!(write_atomically(&blocked, b"new").is_err());
    assert!(blocked.join("child").is_dir());
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["blocked"]);
}
