//! `POST /v1/evaluate`: the sidecar for agent frameworks with their own
//! loop. One event, in the run record's event shape, goes through the
//! tenant's chain (its active versions, shadows included) as a run would
//! dispatch it; the answer is every hook's directive and the chain's
//! decision after the chain rules. Hook state is kept per session: the
//! hooks read and save it under the tenant's session, as a run's would.

use std::sync::Arc;

use hookbox::contract::EventContext;
use hookbox::sandbox::Decision;
use hookbox::{DispatchTrace, Event, HookChain};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult};
use crate::eval_cache::KeptChain;
use crate::hooks::PlanEntry;
use crate::hooks::hooks;
use crate::metrics::TenantLabels;
use crate::runs::{instance_count, session_key};
use crate::state::AppState;
use crate::store::Tenant;

/// What `POST /v1/evaluate` takes.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateRequest {
    /// The session: hook state is kept per (session, plugin).
    pub session_id: String,
    /// One event, as a run record lists it: `{"type": "before-tool-call", "iteration": 1, "call": {...}}`.
    #[schema(value_type = Object)]
    pub event: Value,
    /// Where the event happens (default: turn 1, the event's iteration, 10 iterations at most, no retries).
    pub context: Option<ContextIn>,
    /// The plugins to ask, in order (default: every plugin with an active version, by name).
    pub plugins: Option<Vec<String>>,
}

/// The event context a caller may give.
#[derive(Debug, Clone, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ContextIn {
    /// The caller's run id (default `evaluate`).
    pub run_id: Option<String>,
    /// The turn, 1-based.
    pub turn: Option<u32>,
    /// The iteration limit.
    pub max_iterations: Option<u32>,
    /// Retries so far.
    pub retries: Option<u32>,
}

/// The most bytes of a caller's run id.
const MAX_RUN_ID_BYTES: usize = 128;

/// Evaluates one event through the tenant's chain.
///
/// Errors: 400 for an event that is not one of the contract's or a bad
/// session id; 404 for an unknown plugin; 429 over `live_instances`,
/// `fuel_per_minute` or `hook_ms_per_minute`.
pub async fn evaluate(state: &Arc<AppState>, tenant: Tenant, req: EvaluateRequest) -> ApiResult<Value> {
    let span = tracing::debug_span!("evaluate", tenant = %tenant.name, session = %req.session_id.escape_debug());
    tracing::Instrument::instrument(evaluate_in(state, tenant, req), span).await
}

async fn evaluate_in(state: &Arc<AppState>, tenant: Tenant, req: EvaluateRequest) -> ApiResult<Value> {
    let event: Event = serde_json::from_value(req.event).map_err(|e| ApiError::bad_request(format!("event: {e}")))?;
    let (event, decision, trace) =
        decide(state, &tenant, &req.session_id, event, req.context.unwrap_or_default(), req.plugins.as_deref()).await?;
    Ok(answer(&event, &decision, &trace))
}

