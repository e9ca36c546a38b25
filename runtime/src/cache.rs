//! The on-disk cache of precompiled components.
//!
//! Compiling a component with cranelift takes hundreds of milliseconds; loading a precompiled
//! one takes microseconds. A cache file is keyed by the component's content hash and the
//! engine's compatibility hash (so a different wasmtime or different settings never match).
//!
//! The `.cwasm` file holds exactly what `Component::serialize` produced, so wasmtime maps it
//! (`deserialize_file`) instead of the host copying it. Beside it, a small `.check` file holds
//! the payload's blake3 hash and the file's identity when it was written (size, inode, change
//! time). A load whose file still has that identity was not written since the hash was
//! verified, so it is mapped without re-hashing; any other file is hashed before wasmtime sees
//! it, and a truncated or tampered one is recompiled, never loaded.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use ctxhost_transcript::store::write_atomically;
use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"CTXHCWv2";
const HASH_LEN: usize = 32;
/// Magic, hash, then the identity: size, inode, change time (seconds, nanoseconds).
const CHECK_LEN: usize = MAGIC.len() + HASH_LEN + 8 * 4;

/// How a component was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadSource {
    /// Deserialized from a verified cache file.
    Cache,
    /// Compiled now (and written to the cache when there is one).
    Compiled,
    /// Compiled now because the cache file failed verification; the file was replaced.
    Recompiled,
}

#[derive(Debug, Clone)]
pub(super) struct CompileCache {
    dir: PathBuf,
    engine_key: String,
}

impl CompileCache {
    pub(super) fn new(dir: impl Into<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir: dir.into(),
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    /// The file a component with these bytes is cached in.
    pub(super) fn path_for(&self, component_bytes: &[u8]) -> PathBuf {
        let content = blake3::hash(component_bytes);
        self.dir.join(format!(
            "{}-{}.cwasm",
            &content.to_hex()[..32],
            self.engine_key
        ))
    }

    /// Loads from the cache, compiling (and caching) on a miss or a failed verification.
    pub(super) fn load(
        &self,
        engine: &Engine,
        component_bytes: &[u8],
    ) -> wasmtime::Result<(Component, LoadSource)> {
        let path = self.path_for(component_bytes);
        let mut source = LoadSource::Compiled;
        match std::fs::metadata(&path) {
            Ok(meta) => {
                if verified(&path, &meta) {
                    // SAFETY: the file was written by `store` below from `Component::serialize`
                    // of this engine configuration (the file name carries the compatibility
                    // hash), and its content is the one whose hash was verified: either just
                    // now, or when the check was written, with the file unchanged since (same
                    // inode, size and change time). The host never writes a cache file in
                    // place; a replacement is a new inode.
                    match unsafe { Component::deserialize_file(engine, &path) } {
                        Ok(component) => return Ok((component, LoadSource::Cache)),
                        Err(e) => {
                            tracing::warn!(path = %path.display(), error = %e, "cached component rejected by wasmtime; recompiling")
                        }
                    }
                } else {
                    tracing::warn!(path = %path.display(), "cached component failed verification; recompiling");
                }
                source = LoadSource::Recompiled;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cannot read cached component; recompiling")
            }
        }
        let component = Component::new(engine, component_bytes)?;
        if let Err(e) = self.store(&path, &component) {
            // A read-only or full disk costs speed, not correctness.
            tracing::warn!(path = %path.display(), error = %e, "cannot write component cache");
        }
        Ok((component, source))
    }

    /// Writes the payload, then its check: a crash in between leaves a payload without a
    /// matching check, which the next load hashes (and finds wanting) instead of trusting.
    fn store(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        let payload = component.serialize()?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        write_atomically(path, &payload)?;
        let hash = *blake3::hash(&payload).as_bytes();
        write_check(path, &hash, &std::fs::metadata(path)?)
    }
}

/// What a compile cache directory holds: its entries (a `.cwasm` each, with its `.check`) and
/// the bytes of every file in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheUsage {
    /// Cached components.
    pub entries: usize,
    /// Bytes of every file in the directory.
    pub bytes: u64,
}

/// Sums up the cache directory `dir` (an absent one is empty).
pub fn usage(dir: &Path) -> CacheUsage {
    let mut usage = CacheUsage::default();
    for file in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let Ok(meta) = file.metadata() else {
            continue;
        };
        if !meta.is_file() {
            continue;
        }
        usage.bytes += meta.len();
        if file.path().extension().is_some_and(|x| x == "cwasm") {
            usage.entries += 1;
        }
    }
    usage
}

/// The check file beside a cache file.
fn check_path(path: &Path) -> PathBuf {
    path.with_extension("check")
}

