//! The plugin registry's routes: upload a version, read its report,
//! approve its capability diff, activate it (or roll back to an earlier
//! one), and run a candidate in shadow.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use hookbox::sandbox::PluginSource;
use serde_json::{Value, json};

use crate::auth::Caller;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::names::check_plugin_name;
use crate::registry::{UploadManifest, diff, trial_call};
use crate::state::AppState;
use crate::store::{NewVersion, PluginVersion, VersionStatus};

/// The largest `manifest` part, in bytes.
const MAX_MANIFEST_BYTES: usize = 1 << 20;

fn imports_of(report: &Value) -> Vec<String> {
    report["imports"].as_array().into_iter().flatten().filter_map(|i| i["name"].as_str().map(String::from)).collect()
}

/// The upload's parts: the manifest and the component's bytes. When a part
/// is refused, the rest of the body is still read (within the body limit and
/// the request's deadline, keeping nothing), so that the client, which is
/// still sending, gets the answer instead of a closed connection.
async fn read_parts(mut form: Multipart, max_component: u64) -> ApiResult<(UploadManifest, Vec<u8>)> {
    match read_parts_in(&mut form, max_component).await {
        Ok(parts) => Ok(parts),
        Err(e) => {
            if e.status != StatusCode::PAYLOAD_TOO_LARGE && e.status != StatusCode::REQUEST_TIMEOUT {
                drain(form).await;
            }
            Err(e)
        }
    }
}

/// Reads the rest of a multipart body and keeps nothing (within the body
/// limit and the request's deadline).
async fn drain(mut form: Multipart) {
    while let Ok(Some(mut field)) = form.next_field().await {
        while let Ok(Some(_)) = field.chunk().await {}
    }
}

async fn read_parts_in(form: &mut Multipart, max_component: u64) -> ApiResult<(UploadManifest, Vec<u8>)> {
    let mut manifest: Option<UploadManifest> = None;
    let mut component: Option<Vec<u8>> = None;
    let bad = |e: axum::extract::multipart::MultipartError| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::too_large("the upload is over the server's max_upload_bytes")
        } else if crate::routes::body_timed_out(&e) {
            ApiError::timeout()
        } else {
            ApiError::bad_request(format!("multipart body: {}", e.body_text()))
        }
    };
    while let Some(mut field) = form.next_field().await.map_err(bad)? {
        match field.name() {
            Some("manifest") if manifest.is_none() => {
                let mut text = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    if text.len() + chunk.len() > MAX_MANIFEST_BYTES {
                        return Err(ApiError::too_large(format!("manifest: over {MAX_MANIFEST_BYTES} bytes")));
                    }
                    text.extend_from_slice(&chunk);
                }
                manifest =
                    Some(serde_json::from_slice(&text).map_err(|e| ApiError::bad_request(format!("manifest: {e}")))?);
            }
            Some("component") if component.is_none() => {
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    if (bytes.len() + chunk.len()) as u64 > max_component {
                        return Err(ApiError::too_large(format!(
                            "component: over the server's {max_component}-byte limit"
                        )));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                component = Some(bytes);
            }
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "multipart part `{}`: expected one `component` and at most one `manifest`",
                    other.escape_debug()
                )));
            }
            None => return Err(ApiError::bad_request("a multipart part without a name")),
        }
    }
    let component =
        component.ok_or_else(|| ApiError::bad_request("no `component` part: send the component's bytes"))?;
    Ok((manifest.unwrap_or_default(), component))
}

/// Uploads a version: validated and compiled off the async workers (in the
/// compile worker process, time- and memory-bound, when the server runs as
/// `hookbox serve`), tried once, compared with the active version, stored.
#[utoipa::path(post, path = "/v1/plugins/{name}/versions", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path)),
    request_body(content_type = "multipart/form-data", description = "part `component`: the component's bytes; part `manifest`: JSON (UploadManifest)"),
    responses((status = 201, body = PluginVersion), (status = 400, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)))]
