//! `server.toml`: where the server listens and keeps its data, the models
//! tenants may run, the HTTP limits, the default quotas and the tenants
//! made at start-up.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::ServerError;

/// The default listen address: loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8787";

/// The largest `server.toml` read, in bytes.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The server's settings (`server.toml`). Unknown keys are an error.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// The address to listen on (default `127.0.0.1:8787`).
    #[serde(default = "default_listen")]
    pub listen: SocketAddr,
    /// Where the database, the component cache, hook state and run
    /// workspaces live (default: `$XDG_DATA_HOME/hookbox/server`). Relative
    /// paths are relative to the config file.
    pub data_dir: Option<PathBuf>,
    /// Where tenants, keys, plugin versions and runs are kept:
    /// `postgres://USER@HOST:PORT/DB` (several servers may share it),
    /// `sqlite:PATH`, or none for the SQLite file `server.db` in the data
    /// directory.
    pub database: Option<String>,
    /// The models tenants may name in `POST /v1/runs`, by name: a model spec
    /// as `hookbox run --model` takes it (`replay:FILE`, `openai:gpt-4o`, ...).
    /// A `replay:` path is relative to the config file. Empty: no runs.
    #[serde(default)]
    pub models: BTreeMap<String, String>,
    /// A directory copied into each run's fresh workspace (none: runs start
    /// in an empty workspace). Relative to the config file.
    pub workspace_template: Option<PathBuf>,
    /// Host environment variables a tenant's plugin may be granted (by
    /// name); a manifest asking for any other is refused.
    #[serde(default)]
    pub grantable_env: Vec<String>,
    /// The HTTP limits.
    #[serde(default)]
    pub http: HttpLimits,
    /// The quotas of a tenant that has none of its own.
    #[serde(default)]
    pub default_quotas: Quotas,
    /// How many evaluate calls run at once across tenants (default: one per
    /// core); more wait, and a freed slot goes to the tenant running the
    /// fewest (fair sharing).
    pub evaluate_slots: Option<usize>,
    /// Pin each worker thread of `hookbox serve`'s runtime to a core of its
    /// own (default false; Linux; an embedder calls
    /// [`crate::pin_worker_threads`] on its own runtime's builder). Keeps
    /// the kernel from leaving two workers on one core while another
    /// process runs on the other, which delayed a quiet tenant's evaluate
    /// calls by 1–5 ms (BENCHMARKS.md, "Pinned workers").
    /// A pinned worker cannot leave a core another busy process of equal
    /// priority shares with it: leave it off where the server shares its
    /// cores with such work.
    #[serde(default)]
    pub pin_workers: bool,
    /// The agent's iteration limit for runs (default 10).
    #[serde(default = "default_max_iterations")]
    pub max_iterations: u32,
    /// How long a worker's lease on its runs lasts without a heartbeat, in
    /// ms (default 10,000; 1,000 to 600,000). Workers sharing a PostgreSQL
    /// database renew theirs every fifth of it; a worker silent for longer
    /// has its live runs marked `interrupted` by another.
    #[serde(default = "default_worker_lease_ms")]
    pub worker_lease_ms: u64,
    /// The most runs this worker drives at once, over every tenant
    /// (default 256; 1 to 100,000). On a database several workers share
    /// (PostgreSQL) a new run it has no room for is queued there (status
    /// `queued`) and a worker with room starts it; a worker with no room
    /// claims no queued or resumable run. On SQLite such a run gets 503.
    #[serde(default = "default_worker_runs")]
    pub worker_runs: u32,
    /// How long a run waits for an approval, or in a hook's `pause`, in its
    /// worker before it parks, in
    /// ms (default 0: at once; a pause is noticed within 100 ms). A parked
    /// run holds no task and no instance; answering it (for a pause:
    /// resuming it) resumes it on any worker by re-executing its journal. Runs park only on a database several workers share
    /// (PostgreSQL); a very large value keeps every run in its process.
    #[serde(default)]
    pub park_after_ms: u64,
    /// Crash recovery (default true): on a database several workers share,
    /// a live run's journal is stored at every safe point, so that if its
    /// worker dies another resumes it there instead of marking it
    /// `interrupted`. False saves those writes (one per model response,
    /// tool call start and outcome, and hook-state commit).
    #[serde(default = "default_true")]
    pub checkpoint_runs: bool,
    /// With `checkpoint_runs` (default true): a safe point appends what the
    /// run's journal gained since the one before (a row of `run_journal`),
    /// and writes the whole checkpoint only now and then, so its cost does
    /// not grow with the run. False writes the whole checkpoint at every
    /// safe point (kept to measure one against the other).
    #[serde(default = "default_true")]
    pub journal_parts: bool,
    /// Tenants made at start-up when they do not exist yet; each one's admin
    /// key is printed once, when it is made.
    #[serde(default)]
    pub tenants: Vec<TenantSeed>,
}

