//! Queued runs: a new run that the worker taking the request has no room
//! for is stored `queued`, with no owner and a checkpoint of nothing done
//! yet, and any worker with room claims it (`super::park`'s claim, `FOR
//! UPDATE SKIP LOCKED`) and starts it. Queued runs count against the
//! tenant's `parked_runs` quota with its parked ones, under the same lock.

use super::PostgresServerStore;
use super::park::{EventColumns, PARK_LOCK_BASE, WAITING};
use crate::store::{RunEventRow, RunRow, StoreResult};

impl PostgresServerStore {
    /// See [`crate::store::ServerStore::queue_run`].
    pub(super) fn queue(
        &self,
        tenant: i64,
        run: &RunRow,
        parked: &str,
        first: &RunEventRow,
        max_waiting: u32,
    ) -> StoreResult<bool> {
        let (run, parked) = (run.clone(), parked.to_string());
        let events = EventColumns::of(std::slice::from_ref(first));
        self.with(move |c| {
            let mut tx = c.transaction()?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PARK_LOCK_BASE.wrapping_add(tenant)])?;
            let waiting: i64 = tx
                .query_one(
                    &format!("SELECT count(*) FROM runs WHERE tenant_id = $1 AND status IN {WAITING}"),
                    &[&tenant],
                )?
                .get(0);
            if waiting >= i64::from(max_waiting) {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO runs (id, tenant_id, status, model, session, plugins, created_at, owner, checkpoint)
                 VALUES ($1, $2, 'queued', $3, $4, $5, $6, NULL, $7)",
                &[
                    &run.run_id,
                    &tenant,
                    &run.model,
                    &run.session,
                    &serde_json::to_string(&run.plugins).unwrap_or_default(),
                    &run.created_at,
                    &parked,
                ],
            )?;
            events.insert(&mut tx, &run.run_id)?;
            tx.commit()?;
            Ok(true)
        })
    }

    /// See [`crate::store::ServerStore::end_queued`].
    pub(super) fn end_queued_run(
        &self,
        tenant: i64,
        run_id: &str,
        status: &str,
        record: &serde_json::Value,
    ) -> StoreResult<bool> {
        let (run_id, status, record) = (run_id.to_string(), status.to_string(), record.to_string());
        self.with(move |c| {
            let n = c.execute(
                "UPDATE runs SET status = $3, record = $4, checkpoint = NULL
                 WHERE tenant_id = $1 AND id = $2 AND status = 'queued'",
                &[&tenant, &run_id, &status, &record],
            )?;
            Ok(n == 1)
        })
    }
}
