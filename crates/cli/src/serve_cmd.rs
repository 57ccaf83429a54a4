//! `hookbox serve`: runs [`hookbox_server`] until SIGINT or SIGTERM, then
//! shuts it down gracefully (runs in flight are aborted at their next safe
//! point and their records stored).

use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;

use tokio::signal::unix::{SignalKind, signal};

use crate::{BadInput, WORKER_THREADS, escape, tokio_runtime_with};

#[derive(Debug, clap::Args)]
pub(crate) struct ServeArgs {
    /// server.toml: models, data directory, HTTP limits, quotas, tenants (docs/server.md).
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// The address to listen on (default: `listen` in the config, else 127.0.0.1:8787).
    #[arg(long, value_name = "ADDR")]
    pub(crate) listen: Option<SocketAddr>,
    /// Where the database, the component cache, hook state and run workspaces
    /// live (default: `data_dir` in the config, else $XDG_DATA_HOME/hookbox/server).
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
    /// Where tenants, plugins and runs are kept: `postgres://USER@HOST:PORT/DB`
    /// (several servers may share it) or `sqlite:PATH` (default: `database`
    /// in the config, else server.db in the data directory).
    #[arg(long, value_name = "URL")]
    pub(crate) db: Option<String>,
}

/// Serves until a signal; returns the exit code (0 after a clean shutdown).
pub(crate) fn serve(args: &ServeArgs, stdout: &mut dyn Write, stderr: &mut dyn Write) -> Result<i32, BadInput> {
    let mut config = match &args.config {
        Some(path) => hookbox_server::ServerConfig::load(path).map_err(|e| BadInput(e.into()))?,
        None => hookbox_server::ServerConfig::default(),
    };
    if let Some(listen) = args.listen {
        config.listen = listen;
    }
    if let Some(dir) = &args.data_dir {
        config.data_dir = Some(dir.clone());
    }
    if let Some(db) = &args.db {
        config.database = Some(db.clone());
    }
    let mut pinning = None;
    let runtime = tokio_runtime_with(|b| {
        if config.pin_workers {
            pinning = Some(hookbox_server::pin_worker_threads(b, WORKER_THREADS));
        }
        b.event_interval(hookbox_server::IO_EVENT_INTERVAL)
    })?;
    runtime.block_on(async {
        let server = hookbox_server::Server::start(config).await.map_err(|e| BadInput(e.into()))?;
        let _ = writeln!(stdout, "hookbox serve: listening on http://{}", server.addr());
        let _ = writeln!(stdout, "data directory: {}", escape::line(&server.data_dir().display().to_string()));
        if let Some(key) = server.operator_key() {
            let _ = writeln!(stdout, "operator key (shown once, stored only as a hash): {key}");
        }
        for (tenant, key) in server.tenant_keys() {
            let _ = writeln!(stdout, "tenant {tenant} admin key (shown once): {key}");
        }
        if let Some(pinning) = &pinning {
            report_pinning(pinning, stdout, stderr).await;
        }
        let _ = stdout.flush();
        let (mut int, mut term) = match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
            (Ok(i), Ok(t)) => (i, t),
            _ => return Err(BadInput(anyhow::anyhow!("cannot install the SIGINT/SIGTERM handlers"))),
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        let _ = writeln!(stderr, "hookbox serve: shutting down (runs in flight are aborted and their records stored)");
        server.shutdown().await;
        let _ = writeln!(stderr, "hookbox serve: stopped");
        Ok(0)
    })
}

/// Says on `stdout` which cores the workers pinned themselves to, or on
/// `stderr` why they are not pinned (`pin_workers = true`). Waits up to 1 s
/// for each worker to have tried (it does the first time it goes idle,
/// which after the server's start is at once).
async fn report_pinning(pinning: &hookbox_server::Pinning, stdout: &mut dyn Write, stderr: &mut dyn Write) {
    use hookbox_server::Pinning;
    let _ = match pinning {
        Pinning::Pinned(p) => {
            let asked = std::time::Instant::now();
            while p.tried() < WORKER_THREADS && asked.elapsed() < std::time::Duration::from_secs(1) {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            let cores: Vec<String> = p.cores().iter().map(usize::to_string).collect();
            match (p.tried().saturating_sub(p.failed()), p.failed()) {
                (n, 0) if n >= WORKER_THREADS => {
                    writeln!(stdout, "hookbox serve: worker threads pinned to cores {}", cores.join(", "))
                }
                (pinned, failed) => writeln!(
                    stderr,
                    "hookbox serve: pin_workers: {pinned} of {WORKER_THREADS} worker threads pinned (cores {}); \
                     {failed} could not be pinned, the others have not tried yet; those keep the whole mask",
                    cores.join(", ")
                ),
            }
        }
        Pinning::TooFewCores { allowed } => writeln!(
            stderr,
            "hookbox serve: pin_workers: this process may run on {allowed} core(s), fewer than 2; workers are not pinned"
        ),
        Pinning::Unavailable { error } => {
            writeln!(stderr, "hookbox serve: pin_workers: {}; workers are not pinned", escape::line(error))
        }
    };
}
