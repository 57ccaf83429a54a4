//! What the server keeps: tenants and their key hashes, plugin versions
//! (bytes, hash, manifest, report, status), runs with their events and
//! records, shadow records and daily spend. [`ServerStore`] is the trait
//! the routes use; [`SqliteServerStore`] its embedded default (one file,
//! zero set-up), [`PostgresServerStore`] the one several workers share.
//! Hook state and session conversations are a [`SessionStore`]: the
//! hookbox crate's [`hookbox::SqliteStateStore`] beside the SQLite file,
//! or [`PostgresSessionStore`] in the same PostgreSQL database.
//!
//! Every method is synchronous and short; the routes call them on a
//! blocking thread ([`crate::state::AppState::db`]).

mod postgres;
mod sqlite;

mod durable;
mod minutes;
mod shadow;

pub use durable::{Checkpointed, Claim, ClaimedRun, ParkRow};
pub use minutes::{MAX_MINUTE_TENANTS, MinuteUsage};
pub use postgres::{PostgresServerStore, PostgresSessionStore};
pub use shadow::ShadowRecord;
pub use sqlite::SqliteServerStore;

use serde::{Deserialize, Serialize};

use crate::config::Quotas;

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The operator: manages tenants.
    Operator,
    /// A tenant's admin: everything in the tenant, approving capability diffs and making keys included.
    Admin,
    /// A tenant's member: everything in the tenant but approving diffs and making keys.
    Member,
}

impl Role {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Operator => "operator",
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    fn parse(s: &str) -> Option<Role> {
        match s {
            "operator" => Some(Role::Operator),
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

/// A tenant.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct Tenant {
    /// Its id in the store.
    #[serde(skip)]
    pub id: i64,
    /// Its name.
    pub name: String,
    /// Its quotas.
    pub quotas: Quotas,
    /// When it was made, Unix seconds.
    pub created_at: i64,
}

/// Who a key belongs to.
#[derive(Debug, Clone)]
pub struct KeyOwner {
    /// The tenant (none: the operator).
    pub tenant: Option<Tenant>,
    /// Its role.
    pub role: Role,
}

/// A stored key, as `GET /v1/keys` lists it (never the key itself).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct KeyInfo {
    /// The key's id: the first 16 hex digits of its stored hash.
    pub id: String,
    /// Its role.
    pub role: Role,
    /// When it was made, Unix seconds.
    pub created_at: i64,
}

/// A plugin version's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum VersionStatus {
    /// Needs capabilities the active version did not have: waits for a tenant admin's approval.
    Pending,
    /// May be activated.
    Ready,
    /// The version new runs and evaluate calls use.
    Active,
    /// Was active; may be activated again (a rollback).
    Inactive,
}

impl VersionStatus {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            VersionStatus::Pending => "pending",
            VersionStatus::Ready => "ready",
            VersionStatus::Active => "active",
            VersionStatus::Inactive => "inactive",
        }
    }

    fn parse(s: &str) -> VersionStatus {
        match s {
            "pending" => VersionStatus::Pending,
            "active" => VersionStatus::Active,
            "inactive" => VersionStatus::Inactive,
            _ => VersionStatus::Ready,
        }
    }
}

/// One stored plugin version (without its bytes).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PluginVersion {
    /// The plugin's name.
    pub plugin: String,
    /// The version number, 1, 2, ... per plugin.
    pub version: i64,
    /// The component's BLAKE3 hash, lowercase hex.
    pub blake3: String,
    /// The component's size, in bytes.
    pub bytes: u64,
    /// Its status.
    pub status: VersionStatus,
    /// The manifest entry it was uploaded with.
    #[schema(value_type = Object)]
    pub manifest: serde_json::Value,
    /// The report made at upload (see docs/server.md).
    #[schema(value_type = Object)]
    pub report: serde_json::Value,
    /// When it was uploaded, Unix seconds.
    pub created_at: i64,
}

/// A version to store.
#[derive(Debug, Clone)]
pub struct NewVersion {
    /// The component.
    pub component: Vec<u8>,
    /// Its BLAKE3 hash.
    pub blake3: String,
    /// The manifest entry.
    pub manifest: serde_json::Value,
    /// The report.
    pub report: serde_json::Value,
    /// `pending` or `ready`.
    pub status: VersionStatus,
}

