//! The operator's routes (tenants and their quotas) and a tenant's own
//! (its keys and usage).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Caller, Operator};
use crate::config::Quotas;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::keys::{TENANT_PREFIX, generate};
use crate::names::check_tenant_name;
use crate::routes::ApiJson;
use crate::state::AppState;
use crate::store::{KeyInfo, Role, Tenant};

/// `POST /v1/admin/tenants`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewTenant {
    /// `[a-z0-9-]`, 1–64 characters.
    pub name: String,
    /// Its quotas (default: the server's `default_quotas`).
    pub quotas: Option<Quotas>,
}

/// `POST /v1/keys`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewKey {
    /// `admin` or `member`.
    pub role: Role,
}

async fn tenant_view(state: &Arc<AppState>, t: &Tenant) -> ApiResult<Value> {
    let tid = t.id;
    let storage = state.db(move |s| s.plugin_storage(tid)).await?;
    let usage = state.usage(t.id);
    let (fuel, ms) = usage.this_minute();
    let day = crate::usage::today();
    let spend = state.db(move |s| s.spend(tid, &day)).await?;
    Ok(json!({
        "name": t.name,
        "created_at": t.created_at,
        "quotas": t.quotas,
        "usage": {
            "concurrent_runs": usage.runs.load(std::sync::atomic::Ordering::Acquire),
            "live_instances": usage.instances.load(std::sync::atomic::Ordering::Acquire),
            "fuel_per_minute": fuel,
            "hook_ms_per_minute": ms,
            "spend_per_day_usd": spend,
            "plugin_storage_bytes": storage,
        }
    }))
}

/// Makes a tenant and its first (admin) key; the key is shown only here.
pub async fn make_tenant(state: &Arc<AppState>, name: &str, quotas: Quotas) -> ApiResult<(Tenant, String)> {
    check_tenant_name(name).map_err(ApiError::bad_request)?;
    let key = generate(TENANT_PREFIX);
    let hash = state.hasher.hash(&key);
    let n = name.to_string();
    let tenant = state
        .db(move |s| {
            if s.tenant(&n)?.is_some() {
                return Ok(None);
            }
            let t = s.create_tenant(&n, &quotas)?;
            s.add_key(&hash, Some(t.id), Role::Admin)?;
            Ok(Some(t))
        })
        .await?
        .ok_or_else(|| ApiError::conflict(format!("tenant `{name}` exists")))?;
    Ok((tenant, key))
}

/// Every tenant with its quotas and usage.
#[utoipa::path(get, path = "/v1/admin/tenants", tag = "admin", security(("bearer" = [])),
    responses((status = 200, description = "tenants", body = Vec<Object>), (status = 401, body = ErrorBody)))]
pub async fn list_tenants(State(state): State<Arc<AppState>>, _op: Operator) -> ApiResult<Json<Value>> {
    let tenants = state.db(|s| s.tenants()).await?;
    let mut out = Vec::new();
    for t in &tenants {
        out.push(tenant_view(&state, t).await?);
    }
    Ok(Json(Value::Array(out)))
}

/// Makes a tenant; answers its admin key, shown only here.
#[utoipa::path(post, path = "/v1/admin/tenants", tag = "admin", security(("bearer" = [])), request_body = NewTenant,
    responses((status = 201, description = "`{tenant, key}`", body = Object), (status = 409, body = ErrorBody),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody)))]
pub async fn create_tenant(
    State(state): State<Arc<AppState>>,
    _op: Operator,
    ApiJson(req): ApiJson<NewTenant>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let quotas = req.quotas.unwrap_or(state.config.default_quotas);
    quotas.check().map_err(ApiError::bad_request)?;
    let (tenant, key) = make_tenant(&state, &req.name, quotas).await?;
    Ok((StatusCode::CREATED, Json(json!({"tenant": tenant, "key": key}))))
}

/// Replaces a tenant's quotas.
#[utoipa::path(put, path = "/v1/admin/tenants/{name}/quotas", tag = "admin", security(("bearer" = [])),
    params(("name" = String, Path)), request_body = Quotas,
    responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
pub async fn set_quotas(
    State(state): State<Arc<AppState>>,
    _op: Operator,
    Path(name): Path<String>,
    ApiJson(quotas): ApiJson<Quotas>,
) -> ApiResult<Json<Value>> {
    quotas.check().map_err(ApiError::bad_request)?;
    let tenant = state.db(move |s| s.tenant(&name)).await?.ok_or_else(|| ApiError::not_found("tenant"))?;
    let tid = tenant.id;
    state.db(move |s| s.set_quotas(tid, &quotas)).await?;
    state.keys.clear();
    state.invalidate(tid);
    let tenant = Tenant { quotas, ..tenant };
    Ok(Json(tenant_view(&state, &tenant).await?))
}

/// Makes another key for the caller's tenant (tenant admin only); the key is shown only here.
#[utoipa::path(post, path = "/v1/keys", tag = "tenant", security(("bearer" = [])), request_body = NewKey,
    responses((status = 201, body = Object), (status = 403, body = ErrorBody)))]
pub async fn create_key(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    ApiJson(req): ApiJson<NewKey>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    caller.require_admin("make keys")?;
    if req.role == Role::Operator {
        return Err(ApiError::bad_request("role: `admin` or `member`"));
    }
    let key = generate(TENANT_PREFIX);
    let hash = state.hasher.hash(&key);
    let tid = caller.tenant.id;
    state.db(move |s| s.add_key(&hash, Some(tid), req.role)).await?;
    Ok((StatusCode::CREATED, Json(json!({"key": key, "role": req.role}))))
}

/// The tenant's keys (tenant admin only): ids, roles, creation times; never the keys.
#[utoipa::path(get, path = "/v1/keys", tag = "tenant", security(("bearer" = [])),
    responses((status = 200, body = Vec<KeyInfo>), (status = 403, body = ErrorBody)))]
pub async fn list_keys(State(state): State<Arc<AppState>>, caller: Caller) -> ApiResult<Json<Vec<KeyInfo>>> {
    caller.require_admin("list keys")?;
    let tid = caller.tenant.id;
    Ok(Json(state.db(move |s| s.keys(Some(tid))).await?))
}

/// Revokes one of the tenant's keys by its id (tenant admin only); it stops working at once.
#[utoipa::path(delete, path = "/v1/keys/{id}", tag = "tenant", security(("bearer" = [])),
    params(("id" = String, Path, description = "the key's id, as GET /v1/keys lists it")),
    responses((status = 200, body = Object), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn revoke_key(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    caller.require_admin("revoke keys")?;
    let tid = caller.tenant.id;
    let i = id.clone();
    if !state.db(move |s| s.revoke_key(Some(tid), &i)).await? {
        return Err(ApiError::not_found("key"));
    }
    state.keys.clear();
    Ok(Json(json!({"revoked": id})))
}

/// The caller's tenant: its quotas and what it uses of them.
#[utoipa::path(get, path = "/v1/usage", tag = "tenant", security(("bearer" = [])),
    responses((status = 200, body = Object), (status = 401, body = ErrorBody)))]
pub async fn usage(State(state): State<Arc<AppState>>, caller: Caller) -> ApiResult<Json<Value>> {
    Ok(Json(tenant_view(&state, &caller.tenant).await?))
}
