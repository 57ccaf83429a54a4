//! Durable pause (issue 17): on a database several workers share, a run
//! that waits for an approval, or in a pause (a hook's `pause` directive or
//! `POST /v1/runs/{id}/pause`), is parked. Its checkpoint (the run journal so
//! far: model responses, tool outcomes, hook import values and calls,
//! approval answers; what it was started with; its workspace's files) is
//! stored with status `parked`, and its task, hooks and instances are
//! dropped: a parked run costs no worker anything. The answer, given on any
//! worker (for a pause: `POST /v1/runs/{id}/resume`), is written into the
//! checkpoint and makes the run `resumable`; a
//! worker claims it (`FOR UPDATE SKIP LOCKED`) and resumes it by
//! re-executing the checkpoint (the model is not asked again, no tool runs
//! again, hooks get their journaled values and commit no state again), then
//! goes on live (`crate::resume`). Stream subscribers see one stream: the
//! resumed run's events follow the stored ones, and the re-execution adds
//! none. Answers and aborts of parked runs: `crate::steer`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox::RunJournal;
use hookbox::contract::Approval;
use hookbox::providers::record::RecordingProvider;
use serde_json::{Value, json};

use crate::checkpoint::{ParkedRun, RunSpec, snapshot, usd};
use crate::live::LiveRun;
use crate::state::AppState;
use crate::store::{ParkRow, ServerStore};

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
    /// Its tenant's `parked_runs` quota when it started.
    pub max_parked: u32,
    /// Its model spend counted already (at an earlier park), in USD.
    pub counted_usd: f64,
    /// The longest a park waits for the run's detached hook calls to end
    /// (twice its tenant's `max_deadline_ms`, and a second).
    pub calls_wait: Duration,
}

/// What a parked run waits for.
pub enum Wait<'a> {
    /// An answer to `.0` (`.1` as the API shows it).
    Approval(&'a Approval, &'a Value),
    /// A resume of pause `.0` ([`hookbox::RunHandle::waiting_in_pause`]):
    /// a hook's `pause` directive, or the API's pause alone.
    Pause(u64),
}

