//! The server's shared state ([`AppState`]): the store, the hook runtime,
//! the compiled plugins, each tenant's active chain and what each tenant
//! uses now (runs, instances, fuel and hook time this minute).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use hookbox::HookRuntime;
use hookbox::sandbox::{PluginSource, WasmPlugin};

use crate::config::ServerConfig;
use crate::error::{ApiError, ApiResult};
use crate::hooks::{Meter, PlanEntry};
use crate::keys::KeyHasher;
use crate::live::LiveRun;
use crate::metrics::Metrics;
use crate::registry::UploadManifest;
use crate::store::SessionStore;
use crate::store::{ServerStore, StoreResult, Tenant};
use crate::usage::{Slots, TenantUsage};

/// A compiled plugin version: (tenant, plugin, version, as a shadow).
type LoadedKey = (i64, String, i64, bool);

/// Everything the routes share.
pub struct AppState {
    /// The server's settings.
    pub config: ServerConfig,
    /// Tenants, keys, plugins, runs.
    pub store: Arc<dyn ServerStore>,
    /// Hashes API keys.
    pub hasher: KeyHasher,
    /// The one hook runtime of the process.
    pub runtime: HookRuntime,
    /// Hook state and session conversations.
    pub state_store: Arc<dyn SessionStore>,
    /// Where runs' workspaces are made.
    pub data_dir: PathBuf,
    /// The metrics `/metrics` serves.
    pub metrics: Arc<Metrics>,
    /// Compiles at once across tenants (one per core): more wait.
    pub compile_slots: tokio::sync::Semaphore,
    /// Tenants with an upload in progress (one at a time per tenant).
    uploads: Mutex<std::collections::HashSet<i64>>,
    /// Shares the evaluate slots fairly between tenants.
    pub gate: Arc<crate::fair::FairGate>,
    /// The chains evaluate calls keep per session.
    pub eval_cache: crate::eval_cache::EvalCache,
    /// Resolved keys, remembered for a few seconds.
    pub keys: crate::keys::KeyCache,
    /// `/readyz`'s cached answer (one database probe per second at most).
    pub readiness: crate::readiness::Readiness,
    /// Runs in flight (and just ended, until their record is stored), by id.
    pub runs: Mutex<HashMap<String, Arc<LiveRun>>>,
    /// This worker's room for runs: `worker_runs` places, one held by each
    /// run it drives until the run ends or parks (`crate::queue`).
    pub room: crate::room::Rooms,
    /// True once shutdown began: new runs are refused.
    pub shutdown: std::sync::atomic::AtomicBool,
    /// Runs being started or claimed here and not yet in `runs` (their rows
    /// may say this worker owns them already): while any are, no run is
    /// taken for an orphan ([`Settling`]).
    pub settling: std::sync::atomic::AtomicUsize,
    /// Runs that ended here but whose record could not be stored: their
    /// rows stay live and this worker's, and are no orphans to resume (at
    /// most [`MAX_UNSTORED`] remembered).
    unstored: Mutex<std::collections::HashSet<String>>,
    loaded: Mutex<HashMap<LoadedKey, Arc<WasmPlugin>>>,
    chains: Mutex<HashMap<i64, KeptPlan>>,
    usage: Mutex<HashMap<i64, Arc<TenantUsage>>>,
    inflight: Mutex<HashMap<String, usize>>,
}

impl AppState {
    /// The shared state.
    pub fn new(
        config: ServerConfig,
        store: Arc<dyn ServerStore>,
        hasher: KeyHasher,
        runtime: HookRuntime,
        state_store: Arc<dyn SessionStore>,
        data_dir: PathBuf,
    ) -> Self {
        let slots = config
            .evaluate_slots
            .unwrap_or_else(|| std::thread::available_parallelism().map(std::num::NonZeroUsize::get).unwrap_or(2));
        let room = crate::room::Rooms::new(config.worker_runs);
        AppState {
            compile_slots: tokio::sync::Semaphore::new(slots),
            uploads: Mutex::new(std::collections::HashSet::new()),
            gate: crate::fair::FairGate::new(slots),
            config,
            store,
            hasher,
            runtime,
            state_store,
            data_dir,
            metrics: Arc::new(Metrics::new()),
            keys: crate::keys::KeyCache::default(),
            readiness: crate::readiness::Readiness::default(),
            eval_cache: crate::eval_cache::EvalCache::default(),
            room,
            runs: Mutex::new(HashMap::new()),
            shutdown: std::sync::atomic::AtomicBool::new(false),
            settling: std::sync::atomic::AtomicUsize::new(0),
            unstored: Mutex::new(std::collections::HashSet::new()),
            loaded: Mutex::new(HashMap::new()),
            chains: Mutex::new(HashMap::new()),
            usage: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
        }
    }

