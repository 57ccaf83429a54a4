//! The HTTP routes ([`router`]) and the OpenAPI document generated from
//! their annotations ([`ApiDoc`]). Every `/v1/` body is JSON (an upload is
//! multipart) with unknown fields refused; every error is an
//! [`ErrorBody`].

pub mod admin;
pub mod hooks;
pub mod plugins;
pub mod runs;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{delete, get, post, put};
use axum::{Json, Router};
use serde_json::Value;
use tower_http::timeout::TimeoutLayer;
use utoipa::OpenApi;

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::evaluate::{EvaluateRequest, evaluate};
use crate::state::AppState;

/// A JSON body whose rejections are [`ApiError`]s: 400 for malformed JSON,
/// wrong types or unknown fields, 413 over the size limit, 415 without
/// `Content-Type: application/json`.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: serde::de::DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(ApiJson(v)),
            Err(JsonRejection::MissingJsonContentType(_)) => {
                let mut e = ApiError::bad_request("send the body as Content-Type: application/json");
                e.status = StatusCode::UNSUPPORTED_MEDIA_TYPE;
                e.body.error = "unsupported_media_type";
                Err(e)
            }
            Err(JsonRejection::BytesRejection(e)) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(ApiError::too_large("the body is over the server's limit for JSON requests"))
            }
            Err(JsonRejection::BytesRejection(e)) if body_timed_out(&e) => Err(ApiError::timeout()),
            Err(e) => Err(ApiError::bad_request(e.body_text())),
        }
    }
}

/// True when reading the body failed because it did not arrive within
/// `request_timeout_ms` (tower-http's body timeout, somewhere in the error's sources).
pub fn body_timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// The OpenAPI document of every route.
#[derive(OpenApi)]
#[openapi(
    info(title = "Hookbox", description = "Hookbox as a multi-tenant service: tenants, a plugin registry, runs, approvals, evaluate and agents' http hooks (docs/server.md, docs/agents.md)."),
    paths(
        healthz, readyz, openapi_json, metrics, console, evaluate_route,
        admin::list_tenants, admin::create_tenant, admin::set_quotas, admin::create_key, admin::list_keys,
        admin::revoke_key, admin::usage,
        plugins::upload, plugins::list, plugins::get_version, plugins::approve, plugins::activate,
        plugins::shadow, plugins::stop_shadow, plugins::shadow_records,
        runs::create, runs::list, runs::get, runs::pause, runs::resume, runs::abort, runs::inject,
        runs::events, runs::list_approvals, runs::answer, hooks::hook, hooks::claude_code,
    ),
    components(schemas(
        ErrorBody, crate::config::Quotas, admin::NewTenant, admin::NewKey, crate::store::Role,
        crate::store::PluginVersion, crate::store::VersionStatus, crate::store::RunRow, crate::store::ShadowRecord,
        crate::registry::UploadManifest, crate::registry::CapabilityDiff, crate::runs::RunRequest,
        runs::AbortRequest, runs::InjectRequest, runs::ApprovalRequest, EvaluateRequest, crate::evaluate::ContextIn,
    )),
    modifiers(&BearerAuth),
)]
pub struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Liveness.
#[utoipa::path(get, path = "/healthz", tag = "service", responses((status = 200, body = Object)))]
pub async fn healthz(State(state): State<Arc<AppState>>) -> Json<Value> {
    let status = if state.shutting_down() { "shutting-down" } else { "ok" };
    Json(serde_json::json!({"status": status}))
}

/// Readiness, for a load balancer: 200 while the server takes requests
/// and its database answers (within 2 s); 503 while it shuts down or the
/// database cannot be reached (`/healthz` stays 200 then: the process lives).
/// The database's answer is reused for 1 s, with one probe in flight at
/// most (`crate::readiness`): the route needs no key, so its rate must not
/// be the database's.
#[utoipa::path(get, path = "/readyz", tag = "service",
    responses((status = 200, body = Object), (status = 503, body = Object)))]
pub async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let unready = |status: &str| (StatusCode::SERVICE_UNAVAILABLE, Json(serde_json::json!({"status": status})));
    if state.shutting_down() {
        return unready("shutting-down").into_response();
    }
    let db = state.clone();
    let probe = move || async move { db.db(|s| s.has_operator_key()).await.is_ok() };
    if state.readiness.check(probe).await {
        Json(serde_json::json!({"status": "ready"})).into_response()
    } else {
        unready("database-unavailable").into_response()
    }
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "service", responses((status = 200, body = Object)))]
pub async fn openapi_json() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}

