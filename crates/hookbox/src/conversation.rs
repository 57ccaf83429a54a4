//! [`ConversationStore`]: where a [`crate::Session`] keeps its conversation,
//! so `hookbox run --session ID` continues it in another process (seed 000:
//! "Conversation history persists only up to the last completed turn that
//! session persistence saved; mid-turn progress is lost").
//!
//! A store holds, per session id, the messages of its completed turns and a
//! revision. A save is a compare-and-swap on the revision: two processes
//! running turns of one session never overwrite each other's turns unseen;
//! the second gets [`ConversationStoreError::Conflict`]. Two backends:
//! [`MemoryConversationStore`] (one process) and the embedded SQLite file of
//! [`crate::SqliteStateStore`] (the default of the CLI); issue 17's
//! PostgreSQL store implements the same trait.
//!
//! A stored conversation is untrusted input when it is read back (another
//! process, or anyone who can write the file, wrote it): a load refuses more
//! than [`MAX_CONVERSATION_BYTES`] of JSON or [`MAX_CONVERSATION_MESSAGES`]
//! messages before parsing it all, and a save refuses the same, so a session
//! can never grow into one no later run can open.

use std::collections::HashMap;
use std::sync::Mutex;

use hookbox_providers::Message;

/// The largest stored conversation, as JSON (64 MiB).
pub const MAX_CONVERSATION_BYTES: usize = 64 << 20;
/// The most messages a stored conversation may hold.
pub const MAX_CONVERSATION_MESSAGES: usize = 100_000;
/// The longest session id (bytes).
pub const MAX_SESSION_ID_BYTES: usize = 256;

/// A session's stored conversation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    /// The messages of the completed turns, oldest first.
    pub messages: Vec<Message>,
    /// The stored revision: 0 when the session has nothing stored yet, then
    /// 1, 2, ... one per save.
    pub revision: u64,
}

/// Errors of a [`ConversationStore`].
#[derive(Debug, thiserror::Error)]
pub enum ConversationStoreError {
    /// The backend failed (I/O, SQL, a lock held too long).
    #[error("conversation store {store}: {source}")]
    Backend {
        /// The store (a file path, or `memory`).
        store: String,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Another run saved a turn of this session since this one loaded it.
    #[error(
        "session `{session}` was changed by another run (revision {expected} expected, {found} found): \
         this turn's messages were not saved (its hooks' state was: hook state is saved call by call); \
         start the session again to continue from the stored turns"
    )]
    Conflict {
        /// The session id.
        session: String,
        /// The revision this run loaded.
        expected: u64,
        /// The revision stored now.
        found: u64,
    },
    /// The conversation is over [`MAX_CONVERSATION_BYTES`] or [`MAX_CONVERSATION_MESSAGES`].
    #[error("session `{session}`: the conversation is too large to store or load ({what})")]
    TooLarge {
        /// The session id.
        session: String,
        /// Which limit, with the figures.
        what: String,
    },
    /// What is stored is not a conversation this Hookbox wrote.
    #[error("session `{session}`: the stored conversation is not valid: {reason}")]
    Corrupt {
        /// The session id.
        session: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The session id is empty, longer than [`MAX_SESSION_ID_BYTES`] or holds control characters.
    #[error("invalid session id: {0}")]
    InvalidId(String),
}

/// One stored session, as [`ConversationStore::list`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session's id (untrusted text: escape it to show it).
    pub id: String,
    /// Its revision: the saves so far, one per completed turn.
    pub revision: u64,
    /// The stored conversation's size (bytes of JSON).
    pub bytes: u64,
    /// When it was last saved (ms since the Unix epoch).
    pub updated_unix_ms: i64,
}

/// The most sessions one [`ConversationStore::list`] returns.
pub const MAX_LISTED_SESSIONS: usize = 10_000;

/// Where sessions keep their conversations. Safe to share between threads;
/// calls block briefly (a backend call), so async callers run them where
/// blocking is allowed.
pub trait ConversationStore: Send + Sync {
    /// The conversation stored under `session` (empty, revision 0, when none is).
    ///
    /// Errors: [`ConversationStoreError::Backend`], `TooLarge` or `Corrupt`.
    fn load(&self, session: &str) -> Result<Conversation, ConversationStoreError>;

