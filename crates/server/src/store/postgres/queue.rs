//! Admission and queued runs. A run that starts is stored only while its
//! tenant has fewer live runs than its `concurrent_runs` on all workers
//! together, counted under a per-tenant advisory lock ([`LIVE_LOCK_BASE`])
//! that claims take too (`super::park`). A new run that the worker taking
//! the request has no room for is stored `queued`, with no owner and a
//! checkpoint of nothing done yet, and any worker with room claims it
//! (`FOR UPDATE SKIP LOCKED`) and starts it. Queued runs count against the
//! tenant's `parked_runs` quota with its parked ones, under that lock.

use super::PostgresServerStore;
use super::lease::LIVE;
use super::park::{EventColumns, MAX_CHECKPOINT_BYTES, PARK_LOCK_BASE, WAITING};
use crate::store::{RunEventRow, RunRow, StoreResult};

/// The advisory lock under which a tenant's live runs are counted and one
/// is added or claimed (this number plus the tenant's id).
pub(super) const LIVE_LOCK_BASE: i64 = 0x6c69_7665 << 32;

/// Counts the tenant's live runs on every worker, under its [`LIVE_LOCK_BASE`] lock (held to the end of `tx`).
pub(super) fn live_runs(tx: &mut postgres::Transaction<'_>, tenant: i64) -> Result<i64, postgres::Error> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LIVE_LOCK_BASE.wrapping_add(tenant)])?;
    Ok(tx
        .query_one(&format!("SELECT count(*) FROM runs WHERE tenant_id = $1 AND status IN {LIVE}"), &[&tenant])?
        .get(0))
}

/// The tenant's `resumable` runs (answered, waiting for a worker): a new
/// run leaves them their places, so that they are not starved by new ones.
fn resumable_runs(tx: &mut postgres::Transaction<'_>, tenant: i64) -> Result<i64, postgres::Error> {
    Ok(tx.query_one("SELECT count(*) FROM runs WHERE tenant_id = $1 AND status = 'resumable'", &[&tenant])?.get(0))
}

impl PostgresServerStore {
    /// See [`crate::store::ServerStore::add_run_within`] (`None`: no limit).
    pub(super) fn insert_run(&self, tenant: i64, run: &RunRow, max_live: Option<u32>) -> StoreResult<bool> {
        let run = run.clone();
        let owner = self.worker.clone();
        let mut retried = false;
        self.with(move |c| {
            // A try again by the pool (the first one's reply lost): stored by that one?
            if std::mem::replace(&mut retried, true)
                && c.query_opt("SELECT 1 FROM runs WHERE id = $1 AND owner = $2", &[&run.run_id, &owner])?.is_some()
            {
                return Ok(true);
            }
            let mut tx = c.transaction()?;
            if let Some(max) = max_live
                && live_runs(&mut tx, tenant)?.saturating_add(resumable_runs(&mut tx, tenant)?) >= i64::from(max)
            {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO runs (id, tenant_id, status, model, session, plugins, created_at, owner)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                &[
                    &run.run_id,
                    &tenant,
                    &run.status,
                    &run.model,
                    &run.session,
                    &serde_json::to_string(&run.plugins).unwrap_or_default(),
                    &run.created_at,
                    &owner,
                ],
            )?;
            tx.commit()?;
            Ok(true)
        })
    }

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
        let mut retried = false;
        self.with(move |c| {
            // A try again by the pool (the first one's reply lost): stored by that one?
            if std::mem::replace(&mut retried, true)
                && c.query_opt("SELECT 1 FROM runs WHERE id = $1", &[&run.run_id])?.is_some()
            {
                return Ok(true);
            }
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
                // `safe_seq` 1: a worker that dies before the run's first safe
                // point leaves only its `queued` event; the rest is dropped by the
                // sweep, and the run, not `started`, is `queued` again.
                "INSERT INTO runs (id, tenant_id, status, model, session, plugins, created_at, owner, checkpoint, safe_seq, started)
                 VALUES ($1, $2, 'queued', $3, $4, $5, $6, NULL, $7, 1, FALSE)",
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

    /// See [`crate::store::ServerStore::abort_resumable`]. The abort is set
    /// in the stored JSON by the database itself, so a checkpoint written
    /// meanwhile (a claim, a sweep) is never overwritten by an older one.
    pub(super) fn abort_waiting(&self, tenant: i64, run_id: &str, reason: &str) -> StoreResult<bool> {
        let (run_id, reason) = (run_id.to_string(), reason.to_string());
        self.with(move |c| {
            let n = c.execute(
                "UPDATE runs SET checkpoint = CASE
                         WHEN checkpoint::jsonb -> 'abort' = 'null'::jsonb
                         THEN jsonb_set(checkpoint::jsonb, '{abort}', to_jsonb($3::TEXT))::TEXT
                         ELSE checkpoint END
                 WHERE tenant_id = $1 AND id = $2 AND status = 'resumable'
                     AND octet_length(checkpoint) <= $4 AND checkpoint LIKE '{%'",
                &[&tenant, &run_id, &reason, &MAX_CHECKPOINT_BYTES],
            )?;
            Ok(n == 1)
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
            let mut tx = c.transaction()?;
            let n = tx.execute(
                "UPDATE runs SET status = $3, record = $4, checkpoint = NULL
                 WHERE tenant_id = $1 AND id = $2 AND status = 'queued'",
                &[&tenant, &run_id, &status, &record],
            )?;
            if n == 1 {
                // Commands queued for it while a worker held it for a moment.
                tx.execute("DELETE FROM run_commands WHERE run_id = $1", &[&run_id])?;
            }
            tx.commit()?;
            Ok(n == 1)
        })
    }
}
