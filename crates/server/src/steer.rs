//! Steering a run, wherever it runs: pause, resume, abort, inject and
//! approval answers are [`RunCommand`]s. A command for a run of this worker
//! is applied at once ([`apply`]); one for a live run of another worker on
//! the same database is queued in the store, and that worker's
//! [`take_commands`] loop applies it within [`POLL_EVERY`]. So any worker
//! answers any API call, and an approval can be answered on another worker
//! than the one that runs the run.

use std::sync::{Arc, Weak};
use std::time::Duration;

use hookbox::ApprovalAnswer;
use hookbox::contract::{AnsweredBy, ApprovalRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::live::LiveRun;
use crate::state::AppState;
use crate::store::Tenant;

/// How often a worker takes the commands queued for its runs.
pub const POLL_EVERY: Duration = Duration::from_millis(200);

/// A command as queued in the store: the command and a nonce of its request.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Queued {
    /// A UUID per request: the owner applies each nonce once.
    pub nonce: String,
    /// The command.
    pub command: RunCommand,
}

/// The most nonces a worker remembers to apply each queued command once
/// (duplicates come from one retried insert, so they are close together).
const REMEMBERED_NONCES: usize = 4096;

/// Something done to a live run.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunCommand {
    /// Pause at the next safe point.
    Pause,
    /// Resume a paused run.
    Resume,
    /// Abort at the next safe point, with a reason.
    Abort {
        /// Why.
        reason: String,
    },
    /// Queue a message for the next turn boundary.
    Inject {
        /// The message.
        text: String,
    },
    /// Answer the pending approval `id` (`RUN_ID/TOOL_CALL_ID`).
    Answer {
        /// The approval.
        id: String,
        /// The answer.
        answer: ApprovalAnswer,
    },
}

/// Applies `command` to a run of this worker; returns the route's answer.
///
/// Errors: 409 for an injection over the run's limit or into a finished
/// run; 404 for an approval that is not waiting; 400 for bad arguments.
pub fn apply(live: &LiveRun, command: RunCommand) -> ApiResult<Value> {
    // Its record is being stored (a GET may read it already): over, as it says.
    if live.closing() {
        return Err(ApiError::conflict("the run is over: it can no longer be steered"));
    }
    // Never applied to a run that parks (its task is being dropped), nor
    // inside a resumed run's re-execution (it would change what is re-executed).
    if live.is_resuming() {
        return Err(ApiError::unavailable("the run is resuming from its checkpoint; try again in a moment"));
    }
    live.steering(|| apply_here(live, command))
        .unwrap_or_else(|| Err(ApiError::unavailable("the run is parking; try again")))
}

fn apply_here(live: &LiveRun, command: RunCommand) -> ApiResult<Value> {
    let id = &live.run_id;
    match command {
        RunCommand::Pause => {
            live.handle.pause();
            live.push("status", &json!({"status": "paused"}));
            Ok(json!({"run_id": id, "status": live.status()}))
        }
        RunCommand::Resume => {
            live.handle.resume();
            live.push("status", &json!({"status": "running"}));
            Ok(json!({"run_id": id, "status": live.status()}))
        }
        RunCommand::Abort { reason } => {
            live.abort_by_request(reason);
            Ok(json!({"run_id": id, "status": "aborting"}))
        }
        RunCommand::Inject { text } => {
            if !live.count_injection() {
                return Err(ApiError::conflict(format!(
                    "the run has {} injected messages, the most it takes",
                    crate::live::MAX_INJECTIONS_PER_RUN
                )));
            }
            live.inject_by_request(text).map_err(|e| match e {
                hookbox::HandleError::Finished => ApiError::conflict(e.to_string()),
                other => ApiError::bad_request(other.to_string()),
            })?;
            Ok(json!({"run_id": id, "queued": true}))
        }
        RunCommand::Answer { id: approval, answer } => {
            live.handle.answer(&approval, answer).map_err(|e| match e {
                hookbox::HandleError::UnknownApproval(_) => ApiError::not_found("approval waiting for an answer"),
                other => ApiError::bad_request(other.to_string()),
            })?;
            live.push("status", &json!({"status": "running", "answered": approval}));
            Ok(json!({"id": approval, "answered": true}))
        }
    }
}

/// The live run `run_id` of `tenant` on this worker, if it is here.
pub fn local(state: &AppState, tenant: i64, run_id: &str) -> Option<Arc<LiveRun>> {
    let runs = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    runs.get(run_id).filter(|r| r.tenant == tenant && !r.ended()).cloned()
}

