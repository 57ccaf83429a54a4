//! The run routes: start a run, read its record, follow its events as
//! Server-Sent Events, steer it, and answer its approvals.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use futures_util::Stream;
use hookbox::ApprovalAnswer;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::live::LiveRun;
use crate::routes::ApiJson;
use crate::runs::{RunRequest, approval_json, start};
use crate::state::AppState;
use crate::steer::{RunCommand, steer};
use crate::store::{RunEventRow, RunRow};

/// `POST /v1/runs/{id}/abort`.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AbortRequest {
    /// Why (shown in the record).
    pub reason: Option<String>,
}

/// `POST /v1/runs/{id}/inject`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InjectRequest {
    /// The message, delivered at the next turn boundary.
    pub text: String,
}

/// `POST /v1/approvals/{id}`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequest {
    /// `approve` or `deny`.
    pub decision: String,
    /// Why (with `deny`).
    pub reason: Option<String>,
    /// With `approve`: run the call with these arguments instead (a JSON object); every guard checks them again.
    #[schema(value_type = Option<Object>)]
    pub arguments: Option<Value>,
}

/// The longest abort reason or injected message, in bytes.
const MAX_TEXT_BYTES: usize = 64 * 1024;

/// Starts a run.
#[utoipa::path(post, path = "/v1/runs", tag = "runs", security(("bearer" = [])), request_body = RunRequest,
    responses((status = 201, description = "`{run_id}`, with `queued: true` when this worker had no room and the run waits in the database for a worker with room", body = Object), (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
pub async fn create(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiJson(req): ApiJson<RunRequest>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let started = start(&state, caller.tenant.clone(), req).await?;
    let mut body = json!({"run_id": started.run_id});
    if started.queued {
        body["queued"] = json!(true);
        // Started here at once if this worker has a place and it is next in the queue.
        tokio::spawn(async move { crate::resume::claim_and_resume(&state, None).await });
    }
    Ok((StatusCode::CREATED, Json(body)))
}

/// The tenant's newest runs (at most 100).
#[utoipa::path(get, path = "/v1/runs", tag = "runs", security(("bearer" = [])),
    responses((status = 200, body = Vec<RunRow>)))]
pub async fn list(State(state): State<Arc<AppState>>, caller: Caller) -> ApiResult<Json<Vec<RunRow>>> {
    let tid = caller.tenant.id;
    let mut runs = state.db(move |s| s.runs(tid, 100)).await?;
    for run in &mut runs {
        if let Some(live) = live_run(&state, &caller, &run.run_id).filter(|_| run.status == "running") {
            run.status = live.status().to_string();
        }
    }
    Ok(Json(runs))
}

fn live_run(state: &AppState, caller: &Caller, id: &str) -> Option<Arc<LiveRun>> {
    let runs = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    runs.get(id).filter(|r| r.tenant == caller.tenant.id && !r.ended()).cloned()
}

async fn find_run(state: &Arc<AppState>, caller: &Caller, id: &str) -> ApiResult<RunRow> {
    let (tid, rid) = (caller.tenant.id, id.to_string());
    state.db(move |s| s.run(tid, &rid)).await?.ok_or_else(|| ApiError::not_found("run"))
}

/// A run: its status and, once it ended, its record as `hookbox run --json` writes it.
#[utoipa::path(get, path = "/v1/runs/{id}", tag = "runs", security(("bearer" = [])), params(("id" = String, Path)),
    responses((status = 200, body = RunRow), (status = 404, body = ErrorBody)))]
pub async fn get(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<RunRow>> {
    let mut run = find_run(&state, &caller, &id).await?;
    // A stored record is final; until then the live run says where it is.
    if let Some(live) = live_run(&state, &caller, &id).filter(|_| run.record.is_none()) {
        run.status = live.status().to_string();
    }
    Ok(Json(run))
}

/// Pauses the run at its next safe point.
#[utoipa::path(post, path = "/v1/runs/{id}/pause", tag = "runs", security(("bearer" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn pause(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(steer(&state, &caller.tenant, &id, RunCommand::Pause).await?))
}

/// Resumes a paused run.
#[utoipa::path(post, path = "/v1/runs/{id}/resume", tag = "runs", security(("bearer" = [])), params(("id" = String, Path)),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn resume(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(steer(&state, &caller.tenant, &id, RunCommand::Resume).await?))
}

/// Aborts the run at its next safe point.
#[utoipa::path(post, path = "/v1/runs/{id}/abort", tag = "runs", security(("bearer" = [])), params(("id" = String, Path)),
    request_body = AbortRequest,
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn abort(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult<Json<Value>> {
    let req: AbortRequest = if body.iter().all(u8::is_ascii_whitespace) {
        AbortRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ApiError::bad_request(format!("body: {e}")))?
    };
    let reason = req.reason.unwrap_or_else(|| "aborted through the API".into());
    if reason.len() > MAX_TEXT_BYTES {
        return Err(ApiError::bad_request(format!("reason: over {MAX_TEXT_BYTES} bytes")));
    }
    Ok(Json(steer(&state, &caller.tenant, &id, RunCommand::Abort { reason }).await?))
}

