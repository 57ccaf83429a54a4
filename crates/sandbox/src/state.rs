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
//! [`StateStore`] is the trait a backend implements; [`MemoryStateStore`]
//! keeps state for the process. The agent crate adds an embedded SQLite store.

use std::collections::HashMap;
use std::sync::Mutex;

/// A saved state: the bytes and the plugin version that wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredState {
    /// The writing plugin's version (its manifest `version`).
    pub version: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// Errors from a state store.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store's backend failed (a database that cannot be opened, read
    /// or written); `store` names it, e.g. the database file.
    #[error("hook state database {store}: {source}")]
    Backend {
        /// The store: a database file or address.
        store: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Where hook state lives.
pub trait StateStore: Send + Sync {
    /// The state of `plugin` in `session`, if any was saved.
    ///
    /// Errors: the store could not be read.
    fn load(&self, session: &str, plugin: &str) -> Result<Option<StoredState>, StateError>;
    /// Saves the state of `plugin` in `session`, replacing the previous one.
    ///
    /// Errors: the store could not be written (the previous state stays).
    fn save(&self, session: &str, plugin: &str, state: &StoredState) -> Result<(), StateError>;
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
    map: Mutex<HashMap<(String, String), StoredState>>,
}

impl StateStore for MemoryStateStore {
    fn load(&self, session: &str, plugin: &str) -> Result<Option<StoredState>, StateError> {
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        Ok(map.get(&(session.to_string(), plugin.to_string())).cloned())
    }

    fn save(&self, session: &str, plugin: &str, state: &StoredState) -> Result<(), StateError> {
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        map.insert((session.to_string(), plugin.to_string()), state.clone());
        Ok(())
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