/// A tenant declared in `server.toml`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TenantSeed {
    /// The tenant's name (`[a-z0-9-]`, 1–64 characters).
    pub name: String,
    /// Its quotas (default: `default_quotas`).
    pub quotas: Option<Quotas>,
}

/// Limits on what one HTTP client can make the server hold.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct HttpLimits {
    /// The largest JSON request body, in bytes (default 1 MiB).
    pub max_json_bytes: usize,
    /// The largest plugin upload (the whole multipart body), in bytes
    /// (default 64 MiB + 1 MiB for the manifest).
    pub max_upload_bytes: usize,
    /// How long a client may take to send its request headers, in ms (default 10,000).
    pub header_timeout_ms: u64,
    /// How long a request may take from its first byte to the handler's answer
    /// (the body included), in ms (default 60,000; SSE streams and uploads' compiles are not bound by it).
    pub request_timeout_ms: u64,
    /// How many connections the server keeps open at once (default 1,024);
    /// further ones wait in the kernel's backlog.
    pub max_connections: usize,
    /// How many requests one tenant may have in flight at once, all its keys
    /// together, open event streams included (default 64); more are answered
    /// 429. The operator key counts apart.
    pub max_requests_per_tenant: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_json_bytes: 1 << 20,
            max_upload_bytes: (64 << 20) + (1 << 20),
            header_timeout_ms: 10_000,
            request_timeout_ms: 60_000,
            max_connections: 1024,
            max_requests_per_tenant: 64,
        }
    }
}

/// What one tenant may use. Over a quota, a request is answered 429 with a
/// body naming the quota.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Quotas {
    /// Runs in flight at once (default 4).
    pub concurrent_runs: u32,
    /// Plugin instances live at once across the tenant's runs and evaluate
    /// calls (default 32): a run holds one per plugin of its chain while it is
    /// in flight, an evaluate call for its duration.
    pub live_instances: u32,
    /// Fuel the tenant's hooks may burn per minute (default 20,000,000,000).
    pub fuel_per_minute: u64,
    /// Time the tenant's hooks may run per minute, in ms (default 60,000).
    pub hook_ms_per_minute: u64,
    /// Model spend per UTC day, in USD (default 10.0), from the runs' usage.
    pub spend_per_day_usd: f64,
    /// Bytes of plugin components the tenant may store (default 256 MiB).
    pub plugin_storage_bytes: u64,
    /// The most fuel per call a plugin's `limits.fuel` may ask for (default 1,000,000,000).
    pub max_fuel_per_call: u64,
    /// The largest `limits.memory_bytes` a plugin may ask for (default 64 MiB).
    pub max_memory_bytes: u64,
    /// The longest `limits.deadline_ms` a plugin may ask for (default 5,000).
    pub max_deadline_ms: u64,
    /// Runs the tenant may have waiting in the database at once, parked or
    /// queued (default 1,000; each stores its journal and up to 8 MiB of
    /// workspace). Past it, a run that waits for an approval or in a pause
    /// waits in its worker (holding its `concurrent_runs` slot) instead of
    /// parking, and a new run that would be queued (its worker has no
    /// room, `worker_runs`) gets 429.
    pub parked_runs: u32,
}

impl Quotas {
    /// Checks values no quota can mean: a spend that is negative or not a number.
    ///
    /// Errors: a sentence naming the quota.
    pub fn check(&self) -> Result<(), String> {
        if !self.spend_per_day_usd.is_finite() || self.spend_per_day_usd < 0.0 {
            return Err(format!("spend_per_day_usd = {}: a number of USD, 0 or more", self.spend_per_day_usd));
        }
        Ok(())
    }
}

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            concurrent_runs: 4,
            live_instances: 32,
            fuel_per_minute: 20_000_000_000,
            hook_ms_per_minute: 60_000,
            spend_per_day_usd: 10.0,
            plugin_storage_bytes: 256 << 20,
            max_fuel_per_call: 1_000_000_000,
            max_memory_bytes: 64 << 20,
            parked_runs: 1_000,
            max_deadline_ms: 5_000,
        }
    }
}

