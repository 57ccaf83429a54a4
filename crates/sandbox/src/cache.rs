//! The precompiled-component cache: a component compiled once is kept on
//! disk, so a later process loads it in milliseconds instead of compiling it
//! again (Python and JavaScript components take seconds to compile).
//!
//! An entry is keyed by the BLAKE3 hash of the component's bytes and by the
//! engine's compatibility hash (wasmtime version and configuration: artifacts
//! are not portable across either: wasmtime checks both when deserializing).
//! A cached artifact is native code that the host runs as the plugin, so an
//! entry is authenticated, not just checksummed: next to each artifact is a
//! keyed BLAKE3 MAC over the entry's cache key *and* the artifact, made with a
//! host-local secret (`cache.key`, 32 random bytes, mode 0600, created
//! atomically in the cache directory on first use). An entry whose MAC does
//! not verify (tampered, truncated, copied from another key or another
//! host) is discarded with a warning and recompiled; it is never
//! deserialized. An entry wasmtime refuses is rebuilt the same way.
//!
//! The directory is created mode 0700. A cache directory writable by group or
//! others or owned by another user, or a key file that group or others may
//! read or write, is refused when the cache is opened
//! ([`ComponentCache::open`]); [`crate::HookRuntime::with_cache_dir`] then
//! runs without a cache and says why in a warning and a runtime note.

use std::hash::{Hash, Hasher};
use std::io::Write;
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

/// The name of the secret key file inside the cache directory.
pub const KEY_FILE: &str = "cache.key";

/// Bytes of the secret key (a BLAKE3 key).
const KEY_LEN: usize = 32;

/// Domain separation for the entry MAC: bumped if the MAC's input changes.
const MAC_CONTEXT: &[u8] = b"hookbox component cache entry v1\0";

/// Why a cache directory cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The directory or its key file could not be created or read.
    #[error("component cache {}: {source}", path.display())]
    Io {
        /// The directory or file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The directory is writable by group or others: anyone in that group
    /// could plant native code the host would run.
    #[error("component cache {} is writable by group or others (mode {mode:o}); `chmod 700` it", dir.display())]
    DirWritableByOthers {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The directory or its key file belongs to another user.
    #[error("component cache {} is owned by uid {owner}, not by this user (uid {me})", path.display())]
    NotOwned {
        /// The directory or key file.
        path: PathBuf,
        /// Its owner's uid.
        owner: u32,
        /// This process's effective uid.
        me: u32,
    },
    /// The key file may be read or written by group or others, so the MACs it
    /// makes prove nothing.
    #[error("component cache key {} is readable or writable by group or others (mode {mode:o}); delete it (a new one is made)", path.display())]
    KeyExposed {
        /// The key file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The key file is not 32 bytes.
    #[error("component cache key {} is {len} bytes, not {KEY_LEN}; delete it (a new one is made)", path.display())]
    KeyMalformed {
        /// The key file.
        path: PathBuf,
        /// Its length in bytes.
        len: u64,
    },
}

/// A directory of precompiled components for one engine configuration,
/// authenticated with the directory's secret key (see the module docs).
#[derive(Clone)]
pub struct ComponentCache {
    dir: PathBuf,
    secret: [u8; KEY_LEN],
}

impl std::fmt::Debug for ComponentCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret.
        f.debug_struct("ComponentCache").field("dir", &self.dir).finish_non_exhaustive()
    }
}

/// The BLAKE3 hash of `bytes`, lowercase hex (64 characters): the cache's
/// keys, and the identity of a loaded component.
pub fn content_hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// Unique per process and per call, so concurrent writers never share a temporary file.
fn unique_suffix() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!("tmp{}-{}", std::process::id(), NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed))
}

