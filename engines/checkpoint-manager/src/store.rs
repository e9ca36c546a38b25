//! The engine's files, under a root directory (the component's preopened state dir; a temp dir
//! in tests):
//!
//! ```text
//! context/state/<safe_name(key)>/{decisions,thread,resources,open_items}.json
//! context/checkpoints/<safe_name(key)>/cp_NNN.yaml   immutable once written
//! context/checkpoints/<safe_name(key)>/_latest.json  {"checkpoint_id", "path"}
//! ```
//!
//! Every file is written atomically (a temp file beside it, then a rename), so a reader, or the
//! engine after a crash, sees either the old content or the new, never half of one. Checkpoints
//! are never modified: a new one gets the next number, and retention deletes the oldest.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use ctxhost_sdk::serde_json;
use ctxhost_sdk::state_dir::safe_name;

use crate::checkpoint::Checkpoint;

/// The state files, by the name the spec gives them.
pub const DECISIONS: &str = "decisions.json";
pub const THREAD: &str = "thread.json";
pub const RESOURCES: &str = "resources.json";
pub const OPEN_ITEMS: &str = "open_items.json";
/// What the context shows besides the transcript (the restore, the gauge notes). Not a part
/// of the capture, so a newer checkpoint does not make it stale.
pub const SHOWN: &str = "shown.json";
const LATEST: &str = "_latest.json";
const TEMP_MARKER: &str = ".tmp-";

/// Writes `bytes` to `path` atomically: a uniquely named temp file in the same directory,
/// flushed (and synced when `durable`), then renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no file name"))?;
    let mut temp_name = name.to_os_string();
    temp_name.push(format!(
        "{TEMP_MARKER}{}-{}",
        crate::time::now_ms(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let temp = path.with_file_name(temp_name);
    let written = (|| {
        let mut file = fs::File::create(&temp)?;
        file.write_all(bytes)?;
        if durable {
            file.sync_all()?;
        }
        fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temp);
    }
    written
}

/// A state file's content with the time it was written, to tell stale state from fresh.
#[derive(Debug, Serialize, Deserialize)]
pub struct Stamped<T> {
    pub updated_ms: u64,
    pub data: T,
}

/// `_latest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatestPointer {
    pub checkpoint_id: String,
    /// Relative to the state dir.
    pub path: String,
}

/// The newest usable checkpoint, and what went wrong finding it.
#[derive(Debug, Default)]
pub struct Latest {
    pub checkpoint: Option<Checkpoint>,
    pub warnings: Vec<String>,
}

/// One session's files.
#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
    safe: String,
}

/// The number of `cp_NNN.yaml`.
fn checkpoint_number(file_name: &str) -> Option<u32> {
    let digits = file_name.strip_prefix("cp_")?.strip_suffix(".yaml")?;
    digits
        .bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| digits.parse().ok())?
}

/// `cp_007`.
pub fn checkpoint_id(number: u32) -> String {
    format!("cp_{number:03}")
}

impl Store {
    pub fn new(root: &Path, session_key: &str) -> Self {
        Store {
            root: root.to_path_buf(),
            safe: safe_name(session_key),
        }
    }

    fn state_dir(&self) -> PathBuf {
        self.root.join("context/state").join(&self.safe)
    }

    /// `context/checkpoints/<safe_name(key)>`, relative to the root.
    fn checkpoint_rel_dir(&self) -> String {
        format!("context/checkpoints/{}", self.safe)
    }

    pub fn checkpoint_dir(&self) -> PathBuf {
        self.root.join(self.checkpoint_rel_dir())
    }

    /// Saves one state file.
    pub fn save_state<T: Serialize>(&self, name: &str, data: &T, now_ms: u64) -> io::Result<()> {
        let dir = self.state_dir();
        fs::create_dir_all(&dir)?;
        let stamped = Stamped {
            updated_ms: now_ms,
            data,
        };
        let json = serde_json::to_vec(&stamped).map_err(io::Error::other)?;
        write_atomic(&dir.join(name), &json, false)
    }

