//! The precompiled-component cache: a component compiled once is kept on
//! disk, so a later process loads it in milliseconds instead of compiling it
//! again (Python and JavaScript components take seconds to compile).
//!
//! An entry is keyed by the BLAKE3 hash of the component's bytes and by the
//! engine's compatibility hash (wasmtime version and configuration: artifacts
//! are not portable across either: wasmtime checks both when deserializing). Next to each artifact
//! the BLAKE3 hash of the artifact itself is stored; an entry whose artifact does
//! not match it, or that wasmtime refuses, is treated as absent and rebuilt:
//! a stale or corrupt entry is never trusted.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;

/// Where a component came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Deserialised from a valid cache entry.
    Cache,
    /// Compiled now (and stored, when the cache is writable).
    Compiled,
}

/// A directory of precompiled components for one engine configuration.
#[derive(Debug, Clone)]
pub struct ComponentCache {
    dir: PathBuf,
}

/// The BLAKE3 hash of `bytes`, lowercase hex (64 characters): the cache's
/// keys and checksums, and the identity of a loaded component.
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

impl ComponentCache {
    /// A cache in `dir` (created on the first store).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ComponentCache { dir: dir.into() }
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn key(engine: &Engine, wasm_hash: &str) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        format!("{wasm_hash}-{:016x}", h.finish())
    }

    /// The component for `wasm`: from the cache when a valid entry exists,
    /// else compiled and stored. A cache that cannot be written only costs
    /// the next process a compile.
    ///
    /// Errors: wasmtime's compile error for invalid bytes.
    pub fn load(&self, engine: &Engine, wasm: &[u8]) -> wasmtime::Result<(Component, Source)> {
        self.load_hashed(engine, wasm, &content_hash(wasm))
    }

    /// As [`ComponentCache::load`], with [`content_hash`] of `wasm` already
    /// computed by the caller, so the bytes are hashed once.
    ///
    /// Errors: as [`ComponentCache::load`].
    pub fn load_hashed(&self, engine: &Engine, wasm: &[u8], wasm_hash: &str) -> wasmtime::Result<(Component, Source)> {
        let key = Self::key(engine, wasm_hash);
        let artifact_path = self.dir.join(format!("{key}.cwasm"));
        let sum_path = self.dir.join(format!("{key}.blake3"));
        if let (Ok(artifact), Ok(sum)) = (std::fs::read(&artifact_path), std::fs::read_to_string(&sum_path)) {
            if content_hash(&artifact) == sum.trim() {
                match deserialize(engine, &artifact) {
                    Ok(c) => return Ok((c, Source::Cache)),
                    Err(e) => tracing::warn!("cache entry {} refused, rebuilding: {e:#}", artifact_path.display()),
                }
            } else {
                tracing::warn!("cache entry {} does not match its checksum, rebuilding", artifact_path.display());
            }
        }
        let artifact = engine.precompile_component(wasm)?;
        if let Err(e) = self.store(&artifact_path, &sum_path, &artifact) {
            tracing::warn!("cannot write the component cache in {}: {e}", self.dir.display());
        }
        Ok((deserialize(engine, &artifact)?, Source::Compiled))
    }

    fn store(&self, artifact_path: &Path, sum_path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        // Write both files through temporary names, artifact first: a reader
        // never sees a checksum for a half-written artifact.
        // Unique per process and per call, so concurrent writers never share a temporary file.
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let unique = format!("tmp{}-{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let tmp = artifact_path.with_extension(&unique);
        std::fs::write(&tmp, artifact)?;
        std::fs::rename(&tmp, artifact_path)?;
        let tmp = sum_path.with_extension(&unique);
        std::fs::write(&tmp, content_hash(artifact))?;
        std::fs::rename(&tmp, sum_path)
    }
}

/// Deserialises an artifact this cache wrote.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `Component::deserialize` trusts its bytes to be an artifact that
    // wasmtime produced. These bytes are either ones `precompile_component`
    // just returned, or a cache file whose BLAKE3 hash matches the checksum written
    // beside it when this cache stored it; wasmtime itself checks the header,
    // version and engine compatibility. The cache directory must be writable
    // only by the user running Hookbox (as any on-disk code cache).
    unsafe { Component::deserialize(engine, artifact) }
}