impl ComponentCache {
    /// Opens the cache in `dir`: creates it (mode 0700, parents as needed)
    /// if absent, checks that it belongs to this user and is not writable by
    /// group or others, and reads its secret key, creating it (mode 0600,
    /// atomically: concurrent processes end up with the same key) if absent.
    ///
    /// Errors: [`CacheError::Io`] when the directory or key cannot be
    /// created or read; [`CacheError::DirWritableByOthers`],
    /// [`CacheError::NotOwned`], [`CacheError::KeyExposed`],
    /// [`CacheError::KeyMalformed`] for a directory or key that cannot be trusted.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CacheError> {
        let dir = dir.into();
        create_private_dir(&dir)?;
        check_dir(&dir)?;
        let secret = read_or_create_key(&dir.join(KEY_FILE))?;
        remove_legacy_checksums(&dir);
        Ok(ComponentCache { dir, secret })
    }

    /// The cache's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Removes the compiled artifact of the component whose hash is
    /// `wasm_hash` for `engine`, if there is one (e.g. an upload that was
    /// refused after it compiled: nothing of it should stay on disk).
    pub fn forget(&self, engine: &Engine, wasm_hash: &str) {
        let key = Self::key(engine, wasm_hash);
        for ext in ["cwasm", "mac"] {
            let _ = std::fs::remove_file(self.dir.join(format!("{key}.{ext}")));
        }
    }

    fn key(engine: &Engine, wasm_hash: &str) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut h);
        format!("{wasm_hash}-{:016x}", h.finish())
    }

    /// The MAC of the entry `key` holding `artifact`: binds the bytes to the key,
    /// so an entry copied over another key does not verify.
    fn mac(&self, key: &str, artifact: &[u8]) -> blake3::Hash {
        let mut h = blake3::Hasher::new_keyed(&self.secret);
        h.update(MAC_CONTEXT);
        h.update(&u64::try_from(key.len()).unwrap_or(u64::MAX).to_le_bytes());
        h.update(key.as_bytes());
        h.update(artifact);
        h.finalize()
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
        self.load_with(engine, wasm, wasm_hash, |wasm| engine.precompile_component(wasm))
    }

    /// As [`ComponentCache::load_hashed`], compiling a missing entry with
    /// `precompile` (which returns what [`Engine::precompile_component`]
    /// would: the runtime passes its compile worker here).
    ///
    /// Errors: as [`ComponentCache::load`], and `precompile`'s.
    pub fn load_with(
        &self,
        engine: &Engine,
        wasm: &[u8],
        wasm_hash: &str,
        precompile: impl FnOnce(&[u8]) -> wasmtime::Result<Vec<u8>>,
    ) -> wasmtime::Result<(Component, Source)> {
        let key = Self::key(engine, wasm_hash);
        let artifact_path = self.dir.join(format!("{key}.cwasm"));
        let mac_path = self.dir.join(format!("{key}.mac"));
        if let (Ok(artifact), Ok(mac)) = (std::fs::read(&artifact_path), std::fs::read_to_string(&mac_path)) {
            // `blake3::Hash` compares in constant time.
            let verified = blake3::Hash::from_hex(mac.trim()).is_ok_and(|m| m == self.mac(&key, &artifact));
            if verified {
                match deserialize(engine, &artifact) {
                    Ok(c) => return Ok((c, Source::Cache)),
                    Err(e) => tracing::warn!("cache entry {} refused, rebuilding: {e:#}", artifact_path.display()),
                }
            } else {
                tracing::warn!(
                    "cache entry {} does not verify against its MAC (tampered, or not written for this key), \
                     discarding it and recompiling",
                    artifact_path.display()
                );
            }
        }
        let artifact = precompile(wasm)?;
        if let Err(e) = self.store(&key, &artifact_path, &mac_path, &artifact) {
            tracing::warn!("cannot write the component cache in {}: {e}", self.dir.display());
        }
        Ok((deserialize(engine, &artifact)?, Source::Compiled))
    }

    fn store(&self, key: &str, artifact_path: &Path, mac_path: &Path, artifact: &[u8]) -> std::io::Result<()> {
        // Write both files through temporary names, artifact first: a reader
        // never sees a MAC for a half-written artifact.
        let unique = unique_suffix();
        let tmp = artifact_path.with_extension(&unique);
        std::fs::write(&tmp, artifact)?;
        std::fs::rename(&tmp, artifact_path)?;
        let tmp = mac_path.with_extension(&unique);
        std::fs::write(&tmp, self.mac(key, artifact).to_hex().as_str())?;
        std::fs::rename(&tmp, mac_path)
    }
}

