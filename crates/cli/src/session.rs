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
/// is the default one and does not exist yet.
///
/// Errors: the path is not a regular file, the folder cannot be made, SQLite cannot open it.
pub(crate) fn open(args: &RunArgs, db: &std::path::Path) -> anyhow::Result<Arc<SqliteStateStore>> {
    paths::check_state_db(db)?;
    if args.state_db.is_none()
        && let Some(dir) = db.parent().filter(|d| !d.exists())
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("--session: cannot create the data folder {}", dir.display()))?;
    }
    let store = SqliteStateStore::open(db).with_context(|| format!("--db {}", db.display()))?;
    Ok(Arc::new(store))
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
                Ok(r) => Turns { records: vec![r], failure: None },
                Err(e) => Turns { records: vec![*e.report], failure: Some(e.info.to_string()) },
            },
            Runner::Session(mut session) => match session.run_with_handle(prompt, handle).await {
                Ok(records) => Turns { records, failure: None },
                Err(e) => {
                    let mut records = e.completed;
                    let failure = match e.failure {
                        SessionFailure::Turn(e) => {
                            let message = e.info.to_string();
                            records.push(*e.report);
                            message
                        }
                        SessionFailure::Store(e) => format!("the session was not saved: {e}"),
                    };
                    Turns { records, failure: Some(failure) }
                }
            },
        }
    }
}