pub async fn upload(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
    headers: axum::http::HeaderMap,
    form: Multipart,
) -> ApiResult<(StatusCode, Json<PluginVersion>)> {
    // Refused before the body is read (a client that sent `Expect: 100-continue` sends none of it).
    let declared = headers.get(axum::http::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.config.http.max_upload_bytes as u64) {
        return Err(ApiError::too_large("the upload is over the server's max_upload_bytes"));
    }
    let early =
        check_plugin_name(&name).map_err(ApiError::bad_request).and_then(|()| state.begin_upload(caller.tenant.id));
    let _upload = match early {
        Ok(guard) => guard,
        Err(e) => {
            // Read and drop the body, so the client that is still sending gets the answer.
            drain(form).await;
            return Err(e);
        }
    };
    let tenant = caller.tenant.clone();
    tracing::info!(tenant = %tenant.name, plugin = %name, "upload");
    let (manifest, component) = read_parts(form, state.runtime.options().max_component_bytes).await?;
    manifest.check(&tenant.quotas, &state.config.grantable_env).map_err(ApiError::unprocessable)?;
    let tid = tenant.id;
    let stored = state.db(move |s| s.plugin_storage(tid)).await?;
    let size = component.len() as u64;
    if stored.saturating_add(size) > tenant.quotas.plugin_storage_bytes {
        let limit = tenant.quotas.plugin_storage_bytes as f64;
        return state.counted(&tenant, Err(ApiError::quota("plugin_storage_bytes", limit, (stored + size) as f64)));
    }
    let blake3 = hookbox::sandbox::content_hash(&component);
    let label = format!("{}/{name} (upload)", tenant.name);
    let source = PluginSource::Bytes { label, bytes: component.clone().into() };
    let usage = state.usage(tenant.id);
    state.counted(&tenant, usage.check_minute(&tenant.quotas))?;
    // At most one compile per core runs at once; the others wait (within the upload's deadline).
    let _compiling = state.compile_slots.acquire().await.map_err(ApiError::internal)?;
    let loaded = match state
        .runtime
        .load_async(&format!("{name}~trial"), source, manifest.config_strings(), manifest.options(&tenant.quotas, 0))
        .await
    {
        Ok(loaded) => loaded,
        Err(e) => {
            // What the refused component compiled to does not stay in the cache.
            let (runtime, bytes) = (state.runtime.clone(), component);
            let _ = tokio::task::spawn_blocking(move || runtime.forget_cached(&bytes)).await;
            return Err(ApiError::unprocessable(format!("the component does not load: {e}")));
        }
    };
    let info = loaded.plugin.info().clone();
    let (trial, fuel, us) = trial_call(&loaded.plugin).await;
    // The trial's fuel and time count as the tenant's.
    usage.charge(fuel, us);
    let imports: Vec<String> = info.imports.iter().map(|i| i.name.clone()).collect();
    let n = name.clone();
    let active = state
        .db(move |s| match s.plugin(tid, &n)?.and_then(|r| r.active) {
            Some(v) => s.version(tid, &n, v),
            None => Ok(None),
        })
        .await?;
    let active_manifest: Option<(i64, UploadManifest, Vec<String>)> =
        active.map(|v| (v.version, serde_json::from_value(v.manifest).unwrap_or_default(), imports_of(&v.report)));
    let diff = diff(&manifest, &imports, active_manifest.as_ref().map(|(v, m, i)| (*v, m, i.as_slice())));
    let status = if diff.needs_approval() { VersionStatus::Pending } else { VersionStatus::Ready };
    let report = json!({
        "world": info.world,
        "wit_version": info.version,
        "imports": info.imports,
        "exports": info.exports,
        "grants_needed": info.grants_needed(),
        "grants_requested": manifest.env.iter().map(|v| format!("env:{v}")).collect::<Vec<_>>(),
        "notes": loaded.notes,
        "trial": trial,
        "diff": diff,
    });
    let version = NewVersion {
        component,
        blake3,
        manifest: serde_json::to_value(&manifest).unwrap_or(Value::Null),
        report,
        status,
    };
    let row = state.db(move |s| s.add_version(tid, &name, version)).await?;
    tracing::info!(tenant = %tenant.name, plugin = %row.plugin, version = row.version, status = row.status.as_str(), "stored");
    Ok((StatusCode::CREATED, Json(row)))
}

/// The tenant's plugins, each with its versions.
#[utoipa::path(get, path = "/v1/plugins", tag = "plugins", security(("bearer" = [])),
    responses((status = 200, body = Vec<Object>), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<Arc<AppState>>, caller: Caller) -> ApiResult<Json<Value>> {
    let tid = caller.tenant.id;
    let plugins = state
        .db(move |s| {
            let mut out = Vec::new();
            for p in s.plugins(tid)? {
                let versions = s.versions(tid, &p.name)?;
                out.push(json!({"name": p.name, "active": p.active, "shadow": p.shadow, "versions": versions}));
            }
            Ok(out)
        })
        .await?;
    Ok(Json(Value::Array(plugins)))
}

async fn find_version(state: &Arc<AppState>, caller: &Caller, name: &str, version: i64) -> ApiResult<PluginVersion> {
    let (tid, n) = (caller.tenant.id, name.to_string());
    state.db(move |s| s.version(tid, &n, version)).await?.ok_or_else(|| ApiError::not_found("plugin version"))
}

/// One version: its status, manifest and report.
#[utoipa::path(get, path = "/v1/plugins/{name}/versions/{version}", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path), ("version" = i64, Path)),
    responses((status = 200, body = PluginVersion), (status = 404, body = ErrorBody)))]
pub async fn get_version(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((name, version)): Path<(String, i64)>,
) -> ApiResult<Json<PluginVersion>> {
    Ok(Json(find_version(&state, &caller, &name, version).await?))
}

/// Approves a pending version's capability diff (tenant admin only).
#[utoipa::path(post, path = "/v1/plugins/{name}/versions/{version}/approve", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path), ("version" = i64, Path)),
    responses((status = 200, body = PluginVersion), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody)))]
