//! [`SqliteStateStore`]: hook state in an embedded SQLite database, so a
//! session's state survives the process (`hookbox run --session ID
//! --state-db FILE`).
//!
//! Each entry has a `revision` column, and a save is one compare-and-swap
//! statement on it ([`hookbox_sandbox::StateStore::save`]), so runs of one
//! session in several processes never overwrite each other's writes
//! unseen. A lock held by another connection is waited for at most as long
//! as the caller allows (the call's remaining deadline), then reported.
//! Connections are pooled: concurrent calls do not queue behind one
//! connection's wait.
//!
//! The same file holds sessions' conversations (table `conversation`; the
//! [`crate::ConversationStore`] impl is in `sqlite_conversation.rs`).

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use hookbox_sandbox::{Revision, StateError, StateStore, StoredState};
use rusqlite::OptionalExtension;

/// Connections kept for reuse; more are opened under higher concurrency.
const POOL_SIZE: usize = 8;

/// An embedded SQLite database: state survives the process (`hookbox run --session ID --state-db FILE`).
pub struct SqliteStateStore {
    path: PathBuf,
    /// The database's folder, resolved when opened (see [`StateStore::location`]).
    dir: Option<PathBuf>,
    /// Idle connections.
    pool: Mutex<Vec<rusqlite::Connection>>,
}

impl SqliteStateStore {
    /// Opens (creating if needed) the database at `path`. A table written
    /// by an older Hookbox (without `revision`) gets the column.
    ///
    /// Errors: [`StateError::Backend`] naming the file.
    pub fn open(path: &Path) -> Result<Self, StateError> {
        let err = |e: rusqlite::Error| backend(path, e);
        let conn = rusqlite::Connection::open(path).map_err(err)?;
        conn.busy_timeout(Duration::from_secs(5)).map_err(err)?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             CREATE TABLE IF NOT EXISTS hook_state (
                 session TEXT NOT NULL,
                 plugin TEXT NOT NULL,
                 version TEXT NOT NULL,
                 data BLOB NOT NULL,
                 updated_unix_ms INTEGER NOT NULL,
                 revision INTEGER NOT NULL DEFAULT 1,
                 PRIMARY KEY (session, plugin)
             );
             CREATE TABLE IF NOT EXISTS conversation (
                 session TEXT PRIMARY KEY NOT NULL,
                 messages BLOB NOT NULL,
                 revision INTEGER NOT NULL,
                 updated_unix_ms INTEGER NOT NULL
             );",
        )
        .map_err(err)?;
        let has_revision = conn
            .prepare("SELECT 1 FROM pragma_table_info('hook_state') WHERE name = 'revision'")
            .and_then(|mut s| s.exists([]))
            .map_err(err)?;
        if !has_revision {
            conn.execute_batch("ALTER TABLE hook_state ADD COLUMN revision INTEGER NOT NULL DEFAULT 1").map_err(err)?;
        }
        // An existing table of another shape is refused now, not at the first save.
        conn.prepare("SELECT session, plugin, version, data, updated_unix_ms, revision FROM hook_state LIMIT 0")
            .map_err(|e| StateError::Backend {
                store: path.display().to_string(),
                source: format!("the hook_state table is not Hookbox's: {e}").into(),
            })?;
        check_schema(&conn).map_err(|why| StateError::Backend {
            store: path.display().to_string(),
            source: format!("the database is not Hookbox's: {why}").into(),
        })?;
        let dir = std::fs::canonicalize(path).ok().and_then(|p| p.parent().map(Path::to_path_buf));
        Ok(SqliteStateStore { path: path.to_path_buf(), dir, pool: Mutex::new(vec![conn]) })
    }

    fn err(&self, e: rusqlite::Error) -> StateError {
        backend(&self.path, e)
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on an idle connection (a new one if none is idle) that waits
    /// at most `wait` for a lock, then puts the connection back.
    pub(crate) fn with_conn<T>(
        &self,
        wait: Duration,
        f: impl FnOnce(&rusqlite::Connection) -> Result<T, StateError>,
    ) -> Result<T, StateError> {
        let idle = self.pool.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => rusqlite::Connection::open(&self.path).map_err(|e| self.err(e))?,
        };
        // SQLite counts the busy timeout in whole milliseconds; 0 means do not wait.
        let result = conn.busy_timeout(wait).map_err(|e| self.err(e)).and_then(|()| f(&conn));
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if pool.len() < POOL_SIZE {
            pool.push(conn);
        }
        result
    }

    /// The entry's revision now (0 when there is none), for a conflict's report.
    fn revision(&self, conn: &rusqlite::Connection, session: &str, plugin: &str) -> Result<Revision, StateError> {
        conn.prepare_cached("SELECT revision FROM hook_state WHERE session = ?1 AND plugin = ?2")
            .and_then(|mut s| s.query_row((session, plugin), |r| r.get::<_, i64>(0)).optional())
            .map(|r| r.map_or(0, |r| Revision::try_from(r).unwrap_or(0)))
            .map_err(|e| self.err(e))
    }
}

