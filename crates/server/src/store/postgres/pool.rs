//! The PostgreSQL store's connections: [`POOL_SIZE`] threads, each with its
//! own blocking `postgres` client (which runs a small runtime of its own and
//! may not be entered from a tokio worker); a call sends its statements to
//! one and waits for the answer. A broken connection is opened again by the
//! next call. And the schema, applied on start.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use postgres::{Client, NoTls};

use crate::store::{StoreError, StoreResult, unix_seconds};

/// Connections, each on its own thread.
pub const POOL_SIZE: usize = 4;

/// The most calls waiting for a connection before a call fails (a stalled
/// database must not queue unbounded work).
const MAX_QUEUED: usize = 1024;

/// How long past its deadline a call waits for the database's cancellation.
const CANCEL_GRACE: Duration = Duration::from_secs(2);

/// The schema, by version; never edit a released one, add the next.
pub const MIGRATIONS: &[&str] = &[
    "
CREATE TABLE tenants (
    id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL UNIQUE, quotas TEXT NOT NULL, created_at BIGINT NOT NULL);
CREATE TABLE keys (
    hash TEXT PRIMARY KEY, tenant_id BIGINT REFERENCES tenants(id), role TEXT NOT NULL, created_at BIGINT NOT NULL);
CREATE TABLE plugins (
    tenant_id BIGINT NOT NULL, name TEXT NOT NULL, active BIGINT, shadow BIGINT, PRIMARY KEY (tenant_id, name));
CREATE TABLE plugin_versions (
    tenant_id BIGINT NOT NULL, plugin TEXT NOT NULL, version BIGINT NOT NULL, blake3 TEXT NOT NULL,
    size BIGINT NOT NULL, component BYTEA NOT NULL, manifest TEXT NOT NULL, report TEXT NOT NULL,
    status TEXT NOT NULL, created_at BIGINT NOT NULL, PRIMARY KEY (tenant_id, plugin, version));
CREATE TABLE shadow_records (
    id BIGSERIAL PRIMARY KEY, tenant_id BIGINT NOT NULL, plugin TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX shadow_by_plugin ON shadow_records (tenant_id, plugin, id);
CREATE TABLE runs (
    id TEXT PRIMARY KEY, tenant_id BIGINT NOT NULL, status TEXT NOT NULL, model TEXT NOT NULL,
    session TEXT NOT NULL, plugins TEXT NOT NULL, created_at BIGINT NOT NULL, record TEXT,
    seq BIGSERIAL NOT NULL);
CREATE INDEX runs_by_tenant ON runs (tenant_id, created_at, seq);
CREATE TABLE run_events (
    run_id TEXT NOT NULL, seq BIGINT NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (run_id, seq));
CREATE TABLE spend (
    tenant_id BIGINT NOT NULL, day TEXT NOT NULL, usd DOUBLE PRECISION NOT NULL, PRIMARY KEY (tenant_id, day));
",
    "
CREATE TABLE hook_state (
    session TEXT NOT NULL, plugin TEXT NOT NULL, version TEXT NOT NULL, data BYTEA NOT NULL,
    updated_unix_ms BIGINT NOT NULL, revision BIGINT NOT NULL, PRIMARY KEY (session, plugin));
CREATE TABLE conversations (
    session TEXT PRIMARY KEY, messages BYTEA NOT NULL, revision BIGINT NOT NULL, updated_unix_ms BIGINT NOT NULL);
CREATE INDEX conversations_by_time ON conversations (updated_unix_ms DESC, session);
",
    "
CREATE TABLE workers (id TEXT PRIMARY KEY, started_at BIGINT NOT NULL, lease_until_ms BIGINT NOT NULL);
ALTER TABLE runs ADD COLUMN owner TEXT;
CREATE INDEX runs_live ON runs (owner) WHERE status IN ('running', 'paused', 'waiting-approval');
CREATE TABLE approvals (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, tenant_id BIGINT NOT NULL, data TEXT NOT NULL,
    created_at BIGINT NOT NULL);
CREATE INDEX approvals_by_tenant ON approvals (tenant_id, created_at);
CREATE INDEX approvals_by_run ON approvals (run_id);
CREATE TABLE run_commands (id BIGSERIAL PRIMARY KEY, run_id TEXT NOT NULL, command TEXT NOT NULL);
CREATE INDEX run_commands_by_run ON run_commands (run_id, id);
",
    "
ALTER TABLE runs ADD COLUMN checkpoint TEXT;
ALTER TABLE runs ADD COLUMN parks BIGINT NOT NULL DEFAULT 0;
CREATE INDEX runs_resumable ON runs (seq) WHERE status = 'resumable';
",
    "
ALTER TABLE runs ADD COLUMN safe_seq BIGINT;
",
    "
CREATE INDEX runs_parked ON runs (tenant_id) WHERE status = 'parked';
",
    "
CREATE INDEX runs_queued ON runs (seq) WHERE status = 'queued';
CREATE INDEX runs_waiting ON runs (tenant_id) WHERE status IN ('parked', 'queued');
DROP INDEX runs_parked;
",
    "
CREATE INDEX runs_live_by_tenant ON runs (tenant_id) WHERE status IN ('running', 'paused', 'waiting-approval');
",
    r#"
CREATE TABLE run_journal (
    run_id TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE, part BIGINT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, part));
ALTER TABLE runs ADD COLUMN started BOOLEAN NOT NULL DEFAULT TRUE;
UPDATE runs SET started = FALSE
    WHERE status IN ('queued', 'running', 'paused', 'waiting-approval') AND checkpoint LIKE '%,"queued":true,"inbox":[]}';
"#,
    "
ALTER TABLE runs ADD COLUMN claim BIGINT NOT NULL DEFAULT 1;
",
    "
CREATE TABLE tenant_minutes (
    minute BIGINT NOT NULL, tenant_id BIGINT NOT NULL, fuel BIGINT NOT NULL, hook_us BIGINT NOT NULL,
    PRIMARY KEY (minute, tenant_id));
",
    "
CREATE TABLE server_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
",
];

