//! Hook state: one blob per (session, plugin), kept by the host so it
//! survives instance replacement and process restarts (`docs/contract.md`, "Hook
//! state": every call starts from what the last successful call left).
//!
//! A call reads the committed state through `get-state` and stages a new one
//! with `set-state`; the host commits the staged bytes only after the call
//! succeeded and they fit the plugin's `max_state_bytes`. The bytes' schema
//! is the plugin's business: the host stores them with the plugin's name and
//! the version that wrote them.
//!
//! Commits are compare-and-swap: each entry has a [`Revision`] (0 while
//! there is none, +1 per save); a read returns it, and a save names the
//! revision its writer last saw and succeeds only if the entry is still at
//! it. Two runs of one session that read the same state and both write do
//! not both win: the second gets [`StateError::Conflict`], which the host
//! reports as a `state` failure of that call (its write is dropped). Every
//! store operation takes the longest it may wait for a lock (what is left
//! of the call's deadline).
//!
//! [`StateStore`] is the trait a backend implements; [`MemoryStateStore`]
//! keeps state for the process. The agent crate adds an embedded SQLite store.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// A saved state: the bytes and the plugin version that wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredState {
    /// The writing plugin's version (its manifest `version`).
    pub version: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// How many times one (session, plugin) entry has been saved: 0 while there
/// is none, one more after each save. Compare-and-swap commits name the
/// revision their writer read.
pub type Revision = u64;

/// Errors from a state store.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store's backend failed (a database that cannot be opened, read
    /// or written, or stayed locked past the wait allowed); `store` names
    /// it, e.g. the database file.
    #[error("hook state database {store}: {source}")]
    Backend {
        /// The store: a database file or address.
        store: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The entry changed since the writer read it (another run of the
    /// session saved first): nothing was written.
    #[error(
        "the state of plugin `{plugin}` in session `{session}` changed since this call read it (revision \
         {expected}, now {found}): another run of the session saved first, so this write is dropped"
    )]
    Conflict {
        /// The session.
        session: String,
        /// The plugin.
        plugin: String,
        /// The revision the writer read.
        expected: Revision,
        /// The revision the entry is at now.
        found: Revision,
    },
}

/// Where hook state lives.
pub trait StateStore: Send + Sync {
    /// The state of `plugin` in `session` (`None` if none was saved) and its
    /// revision (0 when there is none). Waits at most `wait` for a lock.
    ///
    /// Errors: [`StateError::Backend`] when the store could not be read
    /// (including a lock held past `wait`).
    fn load(&self, session: &str, plugin: &str, wait: Duration) -> Result<(Option<StoredState>, Revision), StateError>;
    /// Saves the state of `plugin` in `session`, replacing the previous one,
    /// if the entry is still at revision `expected` (`Some(0)`: there is no
    /// entry yet; `None`: whatever is there). Returns the new revision. Waits
    /// at most `wait` for a lock. The check and the write are one atomic step.
    ///
    /// Errors: [`StateError::Conflict`] when the entry is at another
    /// revision; [`StateError::Backend`] when the store could not be written
    /// (including a lock held past `wait`). Either way the previous state stays.
    fn save(
        &self,
        session: &str,
        plugin: &str,
        state: &StoredState,
        expected: Option<Revision>,
        wait: Duration,
    ) -> Result<Revision, StateError>;
    /// The directory the store keeps its files in, if it has one (e.g. the
    /// SQLite database's folder). No plugin's `dirs` grant may cover, contain
    /// or lie inside it: a plugin that could write there could rewrite every
    /// session's state. Default `None` (no files).
    fn location(&self) -> Option<std::path::PathBuf> {
        None
    }
}

/// An in-process store: state lives as long as the store (sessions of one process).
#[derive(Debug, Default)]
pub struct MemoryStateStore {
    map: Mutex<HashMap<(String, String), (StoredState, Revision)>>,
}

impl StateStore for MemoryStateStore {
    fn load(
        &self,
        session: &str,
        plugin: &str,
        _wait: Duration,
    ) -> Result<(Option<StoredState>, Revision), StateError> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        Ok(match map.get(&(session.to_string(), plugin.to_string())) {
            Some((state, revision)) => (Some(state.clone()), *revision),
            None => (None, 0),
        })
    }

    fn save(
        &self,
        session: &str,
        plugin: &str,
        state: &StoredState,
        expected: Option<Revision>,
        _wait: Duration,
    ) -> Result<Revision, StateError> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let key = (session.to_string(), plugin.to_string());
        let found = map.get(&key).map_or(0, |(_, r)| *r);
        if let Some(expected) = expected.filter(|e| *e != found) {
            return Err(StateError::Conflict {
                session: session.to_string(),
                plugin: plugin.to_string(),
                expected,
                found,
            });
        }
        map.insert(key, (state.clone(), found + 1));
        Ok(found + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_roundtrips() {
        crate::testing::state_store_roundtrip(&MemoryStateStore::default());
    }
}
