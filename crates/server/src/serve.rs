//! Starting and stopping the server: the data directory, the store, the
//! hook runtime, the keys made at start-up, the connection loop (HTTP/1.1
//! with a header timeout and a connection limit) and graceful shutdown
//! (new runs refused, runs in flight aborted at their next safe point and
//! their records stored, then open connections drained).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::{HookRuntime, SqliteStateStore};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt;

use crate::config::ServerConfig;
use crate::error::ServerError;
use crate::fair_io::{ConnTenant, Ended, FairRead, max_hold};
use crate::keys::{KeyHasher, OPERATOR_PREFIX, generate, well_formed};
use crate::state::AppState;
use crate::store::{PostgresServerStore, Role, ServerStore, SessionStore, SqliteServerStore};

/// The environment variable that gives the operator key (`hbo_` + 64 hex
/// digits); without it, a key is made at the first start and shown once.
pub const OPERATOR_KEY_ENV: &str = "HOOKBOX_OPERATOR_KEY";

/// How long shutdown waits for runs to store their records.
const RUNS_GRACE: Duration = Duration::from_secs(30);

/// How long shutdown waits for open connections after that.
const CONNECTIONS_GRACE: Duration = Duration::from_secs(10);

/// The tokio `event_interval` (task polls between two checks for I/O
/// events) `hookbox serve` builds its runtime with; an embedder should use
/// it too. Tokio's default, 61, let a tenant flooding the server delay
/// another's request before it was even read: the quiet tenant's evaluate
/// p50 under a 32-client flood was 4–5× its idle one, 1–2× at 7
/// (BENCHMARKS.md, "hookbox serve"), for a few more `epoll_wait` calls per
/// request.
pub const IO_EVENT_INTERVAL: u32 = 7;

/// Starts servers.
pub struct Server;

/// A server that is serving.
pub struct RunningServer {
    addr: SocketAddr,
    data_dir: PathBuf,
    operator_key: Option<String>,
    tenant_keys: Vec<(String, String)>,
    state: Arc<AppState>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    /// `DATA_DIR/server.lock`, locked while the server runs.
    _lock: std::fs::File,
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

impl Server {
    /// Opens (or makes) the data directory, the store and the hook runtime,
    /// makes the keys and tenants that do not exist yet, and serves on
    /// `config.listen` until [`RunningServer::shutdown`].
    ///
    /// Errors: [`ServerError`] when the data directory, the database or the
    /// runtime cannot be opened, the address cannot be bound, or
    /// `HOOKBOX_OPERATOR_KEY` is not a well-formed operator key.
    pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
        let data_dir = match &config.data_dir {
            Some(d) => d.clone(),
            None => hookbox::default_data_dir()
                .map(|d| d.join("server"))
                .ok_or_else(|| ServerError::Config("no data_dir and no home directory: give --data-dir".into()))?,
        };
        // Bound first: a server started by mistake on an address in use
        // stops before it touches the store (on a store of its own, opening
        // it marks the runs in flight there interrupted).
        let listener = TcpListener::bind(config.listen).await.map_err(io(format!("bind {}", config.listen)))?;
        let opened = {
            let (config, data_dir) = (config.clone(), data_dir.clone());
            tokio::task::spawn_blocking(move || open(config, data_dir))
                .await
                .map_err(|e| ServerError::Internal(e.to_string()))??
        };
        let Opened { state, operator_key, tenant_keys, lock } = opened;
        let state = Arc::new(state);
        let addr = listener.local_addr().map_err(io("local address"))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(accept_loop(listener, state.clone(), stopped));
        // Kept evaluate chains unused for a minute give their instances back.
        let sweeper = Arc::downgrade(&state);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(crate::eval_cache::IDLE_TTL / 2);
            loop {
                tick.tick().await;
                match sweeper.upgrade() {
                    Some(state) => state.eval_cache.expire(),
                    None => break,
                }
            }
        });
        if state.config.shared_database() {
            tokio::spawn(keep_lease(Arc::downgrade(&state)));
            tokio::spawn(crate::steer::take_commands(Arc::downgrade(&state)));
            tokio::spawn(crate::minutes::share_minutes(Arc::downgrade(&state)));
            if state.store.parks_runs() {
                tokio::spawn(crate::resume::resume_loop(Arc::downgrade(&state)));
            }
        }
        tracing::info!(%addr, data_dir = %data_dir.display(), "hookbox serve: listening");
        Ok(RunningServer { addr, data_dir, operator_key, tenant_keys, state, stop, task, _lock: lock })
    }
}