    /// Runs `f` on the store on a blocking thread.
    ///
    /// Errors: a 500 when the store fails (logged).
    pub async fn db<T: Send + 'static>(
        &self,
        f: impl FnOnce(&dyn ServerStore) -> StoreResult<T> + Send + 'static,
    ) -> ApiResult<T> {
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || f(store.as_ref()))
            .await
            .map_err(ApiError::internal)?
            .map_err(ApiError::from)
    }

    /// What each tenant this worker counted uses now.
    pub fn usages(&self) -> Vec<(i64, Arc<TenantUsage>)> {
        let map = self.usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.iter().map(|(id, u)| (*id, u.clone())).collect()
    }

    /// What `tenant` uses now.
    pub fn usage(&self, tenant: i64) -> Arc<TenantUsage> {
        let mut map = self.usage.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.entry(tenant).or_default().clone()
    }

    /// Counts a request of `scope` (a tenant, or the operator's key); the
    /// guard uncounts it.
    ///
    /// Errors: a 429 when the scope has `max_requests_per_tenant` in flight.
    pub fn enter(self: &Arc<Self>, hash: &str) -> ApiResult<InFlight> {
        let mut map = self.inflight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(hash.to_string()).or_insert(0);
        if *n >= self.config.http.max_requests_per_tenant {
            return Err(ApiError::too_many_requests(format!(
                "this tenant has {} requests in flight, the most the server allows",
                self.config.http.max_requests_per_tenant
            )));
        }
        *n += 1;
        Ok(InFlight { state: self.clone(), hash: hash.to_string() })
    }

    /// Takes `n` of the tenant's instance slots; when they are all held,
    /// drops the tenant's kept evaluate chains first and tries again.
    ///
    /// Errors: 429 `live_instances`.
    pub fn take_instances(&self, tenant: &Tenant, n: u32) -> ApiResult<Slots> {
        let usage = self.usage(tenant.id);
        let limit = tenant.quotas.live_instances;
        let take = || Slots::take(&usage, |u| &u.instances, n, limit, "live_instances");
        let taken = take().or_else(|_| {
            self.eval_cache.evict(tenant.id);
            take()
        });
        self.counted(tenant, taken)
    }

    /// `result`, with a refusal over a quota counted in the metrics
    /// (`hookbox_quota_rejections_total`): every quota check goes through it.
    pub fn counted<T>(&self, tenant: &Tenant, result: ApiResult<T>) -> ApiResult<T> {
        if let Err(e) = &result
            && let Some(quota) = e.body.quota
        {
            self.metrics.quota_rejected(&tenant.name, quota);
        }
        result
    }

    /// True once shutdown began.
    pub fn shutting_down(&self) -> bool {
        self.shutdown.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A meter for one run or evaluate chain of `tenant`.
    pub fn meter(&self, tenant: Tenant) -> Arc<Meter> {
        Meter::new(self.metrics.clone(), self.store.clone(), self.usage(tenant.id), tenant)
    }

    /// Marks an upload of `tenant` in progress until the guard is dropped.
    ///
    /// Errors: 429 when the tenant has one in progress already (uploads of
    /// one tenant run one at a time, so a tenant cannot fill the compile
    /// workers, and its storage and fuel quotas are checked against what is
    /// really stored and spent).
    pub fn begin_upload(self: &Arc<Self>, tenant: i64) -> ApiResult<UploadGuard> {
        let mut set = self.uploads.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !set.insert(tenant) {
            return Err(ApiError::too_many_requests("this tenant has an upload in progress: one at a time"));
        }
        Ok(UploadGuard { state: self.clone(), tenant })
    }

    /// Forgets `tenant`'s cached chain (after an activation or a shadow change).
    ///
    /// Other workers on a shared database learn of the change within
    /// [`PLAN_RECHECK`]: [`AppState::plan`] compares a kept chain with the
    /// stored active and shadow versions that often.
    pub fn invalidate(&self, tenant: i64) {
        self.chains.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&tenant);
        self.eval_cache.evict(tenant);
    }

    /// Loads (or finds compiled) version `version` of `plugin`; a shadow
    /// version gets its own name (`NAME~shadow`), so its hook state never
    /// touches the active version's.
    ///
    /// Errors: 404 when the version does not exist; 422 when it no longer loads.
    pub async fn load_version(
        &self,
        tenant: &Tenant,
        plugin: &str,
        version: i64,
        shadow: bool,
    ) -> ApiResult<Arc<WasmPlugin>> {
        let key = (tenant.id, plugin.to_string(), version, shadow);
        if let Some(p) = self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key) {
            return Ok(p.clone());
        }
        let (tid, name) = (tenant.id, plugin.to_string());
        let found =
            self.db(move |s| Ok(s.version(tid, &name, version)?.zip(s.version_bytes(tid, &name, version)?))).await?;
        let Some((row, bytes)) = found else { return Err(ApiError::not_found("plugin version")) };
        let manifest: UploadManifest = serde_json::from_value(row.manifest).unwrap_or_default();
        let options = manifest.options(&tenant.quotas, version);
        let name = if shadow { format!("{plugin}~shadow") } else { plugin.to_string() };
        let label = format!("{}/{plugin}@{version}", tenant.name);
        let source = PluginSource::Bytes { label, bytes: bytes.into() };
        let loaded = self
            .runtime
            .load_async(&name, source, manifest.config_strings(), options)
            .await
            .map_err(|e| ApiError::unprocessable(format!("version {version} of `{plugin}` does not load: {e}")))?;
        let mut cache = self.loaded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(cache.entry(key).or_insert(loaded.plugin).clone())
    }

    /// The tenant's chain: every plugin with an active version, by name (or
    /// the plugins `names` lists, in that order).
    ///
    /// Errors: 404 for a name the tenant has no active version of.
    pub async fn plan(&self, tenant: &Tenant, names: Option<&[String]>) -> ApiResult<Arc<Vec<PlanEntry>>> {
        let kept = self.chains.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&tenant.id).cloned();
        let recheck = self.config.shared_database();
        let full = match kept {
            Some(kept) if !recheck || kept.checked.elapsed() < PLAN_RECHECK => kept.plan,
            kept => {
                let tid = tenant.id;
                let rows = self.db(move |s| s.plugins(tid)).await?;
                let versions: Vec<(String, i64, Option<i64>)> =
                    rows.into_iter().filter_map(|r| Some((r.name, r.active?, r.shadow))).collect();
                let had_kept = kept.is_some();
                let plan = match kept.filter(|k| k.versions == versions) {
                    Some(k) => k.plan,
                    None => {
                        if had_kept {
                            // Another worker activated, rolled back or shadowed a version.
                            self.eval_cache.evict(tenant.id);
                        }
                        let mut plan = Vec::new();
                        for (name, version, shadow) in &versions {
                            let plugin = self.load_version(tenant, name, *version, false).await?;
                            let shadow = match shadow {
                                Some(v) => Some((*v, self.load_version(tenant, name, *v, true).await?)),
                                None => None,
                            };
                            plan.push(PlanEntry { name: name.clone(), version: *version, plugin, shadow });
                        }
                        Arc::new(plan)
                    }
                };
                let kept = KeptPlan { plan: plan.clone(), versions, checked: std::time::Instant::now() };
                self.chains.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(tenant.id, kept);
                plan
            }
        };
        let Some(names) = names else { return Ok(full) };
        let mut picked: Vec<PlanEntry> = Vec::new();
        for name in names {
            if picked.iter().any(|e| &e.name == name) {
                return Err(ApiError::bad_request(format!("plugins: `{}` is listed twice", name.escape_debug())));
            }
            match full.iter().find(|e| &e.name == name) {
                Some(e) => picked.push(e.clone()),
                None => return Err(ApiError::not_found(&format!("active plugin `{}`", name.escape_debug()))),
            }
        }
        Ok(Arc::new(picked))
    }
}

