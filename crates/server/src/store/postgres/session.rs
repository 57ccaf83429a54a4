//! [`PostgresSessionStore`]: hook state and session conversations in
//! PostgreSQL (tables `hook_state` and `conversations`), so every worker on
//! one database reads and writes the same sessions.
//!
//! A save is one compare-and-swap statement on the entry's revision, as in
//! the SQLite store: two workers that both read revision N cannot both
//! write N + 1; the second gets a conflict and nothing changes. Each call
//! runs in a transaction whose statement and lock timeouts end at the
//! call's deadline, so a save the caller gave up on is cancelled by the
//! database, never committed behind the caller's back.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::conversation::{
    self, Conversation, ConversationStore, ConversationStoreError, MAX_CONVERSATION_BYTES, SessionSummary,
};
use hookbox::providers::Message;
use hookbox::sandbox::{Revision, StateError, StateStore, StoredState};

use super::pool::{Pool, bounded};
use crate::store::StoreError;

/// How long a conversation load or save may take (the SQLite store's lock wait).
const CONVERSATION_WAIT: Duration = Duration::from_secs(5);

/// The largest revision accepted from the table: `revision + 1` cannot overflow.
const MAX_REVISION: i64 = 1 << 62;

/// What errors name as the store (never the URL: it may hold a password).
const STORE: &str = "postgres";

/// Hook state and conversations in PostgreSQL, on the server store's connections.
#[derive(Clone)]
pub struct PostgresSessionStore {
    pool: Arc<Pool>,
}

impl std::fmt::Debug for PostgresSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PostgresSessionStore")
    }
}

fn state_err(e: StoreError) -> StateError {
    StateError::Backend { store: STORE.into(), source: Box::new(e) }
}

fn conversation_err(e: StoreError) -> ConversationStoreError {
    ConversationStoreError::Backend { store: STORE.into(), source: Box::new(e) }
}

/// A stored revision as the traits count them; `None` when out of range (not Hookbox's row).
fn revision_from(stored: i64) -> Option<u64> {
    (0..=MAX_REVISION).contains(&stored).then(|| u64::try_from(stored).unwrap_or(0))
}

fn unix_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl PostgresSessionStore {
    pub(super) fn new(pool: Arc<Pool>) -> Self {
        PostgresSessionStore { pool }
    }
}

impl StateStore for PostgresSessionStore {
    fn load(&self, session: &str, plugin: &str, wait: Duration) -> Result<(Option<StoredState>, Revision), StateError> {
        let deadline = Instant::now() + wait;
        let (s, p) = (session.to_string(), plugin.to_string());
        let row = self
            .pool
            .with_deadline(Some(deadline), move |c| {
                let mut tx = bounded(c, deadline)?;
                let row = tx
                    .query_opt(
                        "SELECT version, data, revision FROM hook_state WHERE session = $1 AND plugin = $2",
                        &[&s, &p],
                    )?
                    .map(|r| (StoredState { version: r.get(0), data: r.get(1) }, r.get::<_, i64>(2)));
                tx.commit()?;
                Ok(row)
            })
            .map_err(state_err)?;
        match row {
            None => Ok((None, 0)),
            Some((state, stored)) => match revision_from(stored) {
                Some(revision) => Ok((Some(state), revision)),
                None => Err(StateError::Backend {
                    store: STORE.into(),
                    source: format!("hook state revision {stored} is out of range: the row is not Hookbox's").into(),
                }),
            },
        }
    }

    fn save(
        &self,
        session: &str,
        plugin: &str,
        state: &StoredState,
        expected: Option<Revision>,
        wait: Duration,
    ) -> Result<Revision, StateError> {
        let deadline = Instant::now() + wait;
        let (s, p, version, data) =
            (session.to_string(), plugin.to_string(), state.version.clone(), state.data.clone());
        let now = unix_ms();
        let expected_sql = expected.map(|e| i64::try_from(e).unwrap_or(i64::MAX));
        let (written, found) = self
            .pool
            .with_deadline(Some(deadline), move |c| {
                let mut tx = bounded(c, deadline)?;
                // Each statement is atomic: the check and the write cannot be split.
                let written = match expected_sql {
                    None => tx.query_opt(
                        "INSERT INTO hook_state (session, plugin, version, data, updated_unix_ms, revision)
                         VALUES ($1, $2, $3, $4, $5, 1)
                         ON CONFLICT (session, plugin) DO UPDATE
                         SET version = $3, data = $4, updated_unix_ms = $5, revision = hook_state.revision + 1
                         RETURNING revision",
                        &[&s, &p, &version, &data, &now],
                    )?,
                    Some(0) => tx.query_opt(
                        "INSERT INTO hook_state (session, plugin, version, data, updated_unix_ms, revision)
                         VALUES ($1, $2, $3, $4, $5, 1)
                         ON CONFLICT (session, plugin) DO NOTHING
                         RETURNING revision",
                        &[&s, &p, &version, &data, &now],
                    )?,
                    Some(revision) => tx.query_opt(
                        "UPDATE hook_state SET version = $3, data = $4, updated_unix_ms = $5, revision = revision + 1
                         WHERE session = $1 AND plugin = $2 AND revision = $6
                         RETURNING revision",
                        &[&s, &p, &version, &data, &now, &revision],
                    )?,
                }
                .map(|r| r.get::<_, i64>(0));
                let found = match written {
                    Some(_) => None,
                    None => tx
                        .query_opt("SELECT revision FROM hook_state WHERE session = $1 AND plugin = $2", &[&s, &p])?
                        .map(|r| r.get::<_, i64>(0)),
                };
                tx.commit()?;
                Ok((written, found))
            })
            .map_err(state_err)?;
        match written {
            Some(revision) => Ok(revision_from(revision).unwrap_or(0)),
            None => Err(StateError::Conflict {
                session: session.to_string(),
                plugin: plugin.to_string(),
                expected: expected.unwrap_or(0),
                found: found.and_then(revision_from).unwrap_or(0),
            }),
        }
    }
}