/// Renews this worker's lease every fifth of `worker_lease_ms` and sweeps
/// the runs of workers whose lease lapsed, until the server is dropped. A
/// lapsed lease of this worker's own (the database was out of reach too
/// long) aborts its runs: other workers have marked them interrupted, and
/// the store would refuse their records.
async fn keep_lease(state: std::sync::Weak<AppState>) {
    let every = Duration::from_millis(state.upgrade().map_or(10_000, |s| s.config.worker_lease_ms) / 5);
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // Since when this worker has renewed its lease without a gap. It sweeps
    // only after a whole lease of that: after an outage of the database, every
    // live worker gets its turn to renew before anyone's runs are swept.
    let mut held_since: Option<Instant> = None;
    // Runs this worker owns in the database but holds no task of, and since when.
    let mut orphans: HashMap<String, Instant> = HashMap::new();
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        if state.shutting_down() {
            return;
        }
        let lease_ms = state.config.worker_lease_ms;
        match state.db(move |s| s.heartbeat(lease_ms)).await {
            Ok(true) => {
                held_since.get_or_insert_with(Instant::now);
            }
            Ok(false) => {
                held_since = Some(Instant::now());
                let live: Vec<_> =
                    state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
                // Only the runs a sweep took: ones started since, or not swept yet,
                // go on. If the check fails, all are taken as swept (the safe side).
                let ids: Vec<_> = live.iter().map(|r| (r.run_id.clone(), r.claim)).collect();
                let mine: std::collections::HashSet<String> =
                    state.db(move |s| s.still_mine(&ids)).await.unwrap_or_default().into_iter().collect();
                let swept: Vec<_> = live.into_iter().filter(|r| !mine.contains(&r.run_id)).collect();
                if !swept.is_empty() {
                    tracing::error!(
                        runs = swept.len(),
                        "this worker's lease lapsed: its runs were taken over (resumed elsewhere, or interrupted)"
                    );
                }
                for run in swept {
                    run.handle.abort("the worker's lease lapsed");
                }
            }
            Err(e) => {
                held_since = None;
                tracing::warn!("lease not renewed: {}", e.body.message);
            }
        }
        if held_since.is_none_or(|t| t.elapsed() < Duration::from_millis(lease_ms)) {
            continue;
        }
        take_orphans(&state, &mut orphans, Duration::from_millis(lease_ms)).await;
        match state.db(|s| s.sweep_dead_workers()).await {
            Ok(0) => {}
            Ok(n) => tracing::warn!("{n} runs of a worker that stopped were made resumable or interrupted"),
            Err(e) => tracing::warn!("sweep failed: {}", e.body.message),
        }
    }
}

/// Runs this worker owns in the database but holds no task of (a claim
/// whose reply was lost: the database took it, this worker did not) would
/// stay `running` for as long as this worker lives, since only dead
/// workers' runs are swept. One seen so for a whole lease (`after`), with
/// nothing started or claimed here meanwhile, is swept as a dead worker's
/// run is: `resumable` with a checkpoint, else `interrupted`.
async fn take_orphans(state: &Arc<AppState>, seen: &mut HashMap<String, Instant>, after: Duration) {
    let known: Vec<String> =
        state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect();
    let owned = match state.db(move |s| s.owned_elsewhere(&known)).await {
        Ok(owned) => owned,
        Err(e) => {
            tracing::warn!("orphan check failed: {}", e.body.message);
            return;
        }
    };
    let now = Instant::now();
    seen.retain(|id, _| owned.contains(id));
    for id in owned {
        seen.entry(id).or_insert(now);
    }
    if state.settling.load(std::sync::atomic::Ordering::SeqCst) > 0 {
        return;
    }
    // Read again after `settling`: a run that settled while the query ran is held now.
    let held: std::collections::HashSet<String> =
        state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).keys().cloned().collect();
    seen.retain(|id, _| !held.contains(id) && !state.unstored(id));
    let ripe: Vec<String> = seen.iter().filter(|(_, t)| t.elapsed() >= after).map(|(id, _)| id.clone()).collect();
    if ripe.is_empty() {
        return;
    }
    let ids = ripe.clone();
    match state.db(move |s| s.release_orphans(&ids)).await {
        Ok(n) => {
            tracing::warn!(runs = n, "runs this worker owned but held no task of were made resumable or interrupted");
            for id in ripe {
                seen.remove(&id);
            }
        }
        Err(e) => tracing::warn!("orphans not released: {}", e.body.message),
    }
}