/// Prometheus metrics (text exposition format); the operator key only (they name every tenant and plugin).
#[utoipa::path(get, path = "/metrics", tag = "service", security(("bearer" = [])),
    responses((status = 200, description = "text/plain; version=0.0.4", content_type = "text/plain"),
        (status = 401, body = ErrorBody)))]
pub async fn metrics(State(state): State<Arc<AppState>>, _op: crate::auth::Operator) -> Response {
    // Gauges are read off the live runs when scraped.
    let runs: Vec<_> = state.runs.lock().unwrap_or_else(std::sync::PoisonError::into_inner).values().cloned().collect();
    state.metrics.runs_in_flight.clear();
    state.metrics.approvals_waiting.clear();
    for run in runs.iter().filter(|r| !r.ended()) {
        let labels = crate::metrics::TenantLabels { tenant: run.tenant_name.clone() };
        state.metrics.runs_in_flight.get_or_create(&labels).inc();
        let waiting = i64::try_from(run.handle.approvals().len()).unwrap_or(i64::MAX);
        state.metrics.approvals_waiting.get_or_create(&labels).inc_by(waiting);
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.metrics.render()).into_response()
}

/// The operator console: one HTML page that uses this API.
#[utoipa::path(get, path = "/", tag = "service", responses((status = 200, content_type = "text/html")))]
pub async fn console() -> Response {
    (
        [
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::X_FRAME_OPTIONS, "DENY"),
        ],
        Html(include_str!("../console.html")),
    )
        .into_response()
}

