//! [`SqliteServerStore`]: the server's store in one SQLite file (WAL, one
//! connection behind a mutex; each method is one short statement or
//! transaction).

use std::path::Path;
use std::sync::Mutex;

use rusqlite::{Connection, OptionalExtension, params};

use super::{
    Claim, KeyInfo, KeyOwner, NewVersion, PluginRow, PluginVersion, Role, RunEventRow, RunRow, ServerStore,
    ShadowRecord, StoreResult, Tenant, VersionStatus, unix_seconds,
};
use crate::config::Quotas;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS tenants (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, quotas TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS keys (
    hash TEXT PRIMARY KEY, tenant_id INTEGER REFERENCES tenants(id), role TEXT NOT NULL, created_at INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS plugins (
    tenant_id INTEGER NOT NULL, name TEXT NOT NULL, active INTEGER, shadow INTEGER,
    PRIMARY KEY (tenant_id, name));
CREATE TABLE IF NOT EXISTS plugin_versions (
    tenant_id INTEGER NOT NULL, plugin TEXT NOT NULL, version INTEGER NOT NULL, blake3 TEXT NOT NULL,
    size INTEGER NOT NULL, component BLOB NOT NULL, manifest TEXT NOT NULL, report TEXT NOT NULL,
    status TEXT NOT NULL, created_at INTEGER NOT NULL, PRIMARY KEY (tenant_id, plugin, version));
CREATE TABLE IF NOT EXISTS shadow_records (
    id INTEGER PRIMARY KEY, tenant_id INTEGER NOT NULL, plugin TEXT NOT NULL, record TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS shadow_by_plugin ON shadow_records (tenant_id, plugin, id);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, tenant_id INTEGER NOT NULL, status TEXT NOT NULL, model TEXT NOT NULL,
    session TEXT NOT NULL, plugins TEXT NOT NULL, created_at INTEGER NOT NULL, record TEXT);
CREATE INDEX IF NOT EXISTS runs_by_tenant ON runs (tenant_id, created_at);
CREATE TABLE IF NOT EXISTS run_events (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, name TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq));
CREATE TABLE IF NOT EXISTS spend (
    tenant_id INTEGER NOT NULL, day TEXT NOT NULL, usd REAL NOT NULL, PRIMARY KEY (tenant_id, day));
";

/// The most shadow records kept per plugin.
const MAX_SHADOW_RECORDS: i64 = 1000;

/// The server's store in a SQLite file.
pub struct SqliteServerStore {
    conn: Mutex<Connection>,
}

fn json_col(text: String) -> serde_json::Value {
    serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
}

impl SqliteServerStore {
    /// Opens (or creates) the database at `path` and its tables.
    ///
    /// Errors: the file cannot be opened or is not a database.
    pub fn open(path: &Path) -> StoreResult<Self> {
        let conn = Connection::open(path)?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        conn.busy_timeout(std::time::Duration::from_secs(5))?;
        conn.execute_batch(SCHEMA)?;
        Ok(SqliteServerStore { conn: Mutex::new(conn) })
    }

    fn with<T>(&self, f: impl FnOnce(&mut Connection) -> rusqlite::Result<T>) -> StoreResult<T> {
        let mut conn = self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(f(&mut conn)?)
    }
}

fn tenant_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<Tenant> {
    let quotas: String = row.get(2)?;
    Ok(Tenant {
        id: row.get(0)?,
        name: row.get(1)?,
        quotas: serde_json::from_str(&quotas).unwrap_or_default(),
        created_at: row.get(3)?,
    })
}

const VERSION_COLS: &str = "plugin, version, blake3, size, status, manifest, report, created_at";

fn version_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<PluginVersion> {
    Ok(PluginVersion {
        plugin: row.get(0)?,
        version: row.get(1)?,
        blake3: row.get(2)?,
        bytes: u64::try_from(row.get::<_, i64>(3)?).unwrap_or(0),
        status: VersionStatus::parse(&row.get::<_, String>(4)?),
        manifest: json_col(row.get(5)?),
        report: json_col(row.get(6)?),
        created_at: row.get(7)?,
    })
}

fn run_from(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRow> {
    let plugins: String = row.get(4)?;
    Ok(RunRow {
        run_id: row.get(0)?,
        status: row.get(1)?,
        model: row.get(2)?,
        session: row.get(3)?,
        plugins: serde_json::from_str(&plugins).unwrap_or_default(),
        created_at: row.get(5)?,
        record: row.get::<_, Option<String>>(6)?.map(json_col),
    })
}

impl ServerStore for SqliteServerStore {
    fn create_tenant(&self, name: &str, quotas: &Quotas) -> StoreResult<Tenant> {
        let text = serde_json::to_string(quotas).unwrap_or_default();
        let created_at = unix_seconds();
        self.with(|c| {
            c.execute(
                "INSERT INTO tenants (name, quotas, created_at) VALUES (?1, ?2, ?3)",
                params![name, text, created_at],
            )?;
            Ok(Tenant { id: c.last_insert_rowid(), name: name.to_string(), quotas: *quotas, created_at })
        })
    }

    fn tenant(&self, name: &str) -> StoreResult<Option<Tenant>> {
        self.with(|c| {
            c.query_row("SELECT id, name, quotas, created_at FROM tenants WHERE name = ?1", [name], tenant_from)
                .optional()
        })
    }

    fn tenants(&self) -> StoreResult<Vec<Tenant>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT id, name, quotas, created_at FROM tenants ORDER BY name")?;
            st.query_map([], tenant_from)?.collect()
        })
    }

    fn set_quotas(&self, tenant: i64, quotas: &Quotas) -> StoreResult<bool> {
        let text = serde_json::to_string(quotas).unwrap_or_default();
        self.with(|c| Ok(c.execute("UPDATE tenants SET quotas = ?1 WHERE id = ?2", params![text, tenant])? == 1))
    }

    fn add_key(&self, hash: &str, tenant: Option<i64>, role: Role) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO keys (hash, tenant_id, role, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![hash, tenant, role.as_str(), unix_seconds()],
            )?;
            Ok(())
        })
    }

    fn key_owner(&self, hash: &str) -> StoreResult<Option<KeyOwner>> {
        self.with(|c| {
            let found: Option<(Option<i64>, String)> = c
                .query_row("SELECT tenant_id, role FROM keys WHERE hash = ?1", [hash], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let Some((tenant_id, role)) = found else { return Ok(None) };
            let Some(role) = Role::parse(&role) else { return Ok(None) };
            let tenant = match tenant_id {
                Some(id) => {
                    let t = c
                        .query_row("SELECT id, name, quotas, created_at FROM tenants WHERE id = ?1", [id], tenant_from)
                        .optional()?;
                    match t {
                        Some(t) => Some(t),
                        None => return Ok(None),
                    }
                }
                None => None,
            };
            Ok(Some(KeyOwner { tenant, role }))
        })
    }

    fn has_operator_key(&self) -> StoreResult<bool> {
        self.with(|c| c.query_row("SELECT EXISTS (SELECT 1 FROM keys WHERE role = 'operator')", [], |r| r.get(0)))
    }

    fn keys(&self, tenant: Option<i64>) -> StoreResult<Vec<KeyInfo>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT substr(hash, 1, 16), role, created_at FROM keys WHERE tenant_id IS ?1 ORDER BY created_at, hash",
            )?;
            let rows = st.query_map([tenant], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (id, role, created_at) = row?;
                if let Some(role) = Role::parse(&role) {
                    out.push(KeyInfo { id, role, created_at });
                }
            }
            Ok(out)
        })
    }

    fn revoke_key(&self, tenant: Option<i64>, id: &str) -> StoreResult<bool> {
        if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(false);
        }
        self.with(|c| {
            Ok(c.execute("DELETE FROM keys WHERE tenant_id IS ?1 AND substr(hash, 1, 16) = ?2", params![tenant, id])?
                > 0)
        })
    }

    fn revoke_operator_keys_except(&self, keep: &str) -> StoreResult<usize> {
        self.with(|c| c.execute("DELETE FROM keys WHERE role = 'operator' AND hash != ?1", [keep]))
    }

    fn add_version(&self, tenant: i64, plugin: &str, v: NewVersion) -> StoreResult<PluginVersion> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute("INSERT OR IGNORE INTO plugins (tenant_id, name) VALUES (?1, ?2)", params![tenant, plugin])?;
            let next: i64 = tx.query_row(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM plugin_versions WHERE tenant_id = ?1 AND plugin = ?2",
                params![tenant, plugin],
                |r| r.get(0),
            )?;
            let size = i64::try_from(v.component.len()).unwrap_or(i64::MAX);
            let created_at = unix_seconds();
            tx.execute(
                "INSERT INTO plugin_versions (tenant_id, plugin, version, blake3, size, component, manifest, report, status, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    tenant,
                    plugin,
                    next,
                    v.blake3,
                    size,
                    v.component,
                    v.manifest.to_string(),
                    v.report.to_string(),
                    v.status.as_str(),
                    created_at
                ],
            )?;
            tx.commit()?;
            Ok(v.stored(plugin.to_string(), next, created_at))
        })
    }

    fn version(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<Option<PluginVersion>> {
        self.with(|c| {
            c.query_row(
                &format!(
                    "SELECT {VERSION_COLS} FROM plugin_versions WHERE tenant_id = ?1 AND plugin = ?2 AND version = ?3"
                ),
                params![tenant, plugin, version],
                version_from,
            )
            .optional()
        })
    }

    fn version_bytes(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<Option<Vec<u8>>> {
        self.with(|c| {
            c.query_row(
                "SELECT component FROM plugin_versions WHERE tenant_id = ?1 AND plugin = ?2 AND version = ?3",
                params![tenant, plugin, version],
                |r| r.get(0),
            )
            .optional()
        })
    }

    fn versions(&self, tenant: i64, plugin: &str) -> StoreResult<Vec<PluginVersion>> {
        self.with(|c| {
            let mut st = c.prepare(&format!(
                "SELECT {VERSION_COLS} FROM plugin_versions WHERE tenant_id = ?1 AND plugin = ?2 ORDER BY version"
            ))?;
            st.query_map(params![tenant, plugin], version_from)?.collect()
        })
    }

    fn plugins(&self, tenant: i64) -> StoreResult<Vec<PluginRow>> {
        self.with(|c| {
            let mut st = c.prepare("SELECT name, active, shadow FROM plugins WHERE tenant_id = ?1 ORDER BY name")?;
            st.query_map([tenant], |r| Ok(PluginRow { name: r.get(0)?, active: r.get(1)?, shadow: r.get(2)? }))?
                .collect()
        })
    }

    fn plugin(&self, tenant: i64, name: &str) -> StoreResult<Option<PluginRow>> {
        self.with(|c| {
            c.query_row(
                "SELECT name, active, shadow FROM plugins WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, name],
                |r| Ok(PluginRow { name: r.get(0)?, active: r.get(1)?, shadow: r.get(2)? }),
            )
            .optional()
        })
    }

    fn set_status(&self, tenant: i64, plugin: &str, version: i64, status: VersionStatus) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "UPDATE plugin_versions SET status = ?4 WHERE tenant_id = ?1 AND plugin = ?2 AND version = ?3",
                params![tenant, plugin, version, status.as_str()],
            )?;
            Ok(())
        })
    }

    fn activate(&self, tenant: i64, plugin: &str, version: i64) -> StoreResult<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            tx.execute(
                "UPDATE plugin_versions SET status = 'inactive' WHERE tenant_id = ?1 AND plugin = ?2 AND status = 'active'",
                params![tenant, plugin],
            )?;
            tx.execute(
                "UPDATE plugin_versions SET status = 'active' WHERE tenant_id = ?1 AND plugin = ?2 AND version = ?3",
                params![tenant, plugin, version],
            )?;
            // A version cannot shadow itself.
            tx.execute(
                "UPDATE plugins SET active = ?3, shadow = CASE WHEN shadow = ?3 THEN NULL ELSE shadow END
                 WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, plugin, version],
            )?;
            tx.commit()
        })
    }

    fn set_shadow(&self, tenant: i64, plugin: &str, version: Option<i64>) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "UPDATE plugins SET shadow = ?3 WHERE tenant_id = ?1 AND name = ?2",
                params![tenant, plugin, version],
            )?;
            Ok(())
        })
    }

    fn plugin_storage(&self, tenant: i64) -> StoreResult<u64> {
        self.with(|c| {
            let n: i64 = c.query_row(
                "SELECT COALESCE(SUM(size), 0) FROM plugin_versions WHERE tenant_id = ?1",
                [tenant],
                |r| r.get(0),
            )?;
            Ok(u64::try_from(n).unwrap_or(0))
        })
    }

    fn add_shadow_records(&self, tenant: i64, plugin: &str, records: &[ShadowRecord]) -> StoreResult<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            for r in records {
                tx.execute(
                    "INSERT INTO shadow_records (tenant_id, plugin, record) VALUES (?1, ?2, ?3)",
                    params![tenant, plugin, serde_json::to_string(r).unwrap_or_default()],
                )?;
            }
            tx.execute(
                "DELETE FROM shadow_records WHERE tenant_id = ?1 AND plugin = ?2 AND id <= (
                   SELECT id FROM shadow_records WHERE tenant_id = ?1 AND plugin = ?2 ORDER BY id DESC LIMIT 1 OFFSET ?3)",
                params![tenant, plugin, MAX_SHADOW_RECORDS],
            )?;
            tx.commit()
        })
    }

    fn shadow_records(&self, tenant: i64, plugin: &str, limit: u32) -> StoreResult<Vec<ShadowRecord>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT record FROM shadow_records WHERE tenant_id = ?1 AND plugin = ?2 ORDER BY id DESC LIMIT ?3",
            )?;
            let rows: Vec<String> =
                st.query_map(params![tenant, plugin, limit], |r| r.get(0))?.collect::<Result<_, _>>()?;
            Ok(rows.iter().filter_map(|t| serde_json::from_str(t).ok()).collect())
        })
    }

    fn add_run(&self, tenant: i64, run: &RunRow) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO runs (id, tenant_id, status, model, session, plugins, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    run.run_id,
                    tenant,
                    run.status,
                    run.model,
                    run.session,
                    serde_json::to_string(&run.plugins).unwrap_or_default(),
                    run.created_at
                ],
            )?;
            Ok(())
        })
    }

    /// One process runs every run of this store: a `claim` has nothing to fence.
    fn finish_run(&self, run_id: &str, _: Claim, status: &str, record: Option<&serde_json::Value>) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "UPDATE runs SET status = ?2, record = ?3 WHERE id = ?1",
                params![run_id, status, record.map(|r| r.to_string())],
            )?;
            Ok(())
        })
    }

    fn set_run_status(&self, run_id: &str, _: Claim, status: &str) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "UPDATE runs SET status = ?2 WHERE id = ?1 AND status IN ('running', 'paused', 'waiting-approval')",
                params![run_id, status],
            )?;
            Ok(())
        })
    }

    fn run(&self, tenant: i64, run_id: &str) -> StoreResult<Option<RunRow>> {
        self.with(|c| {
            c.query_row(
                "SELECT id, status, model, session, plugins, created_at, record FROM runs WHERE tenant_id = ?1 AND id = ?2",
                params![tenant, run_id],
                run_from,
            )
            .optional()
        })
    }

    fn runs(&self, tenant: i64, limit: u32) -> StoreResult<Vec<RunRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT id, status, model, session, plugins, created_at, NULL FROM runs WHERE tenant_id = ?1
                 ORDER BY created_at DESC, rowid DESC LIMIT ?2",
            )?;
            st.query_map(params![tenant, limit], run_from)?.collect()
        })
    }

    fn add_run_events(&self, run_id: &str, _: Claim, events: &[RunEventRow]) -> StoreResult<()> {
        self.with(|c| {
            let tx = c.transaction()?;
            for e in events {
                tx.execute(
                    "INSERT OR IGNORE INTO run_events (run_id, seq, name, data) VALUES (?1, ?2, ?3, ?4)",
                    params![run_id, e.seq, e.name, e.data],
                )?;
            }
            tx.commit()
        })
    }

    fn run_events(&self, run_id: &str, after: i64, limit: u32) -> StoreResult<Vec<RunEventRow>> {
        self.with(|c| {
            let mut st = c.prepare(
                "SELECT seq, name, data FROM run_events WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
            )?;
            st.query_map(params![run_id, after, limit], |r| {
                Ok(RunEventRow { seq: r.get(0)?, name: r.get(1)?, data: r.get(2)? })
            })?
            .collect()
        })
    }

    fn interrupt_live_runs(&self) -> StoreResult<usize> {
        self.with(|c| {
            c.execute(
                "UPDATE runs SET status = 'interrupted' WHERE status IN ('running', 'paused', 'waiting-approval')",
                [],
            )
        })
    }

    fn add_spend(&self, tenant: i64, day: &str, usd: f64) -> StoreResult<()> {
        self.with(|c| {
            c.execute(
                "INSERT INTO spend (tenant_id, day, usd) VALUES (?1, ?2, ?3)
                 ON CONFLICT (tenant_id, day) DO UPDATE SET usd = usd + excluded.usd",
                params![tenant, day, usd],
            )?;
            Ok(())
        })
    }

    fn spend(&self, tenant: i64, day: &str) -> StoreResult<f64> {
        self.with(|c| {
            Ok(c.query_row("SELECT usd FROM spend WHERE tenant_id = ?1 AND day = ?2", params![tenant, day], |r| {
                r.get(0)
            })
            .optional()?
            .unwrap_or(0.0))
        })
    }
}