fn default_listen() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8787))
}

fn default_max_iterations() -> u32 {
    10
}

fn default_worker_lease_ms() -> u64 {
    10_000
}

fn default_worker_runs() -> u32 {
    256
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            listen: default_listen(),
            data_dir: None,
            database: None,
            models: BTreeMap::new(),
            workspace_template: None,
            grantable_env: Vec::new(),
            http: HttpLimits::default(),
            default_quotas: Quotas::default(),
            evaluate_slots: None,
            pin_workers: false,
            max_iterations: default_max_iterations(),
            worker_lease_ms: default_worker_lease_ms(),
            worker_runs: default_worker_runs(),
            park_after_ms: 0,
            checkpoint_runs: true,
            journal_parts: true,
            tenants: Vec::new(),
        }
    }
}

impl ServerConfig {
    /// True when `database` is PostgreSQL, which other workers may share
    /// (leases, sweeps, queued commands and rechecked chains apply).
    pub fn shared_database(&self) -> bool {
        self.database.as_deref().is_some_and(|d| d.starts_with("postgres"))
    }

    /// Parses `server.toml` text; relative paths are resolved against `base`.
    ///
    /// Errors: [`ServerError::Config`] for TOML that does not parse, an
    /// unknown key, a bad tenant name or a model spec that is not `kind:rest`.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self, ServerError> {
        let mut config: ServerConfig = toml::from_str(text).map_err(|e| ServerError::Config(e.to_string()))?;
        config.data_dir = config.data_dir.map(|d| base.join(d));
        config.workspace_template = config.workspace_template.map(|d| base.join(d));
        for spec in config.models.values_mut() {
            match spec.split_once(':') {
                Some(("replay", path)) if !path.is_empty() => *spec = format!("replay:{}", base.join(path).display()),
                Some((_, rest)) if !rest.is_empty() => {}
                _ => {
                    return Err(ServerError::Config(format!(
                        "models: `{spec}` is not a model spec such as replay:FILE"
                    )));
                }
            }
        }
        for seed in &config.tenants {
            crate::names::check_tenant_name(&seed.name).map_err(ServerError::Config)?;
            if let Some(q) = &seed.quotas {
                q.check().map_err(|e| ServerError::Config(format!("tenant {}: {e}", seed.name)))?;
            }
        }
        if !(1_000..=600_000).contains(&config.worker_lease_ms) {
            return Err(ServerError::Config(format!(
                "worker_lease_ms: {} is not between 1000 and 600000",
                config.worker_lease_ms
            )));
        }
        if !(1..=100_000).contains(&config.worker_runs) {
            return Err(ServerError::Config(format!(
                "worker_runs: {} is not between 1 and 100000",
                config.worker_runs
            )));
        }
        config.default_quotas.check().map_err(|e| ServerError::Config(format!("default_quotas: {e}")))?;
        Ok(config)
    }

    /// Reads and parses `path` (at most [`MAX_CONFIG_BYTES`]).
    ///
    /// Errors: [`ServerError::Config`] naming the file.
    pub fn load(path: &Path) -> Result<Self, ServerError> {
        let bad = |e: String| ServerError::Config(format!("{}: {e}", path.display()));
        let len = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?.len();
        if len > MAX_CONFIG_BYTES {
            return Err(bad(format!("{len} bytes is over the {MAX_CONFIG_BYTES}-byte limit")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_toml(&text, base).map_err(|e| bad(e.to_string()))
    }
}

fn default_true() -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths_follow_the_config_file_and_unknown_keys_are_refused() {
        let c = ServerConfig::from_toml(
            "data_dir = \"d\"\n[models]\ndemo = \"replay:s.json\"\nlive = \"openai:gpt-4o\"\n",
            Path::new("/etc/hb"),
        )
        .unwrap_or_default();
        assert_eq!(c.data_dir.as_deref(), Some(Path::new("/etc/hb/d")));
        assert_eq!(c.models["demo"], "replay:/etc/hb/s.json");
        assert_eq!(c.models["live"], "openai:gpt-4o");
        assert_eq!(c.listen.to_string(), DEFAULT_LISTEN);
        assert!(ServerConfig::from_toml("colour = 1", Path::new(".")).is_err());
        assert!(ServerConfig::from_toml("[models]\nx = \"nocolon\"", Path::new(".")).is_err());
        assert!(ServerConfig::from_toml("[[tenants]]\nname = \"Bad Name\"", Path::new(".")).is_err());
    }
}