struct Opened {
    state: AppState,
    operator_key: Option<String>,
    tenant_keys: Vec<(String, String)>,
    lock: std::fs::File,
}

/// The name of the lock file in the data directory.
pub const LOCK_FILE: &str = "server.lock";

/// Locks `data_dir`'s [`LOCK_FILE`] (an exclusive `flock`, let go when the
/// file is closed, so also when the process dies) for one server.
///
/// Errors: [`ServerError::Config`] when another server (in this process
/// or another) holds it: a second server on one data directory would
/// share its secret, workspaces and cache, and on SQLite opening the store
/// marks the first one's runs in flight interrupted. [`ServerError::Io`]
/// when the file cannot be opened or locked for another reason.
fn lock_data_dir(data_dir: &std::path::Path) -> Result<std::fs::File, ServerError> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = data_dir.join(LOCK_FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io(format!("open {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(ServerError::Config(format!(
            "{}: another hookbox serve uses this data directory (it holds this lock); give each server \
             its own --data-dir",
            path.display()
        ))),
        Err(std::fs::TryLockError::Error(source)) => {
            Err(ServerError::Io { what: format!("lock {}", path.display()), source })
        }
    }
}

fn open(config: ServerConfig, data_dir: PathBuf) -> Result<Opened, ServerError> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&data_dir)
        .map_err(io(format!("create {}", data_dir.display())))?;
    // Before anything in it is read or written.
    let lock = lock_data_dir(&data_dir)?;
    let hasher = KeyHasher::open(&data_dir.join("server.secret"))?;
    let (store, sessions): (Arc<dyn ServerStore>, Option<Arc<dyn SessionStore>>) = match config.database.as_deref() {
        Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
            let store = PostgresServerStore::open(url)?;
            let sessions = Arc::new(store.session_store());
            (Arc::new(store), Some(sessions))
        }
        Some(url) if url.starts_with("sqlite:") => {
            (Arc::new(SqliteServerStore::open(std::path::Path::new(&url[7..]))?), None)
        }
        Some(other) => {
            return Err(ServerError::Config(format!(
                "database: `{}` is neither sqlite:PATH nor a postgres:// URL",
                other.chars().take(80).flat_map(char::escape_debug).collect::<String>()
            )));
        }
        None => (Arc::new(SqliteServerStore::open(&data_dir.join("server.db"))?), None),
    };
    // A database of its own: what was in flight when this server last stopped
    // was this server's. A shared one may hold other workers' live runs: only
    // those of workers whose lease lapsed are over, which the lease keeper's
    // sweeps find ([`keep_lease`]).
    let shared = config.shared_database();
    if !shared {
        let interrupted = store.interrupt_live_runs()?;
        if interrupted > 0 {
            tracing::warn!("{interrupted} runs were in flight when the server last stopped: marked interrupted");
        }
    }
    // Hook state and conversations: in PostgreSQL beside the rest, so every
    // worker sees every session; else in a SQLite file of this server's.
    let state_store: Arc<dyn SessionStore> = match sessions {
        Some(sessions) => sessions,
        None => Arc::new(
            SqliteStateStore::open(&data_dir.join("state.db"))
                .map_err(|e| ServerError::Config(format!("state database: {e}")))?,
        ),
    };
    // Workers sharing a database share the secret: with another one, no
    // key would open here, and its operator key would revoke theirs.
    if !store.check_key_secret(&hasher.secret_check())? {
        return Err(ServerError::Config(format!(
            "{}: not the secret the other workers on this database hash keys with; replace it with the \
             server.secret of a worker already on it (in its data directory), then start again",
            data_dir.join("server.secret").display()
        )));
    }
    let runtime =
        HookRuntime::builder().cache_dir(Some(data_dir.join("cache"))).state_store(state_store.clone()).build()?;
    let operator_key = match std::env::var(OPERATOR_KEY_ENV) {
        Ok(key) => {
            if !well_formed(&key, OPERATOR_PREFIX) {
                return Err(ServerError::Config(format!(
                    "{OPERATOR_KEY_ENV}: not an operator key (hbo_ and 64 hex digits)"
                )));
            }
            let hash = hasher.hash(&key);
            if store.key_owner(&hash)?.is_none() {
                store.add_key(&hash, None, Role::Operator)?;
            }
            // The variable's key is the only operator key: setting a new one rotates the old out.
            let revoked = store.revoke_operator_keys_except(&hash)?;
            if revoked > 0 {
                tracing::warn!("{OPERATOR_KEY_ENV}: {revoked} other operator key(s) revoked");
            }
            None
        }
        Err(_) if store.has_operator_key()? => None,
        Err(_) => {
            let key = generate(OPERATOR_PREFIX);
            store.add_key(&hasher.hash(&key), None, Role::Operator)?;
            Some(key)
        }
    };
    let mut tenant_keys = Vec::new();
    for seed in &config.tenants {
        if store.tenant(&seed.name)?.is_none() {
            let tenant = store.create_tenant(&seed.name, &seed.quotas.unwrap_or(config.default_quotas))?;
            let key = generate(crate::keys::TENANT_PREFIX);
            store.add_key(&hasher.hash(&key), Some(tenant.id), Role::Admin)?;
            tenant_keys.push((seed.name.clone(), key));
        }
    }
    let state = AppState::new(config, store, hasher, runtime, state_store, data_dir);
    Ok(Opened { state, operator_key, tenant_keys, lock })
}