impl NewVersion {
    /// Everything but the component's bytes (left empty).
    pub fn clone_meta(&self) -> NewVersion {
        NewVersion {
            component: Vec::new(),
            blake3: self.blake3.clone(),
            manifest: self.manifest.clone(),
            report: self.report.clone(),
            status: self.status,
        }
    }

    /// The version as stored: number `version` of `plugin`, made at `created_at` (Unix seconds).
    pub fn stored(self, plugin: String, version: i64, created_at: i64) -> PluginVersion {
        PluginVersion {
            plugin,
            version,
            bytes: u64::try_from(self.component.len()).unwrap_or(u64::MAX),
            blake3: self.blake3,
            status: self.status,
            manifest: self.manifest,
            report: self.report,
            created_at,
        }
    }
}

/// A plugin: its active and shadow versions.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct PluginRow {
    /// The plugin's name.
    pub name: String,
    /// The active version, if any.
    pub active: Option<i64>,
    /// The version running in shadow, if any.
    pub shadow: Option<i64>,
}

/// A run as stored.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct RunRow {
    /// The run's id (a UUID).
    pub run_id: String,
    /// `running`, `paused`, `waiting-approval`, `parked`, `resumable`,
    /// `completed`, `failed`, `aborted` or `interrupted`.
    pub status: String,
    /// The model's name (from the server's allow-list).
    pub model: String,
    /// The session, as the tenant named it.
    pub session: String,
    /// The plugins of its chain, with the version each ran: `name@version`.
    pub plugins: Vec<String>,
    /// When it started, Unix seconds.
    pub created_at: i64,
    /// The run record as `hookbox run --json` writes it; null until the run ends.
    #[schema(value_type = Option<Object>)]
    pub record: Option<serde_json::Value>,
}

/// True for a run that has not ended: live on a worker, or waiting in the
/// store (`parked`: for an answer; `resumable`: answered, for a worker;
/// `queued`: not started yet, for a worker with room).
pub fn not_ended(status: &str) -> bool {
    matches!(status, "running" | "paused" | "waiting-approval" | "parked" | "resumable" | "queued")
}

/// One stored event of a run's stream.
#[derive(Debug, Clone)]
pub struct RunEventRow {
    /// 1, 2, ... per run.
    pub seq: i64,
    /// The SSE event name.
    pub name: String,
    /// Its JSON data.
    pub data: String,
}

/// Now, in Unix seconds (the stores' and records' timestamps).
pub fn unix_seconds() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

pub use crate::error::StoreError;

/// Where hook state and session conversations are kept: the SQLite file
/// beside the server's ([`hookbox::SqliteStateStore`]) or PostgreSQL
/// ([`PostgresSessionStore`]), so workers on one database share sessions.
pub trait SessionStore: hookbox::sandbox::StateStore + hookbox::ConversationStore + 'static {}

impl<T: hookbox::sandbox::StateStore + hookbox::ConversationStore + 'static> SessionStore for T {}

/// The most approvals [`ServerStore::approvals`] lists.
pub const MAX_LISTED_APPROVALS: i64 = 1000;
/// The most commands waiting for one run ([`ServerStore::add_command`]).
pub const MAX_QUEUED_COMMANDS: i64 = 1000;

/// The store's result.
pub type StoreResult<T> = Result<T, StoreError>;