/// Queues a message for the run's next turn boundary.
#[utoipa::path(post, path = "/v1/runs/{id}/inject", tag = "runs", security(("bearer" = [])), params(("id" = String, Path)),
    request_body = InjectRequest,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn inject(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<InjectRequest>,
) -> ApiResult<Json<Value>> {
    if req.text.len() > MAX_TEXT_BYTES {
        return Err(ApiError::bad_request(format!("text: over {MAX_TEXT_BYTES} bytes")));
    }
    if req.text.trim().is_empty() {
        return Err(ApiError::bad_request("text: empty"));
    }
    Ok(Json(steer(&state, &caller.tenant, &id, RunCommand::Inject { text: req.text }).await?))
}

/// Where a stream of run events is.
struct Cursor {
    state: Arc<AppState>,
    tenant: i64,
    run_id: String,
    after: i64,
    live: Option<Arc<LiveRun>>,
    buf: VecDeque<RunEventRow>,
    done: bool,
    /// Since when the store has failed this stream's reads, if it does.
    failing_since: Option<std::time::Instant>,
    /// An open stream counts against its key's `max_requests_per_tenant`.
    _in_flight: crate::state::InFlight,
}

/// The most events read at once.
const PAGE: usize = 256;

/// How often a stream polls the store for a run another worker runs.
const POLL_EVERY: Duration = Duration::from_millis(500);

/// How long a stream reads again through a store that fails before it ends.
const STREAM_OUTAGE: Duration = Duration::from_secs(60);

impl Cursor {
    /// A store read's value; `Some(None)` after waiting [`POLL_EVERY`] when
    /// the store failed (a database restarting: read again), `None` (end the
    /// stream; the client resumes with `Last-Event-ID`) once it has failed
    /// for [`STREAM_OUTAGE`] or the server is shutting down.
    async fn patiently<T>(&mut self, read: ApiResult<T>) -> Option<Option<T>> {
        match read {
            Ok(value) => {
                self.failing_since = None;
                Some(Some(value))
            }
            Err(_) => {
                let since = *self.failing_since.get_or_insert_with(std::time::Instant::now);
                if since.elapsed() >= STREAM_OUTAGE || self.state.shutting_down() {
                    return None;
                }
                tokio::time::sleep(POLL_EVERY).await;
                Some(None)
            }
        }
    }

    /// A page of the run's stored events after `after`, read as [`Cursor::patiently`] says.
    async fn stored_after(&mut self) -> Option<Option<Vec<RunEventRow>>> {
        let (rid, after) = (self.run_id.clone(), self.after);
        let limit = u32::try_from(PAGE).unwrap_or(256);
        let read = self.state.db(move |s| s.run_events(&rid, after, limit)).await;
        self.patiently(read).await
    }

    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Cursor)> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                self.after = e.seq;
                self.done = e.name == "end";
                let event = SseEvent::default().id(e.seq.to_string()).event(e.name).data(e.data);
                return Some((Ok(event), self));
            }
            if self.done {
                return None;
            }
            // A resumed (or queued) run's stream before it came here is in the store.
            if let Some(base) = self.live.as_ref().map(|l| l.base()).filter(|base| self.after < *base) {
                let Some(events) = self.stored_after().await? else {
                    continue;
                };
                let before: Vec<RunEventRow> = events.into_iter().take_while(|e| e.seq <= base).collect();
                if before.is_empty() {
                    // Nothing (more) stored before it: its own events follow.
                    self.after = base;
                }
                self.buf.extend(before);
                continue;
            }
            match &self.live {
                Some(live) => {
                    let mut changed = live.seq.subscribe();
                    let events = live.events_after(self.after, PAGE);
                    if !events.is_empty() {
                        self.buf.extend(events);
                    } else if live.ended() {
                        // Everything is stored now: read the rest there.
                        self.live = None;
                    } else if changed.changed().await.is_err() {
                        self.live = None;
                    }
                }
                None => {
                    let Some(events) = self.stored_after().await? else {
                        continue;
                    };
                    if !events.is_empty() {
                        self.buf.extend(events);
                        continue;
                    }
                    // The stored stream has no `end` after `after`: a run of another
                    // worker (which stores its events every second), one whose worker was
                    // killed, or a client that already had it. While the run is live,
                    // poll; once it is over (a dead worker's runs are marked interrupted
                    // when its lease lapses), say so, so that a client waiting for `end`
                    // does not reconnect for ever.
                    let (tid, rid) = (self.tenant, self.run_id.clone());
                    let Some(run) = self.patiently(self.state.db(move |s| s.run(tid, &rid)).await).await? else {
                        continue;
                    };
                    let run = run?;
                    if crate::store::not_ended(&run.status) {
                        if self.state.shutting_down() {
                            return None;
                        }
                        tokio::time::sleep(POLL_EVERY).await;
                        continue;
                    }
                    // Events stored with the run's end, after the read above: read them first.
                    let Some(last) = self.stored_after().await? else {
                        continue;
                    };
                    if !last.is_empty() {
                        self.buf.extend(last);
                        continue;
                    }
                    let data = json!({"status": run.status, "record": run.record}).to_string();
                    self.buf.push_back(RunEventRow { seq: self.after.saturating_add(1), name: "end".into(), data });
                }
            }
        }
    }
}

