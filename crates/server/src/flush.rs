//! Storing a run as it goes: its new events and status every second while it
//! runs ([`flush_events`]), and its record, approvals and spend at its end,
//! patiently while the database is away ([`store_patiently`]).

use std::sync::Arc;
use std::time::Duration;

use crate::live::LiveRun;
use crate::state::AppState;
use crate::store::{ServerStore, StoreError};

/// How often a run's new events are stored while it runs.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// Stores a running run's new events and its status (`running`, `paused`,
/// `waiting-approval`) every [`FLUSH_EVERY`] (the run's end stores the rest).
pub(crate) async fn flush_events(state: Arc<AppState>, live: Arc<LiveRun>) {
    let (mut stored, mut stored_status) = (0i64, "running");
    loop {
        tokio::time::sleep(FLUSH_EVERY).await;
        let events = live.events_after(stored, 10_000);
        let status = live.status();
        if events.is_empty() && status == stored_status {
            continue;
        }
        let last = events.last().map_or(stored, |e| e.seq);
        let (rid, claim) = (live.run_id.clone(), live.claim);
        // The status too, so that other workers (and a restart) see a run paused or waiting.
        let changed = status != stored_status;
        let write = move |s: &dyn ServerStore| {
            if !events.is_empty() {
                s.add_run_events(&rid, claim, &events)?;
            }
            if changed {
                s.set_run_status(&rid, claim, status)?;
            }
            Ok(())
        };
        match state.db(write).await {
            Ok(()) => (stored, stored_status) = (last, status),
            Err(e) => tracing::warn!(run = %live.run_id, "events not stored yet: {}", e.body.message),
        }
    }
}

/// How long a run's end is retried while the store fails (a database restarting).
const STORE_RETRY_FOR: Duration = Duration::from_secs(60);

/// Runs `write` on the store, again with backoff (0.25 s doubling to 4 s)
/// while it fails, for at most [`STORE_RETRY_FOR`]: a run's record is not
/// lost to a database that restarts. Gives up at once when the store fences
/// this worker off the run. True when it was written; a loss is logged.
pub async fn store_patiently(
    state: &Arc<AppState>,
    run_id: &str,
    what: &str,
    write: impl Fn(&dyn ServerStore) -> Result<(), StoreError> + Send + Sync + 'static,
) -> bool {
    let write = Arc::new(write);
    let started = std::time::Instant::now();
    let mut backoff = Duration::from_millis(250);
    loop {
        let (store, write) = (state.store.clone(), write.clone());
        let result = tokio::task::spawn_blocking(move || write(store.as_ref())).await;
        match result {
            Ok(Ok(())) => return true,
            Ok(Err(StoreError::Fenced(why))) => {
                tracing::error!(run = %run_id, "the run's {what} was not stored: {why}");
                return false;
            }
            Ok(Err(e)) if started.elapsed() < STORE_RETRY_FOR => {
                tracing::warn!(run = %run_id, "the run's {what} is not stored yet, trying again: {e}");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(4));
            }
            Ok(Err(e)) => {
                tracing::error!(run = %run_id, "the run's {what} could not be stored: {e}");
                return false;
            }
            Err(e) => {
                tracing::error!(run = %run_id, "the run's {what} could not be stored: {e}");
                return false;
            }
        }
    }
}
