//! The files a session touched: read and modified paths from tool calls, grouped by
//! directory for the summary.
use super::*;

/// Paths that say nothing durable about the work: scratch files and directories.
pub(super) fn transient_path(path: &str) -> bool {
    let p = path.trim();
    p.is_empty()
        || p.ends_with('/')
        || p == "."
        || p.starts_with("/tmp/")
        || p.starts_with("/var/folders/")
        || p.starts_with("/private/var/folders/")
        || p.starts_with("/private/tmp/")
        || p.contains("/TemporaryItems/")
}

/// Files read and files modified, from tool-call arguments (`path` / `file_path`) of read vs
/// edit/write tools. A file both read and modified is listed as modified only.
pub fn file_operations(messages: &[MessageView]) -> (Vec<String>, Vec<String>) {
    let (mut read, mut modified) = (Vec::new(), Vec::new());
    let (mut read_seen, mut modified_seen) = (HashSet::new(), HashSet::new());
    for call in messages.iter().flat_map(|m| &m.tool_calls) {
        let Ok(args) = serde_json::from_str::<Value>(&call.arguments) else {
            continue;
        };
        let Some(path) = ["path", "file_path"]
            .iter()
            .find_map(|k| args.get(k).and_then(Value::as_str))
        else {
            continue;
        };
        if transient_path(path) {
            continue;
        }
        let (list, seen) = match call.name.to_ascii_lowercase().as_str() {
            "read" | "read_file" | "view" => (&mut read, &mut read_seen),
            "edit" | "write" | "edit_file" | "write_file" | "multiedit" | "multi_edit" => {
                (&mut modified, &mut modified_seen)
            }
            _ => continue,
        };
        if !path.is_empty() && seen.insert(path.to_string()) {
            list.push(path.to_string());
        }
    }
    drop_modified(&mut read, &modified);
    (read, modified)
}

/// `a/b/x.ts, a/b/y.ts, c.md` → `a/b/{x.ts, y.ts}` and `c.md`: one line per directory, in the
/// order directories first appear.
pub(super) fn grouped(paths: &[String]) -> Vec<String> {
    let mut groups: Vec<(&str, Vec<&str>)> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for path in paths {
        let (dir, file) = dir_and_file(path);
        let g = *group_of.entry(dir).or_insert_with(|| {
            groups.push((dir, Vec::new()));
            groups.len() - 1
        });
        groups[g].1.push(file);
    }
    groups
        .into_iter()
        .map(|(dir, files)| match files.as_slice() {
            [one] => format!("{dir}{one}"),
            _ => format!("{dir}{{{}}}", files.join(", ")),
        })
        .collect()
}

/// `a/b/x.ts` → (`a/b/`, `x.ts`): the directory a path is grouped under, and its name.
pub(super) fn dir_and_file(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(slash) => path.split_at(slash + 1),
        None => ("", path),
    }
}

/// The rendered size of [`grouped`]`(paths)` (each line with its `- ` and line break).
pub(super) fn grouped_size(paths: &[String]) -> usize {
    grouped(paths).iter().map(|l| l.len() + 3).sum()
}

/// The paths of one grouped line.
pub(super) fn ungrouped(line: &str) -> Vec<String> {
    match line.find('{') {
        Some(open) if line.ends_with('}') => {
            let dir = &line[..open];
            line[open + 1..line.len() - 1]
                .split(", ")
                .map(|f| format!("{dir}{f}"))
                .collect()
        }
        _ => vec![line.to_string()],
    }
}
