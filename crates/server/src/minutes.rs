//! Fuel and hook time per minute counted across workers (issue 17, on a
//! shared database). Every [`SHARE_EVERY`] each worker adds what its
//! tenants used since its last exchange to the per-minute counts all
//! workers share ([`crate::store::ServerStore::add_minute_usage`]) and
//! takes back every tenant's count of the minute on all workers together,
//! so that a tenant's `fuel_per_minute` and `hook_ms_per_minute` hold for
//! its use on every worker, and `/v1/usage` shows that use. Admission is
//! checked against the counts as of the last exchange: a tenant may go past
//! a quota by what it uses in about one exchange on each worker. A failed
//! exchange keeps what was not added for the next one; one whose reply was
//! lost (the database took it) is added again, counting too much; a worker
//! that stops leaves out at most its last exchange's use. Minutes follow
//! each worker's clock.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use crate::state::AppState;
use crate::store::MinuteUsage;
use crate::usage::minute_now;

/// How often each worker exchanges its counts.
pub const SHARE_EVERY: Duration = Duration::from_secs(1);

/// Exchanges this worker's per-minute counts every [`SHARE_EVERY`] until
/// the server is dropped or shuts down.
pub async fn share_minutes(state: Weak<AppState>) {
    let mut tick = tokio::time::interval(SHARE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        if state.shutting_down() {
            return;
        }
        exchange(&state).await;
    }
}

/// One exchange: adds what was not sent of the current minute, and sets
/// each tenant's other workers' share from the totals.
async fn exchange(state: &Arc<AppState>) {
    let minute = minute_now();
    let sent: Vec<_> =
        state.usages().into_iter().filter_map(|(id, usage)| usage.unsent(minute).map(|d| (id, usage, d))).collect();
    let rows: Vec<MinuteUsage> = sent
        .iter()
        .map(|(tenant, _, (fuel, us))| MinuteUsage {
            tenant: *tenant,
            fuel: i64::try_from(*fuel).unwrap_or(i64::MAX),
            hook_us: i64::try_from(*us).unwrap_or(i64::MAX),
        })
        .collect();
    let at = i64::try_from(minute).unwrap_or(i64::MAX);
    let totals = match state.db(move |s| s.add_minute_usage(at, &rows)).await {
        Ok(totals) => totals,
        Err(e) => {
            tracing::warn!("per-minute usage not shared: {}", e.body.message);
            return;
        }
    };
    let mut totals: HashMap<i64, (u64, u64)> = totals
        .into_iter()
        .map(|u| (u.tenant, (u64::try_from(u.fuel).unwrap_or(0), u64::try_from(u.hook_us).unwrap_or(0))))
        .collect();
    for (tenant, usage, delta) in sent {
        // Not read back (over the count read): at least what this worker added.
        let total = totals.remove(&tenant).unwrap_or(delta);
        usage.exchanged(minute, delta, total);
    }
    for (tenant, total) in totals {
        state.usage(tenant).exchanged(minute, (0, 0), total);
    }
}
