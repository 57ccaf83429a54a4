//! Resuming parked runs (`crate::park`): a worker claims a `resumable` run
//! (answered or aborted while parked) with `FOR UPDATE SKIP LOCKED`, takes
//! its tenant's run and instance slots (or gives the claim back when over
//! quota), loads the plugin versions the run started with, writes its
//! workspace back, and starts it from its checkpoint.

use std::sync::{Arc, Weak};

use serde_json::json;

use crate::checkpoint::{read, restore};
use crate::error::{ApiError, ApiResult};
use crate::flush::store_patiently;
use crate::live::LiveRun;
use crate::state::AppState;
use crate::store::ClaimedRun;

/// What a claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// No run was resumable.
    None,
    /// A run was resumed here (or failed, when it could not be resumed at all).
    Taken,
    /// A run was claimed and given back (over quota, or the database
    /// failing): it waits at the back of the queue.
    PutOff,
}

/// Claims a resumable run (`run_id`, or any) and resumes it here.
pub async fn claim_and_resume(state: &Arc<AppState>, run_id: Option<&str>) -> Claim {
    if state.shutting_down() {
        return Claim::None;
    }
    // A worker with no room claims nothing: the run waits for one with room.
    let Some(room) = state.room.take() else {
        return Claim::None;
    };
    // Until the run is in `state.runs` (or given back), it is no orphan.
    let _settling = crate::state::Settling::begin(state);
    let rid = run_id.map(str::to_string);
    let claimed = match state.db(move |s| s.claim_resumable(rid.as_deref())).await {
        Ok(Some(c)) => {
            if run_id.is_none() {
                state.room.set_waiting(true);
            }
            c
        }
        Ok(None) => {
            if run_id.is_none() {
                state.room.set_waiting(false);
            }
            return Claim::None;
        }
        Err(e) => {
            tracing::warn!("resumable runs not claimed: {}", e.body.message);
            return Claim::None;
        }
    };
    let (run_id, queued, claimed_tenant) = (claimed.run.run_id.clone(), claimed.queued, claimed.tenant.clone());
    let claim = claimed.claim;
    let give_back = |run_id: String| async move {
        let rid = run_id.clone();
        store_patiently(state, &run_id, "claim's release", move |s| s.release_claim(&rid, claim, queued)).await;
    };
    // This worker still holds a task of the run (its lease lapsed and it has
    // not aborted that task yet): both would write as this worker. Later.
    if state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).contains_key(&run_id) {
        give_back(run_id).await;
        return Claim::PutOff;
    }
    match resume(state, claimed, room).await {
        Ok(true) => Claim::Taken,
        Ok(false) => {
            give_back(run_id).await;
            Claim::PutOff
        }
        Err(e) if e.status == axum::http::StatusCode::SERVICE_UNAVAILABLE => {
            // The database failed: another try later, here or on another worker.
            tracing::warn!(run = %run_id, "resume put off: {}", e.body.message);
            give_back(run_id).await;
            Claim::PutOff
        }
        Err(e) => {
            tracing::error!(run = %run_id, "the parked run could not be resumed: {}", e.body.message);
            let record = json!({"error": {"kind": "resume", "message": e.body.message}});
            let rid = run_id.clone();
            store_patiently(state, &run_id, "record", move |s| s.finish_run(&rid, claim, "failed", Some(&record)))
                .await;
            let what = crate::metrics::TenantWhat { tenant: claimed_tenant, what: "failed".into() };
            state.metrics.runs.get_or_create(&what).inc();
            Claim::Taken
        }
    }
}

