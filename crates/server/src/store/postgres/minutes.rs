//! Fuel and hook time per minute, counted across workers (table
//! `tenant_minutes`): each worker adds its tenants' use and reads back
//! everyone's (`crate::minutes`).

use super::PostgresServerStore;
use crate::store::{MAX_MINUTE_TENANTS, MinuteUsage, StoreResult};

impl PostgresServerStore {
    /// See [`crate::store::ServerStore::add_minute_usage`]: one transaction;
    /// rows are added in tenant order (one lock order for every worker);
    /// a count stops at `i64::MAX` rather than failing.
    pub(super) fn add_minutes(&self, minute: i64, added: &[MinuteUsage]) -> StoreResult<Vec<MinuteUsage>> {
        // One row per tenant (a tenant given twice is summed): an upsert
        // cannot touch a row twice.
        let mut merged: std::collections::BTreeMap<i64, (i64, i64)> = std::collections::BTreeMap::new();
        for u in added {
            let m = merged.entry(u.tenant).or_default();
            *m = (m.0.saturating_add(u.fuel.max(0)), m.1.saturating_add(u.hook_us.max(0)));
        }
        let added: Vec<MinuteUsage> =
            merged.into_iter().map(|(tenant, (fuel, hook_us))| MinuteUsage { tenant, fuel, hook_us }).collect();
        let tenants: Vec<i64> = added.iter().map(|u| u.tenant).collect();
        let fuel: Vec<i64> = added.iter().map(|u| u.fuel).collect();
        let hook_us: Vec<i64> = added.iter().map(|u| u.hook_us).collect();
        self.with(move |c| {
            let mut tx = c.transaction()?;
            if !tenants.is_empty() {
                tx.execute(
                    "INSERT INTO tenant_minutes (minute, tenant_id, fuel, hook_us)
                     SELECT $1, t, f, u FROM unnest($2::BIGINT[], $3::BIGINT[], $4::BIGINT[]) AS x(t, f, u) ORDER BY t
                     ON CONFLICT (minute, tenant_id) DO UPDATE SET
                         fuel = LEAST(tenant_minutes.fuel::NUMERIC + excluded.fuel, 9223372036854775807)::BIGINT,
                         hook_us = LEAST(tenant_minutes.hook_us::NUMERIC + excluded.hook_us, 9223372036854775807)::BIGINT",
                    &[&minute, &tenants, &fuel, &hook_us],
                )?;
            }
            let rows = tx.query(
                "SELECT tenant_id, fuel, hook_us FROM tenant_minutes WHERE minute = $1 ORDER BY tenant_id LIMIT $2",
                &[&minute, &MAX_MINUTE_TENANTS],
            )?;
            // The minute before stays (a worker whose clock is behind still counts it).
            tx.execute("DELETE FROM tenant_minutes WHERE minute < $1", &[&minute.saturating_sub(1)])?;
            tx.commit()?;
            Ok(rows.iter().map(|r| MinuteUsage { tenant: r.get(0), fuel: r.get(1), hook_us: r.get(2) }).collect())
        })
    }
}
