//! `hookbox session list | show ID | delete ID`: the sessions a database
//! keeps (`--db`, or `hookbox.db` in the data folder). Nothing is created:
//! a missing database is an error. Ids and messages are untrusted text and
//! reach the terminal escaped.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use hookbox::providers::Message;
use hookbox::{ConversationStore, SqliteStateStore, default_data_dir};

use crate::{BadInput, escape, paths};

/// `hookbox session`'s subcommands.
#[derive(Debug, clap::Subcommand)]
pub(crate) enum SessionCommand {
    /// List the stored sessions, most recently saved first: id, turns saved, size, last save.
    List(DbArg),
    /// Print a session's stored conversation (`--json`: the messages as JSON).
    Show {
        /// The session's id.
        id: String,
        #[command(flatten)]
        db: DbArg,
        /// Print the messages as one JSON array instead of readable lines.
        #[arg(long)]
        json: bool,
    },
    /// Delete a session: its conversation and its hooks' saved state.
    Delete {
        /// The session's id.
        id: String,
        #[command(flatten)]
        db: DbArg,
    },
}

/// The database to read.
#[derive(Debug, clap::Args)]
pub(crate) struct DbArg {
    /// The session database (default: hookbox.db in the data folder, as for `hookbox run --session`).
    #[arg(long = "db", visible_alias = "state-db", value_name = "FILE")]
    db: Option<PathBuf>,
}

/// Characters of one message shown by `show` (the rest is counted).
const SHOWN_CHARS: usize = 2_000;

/// Runs `hookbox session ...`: exit 0, or 1 when `delete` found nothing to delete.
///
/// Errors: no database there, one that is not Hookbox's or not this user's, a bad id.
pub(crate) fn session_command(command: &SessionCommand, stdout: &mut dyn Write) -> Result<i32, BadInput> {
    let (SessionCommand::List(db) | SessionCommand::Show { db, .. } | SessionCommand::Delete { db, .. }) = command;
    let store = open(db.db.as_deref()).map_err(BadInput)?;
    match command {
        SessionCommand::List(_) => {
            let (sessions, total) = store.list().map_err(|e| BadInput(e.into()))?;
            for s in &sessions {
                let line =
                    format!("{}  {} turn(s)  {} bytes  saved {}", s.id, s.revision, s.bytes, when(s.updated_unix_ms));
                let _ = writeln!(stdout, "{}", escape::line(&line));
            }
            if total > sessions.len() as u64 {
                let _ = writeln!(stdout, "… {} more", total - sessions.len() as u64);
            }
            Ok(0)
        }
        SessionCommand::Show { id, json, .. } => {
            let conversation = store.load(id).map_err(|e| BadInput(e.into()))?;
            if conversation.revision == 0 {
                return Err(BadInput(anyhow::anyhow!("no session `{}` is stored", escape::line(id))));
            }
            if *json {
                let text = serde_json::to_string(&conversation.messages).map_err(|e| BadInput(e.into()))?;
                let _ = writeln!(stdout, "{}", escape::json(&text));
            } else {
                for m in &conversation.messages {
                    let _ = writeln!(stdout, "{}", escape::line(&describe(m)));
                }
            }
            Ok(0)
        }
        SessionCommand::Delete { id, .. } => {
            let gone = store.delete(id).map_err(|e| BadInput(e.into()))?;
            let line = if gone { format!("deleted session `{id}`") } else { format!("no session `{id}` is stored") };
            let _ = writeln!(stdout, "{}", escape::line(&line));
            Ok(if gone { 0 } else { 1 })
        }
    }
}

/// Opens an existing database: `db`, or the default one.
fn open(db: Option<&Path>) -> anyhow::Result<SqliteStateStore> {
    let path = match db {
        Some(p) => p.to_path_buf(),
        None => default_data_dir()
            .context("no data folder (HOOKBOX_DATA_DIR, XDG_DATA_HOME and HOME are unset): give --db FILE")?
            .join("hookbox.db"),
    };
    if !path.exists() {
        anyhow::bail!("no session database at {}", path.display());
    }
    paths::check_state_db(&path)?;
    crate::session::check_private(&path, "the session database")?;
    SqliteStateStore::open(&path).with_context(|| format!("the session database {}", path.display()))
}

/// One message as a readable line: role, then its text (cut), tool calls and results.
fn describe(m: &Message) -> String {
    let cut = |s: &str| hookbox::contract::truncate_ellipsis(s, SHOWN_CHARS);
    match m {
        Message::User { content } => format!("user: {}", cut(content)),
        Message::Assistant { content, tool_calls, .. } => {
            let mut line = format!("assistant: {}", cut(content));
            for c in tool_calls {
                line.push_str(&format!(" [calls {} {}]", c.name, cut(&c.arguments)));
            }
            line
        }
        Message::ToolResults { results } => {
            let parts: Vec<String> = results.iter().map(|r| format!("{}: {}", r.name, cut(&r.content))).collect();
            format!("tool results: {}", parts.join(" | "))
        }
        other => cut(&format!("{other:?}")),
    }
}

/// A Unix time in ms as an HTTP date (`Wed, 02 Dec 2026 04:30:00 GMT`).
fn when(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    httpdate::fmt_http_date(t)
}
