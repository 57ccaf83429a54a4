//! The [`ConversationStore`] of [`SqliteStateStore`]: one row per session in
//! table `conversation` of the same file as the hook state, the messages as
//! one JSON blob and a revision; a save is one compare-and-swap statement.

use std::time::Duration;

use hookbox_providers::Message;
use hookbox_sandbox::StateError;
use rusqlite::OptionalExtension;

use crate::conversation::{self, Conversation, ConversationStore, ConversationStoreError, SessionSummary};
use crate::sqlite_state::{MAX_REVISION, SqliteStateStore, unix_ms};

/// How long a conversation load or save waits for another process's lock.
const LOCK_WAIT: Duration = Duration::from_secs(5);

impl SqliteStateStore {
    fn conversation_err(&self, e: StateError) -> ConversationStoreError {
        match e {
            StateError::Backend { store, source } => ConversationStoreError::Backend { store, source },
            other => {
                ConversationStoreError::Backend { store: self.path().display().to_string(), source: Box::new(other) }
            }
        }
    }
}

fn sql(store: &SqliteStateStore, e: rusqlite::Error) -> StateError {
    StateError::Backend { store: store.path().display().to_string(), source: Box::new(e) }
}

impl ConversationStore for SqliteStateStore {
    fn load(&self, session: &str) -> Result<Conversation, ConversationStoreError> {
        conversation::check_session_id(session)?;
        let mut failure = None;
        let row = self
            .with_conn(LOCK_WAIT, |conn| {
                // The length first: an oversized blob is refused before it is read.
                let head: Option<(i64, i64)> = conn
                    .prepare_cached("SELECT length(messages), revision FROM conversation WHERE session = ?1")
                    .and_then(|mut s| s.query_row([session], |r| Ok((r.get(0)?, r.get(1)?))).optional())
                    .map_err(|e| sql(self, e))?;
                let Some((len, revision)) = head else { return Ok(None) };
                if usize::try_from(len).map_or(true, |l| l > conversation::MAX_CONVERSATION_BYTES) {
                    failure = Some(ConversationStoreError::TooLarge {
                        session: session.into(),
                        what: format!("{len} bytes stored, over the limit of {}", conversation::MAX_CONVERSATION_BYTES),
                    });
                    return Ok(None);
                }
                let blob: Vec<u8> = conn
                    .prepare_cached("SELECT messages FROM conversation WHERE session = ?1")
                    .and_then(|mut s| s.query_row([session], |r| r.get(0)))
                    .map_err(|e| sql(self, e))?;
                Ok(Some((blob, revision)))
            })
            .map_err(|e| self.conversation_err(e))?;
        if let Some(e) = failure {
            return Err(e);
        }
        let Some((blob, revision)) = row else { return Ok(Conversation::default()) };
        // A stored row has been saved at least once; a revision near i64::MAX
        // would overflow into a float at the next save.
        if !(1..=MAX_REVISION).contains(&revision) {
            return Err(ConversationStoreError::Corrupt {
                session: session.into(),
                reason: format!("revision {revision} is out of range (1 to {MAX_REVISION})"),
            });
        }
        let revision = u64::try_from(revision).unwrap_or(0);
        Ok(Conversation { messages: conversation::decode(session, &blob)?, revision })
    }

    fn save(&self, session: &str, messages: &[Message], expected: u64) -> Result<u64, ConversationStoreError> {
        conversation::check_session_id(session)?;
        let json = conversation::encode(session, messages)?;
        let now = unix_ms();
        let expected_sql = i64::try_from(expected).unwrap_or(i64::MAX);
        let (written, found) = self
            .with_conn(LOCK_WAIT, |conn| {
                // Each statement is atomic: the check and the write cannot be split.
                let written: Option<i64> = if expected == 0 {
                    conn.prepare_cached(
                        "INSERT INTO conversation (session, messages, revision, updated_unix_ms)
                         VALUES (?1, ?2, 1, ?3)
                         ON CONFLICT (session) DO NOTHING
                         RETURNING revision",
                    )
                    .and_then(|mut s| s.query_row((session, &json, now), |r| r.get(0)).optional())
                } else {
                    conn.prepare_cached(
                        "UPDATE conversation SET messages = ?2, revision = revision + 1, updated_unix_ms = ?3
                         WHERE session = ?1 AND revision = ?4
                         RETURNING revision",
                    )
                    .and_then(|mut s| s.query_row((session, &json, now, expected_sql), |r| r.get(0)).optional())
                }
                .map_err(|e| sql(self, e))?;
                let found: Option<i64> = match written {
                    Some(_) => None,
                    None => conn
                        .prepare_cached("SELECT revision FROM conversation WHERE session = ?1")
                        .and_then(|mut s| s.query_row([session], |r| r.get(0)).optional())
                        .map_err(|e| sql(self, e))?,
                };
                Ok((written, found))
            })
            .map_err(|e| self.conversation_err(e))?;
        match written {
            Some(revision) => Ok(u64::try_from(revision).unwrap_or(0)),
            None => Err(ConversationStoreError::Conflict {
                session: session.into(),
                expected,
                found: found.and_then(|f| u64::try_from(f).ok()).unwrap_or(0),
            }),
        }
    }