    /// Replaces the conversation of `session` with `messages` if its stored
    /// revision is still `expected`; returns the new revision.
    ///
    /// Errors: [`ConversationStoreError::Conflict`] when another save came
    /// first (nothing is written), `TooLarge`, `Backend`.
    fn save(&self, session: &str, messages: &[Message], expected: u64) -> Result<u64, ConversationStoreError>;

    /// The stored sessions, most recently saved first, at most
    /// [`MAX_LISTED_SESSIONS`], and how many there are in all.
    ///
    /// Errors: [`ConversationStoreError::Backend`].
    fn list(&self) -> Result<(Vec<SessionSummary>, u64), ConversationStoreError>;

    /// Deletes the session `session`: its conversation and, in a store that
    /// also keeps hook state, its hook state. Returns false when it had none.
    ///
    /// Errors: [`ConversationStoreError::Backend`], `InvalidId`.
    fn delete(&self, session: &str) -> Result<bool, ConversationStoreError>;
}

/// Checks a session id: 1 to [`MAX_SESSION_ID_BYTES`] bytes, no control characters.
///
/// Errors: [`ConversationStoreError::InvalidId`] saying why.
pub fn check_session_id(id: &str) -> Result<(), ConversationStoreError> {
    if id.trim().is_empty() {
        return Err(ConversationStoreError::InvalidId("the id is empty".into()));
    }
    if id.len() > MAX_SESSION_ID_BYTES {
        return Err(ConversationStoreError::InvalidId(format!(
            "{} bytes, over the limit of {MAX_SESSION_ID_BYTES}",
            id.len()
        )));
    }
    if id.chars().any(char::is_control) {
        return Err(ConversationStoreError::InvalidId("it holds control characters".into()));
    }
    Ok(())
}

/// Serializes `messages` for a store, within the limits.
///
/// Errors: [`ConversationStoreError::TooLarge`].
pub fn encode(session: &str, messages: &[Message]) -> Result<Vec<u8>, ConversationStoreError> {
    if messages.len() > MAX_CONVERSATION_MESSAGES {
        return Err(ConversationStoreError::TooLarge {
            session: session.into(),
            what: format!("{} messages, over the limit of {MAX_CONVERSATION_MESSAGES}", messages.len()),
        });
    }
    let json = serde_json::to_vec(messages).map_err(|e| ConversationStoreError::Corrupt {
        session: session.into(),
        reason: format!("cannot serialize: {e}"),
    })?;
    if json.len() > MAX_CONVERSATION_BYTES {
        return Err(ConversationStoreError::TooLarge {
            session: session.into(),
            what: format!("{} bytes, over the limit of {MAX_CONVERSATION_BYTES}", json.len()),
        });
    }
    Ok(json)
}

/// Parses a stored conversation, within the limits (check the byte length
/// before reading the bytes where the backend allows it).
///
/// Errors: [`ConversationStoreError::TooLarge`], [`ConversationStoreError::Corrupt`].
pub fn decode(session: &str, json: &[u8]) -> Result<Vec<Message>, ConversationStoreError> {
    if json.len() > MAX_CONVERSATION_BYTES {
        return Err(ConversationStoreError::TooLarge {
            session: session.into(),
            what: format!("{} bytes stored, over the limit of {MAX_CONVERSATION_BYTES}", json.len()),
        });
    }
    let messages: Vec<Message> = serde_json::from_slice(json)
        .map_err(|e| ConversationStoreError::Corrupt { session: session.into(), reason: e.to_string() })?;
    if messages.len() > MAX_CONVERSATION_MESSAGES {
        return Err(ConversationStoreError::TooLarge {
            session: session.into(),
            what: format!("{} messages stored, over the limit of {MAX_CONVERSATION_MESSAGES}", messages.len()),
        });
    }
    Ok(messages)
}