/// The run's events as Server-Sent Events, from the start or after `Last-Event-ID`.
#[utoipa::path(get, path = "/v1/runs/{id}/events", tag = "runs", security(("bearer" = [])),
    params(("id" = String, Path), ("Last-Event-ID" = Option<i64>, Header, description = "resume after this event id")),
    responses((status = 200, description = "text/event-stream: hook-event, directive, hook-failure, approval, status, error, end", content_type = "text/event-stream"),
        (status = 404, body = ErrorBody)))]
pub async fn events(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    find_run(&state, &caller, &id).await?;
    let after = match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::bad_request("Last-Event-ID: an event id (a number) from this stream"))?,
        None => 0,
    };
    let live = {
        let runs = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.get(&id).filter(|r| r.tenant == caller.tenant.id).cloned()
    };
    let cursor = Cursor {
        state,
        tenant: caller.tenant.id,
        run_id: id,
        after,
        live,
        buf: VecDeque::new(),
        done: false,
        failing_since: None,
        _in_flight: caller.into_in_flight(),
    };
    let stream = futures_util::stream::unfold(cursor, Cursor::next);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// The approvals waiting in the tenant's runs.
#[utoipa::path(get, path = "/v1/approvals", tag = "approvals", security(("bearer" = [])),
    responses((status = 200, body = Vec<Object>)))]
pub async fn list_approvals(State(state): State<Arc<AppState>>, caller: Caller) -> ApiResult<Json<Vec<Value>>> {
    let runs: Vec<Arc<LiveRun>> = {
        let runs = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        runs.values().filter(|r| r.tenant == caller.tenant.id && !r.ended()).cloned().collect()
    };
    let mut list: Vec<Value> = runs.iter().flat_map(|r| r.handle.approvals()).map(|a| approval_json(&a)).collect();
    // Other workers' runs (a database several workers share lists them).
    let tid = caller.tenant.id;
    let elsewhere = state.db(move |s| s.approvals(tid)).await?;
    let here: std::collections::HashSet<&str> = runs.iter().map(|r| r.run_id.as_str()).collect();
    list.extend(elsewhere.into_iter().filter(|(run, _)| !here.contains(run.as_str())).map(|(_, a)| a));
    Ok(Json(list))
}

/// Answers an approval: approve, deny with a reason, or approve with other arguments.
#[utoipa::path(post, path = "/v1/approvals/{id}", tag = "approvals", security(("bearer" = [])),
    params(("id" = String, Path, description = "RUN_ID/TOOL_CALL_ID (the `/` may be sent as %2F)")),
    request_body = ApprovalRequest,
    responses((status = 200, body = Object), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn answer(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
    ApiJson(req): ApiJson<ApprovalRequest>,
) -> ApiResult<Json<Value>> {
    if req.reason.as_ref().is_some_and(|r| r.len() > MAX_TEXT_BYTES) {
        return Err(ApiError::bad_request(format!("reason: over {MAX_TEXT_BYTES} bytes")));
    }
    let answer = match (req.decision.as_str(), req.arguments) {
        ("approve", None) => ApprovalAnswer::Approve,
        ("approve", Some(args @ Value::Object(_))) => ApprovalAnswer::ApproveWithArguments(args.to_string()),
        ("approve", Some(_)) => return Err(ApiError::bad_request("arguments: a JSON object")),
        ("deny", None) => ApprovalAnswer::Deny(req.reason.filter(|r| !r.trim().is_empty())),
        ("deny", Some(_)) => return Err(ApiError::bad_request("arguments: only with `approve`")),
        _ => return Err(ApiError::bad_request("decision: `approve` or `deny`")),
    };
    let run_id = id.split_once('/').map(|(r, _)| r).unwrap_or(&id).to_string();
    if crate::steer::local(&state, caller.tenant.id, &run_id).is_none() {
        // Another worker's run: only an approval it listed is queued for it.
        let tid = caller.tenant.id;
        let listed = state.db(move |s| s.approvals(tid)).await?;
        // A parked run's approval is checked against its checkpoint (the list shows the oldest 1,000).
        let rid = run_id.clone();
        let parked = || async {
            Ok::<_, ApiError>(state.db(move |s| s.run(tid, &rid)).await?.is_some_and(|r| r.status == "parked"))
        };
        if !listed.iter().any(|(_, a)| a["id"] == id.as_str()) && !parked().await? {
            return Err(ApiError::not_found("approval waiting for an answer"));
        }
    }
    let command = RunCommand::Answer { id: id.clone(), answer };
    Ok(Json(steer(&state, &caller.tenant, &run_id, command).await.map_err(|e| {
        if e.status == StatusCode::CONFLICT { ApiError::not_found("approval waiting for an answer") } else { e }
    })?))
}
