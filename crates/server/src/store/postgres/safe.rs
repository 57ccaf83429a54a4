//! A live run's events and checkpoint, written by its owner only (fencing):
//! its stream as it grows, and at each safe point its journal, so that a
//! sweep can make the run `resumable` when its worker dies (crash recovery).

use super::PostgresServerStore;
use super::lease::{LIVE, fenced};
use super::park::EventColumns;
use crate::store::{RunEventRow, StoreResult};

impl PostgresServerStore {
    /// Stores `events` of this worker's live run `run_id`, and with
    /// `checkpoint` (`Some((text or None to forget it, safe_seq))`) its
    /// checkpoint, in one transaction.
    ///
    /// Errors: `Fenced` when the run is no longer this worker's (or not live).
    pub(super) fn store_checkpoint(
        &self,
        run_id: &str,
        events: &[RunEventRow],
        checkpoint: Option<(Option<&str>, i64)>,
    ) -> StoreResult<()> {
        let (run_id, owner) = (run_id.to_string(), self.worker.clone());
        let events = EventColumns::of(events);
        let checkpoint = checkpoint.map(|(text, seq)| (text.map(str::to_string), seq));
        let rid = run_id.clone();
        let owned = self.with(move |c| {
            let mut tx = c.transaction()?;
            // Only the run's owner, while the run is live (fencing); the row
            // is locked against a sweep until this commits.
            let owned = tx
                .query_opt(
                    &format!("SELECT 1 FROM runs WHERE id = $1 AND owner = $2 AND status IN {LIVE} FOR UPDATE"),
                    &[&run_id, &owner],
                )?
                .is_some();
            if owned {
                events.insert(&mut tx, &run_id)?;
                if let Some((text, seq)) = &checkpoint {
                    let seq = text.as_ref().map(|_| *seq);
                    tx.execute("UPDATE runs SET checkpoint = $2, safe_seq = $3 WHERE id = $1", &[&run_id, text, &seq])?;
                }
            }
            tx.commit()?;
            Ok(owned)
        })?;
        if !owned {
            return Err(fenced(&rid));
        }
        Ok(())
    }
}