/// Conversations in this process's memory (gone when it exits).
#[derive(Debug, Default)]
pub struct MemoryConversationStore {
    sessions: Mutex<HashMap<String, Conversation>>,
}

impl MemoryConversationStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }
}

impl ConversationStore for MemoryConversationStore {
    fn load(&self, session: &str) -> Result<Conversation, ConversationStoreError> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        Ok(sessions.get(session).cloned().unwrap_or_default())
    }

    fn save(&self, session: &str, messages: &[Message], expected: u64) -> Result<u64, ConversationStoreError> {
        // The same limits as a file store, so a test on memory sees what production would.
        encode(session, messages)?;
        let mut sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let entry = sessions.entry(session.to_string()).or_default();
        if entry.revision != expected {
            return Err(ConversationStoreError::Conflict { session: session.into(), expected, found: entry.revision });
        }
        entry.messages = messages.to_vec();
        entry.revision += 1;
        Ok(entry.revision)
    }

    fn list(&self) -> Result<(Vec<SessionSummary>, u64), ConversationStoreError> {
        let sessions = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<SessionSummary> = sessions
            .iter()
            .filter(|(_, c)| c.revision > 0)
            .map(|(id, c)| SessionSummary {
                id: id.clone(),
                revision: c.revision,
                bytes: serde_json::to_vec(&c.messages).map_or(0, |j| j.len() as u64),
                updated_unix_ms: 0,
            })
            .collect();
        let total = out.len() as u64;
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out.truncate(MAX_LISTED_SESSIONS);
        Ok((out, total))
    }

    fn delete(&self, session: &str) -> Result<bool, ConversationStoreError> {
        check_session_id(session)?;
        Ok(self.sessions.lock().unwrap_or_else(|p| p.into_inner()).remove(session).is_some_and(|c| c.revision > 0))
    }
}

/// Checks any [`ConversationStore`]: an empty load, a save and a load back,
/// a stale save refused. For backend tests (issue 17's PostgreSQL store too).
#[cfg(any(test, feature = "test-support"))]
#[allow(clippy::expect_used)] // a test helper: a broken store fails the test
pub fn conversation_store_roundtrip(store: &dyn ConversationStore) {
    let empty = store.load("s").expect("load");
    assert_eq!((empty.messages.len(), empty.revision), (0, 0));
    let turn = vec![Message::User { content: "hello".into() }];
    assert_eq!(store.save("s", &turn, 0).expect("first save"), 1);
    let back = store.load("s").expect("load");
    assert_eq!((back.messages, back.revision), (turn.clone(), 1));
    let stale = store.save("s", &turn, 0).expect_err("a save from revision 0 is stale");
    assert!(matches!(stale, ConversationStoreError::Conflict { expected: 0, found: 1, .. }), "{stale}");
    assert_eq!(store.load("other").expect("load").revision, 0, "sessions are separate");
    let (listed, total) = store.list().expect("list");
    assert_eq!((listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), total), (vec!["s"], 1));
    assert_eq!(listed[0].revision, 1);
    assert!(store.delete("s").expect("delete"), "it was there");
    assert!(!store.delete("s").expect("delete again"), "and is gone");
    assert_eq!(store.load("s").expect("load").revision, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_roundtrips() {
        conversation_store_roundtrip(&MemoryConversationStore::new());
    }

    #[test]
    fn limits_hold_both_ways() {
        let many = vec![Message::User { content: "x".into() }; MAX_CONVERSATION_MESSAGES + 1];
        assert!(matches!(encode("s", &many), Err(ConversationStoreError::TooLarge { .. })));
        let json = serde_json::to_vec(&many).expect("json");
        assert!(matches!(decode("s", &json), Err(ConversationStoreError::TooLarge { .. })));
        assert!(matches!(decode("s", b"{\"not\": \"a list\"}"), Err(ConversationStoreError::Corrupt { .. })));
        assert!(check_session_id("").is_err() && check_session_id("a\u{1b}[31m").is_err());
        assert!(check_session_id(&"x".repeat(MAX_SESSION_ID_BYTES + 1)).is_err());
        assert!(check_session_id("user-42/thread 7").is_ok());
    }
}