/// How often each worker looks for resumable runs (answered on a worker
/// that could not resume them, or left by a worker that stopped).
pub const CLAIM_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// Claims and resumes resumable runs every [`CLAIM_EVERY`] until the server is dropped.
pub async fn resume_loop(state: Weak<AppState>) {
    let mut tick = tokio::time::interval(CLAIM_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let Some(freed) = state.upgrade().map(|s| s.room.freed()) else { return };
    loop {
        // Every tick, and at once when a run here lets its place go.
        tokio::select! {
            _ = tick.tick() => {}
            () = freed.notified() => {}
        }
        let Some(state) = state.upgrade() else { return };
        // A few per tick, so that one worker does not take every run at once.
        for _ in 0..8 {
            if claim_and_resume(&state, None).await == Claim::None {
                break;
            }
        }
    }
}

/// Resumes a claimed run here: its chain at the versions it started with,
/// its workspace as it parked, its journal re-executed.
///
/// False when it is put off (over a quota): the caller gives the claim back.
///
/// Errors: 503 while the database fails; else the run's checkpoint,
/// tenant, model or plugins are gone or unreadable.
async fn resume(state: &Arc<AppState>, claimed: ClaimedRun, room: crate::room::Room) -> ApiResult<bool> {
    let ClaimedRun { tenant, run, parked, last_seq, queued, claim } = claimed;
    let parked = read(&parked).map_err(ApiError::unprocessable)?;
    // The row's status (`queued` or `resumable`) and its checkpoint must agree
    // on whether the run started: the one decides how it is given back, the
    // other how it starts.
    if parked.queued != queued {
        return Err(ApiError::unprocessable(format!(
            "the run is {} but its checkpoint says it {}",
            if queued { "queued" } else { "resumable" },
            if parked.queued { "has not started" } else { "started" }
        )));
    }
    let name = tenant.clone();
    let tenant = state.db(move |s| s.tenant(&name)).await?.ok_or_else(|| ApiError::not_found("tenant"))?;
    // The row is checked against itself: its session is its tenant's, its journal its run's.
    if !parked.spec.session_key.starts_with(&format!("{}:", tenant.name)) || parked.checkpoint.run_id != run.run_id {
        return Err(ApiError::unprocessable("the checkpoint names another tenant's session or another run"));
    }
    // Pauses it went past that its hook calls never asked for would keep the
    // resumed run catching up for ever (no events, no commands): it fails.
    let asked =
        parked.checkpoint.calls.iter().filter(|c| matches!(c.directive, Some(hookbox::Directive::Pause))).count();
    if parked.checkpoint.pauses > u64::try_from(asked).unwrap_or(u64::MAX) {
        return Err(ApiError::unprocessable(format!(
            "the checkpoint counts {} pauses passed, but its hook calls asked for {asked}",
            parked.checkpoint.pauses
        )));
    }
    // A chain over the tenant's quota itself would be put off for ever: it fails.
    let needed = u32::try_from(parked.spec.plugins.len()).unwrap_or(u32::MAX);
    if needed > tenant.quotas.live_instances || tenant.quotas.concurrent_runs == 0 {
        return Err(ApiError::unprocessable(format!(
            "the run's chain needs {needed} instances, over the tenant's live_instances quota of {} \
             (or concurrent_runs is 0): it cannot resume",
            tenant.quotas.live_instances
        )));
    }
    let usage = state.usage(tenant.id);
    if parked.queued {
        // A queued run starts now: the checks of a start. Over the day's
        // spend it fails (as its start would have been refused); over the
        // minute's fuel or hook time it waits for the next minute.
        state.counted(&tenant, crate::runs::check_spend(state, &tenant).await)?;
        if let Err(e) = state.counted(&tenant, usage.check_minute(&tenant.quotas)) {
            tracing::info!(run = %run.run_id, "start put off: {}", e.body.message);
            return Ok(false);
        }
    }
    let slots = crate::usage::Slots::take(&usage, |u| &u.runs, 1, tenant.quotas.concurrent_runs, "concurrent_runs")
        .and_then(|runs| {
            let n = u32::try_from(parked.spec.plugins.len()).unwrap_or(u32::MAX);
            Ok((runs, state.take_instances(&tenant, n)?))
        });
    let slots = match slots {
        Ok(slots) => slots,
        Err(e) => {
            tracing::info!(run = %run.run_id, "resume put off: {}", e.body.message);
            return Ok(false);
        }
    };
    let mut plan = Vec::new();
    for (name, version) in &parked.spec.plugins {
        let plugin = state.load_version(&tenant, name, *version, false).await?;
        plan.push(crate::hooks::PlanEntry { name: name.clone(), version: *version, plugin, shadow: None });
    }
    // Run ids are the server's UUIDs; a row that says otherwise names no folder.
    uuid::Uuid::parse_str(&run.run_id).map_err(|_| ApiError::unprocessable("the run id is not a UUID"))?;
    // A folder of its own per resume: the worker that parked the run may still be removing its copy.
    let name = format!("{}.{}", run.run_id, uuid::Uuid::new_v4());
    let dir = state.data_dir.join("workspaces").join(&name);
    let (files, target, st, queued) = (parked.workspace.clone(), dir.clone(), state.clone(), parked.queued);
    tokio::task::spawn_blocking(move || {
        // A queued run starts afresh: its workspace is made from the template.
        let made = if queued {
            crate::workspace::make_workspace(&st, &name).map(drop).map_err(|e| e.to_string())
        } else {
            restore(&target, &files)
        };
        if made.is_err() {
            let _ = std::fs::remove_dir_all(&target);
        }
        made
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(|e| ApiError::unprocessable(format!("the workspace cannot be written back: {e}")))?;
    if !state.config.checkpoint_runs {
        // No safe points here: the checkpoint it resumed from must not be resumed again after a crash.
        let rid = run.run_id.clone();
        state.db(move |s| s.save_checkpoint((&rid, claim), crate::store::Checkpointed::Forget, &[], 0)).await?;
    }
    let live = LiveRun::resumed(&tenant, run.run_id.clone(), last_seq, claim);
    if let Some(reason) = parked.abort.clone() {
        live.abort_after_resume(reason);
    }
    live.inject_after_resume(parked.inbox.clone());
    if parked.queued {
        live.push("status", &json!({"status": "running"}));
    } else {
        live.push("status", &json!({"status": "running", "resumed": true}));
    }
    crate::runs::launch(
        state,
        crate::runs::Launch {
            tenant,
            live,
            plan: Arc::new(plan),
            spec: parked.spec,
            dir,
            resume_from: (!parked.queued).then_some(parked.checkpoint),
            counted_usd: crate::checkpoint::usd(parked.counted_usd),
            slots,
            room,
        },
    )?;
    Ok(true)
}
