//! [`PostgresServerStore`]: the server's store in PostgreSQL (issue 17), so
//! several `hookbox serve` workers can share one database: the same tables
//! as the SQLite store ([`pool::MIGRATIONS`]), reached through [`pool::Pool`].
//!
//! Each worker has an id and a lease in table `workers`, renewed by the
//! server's heartbeat; the runs it starts are its own (`runs.owner`). A
//! worker whose lease lapses (killed, or cut off from the database) has its
//! live runs marked `interrupted` by the next sweep of any worker, and from
//! then on the store refuses that worker's writes to them (fencing): a run
//! declared over is never written again by its old owner.

mod lease;
mod minutes;
mod park;
mod queue;
mod safe;

use lease::{FIRST_LEASE_MS, LIVE};
use rows::{VERSION_COLS, plugin_from, run_from, tenant_from, version_from};
mod pool;
mod rows;
mod session;
mod steer;

pub use session::PostgresSessionStore;

use super::{
    Checkpointed, Claim, ClaimedRun, KeyInfo, KeyOwner, MinuteUsage, NewVersion, ParkRow, PluginRow, PluginVersion,
    Role, RunEventRow, RunRow, ServerStore, ShadowRecord, StoreResult, Tenant, VersionStatus, unix_seconds,
};
use crate::config::Quotas;

/// The most shadow records kept per plugin.
const MAX_SHADOW_RECORDS: i64 = 1000;

/// The server's store in PostgreSQL.
pub struct PostgresServerStore {
    pool: std::sync::Arc<pool::Pool>,
    /// This worker's id (a UUID): the owner of the runs it starts.
    worker: String,
}

impl PostgresServerStore {
    /// Connects to `url` (`postgres://user@host:port/db`), applies the
    /// migrations not yet applied, and starts [`pool::POOL_SIZE`] connections.
    ///
    /// Errors: the database cannot be reached or a migration fails.
    pub fn open(url: &str) -> StoreResult<Self> {
        let store = PostgresServerStore {
            pool: std::sync::Arc::new(pool::Pool::open(url)?),
            worker: uuid::Uuid::new_v4().to_string(),
        };
        store.heartbeat(FIRST_LEASE_MS)?;
        Ok(store)
    }

    /// This worker's id (a UUID), the owner of the runs it starts.
    pub fn worker(&self) -> &str {
        &self.worker
    }

    /// Hook state and conversations in the same database, on the same connections.
    pub fn session_store(&self) -> PostgresSessionStore {
        PostgresSessionStore::new(self.pool.clone())
    }

    fn with<T: Send + 'static>(
        &self,
        f: impl FnMut(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    ) -> StoreResult<T> {
        self.pool.with(f)
    }
}

impl ServerStore for PostgresServerStore {
    fn create_tenant(&self, name: &str, quotas: &Quotas) -> StoreResult<Tenant> {
        let text = serde_json::to_string(quotas).unwrap_or_default();
        let (name, quotas) = (name.to_string(), *quotas);
        let created_at = unix_seconds();
        self.with(move |c| {
            let id: i64 = c
                .query_one(
                    "INSERT INTO tenants (name, quotas, created_at) VALUES ($1, $2, $3) RETURNING id",
                    &[&name, &text, &created_at],
                )?
                .get(0);
            Ok(Tenant { id, name: name.clone(), quotas, created_at })
        })
    }

    fn tenant(&self, name: &str) -> StoreResult<Option<Tenant>> {
        let name = name.to_string();
        self.with(move |c| {
            Ok(c.query_opt("SELECT id, name, quotas, created_at FROM tenants WHERE name = $1", &[&name])?
                .as_ref()
                .map(tenant_from))
        })
    }

    fn tenants(&self) -> StoreResult<Vec<Tenant>> {
        self.with(|c| {
            Ok(c.query("SELECT id, name, quotas, created_at FROM tenants ORDER BY name", &[])?
                .iter()
                .map(tenant_from)
                .collect())
        })
    }

    fn set_quotas(&self, tenant: i64, quotas: &Quotas) -> StoreResult<bool> {
        let text = serde_json::to_string(quotas).unwrap_or_default();
        self.with(move |c| Ok(c.execute("UPDATE tenants SET quotas = $1 WHERE id = $2", &[&text, &tenant])? == 1))
    }