/// What identifies a file's content without reading it: size, inode and change time (the
/// change time cannot be set back by a writer, unlike the modification time).
fn identity(meta: &std::fs::Metadata) -> [u64; 4] {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        [
            meta.len(),
            meta.ino(),
            meta.ctime() as u64,
            meta.ctime_nsec() as u64,
        ]
    }
    #[cfg(not(unix))]
    {
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .unwrap_or_default();
        [
            meta.len(),
            0,
            modified.as_secs(),
            u64::from(modified.subsec_nanos()),
        ]
    }
}

fn encode_check(hash: &[u8; HASH_LEN], identity: [u64; 4]) -> Vec<u8> {
    let mut check = Vec::with_capacity(CHECK_LEN);
    check.extend_from_slice(MAGIC);
    check.extend_from_slice(hash);
    for part in identity {
        check.extend_from_slice(&part.to_le_bytes());
    }
    check
}

/// The hash and identity a check file records, when it is one.
fn decode_check(check: &[u8]) -> Option<([u8; HASH_LEN], [u64; 4])> {
    if check.len() != CHECK_LEN {
        return None;
    }
    let rest = check.strip_prefix(MAGIC.as_slice())?;
    let (hash, identity) = rest.split_at(HASH_LEN);
    let mut parts = [0u64; 4];
    let (words, _) = identity.as_chunks::<8>();
    for (part, bytes) in parts.iter_mut().zip(words) {
        *part = u64::from_le_bytes(*bytes);
    }
    Some((hash.try_into().ok()?, parts))
}

fn write_check(path: &Path, hash: &[u8; HASH_LEN], meta: &std::fs::Metadata) -> anyhow::Result<()> {
    write_atomically(&check_path(path), &encode_check(hash, identity(meta)))?;
    Ok(())
}

/// Whether the cache file at `path` holds the payload its check names: by identity when the
/// file is unchanged since the check was written, else by hashing it (and then the check is
/// renewed, e.g. after the cache directory was copied).
fn verified(path: &Path, meta: &std::fs::Metadata) -> bool {
    let Some((hash, recorded)) = std::fs::read(check_path(path))
        .ok()
        .and_then(|check| decode_check(&check))
    else {
        return false;
    };
    if recorded == identity(meta) {
        return true;
    }
    let Ok(payload) = std::fs::read(path) else {
        return false;
    };
    if *blake3::hash(&payload).as_bytes() != hash {
        return false;
    }
    if let Err(e) = write_check(path, &hash, meta) {
        tracing::debug!(path = %path.display(), error = %e, "cannot renew the cache check");
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cached(dir: &Path, payload: &[u8]) -> PathBuf {
        let path = dir.join("x.cwasm");
        std::fs::write(&path, payload).unwrap();
        let hash = *blake3::hash(payload).as_bytes();
        write_check(&path, &hash, &std::fs::metadata(&path).unwrap()).unwrap();
        path
    }

    fn check(path: &Path) -> bool {
        verified(path, &std::fs::metadata(path).unwrap())
    }

    #[test]
    fn verification_rejects_truncation_bit_flips_and_missing_checks() {
        let dir = tempfile::tempdir().unwrap();
        let payload = b"precompiled bytes".to_vec();
        let path = cached(dir.path(), &payload);
        assert!(check(&path));

        // Rewritten in place, same size: the identity changed, so the hash decides.
        let mut flipped = payload.clone();
        *flipped.last_mut().unwrap() ^= 1;
        std::fs::write(&path, &flipped).unwrap();
        assert!(!check(&path));
        std::fs::write(&path, &payload[..payload.len() - 1]).unwrap();
        assert!(!check(&path));

        // Restored: hashed, found whole, and the check renewed for the next load.
        std::fs::write(&path, &payload).unwrap();
        assert!(check(&path));
        let renewed = decode_check(&std::fs::read(check_path(&path)).unwrap()).unwrap();
        assert_eq!(renewed.1, identity(&std::fs::metadata(&path).unwrap()));

        std::fs::write(check_path(&path), b"not a check").unwrap();
        assert!(!check(&path));
        std::fs::remove_file(check_path(&path)).unwrap();
        assert!(!check(&path));
    }

    #[test]
    fn usage_counts_entries_and_every_byte() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(usage(&dir.path().join("absent")), CacheUsage::default());
        cached(dir.path(), &[1u8; 1000]);
        std::fs::write(dir.path().join("other.tmp"), [0u8; 10]).unwrap();
        let found = usage(dir.path());
        assert_eq!(found.entries, 1);
        assert_eq!(found.bytes, 1000 + CHECK_LEN as u64 + 10);
    }

    #[test]
    fn checks_round_trip() {
        let hash = [7u8; HASH_LEN];
        let identity = [1, 2, 3, u64::MAX];
        assert_eq!(
            decode_check(&encode_check(&hash, identity)),
            Some((hash, identity))
        );
        assert_eq!(decode_check(&encode_check(&hash, identity)[1..]), None);
    }
}
