//! The on-disk cache of precompiled components.
//!
//! Compiling a component with cranelift takes hundreds of milliseconds; loading a precompiled
//! one takes microseconds. A cache file is keyed by the component's content hash and the
//! engine's compatibility hash (so a different wasmtime or different settings never match),
//! and carries the hash of its own payload, which is checked before wasmtime ever maps it:
//! a truncated or tampered file is recompiled, never loaded.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

const MAGIC: &[u8; 8] = b"CTXHCWv1";
const HASH_LEN: usize = 32;

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
pub struct CompileCache {
    dir: PathBuf,
    engine_key: String,
}

impl CompileCache {
    pub fn new(dir: impl Into<PathBuf>, engine: &Engine) -> Self {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        Self {
            dir: dir.into(),
            engine_key: format!("{:016x}", hasher.finish()),
        }
    }

    /// The file a component with these bytes is cached in.
    pub fn path_for(&self, component_bytes: &[u8]) -> PathBuf {
        let content = blake3::hash(component_bytes);
        self.dir.join(format!(
            "{}-{}.cwasm",
            &content.to_hex()[..32],
            self.engine_key
        ))
    }

    /// Loads from the cache, compiling (and caching) on a miss or a failed verification.
    pub fn load(
        &self,
        engine: &Engine,
        component_bytes: &[u8],
    ) -> wasmtime::Result<(Component, LoadSource)> {
        let path = self.path_for(component_bytes);
        let mut source = LoadSource::Compiled;
        match std::fs::read(&path) {
            Ok(file) => match verified_payload(&file) {
                Some(payload) => {
                    // SAFETY: the payload was written by `store` below from
                    // `Component::serialize` of this engine configuration (the file name carries
                    // the compatibility hash) and its content hash was just verified, so it is
                    // exactly the bytes wasmtime produced.
                    if let Ok(component) = unsafe { Component::deserialize(engine, payload) } {
                        return Ok((component, LoadSource::Cache));
                    }
                    tracing::warn!(path = %path.display(), "cached component rejected by wasmtime; recompiling");
                    source = LoadSource::Recompiled;
                }
                None => {
                    tracing::warn!(path = %path.display(), "cached component failed verification; recompiling");
                    source = LoadSource::Recompiled;
                }
            },
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

    fn store(&self, path: &Path, component: &Component) -> anyhow::Result<()> {
        let payload = component.serialize()?;
        std::fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        tmp.write_all(MAGIC)?;
        tmp.write_all(blake3::hash(&payload).as_bytes())?;
        tmp.write_all(&payload)?;
        tmp.as_file().sync_all()?;
        tmp.persist(path)?;
        Ok(())
    }
}

/// The payload of a cache file whose magic and hash check out.
fn verified_payload(file: &[u8]) -> Option<&[u8]> {
    let rest = file.strip_prefix(MAGIC.as_slice())?;
    if rest.len() < HASH_LEN {
        return None;
    }
    let (hash, payload) = rest.split_at(HASH_LEN);
    (blake3::hash(payload).as_bytes() == hash).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verification_rejects_truncation_and_bit_flips() {
        let payload = b"precompiled bytes".to_vec();
        let mut file = MAGIC.to_vec();
        file.extend_from_slice(blake3::hash(&payload).as_bytes());
        file.extend_from_slice(&payload);
        assert_eq!(verified_payload(&file), Some(payload.as_slice()));

        let mut flipped = file.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(verified_payload(&flipped), None);
        assert_eq!(verified_payload(&file[..file.len() - 1]), None);
        assert_eq!(verified_payload(&file[..10]), None);
        assert_eq!(verified_payload(b"not a cache file at all"), None);
    }
}
