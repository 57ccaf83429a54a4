//! [`Checkpoint`]: what a run journaled up to a safe point, enough to
//! re-execute it there on any worker ([`super::RunJournal::resuming`]).

use std::collections::BTreeMap;

use hookbox_contract::{ApprovalRecord, CallRecord};
use hookbox_providers::ModelResponse;
use serde::{Deserialize, Serialize};

use super::values::{ImportValue, ToolRecord};

/// A run's journal at a safe point (a park for an approval, or one of [`super::SafePoint`]): its id and
/// turn, every model response, tool outcome, import value, hook call and
/// approval answer so far. A resumed run takes the responses, tool outcomes
/// and answers from it instead of calling the model, running the tool or
/// waiting again, and its hooks get the same values (state included), so
/// they decide the same and commit nothing twice.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Checkpoint {
    /// The run's id.
    pub run_id: String,
    /// The run's turn number in its session (1-based).
    pub turn: u32,
    /// Every model response, in order.
    pub responses: Vec<ModelResponse>,
    /// Every tool outcome, in order (declined calls included).
    pub tools: Vec<ToolRecord>,
    /// Each plugin's import values, in call order.
    pub imports: BTreeMap<String, Vec<ImportValue>>,
    /// Every hook call's outcome, in order.
    pub calls: Vec<CallRecord>,
    /// Every approval's answer, in order.
    pub approvals: Vec<ApprovalRecord>,
    /// The messages delivered at turn boundaries (injected through the
    /// run's handle or by hooks): each boundary's number (0-based) and texts.
    #[serde(default)]
    pub deliveries: Vec<(u64, Vec<String>)>,
    /// Each plugin's calls begun before the checkpoint (some may not be in
    /// `calls` yet: a detached call is recorded when it is collected). A
    /// resumed run's first that many calls of the plugin are re-executions.
    #[serde(default)]
    pub begun: BTreeMap<String, u64>,
    /// Tool calls journaled as started (by id); one without an outcome in
    /// `tools` was cut off by a crash and is not run again
    /// ([`super::INTERRUPTED_TOOL_MESSAGE`]).
    #[serde(default)]
    pub started: Vec<String>,
    /// Each plugin's hook-state commits written down before they were made,
    /// whose calls had not ended: (the call's number, 1-based; the revision
    /// it swapped, `None` for a blind write). A resumed run makes such a
    /// commit again on that revision, so it lands exactly once (one that
    /// finds it landed knows so by the entry's revision and bytes).
    #[serde(default)]
    pub pending: BTreeMap<String, Vec<(u64, Option<u64>)>>,
    /// Each plugin's hook-state revision its instance knew (last read or
    /// wrote) when the checkpoint was written; plugins whose instance knew
    /// none are left out. A resumed run's instance is given it once it has
    /// re-executed the plugin's calls ([`hookbox_sandbox::HostEnv::call_ended`]),
    /// so a write that does not read first still swaps that revision.
    #[serde(default)]
    pub revisions: BTreeMap<String, u64>,
    /// Hook `pause` directives the run went past: a resumed run does not
    /// pause again at the first that many it re-executes.
    #[serde(default)]
    pub pauses: u64,
    /// Events dispatched to the hooks before a park (their entries are in
    /// the run's stored stream): a resumed run's re-execution of the first
    /// that many adds nothing to its stream ([`super::RunJournal::stream_owed`]),
    /// the one it parked after included. 0 in a safe point's checkpoint.
    #[serde(default)]
    pub events: u64,
}

/// How many entries each list of a [`Checkpoint`] holds: where what a
/// later checkpoint adds starts ([`super::RunJournal::checkpoint_after`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Lengths {
    /// Model responses.
    pub responses: u64,
    /// Tool outcomes.
    pub tools: u64,
    /// Each plugin's import values (a plugin with none is left out).
    pub imports: BTreeMap<String, u64>,
    /// Hook calls.
    pub calls: u64,
    /// Approval answers.
    pub approvals: u64,
    /// Deliveries at turn boundaries.
    pub deliveries: u64,
    /// Tool calls journaled as started.
    pub started: u64,
}

fn count<T>(list: &[T]) -> u64 {
    u64::try_from(list.len()).unwrap_or(u64::MAX)
}

impl Lengths {
    /// Adds the entries of `tail` (a checkpoint of what came after these lengths).
    pub fn extend(&mut self, tail: &Checkpoint) {
        let add = |n: &mut u64, list_len: u64| *n = n.saturating_add(list_len);
        add(&mut self.responses, count(&tail.responses));
        add(&mut self.tools, count(&tail.tools));
        for (plugin, values) in tail.imports.iter().filter(|(_, v)| !v.is_empty()) {
            add(self.imports.entry(plugin.clone()).or_default(), count(values));
        }
        add(&mut self.calls, count(&tail.calls));
        add(&mut self.approvals, count(&tail.approvals));
        add(&mut self.deliveries, count(&tail.deliveries));
        add(&mut self.started, count(&tail.started));
    }
}

impl Checkpoint {
    /// The lengths of its lists.
    pub fn lengths(&self) -> Lengths {
        let mut lengths = Lengths::default();
        lengths.extend(self);
        lengths
    }

    /// Adds the answer to the approval the run parked on, so that the
    /// resumed run takes it as given.
    pub fn answer(&mut self, record: ApprovalRecord) {
        self.approvals.push(record);
    }

    /// Counts the hook pause the run parked in as passed: the run was
    /// resumed (answered) while parked, so the resumed run goes past it.
    pub fn resume_pause(&mut self) {
        self.pauses = self.pauses.saturating_add(1);
    }
}

/// Each plugin's commits written down and not known to have returned: (call number, revision swapped).
pub(super) type PendingCommits = BTreeMap<String, Vec<(u64, Option<u64>)>>;

/// A checkpoint's per-plugin fields: `begun`, `pending` and `revisions`.
pub(super) struct PluginFields {
    pub(super) begun: BTreeMap<String, u64>,
    pub(super) pending: PendingCommits,
    pub(super) revisions: BTreeMap<String, u64>,
}

/// Each plugin's calls begun, its commits written down and not known to
/// have returned, and the state revision its instance knows (plugins with
/// none left out of the last two).
pub(super) fn plugin_fields(plugins: &BTreeMap<String, std::sync::Arc<super::PluginJournal>>) -> PluginFields {
    let begun = plugins.iter().map(|(name, p)| (name.clone(), p.begun_with_checkpoint())).collect();
    let pending = plugins
        .iter()
        .map(|(name, p)| (name.clone(), p.pending_commits()))
        .filter(|(_, pending)| !pending.is_empty())
        .collect();
    let revisions = plugins.iter().filter_map(|(name, p)| Some((name.clone(), p.revision()?))).collect();
    PluginFields { begun, pending, revisions }
}