/// Deletes the checksum files of earlier cache layouts (`KEY.blake3`,
/// `KEY.sha256`): entries are authenticated by `KEY.mac` now, and an
/// artifact without one is recompiled and overwritten when its key is next
/// used. Best effort: a file that cannot be deleted is left.
fn remove_legacy_checksums(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let legacy = path.extension().is_some_and(|e| e == "blake3" || e == "sha256");
        if legacy && entry.file_type().is_ok_and(|t| t.is_file()) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io { path: path.to_path_buf(), source }
}

/// Creates `dir` with mode 0700 (its missing parents with the default mode).
fn create_private_dir(dir: &Path) -> Result<(), CacheError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io(parent))?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    match builder.create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(io(dir)(e)),
        _ => Ok(()),
    }
}

/// Refuses a directory owned by another user or writable by group or others.
#[cfg(unix)]
fn check_dir(dir: &Path) -> Result<(), CacheError> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir).map_err(io(dir))?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        return Err(CacheError::NotOwned { path: dir.to_path_buf(), owner: meta.uid(), me });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(CacheError::DirWritableByOthers { dir: dir.to_path_buf(), mode });
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_dir(_dir: &Path) -> Result<(), CacheError> {
    Ok(())
}

/// Reads the key at `path`, creating it first if absent: a new key is written
/// to a private temporary file and hard-linked into place, which fails if
/// another process got there first (then its key is read).
fn read_or_create_key(path: &Path) -> Result<[u8; KEY_LEN], CacheError> {
    match std::fs::File::open(path) {
        Ok(file) => return read_key(path, file),
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io(path)(e)),
        Err(_) => {}
    }
    let mut secret = [0u8; KEY_LEN];
    rand::fill(&mut secret[..]);
    let tmp = path.with_extension(unique_suffix());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut f| f.write_all(&secret).and_then(|()| f.sync_all()));
    let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(secret),
        // Another process created it meanwhile: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read_key(path, std::fs::File::open(path).map_err(io(path))?)
        }
        Err(e) => Err(io(path)(e)),
    }
}

/// Reads an existing key from `file` (opened from `path`), refusing one that
/// group or others may access, one of another user, and one of the wrong size.
fn read_key(path: &Path, mut file: std::fs::File) -> Result<[u8; KEY_LEN], CacheError> {
    use std::io::Read;
    let meta = file.metadata().map_err(io(path))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me {
            return Err(CacheError::NotOwned { path: path.to_path_buf(), owner: meta.uid(), me });
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o077 != 0 {
            return Err(CacheError::KeyExposed { path: path.to_path_buf(), mode });
        }
    }
    if meta.len() != KEY_LEN as u64 {
        return Err(CacheError::KeyMalformed { path: path.to_path_buf(), len: meta.len() });
    }
    let mut secret = [0u8; KEY_LEN];
    file.read_exact(&mut secret).map_err(io(path))?;
    Ok(secret)
}

/// Deserialises an artifact this cache wrote.
#[allow(unsafe_code)]
fn deserialize(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: `Component::deserialize` trusts its bytes to be an artifact that
    // wasmtime produced. These bytes are either ones `precompile_component`
    // just returned (in this process, or in the runtime's own compile worker,
    // straight from its pipe: see `compile.rs`), or a cache file whose keyed MAC (over the entry's key and
    // the bytes, with the host-local secret only this user can read) matches
    // the one this cache wrote beside it when it stored exactly these bytes for
    // exactly this key. The directory and key are checked to belong to this
    // user and to be closed to group and others when the cache is opened;
    // wasmtime itself checks the header, version and engine compatibility.
    unsafe { Component::deserialize(engine, artifact) }
}
