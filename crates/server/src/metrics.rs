//! `/metrics`: Prometheus text format (prometheus-client). Hook calls,
//! failures by kind, fuel and call latency per tenant and plugin; runs by
//! outcome; runs in flight and approvals waiting per tenant; quota
//! rejections per tenant and quota; evaluate calls per tenant.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// Labels of a per-plugin metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabels {
    /// The tenant's name.
    pub tenant: String,
    /// The plugin's name.
    pub plugin: String,
}

/// Labels of a hook failure.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FailureLabels {
    /// The tenant's name.
    pub tenant: String,
    /// The plugin's name.
    pub plugin: String,
    /// `trap`, `out-of-fuel`, `deadline`, `memory`, `invalid-output`, `instantiate` or `state`.
    pub kind: String,
}

/// Labels of a per-tenant metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantLabels {
    /// The tenant's name.
    pub tenant: String,
}

/// Labels with an outcome or a quota.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TenantWhat {
    /// The tenant's name.
    pub tenant: String,
    /// The run's status, or the quota's name.
    pub what: String,
}

fn latency_histogram() -> Histogram {
    // 10 µs .. ~5 s, seconds.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(0.000_01, 4.0, 10))
}

/// Every metric the server keeps.
pub struct Metrics {
    registry: Registry,
    /// Hook calls.
    pub hook_calls: Family<PluginLabels, Counter>,
    /// Hook failures by kind.
    pub hook_failures: Family<FailureLabels, Counter>,
    /// Fuel burned by hooks.
    pub hook_fuel: Family<PluginLabels, Counter>,
    /// Hook call latency, seconds.
    pub hook_latency: Family<PluginLabels, Histogram, fn() -> Histogram>,
    /// Runs ended, by status.
    pub runs: Family<TenantWhat, Counter>,
    /// Runs in flight.
    pub runs_in_flight: Family<TenantLabels, Gauge>,
    /// Approvals waiting for an answer.
    pub approvals_waiting: Family<TenantLabels, Gauge>,
    /// Requests refused over a quota, by quota.
    pub quota_rejections: Family<TenantWhat, Counter>,
    /// Evaluate calls.
    pub evaluations: Family<TenantLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Every metric, registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("hookbox");
        let hook_calls = Family::<PluginLabels, Counter>::default();
        let hook_failures = Family::<FailureLabels, Counter>::default();
        let hook_fuel = Family::<PluginLabels, Counter>::default();
        let hook_latency =
            Family::<PluginLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let runs = Family::<TenantWhat, Counter>::default();
        let runs_in_flight = Family::<TenantLabels, Gauge>::default();
        let approvals_waiting = Family::<TenantLabels, Gauge>::default();
        let quota_rejections = Family::<TenantWhat, Counter>::default();
        let evaluations = Family::<TenantLabels, Counter>::default();
        registry.register("hook_calls", "Hook calls", hook_calls.clone());
        registry.register("hook_failures", "Hook calls that failed, by failure kind", hook_failures.clone());
        registry.register("hook_fuel", "Fuel burned by hook calls", hook_fuel.clone());
        registry.register("hook_call_seconds", "Hook call latency in seconds", hook_latency.clone());
        registry.register("runs", "Runs ended, by status (label what)", runs.clone());
        registry.register("runs_in_flight", "Runs in flight", runs_in_flight.clone());
        registry.register("approvals_waiting", "Approvals waiting for an answer", approvals_waiting.clone());
        registry.register("quota_rejections", "Requests refused over a quota (label what)", quota_rejections.clone());
        registry.register("evaluations", "Evaluate calls", evaluations.clone());
        Metrics {
            registry,
            hook_calls,
            hook_failures,
            hook_fuel,
            hook_latency,
            runs,
            runs_in_flight,
            approvals_waiting,
            quota_rejections,
            evaluations,
        }
    }

    /// Records one hook call.
    pub fn hook_call(&self, tenant: &str, plugin: &str, fuel: u64, duration_us: u64, failure: Option<&str>) {
        let labels = PluginLabels { tenant: tenant.to_string(), plugin: plugin.to_string() };
        self.hook_calls.get_or_create(&labels).inc();
        self.hook_fuel.get_or_create(&labels).inc_by(fuel);
        self.hook_latency.get_or_create(&labels).observe(duration_us as f64 / 1e6);
        if let Some(kind) = failure {
            let labels = FailureLabels { tenant: labels.tenant, plugin: labels.plugin, kind: kind.to_string() };
            self.hook_failures.get_or_create(&labels).inc();
        }
    }

    /// Counts a request refused over `quota`.
    pub fn quota_rejected(&self, tenant: &str, quota: &str) {
        self.quota_rejections.get_or_create(&TenantWhat { tenant: tenant.into(), what: quota.into() }).inc();
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}
