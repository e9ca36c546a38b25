//! One engine's state-dir quota: what its dir uses (allocated blocks plus an inode per entry,
//! symlinks never followed) and what it has been charged. The WASI hooks in `disk` charge it
//! before every write or new entry.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::error::LimitExceeded;

/// What creating one directory entry (file, directory, link) is charged: the 4 KiB block a
/// directory, or a file's first byte, takes on common filesystems (ext4, xfs, btrfs), plus its
/// inode. An empty file is overcharged its block, which keeps the charge at least what the disk
/// spends: thousands of one-byte files or empty directories cannot take 17x the quota.
pub(super) const ENTRY_BYTES: u64 = BLOCK_BYTES + INODE_BYTES;

/// The allocation unit of common filesystems.
const BLOCK_BYTES: u64 = 4096;

/// What an inode costs beside its blocks.
const INODE_BYTES: u64 = 256;

/// The most entries a state dir may hold, whatever its byte quota: inodes are a resource of
/// the whole filesystem, and no engine's state needs more files than this.
pub(super) const MAX_ENTRIES: u64 = 65_536;

/// What a state dir uses (or is charged): bytes on disk and entries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Usage {
    pub(super) bytes: u64,
    pub(super) entries: u64,
}

impl Usage {
    fn plus(self, bytes: u64, entries: u64) -> Usage {
        Usage {
            bytes: self.bytes.saturating_add(bytes),
            entries: self.entries.saturating_add(entries),
        }
    }
}

/// One engine's state dir and what it may use; shared by all its instances.
#[derive(Debug)]
pub(super) struct DiskQuota {
    engine: String,
    dir: PathBuf,
    limit: u64,
    /// Charged usage: at least the real one, reset to it whenever it is measured; `None`
    /// until the first write (loading an engine does not walk its dir).
    charged: Mutex<Option<Usage>>,
}

impl DiskQuota {
    pub(super) fn new(engine: &str, dir: &Path, limit: u64) -> Arc<Self> {
        Arc::new(Self {
            engine: engine.to_string(),
            dir: dir.to_path_buf(),
            limit,
            charged: Mutex::new(None),
        })
    }

    /// Charges `bytes` about to be written; refuses when even the real usage leaves no room.
    pub(super) fn charge(&self, bytes: u64) -> Result<(), LimitExceeded> {
        self.charge_usage(bytes, 0)
    }

    /// Charges an entry about to be created (its block and inode, and one of
    /// [`MAX_ENTRIES`]).
    pub(super) fn charge_entry(&self) -> Result<(), LimitExceeded> {
        self.charge_usage(ENTRY_BYTES, 1)
    }

    fn charge_usage(&self, bytes: u64, entries: u64) -> Result<(), LimitExceeded> {
        let fits = |usage: Usage| usage.bytes <= self.limit && usage.entries <= MAX_ENTRIES;
        let mut charged = self.charged.lock().unwrap_or_else(|e| e.into_inner());
        let after = charged
            .get_or_insert_with(|| usage(&self.dir))
            .plus(bytes, entries);
        if fits(after) {
            *charged = Some(after);
            return Ok(());
        }
        // Charges are conservative (an overwrite counts as new bytes, a deletion is not
        // refunded): measure for real before refusing.
        let real = usage(&self.dir);
        *charged = Some(real);
        if fits(real.plus(bytes, entries)) {
            *charged = Some(real.plus(bytes, entries));
            return Ok(());
        }
        let what = if real.plus(bytes, entries).bytes > self.limit {
            format!(
                "more than its state-dir quota of {} MiB ({} bytes in {}, {bytes} more asked; limits.{})",
                self.limit >> 20,
                real.bytes,
                self.dir.display(),
                crate::limits::STATE_DIR_QUOTA_MIB.key
            )
        } else {
            format!(
                "more than {MAX_ENTRIES} files and directories in its state dir ({} in {})",
                real.entries,
                self.dir.display()
            )
        };
        Err(LimitExceeded::new(format!(
            "engine `{}` would use {what}",
            self.engine
        )))
    }
}

/// Disk used under `dir`: allocated blocks plus [`INODE_BYTES`] per entry, and the entries.
/// Symlinks are counted as entries and never followed; unreadable parts count as nothing.
pub(super) fn usage(dir: &Path) -> Usage {
    let mut total = Usage::default();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // DirEntry::metadata does not traverse symlinks.
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            total = total.plus(INODE_BYTES + allocated(&meta), 1);
            if meta.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    total
}

#[cfg(unix)]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.blocks().saturating_mul(512)
}

#[cfg(not(unix))]
fn allocated(meta: &std::fs::Metadata) -> u64 {
    meta.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_measures_for_real_before_refusing() {
        let dir = tempfile::tempdir().unwrap();
        let quota = DiskQuota::new("e", dir.path(), 1 << 20);
        // Overwrites charged as new bytes pass once the real usage is measured.
        for _ in 0..8 {
            quota.charge(256 << 10).unwrap();
        }
        std::fs::write(dir.path().join("big"), vec![1u8; 900 << 10]).unwrap();
        let err = quota.charge(200 << 10).unwrap_err().to_string();
        assert!(err.contains("engine `e`"), "{err}");
        assert!(err.contains("quota of 1 MiB"), "{err}");
        assert!(err.contains("stateDirQuotaMiB"), "{err}");
    }

    #[test]
    fn what_was_there_before_the_engine_loaded_counts() {
        let dir = tempfile::tempdir().unwrap();
        let quota = DiskQuota::new("e", dir.path(), 1 << 20);
        std::fs::write(dir.path().join("old"), vec![1u8; 1 << 20]).unwrap();
        assert!(quota.charge(1).is_err());
    }

    #[test]
    fn tiny_files_and_empty_dirs_are_charged_what_the_disk_spends() {
        for kind in ["one-byte files", "empty dirs"] {
            let dir = tempfile::tempdir().unwrap();
            let quota = DiskQuota::new("e", dir.path(), 1 << 20);
            // What an engine does through WASI: charge, then create (and write its byte).
            let mut created = 0;
            while created < 8192 && quota.charge_entry().is_ok() {
                let path = dir.path().join(format!("e{created}"));
                if kind == "empty dirs" {
                    std::fs::create_dir(path).unwrap();
                } else if quota.charge(1).is_ok() {
                    std::fs::write(path, b"x").unwrap();
                } else {
                    break;
                }
                created += 1;
            }
            let spent = usage(dir.path());
            assert_eq!(spent.entries, created);
            assert!(
                spent.bytes <= 1 << 20,
                "{kind}: {created} of them spent {} bytes against a 1 MiB quota",
                spent.bytes
            );
        }
    }

    #[test]
    fn entries_are_capped_whatever_the_byte_quota() {
        let dir = tempfile::tempdir().unwrap();
        let quota = DiskQuota::new("e", dir.path(), u64::MAX / 2);
        for n in 0..MAX_ENTRIES {
            quota.charge_entry().unwrap();
            std::fs::File::create(dir.path().join(n.to_string())).unwrap();
        }
        let err = quota.charge_entry().unwrap_err().to_string();
        assert!(
            err.contains("more than 65536 files and directories"),
            "{err}"
        );
        // Deleting makes room again (found by measuring for real).
        std::fs::remove_file(dir.path().join("0")).unwrap();
        assert!(quota.charge_entry().is_ok());
    }

    #[test]
    fn usage_never_follows_symlinks() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("huge"), vec![1u8; 4 << 20]).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("huge"), dir.path().join("f")).unwrap();
        assert!(
            usage(dir.path()).bytes < 64 << 10,
            "{:?}",
            usage(dir.path())
        );
    }
}
