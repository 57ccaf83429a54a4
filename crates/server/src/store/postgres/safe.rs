//! A live run's events and checkpoint, written by its owner only (fencing):
//! its stream as it grows, and at each safe point its journal, whole or a
//! part appended to it (`run_journal`, `crate::journal_parts`), so that a
//! sweep can make the run `resumable` when its worker dies (crash recovery);
//! and its end, with its record.

use postgres::types::{ToSql, Type};

use super::PostgresServerStore;
use super::lease::{LIVE, fenced};
use super::park::EventColumns;
use crate::store::{Checkpointed, Claim, RunEventRow, StoreResult};

/// The statement's first part: the run's row, locked, if it is this
/// worker's and live (fencing; a sweep waits for it), with whether it has
/// a whole checkpoint; and its new events, stored if it is (those stored
/// already are kept). `$1` run id, `$2` owner, `$3`–`$5` the events'
/// seqs, names and data, `$6` the claim (the fencing token); `{go}` is the
/// condition for storing them.
fn head(go: &str) -> String {
    format!(
        "WITH mine AS (SELECT checkpoint IS NOT NULL AS base FROM runs
                 WHERE id = $1 AND owner = $2 AND claim = $6 AND status IN {LIVE} FOR UPDATE),
             ok AS (SELECT EXISTS (SELECT 1 FROM mine) AS mine, {go} AS go),
             events AS (INSERT INTO run_events (run_id, seq, name, data)
                 SELECT $1, e.seq, e.name, e.data FROM unnest($3::BIGINT[], $4::TEXT[], $5::TEXT[]) AS e(seq, name, data)
                 WHERE (SELECT mine AND go FROM ok) ON CONFLICT DO NOTHING)"
    )
}

/// A part follows what is stored: a whole checkpoint and parts 1 to `$7`
/// − 1, and no part from `$7` on unless it is this very one (`$8`: a try
/// again by the pool whose first reply was lost).
const FOLLOWS: &str = "(COALESCE((SELECT base FROM mine), FALSE)
     AND (SELECT count(*) FROM run_journal WHERE run_id = $1 AND part < $7) = $7 - 1
     AND ((SELECT count(*) FROM run_journal WHERE run_id = $1 AND part >= $7) = 0
         OR ((SELECT count(*) FROM run_journal WHERE run_id = $1 AND part >= $7) = 1
             AND EXISTS (SELECT 1 FROM run_journal WHERE run_id = $1 AND part = $7 AND data = $8))))";

/// The parameters of a store call after the events'.
enum More {
    /// None: events only.
    None,
    /// A whole checkpoint (`None`: forget it) and its safe point.
    Whole(Option<String>, Option<i64>),
    /// A part's number and text, and its safe point.
    Part(i64, String, i64),
}

