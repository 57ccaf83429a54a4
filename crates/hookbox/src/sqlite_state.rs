//! [`SqliteStateStore`]: hook state in an embedded SQLite database, so a
//! session's state survives the process (`hookbox run --session ID
//! --state-db FILE`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use hookbox_sandbox::{StateError, StateStore, StoredState};

/// An embedded SQLite database: state survives the process (`hookbox run --session ID --state-db FILE`).
pub struct SqliteStateStore {
    path: PathBuf,
    /// The database's folder, resolved when opened (see [`StateStore::location`]).
    dir: Option<PathBuf>,
    conn: Mutex<rusqlite::Connection>,
}

impl SqliteStateStore {
    /// Opens (creating if needed) the database at `path`.
    ///
    /// Errors: [`StateError::Backend`] naming the file.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        let err = |e: rusqlite::Error| backend(path, e);
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
            |e| StateError::Backend {
                store: path.display().to_string(),
                source: format!("the hook_state table is not Hookbox's: {e}").into(),
            },
        )?;
        conn.busy_timeout(std::time::Duration::from_secs(5)).map_err(err)?;
        let dir = std::fs::canonicalize(path).ok().and_then(|p| p.parent().map(Path::to_path_buf));
        Ok(SqliteStateStore { path: path.to_path_buf(), dir, conn: Mutex::new(conn) })
    }

    fn err(&self, e: rusqlite::Error) -> StateError {
        backend(&self.path, e)
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

    fn location(&self) -> Option<PathBuf> {
        self.dir.clone()
    }
}

/// A SQLite error on the database at `path`, as a [`StateError`].
fn backend(path: &Path, e: rusqlite::Error) -> StateError {
    StateError::Backend { store: path.display().to_string(), source: Box::new(e) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_store_roundtrips_and_survives_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        hookbox_sandbox::testing::state_store_roundtrip(&SqliteStateStore::open(&path).expect("open"));
        let again = SqliteStateStore::open(&path).expect("reopen");
        assert_eq!(again.load("s", "p").expect("load").map(|s| s.version), Some("2".to_string()));
        let err = SqliteStateStore::open(&dir.path().join("missing/dir/state.db")).err().expect("error");
        assert!(err.to_string().contains("missing/dir/state.db"), "{err}");
    }
}
