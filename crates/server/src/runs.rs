//! Runs: `POST /v1/runs` starts an agent run of a tenant on a model of the
//! server's allow-list, in a fresh workspace, with the tenant's chain as it
//! is at that moment (a version activated later is used by later runs; this
//! one finishes on the versions it started with). Each run keeps its event
//! stream in memory while it runs ([`LiveRun`]) and in the store when it
//! ends, with its record, so `GET /v1/runs/{id}/events` can be resumed from
//! any event id, during the run or after it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hookbox::contract::Approval;
use hookbox::providers::model_from_spec_with;
use hookbox::providers::record::RecordingProvider;
use hookbox::{
    Agent, AgentConfig, DispatchTrace, Event, HookChain, LateInjectionPolicy, ModelConfig, RunJournal, Session,
    SessionOptions, StreamEvent, TraceSink, Workspace, workspace_tools,
};
use serde_json::{Value, json};

use crate::checkpoint::RunSpec;
use crate::durable::{DurableRun, SafePointsOf};
use crate::error::{ApiError, ApiResult};
use crate::flush::{flush_events, store_patiently};
use crate::hooks::PlanEntry;
use crate::hooks::{Meter, hooks};
use crate::live::LiveRun;
use crate::metrics::TenantWhat;
use crate::park::{Park, Wait};
use crate::state::AppState;
use crate::store::{RunRow, ServerStore, Tenant, unix_seconds};
use crate::usage::{Slots, today};

/// The longest session id a tenant may give, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = 128;

/// A pending approval as the API shows it.
pub fn approval_json(a: &Approval) -> Value {
    let arguments: Value = serde_json::from_str(&a.call.arguments).unwrap_or(Value::String(a.call.arguments.clone()));
    json!({
        "id": a.id, "run_id": a.run_id, "tool": a.call.name, "tool_call_id": a.call.id,
        "arguments": arguments, "reasons": a.reasons, "turn": a.turn, "iteration": a.iteration,
    })
}

/// Checks a tenant's session id and gives the stored one (`TENANT:ID`).
///
/// Errors: 400 for an empty id, one over [`MAX_SESSION_ID_BYTES`] or with control characters.
pub fn session_key(tenant: &Tenant, session: &str) -> ApiResult<String> {
    if session.is_empty() || session.len() > MAX_SESSION_ID_BYTES || session.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "session: 1 to {MAX_SESSION_ID_BYTES} bytes without control characters"
        )));
    }
    Ok(format!("{}:{session}", tenant.name))
}

/// What `POST /v1/runs` takes.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RunRequest {
    /// The user's prompt.
    pub prompt: String,
    /// A model name from the server's allow-list (`[models]` in server.toml).
    pub model: String,
    /// The plugins of the chain, in order (default: every plugin with an active version, by name).
    pub plugins: Option<Vec<String>>,
    /// The session (its conversation and hook state continue across runs); default: a new one per run.
    pub session: Option<String>,
    /// A system prompt.
    pub system: Option<String>,
}

/// Checks the tenant's daily model spend.
///
/// Errors: 429 `spend_per_day_usd` when it is spent.
pub async fn check_spend(state: &Arc<AppState>, tenant: &Tenant) -> ApiResult<()> {
    let (tid, day) = (tenant.id, today());
    let spent = state.db(move |s| s.spend(tid, &day)).await?;
    if spent >= tenant.quotas.spend_per_day_usd {
        return Err(ApiError::quota("spend_per_day_usd", tenant.quotas.spend_per_day_usd, spent));
    }
    Ok(())
}

/// A run `POST /v1/runs` took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// Its id (a UUID).
    pub run_id: String,
    /// True when it was queued in the database for any worker with room
    /// (status `queued`): this worker had no room for it (`worker_runs`),
    /// or runs it could start were waiting there before it.
    pub queued: bool,
}