impl PostgresServerStore {
    /// Stores `events` of this worker's live run `run_id` (from `claim` of it), and with
    /// `checkpoint` (`Some((what, safe_seq))`) its checkpoint, in one
    /// statement with typed parameters (one round trip): a whole checkpoint (or none) replaces
    /// the stored one and its parts; a part is appended if it follows them
    /// (a whole checkpoint and parts 1 to its number − 1 stored).
    ///
    /// Errors: `Fenced` when the run is no longer this worker's (or not
    /// live); `Unavailable` for a part that does not follow (nothing stored).
    pub(super) fn store_checkpoint(
        &self,
        (run_id, claim): (&str, Claim),
        events: &[RunEventRow],
        checkpoint: Option<(Checkpointed<'_>, i64)>,
    ) -> StoreResult<()> {
        let (run_id, owner) = (run_id.to_string(), self.worker.clone());
        let events = EventColumns::of(events);
        // The statement, and its parameters after the events'.
        let (sql, more) = match checkpoint {
            None => (format!("{} SELECT mine, go FROM ok", head("TRUE")), More::None),
            Some((Checkpointed::Part { number, text }, seq)) => {
                let sql = format!(
                    "{},
                     added AS (INSERT INTO run_journal (run_id, part, data)
                         SELECT $1, $7, $8 WHERE (SELECT mine AND go FROM ok) ON CONFLICT DO NOTHING),
                     moved AS (UPDATE runs SET safe_seq = $9 WHERE id = $1 AND (SELECT mine AND go FROM ok))
                     SELECT mine, go FROM ok",
                    head(FOLLOWS)
                );
                (sql, More::Part(i64::from(number), text.to_string(), seq))
            }
            Some((whole, seq)) => {
                let text = match whole {
                    Checkpointed::Whole(text) => Some(text.to_string()),
                    _ => None,
                };
                // The parts go with the checkpoint they extended.
                let sql = format!(
                    "{},
                     parts_gone AS (DELETE FROM run_journal WHERE run_id = $1 AND (SELECT mine FROM ok)),
                     moved AS (UPDATE runs SET checkpoint = $7, safe_seq = $8, started = TRUE
                         WHERE id = $1 AND (SELECT mine FROM ok))
                     SELECT mine, go FROM ok",
                    head("TRUE")
                );
                let seq = text.as_ref().map(|_| seq);
                (sql, More::Whole(text, seq))
            }
        };
        let rid = run_id.clone();
        let (mine, follows): (bool, bool) = self.with(move |c| {
            // Typed parameters: one round trip (no statement prepared first).
            let mut params: Vec<(&(dyn ToSql + Sync), Type)> = vec![
                (&run_id, Type::TEXT),
                (&owner, Type::TEXT),
                (&events.seqs, Type::INT8_ARRAY),
                (&events.names, Type::TEXT_ARRAY),
                (&events.data, Type::TEXT_ARRAY),
                (&claim.0, Type::INT8),
            ];
            match &more {
                More::None => {}
                More::Whole(text, seq) => params.extend([(text as _, Type::TEXT), (seq as _, Type::INT8)]),
                More::Part(number, text, seq) => {
                    params.extend([(number as _, Type::INT8), (text as _, Type::TEXT), (seq as _, Type::INT8)]);
                }
            }
            let row = c.query_typed_one(&sql, &params)?;
            Ok((row.get(0), row.get(1)))
        })?;
        if !mine {
            return Err(fenced(&rid));
        }
        if !follows {
            return Err(crate::store::StoreError::Unavailable(format!(
                "run {rid}: the journal part does not follow the stored checkpoint (nothing stored)"
            )));
        }
        Ok(())
    }

    /// See [`crate::store::ServerStore::finish_run`]: by the run's owner
    /// only, while it is live; its checkpoint and journal parts go.
    pub(super) fn end_run(
        &self,
        (run_id, claim): (&str, Claim),
        status: &str,
        record: Option<&serde_json::Value>,
    ) -> StoreResult<()> {
        let (run_id, status, record) = (run_id.to_string(), status.to_string(), record.map(|r| r.to_string()));
        let owner = self.worker.clone();
        let rid = run_id.clone();
        let written = self.with(move |c| {
            // Its journal's parts go with its checkpoint.
            let done: i64 = c
                .query_one(
                    &format!(
                        "WITH done AS (UPDATE runs SET status = $2, record = $3, checkpoint = NULL
                             WHERE id = $1 AND owner = $4 AND claim = $5 AND status IN {LIVE} RETURNING id),
                         parts_gone AS (DELETE FROM run_journal WHERE run_id IN (SELECT id FROM done))
                         SELECT count(*) FROM done"
                    ),
                    &[&run_id, &status, &record, &owner, &claim.0],
                )?
                .get(0);
            Ok(done)
        })?;
        if written == 0 {
            return Err(fenced(&rid));
        }
        Ok(())
    }

    /// See [`crate::store::ServerStore::interrupt_live_runs`] (a database of
    /// this server's own only): their checkpoints and journal parts go.
    pub(super) fn interrupt_all(&self) -> StoreResult<usize> {
        self.with(|c| {
            let n: i64 = c
                .query_one(
                    &format!(
                        "WITH done AS (UPDATE runs SET status = 'interrupted', checkpoint = NULL
                             WHERE status IN {LIVE} RETURNING id),
                         parts_gone AS (DELETE FROM run_journal WHERE run_id IN (SELECT id FROM done))
                         SELECT count(*) FROM done"
                    ),
                    &[],
                )?
                .get(0);
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        })
    }
}