/// The advisory lock key workers take while migrating (any fixed number).
const MIGRATION_LOCK: i64 = 0x0068_6f6f_6b62_6f78;

type Job = Box<dyn FnOnce(&mut Conn) + Send>;

/// One thread's connection: opened on first use, and again after it broke.
pub struct Conn {
    url: String,
    client: Option<Client>,
}

impl Conn {
    /// The connection, opened if there is none.
    fn client(&mut self) -> StoreResult<&mut Client> {
        if self.client.as_ref().is_none_or(Client::is_closed) {
            self.client = None;
            match Client::connect(&self.url, NoTls) {
                Ok(c) => self.client = Some(c),
                Err(e) => {
                    tracing::warn!(error = %e, "postgres: cannot connect");
                    return Err(StoreError::Postgres(e));
                }
            }
        }
        self.client.as_mut().ok_or_else(|| StoreError::Unavailable("no database connection".into()))
    }
}

/// Connections to one database.
pub struct Pool {
    jobs: SyncSender<Job>,
}

impl Pool {
    /// Connects to `url` (`postgres://user@host:port/db`), applies the
    /// migrations not yet applied, and starts [`POOL_SIZE`] connections.
    ///
    /// Errors: the database cannot be reached or a migration fails.
    pub fn open(url: &str) -> StoreResult<Self> {
        // The blocking client runs a runtime of its own, which may not be
        // started on a tokio worker: connecting and migrating happen on a thread.
        let first = url.to_string();
        std::thread::spawn(move || -> StoreResult<()> {
            let mut client = Client::connect(&first, NoTls)?;
            Ok(migrate(&mut client)?)
        })
        .join()
        .map_err(|_| StoreError::Unavailable("the migration thread panicked".into()))??;
        let (jobs, queue) = sync_channel::<Job>(MAX_QUEUED);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..POOL_SIZE {
            let queue = queue.clone();
            let url = url.to_string();
            std::thread::Builder::new()
                .name(format!("hookbox-pg-{i}"))
                .spawn(move || serve_jobs(Conn { url, client: None }, &queue))
                .map_err(|e| StoreError::Unavailable(format!("cannot start a database thread: {e}")))?;
        }
        Ok(Pool { jobs })
    }

