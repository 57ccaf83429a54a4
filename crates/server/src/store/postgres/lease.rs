//! Workers' leases: each worker renews its row in `workers` (the
//! database's clock decides when it lapses, so workers' clocks may
//! disagree), and any worker's sweep marks `interrupted` the live runs of a
//! worker whose lease lapsed (`resumable`, those with a checkpoint: another
//! worker resumes them from their last safe point). Together with the owner check on every write
//! to a run ([`super::PostgresServerStore`]), a run is written by one
//! worker at most, and never again once it was declared over.

use super::PostgresServerStore;
use crate::store::{Claim, StoreResult, unix_seconds};

/// The statuses of a run that has not ended, as SQL.
pub(super) const LIVE: &str = "('running', 'paused', 'waiting-approval')";

/// The database's clock, in ms since the Unix epoch, as SQL.
pub(super) const NOW_MS: &str = "(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT";

/// How long the first lease lasts, until the server's heartbeat sets its own.
pub(super) const FIRST_LEASE_MS: u64 = 60_000;

pub(super) fn fenced(run_id: &str) -> crate::store::StoreError {
    crate::store::StoreError::Fenced(format!(
        "run {run_id} is no longer this worker's (its lease lapsed; another worker took the run over: resumed it, or marked it interrupted)"
    ))
}

impl PostgresServerStore {
    /// See [`crate::store::ServerStore::heartbeat`].
    pub(super) fn renew_lease(&self, lease_ms: u64) -> StoreResult<bool> {
        let (worker, lease) = (self.worker.clone(), i64::try_from(lease_ms).unwrap_or(i64::MAX));
        self.with(move |c| {
            // The database's clock, not the workers': theirs may disagree. A
            // lease that lapsed but was not swept yet (the database was out of
            // reach for everyone) is renewed: this worker's runs are still its own.
            let renewed = c.execute(
                &format!("UPDATE workers SET lease_until_ms = {NOW_MS} + $2 WHERE id = $1"),
                &[&worker, &lease],
            )? == 1;
            if !renewed {
                c.execute(
                    &format!(
                        "INSERT INTO workers (id, started_at, lease_until_ms) VALUES ($1, $3, {NOW_MS} + $2)
                         ON CONFLICT (id) DO UPDATE SET lease_until_ms = excluded.lease_until_ms"
                    ),
                    &[&worker, &lease, &unix_seconds()],
                )?;
            }
            Ok(renewed)
        })
    }

    /// See [`crate::store::ServerStore::sweep_dead_workers`].
    pub(super) fn sweep(&self) -> StoreResult<usize> {
        self.with(|c| {
            let mut tx = c.transaction()?;
            tx.execute(&format!("DELETE FROM workers WHERE lease_until_ms < {NOW_MS}"), &[])?;
            // A run owned by no live worker (or by none: stored before leases).
            let n = sweep_where(&mut tx, "NOT EXISTS (SELECT 1 FROM workers w WHERE w.id = runs.owner)", &[])?;
            tx.commit()?;
            Ok(n)
        })
    }

    /// See [`crate::store::ServerStore::owned_elsewhere`].
    pub(super) fn owned_not_in(&self, run_ids: &[String]) -> StoreResult<Vec<String>> {
        let (worker, run_ids) = (self.worker.clone(), run_ids.to_vec());
        self.with(move |c| {
            let rows = c.query(
                &format!(
                    "SELECT id FROM runs WHERE owner = $1 AND status IN {LIVE} AND NOT (id = ANY($2)) ORDER BY id LIMIT 1000"
                ),
                &[&worker, &run_ids],
            )?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// See [`crate::store::ServerStore::release_orphans`].
    pub(super) fn sweep_own(&self, run_ids: &[String]) -> StoreResult<usize> {
        let (worker, run_ids) = (self.worker.clone(), run_ids.to_vec());
        self.with(move |c| {
            let mut tx = c.transaction()?;
            let n = sweep_where(&mut tx, "runs.owner = $1 AND runs.id = ANY($2)", &[&worker, &run_ids])?;
            tx.commit()?;
            Ok(n)
        })
    }

    /// See [`crate::store::ServerStore::still_mine`].
    pub(super) fn owned_live(&self, runs: &[(String, Claim)]) -> StoreResult<Vec<String>> {
        let worker = self.worker.clone();
        let (run_ids, claims): (Vec<String>, Vec<i64>) = runs.iter().map(|(id, c)| (id.clone(), c.0)).unzip();
        self.with(move |c| {
            let rows = c.query(
                &format!(
                    "SELECT r.id FROM runs r JOIN unnest($1::TEXT[], $3::BIGINT[]) AS m(id, claim)
                         ON r.id = m.id AND r.claim = m.claim
                     WHERE r.owner = $2 AND r.status IN {LIVE} ORDER BY r.id"
                ),
                &[&run_ids, &worker, &claims],
            )?;
            Ok(rows.iter().map(|r| r.get(0)).collect())
        })
    }

    /// See [`crate::store::ServerStore::retire`].
    pub(super) fn give_up_lease(&self) -> StoreResult<()> {
        let worker = self.worker.clone();
        self.with(move |c| {
            c.execute("DELETE FROM workers WHERE id = $1", &[&worker])?;
            Ok(())
        })
    }
}

/// Sweeps the live runs that match `condition` (SQL on `runs`, with
/// `params`): a run with a checkpoint resumes from its last safe point (its
/// events after it go, as the resumed run makes them again; its queued
/// commands stay; its approvals go, as it asks again; one whose checkpoint
/// is still its queued one is `queued` again); one without a
/// checkpoint is over (`interrupted`), and so are its approvals and
/// commands. Returns how many.
fn sweep_where(
    tx: &mut postgres::Transaction<'_>,
    condition: &str,
    params: &[&(dyn postgres::types::ToSql + Sync)],
) -> Result<usize, postgres::Error> {
    // The rows locked first: the statement below then reads what the
    // writes it waited for committed (a statement's snapshot is taken at
    // its start), so none of their events past the safe point is left.
    tx.execute(&format!("SELECT 1 FROM runs WHERE status IN {LIVE} AND {condition} FOR UPDATE"), params)?;
    let n: i64 = tx
        .query_one(
            &format!(
                "WITH orphans AS (SELECT id, checkpoint IS NOT NULL AS resumes, safe_seq,
                         NOT started AS unstarted FROM runs
                     WHERE status IN {LIVE} AND {condition}
                     FOR UPDATE),
                 swept AS (UPDATE runs SET owner = NULL,
                         status = CASE WHEN o.unstarted THEN 'queued'
                             WHEN o.resumes THEN 'resumable' ELSE 'interrupted' END
                     FROM orphans o WHERE runs.id = o.id RETURNING runs.id),
                 events_gone AS (DELETE FROM run_events e USING orphans o
                     WHERE e.run_id = o.id AND o.resumes AND o.safe_seq IS NOT NULL AND e.seq > o.safe_seq),
                 approvals_gone AS (DELETE FROM approvals WHERE run_id IN (SELECT id FROM orphans)),
                 commands_gone AS (DELETE FROM run_commands
                     WHERE run_id IN (SELECT id FROM orphans WHERE NOT resumes))
                 SELECT count(*) FROM swept"
            ),
            params,
        )?
        .get(0);
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}