/// Starts a run here, or queues it in a database workers share when this
/// worker has `worker_runs` runs already or runs wait there (`crate::queue`).
///
/// Errors: 503 while shutting down, and when this worker has no room and
/// its store queues no runs; 422 for a model not in the allow-list;
/// 400 for an empty prompt or a bad session id; 404 for an unknown plugin;
/// 429 over `concurrent_runs`, `live_instances`, `spend_per_day_usd`,
/// `fuel_per_minute`, `hook_ms_per_minute` or (a queued run) `parked_runs`.
pub async fn start(state: &Arc<AppState>, tenant: Tenant, req: RunRequest) -> ApiResult<Started> {
    if state.shutting_down() {
        return Err(ApiError::unavailable("the server is shutting down"));
    }
    if !state.config.models.contains_key(&req.model) {
        return Err(ApiError::unprocessable(format!(
            "model `{}` is not one this server runs (its operator lists them in [models])",
            req.model.escape_debug()
        )));
    }
    if req.prompt.trim().is_empty() {
        return Err(ApiError::bad_request("prompt: empty"));
    }
    let run_id = uuid::Uuid::new_v4().to_string();
    let session = req.session.clone().unwrap_or_else(|| run_id.clone());
    let session_key = session_key(&tenant, &session)?;
    let usage = state.usage(tenant.id);
    let run_slot = state
        .counted(&tenant, Slots::take(&usage, |u| &u.runs, 1, tenant.quotas.concurrent_runs, "concurrent_runs"))?;
    state.counted(&tenant, usage.check_minute(&tenant.quotas))?;
    state.counted(&tenant, check_spend(state, &tenant).await)?;
    let plan = state.plan(&tenant, req.plugins.as_deref()).await?;
    let instances = instance_count(&plan);
    let instance_slots = state.take_instances(&tenant, instances)?;
    let spec = RunSpec {
        prompt: req.prompt,
        system: req.system,
        model: req.model,
        plugins: plan.iter().map(|e| (e.name.clone(), e.version)).collect(),
        session_key,
    };
    let row = RunRow {
        run_id: run_id.clone(),
        status: "running".into(),
        model: spec.model.clone(),
        session,
        plugins: plan.iter().map(|e| format!("{}@{}", e.name, e.version)).collect(),
        created_at: unix_seconds(),
        record: None,
    };
    let room = match crate::queue::room(state) {
        Some(room) => room,
        // Its slots are given back when it is queued: the worker that claims it takes its own.
        None => match crate::queue::queue(state, &tenant, row.clone(), spec.clone()).await {
            Ok(()) => return Ok(Started { run_id, queued: true }),
            // Queued only to keep the queue's order, but the tenant may queue
            // no more: started here when this worker has a place.
            Err(e) if e.body.quota == Some("parked_runs") => state.room.take().ok_or(e)?,
            Err(e) => return Err(e),
        },
    };
    let rid = run_id.clone();
    let dir = tokio::task::spawn_blocking({
        let st = state.clone();
        move || crate::workspace::make_workspace(&st, &rid)
    })
    .await
    .map_err(ApiError::internal)?
    .map_err(ApiError::internal)?;
    let tid = tenant.id;
    // Until the run is in `state.runs`, it is no orphan.
    let _settling = crate::state::Settling::begin(state);
    // On a shared database, `concurrent_runs` is counted over every worker.
    let max_live = tenant.quotas.concurrent_runs;
    let stored = state.db(move |s| s.add_run_within(tid, &row, max_live)).await;
    if !matches!(stored, Ok(true)) {
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
        stored?;
        let limit = f64::from(max_live);
        return state.counted(&tenant, Err(ApiError::quota("concurrent_runs", limit, limit)));
    }
    let live = LiveRun::new(&tenant, run_id.clone());
    let slots = (run_slot, instance_slots);
    let workspace = dir.clone();
    let launched = Launch { tenant, live, plan, spec, dir, resume_from: None, counted_usd: 0.0, slots, room };
    if let Err(e) = launch(state, launched) {
        let (rid, record) = (run_id.clone(), json!({"error": {"kind": "start", "message": e.body.message}}));
        let _ = state.db(move |s| s.finish_run(&rid, crate::store::Claim::FIRST, "failed", Some(&record))).await;
        let _ = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(workspace)).await;
        return Err(e);
    }
    Ok(Started { run_id, queued: false })
}