/// Applies `command` to the tenant's run `run_id` here, or queues it for the
/// worker that runs it (the answer then says `"queued": true`).
///
/// Errors: as [`apply`]; 404 when no worker runs it and the tenant has no
/// such run; 409 when the run is over or has too many commands waiting.
pub async fn steer(state: &Arc<AppState>, tenant: &Tenant, run_id: &str, command: RunCommand) -> ApiResult<Value> {
    steer_run(state, (tenant.id, &tenant.name), run_id, command).await
}

/// How many times a command is tried on a run that changed between its read
/// and its write (a parked run injected into, answered or resumed meanwhile).
const PARKED_TRIES: usize = 5;

/// [`steer`] by the tenant's id and name.
async fn steer_run(state: &Arc<AppState>, tenant: (i64, &str), run_id: &str, command: RunCommand) -> ApiResult<Value> {
    for _ in 0..PARKED_TRIES {
        if let Some(answer) = steer_once(state, tenant, run_id, command.clone()).await? {
            return Ok(answer);
        }
    }
    Err(ApiError::unavailable("the run changed while the command was applied; try again"))
}

/// One try of [`steer_run`]: `None` when the run was parked as its status
/// was read and no longer is (it is steered again as it is now).
async fn steer_once(
    state: &Arc<AppState>,
    (tenant, tenant_name): (i64, &str),
    run_id: &str,
    command: RunCommand,
) -> ApiResult<Option<Value>> {
    if let Some(live) = local(state, tenant, run_id) {
        let answered = matches!(&command, RunCommand::Answer { .. });
        let answer = apply(&live, command)?;
        if answered {
            forget_approval(state, &live, answer["id"].as_str().unwrap_or_default()).await;
        }
        return Ok(Some(answer));
    }
    // A nonce makes the command idempotent: an insert the store's pool made
    // again after a lost connection (it may have committed) is applied once.
    let queued = Queued { nonce: uuid::Uuid::new_v4().to_string(), command: command.clone() };
    let text = serde_json::to_string(&queued).map_err(ApiError::internal)?;
    let (tid, rid) = (tenant, run_id.to_string());
    if state.db(move |s| s.add_command(tid, &rid, &text)).await? {
        let mut answer = match &command {
            RunCommand::Answer { id, .. } => json!({"id": id, "answered": true}),
            _ => json!({"run_id": run_id}),
        };
        answer["queued"] = json!(true);
        return Ok(Some(answer));
    }
    let (tid, rid) = (tenant, run_id.to_string());
    let run = state.db(move |s| s.run(tid, &rid)).await?;
    match run {
        None => Err(ApiError::not_found("run")),
        Some(run) if run.status == "parked" => steer_parked(state, tenant, run_id, command).await,
        Some(run) if run.status == "queued" => match command {
            RunCommand::Abort { reason }
                if crate::queue::abort_queued(state, (tenant, tenant_name), run_id, &reason).await? =>
            {
                Ok(Some(json!({"run_id": run_id, "status": "aborted"})))
            }
            RunCommand::Abort { .. } => {
                Err(ApiError::unavailable("the run is being started on a worker; try again in a moment"))
            }
            _ => Err(ApiError::conflict("the run is queued and has not started: abort it, or steer it once it runs")),
        },
        // Answered already (or aborted): another answer finds nothing waiting; other commands, later.
        Some(run) if run.status == "resumable" => match command {
            RunCommand::Answer { .. } => Err(ApiError::not_found("approval waiting for an answer")),
            // Written into its checkpoint: the worker that takes it ends it aborted.
            RunCommand::Abort { reason } => Ok(state
                .db({
                    let rid = run_id.to_string();
                    move |s| s.abort_resumable(tenant, &rid, &reason)
                })
                .await?
                .then(|| json!({"run_id": run_id, "status": "aborting"}))),
            _ => Err(ApiError::unavailable(
                "the run is being resumed (answered, or left by a worker that stopped); try again in a moment",
            )),
        },
        // Its approval is not listed (answered already, or not asked yet).
        Some(run) if crate::store::not_ended(&run.status) && matches!(command, RunCommand::Answer { .. }) => {
            Err(ApiError::not_found("approval waiting for an answer"))
        }
        Some(run) if crate::store::not_ended(&run.status) => Err(ApiError::conflict(format!(
            "the run has {} commands waiting; try again",
            crate::store::MAX_QUEUED_COMMANDS
        ))),
        Some(run) => Err(ApiError::conflict(format!("the run is {}: it can no longer be steered", run.status))),
    }
}

