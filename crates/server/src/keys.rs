//! API keys: 32 random bytes shown once as `hbk_<64 hex>` (a tenant's) or
//! `hbo_<64 hex>` (the operator's), stored only as a keyed BLAKE3 hash
//! whose key is the server's secret (`DATA_DIR/server.secret`, 32 random
//! bytes, mode 0600). A stolen database alone does not let anyone check a
//! guessed key, and the keys' entropy (256 bits) makes guessing hopeless.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::ServerError;
use crate::store::KeyOwner;

/// The prefix of a tenant key.
pub const TENANT_PREFIX: &str = "hbk_";
/// The prefix of the operator key.
pub const OPERATOR_PREFIX: &str = "hbo_";
/// The length of a key's random part, in hex characters.
const KEY_HEX: usize = 64;

/// Makes a fresh key with `prefix`.
pub fn generate(prefix: &str) -> String {
    let mut bytes = [0u8; 32];
    rand::fill(&mut bytes[..]);
    let mut key = String::with_capacity(prefix.len() + KEY_HEX);
    key.push_str(prefix);
    for b in bytes {
        key.push_str(&format!("{b:02x}"));
    }
    key
}

/// True for text that has the shape of a key with `prefix` (so a malformed
/// header is refused before any lookup).
pub fn well_formed(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix).is_some_and(|hex| hex.len() == KEY_HEX && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The server secret that keys the hashes.
#[derive(Clone)]
pub struct KeyHasher {
    secret: [u8; 32],
}

impl std::fmt::Debug for KeyHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyHasher(..)")
    }
}

impl KeyHasher {
    /// Reads `path`, or makes it (32 random bytes, mode 0600) when it does not exist.
    ///
    /// Errors: [`ServerError::Io`] when it cannot be read or made, or holds
    /// something other than 32 bytes.
    pub fn open(path: &Path) -> Result<Self, ServerError> {
        let io = |what: &str, source| ServerError::Io { what: format!("{what} {}", path.display()), source };
        match std::fs::read(path) {
            Ok(bytes) => {
                let secret: [u8; 32] = bytes.try_into().map_err(|_| {
                    io(
                        "server secret",
                        std::io::Error::other(
                            "must hold exactly 32 bytes: delete it to make a new one (every key is then invalid)",
                        ),
                    )
                })?;
                Ok(KeyHasher { secret })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut secret = [0u8; 32];
                rand::fill(&mut secret[..]);
                use std::os::unix::fs::OpenOptionsExt;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(path)
                    .map_err(|e| io("cannot create", e))?;
                file.write_all(&secret).and_then(|()| file.sync_all()).map_err(|e| io("cannot write", e))?;
                Ok(KeyHasher { secret })
            }
            Err(e) => Err(io("cannot read", e)),
        }
    }

    /// A hasher with a given secret (tests).
    pub fn with_secret(secret: [u8; 32]) -> Self {
        KeyHasher { secret }
    }

    /// The keyed hash of a fixed text (no key has its form), which tells
    /// whether two servers hash keys with the same secret without telling
    /// the secret ([`crate::store::ServerStore::check_key_secret`]).
    pub fn secret_check(&self) -> String {
        self.hash("hookbox: the secret that keys the hashes of keys")
    }

    /// The stored form of `key`: its keyed BLAKE3 hash, lowercase hex.
    pub fn hash(&self, key: &str) -> String {
        blake3::keyed_hash(&self.secret, key.as_bytes()).to_hex().to_string()
    }
}

/// How long a resolved key is remembered (a quota change reaches requests within it).
const KEY_CACHE_TTL: Duration = Duration::from_secs(5);
/// The most keys remembered.
const KEY_CACHE_MAX: usize = 10_000;

/// Remembered key lookups: hash → (owner, when looked up).
#[derive(Default)]
pub struct KeyCache {
    entries: Mutex<HashMap<String, (KeyOwner, Instant)>>,
}

impl KeyCache {
    /// The owner of the key with `hash`, if looked up within the TTL.
    pub fn get(&self, hash: &str) -> Option<KeyOwner> {
        let map = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(hash).filter(|(_, at)| at.elapsed() < KEY_CACHE_TTL).map(|(o, _)| o.clone())
    }

    /// Remembers the owner of the key with `hash`.
    pub fn put(&self, hash: String, owner: KeyOwner) {
        let mut map = self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= KEY_CACHE_MAX {
            map.retain(|_, (_, at)| at.elapsed() < KEY_CACHE_TTL);
            if map.len() >= KEY_CACHE_MAX {
                map.clear();
            }
        }
        map.insert(hash, (owner, Instant::now()));
    }

    /// Forgets every key (after a quota change, so it applies at once).
    pub fn clear(&self) {
        self.entries.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_random_well_formed_and_hashed_with_the_secret() {
        let a = generate(TENANT_PREFIX);
        let b = generate(TENANT_PREFIX);
        assert_ne!(a, b);
        assert!(well_formed(&a, TENANT_PREFIX));
        assert!(!well_formed(&a, OPERATOR_PREFIX));
        assert!(!well_formed("hbk_xyz", TENANT_PREFIX));
        let h1 = KeyHasher::with_secret([1; 32]);
        let h2 = KeyHasher::with_secret([2; 32]);
        assert_eq!(h1.hash(&a), h1.hash(&a));
        assert_ne!(h1.hash(&a), h2.hash(&a));
        assert!(!h1.hash(&a).contains(&a[4..]));
    }

    #[test]
    fn the_secret_file_is_made_once_with_mode_0600() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("server.secret");
        let first = KeyHasher::open(&path).map(|h| h.hash("k")).unwrap_or_default();
        let again = KeyHasher::open(&path).map(|h| h.hash("k")).unwrap_or_default();
        assert_eq!(first, again);
        let mode = std::fs::metadata(&path).map(|m| m.permissions().mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o600);
        std::fs::write(&path, b"short").unwrap_or_else(|e| panic!("{e}"));
        assert!(KeyHasher::open(&path).is_err());
    }
}
