//! `POST /v1/hooks/{format}` (and `/v1/claude-code`): the http hook for
//! agents that call hooks themselves. The body is the agent's hook input as
//! it sends it; `hookbox_agents` maps it onto Hookbox events, the tenant's
//! chain decides each through [`crate::evaluate::decide`] (the agent's
//! session id is the Hookbox session, so hook state persists across its
//! events), and the answer is the JSON that agent reads from a hook.

use std::sync::Arc;

use hookbox::sandbox::Decision;
use hookbox_agents::{Format, Reply};

use crate::error::{ApiError, ApiResult};
use crate::evaluate::{ContextIn, decide};
use crate::state::AppState;
use crate::store::Tenant;

/// The most plugins a `?plugins=` list names.
const MAX_PLUGINS: usize = 64;

/// Answers one agent hook call: `body` in `format`, through `plugins`
/// (comma-separated names; default every plugin with an active version).
/// With `fail_closed`, a call whose input was read but whose chain could
/// not be asked (an unknown plugin, a quota, a bad plugin list) is answered
/// 200 with the agent's denial of a tool call or prompt, since the agents
/// let a tool run on any error status.
///
/// Errors: 400 for a body that is not that agent's hook input or a bad
/// plugin list; otherwise as `POST /v1/evaluate`.
pub async fn agent_hook(
    state: &Arc<AppState>,
    tenant: Tenant,
    format: Format,
    body: &[u8],
    plugins: Option<&str>,
    fail_closed: bool,
) -> ApiResult<Reply> {
    let event = hookbox_agents::parse(format, body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    match ask_chain(state, tenant, &event, plugins).await {
        Err(e) if fail_closed => {
            let reason = format!("hookbox could not ask the hooks ({}): {}", e.body.error, e.body.message);
            Ok(hookbox_agents::failure_answer(&event, &reason, true))
        }
        other => other,
    }
}

async fn ask_chain(
    state: &Arc<AppState>,
    tenant: Tenant,
    event: &hookbox_agents::AgentEvent,
    plugins: Option<&str>,
) -> ApiResult<Reply> {
    let plugins: Option<Vec<String>> = plugins.map(|p| p.split(',').map(str::trim).map(String::from).collect());
    if plugins.as_ref().is_some_and(|p| p.len() > MAX_PLUGINS || p.iter().any(String::is_empty)) {
        return Err(ApiError::bad_request(format!("plugins: 1 to {MAX_PLUGINS} names, comma-separated")));
    }
    let span = tracing::debug_span!("agent_hook", tenant = %tenant.name, format = %event.format, event = %event.name.escape_debug());
    let ctx = ContextIn { run_id: Some(event.session_id.clone()), ..ContextIn::default() };
    let work = async {
        let mut answer_to: Option<Decision> = None;
        for e in &event.events {
            let (_, decision, _) =
                decide(state, &tenant, &event.session_id, e.clone(), ctx.clone(), plugins.as_deref()).await?;
            // The first event's decision is the answer; the later ones
            // (`run-end` after `final-answer`) are observed, and only when
            // the first lets the agent stop.
            let stops = hookbox_agents::settles(&decision);
            answer_to.get_or_insert(decision);
            if stops {
                break;
            }
        }
        Ok(hookbox_agents::answer(event, &answer_to.unwrap_or_default()))
    };
    tracing::Instrument::instrument(work, span).await
}