/// Applies `command` to the tenant's parked run `run_id` (read again, a few
/// times, when it changes between the read and the write): an answer to the
/// approval it waits for, a resume of the pause it waits in, or an abort,
/// makes it resumable, and this worker tries to resume it at once. An
/// injection waits in its checkpoint's inbox (at most
/// [`crate::live::MAX_INJECTIONS_PER_RUN`]) and is delivered once the
/// resumed run is past its checkpoint. A pause of a run parked in a pause
/// changes nothing. `None` when the run is no longer parked (steer it as it is now).
///
/// Errors: 404 when the approval is not the one it waits for; 409 for
/// pause and resume of a run parked for an approval (answer or abort it
/// first) and for an injection over the inbox's limit or size; 422 for a
/// checkpoint that cannot be read.
async fn steer_parked(
    state: &Arc<AppState>,
    tenant: i64,
    run_id: &str,
    command: RunCommand,
) -> ApiResult<Option<Value>> {
    for _ in 0..PARKED_TRIES {
        match steer_parked_once(state, tenant, run_id, command.clone()).await? {
            Parked::Done(answer) => return Ok(Some(answer)),
            // Answered by another request, or aborted: nothing waits for this answer.
            Parked::Gone if matches!(command, RunCommand::Answer { .. }) => {
                return Err(ApiError::not_found("approval waiting for an answer"));
            }
            Parked::Gone => return Ok(None),
            Parked::Changed => {}
        }
    }
    Err(ApiError::unavailable("the parked run changed while the command was applied; try again"))
}

/// What one try of [`steer_parked`] came to.
enum Parked {
    /// Applied: the answer.
    Done(Value),
    /// The run is no longer parked.
    Gone,
    /// Its checkpoint changed between the read and the write: read it again.
    Changed,
}

/// One try of [`steer_parked`].
async fn steer_parked_once(state: &Arc<AppState>, tenant: i64, run_id: &str, command: RunCommand) -> ApiResult<Parked> {
    let rid = run_id.to_string();
    let Some((text, park)) = state.db(move |s| s.parked_run(tenant, &rid)).await? else {
        return Ok(Parked::Gone);
    };
    let mut parked = match crate::checkpoint::read(&text) {
        Ok(parked) => parked,
        Err(why) => {
            // Unreadable (a corrupt row): made resumable as it is, so that the
            // worker that claims it fails the run cleanly (and its stream ends).
            tracing::error!(run = %run_id, "a parked run's checkpoint cannot be read: {why}");
            let rid = run_id.to_string();
            if state.db(move |s| s.unpark(&rid, park, &text)).await? {
                let (state, rid) = (state.clone(), run_id.to_string());
                tokio::spawn(async move { crate::resume::claim_and_resume(&state, Some(&rid)).await });
            }
            return Err(ApiError::unprocessable("the run's checkpoint cannot be read: the run fails"));
        }
    };
    let answer = match command {
        RunCommand::Answer { id, answer } => {
            let Some(a) = parked.approval.as_ref().filter(|a| a.id == id) else {
                return Err(ApiError::not_found("approval waiting for an answer"));
            };
            parked.checkpoint.answer(ApprovalRecord {
                id: a.id.clone(),
                tool: a.call.name.clone(),
                tool_call_id: a.call.id.clone(),
                reasons: a.reasons.clone(),
                // Arguments that are not an object deny the call when the run takes the answer.
                answer,
                answered_by: AnsweredBy::Host,
            });
            json!({"id": id, "answered": true, "resumes": true})
        }
        RunCommand::Abort { reason } => {
            if parked.paused && !parked.api_pause {
                // Past the pause it parked in, the resumed run takes the abort
                // at its next event (re-executing the pause would repeat it).
                parked.checkpoint.resume_pause();
            }
            parked.abort = Some(reason);
            json!({"run_id": run_id, "status": "aborting"})
        }
        RunCommand::Resume if parked.paused => {
            // The pause it parked in is answered: the resumed run goes past a
            // hook's (the API's alone is not re-executed: nothing to pass).
            if !parked.api_pause {
                parked.checkpoint.resume_pause();
            }
            json!({"run_id": run_id, "status": "running", "resumes": true})
        }
        RunCommand::Pause if parked.paused => {
            return Ok(Parked::Done(json!({"run_id": run_id, "status": "parked", "paused": true})));
        }
        RunCommand::Inject { text } => return inject_parked(state, run_id, park, parked, text).await,
        RunCommand::Pause | RunCommand::Resume => {
            return Err(ApiError::conflict(format!(
                "the run is parked waiting for approval {}: answer or abort it first",
                parked.approval.as_ref().map(|a| a.id.escape_debug().to_string()).unwrap_or_default()
            )));
        }
    };
    let text = serde_json::to_string(&parked).map_err(ApiError::internal)?;
    let rid = run_id.to_string();
    if !state.db(move |s| s.unpark(&rid, park, &text)).await? {
        return Ok(Parked::Changed);
    }
    let (state, rid) = (state.clone(), run_id.to_string());
    tokio::spawn(async move { crate::resume::claim_and_resume(&state, Some(&rid)).await });
    Ok(Parked::Done(answer))
}

