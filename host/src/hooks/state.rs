//! Hook state: one blob per (session, plugin), kept by the host so it
//! survives instance replacement and process restarts (CONTRACT.md, "Hook
//! state"; seed 003: "every call starts from the values the last successful
//! call left").
//!
//! A call reads the committed state through `get-state` and stages a new one
//! with `set-state`; the host commits the staged bytes only after the call
//! succeeded and they fit the plugin's `max_state_bytes`. The bytes' schema
//! is the plugin's business: the host stores them with the plugin's name and
//! the version that wrote them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
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
    /// The SQLite database failed; `path` names the file.
    #[error("hook state database {path}: {message}")]
    Sqlite {
        /// The database file.
        path: PathBuf,
        /// SQLite's message.
        message: String,
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

/// An embedded SQLite database: state survives the process (`hookbox run --session ID --state-db FILE`).
pub struct SqliteStateStore {
    path: PathBuf,
    conn: Mutex<rusqlite::Connection>,
}

impl SqliteStateStore {
    /// Opens (creating if needed) the database at `path`.
    ///
    /// Errors: [`StateError::Sqlite`] naming the file.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        let err = |e: rusqlite::Error| StateError::Sqlite { path: path.to_path_buf(), message: e.to_string() };
        let conn = rusqlite::Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS hook_state (
                 session TEXT NOT NULL,
                 plugin TEXT NOT NULL,
                 version TEXT NOT NULL,
                 data BLOB NOT NULL,
                 updated_unix_ms INTEGER NOT NULL,
                 PRIMARY KEY (session, plugin)
             );",
        )
        .map_err(err)?;
        // An existing table of another shape is refused now, not at the first save.
        conn.prepare("SELECT session, plugin, version, data, updated_unix_ms FROM hook_state LIMIT 0").map_err(
            |e| StateError::Sqlite {
                path: path.to_path_buf(),
                message: format!("the hook_state table is not Hookbox's: {e}"),
            },
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        Ok(SqliteStateStore { path: path.to_path_buf(), conn: Mutex::new(conn) })
    }

    fn err(&self, e: rusqlite::Error) -> StateError {
        StateError::Sqlite { path: self.path.clone(), message: e.to_string() }
    }
}

impl StateStore for SqliteStateStore {
    fn load(&self, session: &str, plugin: &str) -> Result<Option<StoredState>, StateError> {
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        let mut stmt = conn
            .prepare_cached("SELECT version, data FROM hook_state WHERE session = ?1 AND plugin = ?2")
            .map_err(|e| self.err(e))?;
        let mut rows = stmt.query((session, plugin)).map_err(|e| self.err(e))?;
        match rows.next().map_err(|e| self.err(e))? {
            Some(row) => Ok(Some(StoredState {
                version: row.get(0).map_err(|e| self.err(e))?,
                data: row.get(1).map_err(|e| self.err(e))?,
            })),
            None => Ok(None),
        }
    }

    fn save(&self, session: &str, plugin: &str, state: &StoredState) -> Result<(), StateError> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        conn.execute(
            "INSERT INTO hook_state (session, plugin, version, data, updated_unix_ms) VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT (session, plugin) DO UPDATE SET version = ?3, data = ?4, updated_unix_ms = ?5",
            (session, plugin, &state.version, &state.data, now),
        )
        .map_err(|e| self.err(e))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(store: &dyn StateStore) {
        assert_eq!(store.load("s", "p").expect("load"), None);
        let v1 = StoredState { version: "1".into(), data: b"one".to_vec() };
        store.save("s", "p", &v1).expect("save");
        store.save("other", "p", &StoredState { version: "1".into(), data: b"x".to_vec() }).expect("save");
        assert_eq!(store.load("s", "p").expect("load"), Some(v1));
        let v2 = StoredState { version: "2".into(), data: vec![0, 255] };
        store.save("s", "p", &v2).expect("save");
        assert_eq!(store.load("s", "p").expect("load"), Some(v2));
        assert_eq!(store.load("s", "q").expect("load"), None, "keyed by plugin");
    }

    #[test]
    fn memory_store_roundtrips() {
        roundtrip(&MemoryStateStore::default());
    }

    #[test]
    fn sqlite_store_roundtrips_and_survives_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        roundtrip(&SqliteStateStore::open(&path).expect("open"));
        let again = SqliteStateStore::open(&path).expect("reopen");
        assert_eq!(again.load("s", "p").expect("load").map(|s| s.version), Some("2".to_string()));
        let err = SqliteStateStore::open(&dir.path().join("missing/dir/state.db")).err().expect("error");
        assert!(err.to_string().contains("missing/dir/state.db"), "{err}");
    }
}
