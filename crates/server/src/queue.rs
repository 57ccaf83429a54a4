//! The run queue (issue 17): each worker drives at most `worker_runs` runs
//! at once ([`room`]). A new run the worker taking the request has no room
//! for is stored in a database workers share as `queued` — no owner, a
//! checkpoint of nothing done yet, the first event of its stream — and any
//! worker with room claims it (`crate::resume`, `FOR UPDATE SKIP LOCKED`)
//! and starts it there. A worker with no room claims nothing, so runs go
//! where there is room. A queued run holds no task, instance or slot; it
//! counts against its tenant's `parked_runs` quota. Aborting it before a
//! worker claims it ends it at once.

use std::sync::Arc;

use hookbox::RunJournal;
use serde_json::json;

use crate::checkpoint::{ParkedRun, RunSpec, encode};
use crate::error::{ApiError, ApiResult};
use crate::room::Room;
use crate::state::AppState;
use crate::store::{RunEventRow, RunRow, Tenant};

/// A place in this worker's `worker_runs` for a new run, or `None` when it
/// has that many runs, or when runs it could start wait in the database
/// (on a store that queues runs): a new run then queues behind them.
pub fn room(state: &AppState) -> Option<Room> {
    if state.store.parks_runs() && state.room.waiting() {
        return None;
    }
    state.room.take()
}

/// Queues the tenant's new run `row` (started with `spec`) in the database
/// for any worker with room.
///
/// Errors: 503 when this worker has no room and its store queues no runs
/// (SQLite: one worker); 429 `parked_runs` when the tenant has that many
/// runs parked or queued; 503 while the database fails.
pub async fn queue(state: &Arc<AppState>, tenant: &Tenant, mut row: RunRow, spec: RunSpec) -> ApiResult<()> {
    if !state.store.parks_runs() {
        return Err(ApiError::unavailable(format!(
            "this server runs {} runs at once (worker_runs); try again later",
            state.config.worker_runs
        )));
    }
    let text =
        queued_checkpoint(&row.run_id, spec).ok_or_else(|| ApiError::bad_request("the run is too large to queue"))?;
    let first = RunEventRow { seq: 1, name: "status".into(), data: json!({"status": "queued"}).to_string() };
    row.status = "queued".into();
    let (tid, max) = (tenant.id, tenant.quotas.parked_runs);
    if state.db(move |s| s.queue_run(tid, &row, &text, &first, max)).await? {
        return Ok(());
    }
    let limit = f64::from(max);
    state.counted(tenant, Err(ApiError::quota("parked_runs", limit, limit)))
}

/// The checkpoint text of run `run_id` queued with `spec`: nothing done
/// yet. `None` when it is over the checkpoint's size.
fn queued_checkpoint(run_id: &str, spec: RunSpec) -> Option<String> {
    let journal = RunJournal::recording();
    journal.run_id(run_id.to_string());
    let parked = ParkedRun {
        spec,
        checkpoint: journal.checkpoint(Vec::new()),
        approval: None,
        workspace: Vec::new(),
        abort: None,
        paused: false,
        api_pause: false,
        counted_usd: 0.0,
        queued: true,
        inbox: Vec::new(),
    };
    encode(&parked, &journal)
}

/// Ends the tenant's (id and name) queued run `run_id` as aborted with
/// `reason`, if no worker claimed it yet: its stream ends with its record,
/// and it is counted in `hookbox_runs_total` as `aborted`. False otherwise.
///
/// Errors: 503 while the database fails.
pub async fn abort_queued(
    state: &Arc<AppState>,
    (tenant, tenant_name): (i64, &str),
    run_id: &str,
    reason: &str,
) -> ApiResult<bool> {
    let record = json!({"error": {"kind": "aborted", "message": reason}, "queued": true});
    let rid = run_id.to_string();
    let ended = state.db(move |s| s.end_queued(tenant, &rid, "aborted", &record)).await?;
    if ended {
        let what = crate::metrics::TenantWhat { tenant: tenant_name.to_string(), what: "aborted".into() };
        state.metrics.runs.get_or_create(&what).inc();
    }
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queued_checkpoint_reads_back_as_queued() {
        let spec = RunSpec {
            prompt: r#"ends like one: ,"queued":true,"inbox":[]}"#.into(),
            system: None,
            model: "demo".into(),
            plugins: vec![("deny-tools".into(), 1)],
            session_key: "acme:s".into(),
        };
        let text = queued_checkpoint("r-1", spec).unwrap_or_default();
        let parked = crate::checkpoint::read(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(parked.queued && parked.inbox.is_empty() && parked.workspace.is_empty());
        assert_eq!(parked.checkpoint.run_id, "r-1");
    }
}