impl ConversationStore for PostgresSessionStore {
    fn load(&self, session: &str) -> Result<Conversation, ConversationStoreError> {
        conversation::check_session_id(session)?;
        let deadline = Instant::now() + CONVERSATION_WAIT;
        let s = session.to_string();
        let max = i64::try_from(MAX_CONVERSATION_BYTES).unwrap_or(i64::MAX);
        // The length first: an oversized row is refused before it is read.
        let row = self
            .pool
            .with_deadline(Some(deadline), move |c| {
                let mut tx = bounded(c, deadline)?;
                let row = tx
                    .query_opt(
                        "SELECT octet_length(messages)::BIGINT, revision,
                                CASE WHEN octet_length(messages) <= $2::BIGINT THEN messages END
                         FROM conversations WHERE session = $1",
                        &[&s, &max],
                    )?
                    .map(|r| (r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, Option<Vec<u8>>>(2)));
                tx.commit()?;
                Ok(row)
            })
            .map_err(conversation_err)?;
        let Some((len, stored, blob)) = row else { return Ok(Conversation::default()) };
        let Some(blob) = blob else {
            return Err(ConversationStoreError::TooLarge {
                session: session.into(),
                what: format!("{len} bytes stored, over the limit of {MAX_CONVERSATION_BYTES}"),
            });
        };
        // A stored row has been saved at least once.
        let revision = match revision_from(stored) {
            Some(r) if r >= 1 => r,
            _ => {
                return Err(ConversationStoreError::Corrupt {
                    session: session.into(),
                    reason: format!("revision {stored} is out of range (1 to {MAX_REVISION})"),
                });
            }
        };
        Ok(Conversation { messages: conversation::decode(session, &blob)?, revision })
    }

    fn save(&self, session: &str, messages: &[Message], expected: u64) -> Result<u64, ConversationStoreError> {
        conversation::check_session_id(session)?;
        let json = conversation::encode(session, messages)?;
        let deadline = Instant::now() + CONVERSATION_WAIT;
        let s = session.to_string();
        let now = unix_ms();
        let expected_sql = i64::try_from(expected).unwrap_or(i64::MAX);
        let (written, found) = self
            .pool
            .with_deadline(Some(deadline), move |c| {
                let mut tx = bounded(c, deadline)?;
                let written = if expected_sql == 0 {
                    tx.query_opt(
                        "INSERT INTO conversations (session, messages, revision, updated_unix_ms)
                         VALUES ($1, $2, 1, $3) ON CONFLICT (session) DO NOTHING RETURNING revision",
                        &[&s, &json, &now],
                    )?
                } else {
                    tx.query_opt(
                        "UPDATE conversations SET messages = $2, revision = revision + 1, updated_unix_ms = $3
                         WHERE session = $1 AND revision = $4 RETURNING revision",
                        &[&s, &json, &now, &expected_sql],
                    )?
                }
                .map(|r| r.get::<_, i64>(0));
                let found = match written {
                    Some(_) => None,
                    None => tx
                        .query_opt("SELECT revision FROM conversations WHERE session = $1", &[&s])?
                        .map(|r| r.get::<_, i64>(0)),
                };
                tx.commit()?;
                Ok((written, found))
            })
            .map_err(conversation_err)?;
        match written {
            Some(revision) => Ok(revision_from(revision).unwrap_or(0)),
            None => Err(ConversationStoreError::Conflict {
                session: session.into(),
                expected,
                found: found.and_then(revision_from).unwrap_or(0),
            }),
        }
    }

    fn list(&self) -> Result<(Vec<SessionSummary>, u64), ConversationStoreError> {
        let limit = i64::try_from(conversation::MAX_LISTED_SESSIONS).unwrap_or(i64::MAX);
        let deadline = Instant::now() + CONVERSATION_WAIT;
        self.pool
            .with_deadline(Some(deadline), move |c| {
                let mut tx = bounded(c, deadline)?;
                let total: i64 = tx.query_one("SELECT count(*) FROM conversations", &[])?.get(0);
                let rows = tx
                    .query(
                        "SELECT session, revision, octet_length(messages)::BIGINT, updated_unix_ms FROM conversations
                         ORDER BY updated_unix_ms DESC, session LIMIT $1",
                        &[&limit],
                    )?
                    .iter()
                    .map(|r| SessionSummary {
                        id: r.get(0),
                        revision: revision_from(r.get(1)).unwrap_or(0),
                        bytes: u64::try_from(r.get::<_, i64>(2)).unwrap_or(0),
                        updated_unix_ms: r.get(3),
                    })
                    .collect();
                tx.commit()?;
                Ok((rows, u64::try_from(total).unwrap_or(0)))
            })
            .map_err(conversation_err)
    }

    fn delete(&self, session: &str) -> Result<bool, ConversationStoreError> {
        conversation::check_session_id(session)?;
        let deadline = Instant::now() + CONVERSATION_WAIT;
        let s = session.to_string();
        self.pool
            .with_deadline(Some(deadline), move |c| {
                // One transaction: the conversation and the hook state go together.
                let mut tx = bounded(c, deadline)?;
                let gone = tx.execute("DELETE FROM conversations WHERE session = $1", &[&s])?;
                let state = tx.execute("DELETE FROM hook_state WHERE session = $1", &[&s])?;
                tx.commit()?;
                Ok(gone + state > 0)
            })
            .map_err(conversation_err)
    }
}
