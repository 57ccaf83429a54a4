//! `hookbox run --session ID`: where the session is kept (`--db`, or
//! `hookbox.db` in the data folder), its settings (`[session]` and the
//! flags), and running a turn either alone or as a session's turns.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use hookbox::{
    Agent, HookChain, LateInjectionPolicy, Manifest, RunHandle, RunResult, Session, SessionFailure, SessionOptions,
    SqliteStateStore, default_data_dir,
};

use crate::{RunArgs, paths};

/// The database sessions are kept in: `--db`, else (with `--session`)
/// `hookbox.db` in the data folder; `None` when nothing is kept.
///
/// Errors: `--session` without `--db` and no data folder (no `HOME`).
pub(crate) fn database(args: &RunArgs) -> anyhow::Result<Option<PathBuf>> {
    if let Some(db) = &args.state_db {
        return Ok(Some(db.clone()));
    }
    if args.session.is_none() {
        return Ok(None);
    }
    let dir = default_data_dir().context(
        "--session: no data folder to keep the session in (HOOKBOX_DATA_DIR, XDG_DATA_HOME and HOME are unset): give --db FILE",
    )?;
    Ok(Some(dir.join("hookbox.db")))
}

/// Opens the session database `db`, creating its folder (mode 0700) when it
/// is the default one and does not exist yet, and the file itself with mode
/// 0600. A database holds conversations and hook state that later runs
/// trust, so: it may not lie inside the workspace (the model's tools could
/// read or delete it), the default folder and an existing file must belong
/// to this user and not be writable by others.
///
/// Errors: any of those, the path is not a regular file, the folder cannot
/// be made, SQLite cannot open it or the database is not Hookbox's.
pub(crate) fn open(args: &RunArgs, db: &std::path::Path) -> anyhow::Result<Arc<SqliteStateStore>> {
    open_db(db, args.state_db.is_none(), Some(&args.workspace))
}

/// As [`open`], for a database that is the default one when `default`, and
/// must not lie inside `workspace` when one is given.
pub(crate) fn open_db(
    db: &std::path::Path,
    default: bool,
    workspace: Option<&std::path::Path>,
) -> anyhow::Result<Arc<SqliteStateStore>> {
    paths::check_state_db(db)?;
    let flag = if default { "the session database" } else { "--db" };
    let dir = match db.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(d) => d.to_path_buf(),
        None => PathBuf::from("."),
    };
    if default && !dir.exists() {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("--session: cannot create the data folder {}", dir.display()))?;
    }
    if default {
        check_private(&dir, "the data folder")?;
    }
    let canonical_dir = std::fs::canonicalize(&dir).with_context(|| format!("{flag} {}", db.display()))?;
    if let Some(workspace) = workspace
        && let Ok(canonical) = std::fs::canonicalize(workspace)
        && canonical_dir.starts_with(&canonical)
    {
        anyhow::bail!(
            "{flag} {} is inside the workspace {}: the model's tools could read or delete it; keep it elsewhere",
            db.display(),
            workspace.display()
        );
    }
    // A new file is this user's alone; an existing one must be.
    {
        use std::os::unix::fs::OpenOptionsExt;
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(db) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(anyhow::Error::new(e).context(format!("{flag} {}", db.display()))),
        }
    }
    check_private(db, flag)?;
    let store = SqliteStateStore::open(db).with_context(|| format!("{flag} {}", db.display()))?;
    Ok(Arc::new(store))
}

/// Refuses `path` when another user owns it or others may write to it.
pub(crate) fn check_private(path: &std::path::Path, what: &str) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).with_context(|| format!("{what} {}", path.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if meta.uid() != me {
        anyhow::bail!(
            "{what} {} belongs to user {}, not to you ({me}): its conversations and hook state cannot be trusted",
            path.display(),
            meta.uid()
        );
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        anyhow::bail!(
            "{what} {} is writable by other users (mode {mode:o}): its conversations and hook state cannot be trusted",
            path.display()
        );
    }
    Ok(())
}

/// The session settings: the manifest's `[session]`, then the flags.
pub(crate) fn options(args: &RunArgs, manifest: &Manifest) -> SessionOptions {
    let mut options = manifest.session;
    match args.late_injection_policy.as_deref() {
        Some("new_turn") => options.late_injection_policy = LateInjectionPolicy::NewTurn,
        Some(_) => options.late_injection_policy = LateInjectionPolicy::Surface,
        None => {}
    }
    if let Some(n) = args.max_follow_up_turns {
        options.max_follow_up_turns = n;
    }
    options
}

/// How the run's turns are driven.
pub(crate) enum Runner {
    /// One turn, no session to continue (no `--session`, no follow-up turns).
    Single(Arc<Agent>, HookChain),
    /// A session's turns: `--session`, or follow-up turns under `new_turn`.
    Session(Box<Session>),
}

/// What the turns of one `hookbox run` produced.
pub(crate) struct Turns {
    /// Every turn's record, in order; the last is partial when `failure` is set.
    pub(crate) records: Vec<RunResult>,
    /// Why the run failed, if it did (a turn's error, or a session not saved).
    pub(crate) failure: Option<String>,
    /// The last record's turn completed but the session could not be saved (why).
    pub(crate) not_saved: Option<String>,
}

impl Runner {
    /// The runner for these settings.
    ///
    /// Errors: the session id is not valid, or its stored conversation cannot be loaded.
    pub(crate) fn new(
        agent: Arc<Agent>,
        chain: HookChain,
        session: Option<&str>,
        store: Option<Arc<SqliteStateStore>>,
        options: SessionOptions,
    ) -> anyhow::Result<Runner> {
        let follow_ups = options.late_injection_policy == LateInjectionPolicy::NewTurn;
        Ok(match (session, store) {
            (Some(id), Some(store)) => {
                Runner::Session(Box::new(Session::open(agent, chain, id, store, options).context("--session")?))
            }
            (Some(id), None) => Runner::Session(Box::new(Session::with_id(agent, chain, id, options)?)),
            (None, _) if follow_ups => Runner::Session(Box::new(Session::new(agent, chain, options))),
            (None, _) => Runner::Single(agent, chain),
        })
    }

    /// The conversation the first turn starts from.
    pub(crate) fn history(&self) -> Vec<hookbox::providers::Message> {
        match self {
            Runner::Single(..) => Vec::new(),
            Runner::Session(s) => s.history().to_vec(),
        }
    }

    /// Runs the turns on `prompt`, steered by `handle`.
    pub(crate) async fn run(self, prompt: &str, handle: RunHandle) -> Turns {
        match self {
            Runner::Single(agent, mut chain) => match agent.run_with_handle(prompt, &mut chain, handle).await {
                Ok(r) => Turns { records: vec![r], failure: None, not_saved: None },
                Err(e) => Turns { records: vec![*e.report], failure: Some(e.info.to_string()), not_saved: None },
            },
            Runner::Session(mut session) => match session.run_with_handle(prompt, handle).await {
                Ok(records) => Turns { records, failure: None, not_saved: None },
                Err(e) => {
                    let mut records = e.completed;
                    let (failure, not_saved) = match e.failure {
                        SessionFailure::Turn(e) => {
                            let message = e.info.to_string();
                            records.push(*e.report);
                            (message, None)
                        }
                        SessionFailure::Store(e) => (format!("the session was not saved: {e}"), Some(e.to_string())),
                    };
                    Turns { records, failure: Some(failure), not_saved }
                }
            },
        }
    }
}
