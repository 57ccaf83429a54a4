//! Steering across workers: pending approvals in table `approvals`, so any
//! worker lists them, and commands (answer, pause, resume, abort, inject)
//! in table `run_commands`, queued by the worker that took the request and
//! taken by the worker that owns the run.

use super::PostgresServerStore;
use super::lease::LIVE;
use crate::store::{Claim, MAX_LISTED_APPROVALS, MAX_QUEUED_COMMANDS, StoreResult, unix_seconds};

impl PostgresServerStore {
    /// See [`crate::store::ServerStore::add_approval`].
    /// Only from the owner's latest claim of a live run (a listing delayed
    /// past the run's park, end or sweep would list an approval nobody waits for).
    pub(super) fn put_approval(
        &self,
        tenant: i64,
        (run_id, claim): (&str, Claim),
        id: &str,
        data: &serde_json::Value,
    ) -> StoreResult<()> {
        let (run_id, id, data, owner) = (run_id.to_string(), id.to_string(), data.to_string(), self.worker.clone());
        let rid = run_id.clone();
        let listed = self.with(move |c| {
            let n = c.execute(
                &format!(
                    "WITH mine AS (SELECT 1 FROM runs
                         WHERE id = $2 AND owner = $6 AND claim = $7 AND status IN {LIVE} FOR UPDATE)
                     INSERT INTO approvals (id, run_id, tenant_id, data, created_at)
                     SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM mine)
                     ON CONFLICT (id) DO UPDATE SET data = excluded.data"
                ),
                &[&id, &run_id, &tenant, &data, &unix_seconds(), &owner, &claim.0],
            )?;
            Ok(n == 1)
        })?;
        if !listed {
            return Err(super::lease::fenced(&rid));
        }
        Ok(())
    }

    /// See [`crate::store::ServerStore::remove_approvals`].
    /// Only while the run is this worker's on `claim` (live, or ended by it).
    pub(super) fn drop_approvals(&self, (run_id, claim): (&str, Claim), id: Option<&str>) -> StoreResult<()> {
        let (run_id, id, owner) = (run_id.to_string(), id.map(str::to_string), self.worker.clone());
        self.with(move |c| {
            const MINE: &str = "WITH mine AS (SELECT 1 FROM runs WHERE id = $1 AND owner = $2 AND claim = $3)";
            match &id {
                Some(id) => c.execute(
                    &format!("{MINE} DELETE FROM approvals WHERE run_id = $1 AND id = $4 AND EXISTS (SELECT 1 FROM mine)"),
                    &[&run_id, &owner, &claim.0, id],
                )?,
                None => c.execute(
                    &format!(
                        "{MINE}, commands AS (DELETE FROM run_commands WHERE run_id = $1 AND EXISTS (SELECT 1 FROM mine))
                         DELETE FROM approvals WHERE run_id = $1 AND EXISTS (SELECT 1 FROM mine)"
                    ),
                    &[&run_id, &owner, &claim.0],
                )?,
            };
            Ok(())
        })
    }

    /// See [`crate::store::ServerStore::approvals`].
    pub(super) fn list_approvals(&self, tenant: i64) -> StoreResult<Vec<(String, serde_json::Value)>> {
        self.with(move |c| {
            // Only live and parked runs' (a dead worker's are swept to `interrupted`).
            let rows = c.query(
                &format!(
                    "SELECT a.run_id, a.data FROM approvals a JOIN runs r ON r.id = a.run_id
                     WHERE a.tenant_id = $1 AND (r.status IN {LIVE} OR r.status = 'parked')
                     ORDER BY a.created_at, a.id LIMIT $2"
                ),
                &[&tenant, &MAX_LISTED_APPROVALS],
            )?;
            Ok(rows
                .iter()
                .map(|r| (r.get(0), serde_json::from_str(r.get::<_, &str>(1)).unwrap_or(serde_json::Value::Null)))
                .collect())
        })
    }

    /// See [`crate::store::ServerStore::add_command`].
    pub(super) fn queue_command(&self, tenant: i64, run_id: &str, command: &str) -> StoreResult<bool> {
        let (run_id, command) = (run_id.to_string(), command.to_string());
        // An answer is queued only while its approval is listed (waiting):
        // one answered meanwhile (a parked run unparked and claimed) is not.
        let answers: Option<String> = serde_json::from_str::<serde_json::Value>(&command)
            .ok()
            .filter(|v| v["command"]["kind"] == "answer")
            .map(|v| v["command"]["id"].as_str().unwrap_or_default().to_string());
        self.with(move |c| {
            let mut tx = c.transaction()?;
            // The run's row is locked against a park until this commits: a
            // command is never queued for a run that parked meanwhile.
            let mut live = tx
                .query_opt(
                    &format!("SELECT 1 FROM runs WHERE id = $2 AND tenant_id = $1 AND status IN {LIVE} FOR SHARE"),
                    &[&tenant, &run_id],
                )?
                .is_some();
            if let Some(approval) = answers.as_ref().filter(|_| live) {
                live = tx
                    .query_opt("SELECT 1 FROM approvals WHERE id = $1 AND run_id = $2", &[approval, &run_id])?
                    .is_some();
            }
            let n = if live {
                tx.execute(
                    "INSERT INTO run_commands (run_id, command) SELECT $1, $2
                     WHERE (SELECT count(*) FROM run_commands WHERE run_id = $1) < $3",
                    &[&run_id, &command, &MAX_QUEUED_COMMANDS],
                )?
            } else {
                0
            };
            tx.commit()?;
            Ok(n == 1)
        })
    }

    /// See [`crate::store::ServerStore::take_commands`].
    pub(super) fn dequeue_commands(&self, runs: &[(String, Claim)]) -> StoreResult<Vec<(String, String)>> {
        if runs.is_empty() {
            return Ok(Vec::new());
        }
        let worker = self.worker.clone();
        let (run_ids, claims): (Vec<String>, Vec<i64>) = runs.iter().map(|(id, c)| (id.clone(), c.0)).unzip();
        self.with(move |c| {
            let mut rows: Vec<(i64, String, String)> = c
                .query(
                    &format!(
                        "DELETE FROM run_commands q USING runs r, unnest($1::TEXT[], $3::BIGINT[]) AS m(id, claim)
                         WHERE q.run_id = m.id AND r.id = m.id AND r.claim = m.claim AND r.owner = $2
                             AND r.status IN {LIVE}
                         RETURNING q.id, q.run_id, q.command"
                    ),
                    &[&run_ids, &worker, &claims],
                )?
                .iter()
                .map(|r| (r.get(0), r.get(1), r.get(2)))
                .collect();
            rows.sort_by_key(|r| r.0);
            Ok(rows.into_iter().map(|(_, run, command)| (run, command)).collect())
        })
    }
}