impl StateStore for SqliteStateStore {
    fn load(&self, session: &str, plugin: &str, wait: Duration) -> Result<(Option<StoredState>, Revision), StateError> {
        self.with_conn(wait, |conn| {
            let row = conn
                .prepare_cached("SELECT version, data, revision FROM hook_state WHERE session = ?1 AND plugin = ?2")
                .and_then(|mut stmt| {
                    stmt.query_row((session, plugin), |row| {
                        Ok((StoredState { version: row.get(0)?, data: row.get(1)? }, row.get::<_, i64>(2)?))
                    })
                    .optional()
                })
                .map_err(|e| self.err(e))?;
            match row {
                Some((_, revision)) if !(0..=MAX_REVISION).contains(&revision) => Err(StateError::Backend {
                    store: self.path.display().to_string(),
                    source: format!("hook state revision {revision} is out of range: the database is not Hookbox's")
                        .into(),
                }),
                Some((state, revision)) => Ok((Some(state), Revision::try_from(revision).unwrap_or(0))),
                None => Ok((None, 0)),
            }
        })
    }

    fn save(
        &self,
        session: &str,
        plugin: &str,
        state: &StoredState,
        expected: Option<Revision>,
        wait: Duration,
    ) -> Result<Revision, StateError> {
        let now = unix_ms();
        self.with_conn(wait, |conn| {
            let data = (session, plugin, &state.version, &state.data, now);
            // Each statement is atomic on its own: the check and the write cannot be split.
            let written: Option<i64> = match expected {
                None => conn
                    .prepare_cached(
                        "INSERT INTO hook_state (session, plugin, version, data, updated_unix_ms, revision)
                         VALUES (?1, ?2, ?3, ?4, ?5, 1)
                         ON CONFLICT (session, plugin) DO UPDATE
                         SET version = ?3, data = ?4, updated_unix_ms = ?5, revision = revision + 1
                         RETURNING revision",
                    )
                    .and_then(|mut s| s.query_row(data, |r| r.get(0)).optional()),
                Some(0) => conn
                    .prepare_cached(
                        "INSERT INTO hook_state (session, plugin, version, data, updated_unix_ms, revision)
                         VALUES (?1, ?2, ?3, ?4, ?5, 1)
                         ON CONFLICT (session, plugin) DO NOTHING
                         RETURNING revision",
                    )
                    .and_then(|mut s| s.query_row(data, |r| r.get(0)).optional()),
                Some(revision) => conn
                    .prepare_cached(
                        "UPDATE hook_state SET version = ?3, data = ?4, updated_unix_ms = ?5, revision = revision + 1
                         WHERE session = ?1 AND plugin = ?2 AND revision = ?6
                         RETURNING revision",
                    )
                    .and_then(|mut s| {
                        let (a, b, c, d, e) = data;
                        let revision = i64::try_from(revision).unwrap_or(i64::MAX);
                        s.query_row((a, b, c, d, e, revision), |r| r.get(0)).optional()
                    }),
            }
            .map_err(|e| self.err(e))?;
            match (written, expected) {
                (Some(revision), _) => Ok(Revision::try_from(revision).unwrap_or(0)),
                (None, expected) => Err(StateError::Conflict {
                    session: session.to_string(),
                    plugin: plugin.to_string(),
                    expected: expected.unwrap_or(0),
                    found: self.revision(conn, session, plugin)?,
                }),
            }
        })
    }