pub async fn approve(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((name, version)): Path<(String, i64)>,
) -> ApiResult<Json<PluginVersion>> {
    let v = find_version(&state, &caller, &name, version).await?;
    caller.require_admin("approve a capability diff")?;
    if v.status != VersionStatus::Pending {
        return Err(ApiError::conflict(format!("version {version} is {}, not pending", v.status.as_str())));
    }
    let (tid, n) = (caller.tenant.id, name.clone());
    state.db(move |s| s.set_status(tid, &n, version, VersionStatus::Ready)).await?;
    Ok(Json(PluginVersion { status: VersionStatus::Ready, ..v }))
}

/// Makes a version the active one, atomically: new runs and evaluate calls
/// use it, runs in flight finish on the version they started with. An
/// earlier version may be activated again (a rollback).
#[utoipa::path(post, path = "/v1/plugins/{name}/versions/{version}/activate", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path), ("version" = i64, Path)),
    responses((status = 200, body = PluginVersion), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn activate(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((name, version)): Path<(String, i64)>,
) -> ApiResult<Json<PluginVersion>> {
    let v = find_version(&state, &caller, &name, version).await?;
    if v.status == VersionStatus::Pending {
        return Err(ApiError::conflict(format!(
            "version {version} needs capabilities the active version did not have: a tenant admin approves its diff first"
        )));
    }
    // Compiled before the switch, so the switch itself cannot fail to load.
    state.load_version(&caller.tenant, &name, version, false).await?;
    let (tid, n) = (caller.tenant.id, name.clone());
    state.db(move |s| s.activate(tid, &n, version)).await?;
    state.invalidate(tid);
    tracing::info!(tenant = %caller.tenant.name, plugin = %name, version, "activated");
    Ok(Json(PluginVersion { status: VersionStatus::Active, ..v }))
}

/// Runs a version in shadow beside the active one: it sees every live
/// event, its directive is only recorded.
#[utoipa::path(post, path = "/v1/plugins/{name}/versions/{version}/shadow", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path), ("version" = i64, Path)),
    responses((status = 200, body = Object), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn shadow(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path((name, version)): Path<(String, i64)>,
) -> ApiResult<Json<Value>> {
    let v = find_version(&state, &caller, &name, version).await?;
    match v.status {
        VersionStatus::Pending => {
            return Err(ApiError::conflict("a pending version cannot shadow: approve its diff first"));
        }
        VersionStatus::Active => return Err(ApiError::conflict("the active version cannot shadow itself")),
        _ => {}
    }
    state.load_version(&caller.tenant, &name, version, true).await?;
    let (tid, n) = (caller.tenant.id, name.clone());
    state.db(move |s| s.set_shadow(tid, &n, Some(version))).await?;
    state.invalidate(tid);
    Ok(Json(json!({"plugin": name, "shadow": version})))
}

/// Stops shadowing.
#[utoipa::path(delete, path = "/v1/plugins/{name}/shadow", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path)), responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
pub async fn stop_shadow(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let (tid, n) = (caller.tenant.id, name.clone());
    let found = state
        .db(move |s| {
            let exists = s.plugin(tid, &n)?.is_some();
            if exists {
                s.set_shadow(tid, &n, None)?;
            }
            Ok(exists)
        })
        .await?;
    if !found {
        return Err(ApiError::not_found("plugin"));
    }
    state.invalidate(tid);
    Ok(Json(json!({"plugin": name, "shadow": null})))
}

/// The shadow records of a plugin (newest first, at most 200) and their summary.
#[utoipa::path(get, path = "/v1/plugins/{name}/shadow", tag = "plugins", security(("bearer" = [])),
    params(("name" = String, Path)), responses((status = 200, body = Object), (status = 404, body = ErrorBody)))]
pub async fn shadow_records(
    State(state): State<Arc<AppState>>,
    caller: Caller,
    Path(name): Path<String>,
) -> ApiResult<Json<Value>> {
    let (tid, n) = (caller.tenant.id, name.clone());
    let found = state
        .db(move |s| match s.plugin(tid, &n)? {
            Some(r) => Ok(Some((r.shadow, s.shadow_records(tid, &n, 200)?))),
            None => Ok(None),
        })
        .await?;
    let (current, records) = found.ok_or_else(|| ApiError::not_found("plugin"))?;
    let n = records.len().max(1) as f64;
    let summary = json!({
        "calls": records.len(),
        "disagreements": records.iter().filter(|r| !r.agree).count(),
        "shadow_failures": records.iter().filter(|r| r.failure.is_some()).count(),
        "mean_fuel_delta": records.iter().map(|r| r.fuel_delta as f64).sum::<f64>() / n,
        "mean_time_delta_us": records.iter().map(|r| r.time_delta_us as f64).sum::<f64>() / n,
    });
    Ok(Json(json!({"plugin": name, "shadow": current, "summary": summary, "records": records})))
}