/// What a run is started (or resumed) with.
pub struct Launch {
    /// Its tenant.
    pub tenant: Tenant,
    /// Its stream and handle.
    pub live: Arc<LiveRun>,
    /// Its chain.
    pub plan: Arc<Vec<PlanEntry>>,
    /// What it was started with.
    pub spec: RunSpec,
    /// Its workspace folder.
    pub dir: PathBuf,
    /// The checkpoint a parked run resumes from.
    pub resume_from: Option<hookbox::journal::Checkpoint>,
    /// Its model spend counted already (at its parks), in USD.
    pub counted_usd: f64,
    /// Its `concurrent_runs` and `live_instances` slots, held until it ends (or parks).
    pub slots: (Slots, Slots),
    /// Its place in this worker's `worker_runs`, held until it ends (or parks).
    pub room: crate::room::Room,
}

/// Starts the run's task. On a store that parks runs, the run is journaled
/// (so it can park at an approval), and a resumed one re-executes its
/// checkpoint first, adding no event to its stream while it does.
///
/// Errors: 422 for a model no longer in the allow-list; 500 for a workspace that does not open.
pub fn launch(state: &Arc<AppState>, l: Launch) -> ApiResult<()> {
    let Launch { tenant, live, plan, spec, dir, resume_from, counted_usd, slots, room } = l;
    let Some(model) = state.config.models.get(&spec.model) else {
        return Err(ApiError::unprocessable(format!("model `{}` is no longer one this server runs", spec.model)));
    };
    let mut provider = model_from_spec_with(model, ModelConfig::default().http_options(None))
        .map_err(|e| ApiError::internal(format!("model `{}`: {e}", spec.model)))?;
    let workspace = Workspace::open(&dir).map_err(ApiError::internal)?;
    let park = state.store.parks_runs().then(|| {
        let journal = resume_from.as_ref().map_or_else(RunJournal::recording, RunJournal::resuming);
        let responses = resume_from.map(|c| c.responses).unwrap_or_default();
        let recorder = Arc::new(RecordingProvider::resuming(provider.clone(), responses));
        provider = recorder.clone();
        // Crash recovery: the journal is stored at every safe point.
        let durable = DurableRun::new(
            state.store.clone(),
            live.clone(),
            &journal,
            recorder.clone(),
            (spec.clone(), counted_usd, state.config.journal_parts),
            dir.clone(),
        );
        if state.config.checkpoint_runs {
            journal.with_safe_points(Arc::new(SafePointsOf(durable.clone())));
            // An abort or an injection is written down at once, not at the next safe point.
            let weak = Arc::downgrade(&durable);
            live.on_change(Box::new(move || {
                if let (Some(d), Ok(rt)) = (weak.upgrade(), tokio::runtime::Handle::try_current()) {
                    rt.spawn_blocking(move || d.write_now());
                }
            }));
        } else {
            durable.halt();
        }
        let calls_wait = Duration::from_millis(tenant.quotas.max_deadline_ms.saturating_mul(2).saturating_add(1_000));
        let max_parked = tenant.quotas.parked_runs;
        Park { journal, recorder, spec: spec.clone(), dir, durable, max_parked, counted_usd, calls_wait }
    });
    state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(live.run_id.clone(), live.clone());
    let config = AgentConfig {
        system: spec.system.clone(),
        max_iterations: state.config.max_iterations,
        ..AgentConfig::default()
    };
    let meter = state.meter(tenant.clone());
    let sink_run = live.clone();
    let catching_up = park.as_ref().map(|p| (p.journal.clone(), p.recorder.clone()));
    // A resumed run's re-execution: its events are in the stream already.
    let re_executing =
        move || catching_up.as_ref().is_some_and(|(j, r)| j.catching_up() || r.catching_up() || j.stream_owed());
    if re_executing() {
        live.set_resuming(true);
    }
    let sink: TraceSink = Arc::new(move |event: &Event, trace: &DispatchTrace| {
        if re_executing() {
            return;
        }
        // What was given while it was parked first, then the commands of now.
        sink_run.apply_abort_after_resume();
        sink_run.set_resuming(false);
        trace_events(&sink_run, event, trace);
    });
    let mut agent = Agent::new(provider, workspace_tools(Arc::new(workspace)), config).with_trace(sink);
    let journal = park.as_ref().map(|p| p.journal.clone());
    if let Some(journal) = &journal {
        agent = agent.with_journal(journal.clone());
    }
    let mut chain = HookChain::new(hooks(&plan, &meter, journal.as_ref()));
    if let Some(journal) = journal {
        chain = chain.with_call_sink(journal);
    }
    let span = tracing::info_span!("run", tenant = %tenant.name, run = %live.run_id, model = %spec.model);
    let (session_key, prompt) = (spec.session_key.clone(), spec.prompt.clone());
    let task = RunTask { state: state.clone(), live, meter, park, _slots: (slots, room.used()) };
    tokio::spawn(tracing::Instrument::instrument(task.run(Arc::new(agent), chain, session_key, prompt), span));
    Ok(())
}

