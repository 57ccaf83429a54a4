//! The hooks of a tenant's chain as the server runs them: each plugin's
//! active version in a [`TenantHook`] that meters every call (metrics, the
//! tenant's fuel and hook time this minute) and, when a candidate version
//! shadows it, calls the shadow on the same event and context after the
//! active one, records how they compare, and returns the active version's
//! reply: the shadow is never authoritative. A shadow runs under its own
//! name (`NAME~shadow`), so its hook state never touches the active's.

use std::sync::{Arc, Mutex};

use hookbox::contract::{Directive, EventContext, HookFailure};
use hookbox::sandbox::{FailPolicy, WasmHook, WasmPlugin};
use hookbox::{Event, EventKind, HookHandler, HookReply, RunJournal};

use crate::metrics::Metrics;
use crate::store::{ServerStore, ShadowRecord, Tenant, unix_seconds};
use crate::usage::TenantUsage;

/// One plugin of a tenant's chain: the active version and, when one runs in
/// shadow, the shadow version.
#[derive(Clone)]
pub struct PlanEntry {
    /// The plugin's name.
    pub name: String,
    /// The active version's number.
    pub version: i64,
    /// The active version, compiled.
    pub plugin: Arc<WasmPlugin>,
    /// The shadow version's number and plugin.
    pub shadow: Option<(i64, Arc<WasmPlugin>)>,
}

/// Where a chain's calls are counted: the tenant, its usage and the
/// shadow comparisons waiting to be stored.
pub struct Meter {
    /// Where calls are counted.
    metrics: Arc<Metrics>,
    /// Where shadow records are stored.
    store: Arc<dyn ServerStore>,
    /// The tenant's name and id.
    pub tenant: Tenant,
    /// What the tenant uses.
    pub usage: Arc<TenantUsage>,
    /// Shadow comparisons not stored yet: (plugin, record).
    shadow: Mutex<Vec<(String, ShadowRecord)>>,
}

/// The most shadow comparisons a meter keeps before it stores them.
const SHADOW_BATCH: usize = 64;

impl Meter {
    /// A meter for one run or evaluate call of `tenant`.
    pub fn new(
        metrics: Arc<Metrics>,
        store: Arc<dyn ServerStore>,
        usage: Arc<TenantUsage>,
        tenant: Tenant,
    ) -> Arc<Self> {
        Arc::new(Meter { metrics, store, tenant, usage, shadow: Mutex::new(Vec::new()) })
    }

    fn record(&self, plugin: &str, reply: &HookReply) {
        let failure = reply.outcome.as_ref().err().map(|f| f.kind.as_str());
        self.metrics.hook_call(&self.tenant.name, plugin, reply.fuel_used, reply.duration_us, failure);
        self.usage.charge(reply.fuel_used, reply.duration_us);
    }

    fn push_shadow(&self, plugin: &str, record: ShadowRecord) {
        let full = {
            let mut pending = self.shadow.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            pending.push((plugin.to_string(), record));
            pending.len() >= SHADOW_BATCH
        };
        if full {
            self.flush();
        }
    }

    /// Stores the shadow comparisons not stored yet (on a blocking thread, not awaited).
    pub fn flush(&self) {
        let pending = std::mem::take(&mut *self.shadow.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        if pending.is_empty() {
            return;
        }
        let store = self.store.clone();
        let tenant = self.tenant.id;
        let mut by_plugin: std::collections::BTreeMap<String, Vec<ShadowRecord>> = Default::default();
        for (plugin, record) in pending {
            by_plugin.entry(plugin).or_default().push(record);
        }
        tokio::task::spawn_blocking(move || {
            for (plugin, records) in by_plugin {
                if let Err(e) = store.add_shadow_records(tenant, &plugin, &records) {
                    tracing::warn!("{} shadow records not stored: {e}", records.len());
                }
            }
        });
    }
}

/// One plugin of a tenant's chain: the active version's hook, metered, and
/// the shadow version's, if one runs.
pub struct TenantHook {
    inner: WasmHook,
    shadow: Option<(i64, WasmHook)>,
    meter: Arc<Meter>,
}

/// The hooks of `plan`, metered by `meter`, for one run or evaluate call;
/// with a `journal`, each active version takes its host values from it (a
/// run that can park). Shadows are never journaled.
pub fn hooks(plan: &[PlanEntry], meter: &Arc<Meter>, journal: Option<&Arc<RunJournal>>) -> Vec<Box<dyn HookHandler>> {
    plan.iter()
        .map(|e| -> Box<dyn HookHandler> {
            let hook = e.plugin.hook();
            Box::new(TenantHook {
                inner: match journal {
                    Some(j) => hook.with_host_env(j.plugin(&e.name)),
                    None => hook,
                },
                shadow: e.shadow.as_ref().map(|(v, p)| (*v, p.hook())),
                meter: meter.clone(),
            })
        })
        .collect()
}

/// How a reply reads in a shadow record: the directive's action and value, or `failed:KIND`.
fn summary(outcome: &Result<Directive, HookFailure>) -> (String, Option<String>) {
    match outcome {
        Ok(d) => (d.action().to_string(), Some(format!("{d:?}"))),
        Err(f) => (format!("failed:{}", f.kind.as_str()), None),
    }
}

fn delta(a: u64, b: u64) -> i64 {
    i64::try_from(a).unwrap_or(i64::MAX).saturating_sub(i64::try_from(b).unwrap_or(i64::MAX))
}

#[async_trait::async_trait]
impl HookHandler for TenantHook {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn fail_policy(&self) -> FailPolicy {
        self.inner.fail_policy()
    }

    fn run_started(&mut self, session_id: &str) {
        self.inner.run_started(session_id);
        if let Some((_, shadow)) = &mut self.shadow {
            shadow.run_started(session_id);
        }
    }

    fn subscribed(&self, kind: EventKind) -> bool {
        self.inner.subscribed(kind)
    }

    fn observe_only(&self) -> bool {
        self.inner.observe_only()
    }

    async fn on_event(&mut self, event: &Event, context: &EventContext) -> HookReply {
        let span = tracing::debug_span!("hook", plugin = %self.inner.name(), event = %event.kind());
        let reply = tracing::Instrument::instrument(self.inner.on_event(event, context), span).await;
        self.meter.record(self.inner.name(), &reply);
        if let Some((version, shadow)) = &mut self.shadow {
            let candidate = shadow.on_event(event, context).await;
            self.meter.record(shadow.name(), &candidate);
            let (active, active_value) = summary(&reply.outcome);
            let (shadow_action, shadow_value) = summary(&candidate.outcome);
            let record = ShadowRecord {
                version: *version,
                event: event.kind().to_string(),
                agree: active == shadow_action && active_value == shadow_value,
                active,
                shadow: shadow_action,
                failure: candidate
                    .outcome
                    .as_ref()
                    .err()
                    .map(|f| hookbox::contract::truncate_chars(&f.message, 500).to_string()),
                fuel_delta: delta(candidate.fuel_used, reply.fuel_used),
                time_delta_us: delta(candidate.duration_us, reply.duration_us),
                at: unix_seconds(),
            };
            self.meter.push_shadow(self.inner.name(), record);
        }
        reply
    }
}