    fn add_key(&self, hash: &str, tenant: Option<i64>, role: Role) -> StoreResult<()> {
        let hash = hash.to_string();
        self.with(move |c| {
            c.execute(
                "INSERT INTO keys (hash, tenant_id, role, created_at) VALUES ($1, $2, $3, $4)",
                &[&hash, &tenant, &role.as_str(), &unix_seconds()],
            )?;
            Ok(())
        })
    }

    fn key_owner(&self, hash: &str) -> StoreResult<Option<KeyOwner>> {
        let hash = hash.to_string();
        self.with(move |c| {
            let Some(row) = c.query_opt(
                "SELECT k.tenant_id, k.role, t.id, t.name, t.quotas, t.created_at
                 FROM keys k LEFT JOIN tenants t ON t.id = k.tenant_id WHERE k.hash = $1",
                &[&hash],
            )?
            else {
                return Ok(None);
            };
            let Some(role) = Role::parse(row.get::<_, &str>(1)) else { return Ok(None) };
            let tenant = match (row.get::<_, Option<i64>>(0), row.get::<_, Option<i64>>(2)) {
                (None, _) => None,
                // A key whose tenant is gone opens nothing.
                (Some(_), None) => return Ok(None),
                (Some(_), Some(id)) => Some(Tenant {
                    id,
                    name: row.get(3),
                    quotas: serde_json::from_str(row.get::<_, &str>(4)).unwrap_or_default(),
                    created_at: row.get(5),
                }),
            };
            Ok(Some(KeyOwner { tenant, role }))
        })
    }

    fn has_operator_key(&self) -> StoreResult<bool> {
        self.with(|c| Ok(c.query_one("SELECT EXISTS (SELECT 1 FROM keys WHERE role = 'operator')", &[])?.get(0)))
    }

    fn keys(&self, tenant: Option<i64>) -> StoreResult<Vec<KeyInfo>> {
        self.with(move |c| {
            let rows = c.query(
                "SELECT substr(hash, 1, 16), role, created_at FROM keys WHERE tenant_id IS NOT DISTINCT FROM $1
                 ORDER BY created_at, hash",
                &[&tenant],
            )?;
            Ok(rows
                .iter()
                .filter_map(|r| {
                    Role::parse(r.get::<_, &str>(1)).map(|role| KeyInfo { id: r.get(0), role, created_at: r.get(2) })
                })
                .collect())
        })
    }

    fn revoke_key(&self, tenant: Option<i64>, id: &str) -> StoreResult<bool> {
        if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        let id = id.to_string();
        self.with(move |c| {
            Ok(c.execute(
                "DELETE FROM keys WHERE tenant_id IS NOT DISTINCT FROM $1 AND substr(hash, 1, 16) = $2",
                &[&tenant, &id],
            )? > 0)
        })
    }

    fn revoke_operator_keys_except(&self, keep: &str) -> StoreResult<usize> {
        let keep = keep.to_string();
        self.with(move |c| {
            let n = c.execute("DELETE FROM keys WHERE role = 'operator' AND hash != $1", &[&keep])?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }

    fn add_version(&self, tenant: i64, plugin: &str, v: NewVersion) -> StoreResult<PluginVersion> {
        let name = plugin.to_string();
        let plugin = name.clone();
        // What the answer needs; the component itself goes to the call.
        let size = u64::try_from(v.component.len()).unwrap_or(u64::MAX);
        let meta = v.clone_meta();
        let (next, created_at) = self.with(move |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "INSERT INTO plugins (tenant_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                &[&tenant, &plugin],
            )?;
            // The plugin's row is locked while the next version number is taken: two
            // workers uploading the same plugin at once get 1 and 2, never 1 twice.
            tx.execute("SELECT 1 FROM plugins WHERE tenant_id = $1 AND name = $2 FOR UPDATE", &[&tenant, &plugin])?;
            let next: i64 = tx
                .query_one(
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM plugin_versions WHERE tenant_id = $1 AND plugin = $2",
                    &[&tenant, &plugin],
                )?
                .get(0);
            let size = i64::try_from(v.component.len()).unwrap_or(i64::MAX);
            let created_at = unix_seconds();
            tx.execute(
                "INSERT INTO plugin_versions (tenant_id, plugin, version, blake3, size, component, manifest, report, status, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
                &[
                    &tenant,
                    &plugin,
                    &next,
                    &v.blake3,
                    &size,
                    &v.component,
                    &v.manifest.to_string(),
                    &v.report.to_string(),
                    &v.status.as_str(),
                    &created_at,
                ],
            )?;
            tx.commit()?;
            Ok((next, created_at))
        })?;
        let mut stored = meta.stored(name, next, created_at);
        stored.bytes = size;
        Ok(stored)
    }