    /// Runs `f` on a connection and returns its result.
    pub fn with<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> StoreResult<T> {
        self.with_deadline(None, f)
    }

    /// Runs `f` on a connection if one is free before `deadline` (none: no
    /// deadline) and returns its result. A call still queued at its deadline
    /// is dropped unrun; `f` bounds its own statements (see [`bounded`]).
    ///
    /// A call whose connection turns out lost (the database restarted) is
    /// made once more on a new connection: each call is one transaction,
    /// which the lost connection rolled back.
    ///
    /// Errors: [`StoreError::Unavailable`] when the deadline passed first,
    /// the queue is full or the connection is gone; what `f` returns.
    pub fn with_deadline<T: Send + 'static>(
        &self,
        deadline: Option<Instant>,
        mut f: impl FnMut(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> StoreResult<T> {
        let (reply, answer) = sync_channel::<StoreResult<T>>(1);
        let job: Job = Box::new(move |conn: &mut Conn| {
            let mut attempt = |conn: &mut Conn| -> StoreResult<T> {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(StoreError::Unavailable(
                        "no database connection was free before the call's deadline".into(),
                    ));
                }
                let result = f(conn.client()?).map_err(StoreError::from);
                if result.as_ref().is_err_and(StoreError::is_connection_lost) {
                    // Dropped: the next use opens a new one.
                    conn.client = None;
                }
                result
            };
            let mut result = attempt(conn);
            if result.as_ref().is_err_and(StoreError::is_connection_lost) {
                result = attempt(conn);
            }
            let _ = reply.send(result);
        });
        self.jobs.try_send(job).map_err(|e| match e {
            std::sync::mpsc::TrySendError::Full(_) => {
                StoreError::Unavailable(format!("{MAX_QUEUED} database calls are already waiting"))
            }
            std::sync::mpsc::TrySendError::Disconnected(_) => {
                StoreError::Unavailable("the database threads stopped".into())
            }
        })?;
        let died = || StoreError::Unavailable("the database thread died".into());
        match deadline {
            None => answer.recv().map_err(|_| died())?,
            // The database cancels a started call at its deadline; the grace
            // covers the cancellation's round trip, not a hung network.
            Some(d) => match answer.recv_timeout(d.saturating_duration_since(Instant::now()) + CANCEL_GRACE) {
                Ok(result) => result,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    Err(StoreError::Unavailable("the database did not answer by the call's deadline".into()))
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(died()),
            },
        }
    }
}

/// Opens a transaction on `client` whose statements and lock waits end
/// by `deadline` (PostgreSQL cancels them: a save that gave up cannot land
/// later), at least 1 ms.
///
/// Errors: the connection's.
pub fn bounded(client: &mut Client, deadline: Instant) -> Result<postgres::Transaction<'_>, postgres::Error> {
    let ms = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1)).as_millis();
    let mut tx = client.transaction()?;
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {ms}; SET LOCAL lock_timeout = {ms}"))?;
    Ok(tx)
}

/// A connection thread: takes jobs until the store is dropped.
fn serve_jobs(mut conn: Conn, queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let queue = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        job(&mut conn);
    }
}

/// Applies the migrations not applied yet, one transaction each, under an advisory lock.
fn migrate(client: &mut Client) -> Result<(), postgres::Error> {
    client.execute("SELECT pg_advisory_lock($1)", &[&MIGRATION_LOCK])?;
    let result = (|| {
        client.batch_execute(
            "CREATE TABLE IF NOT EXISTS hookbox_migrations (version INT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        )?;
        let done: i32 = client.query_one("SELECT COALESCE(MAX(version), 0) FROM hookbox_migrations", &[])?.get(0);
        for (i, sql) in MIGRATIONS.iter().enumerate() {
            let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
            if version <= done {
                continue;
            }
            let mut tx = client.transaction()?;
            tx.batch_execute(sql)?;
            tx.execute(
                "INSERT INTO hookbox_migrations (version, applied_at) VALUES ($1, $2)",
                &[&version, &unix_seconds()],
            )?;
            tx.commit()?;
        }
        Ok(())
    })();
    client.execute("SELECT pg_advisory_unlock($1)", &[&MIGRATION_LOCK])?;
    result
}