/// Parks the run `live` waiting for `wait`: stores its checkpoint and its
/// stream so far. True when it parked (the caller then drops the run);
/// false when it goes on waiting here (a workspace too large to store, a
/// command that arrived, the wait over, the database failing: each logged).
pub async fn park(state: &Arc<AppState>, live: &Arc<LiveRun>, park: &Park, wait: Wait<'_>) -> bool {
    let paused = matches!(wait, Wait::Pause(_));
    // The API's pause alone (no hook's `pause` directive to go past on resume).
    let api_pause = paused && !park.journal.in_hook_pause();
    if api_pause && (park.journal.catching_up() || park.recorder.catching_up()) {
        // Paused while it re-executes its checkpoint: the journal does not
        // yet count the hook pauses the checkpoint had passed. It waits here.
        return false;
    }
    // A detached hook call still running (observe-only hooks, `request-start`)
    // counts as begun in the checkpoint, so the resumed run re-executes it
    // without committing its state: its commit is made here first, or, were
    // this worker to die, it would be made nowhere. One that outlasts every
    // deadline keeps the run waiting here.
    if !calls_ended(&park.journal, park.calls_wait).await {
        tracing::info!(run = %live.run_id, "not parked: a detached hook call is still running");
        return false;
    }
    let dir = park.dir.clone();
    let Ok(Some(workspace)) = tokio::task::spawn_blocking(move || snapshot(&dir)).await else {
        tracing::info!(run = %live.run_id, "not parked: the workspace is over the size a parked run stores");
        return false;
    };
    // Unanswered: the resume that unparks it counts this pause as passed
    // (`crate::steer`); resumed otherwise, the run pauses in it again.
    let mut checkpoint = park.journal.checkpoint(park.recorder.responses());
    // Its stream holds these events: the re-execution adds none of them.
    checkpoint.events = park.journal.events_dispatched();
    let approval = match wait {
        Wait::Approval(a, _) => Some(a.clone()),
        Wait::Pause(_) => None,
    };
    // The model spend so far is counted at the park: a run never answered is paid for too.
    let spent: f64 = checkpoint.responses.iter().map(|r| usd(r.usage.cost)).sum();
    let counted_usd = spent.max(park.counted_usd);
    let uncounted = counted_usd - park.counted_usd;
    let parked = ParkedRun {
        spec: park.spec.clone(),
        checkpoint,
        approval,
        workspace,
        abort: None,
        paused,
        api_pause,
        counted_usd,
        queued: false,
        inbox: live.inbox_after_resume(),
    };
    let Some(text) = crate::checkpoint::encode(&parked, &park.journal) else {
        tracing::info!(run = %live.run_id, "not parked: its checkpoint is over the size or a plugin's journal was cut");
        return false;
    };
    let handle = &live.handle;
    // Still waiting, and nothing applied meanwhile that the park would drop
    // (an abort taken through the API included: it is under the same lock).
    let still = |w: &Wait<'_>| match w {
        Wait::Approval(a, _) => handle.approvals().iter().any(|x| x.id == a.id) && !handle.paused(),
        Wait::Pause(id) => handle.waiting_in_pause() == Some(*id) && handle.approvals().is_empty(),
    };
    if !live.try_park(|| still(&wait) && handle.queued() == 0 && live.aborted_with().is_none()) {
        return false;
    }
    let (listed, status) = match wait {
        Wait::Approval(a, data) => (Some((a.id.clone(), data.clone())), json!({"status": "parked", "approval": a.id})),
        Wait::Pause(_) => (None, json!({"status": "parked", "paused": true})),
    };
    live.push("status", &status);
    let events = live.events_after(0, usize::MAX);
    let (tenant, rid, claim) = (live.tenant, live.run_id.clone(), live.claim);
    let (max_parked, day) = (park.max_parked, crate::usage::today());
    let write = move |s: &dyn ServerStore| {
        let row = ParkRow {
            events: &events,
            checkpoint: &text,
            approval: listed.as_ref().map(|(id, data)| (id.as_str(), data)),
            max_parked,
            spend: (uncounted > 0.0).then_some((day.as_str(), uncounted)),
        };
        s.park_run(tenant, (&rid, claim), &row)
    };
    let waiting_again = json!({"status": if paused { "paused" } else { "waiting-approval" }});
    match state.db(write).await {
        Ok(true) => true,
        Ok(false) => {
            live.unpark();
            live.push("status", &waiting_again);
            false
        }
        Err(e) => {
            // A park whose commit was not acknowledged may have been made (and
            // the run answered and claimed elsewhere since), or the run may be
            // another worker's already: the run goes on here only while the
            // store says it is live and this worker's. Asked a few times.
            for attempt in 1..=5u64 {
                let run = (live.run_id.clone(), live.claim);
                match state.db(move |s| s.still_mine(std::slice::from_ref(&run))).await {
                    Ok(mine) if mine.is_empty() => return true,
                    Ok(_) => {
                        tracing::warn!(run = %live.run_id, "not parked, waiting here: {}", e.body.message);
                        live.unpark();
                        live.push("status", &waiting_again);
                        return false;
                    }
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250 * attempt)).await,
                }
            }
            // The store cannot tell: the run is dropped here (if it did not
            // park, the sweep of this worker's orphans takes it back).
            tracing::error!(run = %live.run_id, "the park's outcome is unknown; the run is dropped here: {}", e.body.message);
            true
        }
    }
}

/// Waits until `journal` has no hook call in flight, at most `limit`
/// (checked every 5 ms). True when none is.
async fn calls_ended(journal: &RunJournal, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    while journal.calls_in_flight() > 0 {
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}
