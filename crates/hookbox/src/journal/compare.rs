//! Comparing a replay's hook calls with the recording's: [`compare`] and
//! its [`Comparison`].

use std::collections::BTreeMap;

use hookbox_contract::{CallRecord, truncate_ellipsis};
use serde::Serialize;

/// A call's outcome as `skip-tool("…")`, `continue` or `failed (trap)`, for replay reports.
pub fn outcome(call: &CallRecord) -> String {
    match (&call.directive, call.failure) {
        (_, Some(kind)) => format!("failed ({})", kind.as_str()),
        (Some(d), None) => match serde_json::to_value(d).ok().and_then(|v| v.get("value").cloned()) {
            Some(serde_json::Value::Null) | None => d.action().to_string(),
            Some(v) => format!("{}({})", d.action(), truncate_ellipsis(&v.to_string(), 200)),
        },
        (None, None) => "nothing".to_string(),
    }
}

/// How a replay's hook calls compare with the recording's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Hook calls in the recording.
    pub recorded_calls: usize,
    /// Hook calls in the replay.
    pub replayed_calls: usize,
    /// The first difference among the plugins both have, if any.
    pub first_difference: Option<Difference>,
    /// Plugins with calls in the recording and none in the replay.
    pub missing_plugins: Vec<String>,
    /// Plugins with calls in the replay and none in the recording (not compared).
    pub added_plugins: Vec<String>,
}

/// The first hook call where a replay differs from its recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Difference {
    /// Its position among the run's hook calls, from 1 (the recording's
    /// numbering; the replay's when the recording has no such call).
    pub call: usize,
    /// Its position among its plugin's calls, from 1.
    pub plugin_call: usize,
    /// The recorded call, if the recording has one there.
    pub recorded: Option<CallRecord>,
    /// The replayed call, if the replay made one there.
    pub replayed: Option<CallRecord>,
}

impl Difference {
    /// One line: where, what was recorded, what was replayed.
    pub fn describe(&self) -> String {
        match (&self.recorded, &self.replayed) {
            (Some(r), Some(p)) if r.place() == p.place() => {
                format!("hook call {}: {}: recorded {}, replayed {}", self.call, r.place(), outcome(r), outcome(p))
            }
            (Some(r), Some(p)) => format!(
                "hook call {}: recorded {} → {}, replayed {} → {}",
                self.call,
                r.place(),
                outcome(r),
                p.place(),
                outcome(p)
            ),
            (Some(r), None) => format!(
                "hook call {}: recorded {} → {}, but the replay made no such call",
                self.call,
                r.place(),
                outcome(r)
            ),
            (None, Some(p)) => format!(
                "hook call {}: the replay made a call the recording does not have: {} → {}",
                self.call,
                p.place(),
                outcome(p)
            ),
            (None, None) => format!("hook call {}", self.call),
        }
    }
}

impl Comparison {
    /// True when every plugin made the same calls with the same outcomes.
    pub fn same(&self) -> bool {
        self.first_difference.is_none() && self.missing_plugins.is_empty() && self.added_plugins.is_empty()
    }
}

/// Compares a replay's calls with the recording's, plugin by plugin: each
/// plugin's calls in order (event, iteration, outcome). The first difference
/// is the earliest in the run among every plugin's first difference, so an
/// added, removed or reordered plugin does not shift the others' calls.
pub fn compare(recorded: &[CallRecord], replayed: &[CallRecord]) -> Comparison {
    fn by_plugin(calls: &[CallRecord]) -> BTreeMap<&str, Vec<(usize, &CallRecord)>> {
        let mut map: BTreeMap<&str, Vec<(usize, &CallRecord)>> = BTreeMap::new();
        for (i, c) in calls.iter().enumerate() {
            map.entry(c.plugin.as_str()).or_default().push((i, c));
        }
        map
    }
    let rec = by_plugin(recorded);
    let rep = by_plugin(replayed);
    let mut first: Option<Difference> = None;
    for (plugin, r) in &rec {
        let Some(p) = rep.get(plugin) else { continue };
        let Some(j) = (0..r.len().max(p.len())).find(|&j| match (r.get(j), p.get(j)) {
            (Some((_, a)), Some((_, b))) => !a.same(b),
            _ => true,
        }) else {
            continue;
        };
        let position = r.get(j).or_else(|| p.get(j)).map_or(0, |(i, _)| *i);
        if first.as_ref().is_none_or(|f| position + 1 < f.call) {
            first = Some(Difference {
                call: position + 1,
                plugin_call: j + 1,
                recorded: r.get(j).map(|(_, c)| (*c).clone()),
                replayed: p.get(j).map(|(_, c)| (*c).clone()),
            });
        }
    }
    Comparison {
        recorded_calls: recorded.len(),
        replayed_calls: replayed.len(),
        first_difference: first,
        missing_plugins: rec.keys().filter(|k| !rep.contains_key(*k)).map(|k| k.to_string()).collect(),
        added_plugins: rep.keys().filter(|k| !rec.contains_key(*k)).map(|k| k.to_string()).collect(),
    }
}