    /// Loads one state file: `Ok(None)` when there is none, `Err` when it cannot be read.
    pub fn load_state<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<Stamped<T>>, String> {
        let path = self.state_dir().join(name);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| format!("{}: {e}", path.display())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// Deletes one state file (it is stale: a checkpoint holds everything it held).
    pub fn discard_state(&self, name: &str) {
        let _ = fs::remove_file(self.state_dir().join(name));
    }

    /// Removes temp files a crash left behind in this session's directories.
    pub fn remove_stale_temps(&self) {
        for dir in [self.state_dir(), self.checkpoint_dir()] {
            let Ok(entries) = fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                if entry.file_name().to_string_lossy().contains(TEMP_MARKER) {
                    let _ = fs::remove_file(entry.path());
                }
            }
        }
    }

    /// The numbers of the checkpoints on disk, ascending.
    pub fn checkpoint_numbers(&self) -> Vec<u32> {
        let mut numbers: Vec<u32> = fs::read_dir(self.checkpoint_dir())
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| checkpoint_number(entry.file_name().to_str()?))
            .collect();
        numbers.sort_unstable();
        numbers
    }

    /// The id the next checkpoint gets: one past the highest on disk.
    pub fn next_checkpoint_id(&self) -> String {
        let last = self.checkpoint_numbers().last().copied().unwrap_or(0);
        checkpoint_id(last.saturating_add(1))
    }

    /// Writes a checkpoint under its `meta.checkpoint_id`, points `_latest.json` at it, then
    /// deletes all but the newest `retention` checkpoints. Returns the path it wrote.
    pub fn write_checkpoint(
        &self,
        checkpoint: &Checkpoint,
        retention: u32,
    ) -> Result<PathBuf, String> {
        let id = &checkpoint.meta.checkpoint_id;
        let file_name = format!("{id}.yaml");
        if checkpoint_number(&file_name).is_none() {
            return Err(format!("invalid checkpoint id {id:?}"));
        }
        let dir = self.checkpoint_dir();
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let path = dir.join(&file_name);
        if path.exists() {
            return Err(format!(
                "{} exists; checkpoints are immutable",
                path.display()
            ));
        }
        let yaml = checkpoint.to_yaml()?;
        write_atomic(&path, yaml.as_bytes(), true)
            .map_err(|e| format!("{}: {e}", path.display()))?;

        let pointer = LatestPointer {
            checkpoint_id: id.clone(),
            path: format!("{}/{file_name}", self.checkpoint_rel_dir()),
        };
        let json = serde_json::to_vec(&pointer).map_err(|e| e.to_string())?;
        let latest = dir.join(LATEST);
        write_atomic(&latest, &json, true).map_err(|e| format!("{}: {e}", latest.display()))?;

        self.apply_retention(retention);
        Ok(path)
    }

    /// Deletes all but the newest `retention` checkpoints (never fewer than one).
    fn apply_retention(&self, retention: u32) {
        let numbers = self.checkpoint_numbers();
        let excess = numbers.len().saturating_sub(retention.max(1) as usize);
        for &number in &numbers[..excess] {
            let _ = fs::remove_file(
                self.checkpoint_dir()
                    .join(format!("{}.yaml", checkpoint_id(number))),
            );
        }
    }

    /// Reads one checkpoint by number.
    fn read_checkpoint(&self, number: u32) -> Result<Checkpoint, String> {
        let path = self
            .checkpoint_dir()
            .join(format!("{}.yaml", checkpoint_id(number)));
        let yaml = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Checkpoint::from_yaml(&yaml).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// The newest usable checkpoint: the one `_latest.json` names; when that pointer or its
    /// file is unreadable, the newest older checkpoint that parses, with a warning.
    pub fn latest(&self) -> Latest {
        let mut warnings = Vec::new();
        let latest_path = self.checkpoint_dir().join(LATEST);
        let pointed = match fs::read(&latest_path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => {
                warnings.push(format!("{}: {e}", latest_path.display()));
                None
            }
            Ok(bytes) => match serde_json::from_slice::<LatestPointer>(&bytes) {
                Ok(pointer) => {
                    match checkpoint_number(&format!("{}.yaml", pointer.checkpoint_id)) {
                        Some(number) => Some(number),
                        None => {
                            warnings.push(format!(
                                "{}: invalid checkpoint id {:?}",
                                latest_path.display(),
                                pointer.checkpoint_id
                            ));
                            None
                        }
                    }
                }
                Err(e) => {
                    warnings.push(format!("{}: {e}", latest_path.display()));
                    None
                }
            },
        };
        if let Some(number) = pointed {
            match self.read_checkpoint(number) {
                Ok(checkpoint) => {
                    return Latest {
                        checkpoint: Some(checkpoint),
                        warnings,
                    };
                }
                Err(e) => warnings.push(format!("latest checkpoint unusable: {e}")),
            }
        }
        let older = self
            .checkpoint_numbers()
            .into_iter()
            .rev()
            .filter(|&n| pointed.is_none_or(|p| n < p));
        for number in older {
            match self.read_checkpoint(number) {
                Ok(checkpoint) => {
                    if !warnings.is_empty() {
                        warnings.push(format!("falling back to {}", checkpoint.meta.checkpoint_id));
                    }
                    return Latest {
                        checkpoint: Some(checkpoint),
                        warnings,
                    };
                }
                Err(e) => warnings.push(e),
            }
        }
        Latest {
            checkpoint: None,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::tests::sample;

    fn checkpoint(number: u32, previous: Option<u32>) -> Checkpoint {
        let mut checkpoint = sample("work");
        checkpoint.meta.checkpoint_id = checkpoint_id(number);
        checkpoint.meta.previous_checkpoint = previous.map(checkpoint_id);
        checkpoint
    }

    fn files(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn state_files_round_trip_with_their_time() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path(), "agent:main:main");
        assert!(
            store
                .load_state::<Vec<String>>(DECISIONS)
                .unwrap()
                .is_none()
        );
        store
            .save_state(DECISIONS, &vec!["a".to_string()], 42)
            .unwrap();
        let loaded = store.load_state::<Vec<String>>(DECISIONS).unwrap().unwrap();
        assert_eq!(
            (loaded.updated_ms, loaded.data),
            (42, vec!["a".to_string()])
        );
        assert_eq!(
            files(&root.path().join("context/state/agent_main_main")),
            ["decisions.json"]
        );
        fs::write(
            root.path()
                .join("context/state/agent_main_main/decisions.json"),
            "{",
        )
        .unwrap();
        assert!(store.load_state::<Vec<String>>(DECISIONS).is_err());
        store.discard_state(DECISIONS);
        assert!(
            store
                .load_state::<Vec<String>>(DECISIONS)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn atomic_writes_leave_no_temp_files_and_latest_always_parses() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path(), "k");
        for n in 1..=12 {
            assert_eq!(store.next_checkpoint_id(), checkpoint_id(n));
            store
                .write_checkpoint(&checkpoint(n, n.checked_sub(1).filter(|&p| p > 0)), 5)
                .unwrap();
            let dir = store.checkpoint_dir();
            let latest: LatestPointer =
                serde_json::from_slice(&fs::read(dir.join(LATEST)).unwrap()).unwrap();
            assert_eq!(latest.checkpoint_id, checkpoint_id(n));
            assert_eq!(
                latest.path,
                format!("context/checkpoints/k/{}.yaml", checkpoint_id(n))
            );
            assert!(
                Checkpoint::from_yaml(&fs::read_to_string(root.path().join(&latest.path)).unwrap())
                    .is_ok()
            );
            assert!(
                files(&dir).iter().all(|f| !f.contains(TEMP_MARKER)),
                "{:?}",
                files(&dir)
            );
        }
        // Retention: the newest five, plus the pointer.
        assert_eq!(
            files(&store.checkpoint_dir()),
            [
                "_latest.json",
                "cp_008.yaml",
                "cp_009.yaml",
                "cp_010.yaml",
                "cp_011.yaml",
                "cp_012.yaml"
            ]
        );
        // Immutable: the same id is refused.
        assert!(store.write_checkpoint(&checkpoint(12, None), 5).is_err());
        assert_eq!(
            store.latest().checkpoint.unwrap().meta.checkpoint_id,
            "cp_012"
        );
    }

    #[test]
    fn retention_is_configurable_and_never_below_one() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path(), "k");
        for n in 1..=3 {
            store.write_checkpoint(&checkpoint(n, None), 0).unwrap();
        }
        assert_eq!(store.checkpoint_numbers(), [3]);
        for n in 4..=6 {
            store.write_checkpoint(&checkpoint(n, None), 2).unwrap();
        }
        assert_eq!(store.checkpoint_numbers(), [5, 6]);
    }

    #[test]
    fn a_corrupt_latest_falls_back_to_the_previous_checkpoint() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path(), "k");
        assert!(store.latest().checkpoint.is_none());
        assert!(store.latest().warnings.is_empty());
        store.write_checkpoint(&checkpoint(1, None), 5).unwrap();
        store.write_checkpoint(&checkpoint(2, Some(1)), 5).unwrap();
        let dir = store.checkpoint_dir();

        // The newest checkpoint is truncated: its predecessor is used, with a warning.
        let yaml = fs::read_to_string(dir.join("cp_002.yaml")).unwrap();
        fs::write(dir.join("cp_002.yaml"), &yaml[..yaml.len() / 3]).unwrap();
        let latest = store.latest();
        assert_eq!(latest.checkpoint.unwrap().meta.checkpoint_id, "cp_001");
        assert!(
            latest.warnings.iter().any(|w| w.contains("cp_002")),
            "{:?}",
            latest.warnings
        );
        assert!(
            latest
                .warnings
                .iter()
                .any(|w| w.contains("falling back to cp_001"))
        );

        // The pointer itself is garbage: the newest parseable checkpoint is used.
        fs::write(dir.join("cp_002.yaml"), &yaml).unwrap();
        fs::write(dir.join(LATEST), "{\"checkpoint_id\": ").unwrap();
        let latest = store.latest();
        assert_eq!(latest.checkpoint.unwrap().meta.checkpoint_id, "cp_002");
        assert!(!latest.warnings.is_empty());

        // A pointer that tries to escape is refused.
        fs::write(
            dir.join(LATEST),
            r#"{"checkpoint_id":"../../x","path":"/etc/passwd"}"#,
        )
        .unwrap();
        let latest = store.latest();
        assert_eq!(latest.checkpoint.unwrap().meta.checkpoint_id, "cp_002");
        assert!(latest.warnings[0].contains("invalid checkpoint id"));
    }

    #[test]
    fn stale_temp_files_are_removed() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path(), "k");
        store.write_checkpoint(&checkpoint(1, None), 5).unwrap();
        fs::write(store.checkpoint_dir().join("cp_002.yaml.tmp-1-0"), "half").unwrap();
        store.remove_stale_temps();
        assert_eq!(
            files(&store.checkpoint_dir()),
            ["_latest.json", "cp_001.yaml"]
        );
    }

    /// Prints the time to write one checkpoint (serialize, write, sync, rename, pointer,
    /// retention) natively; the closing note of the issue reports it.
    #[test]
    fn time_to_write_one_checkpoint() {
        let root = tempfile::tempdir().unwrap();
        let store = Store::new(root.path(), "agent:main:main");
        let mut big = sample(&"a realistic sentence of a user message ".repeat(3));
        big.resources.files_read = (0..100)
            .map(|i| format!("src/module_{i}/file.rs"))
            .collect();
        big.resources.files_modified = (0..40).map(|i| format!("src/module_{i}/file.rs")).collect();
        big.decisions = vec![big.decisions[0].clone(); 50];
        let runs = 50;
        let started = std::time::Instant::now();
        for n in 1..=runs {
            big.meta.checkpoint_id = checkpoint_id(n);
            store.write_checkpoint(&big, 5).unwrap();
        }
        let per = started.elapsed() / runs;
        let yaml_started = std::time::Instant::now();
        for _ in 0..runs {
            big.to_yaml().unwrap();
        }
        eprintln!(
            "checkpoint write: {per:?} per checkpoint ({} bytes; YAML serialization alone {:?})",
            big.to_yaml().unwrap().len(),
            yaml_started.elapsed() / runs
        );
    }
}
