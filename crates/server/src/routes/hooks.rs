//! The agents' http hooks: `POST /v1/hooks/{format}` and its Claude Code
//! alias `POST /v1/claude-code` (docs/agents.md).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use hookbox_agents::Format;
use serde::Deserialize;
use serde_json::Value;

use crate::agent_hooks::agent_hook;
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::state::AppState;

/// The query of an agent hook call.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct HookQuery {
    /// The plugins to ask, comma-separated, in order (default: every plugin with an active version).
    pub plugins: Option<String>,
    /// `closed`: when the hooks cannot be asked (an unknown plugin, a quota), answer 200 with a
    /// denial of the tool call or prompt instead of an error status (which the agents let pass).
    pub fail: Option<String>,
}

impl HookQuery {
    fn fail_closed(&self) -> ApiResult<bool> {
        match self.fail.as_deref() {
            None | Some("open") => Ok(false),
            Some("closed") => Ok(true),
            Some(_) => Err(ApiError::bad_request("fail: `open` or `closed`")),
        }
    }
}

/// One agent hook call: the body is the agent's hook input as it sends it,
/// the answer the JSON it reads back (docs/agents.md has the mapping).
#[utoipa::path(post, path = "/v1/hooks/{format}", tag = "agents", security(("bearer" = [])),
    params(("format" = String, Path, description = "claude-code, codex, gemini or cursor"), HookQuery),
    request_body(content = Object, description = "the agent's hook input JSON"),
    responses((status = 200, description = "the JSON the agent reads from a hook", body = Object),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn hook(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(format): Path<String>,
    Query(query): Query<HookQuery>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let format: Format =
        format.parse().map_err(|_| ApiError::not_found("hook format (claude-code, codex, gemini or cursor)"))?;
    answer(&state, &caller, format, &query, &body).await
}

async fn answer(
    state: &Arc<AppState>,
    caller: &Caller,
    format: Format,
    query: &HookQuery,
    body: &[u8],
) -> ApiResult<Json<Value>> {
    let reply =
        agent_hook(state, caller.tenant.clone(), format, body, query.plugins.as_deref(), query.fail_closed()?).await?;
    Ok(Json(reply.json))
}

/// Claude Code's http hook: the same as `POST /v1/hooks/claude-code`.
#[utoipa::path(post, path = "/v1/claude-code", tag = "agents", security(("bearer" = [])), params(HookQuery),
    request_body(content = Object, description = "Claude Code's hook input JSON"),
    responses((status = 200, description = "Claude Code's hook output JSON", body = Object),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn claude_code(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Query(query): Query<HookQuery>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    answer(&state, &caller, Format::ClaudeCode, &query, &body).await
}
