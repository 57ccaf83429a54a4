//! The PostgreSQL store's connections: [`POOL_SIZE`] threads, each with its
//! own blocking `postgres` client (which runs a small runtime of its own and
//! may not be entered from a tokio worker); a call sends its statements to
//! one and waits for the answer. A broken connection is opened again by the
//! next call. And the schema, applied on start.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use postgres::{Client, NoTls};

use crate::store::{StoreError, StoreResult, unix_seconds};

/// Connections, each on its own thread.
pub const POOL_SIZE: usize = 4;

/// The most calls waiting for a connection before a call fails (a stalled
/// database must not queue unbounded work).
const MAX_QUEUED: usize = 1024;

/// The schema, by version; never edit a released one, add the next.
pub const MIGRATIONS: &[&str] = &["
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
"];

/// The advisory lock key workers take while migrating (any fixed number).
const MIGRATION_LOCK: i64 = 0x0068_6f6f_6b62_6f78;

type Job = Box<dyn FnOnce(&mut Option<Client>) + Send>;

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
                .spawn(move || serve_jobs(&url, None, &queue))
                .map_err(|e| StoreError::Unavailable(format!("cannot start a database thread: {e}")))?;
        }
        Ok(Pool { jobs })
    }

    /// Runs `f` on a connection and returns its result.
    pub fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> StoreResult<T> {
        let (reply, answer) = sync_channel::<StoreResult<T>>(1);
        let job: Job = Box::new(move |slot: &mut Option<Client>| {
            let result = match slot.as_mut() {
                Some(client) => f(client).map_err(StoreError::from),
                None => Err(StoreError::Unavailable("no database connection".into())),
            };
            // A broken connection is dropped; the thread opens a new one for the next call.
            if slot.as_ref().is_some_and(Client::is_closed) {
                *slot = None;
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
        answer.recv().map_err(|_| StoreError::Unavailable("the database thread died".into()))?
    }
}

/// A connection thread: takes jobs until the store is dropped.
fn serve_jobs(url: &str, mut client: Option<Client>, queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let queue = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match queue.recv() {
                Ok(job) => job,
                Err(_) => return,
            }
        };
        if client.is_none() {
            match Client::connect(url, NoTls) {
                Ok(c) => client = Some(c),
                Err(e) => tracing::warn!(error = %e, "postgres: cannot reconnect"),
            }
        }
        job(&mut client);
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
