//! Parked runs: a run waiting for an approval is stored with its checkpoint
//! (status `parked`, no owner) and holds no worker; its answer makes it
//! `resumable`, and a worker claims it (`FOR UPDATE SKIP LOCKED`) and
//! resumes it from the checkpoint.

use super::PostgresServerStore;
use super::lease::{LIVE, fenced};
use super::queue::live_runs;
use super::rows::{run_from, tenant_from};
use crate::store::{Claim, ClaimedRun, ParkRow, RunEventRow, StoreResult, unix_seconds};

/// The largest checkpoint read back, in bytes (`crate::checkpoint::MAX_CHECKPOINT_BYTES`): a larger row is not fetched.
pub(super) const MAX_CHECKPOINT_BYTES: i32 = 32 << 20;

/// A run's events as the columns of one insert.
pub(super) struct EventColumns {
    pub(super) seqs: Vec<i64>,
    pub(super) names: Vec<String>,
    pub(super) data: Vec<String>,
}

impl EventColumns {
    pub(super) fn of(events: &[RunEventRow]) -> Self {
        EventColumns {
            seqs: events.iter().map(|e| e.seq).collect(),
            names: events.iter().map(|e| e.name.clone()).collect(),
            data: events.iter().map(|e| e.data.clone()).collect(),
        }
    }

    /// Stores them for `run_id` in one statement; events already stored are kept.
    pub(super) fn insert(&self, tx: &mut postgres::Transaction<'_>, run_id: &str) -> Result<(), postgres::Error> {
        if self.seqs.is_empty() {
            return Ok(());
        }
        tx.execute(
            "INSERT INTO run_events (run_id, seq, name, data)
             SELECT $1, e.seq, e.name, e.data FROM unnest($2::BIGINT[], $3::TEXT[], $4::TEXT[]) AS e(seq, name, data)
             ON CONFLICT DO NOTHING",
            &[&run_id, &self.seqs, &self.names, &self.data],
        )?;
        Ok(())
    }
}

/// The parts appended to the checkpoint of `run_id` (whose base is
/// `base_bytes` long), in order; `None` when there are more than
/// [`crate::journal_parts::MAX_PARTS`] or they and the base together are over
/// twice [`MAX_CHECKPOINT_BYTES`] (they are not fetched).
fn journal_parts(
    tx: &mut postgres::Transaction<'_>,
    run_id: &str,
    base_bytes: usize,
) -> Result<Option<Vec<String>>, postgres::Error> {
    let row = tx.query_one(
        "SELECT count(*), COALESCE(sum(octet_length(data)), 0)::BIGINT FROM run_journal WHERE run_id = $1",
        &[&run_id],
    )?;
    let (count, bytes): (i64, i64) = (row.get(0), row.get(1));
    if count == 0 {
        return Ok(Some(Vec::new()));
    }
    let base = i64::try_from(base_bytes).unwrap_or(i64::MAX);
    if count > i64::from(crate::journal_parts::MAX_PARTS)
        || bytes.saturating_add(base) > 2 * i64::from(MAX_CHECKPOINT_BYTES)
    {
        return Ok(None);
    }
    let rows = tx.query("SELECT data FROM run_journal WHERE run_id = $1 ORDER BY part", &[&run_id])?;
    Ok(Some(rows.iter().map(|r| r.get(0)).collect()))
}

/// The most candidates one claim counts again under their tenant's lock
/// (one whose tenant filled its place since the query is left out of the next).
const CLAIM_CANDIDATES: usize = 8;

/// What a park found.
enum Parked {
    Yes,
    CommandsWaiting,
    OverQuota(i64),
    NotMine,
}

/// The advisory lock a park (or a queued run, `super::queue`) takes per
/// tenant (this number plus the tenant's id), so that runs counted against
/// `parked_runs` are counted one at a time.
pub(super) const PARK_LOCK_BASE: i64 = 0x7061_726b << 32;

