//! The compiled-component cache: what no engine uses any more is removed after an install or
//! uninstall, and on `plugins gc`.

use std::path::PathBuf;
use std::process::ExitCode;

use ctxhost::Host;

use crate::cli::output::stdout_line;

/// What a cache collection removed (or would) and what it kept.
#[derive(Default)]
pub(super) struct Collected {
    removed: usize,
    removed_bytes: u64,
    kept_bytes: u64,
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Removes cache entries (`<content hash>-<engine hash>.cwasm` and the files beside it with the
/// same stem, e.g. `.check`) of components no engine of the plugins directory uses now, and, of
/// several for one component, all but the newest (older ones were compiled by an earlier
/// wasmtime). Best effort: a failure only leaves a file.
pub(super) fn collect_cache(host: &Host, dry_run: bool) -> Collected {
    #[derive(Default)]
    struct Entry {
        modified: Option<std::time::SystemTime>,
        bytes: u64,
        files: Vec<PathBuf>,
    }
    let registry = ctxhost::plugins::Registry::discover(&host.home().plugins_dir());
    let used: std::collections::HashSet<String> = registry
        .all()
        .filter_map(|engine| engine.component_bytes().ok())
        .map(|bytes| blake3::hash(&bytes).to_hex()[..32].to_string())
        .collect();
    // (content hash, stem) -> its files; a BTreeMap keeps one component's entries together.
    let mut entries: std::collections::BTreeMap<(String, String), Entry> = Default::default();
    for file in std::fs::read_dir(host.home().cache_dir())
        .into_iter()
        .flatten()
        .flatten()
    {
        let path = file.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let Some((stem, extension)) = name.split_once('.') else {
            continue;
        };
        let Some((content, engine)) = stem.split_once('-') else {
            continue;
        };
        if content.len() != 32
            || engine.is_empty()
            || !content.bytes().all(|b| b.is_ascii_hexdigit())
        {
            continue;
        }
        let Ok(meta) = file.metadata() else {
            continue;
        };
        let entry = entries
            .entry((content.to_string(), stem.to_string()))
            .or_default();
        if extension == "cwasm" {
            entry.modified = meta.modified().ok();
        }
        entry.bytes += meta.len();
        entry.files.push(path);
    }
    let mut newest: std::collections::HashMap<&str, (&str, Option<std::time::SystemTime>)> =
        Default::default();
    for ((content, stem), entry) in &entries {
        let best = newest.entry(content).or_insert((stem, entry.modified));
        if entry.modified > best.1 {
            *best = (stem, entry.modified);
        }
    }
    let mut collected = Collected::default();
    for ((content, stem), entry) in &entries {
        let keep =
            used.contains(content) && newest.get(content.as_str()).is_some_and(|(s, _)| s == stem);
        if keep {
            collected.kept_bytes += entry.bytes;
            continue;
        }
        if !dry_run {
            for file in &entry.files {
                let _ = std::fs::remove_file(file);
            }
        }
        collected.removed += 1;
        collected.removed_bytes += entry.bytes;
    }
    collected
}

/// `plugins gc`: what `collect_cache` removed (or would), and what it kept.
pub(super) fn gc(host: &Host, dry_run: bool) -> anyhow::Result<ExitCode> {
    let gc = collect_cache(host, dry_run);
    let verb = if dry_run { "would remove" } else { "removed" };
    stdout_line!(
        "{verb} {} cached component(s), {:.1} MiB; {:.1} MiB kept in {}",
        gc.removed,
        mib(gc.removed_bytes),
        mib(gc.kept_bytes),
        host.home().cache_dir().display()
    );
    Ok(ExitCode::SUCCESS)
}
