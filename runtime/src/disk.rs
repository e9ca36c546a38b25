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
//!   [`ENTRY_BYTES`](super::quota::ENTRY_BYTES) (a block and an inode, what the filesystem spends) and counts against
//!   [`MAX_ENTRIES`](super::quota::MAX_ENTRIES), so thousands of tiny files cannot pass the quota nor exhaust inodes;
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

use std::path::{Component, Path};
use std::sync::Arc;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, LinkerInstance, Resource};
use wasmtime_wasi::filesystem::{Descriptor, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    self, DescriptorFlags, ErrorCode, HostDescriptor, OpenFlags, PathFlags,
};
use wasmtime_wasi::p2::{DynOutputStream, OutputStream, Pollable, StreamError, StreamResult};

use super::quota::DiskQuota;
use super::state::StoreState;

/// The `wasi:filesystem/types` instance wasmtime-wasi 48 defines (guests importing older 0.2.x
/// versions resolve to it).
const FS_TYPES: &str = "wasi:filesystem/types@0.2.12";

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
}
