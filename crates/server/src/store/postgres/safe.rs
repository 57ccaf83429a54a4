//! A live run's events and checkpoint, written by its owner only (fencing):
//! its stream as it grows, and at each safe point its journal, whole or a
//! part appended to it (`run_journal`, `crate::journal_parts`), so that a
//! sweep can make the run `resumable` when its worker dies (crash recovery);
//! and its end, with its record.

use super::PostgresServerStore;
use super::lease::{LIVE, fenced};
use super::park::EventColumns;
use crate::store::{Checkpointed, RunEventRow, StoreResult};

/// What a store call found.
enum Stored {
    Yes,
    NotMine,
    /// A part that does not follow the stored checkpoint and parts.
    OutOfStep,
}

/// A checkpoint to store, owned (for the database thread).
enum Owned {
    Forget,
    Whole(String),
    Part(i64, String),
}

impl PostgresServerStore {
    /// Stores `events` of this worker's live run `run_id`, and with
    /// `checkpoint` (`Some((what, safe_seq))`) its checkpoint, in one
    /// transaction: a whole checkpoint (or none) replaces the stored one
    /// and its parts; a part is appended if it follows them (a whole
    /// checkpoint and parts 1 to its number - 1 stored).
    ///
    /// Errors: `Fenced` when the run is no longer this worker's (or not
    /// live); `Unavailable` for a part that does not follow (nothing stored).
    pub(super) fn store_checkpoint(
        &self,
        run_id: &str,
        events: &[RunEventRow],
        checkpoint: Option<(Checkpointed<'_>, i64)>,
    ) -> StoreResult<()> {
        let (run_id, owner) = (run_id.to_string(), self.worker.clone());
        let events = EventColumns::of(events);
        let checkpoint = checkpoint.map(|(what, seq)| {
            let what = match what {
                Checkpointed::Forget => Owned::Forget,
                Checkpointed::Whole(text) => Owned::Whole(text.to_string()),
                Checkpointed::Part { number, text } => Owned::Part(i64::from(number), text.to_string()),
            };
            (what, seq)
        });
        let rid = run_id.clone();
        let stored = self.with(move |c| {
            let mut tx = c.transaction()?;
            // Only the run's owner, while the run is live (fencing); the row
            // is locked against a sweep until this commits.
            let owned = tx
                .query_opt(
                    &format!("SELECT 1 FROM runs WHERE id = $1 AND owner = $2 AND status IN {LIVE} FOR UPDATE"),
                    &[&run_id, &owner],
                )?
                .is_some();
            if !owned {
                return Ok(Stored::NotMine);
            }
            events.insert(&mut tx, &run_id)?;
            match &checkpoint {
                None => {}
                Some((Owned::Part(number, text), seq)) => {
                    // It must follow what is stored: a whole checkpoint and parts
                    // 1 to number - 1 (or be this very part: a try again by the
                    // pool whose first reply was lost). Else nothing is stored.
                    // One statement: the check, the part and the safe point.
                    let follows: bool = tx
                        .query_one(
                            "WITH state AS (SELECT
                                     (SELECT checkpoint IS NOT NULL FROM runs WHERE id = $1) AS base,
                                     (SELECT count(*) FROM run_journal WHERE run_id = $1 AND part < $2) AS before,
                                     (SELECT count(*) FROM run_journal WHERE run_id = $1 AND part >= $2) AS after,
                                     EXISTS (SELECT 1 FROM run_journal WHERE run_id = $1 AND part = $2 AND data = $3)
                                         AS same),
                                 ok AS (SELECT (base IS TRUE AND before = $2 - 1
                                         AND (after = 0 OR (after = 1 AND same))) AS yes FROM state),
                                 added AS (INSERT INTO run_journal (run_id, part, data)
                                     SELECT $1, $2, $3 FROM ok WHERE ok.yes ON CONFLICT DO NOTHING),
                                 moved AS (UPDATE runs SET safe_seq = $4 WHERE id = $1 AND (SELECT yes FROM ok))
                             SELECT yes FROM ok",
                            &[&run_id, number, text, seq],
                        )?
                        .get(0);
                    if !follows {
                        return Ok(Stored::OutOfStep);
                    }
                }
                Some((whole, seq)) => {
                    let text = match whole {
                        Owned::Whole(text) => Some(text),
                        _ => None,
                    };
                    let seq = text.map(|_| *seq);
                    // One statement: the parts go with the checkpoint they extended.
                    tx.execute(
                        "WITH parts_gone AS (DELETE FROM run_journal WHERE run_id = $1)
                         UPDATE runs SET checkpoint = $2, safe_seq = $3, started = TRUE WHERE id = $1",
                        &[&run_id, &text, &seq],
                    )?;
                }
            }
            tx.commit()?;
            Ok(Stored::Yes)
        })?;
        match stored {
            Stored::Yes => Ok(()),
            Stored::NotMine => Err(fenced(&rid)),
            Stored::OutOfStep => Err(crate::store::StoreError::Unavailable(format!(
                "run {rid}: the journal part does not follow the stored checkpoint (nothing stored)"
            ))),
        }
    }

    /// See [`crate::store::ServerStore::finish_run`]: by the run's owner
    /// only, while it is live; its checkpoint and journal parts go.
    pub(super) fn end_run(&self, run_id: &str, status: &str, record: Option<&serde_json::Value>) -> StoreResult<()> {
        let (run_id, status, record) = (run_id.to_string(), status.to_string(), record.map(|r| r.to_string()));
        let owner = self.worker.clone();
        let rid = run_id.clone();
        let written = self.with(move |c| {
            // Its journal's parts go with its checkpoint.
            let done: i64 = c
                .query_one(
                    &format!(
                        "WITH done AS (UPDATE runs SET status = $2, record = $3, checkpoint = NULL
                             WHERE id = $1 AND owner = $4 AND status IN {LIVE} RETURNING id),
                         parts_gone AS (DELETE FROM run_journal WHERE run_id IN (SELECT id FROM done))
                         SELECT count(*) FROM done"
                    ),
                    &[&run_id, &status, &record, &owner],
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