/// What the server keeps, behind one trait so a second backend
/// (PostgreSQL, issue 17) can take the SQLite default's place.
pub trait ServerStore: Send + Sync + 'static {
    /// Makes a tenant. Errors on a duplicate name (a constraint violation).
    fn create_tenant(&self, name: &str, quotas: &Quotas) -> StoreResult<Tenant>;
    /// The tenant named `name`.
    fn tenant(&self, name: &str) -> StoreResult<Option<Tenant>>;
    /// Every tenant, by name.
    fn tenants(&self) -> StoreResult<Vec<Tenant>>;
    /// Replaces a tenant's quotas; false if there is no such tenant.
    fn set_quotas(&self, tenant: i64, quotas: &Quotas) -> StoreResult<bool>;
    /// Stores a key hash for a tenant (none: the operator) with a role.
    fn add_key(&self, hash: &str, tenant: Option<i64>, role: Role) -> StoreResult<()>;
    /// Who the key with this hash belongs to.
    fn key_owner(&self, hash: &str) -> StoreResult<Option<KeyOwner>>;
    /// True if an operator key is stored.
    fn has_operator_key(&self) -> StoreResult<bool>;
    /// Checks that this server hashes keys with the secret the store's
    /// other workers use: stores `check` (the keyed hash of a fixed text,
    /// [`crate::keys::KeyHasher::secret_check`]) the first time, then
    /// compares. False when another secret is in use (its keys would not
    /// open, and its operator key would revoke theirs). Default: true (one
    /// server's own store, beside its secret).
    fn check_key_secret(&self, check: &str) -> StoreResult<bool> {
        let _ = check;
        Ok(true)
    }
    /// The keys of a tenant (none: the operator's): their ids (the first 16
    /// hex digits of the stored hash), roles and creation times.
    fn keys(&self, tenant: Option<i64>) -> StoreResult<Vec<KeyInfo>>;
    /// Deletes the key of `tenant` whose id is `id`; false if there is none.
    fn revoke_key(&self, tenant: Option<i64>, id: &str) -> StoreResult<bool>;
    /// Deletes every operator key but the one with hash `keep`; returns how many.
    fn revoke_operator_keys_except(&self, keep: &str) -> StoreResult<usize>;

    /// Stores a new version of `plugin` (numbered after the last one) and returns it.
    fn add_version(&self, tenant: i64, plugin: &str, version: NewVersion) -> StoreResult<PluginVersion>;
    /// One version (without bytes).
    fn version(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<Option<PluginVersion>>;
    /// A version's component bytes.
    fn version_bytes(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<Option<Vec<u8>>>;
    /// Every version of a plugin, oldest first.
    fn versions(&self, tenant: i64, plugin: &str) -> StoreResult<Vec<PluginVersion>>;
    /// The tenant's plugins, by name.
    fn plugins(&self, tenant: i64) -> StoreResult<Vec<PluginRow>>;
    /// One of the tenant's plugins.
    fn plugin(&self, tenant: i64, name: &str) -> StoreResult<Option<PluginRow>>;
    /// Sets a version's status.
    fn set_status(&self, tenant: i64, plugin: &str, version: i64, status: VersionStatus) -> StoreResult<()>;
    /// Makes `version` the active one in one transaction (the one before becomes `inactive`).
    fn activate(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<()>;
    /// Sets (or clears) the shadow version.
    fn set_shadow(&self, tenant: i64, plugin: &str, version: Option<i64>) -> StoreResult<()>;
    /// Bytes of components the tenant stores.
    fn plugin_storage(&self, tenant: i64) -> StoreResult<u64>;
    /// Appends shadow records (at most the newest 1,000 per plugin are kept).
    fn add_shadow_records(&self, tenant: i64, plugin: &str, records: &[ShadowRecord]) -> StoreResult<()>;
    /// The newest shadow records of a plugin (at most `limit`), newest first.
    fn shadow_records(&self, tenant: i64, plugin: &str, limit: u32) -> StoreResult<Vec<ShadowRecord>>;

    /// Stores a run that starts.
    fn add_run(&self, tenant: i64, run: &RunRow) -> StoreResult<()>;
    /// Stores a run that starts on this worker if the tenant has fewer than
    /// `max_live` runs live (running, paused or waiting for an approval) on
    /// every worker of the store, or `resumable` (answered, waiting for a
    /// worker: their places are kept for them). False, with nothing stored,
    /// otherwise.
    /// Default: [`ServerStore::add_run`] (one worker counts its own runs).
    fn add_run_within(&self, tenant: i64, run: &RunRow, max_live: u32) -> StoreResult<bool> {
        let _ = max_live;
        self.add_run(tenant, run).map(|()| true)
    }
    /// Sets a run's status and, when it ended, its record; from `claim` of
    /// the run ([`Claim`]: a shared store takes it from the owner's latest
    /// claim only, else `Fenced`).
    fn finish_run(
        &self,
        run_id: &str,
        claim: Claim,
        status: &str,
        record: Option<&serde_json::Value>,
    ) -> StoreResult<()>;
    /// Sets a live run's status, from `claim` of it.
    fn set_run_status(&self, run_id: &str, claim: Claim, status: &str) -> StoreResult<()>;
    /// A tenant's run.
    fn run(&self, tenant: i64, run_id: &str) -> StoreResult<Option<RunRow>>;
    /// A tenant's newest runs (at most `limit`), newest first, without records.
    fn runs(&self, tenant: i64, limit: u32) -> StoreResult<Vec<RunRow>>;
    /// Appends events to a run's stream, from `claim` of it.
    fn add_run_events(&self, run_id: &str, claim: Claim, events: &[RunEventRow]) -> StoreResult<()>;
    /// A run's events after `seq`, at most `limit`.
    fn run_events(&self, run_id: &str, after: i64, limit: u32) -> StoreResult<Vec<RunEventRow>>;
    /// Marks every run still `running`/`paused`/`waiting-approval` as
    /// `interrupted` (at start-up: the process that ran them is gone); returns how many.
    fn interrupt_live_runs(&self) -> StoreResult<usize>;

    /// Renews this worker's lease on the runs it owns for `lease_ms` (a
    /// database several workers share; one of a single process has nothing
    /// to renew). False when the lease had lapsed and was swept: another
    /// worker marked this worker's runs `interrupted`, and the store refuses
    /// this worker's writes to them (fencing); the lease is taken anew for
    /// runs started from now on.
    fn heartbeat(&self, lease_ms: u64) -> StoreResult<bool> {
        let _ = lease_ms;
        Ok(true)
    }
    /// Marks `interrupted` the live runs of workers whose lease lapsed (killed,
    /// or cut off from the database), or `resumable` those with a checkpoint
    /// ([`ServerStore::save_checkpoint`]); returns how many. Default: none.
    fn sweep_dead_workers(&self) -> StoreResult<usize> {
        Ok(0)
    }
    /// This worker's live runs other than `run_ids` (at most 1,000): runs
    /// it owns in the database but holds no task of (a claim whose reply was
    /// lost). Default: none.
    fn owned_elsewhere(&self, run_ids: &[String]) -> StoreResult<Vec<String>> {
        let _ = run_ids;
        Ok(Vec::new())
    }
    /// Sweeps this worker's live runs `run_ids` that it holds no task of, as
    /// [`ServerStore::sweep_dead_workers`] sweeps a dead worker's: `resumable`
    /// with a checkpoint, else `interrupted`; returns how many. Default: none.
    fn release_orphans(&self, run_ids: &[String]) -> StoreResult<usize> {
        let _ = run_ids;
        Ok(0)
    }
    /// Of `runs` (run id and the claim a task runs it on), the ids of those
    /// still live, this worker's and on that claim (not swept, nor claimed
    /// again since): after a lapsed lease, the ones it may go on with.
    /// Default: all.
    fn still_mine(&self, runs: &[(String, Claim)]) -> StoreResult<Vec<String>> {
        Ok(runs.iter().map(|(id, _)| id.clone()).collect())
    }
    /// Gives up this worker's lease (a graceful shutdown, after its runs ended).
    fn retire(&self) -> StoreResult<()> {
        Ok(())
    }

    /// Lists a live run's pending approval so that every worker sees it
    /// (`data` as `GET /v1/approvals` shows it), from `claim` of the run.
    /// Default: nothing to do (one process, whose live runs are the only ones).
    ///
    /// Errors: `Fenced` when the run is not live or not this claim's.
    fn add_approval(
        &self,
        tenant: i64,
        (run_id, claim): (&str, Claim),
        id: &str,
        data: &serde_json::Value,
    ) -> StoreResult<()> {
        let _ = (tenant, run_id, claim, id, data);
        Ok(())
    }
    /// Forgets a run's approval `id` (answered), or all of them (none: the
    /// run ended), from `claim` of the run: a shared store forgets nothing
    /// of a run that is not this worker's on that claim (another claim's
    /// approvals are that claim's to forget).
    fn remove_approvals(&self, (run_id, claim): (&str, Claim), id: Option<&str>) -> StoreResult<()> {
        let _ = (run_id, claim, id);
        Ok(())
    }
    /// The pending approvals of the tenant's runs on every worker, oldest
    /// first, at most [`MAX_LISTED_APPROVALS`]: (run id, data). Default: none.
    fn approvals(&self, tenant: i64) -> StoreResult<Vec<(String, serde_json::Value)>> {
        let _ = tenant;
        Ok(Vec::new())
    }
    /// Queues `command` (JSON text, see `crate::steer::RunCommand`) for the
    /// worker that runs the tenant's live run `run_id`. False when there is
    /// no such live run, it has [`MAX_QUEUED_COMMANDS`] waiting, or the
    /// command answers an approval that is not listed (answered already). Default:
    /// false (one process steers its runs directly).
    fn add_command(&self, tenant: i64, run_id: &str, command: &str) -> StoreResult<bool> {
        let _ = (tenant, run_id, command);
        Ok(false)
    }
    /// Takes (and deletes) the commands queued for these runs (run id and
    /// the claim a task runs it on; only those live, this worker's and on
    /// that claim), oldest first: (run id, command).
    fn take_commands(&self, runs: &[(String, Claim)]) -> StoreResult<Vec<(String, String)>> {
        let _ = runs;
        Ok(Vec::new())
    }

    /// True when a run waiting for an approval can be parked here (its
    /// checkpoint stored, its task and instances dropped) and resumed by
    /// any worker: a database several workers share. Default: false (a run
    /// waits in its process).
    fn parks_runs(&self) -> bool {
        false
    }
    /// Parks this worker's live run `run_id` (from `claim` of it) in one transaction: stores
    /// `park.events`, lists the approval it waits for (if any), stores its
    /// checkpoint and sets status `parked` with no owner, and counts
    /// `park.spend` against the tenant's day. False, with nothing changed,
    /// when commands are queued for the run (it stays in its process, which
    /// takes them) or when the tenant has `park.max_parked` runs parked
    /// already (its `parked_runs` quota).
    ///
    /// Errors: `Fenced` when the run is no longer this worker's, or `claim` is not its latest; `Unavailable` when runs do not park here.
    fn park_run(&self, tenant: i64, (run_id, claim): (&str, Claim), park: &ParkRow<'_>) -> StoreResult<bool> {
        let _ = (tenant, run_id, claim, park);
        Err(crate::error::StoreError::Unavailable("runs are not parked in this store".into()))
    }
    /// The checkpoint text of the tenant's run `run_id` if it is `parked`
    /// (empty when it is missing or over 32 MiB), with the number of its park.
    fn parked_run(&self, tenant: i64, run_id: &str) -> StoreResult<Option<(String, i64)>> {
        let _ = (tenant, run_id);
        Ok(None)
    }
    /// Makes a `parked` run `resumable` with the checkpoint `parked` (it
    /// holds the answer, or the abort), and forgets its listed approvals, if
    /// it is still parked at its park number `park` ([`ServerStore::parked_run`]).
    /// False otherwise (another request answered it first, and it may have
    /// parked again since).
    fn unpark(&self, run_id: &str, park: i64, parked: &str) -> StoreResult<bool> {
        let _ = (run_id, park, parked);
        Ok(false)
    }
    /// Rewrites the checkpoint of a `parked` run to `parked` (a message
    /// added to its inbox), if it is still parked at its park number `park`,
    /// and gives it a new park number (so that a command that read the old
    /// checkpoint is refused and reads again). False otherwise.
    fn update_parked(&self, run_id: &str, park: i64, parked: &str) -> StoreResult<bool> {
        let _ = (run_id, park, parked);
        Ok(false)
    }
    /// Stores this worker's live run's checkpoint at a safe point (crash
    /// recovery), from `claim` of it: `checkpoint` (whole, a part appended to it, or forgotten:
    /// [`Checkpointed`]), `events` (its stream since the last one; those stored
    /// already are kept) and `safe_seq`, the last event of its stream at the
    /// safe point. If the worker dies, a sweep makes a run with a checkpoint
    /// `resumable` (its events after `safe_seq` are dropped) instead of
    /// `interrupted`, and [`ServerStore::claim_resumable`] gives the
    /// checkpoint with its parts applied.
    ///
    /// Errors: `Fenced` when the run is no longer this worker's, or `claim` is not its latest; `Unavailable` when runs do not park here.
    fn save_checkpoint(
        &self,
        (run_id, claim): (&str, Claim),
        checkpoint: Checkpointed<'_>,
        events: &[RunEventRow],
        safe_seq: i64,
    ) -> StoreResult<()> {
        let _ = (run_id, claim, checkpoint, events, safe_seq);
        Err(crate::error::StoreError::Unavailable("runs are not checkpointed in this store".into()))
    }
    /// Claims a `resumable` or `queued` run (`run_id`, or the one waiting
    /// longest) for this worker: status `running`, owner this worker. Workers claiming at
    /// once each get another one (`FOR UPDATE SKIP LOCKED`). `None` when
    /// there is none. Default: none.
    fn claim_resumable(&self, run_id: Option<&str>) -> StoreResult<Option<ClaimedRun>> {
        let _ = run_id;
        Ok(None)
    }
    /// Gives a claimed run back (`resumable`, or `queued` when `queued`; no
    /// owner; at the back of the queue): this worker cannot run it now.
    /// Nothing changes unless the run is still `running` on its `claim`.
    fn release_claim(&self, run_id: &str, claim: Claim, queued: bool) -> StoreResult<()> {
        let _ = (run_id, claim, queued);
        Ok(())
    }
    /// Adds the tenant's new run `run` as `queued` (no owner) with its
    /// checkpoint `parked` (`crate::checkpoint::ParkedRun` as JSON) and the
    /// first event of its stream, for any worker with room to claim
    /// ([`ServerStore::claim_resumable`]). False, with nothing stored, when
    /// the tenant has `max_waiting` runs parked or queued (its
    /// `parked_runs` quota).
    ///
    /// Errors: `Unavailable` when runs are not queued in this store.
    fn queue_run(
        &self,
        tenant: i64,
        run: &RunRow,
        parked: &str,
        first: &RunEventRow,
        max_waiting: u32,
    ) -> StoreResult<bool> {
        let _ = (tenant, run, parked, first, max_waiting);
        Err(crate::error::StoreError::Unavailable("runs are not queued in this store".into()))
    }
    /// Writes `reason` as the abort of the tenant's `resumable` run `run_id`
    /// into its checkpoint, in one statement (the worker that claims it
    /// ends it aborted), unless it has one already. False when the run is
    /// not `resumable` (any more) or its checkpoint is not one.
    fn abort_resumable(&self, tenant: i64, run_id: &str, reason: &str) -> StoreResult<bool> {
        let _ = (tenant, run_id, reason);
        Ok(false)
    }
    /// Ends the tenant's run `run_id` with `status` and `record` if it is
    /// still `queued` (no worker claimed it). False otherwise.
    fn end_queued(&self, tenant: i64, run_id: &str, status: &str, record: &serde_json::Value) -> StoreResult<bool> {
        let _ = (tenant, run_id, status, record);
        Ok(false)
    }

    /// Adds this worker's use of `minute` (minutes since the Unix epoch)
    /// since its last call, `added`, to the counts every worker shares, and
    /// returns every tenant's count of `minute` on all workers together (at
    /// most [`MAX_MINUTE_TENANTS`]); forgets the counts of earlier minutes.
    /// Default: nothing shared (one worker's own store): none.
    fn add_minute_usage(&self, minute: i64, added: &[MinuteUsage]) -> StoreResult<Vec<MinuteUsage>> {
        let _ = (minute, added);
        Ok(Vec::new())
    }

    /// Adds to the tenant's model spend of `day` (`YYYY-MM-DD`, UTC), in USD.
    fn add_spend(&self, tenant: i64, day: &str, usd: f64) -> StoreResult<()>;
    /// The tenant's model spend of `day`, in USD.
    fn spend(&self, tenant: i64, day: &str) -> StoreResult<f64>;
}