async fn accept_loop(listener: TcpListener, state: Arc<AppState>, mut stopped: tokio::sync::watch::Receiver<bool>) {
    let http = state.config.http;
    let limit = Arc::new(tokio::sync::Semaphore::new(http.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let router = crate::routes::router(state.clone());
    let hold = max_hold(Duration::from_millis(http.header_timeout_ms.max(1)));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(TokioTimer::new()).header_read_timeout(Duration::from_millis(http.header_timeout_ms.max(1)));
    loop {
        let permit = tokio::select! {
            p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = stopped.changed() => break,
        };
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopped.changed() => break,
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: wait a little rather than spin.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        // Between requests, the connection's reads wait while its tenant has
        // enough calls queued in the fair gate (crate::fair_io). A request is
        // in flight from its start until its response body is dropped (sent
        // or abandoned).
        let tenant = ConnTenant::new();
        let noted = tenant.clone();
        let router = router.clone();
        let service =
            TowerToHyperService::new(tower::service_fn(move |mut req: axum::http::Request<hyper::body::Incoming>| {
                let end = noted.begin();
                req.extensions_mut().insert(noted.clone());
                let router = router.clone();
                async move {
                    let resp = router.oneshot(req).await?;
                    Ok::<_, std::convert::Infallible>(resp.map(|b| axum::body::Body::new(Ended::new(b, end))))
                }
            }));
        let io = TokioIo::new(FairRead::new(stream, tenant, state.gate.clone(), hold));
        let conn = builder.serve_connection(io, service);
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _permit = permit;
            if let Err(e) = conn.await {
                tracing::debug!("connection: {e}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(CONNECTIONS_GRACE, graceful.shutdown()).await.is_err() {
        tracing::warn!("connections still open after {CONNECTIONS_GRACE:?}: closed");
    }
}

impl RunningServer {
    /// The address it listens on (the port is the real one when `listen` asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The data directory.
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// The operator key, when this start made it (the first start without
    /// `HOOKBOX_OPERATOR_KEY`); it is not stored anywhere but as a hash.
    pub fn operator_key(&self) -> Option<&str> {
        self.operator_key.as_deref()
    }

    /// The admin keys of the tenants this start made from `server.toml`: (tenant, key).
    pub fn tenant_keys(&self) -> &[(String, String)] {
        &self.tenant_keys
    }

    /// Shuts down gracefully: new runs are refused (503), runs in flight are
    /// aborted at their next safe point and their records and events stored
    /// (status `interrupted`), waiting at most 30 s; then the listener
    /// closes and open connections get 10 s to finish.
    pub async fn shutdown(self) {
        self.state.shutdown.store(true, std::sync::atomic::Ordering::Release);
        let live: Vec<_> =
            self.state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
        for run in &live {
            run.handle.abort("the server is shutting down");
        }
        let started = Instant::now();
        while started.elapsed() < RUNS_GRACE {
            if self.state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let left = self.state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();
        if left > 0 {
            tracing::error!(
                "{left} runs did not end within {RUNS_GRACE:?}; they stay `running` in the store and are marked interrupted at the next start"
            );
        }
        if left == 0 {
            // Nothing of this worker's is live: its lease can go at once.
            if let Err(e) = self.state.db(|s| s.retire()).await {
                tracing::warn!("lease not given up: {}", e.body.message);
            }
        }
        self.stop.send_replace(true);
        let _ = self.task.await;
    }
}