/// Adds `text` to the inbox of the parked run `run_id` (read at its park
/// number `park`); it stays parked.
///
/// Errors: 409 when its inbox is full or the checkpoint would be over its size.
async fn inject_parked(
    state: &Arc<AppState>,
    run_id: &str,
    park: i64,
    mut parked: crate::checkpoint::ParkedRun,
    text: String,
) -> ApiResult<Parked> {
    if parked.inbox.len() >= crate::live::MAX_INJECTIONS_PER_RUN {
        return Err(ApiError::conflict(format!(
            "the parked run has {} injected messages waiting, the most it takes",
            crate::live::MAX_INJECTIONS_PER_RUN
        )));
    }
    parked.inbox.push(text);
    let text = serde_json::to_string(&parked)
        .ok()
        .filter(|t| t.len() <= crate::checkpoint::MAX_CHECKPOINT_BYTES)
        .ok_or_else(|| ApiError::conflict("the parked run's checkpoint has no room for this message"))?;
    let rid = run_id.to_string();
    if !state.db(move |s| s.update_parked(&rid, park, &text)).await? {
        return Ok(Parked::Changed);
    }
    Ok(Parked::Done(json!({"run_id": run_id, "queued": true, "parked": true})))
}

/// Removes an answered approval of `live`'s run from the store's list
/// (logged if it fails: the list then shows it until the run ends).
pub async fn forget_approval(state: &Arc<AppState>, live: &LiveRun, id: &str) {
    let (rid, claim, id) = (live.run_id.clone(), live.claim, id.to_string());
    if let Err(e) = state.db(move |s| s.remove_approvals((&rid, claim), Some(&id))).await {
        tracing::warn!(run = %live.run_id, "an answered approval stays listed: {}", e.body.message);
    }
}

/// Takes the commands other workers queued for this worker's runs, every
/// [`POLL_EVERY`], and applies them, until the server is dropped. A command
/// that fails (an approval answered twice, an injection over the limit) is
/// logged: the worker that queued it has already answered.
pub async fn take_commands(state: Weak<AppState>) {
    let mut tick = tokio::time::interval(POLL_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut seen = (std::collections::HashSet::new(), std::collections::VecDeque::new());
    loop {
        tick.tick().await;
        let Some(state) = state.upgrade() else { return };
        let ids: Vec<(String, crate::store::Claim)> = {
            let runs = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // A run that parks takes its queued commands with it (or stays to take them).
            runs.values()
                .filter(|r| !r.ended() && !r.is_parked() && !r.is_resuming())
                .map(|r| (r.run_id.clone(), r.claim))
                .collect()
        };
        if ids.is_empty() {
            continue;
        }
        let commands = match state.db(move |s| s.take_commands(&ids)).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("queued commands not taken: {}", e.body.message);
                continue;
            }
        };
        for (run_id, text) in commands {
            let live = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&run_id).cloned();
            let (Some(live), Ok(Queued { nonce, command })) = (live, serde_json::from_str::<Queued>(&text)) else {
                tracing::warn!(run = %run_id, "a queued command was dropped: the run ended or the command is not one");
                continue;
            };
            if !seen.0.insert(nonce.clone()) {
                tracing::debug!(run = %run_id, "a queued command stored twice was applied once");
                continue;
            }
            seen.1.push_back(nonce);
            if seen.1.len() > REMEMBERED_NONCES
                && let Some(old) = seen.1.pop_front()
            {
                seen.0.remove(&old);
            }
            let answered = match &command {
                RunCommand::Answer { id, .. } => Some(id.clone()),
                _ => None,
            };
            match apply(&live, command.clone()) {
                Ok(_) => {
                    if let Some(id) = answered {
                        forget_approval(&state, &live, &id).await;
                    }
                }
                Err(_) if live.is_parked() || live.is_resuming() => {
                    // It began to park (or resume) after the command was taken:
                    // once that is settled, steered again, as parked or as here.
                    let state = state.clone();
                    tokio::spawn(async move {
                        for _ in 0..1500 {
                            if live.ended() || !(live.is_parked() || live.is_resuming()) {
                                break;
                            }
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        if let Err(e) =
                            Box::pin(steer_run(&state, (live.tenant, &live.tenant_name), &run_id, command)).await
                        {
                            tracing::warn!(run = %run_id, "a queued command failed: {}", e.body.message);
                        }
                    });
                }
                Err(e) => tracing::warn!(run = %run_id, "a queued command failed: {}", e.body.message),
            }
        }
    }
}
