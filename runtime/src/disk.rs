//! The state dir's disk quota and symlink rule, enforced in the host's WASI filesystem layer.
//!
//! wasmtime-wasi has no pluggable filesystem, so the few `wasi:filesystem/types` functions that
//! add data or entries are redefined over its own (the linker allows shadowing them): each
//! charges the engine's quota *before* delegating to wasmtime-wasi's implementation, and the
//! output streams a file hands out are wrapped so every byte written through them is charged
//! first. What is enforced, and when:
//! - bytes: `descriptor.write`, writes and zeroes through a file's output stream (also
//!   `splice`, which writes through the same stream), and growth by `set-size`;
//! - entries: creating a file (`open-at` with `create`), a directory or a link charges
//!   [`ENTRY_BYTES`] (a block and an inode, what the filesystem spends) and counts against
//!   [`MAX_ENTRIES`], so thousands of tiny files cannot pass the quota nor exhaust inodes;
//! - the dir is measured at the engine's first write (not at load, which is on every command's
//!   path); charges are conservative (overwriting counts as new bytes); when they would pass the
//!   quota, the dir is measured again for real (allocated blocks plus an inode per entry, symlinks
//!   never followed) and the write goes ahead if the real usage allows it.
//!
//! Going over traps the call with an error naming the engine and the quota: the instance is
//! discarded, and what was written before stays (the operator decides what to delete).
//! `sync` and `sync-data` are redefined too, to follow the session's durability (see
//! `SessionServices::durable`).
//! Symlinks whose target is absolute or climbs with `..` are refused (`not-permitted`): the
//! guest cannot follow them anyway, but host tools and operators browsing the dir could.

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, LinkerInstance, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

use super::error::LimitExceeded;
use super::state::StoreState;

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

/// The `wasi:filesystem/types` instance wasmtime-wasi 48 defines (guests importing older 0.2.x
/// versions resolve to it).
const FS_TYPES: &str = "wasi:filesystem/types@0.2.12";

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

