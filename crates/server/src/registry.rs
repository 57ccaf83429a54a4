//! The plugin registry's rules: the manifest entry a version is uploaded
//! with ([`UploadManifest`]), the limits a tenant may ask for, the report
//! of an upload (world, imports, grants, a trial call) and the capability
//! diff against the active version that decides whether the version must
//! wait for a tenant admin's approval.

use std::collections::BTreeMap;
use std::sync::Arc;

use hookbox::contract::{EventContext, ToolCall};
use hookbox::sandbox::{Breaker, FailPolicy, Grants, Limits, PluginOptions, WasmPlugin};
use hookbox::{Event, EventKind, HookHandler};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::config::Quotas;

/// The most config keys a manifest may hold.
pub const MAX_CONFIG_KEYS: usize = 256;
/// The most env grants a manifest may ask for.
pub const MAX_ENV_GRANTS: usize = 64;

/// The manifest entry of an uploaded version (the upload's `manifest`
/// part, JSON). Unknown keys are refused.
#[derive(Debug, Clone, Default, Deserialize, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UploadManifest {
    /// The plugin's config: any JSON values; strings reach it as they are,
    /// others as JSON text (as `hookbox.toml`'s `config`).
    #[serde(default)]
    #[schema(value_type = Object)]
    pub config: BTreeMap<String, Value>,
    /// Sandbox limits (as `hookbox.toml`'s `limits`), each within the tenant's maximums.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub limits: Option<Limits>,
    /// `open`, `closed` or `auto` (default).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub fail: Option<FailPolicy>,
    /// The events it is entered for (default: every event).
    #[schema(value_type = Option<Vec<String>>)]
    pub events: Option<Vec<EventKind>>,
    /// Observe only: its calls run beside the loop, its directives are ignored.
    #[serde(default)]
    pub observe: bool,
    /// Host environment variables it asks to read (each must be in the
    /// server's `grantable_env`).
    #[serde(default)]
    pub env: Vec<String>,
    /// The plugin's own version string, stored with its hook state (default: the version number).
    pub version: Option<String>,
}

