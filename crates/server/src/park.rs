//! Durable pause (issue 17): on a database several workers share, a run
//! that waits for an approval is parked. Its checkpoint (the run journal so
//! far: model responses, tool outcomes, hook import values and calls,
//! approval answers; what it was started with; its workspace's files) is
//! stored with status `parked`, and its task, hooks and instances are
//! dropped: a parked run costs no worker anything. The answer, given on any
//! worker, is written into the checkpoint and makes the run `resumable`; a
//! worker claims it (`FOR UPDATE SKIP LOCKED`) and resumes it by
//! re-executing the checkpoint (the model is not asked again, no tool runs
//! again, hooks get their journaled values and commit no state again), then
//! goes on live (`crate::resume`). Stream subscribers see one stream: the
//! resumed run's events follow the stored ones, and the re-execution adds
//! none. Answers and aborts of parked runs: `crate::steer`.

use std::path::PathBuf;
use std::sync::Arc;

use hookbox::RunJournal;
use hookbox::contract::Approval;
use hookbox::providers::record::RecordingProvider;
use serde_json::{Value, json};

use crate::checkpoint::{MAX_CHECKPOINT_BYTES, ParkedRun, RunSpec, snapshot};
use crate::live::LiveRun;
use crate::state::AppState;
use crate::store::ServerStore;

/// What a run that can park keeps: its journal and recording model, what it
/// was started with, and its workspace folder.
pub struct Park {
    /// The run's journal.
    pub journal: Arc<RunJournal>,
    /// The model, recording its responses.
    pub recorder: Arc<RecordingProvider>,
    /// What the run was started with.
    pub spec: RunSpec,
    /// The run's workspace folder.
    pub dir: PathBuf,
    /// Its checkpoints at safe points (crash recovery).
    pub durable: Arc<crate::durable::DurableRun>,
}

/// Parks the run `live` waiting for `approval` (`data` as the API shows it):
/// stores its checkpoint and its stream so far. True when it parked (the
/// caller then drops the run); false when it goes on waiting here (a
/// workspace too large to store, a command that arrived, the database
/// failing: each logged).
pub async fn park(state: &Arc<AppState>, live: &Arc<LiveRun>, park: &Park, approval: &Approval, data: &Value) -> bool {
    let dir = park.dir.clone();
    let Ok(Some(workspace)) = tokio::task::spawn_blocking(move || snapshot(&dir)).await else {
        tracing::info!(run = %live.run_id, "not parked: the workspace is over the size a parked run stores");
        return false;
    };
    let parked = ParkedRun {
        spec: park.spec.clone(),
        checkpoint: park.journal.checkpoint(park.recorder.responses()),
        approval: Some(approval.clone()),
        workspace,
        abort: None,
    };
    let Ok(text) = serde_json::to_string(&parked) else { return false };
    if text.len() > MAX_CHECKPOINT_BYTES || !park.journal.cut().is_empty() {
        // Too large to read back, or a plugin's values were cut: it could not resume exactly.
        tracing::info!(run = %live.run_id, "not parked: its checkpoint is over the size or a plugin's journal was cut");
        return false;
    }
    let id = approval.id.clone();
    let handle = &live.handle;
    // Still waiting for this answer, and nothing applied meanwhile that the park would drop.
    let waiting = || handle.approvals().iter().any(|a| a.id == id) && handle.queued() == 0 && !handle.paused();
    if !live.try_park(waiting) {
        return false;
    }
    live.push("status", &json!({"status": "parked", "approval": approval.id}));
    let events = live.events_after(0, usize::MAX);
    let (tenant, rid, data) = (live.tenant, live.run_id.clone(), data.clone());
    let write = move |s: &dyn ServerStore| s.park_run(tenant, &rid, &events, &text, (&id, &data));
    match state.db(write).await {
        Ok(true) => true,
        Ok(false) => {
            live.unpark();
            live.push("status", &json!({"status": "waiting-approval"}));
            false
        }
        Err(e) => {
            // A park whose commit was not acknowledged may have been made: the store says.
            let rid = live.run_id.clone();
            if let Ok(Some(run)) = state.db(move |s| s.run(tenant, &rid)).await
                && matches!(run.status.as_str(), "parked" | "resumable")
            {
                return true;
            }
            tracing::warn!(run = %live.run_id, "not parked, waiting here: {}", e.body.message);
            live.unpark();
            live.push("status", &json!({"status": "waiting-approval"}));
            false
        }
    }
}