/// A symlink target that stays inside the dir it is created in, whatever that dir is.
fn contained_target(target: &str) -> bool {
    Path::new(target)
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// Redefines the filesystem functions that add data or entries; call after wasmtime-wasi's
/// `add_to_linker_async`.
pub(super) fn add_to_linker(linker: &mut Linker<StoreState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let mut fs = linker.instance(FS_TYPES)?;
    charge_writes(&mut fs)?;
    charge_new_entries(&mut fs)?;
    answer_syncs(&mut fs)?;
    linker.allow_shadowing(false);
    Ok(())
}

/// Writes, growth by `set-size` and write streams are charged before they reach the disk.
fn charge_writes(fs: &mut LinkerInstance<'_, StoreState>) -> wasmtime::Result<()> {
    fs.func_wrap_async(
        "[method]descriptor.write",
        |mut store: StoreContextMut<'_, StoreState>,
         (fd, buf, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            Box::new(async move {
                store.data().disk.charge(buf.len() as u64)?;
                let mut view = store.data_mut().filesystem();
                let result = HostDescriptor::write(&mut view, fd, buf, offset).await;
                Ok((fs_result(&mut view, result)?,))
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.set-size",
        |mut store: StoreContextMut<'_, StoreState>, (fd, size): (Resource<Descriptor>, u64)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                let stat = HostDescriptor::stat(&mut view, Resource::new_borrow(fd.rep())).await;
                let current = match fs_result(&mut view, stat)? {
                    Ok(stat) => stat.size,
                    Err(code) => return Ok((Err(code),)),
                };
                store.data().disk.charge(size.saturating_sub(current))?;
                let mut view = store.data_mut().filesystem();
                let result = HostDescriptor::set_size(&mut view, fd, size).await;
                Ok((fs_result(&mut view, result)?,))
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.write-via-stream",
        |mut store: StoreContextMut<'_, StoreState>, (fd, offset): (Resource<Descriptor>, u64)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                let result = HostDescriptor::write_via_stream(&mut view, fd, offset);
                Ok((charged_stream(&mut store, result)?,))
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.append-via-stream",
        |mut store: StoreContextMut<'_, StoreState>, (fd,): (Resource<Descriptor>,)| {
            Box::new(async move {
                let mut view = store.data_mut().filesystem();
                let result = HostDescriptor::append_via_stream(&mut view, fd);
                Ok((charged_stream(&mut store, result)?,))
            })
        },
    )?;
    Ok(())
}

/// Every entry an engine creates (a file, a directory, a link) is charged; a symlink may only
/// point inside the state dir.
fn charge_new_entries(fs: &mut LinkerInstance<'_, StoreState>) -> wasmtime::Result<()> {
    fs.func_wrap_async(
        "[method]descriptor.open-at",
        |mut store: StoreContextMut<'_, StoreState>,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Box::new(async move {
                if open_flags.contains(OpenFlags::CREATE) {
                    store.data().disk.charge_entry()?;
                }
                let mut view = store.data_mut().filesystem();
                let result =
                    HostDescriptor::open_at(&mut view, fd, path_flags, path, open_flags, flags)
                        .await;
                Ok((fs_result(&mut view, result)?,))
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.create-directory-at",
        |mut store: StoreContextMut<'_, StoreState>, (fd, path): (Resource<Descriptor>, String)| {
            Box::new(async move {
                store.data().disk.charge_entry()?;
                let mut view = store.data_mut().filesystem();
                let result = HostDescriptor::create_directory_at(&mut view, fd, path).await;
                Ok((fs_result(&mut view, result)?,))
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.link-at",
        |mut store: StoreContextMut<'_, StoreState>,
         (fd, old_flags, old_path, new_fd, new_path): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            Box::new(async move {
                store.data().disk.charge_entry()?;
                let mut view = store.data_mut().filesystem();
                let result =
                    HostDescriptor::link_at(&mut view, fd, old_flags, old_path, new_fd, new_path)
                        .await;
                Ok((fs_result(&mut view, result)?,))
            })
        },
    )?;
    fs.func_wrap_async(
        "[method]descriptor.symlink-at",
        |mut store: StoreContextMut<'_, StoreState>,
         (fd, target, link): (Resource<Descriptor>, String, String)| {
            Box::new(async move {
                if !contained_target(&target) {
                    return Ok((Err(ErrorCode::NotPermitted),));
                }
                store.data().disk.charge_entry()?;
                let mut view = store.data_mut().filesystem();
                let result = HostDescriptor::symlink_at(&mut view, fd, target, link).await;
                Ok((fs_result(&mut view, result)?,))
            })
        },
    )?;
    Ok(())
}

/// An engine's fsyncs wait on the disk; a session that is not durable itself (a replay into a
/// scratch file) answers them at once. Nothing else about the write changes.
fn answer_syncs(fs: &mut LinkerInstance<'_, StoreState>) -> wasmtime::Result<()> {
    for method in ["[method]descriptor.sync", "[method]descriptor.sync-data"] {
        let data_only = method.ends_with("sync-data");
        fs.func_wrap_async(
            method,
            move |mut store: StoreContextMut<'_, StoreState>, (fd,): (Resource<Descriptor>,)| {
                Box::new(async move {
                    if !store.data().services.durable() {
                        return Ok((Ok(()),));
                    }
                    let mut view = store.data_mut().filesystem();
                    let result = if data_only {
                        HostDescriptor::sync_data(&mut view, fd).await
                    } else {
                        HostDescriptor::sync(&mut view, fd).await
                    };
                    Ok((fs_result(&mut view, result)?,))
                })
            },
        )?;
    }
    Ok(())
}

/// wasmtime-wasi's result in the guest's terms: an error code, or a trap.
fn fs_result<T>(
    view: &mut wasmtime_wasi::filesystem::WasiFilesystemCtxView<'_>,
    result: wasmtime_wasi::p2::FsResult<T>,
) -> wasmtime::Result<Result<T, ErrorCode>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(e) => Ok(Err(types::Host::convert_error_code(view, e)?)),
    }
}

/// Swaps a file's output stream for one that charges the quota before each write.
fn charged_stream(
    store: &mut StoreContextMut<'_, StoreState>,
    result: wasmtime_wasi::p2::FsResult<Resource<DynOutputStream>>,
) -> wasmtime::Result<Result<Resource<DynOutputStream>, ErrorCode>> {
    let stream = match fs_result(&mut store.data_mut().filesystem(), result)? {
        Ok(stream) => stream,
        Err(code) => return Ok(Err(code)),
    };
    let quota = store.data().disk.clone();
    let table = &mut store.data_mut().table;
    let inner = table.delete(stream)?;
    let charged: DynOutputStream = Box::new(ChargedStream { inner, quota });
    Ok(Ok(table.push(charged)?))
}

struct ChargedStream {
    inner: DynOutputStream,
    quota: Arc<DiskQuota>,
}

impl ChargedStream {
    fn charge(&self, bytes: usize) -> StreamResult<()> {
        self.quota
            .charge(bytes as u64)
            .map_err(|e| StreamError::Trap(e.into()))
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for ChargedStream {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for ChargedStream {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.charge(bytes.len())?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn blocking_write_and_flush(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.charge(bytes.len())?;
        self.inner.blocking_write_and_flush(bytes).await
    }

    fn write_zeroes(&mut self, nelem: usize) -> StreamResult<()> {
        self.charge(nelem)?;
        self.inner.write_zeroes(nelem)
    }

    async fn write_ready(&mut self) -> StreamResult<usize> {
        self.inner.write_ready().await
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symlink_targets_must_stay_below_the_link() {
        for ok in ["a", "./a", "sub/dir/file"] {
            assert!(contained_target(ok), "{ok}");
        }
        for bad in ["../secret.txt", "/etc/passwd", "a/../../b", "..", "sub/.."] {
            assert!(!contained_target(bad), "{bad}");
        }
    }

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