impl UploadManifest {
    /// The config as the plugin sees it.
    pub fn config_strings(&self) -> BTreeMap<String, String> {
        self.config
            .iter()
            .map(|(k, v)| {
                let s = match v {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                (k.clone(), s)
            })
            .collect()
    }

    /// Checks the manifest against the tenant's maximums and the server's
    /// grantable variables.
    ///
    /// Errors: a sentence naming the key and the limit.
    pub fn check(&self, quotas: &Quotas, grantable_env: &[String]) -> Result<(), String> {
        if self.config.len() > MAX_CONFIG_KEYS {
            return Err(format!("config: {} keys is over the limit of {MAX_CONFIG_KEYS}", self.config.len()));
        }
        if self.env.len() > MAX_ENV_GRANTS {
            return Err(format!("env: {} grants is over the limit of {MAX_ENV_GRANTS}", self.env.len()));
        }
        if let Some(var) = self.env.iter().find(|v| !grantable_env.contains(v)) {
            return Err(format!("env: `{}` is not a variable this server grants", var.escape_debug()));
        }
        let limits = self.limits.unwrap_or_default();
        let over = [
            ("limits.fuel", limits.fuel, quotas.max_fuel_per_call, "max_fuel_per_call"),
            ("limits.memory_bytes", limits.memory_bytes, quotas.max_memory_bytes, "max_memory_bytes"),
            ("limits.deadline_ms", limits.deadline_ms, quotas.max_deadline_ms, "max_deadline_ms"),
        ];
        for (key, asked, max, quota) in over {
            if asked > max {
                return Err(format!("{key} = {asked} is over the tenant's {quota} = {max}"));
            }
        }
        // What a call may make the host hold (output, logs, state) stays within
        // the sandbox's defaults: a tenant may lower these, never raise them.
        let default = Limits::default();
        for ((key, asked), (_, max)) in limits_table(&limits).iter().zip(limits_table(&default).iter()).skip(3) {
            if asked > max {
                return Err(format!("limits.{key} = {asked} is over the server's maximum of {max}"));
            }
        }
        Ok(())
    }

    /// The sandbox options, with the tenant's maximums applied to the
    /// defaults a manifest left out; `number` is the version's number.
    pub fn options(&self, quotas: &Quotas, number: i64) -> PluginOptions {
        let mut limits = self.limits.unwrap_or_default();
        limits.fuel = limits.fuel.min(quotas.max_fuel_per_call);
        limits.memory_bytes = limits.memory_bytes.min(quotas.max_memory_bytes);
        limits.deadline_ms = limits.deadline_ms.min(quotas.max_deadline_ms);
        PluginOptions {
            limits,
            fail: self.fail.unwrap_or_default(),
            breaker: Breaker::default(),
            grants: Grants { env: self.env.clone(), dirs: Vec::new() },
            version: self.version.clone().unwrap_or_else(|| number.to_string()),
            events: self.events.clone(),
            observe: self.observe,
        }
    }
}

/// The capability diff of a version against the active one.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, utoipa::ToSchema)]
pub struct CapabilityDiff {
    /// The active version it is compared with (none: the plugin had none).
    pub against: Option<i64>,
    /// Grants it asks for that the active version did not have.
    pub new_grants: Vec<String>,
    /// Imports it has that the active version did not.
    pub new_imports: Vec<String>,
    /// Limits that differ: `{limit, from, to}`.
    #[schema(value_type = Vec<Object>)]
    pub changed_limits: Vec<Value>,
}

impl CapabilityDiff {
    /// True when the version must wait for a tenant admin: it asks for a
    /// grant the active version did not have, or raises a limit.
    pub fn needs_approval(&self) -> bool {
        !self.new_grants.is_empty() || self.changed_limits.iter().any(|c| c["raised"] == Value::Bool(true))
    }
}

/// The grants a manifest asks for, as names (`env:VAR`).
fn grants_of(manifest: &UploadManifest) -> Vec<String> {
    manifest.env.iter().map(|v| format!("env:{v}")).collect()
}

/// Every limit a manifest may set, by name: the three the tenant's quotas
/// bound first, then those bounded by the sandbox's defaults.
fn limits_table(l: &Limits) -> [(&'static str, u64); 10] {
    [
        ("fuel", l.fuel),
        ("deadline_ms", l.deadline_ms),
        ("memory_bytes", l.memory_bytes),
        ("max_output_bytes", l.max_output_bytes),
        ("max_output_blocks", l.max_output_blocks),
        ("max_log_bytes", l.max_log_bytes),
        ("max_log_records", l.max_log_records),
        ("run_log_records", l.run_log_records),
        ("run_log_bytes", l.run_log_bytes),
        ("max_state_bytes", l.max_state_bytes),
    ]
}

/// The diff of (`manifest`, `imports`) against the active version's, or
/// against no plugin at all (then every grant is new, and limits compare
/// with the defaults).
pub fn diff(
    manifest: &UploadManifest,
    imports: &[String],
    active: Option<(i64, &UploadManifest, &[String])>,
) -> CapabilityDiff {
    let empty = UploadManifest::default();
    let (against, old_manifest, old_imports): (Option<i64>, &UploadManifest, &[String]) = match active {
        Some((v, m, i)) => (Some(v), m, i),
        None => (None, &empty, &[]),
    };
    let old_grants = grants_of(old_manifest);
    let new_grants = grants_of(manifest).into_iter().filter(|g| !old_grants.contains(g)).collect();
    let new_imports = imports.iter().filter(|i| !old_imports.contains(i)).cloned().collect();
    let (old_l, new_l) = (old_manifest.limits.unwrap_or_default(), manifest.limits.unwrap_or_default());
    let changed_limits = limits_table(&old_l)
        .iter()
        .zip(limits_table(&new_l).iter())
        .filter(|(a, b)| a.1 != b.1)
        .map(|(a, b)| json!({"limit": a.0, "from": a.1, "to": b.1, "raised": b.1 > a.1}))
        .collect();
    CapabilityDiff { against, new_grants, new_imports, changed_limits }
}

/// The trial call of an upload: one `before-tool-call` for a harmless
/// `list_dir`, with no session (so nothing the hook saves reaches the store).
/// Returns the report's `trial` object, the fuel and the time (µs) it took.
pub async fn trial_call(plugin: &Arc<WasmPlugin>) -> (Value, u64, u64) {
    let mut hook = plugin.hook();
    let event = Event::BeforeToolCall {
        iteration: 1,
        call: ToolCall { id: "trial".into(), name: "list_dir".into(), arguments: r#"{"path":"."}"#.into() },
    };
    let context = EventContext {
        run_id: "trial".into(),
        session_id: "trial".into(),
        turn: 1,
        iteration: 1,
        max_iterations: 10,
        retries: 0,
    };
    let reply = hook.on_event(&event, &context).await;
    let outcome = match &reply.outcome {
        Ok(d) => json!({"directive": d.action()}),
        Err(f) => json!({"failure": f.kind.as_str(), "message": hookbox::contract::truncate_chars(&f.message, 500)}),
    };
    let trial = json!({"event": "before-tool-call", "fuel_used": reply.fuel_used, "duration_us": reply.duration_us, "outcome": outcome});
    (trial, reply.fuel_used, reply.duration_us)
}