/// Instances a plan holds while it runs: one per plugin and one per shadow.
pub fn instance_count(plan: &[PlanEntry]) -> u32 {
    let n = plan.iter().map(|e| 1 + usize::from(e.shadow.is_some())).sum::<usize>();
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// The stream events of one event's dispatch: the event, then each directive and failure.
fn trace_events(live: &LiveRun, event: &Event, trace: &DispatchTrace) {
    live.push("hook-event", &hookbox::event_json(event));
    for d in &trace.directives {
        live.push(
            "directive",
            &json!({"plugin": d.plugin, "event": d.event, "iteration": d.iteration, "action": d.directive.action(),
                    "directive": d.directive, "honoured": d.honoured}),
        );
    }
    for f in &trace.failures {
        live.push(
            "hook-failure",
            &json!({"plugin": f.plugin, "event": f.event, "kind": f.kind.as_str(), "message": f.message}),
        );
    }
}

/// How often a run that can park checks whether it waits in a pause.
const PAUSE_CHECK_EVERY: Duration = Duration::from_millis(100);

/// A started run's task and what it holds until it ends (or parks).
struct RunTask {
    state: Arc<AppState>,
    live: Arc<LiveRun>,
    meter: Arc<Meter>,
    /// Set when the run can park (a store that parks runs).
    park: Option<Park>,
    _slots: ((Slots, Slots), crate::room::Room),
}

/// How a run's drive ended.
enum Driven {
    /// It ended: its status and record.
    Ended(&'static str, Value),
    /// It parked (its checkpoint and stream are stored; nothing more to store).
    Parked,
}

impl RunTask {
    async fn run(self, agent: Arc<Agent>, chain: HookChain, session_key: String, prompt: String) {
        // The stream is stored as it grows (every second), so a server that is
        // killed keeps the run's events up to then.
        let flusher = tokio::spawn(flush_events(self.state.clone(), self.live.clone()));
        let store = self.state.state_store.clone();
        let opened = tokio::task::spawn_blocking(move || {
            // One turn per run (its checkpoint covers one): late messages are undelivered, not a new turn.
            let late_injection_policy = LateInjectionPolicy::Surface;
            Session::open(
                agent,
                chain,
                &session_key,
                store,
                SessionOptions { late_injection_policy, max_follow_up_turns: 0 },
            )
        })
        .await;
        let (status, record) = match opened {
            Ok(Ok(session)) => match self.drive(session, prompt).await {
                Driven::Ended(status, record) => (status, record),
                Driven::Parked => {
                    if let Some(park) = &self.park {
                        let durable = park.durable.clone();
                        let _ = tokio::task::spawn_blocking(move || durable.settle()).await;
                    }
                    flusher.abort();
                    self.meter.flush();
                    // The checkpoint holds the workspace: this worker's copy goes.
                    if let Some(dir) = self.park.as_ref().map(|p| p.dir.clone()) {
                        let removed = tokio::task::spawn_blocking(move || std::fs::remove_dir_all(dir)).await;
                        if let Ok(Err(e)) = removed {
                            tracing::warn!(run = %self.live.run_id, "a parked run's workspace stays: {e}");
                        }
                    }
                    // Its events are stored: this worker's streams read on from the store.
                    self.live.mark_ended();
                    let mut runs = self.state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    // Unless it was resumed here already (then the entry is the resumed run's).
                    if runs.get(&self.live.run_id).is_some_and(|r| Arc::ptr_eq(r, &self.live)) {
                        runs.remove(&self.live.run_id);
                    }
                    return;
                }
            },
            Ok(Err(e)) => ("failed", json!({"error": {"kind": "session", "message": e.to_string()}})),
            Err(e) => ("failed", json!({"error": {"kind": "internal", "message": e.to_string()}})),
        };
        flusher.abort();
        self.finish(status, record).await;
    }

    /// Runs the session's turn; returns the status and the record, or that
    /// the run parked at an approval.
    async fn drive(&self, session: Session, prompt: String) -> Driven {
        let mut stream = session.stream(prompt, self.live.handle.clone());
        let mut last: Option<Value> = None;
        let park_after = Duration::from_millis(self.state.config.park_after_ms);
        // The approval the run may park on, and when.
        let mut waiting: Option<(Approval, Value, tokio::time::Instant)> = None;
        // The pause the run waits in, when it tries to park next, and the
        // wait after a try that failed (doubling from 1 s to 60 s).
        let mut paused_since: Option<(u64, tokio::time::Instant, Duration)> = None;
        loop {
            let event = match waiting.take() {
                Some((a, data, at)) => tokio::select! {
                    event = stream.next() => {
                        waiting = Some((a, data, at));
                        event
                    }
                    () = tokio::time::sleep_until(at) => {
                        if self.park_here(&a, &data).await {
                            stream.abandon().await;
                            return Driven::Parked;
                        }
                        continue;
                    }
                },
                // A run that can park checks now and then whether it waits in a pause.
                None if self.park.is_some() => tokio::select! {
                    event = stream.next() => event,
                    () = tokio::time::sleep(PAUSE_CHECK_EVERY) => {
                        match (self.live.handle.waiting_in_pause(), paused_since) {
                            (None, _) => paused_since = None,
                            (Some(id), Some((since_id, at, backoff))) if id == since_id => {
                                if tokio::time::Instant::now() >= at {
                                    if self.park_paused(id).await {
                                        stream.abandon().await;
                                        return Driven::Parked;
                                    }
                                    let next = (backoff * 2).min(Duration::from_secs(60));
                                    paused_since = Some((id, tokio::time::Instant::now() + backoff, next));
                                }
                            }
                            (Some(id), _) => {
                                let at = tokio::time::Instant::now() + park_after;
                                paused_since = Some((id, at, Duration::from_secs(1)));
                            }
                        }
                        continue;
                    }
                },
                None => stream.next().await,
            };
            let Some(event) = event else { break };
            match event {
                StreamEvent::Approval(a) => {
                    // An abort given while it was parked ends it here at the latest.
                    self.live.apply_abort_after_resume();
                    let data = approval_json(&a);
                    self.live.push("approval", &data);
                    self.live.push("status", &json!({"status": "waiting-approval"}));
                    if self.park.is_some() && park_after.is_zero() {
                        if self.park_here(&a, &data).await {
                            stream.abandon().await;
                            return Driven::Parked;
                        }
                    } else if self.park.is_some() {
                        waiting = Some((a.clone(), data.clone(), tokio::time::Instant::now() + park_after));
                    }
                    // Listed in the store too, so that every worker can answer it;
                    // patiently, beside the run, while the database is away.
                    let (state, tenant, run_id) = (self.state.clone(), self.live.tenant, self.live.run_id.clone());
                    let claim = self.live.claim;
                    tokio::spawn(async move {
                        let rid = run_id.clone();
                        let list = move |s: &dyn ServerStore| s.add_approval(tenant, (&rid, claim), &a.id, &data);
                        store_patiently(&state, &run_id, "approval", list).await;
                    });
                }
                StreamEvent::Error { message, aborted, .. } => {
                    self.live.push("error", &json!({"message": message, "aborted": aborted}));
                }
                StreamEvent::Complete { result, .. } => {
                    // The run's one turn ended: no more checkpoint writes. It stays
                    // stored until the record is (a crash before that resumes the
                    // turn, which completes again).
                    if let Some(park) = &self.park {
                        park.durable.halt();
                    }
                    last = Some(result.record_json());
                }
                _ => {}
            }
        }
        let record = last.unwrap_or(Value::Null);
        let status = match record["error"]["kind"].as_str() {
            None if record.is_null() => "failed",
            None => "completed",
            Some("aborted") => "aborted",
            Some(_) => "failed",
        };
        Driven::Ended(status, record)
    }

    /// Parks the run at approval `a` if it can park: nothing injected
    /// waiting, not paused, and the store takes it (see [`crate::park::park`]).
    async fn park_here(&self, a: &Approval, data: &Value) -> bool {
        let handle = &self.live.handle;
        match &self.park {
            Some(park) if handle.queued() == 0 && !handle.paused() && !self.live.is_aborting() => {
                crate::park::park(&self.state, &self.live, park, Wait::Approval(a, data)).await
            }
            _ => false,
        }
    }

    /// Parks the run waiting in pause `id` if it can park (as
    /// [`RunTask::park_here`]): a hook's `pause` directive or the API's pause.
    async fn park_paused(&self, id: u64) -> bool {
        match &self.park {
            Some(park) if self.live.handle.queued() == 0 && !self.live.is_aborting() => {
                crate::park::park(&self.state, &self.live, park, Wait::Pause(id)).await
            }
            _ => false,
        }
    }

    /// Stores the record and the events, counts the spend, and forgets the live run.
    async fn finish(self, status: &'static str, record: Value) {
        if let Some(park) = &self.park {
            let durable = park.durable.clone();
            let _ = tokio::task::spawn_blocking(move || durable.settle()).await;
        }
        let status = if status == "aborted" && self.state.shutting_down() { "interrupted" } else { status };
        self.live.mark_closing();
        self.live.push("end", &json!({"status": status, "record": record}));
        self.meter.flush();
        // Less what its parks counted already.
        let counted = self.park.as_ref().map_or(0.0, |p| p.counted_usd);
        let cost = record["usage"]["cost"].as_f64().unwrap_or(0.0) - counted;
        let events = Arc::new(self.live.events_after(0, usize::MAX));
        let record = Arc::new(record);
        let (run_id, tenant, claim) = (self.live.run_id.clone(), self.live.tenant, self.live.claim);
        let stored = store_patiently(&self.state, &run_id, "record", {
            let (events, record, run_id) = (events.clone(), record.clone(), run_id.clone());
            move |s| {
                s.add_run_events(&run_id, claim, &events)?;
                s.finish_run(&run_id, claim, status, Some(&record))
            }
        })
        .await;
        if !stored {
            // Its row stays live and this worker's: not an orphan to resume (it ended).
            self.state.mark_unstored(&run_id);
        }
        // A run fenced off this worker may be another worker's now: its approvals are that one's.
        if stored {
            let rid = run_id.clone();
            store_patiently(&self.state, &run_id, "approvals", move |s| s.remove_approvals((&rid, claim), None)).await;
        }
        // The model was paid for even if the record was fenced off or lost.
        if cost > 0.0 {
            let day = today();
            store_patiently(&self.state, &run_id, "spend", move |s| s.add_spend(tenant, &day, cost)).await;
        }
        let tenant = self.live.tenant_name.clone();
        self.state.metrics.runs.get_or_create(&TenantWhat { tenant, what: status.into() }).inc();
        self.live.mark_ended();
        let mut runs = self.state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // Unless the run was resumed here since (then the entry is the resumed run's).
        if runs.get(&self.live.run_id).is_some_and(|r| Arc::ptr_eq(r, &self.live)) {
            runs.remove(&self.live.run_id);
        }
    }
}