/// The runs counted against a tenant's `parked_runs` quota: in the database, on no worker.
pub(super) const WAITING: &str = "('parked', 'queued')";

impl PostgresServerStore {
    /// See [`crate::store::ServerStore::park_run`].
    pub(super) fn park(&self, tenant: i64, (run_id, claim): (&str, Claim), park: &ParkRow<'_>) -> StoreResult<bool> {
        let (owner, rid, parked) = (self.worker.clone(), run_id.to_string(), park.checkpoint.to_string());
        let events = EventColumns::of(park.events);
        let approval = park.approval.map(|(id, data)| (id.to_string(), data.to_string()));
        let spend = park.spend.map(|(day, usd)| (day.to_string(), usd));
        let max_parked = park.max_parked;
        let outcome = self.with(move |c| {
            let mut tx = c.transaction()?;
            let mine = tx
                .query_opt(
                    &format!(
                        "SELECT 1 FROM runs WHERE id = $1 AND owner = $2 AND claim = $3 AND status IN {LIVE} FOR UPDATE"
                    ),
                    &[&rid, &owner, &claim.0],
                )?
                .is_some();
            if !mine {
                return Ok(Parked::NotMine);
            }
            if tx.query_opt("SELECT 1 FROM run_commands WHERE run_id = $1 LIMIT 1", &[&rid])?.is_some() {
                return Ok(Parked::CommandsWaiting);
            }
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&PARK_LOCK_BASE.wrapping_add(tenant)])?;
            let parked_now: i64 = tx
                .query_one(
                    &format!("SELECT count(*) FROM runs WHERE tenant_id = $1 AND status IN {WAITING}"),
                    &[&tenant],
                )?
                .get(0);
            if parked_now >= i64::from(max_parked) {
                return Ok(Parked::OverQuota(parked_now));
            }
            events.insert(&mut tx, &rid)?;
            if let Some((approval_id, approval_data)) = &approval {
                tx.execute(
                    "INSERT INTO approvals (id, run_id, tenant_id, data, created_at) VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (id) DO UPDATE SET data = excluded.data",
                    &[approval_id, &rid, &tenant, approval_data, &unix_seconds()],
                )?;
            }
            if let Some((day, usd)) = &spend {
                tx.execute(
                    "INSERT INTO spend (tenant_id, day, usd) VALUES ($1, $2, $3)
                     ON CONFLICT (tenant_id, day) DO UPDATE SET usd = spend.usd + excluded.usd",
                    &[&tenant, day, usd],
                )?;
            }
            tx.execute(
                "UPDATE runs SET status = 'parked', owner = NULL, checkpoint = $2, parks = parks + 1, started = TRUE,
                     safe_seq = (SELECT max(seq) FROM run_events WHERE run_id = $1) WHERE id = $1",
                &[&rid, &parked],
            )?;
            // The checkpoint is whole again: the parts of its live journal go.
            tx.execute("DELETE FROM run_journal WHERE run_id = $1", &[&rid])?;
            tx.commit()?;
            Ok(Parked::Yes)
        })?;
        match outcome {
            Parked::Yes => Ok(true),
            Parked::CommandsWaiting => Ok(false),
            Parked::OverQuota(n) => {
                tracing::info!(run = %run_id, "not parked: its tenant has {n} runs parked or queued, its parked_runs quota");
                Ok(false)
            }
            Parked::NotMine => Err(fenced(run_id)),
        }
    }

    /// See [`crate::store::ServerStore::parked_run`].
    pub(super) fn parked(&self, tenant: i64, run_id: &str) -> StoreResult<Option<(String, i64)>> {
        let run_id = run_id.to_string();
        self.with(move |c| {
            // A checkpoint that is missing or over the cap reads as empty: it fails when resumed.
            let row = c.query_opt(
                "SELECT CASE WHEN octet_length(checkpoint) <= $3 THEN checkpoint END, parks FROM runs
                 WHERE tenant_id = $1 AND id = $2 AND status = 'parked'",
                &[&tenant, &run_id, &MAX_CHECKPOINT_BYTES],
            )?;
            Ok(row.map(|r| (r.get::<_, Option<String>>(0).unwrap_or_default(), r.get(1))))
        })
    }

    /// See [`crate::store::ServerStore::unpark`].
    pub(super) fn make_resumable(&self, run_id: &str, park: i64, parked: &str) -> StoreResult<bool> {
        let (run_id, parked) = (run_id.to_string(), parked.to_string());
        let mut retried = false;
        self.with(move |c| {
            let retry = std::mem::replace(&mut retried, true);
            let mut tx = c.transaction()?;
            // Only the park that was read: an answer to an earlier park of the run changes nothing.
            let n = tx.execute(
                "UPDATE runs SET status = 'resumable', checkpoint = $2 WHERE id = $1 AND status = 'parked' AND parks = $3",
                &[&run_id, &parked, &park],
            )?;
            if n == 1 {
                tx.execute("DELETE FROM approvals WHERE run_id = $1", &[&run_id])?;
            }
            tx.commit()?;
            // A try again by the pool (the first one's reply lost): made by that one?
            Ok(n == 1
                || (retry
                    && c.query_opt(
                        "SELECT 1 FROM runs WHERE id = $1 AND status = 'resumable' AND parks = $3 AND checkpoint = $2",
                        &[&run_id, &parked, &park],
                    )?
                    .is_some()))
        })
    }

    /// See [`crate::store::ServerStore::update_parked`].
    pub(super) fn rewrite_parked(&self, run_id: &str, park: i64, parked: &str) -> StoreResult<bool> {
        let (run_id, parked, next) = (run_id.to_string(), parked.to_string(), park.saturating_add(1));
        let mut retried = false;
        self.with(move |c| {
            let retry = std::mem::replace(&mut retried, true);
            let n = c.execute(
                "UPDATE runs SET checkpoint = $2, parks = $4 WHERE id = $1 AND status = 'parked' AND parks = $3",
                &[&run_id, &parked, &park, &next],
            )?;
            // A try again by the pool (the first one's reply lost): made by that one?
            Ok(n == 1
                || (retry
                    && c.query_opt(
                        "SELECT 1 FROM runs WHERE id = $1 AND status = 'parked' AND parks = $3 AND checkpoint = $2",
                        &[&run_id, &parked, &next],
                    )?
                    .is_some()))
        })
    }

    /// See [`crate::store::ServerStore::claim_resumable`]. A run whose
    /// tenant has its `concurrent_runs` live on all workers together is
    /// not claimed (it keeps its place): the claim takes the oldest run
    /// whose tenant has a place, found by the query and counted again
    /// under the tenant's lock (a tenant found full then is left out of
    /// the next try, at most [`CLAIM_CANDIDATES`] tries).
    pub(super) fn claim(&self, run_id: Option<&str>) -> StoreResult<Option<ClaimedRun>> {
        let (owner, run_id) = (self.worker.clone(), run_id.map(str::to_string));
        let claimed = self.with(move |c| {
            let mut blocked: Vec<i64> = Vec::new();
            for _ in 0..CLAIM_CANDIDATES {
                let mut tx = c.transaction()?;
                // The oldest run whose tenant has a place (checked again below, under its lock).
                let candidate = tx.query_opt(
                    &format!(
                        "SELECT r.id, r.status, r.tenant_id FROM runs r WHERE r.status IN ('resumable', 'queued')
                             AND ($1::TEXT IS NULL OR r.id = $1) AND NOT (r.tenant_id = ANY($2))
                             AND NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = r.tenant_id
                                 AND (t.quotas::jsonb ->> 'concurrent_runs')::BIGINT > 0
                                 AND (SELECT count(*) FROM runs l WHERE l.tenant_id = r.tenant_id AND l.status IN {LIVE})
                                     >= (t.quotas::jsonb ->> 'concurrent_runs')::BIGINT)
                         ORDER BY r.seq FOR UPDATE SKIP LOCKED LIMIT 1"
                    ),
                    &[&run_id, &blocked],
                )?;
                let Some(candidate) = candidate else {
                    tx.commit()?;
                    return Ok(None);
                };
                let (id, was, tenant_id): (String, String, i64) =
                    (candidate.get(0), candidate.get(1), candidate.get(2));
                // A tenant that is gone (or a quota of 0) is claimed all the
                // same: the worker fails the run, saying why, rather than
                // leaving it first in line for ever.
                let tenant = tx
                    .query_opt("SELECT id, name, quotas, created_at FROM tenants WHERE id = $1", &[&tenant_id])?
                    .map(|row| tenant_from(&row));
                let max = tenant.as_ref().map_or(0, |t| i64::from(t.quotas.concurrent_runs));
                if max > 0 && live_runs(&mut tx, tenant_id)? >= max {
                    // Its tenant runs all it may: later.
                    tx.commit()?;
                    if run_id.is_some() {
                        return Ok(None);
                    }
                    blocked.push(tenant_id);
                    continue;
                }
                let row = tx.query_one(
                    "UPDATE runs SET status = 'running', owner = $1, claim = claim + 1 WHERE id = $2
                     RETURNING id, status, model, session, plugins, created_at, record, tenant_id,
                         CASE WHEN octet_length(checkpoint) <= $3 THEN checkpoint END, claim",
                    &[&owner, &id, &MAX_CHECKPOINT_BYTES],
                )?;
                let run = run_from(&row);
                let (parked, claim): (Option<String>, i64) = (row.get(8), row.get(9));
                let parts = match &parked {
                    Some(base) => journal_parts(&mut tx, &run.run_id, base.len())?,
                    None => Some(Vec::new()),
                };
                let last_seq: i64 = tx
                    .query_one("SELECT COALESCE(max(seq), 0) FROM run_events WHERE run_id = $1", &[&run.run_id])?
                    .get(0);
                tx.commit()?;
                let (tenant, queued) = (tenant.map(|t| t.name).unwrap_or_default(), was == "queued");
                let claimed = ClaimedRun { tenant, run, parked: String::new(), queued, last_seq, claim: Claim(claim) };
                return Ok(Some((claimed, parked, parts)));
            }
            Ok(None)
        })?;
        // The checkpoint with its journal's parts applied (here, not on a
        // database thread); one that cannot be put together reads as empty:
        // its resume fails, saying so.
        Ok(claimed.map(|(mut claimed, base, parts)| {
            let run_id = &claimed.run.run_id;
            claimed.parked = match (base, parts) {
                (Some(base), Some(parts)) => crate::journal_parts::compose(&base, &parts).unwrap_or_else(|e| {
                    tracing::error!(run = %run_id, "its checkpoint cannot be read back: {e}");
                    String::new()
                }),
                (Some(_), None) => {
                    tracing::error!(run = %run_id, "its checkpoint's journal parts are over the size or count read back");
                    String::new()
                }
                (None, _) => String::new(),
            };
            claimed
        }))
    }

    /// See [`crate::store::ServerStore::release_claim`].
    pub(super) fn release(&self, run_id: &str, claim: Claim, queued: bool) -> StoreResult<()> {
        let (owner, run_id) = (self.worker.clone(), run_id.to_string());
        let status = if queued { "queued" } else { "resumable" };
        self.with(move |c| {
            // To the back of the queue: the next claim takes another run.
            c.execute(
                "UPDATE runs SET status = $3, owner = NULL, seq = nextval(pg_get_serial_sequence('runs', 'seq'))
                 WHERE id = $1 AND owner = $2 AND claim = $4 AND status = 'running'",
                &[&run_id, &owner, &status, &claim.0],
            )?;
            Ok(())
        })
    }
}