/// Dispatches `event` through the tenant's chain for session `session_id`
/// (the caller's text; the state key is the tenant's), keeping the session's
/// chain between calls. Returns the event as dispatched (a `run-start` gets
/// the tenant's session and the run id), the decision and the trace.
///
/// Errors: as [`evaluate`].
pub(crate) async fn decide(
    state: &Arc<AppState>,
    tenant: &Tenant,
    session_id: &str,
    mut event: Event,
    ctx: ContextIn,
    plugins: Option<&[String]>,
) -> ApiResult<(Event, Decision, DispatchTrace)> {
    let session = session_key(tenant, session_id)?;
    let run_id = ctx.run_id.unwrap_or_else(|| "evaluate".into());
    if run_id.len() > MAX_RUN_ID_BYTES || run_id.chars().any(char::is_control) {
        return Err(ApiError::bad_request(format!(
            "context.run_id: at most {MAX_RUN_ID_BYTES} bytes, no control characters"
        )));
    }
    // A guard must read the arguments the loop will run with: text that is not a JSON
    // object (within serde_json's nesting limit) could be read otherwise by the caller.
    let arguments: Vec<&str> = match &event {
        Event::ToolCallStart { call, .. } | Event::BeforeToolCall { call, .. } => vec![call.arguments.as_str()],
        Event::ToolCallResult { arguments, .. } if !arguments.is_empty() => vec![arguments.as_str()],
        Event::ModelResponse { tool_calls, .. } => tool_calls.iter().map(|c| c.arguments.as_str()).collect(),
        _ => Vec::new(),
    };
    if arguments.iter().any(|a| !matches!(serde_json::from_str::<Value>(a), Ok(Value::Object(_)))) {
        return Err(ApiError::bad_request(
            "event: a tool call's arguments must be a JSON object in text, as the model sent it",
        ));
    }
    // The state a hook reads is keyed by the session of `run-start`: never the caller's text.
    if let Event::RunStart { session_id, run_id: rid, .. } = &mut event {
        *session_id = session.clone();
        *rid = run_id.clone();
    }
    // Waits for a slot, fairly shared between tenants.
    let _ticket = state.gate.enter(tenant.id).await;
    state.counted(tenant, state.usage(tenant.id).check_minute(&tenant.quotas))?;
    let plan = state.plan(tenant, plugins).await?;
    state.metrics.evaluations.get_or_create(&TenantLabels { tenant: tenant.name.clone() }).inc();
    let context = EventContext {
        run_id,
        session_id: session.clone(),
        turn: ctx.turn.unwrap_or(1).max(1),
        iteration: event.iteration().unwrap_or(0),
        max_iterations: ctx.max_iterations.unwrap_or(10),
        retries: ctx.retries.unwrap_or(0),
    };
    // The session's kept chain; calls of one session run one at a time.
    let slot = state.eval_cache.slot(tenant.id, &session, plugins);
    let mut kept = slot.lock().await;
    if !kept.as_ref().is_some_and(|k| same_plan(&k.plan, &plan)) {
        // Its instances go back before new ones are taken.
        *kept = None;
        let slots = state.take_instances(tenant, instance_count(&plan))?;
        let meter = state.meter(tenant.clone());
        let mut hooks = hooks(&plan, &meter, None);
        for hook in &mut hooks {
            hook.run_started(&session);
        }
        *kept = Some(KeptChain { chain: HookChain::new(hooks), plan: plan.clone(), meter, _slots: slots });
    }
    let Some(k) = kept.as_mut() else { return Err(ApiError::internal("no chain")) };
    let mut trace = DispatchTrace::default();
    let decision = k.chain.dispatch(&event, &context, &mut trace).await;
    // Observe-only calls run detached: wait for them, so their state is saved.
    k.chain.drain(&mut trace).await;
    k.meter.flush();
    Ok((event, decision, trace))
}

/// True when two plans hold the same compiled versions in the same order.
fn same_plan(a: &[PlanEntry], b: &[PlanEntry]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            Arc::ptr_eq(&x.plugin, &y.plugin)
                && match (&x.shadow, &y.shadow) {
                    (Some((_, p)), Some((_, q))) => Arc::ptr_eq(p, q),
                    (None, None) => true,
                    _ => false,
                }
        })
}

/// The answer: each hook's directive and failure, the decision, and the
/// effective verdict (what a loop should do).
fn answer(event: &Event, decision: &Decision, trace: &DispatchTrace) -> Value {
    let directives: Vec<Value> = trace
        .directives
        .iter()
        .map(|d| json!({"plugin": d.plugin, "action": d.directive.action(), "directive": d.directive, "honoured": d.honoured, "note": d.note}))
        .collect();
    let failures: Vec<Value> = trace
        .failures
        .iter()
        .map(|f| json!({"plugin": f.plugin, "kind": f.kind.as_str(), "message": f.message, "fuel_used": f.fuel_used, "duration_us": f.duration_us}))
        .collect();
    let logs: Vec<Value> =
        trace.logs.iter().map(|l| json!({"plugin": l.plugin, "level": l.level, "message": l.message})).collect();
    let verdict = match &decision.terminal {
        Some(d) => d.action(),
        None if !decision.approvals.is_empty() => "ask-approval",
        None if decision.retry.is_some() => "retry",
        None if decision.pause => "pause",
        None => "continue",
    };
    let arguments = match (event, &decision.replace_arguments) {
        (_, Some(args)) => Some(args.clone()),
        (Event::BeforeToolCall { call, .. }, None) => Some(call.arguments.clone()),
        _ => None,
    };
    json!({
        "verdict": verdict,
        "terminal": decision.terminal,
        "arguments": arguments,
        "replace_arguments": decision.replace_arguments,
        "replace_result": decision.replace_result,
        "replace_content": decision.replace_content,
        "replace_user_content": decision.replace_user_content,
        "inject": decision.injections,
        "approvals": decision.approvals,
        "retry": decision.retry,
        "pause": decision.pause,
        "posts": decision.posts.iter().map(|(p, to, text)| json!({"plugin": p, "to": to, "text": text})).collect::<Vec<_>>(),
        "directives": directives,
        "failures": failures,
        "logs": logs,
    })
}