    fn list(&self) -> Result<(Vec<SessionSummary>, u64), ConversationStoreError> {
        let limit = i64::try_from(conversation::MAX_LISTED_SESSIONS).unwrap_or(i64::MAX);
        self.with_conn(LOCK_WAIT, |conn| {
            let total: i64 =
                conn.query_row("SELECT count(*) FROM conversation", [], |r| r.get(0)).map_err(|e| sql(self, e))?;
            let rows = conn
                .prepare_cached(
                    "SELECT session, revision, length(messages), updated_unix_ms FROM conversation
                     ORDER BY updated_unix_ms DESC, session LIMIT ?1",
                )
                .and_then(|mut s| {
                    s.query_map([limit], |r| {
                        Ok(SessionSummary {
                            id: r.get(0)?,
                            revision: u64::try_from(r.get::<_, i64>(1)?).unwrap_or(0),
                            bytes: u64::try_from(r.get::<_, i64>(2)?).unwrap_or(0),
                            updated_unix_ms: r.get(3)?,
                        })
                    })?
                    .collect::<Result<Vec<_>, _>>()
                })
                .map_err(|e| sql(self, e))?;
            Ok((rows, u64::try_from(total).unwrap_or(0)))
        })
        .map_err(|e| self.conversation_err(e))
    }

    fn delete(&self, session: &str) -> Result<bool, ConversationStoreError> {
        conversation::check_session_id(session)?;
        self.with_conn(LOCK_WAIT, |conn| {
            // One transaction: the conversation and the hook state go together.
            let tx = conn.unchecked_transaction().map_err(|e| sql(self, e))?;
            let gone =
                tx.execute("DELETE FROM conversation WHERE session = ?1", [session]).map_err(|e| sql(self, e))?;
            let state = tx.execute("DELETE FROM hook_state WHERE session = ?1", [session]).map_err(|e| sql(self, e))?;
            tx.commit().map_err(|e| sql(self, e))?;
            Ok(gone + state > 0)
        })
        .map_err(|e| self.conversation_err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_conversations_roundtrip_and_survive_reopening() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hookbox.db");
        let store = SqliteStateStore::open(&path).expect("open");
        conversation::conversation_store_roundtrip(&store);
        let turn = vec![Message::User { content: "kept".into() }];
        ConversationStore::save(&store, "t", &turn, 0).expect("save");
        drop(store);
        let again = SqliteStateStore::open(&path).expect("reopen");
        let c = ConversationStore::load(&again, "t").expect("load");
        assert_eq!((c.messages, c.revision), (turn, 1));
        assert_eq!(ConversationStore::load(&again, "s").expect("load").revision, 0, "the roundtrip deleted `s`");
    }

    #[test]
    fn a_hostile_row_is_refused_not_parsed_whole() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hookbox.db");
        let store = SqliteStateStore::open(&path).expect("open");
        let raw = rusqlite::Connection::open(&path).expect("raw");
        let big = vec![b' '; conversation::MAX_CONVERSATION_BYTES + 1];
        raw.execute("INSERT INTO conversation VALUES ('big', ?1, 1, 0), ('bad', x'7b7d', 1, 0)", [&big])
            .expect("plant");
        let e = ConversationStore::load(&store, "big").expect_err("too large");
        assert!(matches!(e, ConversationStoreError::TooLarge { .. }), "{e}");
        let e = ConversationStore::load(&store, "bad").expect_err("not a list");
        assert!(matches!(e, ConversationStoreError::Corrupt { .. }), "{e}");
        let e = ConversationStore::load(&store, "").expect_err("empty id");
        assert!(matches!(e, ConversationStoreError::InvalidId(_)), "{e}");
        // Revisions a save could not go on from (found by a hostile-input pass).
        raw.execute(
            "INSERT INTO conversation VALUES ('zero', x'5b5d', 0, 0), ('max', x'5b5d', 9223372036854775807, 0)",
            [],
        )
        .expect("plant");
        for id in ["zero", "max"] {
            let e = ConversationStore::load(&store, id).expect_err("out of range");
            assert!(e.to_string().contains("out of range"), "{e}");
        }
    }

    #[test]
    fn a_database_shaped_by_someone_else_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let plant = |name: &str, sql: &str| {
            let path = dir.path().join(name);
            rusqlite::Connection::open(&path).expect("open").execute_batch(sql).expect("plant");
            SqliteStateStore::open(&path).err().map(|e| e.to_string()).unwrap_or_default()
        };
        // A view that never ends (an endless recursive query) instead of the table.
        let e = plant(
            "view.db",
            "CREATE VIEW conversation(session, messages, revision, updated_unix_ms) AS WITH RECURSIVE c(x) AS \
             (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT 's', '[]', x, 0 FROM c WHERE x < 0;",
        );
        assert!(e.contains("`conversation` is a view"), "{e}");
        let e = plant(
            "trigger.db",
            "CREATE TABLE conversation (session TEXT PRIMARY KEY NOT NULL, messages BLOB NOT NULL, \
             revision INTEGER NOT NULL, updated_unix_ms INTEGER NOT NULL);
             CREATE TRIGGER t BEFORE UPDATE ON conversation BEGIN SELECT RAISE(IGNORE); END;",
        );
        assert!(e.contains("1 trigger(s)"), "{e}");
        let e = plant(
            "nopk.db",
            "CREATE TABLE conversation (session TEXT, messages BLOB, revision INTEGER, updated_unix_ms INTEGER);",
        );
        assert!(e.contains("primary key"), "{e}");
    }
}
