//! The files a session touched: read and modified paths from tool calls, grouped by
//! directory for the summary.
use super::*;

/// Files read and files modified, from tool-call arguments (`path` / `file_path`) of read vs
/// edit/write tools, by the rules engines share. A file both read and modified is listed as
/// modified only.
pub fn file_operations(messages: &[MessageView]) -> (Vec<String>, Vec<String>) {
    let mut files = FilesTouched::default();
    for call in messages.iter().flat_map(|m| &m.tool_calls) {
        let arguments = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
        files.record(&call.name, &text_fields(&arguments));
    }
    files.into_read_and_modified()
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