/// How long a worker on a shared database uses a tenant's kept chain
/// before it checks the stored active and shadow versions again (one
/// small query): the longest another worker's activation, rollback or
/// shadow change takes to reach this one.
pub const PLAN_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// A tenant's chain as kept, with the versions it was built from and
/// when those were last compared with the store.
#[derive(Clone)]
struct KeptPlan {
    plan: Arc<Vec<PlanEntry>>,
    versions: Vec<(String, i64, Option<i64>)>,
    checked: std::time::Instant,
}

/// An upload in progress; its tenant may upload again once dropped.
pub struct UploadGuard {
    state: Arc<AppState>,
    tenant: i64,
}

impl Drop for UploadGuard {
    fn drop(&mut self) {
        self.state.uploads.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.tenant);
    }
}

/// A request counted against its key; uncounted when dropped.
pub struct InFlight {
    state: Arc<AppState>,
    hash: String,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut map = self.state.inflight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.hash) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.hash);
            }
        }
    }
}

/// Counts one run being started or claimed in [`AppState::settling`] until dropped.
pub struct Settling<'a>(&'a AppState);

impl<'a> Settling<'a> {
    /// Counts one until the guard is dropped.
    pub fn begin(state: &'a AppState) -> Self {
        state.settling.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Settling(state)
    }
}

impl Drop for Settling<'_> {
    fn drop(&mut self) {
        self.0.settling.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The most run ids [`AppState::mark_unstored`] remembers.
pub const MAX_UNSTORED: usize = 10_000;

impl AppState {
    /// Remembers that run `run_id` ended here but its record could not be
    /// stored (its row stays live): it is not taken back as an orphan.
    pub fn mark_unstored(&self, run_id: &str) {
        let mut unstored = self.unstored.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if unstored.len() < MAX_UNSTORED {
            unstored.insert(run_id.to_string());
        }
    }

    /// True when run `run_id` ended here with its record not stored.
    pub fn unstored(&self, run_id: &str) -> bool {
        self.unstored.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains(run_id)
    }
}