    fn location(&self) -> Option<PathBuf> {
        self.dir.clone()
    }
}

/// The largest revision a store accepts: far from `i64::MAX`, so `revision + 1`
/// can never overflow into a float in SQLite.
pub(crate) const MAX_REVISION: i64 = 1 << 62;

/// Refuses a database someone else shaped: Hookbox's two tables must be
/// tables (a view could run any query, e.g. an endless recursive one) with
/// their primary keys, and no trigger may exist (one could rewrite or drop
/// a save behind the compare-and-swap).
fn check_schema(conn: &rusqlite::Connection) -> Result<(), String> {
    let kinds: Vec<(String, String)> = conn
        .prepare("SELECT name, type FROM sqlite_master WHERE name IN ('hook_state', 'conversation')")
        .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect())
        .map_err(|e| e.to_string())?;
    if let Some((name, kind)) = kinds.iter().find(|(_, kind)| kind != "table") {
        return Err(format!("`{name}` is a {kind}, not a table"));
    }
    let triggers: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_master WHERE type = 'trigger'", [], |r| r.get(0))
        .map_err(|e| e.to_string())?;
    if triggers > 0 {
        return Err(format!("it has {triggers} trigger(s)"));
    }
    let pk = |table: &str| -> Result<Vec<String>, String> {
        conn.prepare(&format!("SELECT name FROM pragma_table_info('{table}') WHERE pk > 0 ORDER BY pk"))
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .map_err(|e| e.to_string())
    };
    if pk("hook_state")? != ["session", "plugin"] {
        return Err("hook_state's primary key is not (session, plugin)".into());
    }
    if pk("conversation")? != ["session"] {
        return Err("conversation's primary key is not (session)".into());
    }
    Ok(())
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
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
        let (state, revision) = again.load("s", "p", Duration::from_secs(1)).expect("load");
        assert_eq!((state.map(|s| s.version), revision), (Some("1".to_string()), 3));
        let err = SqliteStateStore::open(&dir.path().join("missing/dir/state.db")).err().expect("error");
        assert!(err.to_string().contains("missing/dir/state.db"), "{err}");
    }

    #[test]
    fn a_locked_database_fails_within_the_wait_given() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let store = SqliteStateStore::open(&path).expect("open");
        let other = rusqlite::Connection::open(&path).expect("second connection");
        other.execute_batch("BEGIN IMMEDIATE").expect("lock");
        let state = StoredState { version: "1".into(), data: b"x".to_vec() };
        let started = std::time::Instant::now();
        let err = store.save("s", "p", &state, Some(0), Duration::from_millis(200)).expect_err("locked");
        let waited = started.elapsed();
        assert!(matches!(err, StateError::Backend { .. }) && err.to_string().contains("locked"), "{err}");
        assert!(waited >= Duration::from_millis(150) && waited < Duration::from_secs(2), "waited {waited:?}");
        other.execute_batch("COMMIT").expect("unlock");
        assert_eq!(store.save("s", "p", &state, Some(0), Duration::from_millis(200)).expect("save"), 1);
    }

    #[test]
    fn an_old_table_without_revisions_is_upgraded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state.db");
        let old = rusqlite::Connection::open(&path).expect("open");
        old.execute_batch(
            "CREATE TABLE hook_state (session TEXT NOT NULL, plugin TEXT NOT NULL, version TEXT NOT NULL,
               data BLOB NOT NULL, updated_unix_ms INTEGER NOT NULL, PRIMARY KEY (session, plugin));
             INSERT INTO hook_state VALUES ('s', 'p', '1', x'07', 0);",
        )
        .expect("old schema");
        drop(old);
        let store = SqliteStateStore::open(&path).expect("upgrade");
        let wait = Duration::from_secs(1);
        assert_eq!(store.load("s", "p", wait).expect("load").1, 1);
        let state = StoredState { version: "2".into(), data: vec![8] };
        assert_eq!(store.save("s", "p", &state, Some(1), wait).expect("save"), 2);
    }
}