    fn version(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<Option<PluginVersion>> {
        let plugin = plugin.to_string();
        self.with(move |c| {
            Ok(c.query_opt(
                &format!(
                    "SELECT {VERSION_COLS} FROM plugin_versions WHERE tenant_id = $1 AND plugin = $2 AND version = $3"
                ),
                &[&tenant, &plugin, &version],
            )?
            .as_ref()
            .map(version_from))
        })
    }

    fn version_bytes(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<Option<Vec<u8>>> {
        let plugin = plugin.to_string();
        self.with(move |c| {
            Ok(c.query_opt(
                "SELECT component FROM plugin_versions WHERE tenant_id = $1 AND plugin = $2 AND version = $3",
                &[&tenant, &plugin, &version],
            )?
            .map(|r| r.get(0)))
        })
    }

    fn versions(&self, tenant: i64, plugin: &str) -> StoreResult<Vec<PluginVersion>> {
        let plugin = plugin.to_string();
        self.with(move |c| {
            Ok(c.query(
                &format!(
                    "SELECT {VERSION_COLS} FROM plugin_versions WHERE tenant_id = $1 AND plugin = $2 ORDER BY version"
                ),
                &[&tenant, &plugin],
            )?
            .iter()
            .map(version_from)
            .collect())
        })
    }

    fn plugins(&self, tenant: i64) -> StoreResult<Vec<PluginRow>> {
        self.with(move |c| {
            Ok(c.query("SELECT name, active, shadow FROM plugins WHERE tenant_id = $1 ORDER BY name", &[&tenant])?
                .iter()
                .map(plugin_from)
                .collect())
        })
    }

    fn plugin(&self, tenant: i64, name: &str) -> StoreResult<Option<PluginRow>> {
        let name = name.to_string();
        self.with(move |c| {
            Ok(c.query_opt(
                "SELECT name, active, shadow FROM plugins WHERE tenant_id = $1 AND name = $2",
                &[&tenant, &name],
            )?
            .as_ref()
            .map(plugin_from))
        })
    }

    fn set_status(&self, tenant: i64, plugin: &str, version: i64, status: VersionStatus) -> StoreResult<()> {
        let plugin = plugin.to_string();
        self.with(move |c| {
            c.execute(
                "UPDATE plugin_versions SET status = $4 WHERE tenant_id = $1 AND plugin = $2 AND version = $3",
                &[&tenant, &plugin, &version, &status.as_str()],
            )?;
            Ok(())
        })
    }

    fn activate(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<()> {
        let plugin = plugin.to_string();
        self.with(move |c| {
            let mut tx = c.transaction()?;
            tx.execute(
                "UPDATE plugin_versions SET status = 'inactive' WHERE tenant_id = $1 AND plugin = $2 AND status = 'active'",
                &[&tenant, &plugin],
            )?;
            tx.execute(
                "UPDATE plugin_versions SET status = 'active' WHERE tenant_id = $1 AND plugin = $2 AND version = $3",
                &[&tenant, &plugin, &version],
            )?;
            // A version cannot shadow itself.
            tx.execute(
                "UPDATE plugins SET active = $3, shadow = CASE WHEN shadow = $3 THEN NULL ELSE shadow END
                 WHERE tenant_id = $1 AND name = $2",
                &[&tenant, &plugin, &version],
            )?;
            tx.commit()
        })
    }

    fn set_shadow(&self, tenant: i64, plugin: &str, version: Option<i64>) -> StoreResult<()> {
        let plugin = plugin.to_string();
        self.with(move |c| {
            c.execute(
                "UPDATE plugins SET shadow = $3 WHERE tenant_id = $1 AND name = $2",
                &[&tenant, &plugin, &version],
            )?;
            Ok(())
        })
    }

    fn plugin_storage(&self, tenant: i64) -> StoreResult<u64> {
        self.with(move |c| {
            let n: i64 = c
                .query_one(
                    "SELECT COALESCE(SUM(size), 0)::BIGINT FROM plugin_versions WHERE tenant_id = $1",
                    &[&tenant],
                )?
                .get(0);
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn add_shadow_records(&self, tenant: i64, plugin: &str, records: &[ShadowRecord]) -> StoreResult<()> {
        let plugin = plugin.to_string();
        let texts: Vec<String> = records.iter().map(|r| serde_json::to_string(r).unwrap_or_default()).collect();
        self.with(move |c| {
            let mut tx = c.transaction()?;
            for text in &texts {
                tx.execute(
                    "INSERT INTO shadow_records (tenant_id, plugin, record) VALUES ($1, $2, $3)",
                    &[&tenant, &plugin, text],
                )?;
            }
            tx.execute(
                "DELETE FROM shadow_records WHERE tenant_id = $1 AND plugin = $2 AND id <= (
                   SELECT id FROM shadow_records WHERE tenant_id = $1 AND plugin = $2 ORDER BY id DESC LIMIT 1 OFFSET $3)",
                &[&tenant, &plugin, &MAX_SHADOW_RECORDS],
            )?;
            tx.commit()
        })
    }

    fn shadow_records(&self, tenant: i64, plugin: &str, limit: u32) -> StoreResult<Vec<ShadowRecord>> {
        let plugin = plugin.to_string();
        let limit = i64::from(limit);
        self.with(move |c| {
            let rows = c.query(
                "SELECT record FROM shadow_records WHERE tenant_id = $1 AND plugin = $2 ORDER BY id DESC LIMIT $3",
                &[&tenant, &plugin, &limit],
            )?;
            Ok(rows.iter().filter_map(|r| serde_json::from_str(r.get::<_, &str>(0)).ok()).collect())
        })
    }

    fn add_run(&self, tenant: i64, run: &RunRow) -> StoreResult<()> {
        self.insert_run(tenant, run, None).map(drop)
    }

    fn add_run_within(&self, tenant: i64, run: &RunRow, max_live: u32) -> StoreResult<bool> {
        self.insert_run(tenant, run, Some(max_live))
    }

    fn finish_run(
        &self,
        run_id: &str,
        claim: Claim,
        status: &str,
        record: Option<&serde_json::Value>,
    ) -> StoreResult<()> {
        self.end_run((run_id, claim), status, record)
    }

    fn set_run_status(&self, run_id: &str, claim: Claim, status: &str) -> StoreResult<()> {
        let (run_id, status) = (run_id.to_string(), status.to_string());
        let owner = self.worker.clone();
        self.with(move |c| {
            c.execute(
                &format!(
                    "UPDATE runs SET status = $2 WHERE id = $1 AND owner = $3 AND claim = $4 AND status IN {LIVE}"
                ),
                &[&run_id, &status, &owner, &claim.0],
            )?;
            Ok(())
        })
    }

    fn run(&self, tenant: i64, run_id: &str) -> StoreResult<Option<RunRow>> {
        let run_id = run_id.to_string();
        self.with(move |c| {
            Ok(c.query_opt(
                "SELECT id, status, model, session, plugins, created_at, record FROM runs WHERE tenant_id = $1 AND id = $2",
                &[&tenant, &run_id],
            )?
            .as_ref()
            .map(run_from))
        })
    }

    fn runs(&self, tenant: i64, limit: u32) -> StoreResult<Vec<RunRow>> {
        let limit = i64::from(limit);
        self.with(move |c| {
            Ok(c.query(
                "SELECT id, status, model, session, plugins, created_at, NULL::TEXT FROM runs WHERE tenant_id = $1
                 ORDER BY created_at DESC, seq DESC LIMIT $2",
                &[&tenant, &limit],
            )?
            .iter()
            .map(run_from)
            .collect())
        })
    }

    fn add_run_events(&self, run_id: &str, claim: Claim, events: &[RunEventRow]) -> StoreResult<()> {
        self.store_checkpoint((run_id, claim), events, None)
    }

    fn run_events(&self, run_id: &str, after: i64, limit: u32) -> StoreResult<Vec<RunEventRow>> {
        let run_id = run_id.to_string();
        let limit = i64::from(limit);
        self.with(move |c| {
            Ok(c.query(
                "SELECT seq, name, data FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                &[&run_id, &after, &limit],
            )?
            .iter()
            .map(|r| RunEventRow { seq: r.get(0), name: r.get(1), data: r.get(2) })
            .collect())
        })
    }

    fn interrupt_live_runs(&self) -> StoreResult<usize> {
        self.interrupt_all()
    }

    fn heartbeat(&self, lease_ms: u64) -> StoreResult<bool> {
        self.renew_lease(lease_ms)
    }

    fn sweep_dead_workers(&self) -> StoreResult<usize> {
        self.sweep()
    }

    fn owned_elsewhere(&self, run_ids: &[String]) -> StoreResult<Vec<String>> {
        self.owned_not_in(run_ids)
    }

    fn release_orphans(&self, run_ids: &[String]) -> StoreResult<usize> {
        self.sweep_own(run_ids)
    }

    fn still_mine(&self, runs: &[(String, Claim)]) -> StoreResult<Vec<String>> {
        self.owned_live(runs)
    }

    fn retire(&self) -> StoreResult<()> {
        self.give_up_lease()
    }

    fn add_approval(&self, tenant: i64, run: (&str, Claim), id: &str, data: &serde_json::Value) -> StoreResult<()> {
        self.put_approval(tenant, run, id, data)
    }

    fn remove_approvals(&self, run: (&str, Claim), id: Option<&str>) -> StoreResult<()> {
        self.drop_approvals(run, id)
    }

    fn approvals(&self, tenant: i64) -> StoreResult<Vec<(String, serde_json::Value)>> {
        self.list_approvals(tenant)
    }

    fn add_command(&self, tenant: i64, run_id: &str, command: &str) -> StoreResult<bool> {
        self.queue_command(tenant, run_id, command)
    }

    fn take_commands(&self, runs: &[(String, Claim)]) -> StoreResult<Vec<(String, String)>> {
        self.dequeue_commands(runs)
    }

    fn parks_runs(&self) -> bool {
        true
    }

    fn park_run(&self, tenant: i64, run: (&str, Claim), park: &ParkRow<'_>) -> StoreResult<bool> {
        self.park(tenant, run, park)
    }

    fn parked_run(&self, tenant: i64, run_id: &str) -> StoreResult<Option<(String, i64)>> {
        self.parked(tenant, run_id)
    }

    fn unpark(&self, run_id: &str, park: i64, parked: &str) -> StoreResult<bool> {
        self.make_resumable(run_id, park, parked)
    }

    fn update_parked(&self, run_id: &str, park: i64, parked: &str) -> StoreResult<bool> {
        self.rewrite_parked(run_id, park, parked)
    }

    fn save_checkpoint(
        &self,
        run: (&str, Claim),
        cp: Checkpointed<'_>,
        events: &[RunEventRow],
        safe: i64,
    ) -> StoreResult<()> {
        self.store_checkpoint(run, events, Some((cp, safe)))
    }

    fn claim_resumable(&self, run_id: Option<&str>) -> StoreResult<Option<ClaimedRun>> {
        self.claim(run_id)
    }

    fn check_key_secret(&self, check: &str) -> StoreResult<bool> {
        let check = check.to_string();
        self.with(move |c| {
            c.execute(
                "INSERT INTO server_meta (name, value) VALUES ('key_secret_check', $1) ON CONFLICT (name) DO NOTHING",
                &[&check],
            )?;
            let stored: String =
                c.query_one("SELECT value FROM server_meta WHERE name = 'key_secret_check'", &[])?.get(0);
            Ok(stored == check)
        })
    }

    fn add_minute_usage(&self, minute: i64, added: &[MinuteUsage]) -> StoreResult<Vec<MinuteUsage>> {
        self.add_minutes(minute, added)
    }

    fn release_claim(&self, run_id: &str, claim: Claim, queued: bool) -> StoreResult<()> {
        self.release(run_id, claim, queued)
    }

    fn queue_run(&self, tenant: i64, run: &RunRow, parked: &str, first: &RunEventRow, max: u32) -> StoreResult<bool> {
        self.queue(tenant, run, parked, first, max)
    }

    fn end_queued(&self, tenant: i64, run_id: &str, status: &str, record: &serde_json::Value) -> StoreResult<bool> {
        self.end_queued_run(tenant, run_id, status, record)
    }

    fn abort_resumable(&self, tenant: i64, run_id: &str, reason: &str) -> StoreResult<bool> {
        self.abort_waiting(tenant, run_id, reason)
    }

    fn add_spend(&self, tenant: i64, day: &str, usd: f64) -> StoreResult<()> {
        let day = day.to_string();
        self.with(move |c| {
            c.execute(
                "INSERT INTO spend (tenant_id, day, usd) VALUES ($1, $2, $3)
                 ON CONFLICT (tenant_id, day) DO UPDATE SET usd = spend.usd + excluded.usd",
                &[&tenant, &day, &usd],
            )?;
            Ok(())
        })
    }

    fn spend(&self, tenant: i64, day: &str) -> StoreResult<f64> {
        let day = day.to_string();
        self.with(move |c| {
            Ok(c.query_opt("SELECT usd FROM spend WHERE tenant_id = $1 AND day = $2", &[&tenant, &day])?
                .map(|r| r.get(0))
                .unwrap_or(0.0))
        })
    }
}