/// The tenant's chain's decision on one event (the sidecar for agent frameworks; docs/server.md, "Evaluate").
#[utoipa::path(post, path = "/v1/evaluate", tag = "evaluate", security(("bearer" = [])), request_body = EvaluateRequest,
    responses((status = 200, description = "the decision: verdict, directives, failures, replacements", body = Object),
        (status = 400, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn evaluate_route(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiJson(req): ApiJson<EvaluateRequest>,
) -> ApiResult<Json<Value>> {
    Ok(Json(evaluate(&state, caller.tenant.clone(), req).await?))
}

/// Every request in a span with its method and route (the matched
/// pattern, so ids and names stay out of the span name).
async fn request_span(req: Request, next: axum::middleware::Next) -> Response {
    let route = req
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let span = tracing::debug_span!("request", method = %req.method(), route = %route);
    tracing::Instrument::instrument(next.run(req), span).await
}

async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

/// How long an upload may take from its first byte to its answer (the
/// body, validation, the compile in its worker and the trial call).
pub const UPLOAD_DEADLINE: Duration = Duration::from_secs(300);

/// `Keep-Alive`: how long the server keeps an idle connection open.
const KEEP_ALIVE: header::HeaderName = header::HeaderName::from_static("keep-alive");

/// The `Keep-Alive: timeout=N` hint of every answer: hyper times the wait
/// for a connection's next request from the end of its last answer, so an
/// idle connection is closed after `header_timeout_ms`. A pooled client
/// that sends on it as it closes gets a reset; one that honours the hint
/// (undici does; reqwest needs `pool_idle_timeout`) drops it first. `N` is
/// in whole seconds, rounded down; `None` under one second.
fn keep_alive_hint(header_timeout_ms: u64) -> Option<header::HeaderValue> {
    let secs = header_timeout_ms / 1000;
    if secs == 0 {
        return None;
    }
    header::HeaderValue::from_str(&format!("timeout={secs}")).ok()
}

/// Every route, with the body limits and deadlines of `state.config.http`:
/// each request's body must keep arriving (`request_timeout_ms` between
/// bytes at most) and the whole request must be answered within
/// `request_timeout_ms` ([`UPLOAD_DEADLINE`] for an upload); an event
/// stream is bounded by its run, not by these.
pub fn router(state: Arc<AppState>) -> Router {
    let http = state.config.http;
    let deadline = Duration::from_millis(http.request_timeout_ms);
    let keep_alive = keep_alive_hint(http.header_timeout_ms);
    let uploads = Router::new()
        .route("/v1/plugins/{name}/versions", post(plugins::upload))
        .layer(DefaultBodyLimit::max(http.max_upload_bytes))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, UPLOAD_DEADLINE));
    let api = Router::new()
        .route("/", get(console))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi_json))
        .route("/metrics", get(metrics))
        .route("/v1/admin/tenants", get(admin::list_tenants).post(admin::create_tenant))
        .route("/v1/admin/tenants/{name}/quotas", put(admin::set_quotas))
        .route("/v1/keys", get(admin::list_keys).post(admin::create_key))
        .route("/v1/keys/{id}", delete(admin::revoke_key))
        .route("/v1/usage", get(admin::usage))
        .route("/v1/plugins", get(plugins::list))
        .route("/v1/plugins/{name}/versions/{version}", get(plugins::get_version))
        .route("/v1/plugins/{name}/versions/{version}/approve", post(plugins::approve))
        .route("/v1/plugins/{name}/versions/{version}/activate", post(plugins::activate))
        .route("/v1/plugins/{name}/versions/{version}/shadow", post(plugins::shadow))
        .route("/v1/plugins/{name}/shadow", get(plugins::shadow_records).merge(delete(plugins::stop_shadow)))
        .route("/v1/runs", get(runs::list).post(runs::create))
        .route("/v1/runs/{id}", get(runs::get))
        .route("/v1/runs/{id}/pause", post(runs::pause))
        .route("/v1/runs/{id}/resume", post(runs::resume))
        .route("/v1/runs/{id}/abort", post(runs::abort))
        .route("/v1/runs/{id}/inject", post(runs::inject))
        .route("/v1/approvals", get(runs::list_approvals))
        .route("/v1/approvals/{*id}", post(runs::answer))
        .route("/v1/evaluate", post(evaluate_route))
        .layer(DefaultBodyLimit::max(http.max_json_bytes))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, deadline));
    // An agent's hook input carries a tool's whole result: its own body limit.
    let agent_hooks = Router::new()
        .route("/v1/hooks/{format}", post(hooks::hook))
        .route("/v1/claude-code", post(hooks::claude_code))
        .layer(DefaultBodyLimit::max(hookbox_agents::MAX_INPUT_BYTES.max(http.max_json_bytes)))
        .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, deadline));
    // The event stream's handler answers at once; its body lasts as long as the run.
    let streams = Router::new().route("/v1/runs/{id}/events", get(runs::events));
    Router::new()
        .merge(uploads)
        .merge(api)
        .merge(agent_hooks)
        .merge(streams)
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::map_response(move |mut response: Response| {
            let hint = keep_alive.clone();
            async move {
                if let Some(hint) = hint {
                    response.headers_mut().entry(KEEP_ALIVE).or_insert(hint);
                }
                response
            }
        }))
        .layer(axum::middleware::from_fn(request_span))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(deadline))
        .with_state(state)
}

async fn method_not_allowed() -> ApiError {
    let mut e = ApiError::bad_request("this route does not take that method (see /openapi.json)");
    e.status = StatusCode::METHOD_NOT_ALLOWED;
    e.body.error = "method_not_allowed";
    e
}

/// The most bytes of a framework rejection's text kept in an error's message.
const MAX_REJECTION_TEXT: usize = 300;

/// Gives every error answer the [`ErrorBody`] shape: axum's own rejections
/// (a path that does not parse, a multipart body without a boundary, a
/// timeout) come as plain text or empty; their text is kept, cut and
/// cleaned of control characters.
async fn json_errors(req: Request, next: axum::middleware::Next) -> Response {
    let response = next.run(req).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let text = match axum::body::to_bytes(response.into_body(), 64 * 1024).await {
        Ok(bytes) => {
            String::from_utf8_lossy(&bytes).chars().filter(|c| !c.is_control()).take(MAX_REJECTION_TEXT).collect()
        }
        Err(_) => String::new(),
    };
    let code = match status {
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::REQUEST_TIMEOUT => "timeout",
        StatusCode::PAYLOAD_TOO_LARGE => "too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::TOO_MANY_REQUESTS => "too_many_requests",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    };
    let message = if text.is_empty() { status.canonical_reason().unwrap_or("error").to_string() } else { text };
    let body = ErrorBody { error: code, message, quota: None, limit: None, used: None };
    (status, Json(body)).into_response()
}
