//! Rows of the PostgreSQL store as the [`crate::store`] types.

use postgres::Row;

use crate::store::{PluginRow, PluginVersion, RunRow, Tenant, VersionStatus};

pub(super) fn json_col(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}

pub(super) fn tenant_from(row: &Row) -> Tenant {
    Tenant {
        id: row.get(0),
        name: row.get(1),
        quotas: serde_json::from_str(row.get::<_, &str>(2)).unwrap_or_default(),
        created_at: row.get(3),
    }
}

pub(super) const VERSION_COLS: &str = "plugin, version, blake3, size, status, manifest, report, created_at";

pub(super) fn version_from(row: &Row) -> PluginVersion {
    PluginVersion {
        plugin: row.get(0),
        version: row.get(1),
        blake3: row.get(2),
        bytes: u64::try_from(row.get::<_, i64>(3)).unwrap_or(0),
        status: VersionStatus::parse(row.get::<_, &str>(4)),
        manifest: json_col(row.get(5)),
        report: json_col(row.get(6)),
        created_at: row.get(7),
    }
}

pub(super) fn run_from(row: &Row) -> RunRow {
    RunRow {
        run_id: row.get(0),
        status: row.get(1),
        model: row.get(2),
        session: row.get(3),
        plugins: serde_json::from_str(row.get::<_, &str>(4)).unwrap_or_default(),
        created_at: row.get(5),
        record: row.get::<_, Option<&str>>(6).map(json_col),
    }
}

pub(super) fn plugin_from(row: &Row) -> PluginRow {
    PluginRow { name: row.get(0), active: row.get(1), shadow: row.get(2) }
}
