//! The run journal: what a run got from outside that a replay must give it
//! again, and what its hooks decided, so `hookbox replay JOURNAL` can run the
//! run again and say whether every hook decided the same.
//!
//! (`docs/contract.md`, "Determinism and replay"): a value that would differ between two executions is
//! recorded the first time and returned again on replay. Here that covers:
//! - every value a hook gets from the journaled host imports (`now`, `random`,
//!   `uuid`, `sleep`) and from WASI's own clocks and random numbers
//!   (`wasi:clocks/wall-clock`, `wasi:clocks/monotonic-clock`,
//!   `wasi:random/*`), per plugin, in call order ([`ImportValue`]);
//! - every state a hook read with `get-state`, so a replay starts each hook
//!   from the state it had, whatever the state store holds now;
//! - the run's id, every model response (as a `hookbox run --record`
//!   session) and every tool outcome, so a replay runs no tool and calls no
//!   live model;
//! - every hook call's outcome ([`CallRecord`]): the directive, `continue`
//!   included, or the failure kind. A replay compares its own calls against
//!   these and reports the first difference ([`compare`]).
//!
//! Modes: a [`RunJournal::recording`] journal takes live values and writes
//! them down; a [`RunJournal::replaying`] journal hands back the recorded ones
//! in order; a [`RunJournal::resuming`] journal hands back a
//! [`Checkpoint`]'s values in order and then takes live ones and writes them
//! after (a parked run re-executed up to its park point, then going on). When a replayed plugin asks for something the journal does not
//! hold at that point (it asks for `random` where the recording has `now`, or
//! asks more often), it gets a live value and the plugin's journal notes the
//! first such divergence; its directives will usually differ too.
//!
//! A plugin's import log is capped at [`MAX_PLUGIN_ENTRIES`] entries; past
//! that, values are still live but no longer written, and the journal says
//! the plugin's log was cut (a replay of that plugin cannot be exact).

mod checkpoint;
mod compare;
mod file;
mod pause;
mod plugin;
mod safe;
mod values;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use hookbox_contract::{ApprovalRecord, CallRecord};
use hookbox_sandbox::CallSink;

pub use checkpoint::{Checkpoint, Lengths};
use checkpoint::{PluginFields, plugin_fields};
pub use compare::{Comparison, Difference, compare, outcome};
pub use file::{JournalError, JournalFile, JournalProvider};
pub use plugin::PluginJournal;
pub use safe::{INTERRUPTED_TOOL_MESSAGE, SafePoint, SafePointFuture, SafePoints};
pub use values::{ImportValue, JournalState, ToolRecord, from_hex, to_hex};

/// The `format` field of a journal file.
pub const JOURNAL_FORMAT: &str = "hookbox-journal";
/// The journal layout version this build writes and reads.
pub const JOURNAL_VERSION: u32 = 1;
/// Most import values kept per plugin per run (about 100 bytes each in the file).
pub const MAX_PLUGIN_ENTRIES: usize = 100_000;
/// The largest journal file `hookbox replay` reads: 1 GiB.
pub const MAX_JOURNAL_BYTES: u64 = 1 << 30;

/// Locks `m`, taking the data of a poisoned lock as it is.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a single push or index bump: a panic cannot leave it half-done.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Tool-call divergences a replay lists one by one; more are counted (a
/// hostile journal can hold thousands of calls).
pub const MAX_TOOL_DIVERGENCES: usize = 100;

/// The journal of one run in flight, shared by the agent and its hooks.
#[derive(Debug)]
pub struct RunJournal {
    replaying: bool,
    run_id: Mutex<Option<String>>,
    /// The run's turn number in its session (`EventContext::turn`).
    turn: Mutex<Option<u32>>,
    plugins: Mutex<BTreeMap<String, Arc<PluginJournal>>>,
    /// The plugins a hook was attached for ([`RunJournal::plugin`]).
    attached: Mutex<std::collections::BTreeSet<String>>,
    /// Replaying: the plugins the recording has import logs for.
    recorded: std::collections::BTreeSet<String>,
    tools: Mutex<VecDeque<ToolRecord>>,
    calls: Mutex<Vec<CallRecord>>,
    /// Approval answers: recorded as given, or the recording's, taken in turn on replay.
    approvals: Mutex<VecDeque<ApprovalRecord>>,
    /// Replaying: tool calls the replay decided otherwise than the recording
    /// (ran or declined): the first [`MAX_TOOL_DIVERGENCES`], and how many more.
    tool_divergences: Mutex<(Vec<String>, u64)>,
    /// Resuming: the checkpoint's tool outcomes and approval answers not yet
    /// handed back (`tools` and `approvals` hold them all, and what comes live).
    resume: Option<Mutex<Resume>>,
    /// Messages delivered at turn boundaries: (the boundary's number, the texts).
    deliveries: Mutex<Vec<(u64, Vec<String>)>>,
    /// Turn boundaries passed so far.
    boundaries: std::sync::atomic::AtomicU64,
    /// Tool calls journaled as started ([`SafePoint::ToolStarted`]), the checkpoint's included.
    started: Mutex<Vec<String>>,
    /// Where the journal is made durable at safe points, once set.
    safe: safe::SafeSlot,
    /// Hook pauses passed, and those a resumed checkpoint had passed.
    pauses: pause::Pauses,
}

/// What a resuming journal has left to hand back.
#[derive(Debug, Default)]
struct Resume {
    tools: VecDeque<ToolRecord>,
    approvals: VecDeque<ApprovalRecord>,
    deliveries: VecDeque<(u64, Vec<String>)>,
    /// Tool calls the checkpoint holds as started without an outcome.
    interrupted: Vec<String>,
}

impl RunJournal {
    /// A journal that records a live run.
    pub fn recording() -> Arc<Self> {
        Arc::new(RunJournal {
            replaying: false,
            run_id: Mutex::new(None),
            turn: Mutex::new(None),
            plugins: Mutex::new(BTreeMap::new()),
            attached: Mutex::default(),
            recorded: std::collections::BTreeSet::new(),
            tools: Mutex::new(VecDeque::new()),
            calls: Mutex::new(Vec::new()),
            approvals: Mutex::new(VecDeque::new()),
            tool_divergences: Mutex::new((Vec::new(), 0)),
            resume: None,
            deliveries: Mutex::default(),
            boundaries: std::sync::atomic::AtomicU64::new(0),
            started: Mutex::default(),
            safe: safe::SafeSlot::default(),
            pauses: pause::Pauses::default(),
        })
    }

    /// A journal that resumes a run from `checkpoint`: the run id, turn,
    /// import values, tool outcomes and approval answers it holds are handed
    /// back in order (so the run re-executes up to the checkpoint without
    /// running a tool or waiting for an answer again, and its hooks commit no
    /// state again), then live values are taken and written after them. Its
    /// calls are those of the re-execution and of what comes after.
    pub fn resuming(checkpoint: &Checkpoint) -> Arc<Self> {
        // Calls begun before the checkpoint, per plugin that takes its values
        // from the journal (a detached call's record may not have reached
        // the journal then; its begin had).
        let calls: BTreeMap<&str, u64> = checkpoint.begun.iter().map(|(p, n)| (p.as_str(), *n)).collect();
        let mut names: std::collections::BTreeSet<&str> = calls.keys().copied().collect();
        names.extend(checkpoint.imports.keys().map(String::as_str));
        let plugins = names
            .into_iter()
            .map(|name| {
                let entries = checkpoint.imports.get(name).cloned().unwrap_or_default();
                let made = calls.get(name).copied().unwrap_or_default();
                let journal = PluginJournal::resuming(name, entries, made);
                journal.set_resumed_pending(checkpoint.pending.get(name).cloned().unwrap_or_default());
                journal.set_revision(checkpoint.revisions.get(name).copied());
                (name.to_string(), Arc::new(journal))
            })
            .collect();
        Arc::new(RunJournal {
            replaying: false,
            run_id: Mutex::new(Some(checkpoint.run_id.clone())),
            turn: Mutex::new(Some(checkpoint.turn.max(1))),
            plugins: Mutex::new(plugins),
            attached: Mutex::default(),
            recorded: checkpoint.imports.keys().cloned().collect(),
            tools: Mutex::new(checkpoint.tools.iter().cloned().collect()),
            calls: Mutex::new(Vec::new()),
            approvals: Mutex::new(checkpoint.approvals.iter().cloned().collect()),
            tool_divergences: Mutex::new((Vec::new(), 0)),
            resume: Some(Mutex::new(Resume {
                tools: checkpoint.tools.iter().cloned().collect(),
                approvals: checkpoint.approvals.iter().cloned().collect(),
                deliveries: checkpoint.deliveries.iter().cloned().collect(),
                interrupted: {
                    let done: std::collections::HashSet<&str> =
                        checkpoint.tools.iter().map(|t| t.tool_call_id.as_str()).collect();
                    checkpoint.started.iter().filter(|id| !done.contains(id.as_str())).cloned().collect()
                },
            })),
            deliveries: Mutex::new(checkpoint.deliveries.clone()),
            boundaries: std::sync::atomic::AtomicU64::new(0),
            started: Mutex::new(checkpoint.started.clone()),
            safe: safe::SafeSlot::default(),
            pauses: pause::Pauses::resumed(checkpoint.pauses, checkpoint.events),
        })
    }

    /// True when this journal resumes a run from a checkpoint.
    pub fn is_resuming(&self) -> bool {
        self.resume.is_some()
    }

    /// Resuming: true while the run re-executes what the checkpoint holds (a
    /// hook call, a tool outcome or an approval answer is left to hand back,
    /// or a hook pause the checkpoint had passed is yet to be passed again).
    /// False once it has gone past its checkpoint, and for other modes.
    pub fn catching_up(&self) -> bool {
        let Some(resume) = &self.resume else { return false };
        let left = {
            let r = lock(resume);
            !r.tools.is_empty() || !r.approvals.is_empty() || !r.deliveries.is_empty() || !r.interrupted.is_empty()
        };
        left || self.pauses_owed() || lock(&self.plugins).values().any(|p| p.catching_up())
    }

    /// Hook calls begun and not ended, over every plugin: detached calls
    /// (observe-only hooks, `request-start`) still running. A run that parks
    /// waits for them first, so their commits are made before its checkpoint.
    pub fn calls_in_flight(&self) -> u64 {
        lock(&self.plugins).values().map(|p| p.calls_in_flight()).fold(0, u64::saturating_add)
    }

    /// The outcome of tool call `tool_call_id` if the journal holds it:
    /// `None` when the tool must run (recording, or resuming past the
    /// checkpoint); replaying, `Some` with the recorded outcome or `None`
    /// inside when the recording has none (the tool does not run).
    pub fn recorded_tool(&self, tool_call_id: &str) -> Option<Option<ToolRecord>> {
        if self.replaying {
            return Some(self.take_tool(tool_call_id));
        }
        let resume = self.resume.as_ref()?;
        let mut r = lock(resume);
        if let Some(at) = r.tools.iter().position(|t| t.tool_call_id == tool_call_id) {
            return r.tools.remove(at).map(Some);
        }
        // Started before the checkpoint, with no outcome: cut off by a crash; not run twice.
        let at = r.interrupted.iter().position(|id| id == tool_call_id)?;
        r.interrupted.remove(at);
        drop(r);
        let record = ToolRecord {
            tool_call_id: tool_call_id.to_string(),
            name: String::new(),
            ran: true,
            content: INTERRUPTED_TOOL_MESSAGE.to_string(),
            success: false,
            reported_cost: None,
            cost_estimated: false,
            duration_ms: 0,
        };
        lock(&self.tools).push_back(record.clone());
        Some(Some(record))
    }

    /// Sets where the journal is made durable at safe points (once; later calls are ignored).
    pub fn with_safe_points(&self, points: Arc<dyn SafePoints>) {
        if self.safe.set(points.clone()) {
            for plugin in lock(&self.plugins).values() {
                plugin.set_safe_points(points.clone());
            }
        }
    }

    /// The run reached safe point `at`: true once the journal is durable
    /// there (also when no [`SafePoints`] are set, and while a resumed run
    /// re-executes its checkpoint, which is durable already). A
    /// [`SafePoint::ToolStarted`] journals the call as started first.
    pub async fn safe_point(&self, at: SafePoint<'_>) -> bool {
        if let SafePoint::ToolStarted(id) = at {
            lock(&self.started).push(id.to_string());
        }
        match self.safe.get() {
            Some(points) if !self.replaying && !self.catching_up() => points.reached(at).await,
            _ => true,
        }
    }

    /// Resuming: the checkpoint's answer to approval `id`, if it holds one
    /// (the answer is already among [`RunJournal::approvals`]).
    pub fn resumed_approval(&self, id: &str) -> Option<ApprovalRecord> {
        let mut r = lock(self.resume.as_ref()?);
        let at = r.approvals.iter().position(|a| a.id == id)?;
        r.approvals.remove(at)
    }

    /// The messages a turn boundary delivers, given the ones queued now
    /// (`live`: injected through the run's handle or by hooks). Recording,
    /// they are written down; resuming, a boundary the checkpoint passed
    /// delivers what it delivered then (the queue's re-executed hook
    /// injections are among those), and nothing while the run is still
    /// catching up; replaying, `live`.
    pub fn delivery(&self, live: Vec<String>) -> Vec<String> {
        let n = self.boundaries.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.replaying {
            return live;
        }
        if let Some(resume) = &self.resume {
            let recorded = {
                let mut r = lock(resume);
                match r.deliveries.front() {
                    Some((at, _)) if *at == n => r.deliveries.pop_front().map(|(_, texts)| texts),
                    _ => None,
                }
            };
            if let Some(texts) = recorded {
                return texts;
            }
            if self.catching_up() {
                return Vec::new();
            }
        }
        if !live.is_empty() {
            lock(&self.deliveries).push((n, live.clone()));
        }
        live
    }

    /// What the run journaled so far, with the model's `responses`, as a
    /// checkpoint a [`RunJournal::resuming`] journal takes (the calls are
    /// this journal's own: on a resumed run, the re-execution's and after).
    pub fn checkpoint(&self, responses: Vec<hookbox_providers::ModelResponse>) -> Checkpoint {
        // Each lock taken and let go in turn (a guard in a struct literal lives to its end).
        let PluginFields { begun, pending, revisions } = plugin_fields(&lock(&self.plugins));
        let deliveries = lock(&self.deliveries).clone();
        let started = lock(&self.started).clone();
        let run_id = lock(&self.run_id).clone().unwrap_or_default();
        let turn = lock(&self.turn).unwrap_or(1);
        Checkpoint {
            run_id,
            turn,
            responses,
            tools: self.tools(),
            imports: self.imports(),
            calls: self.calls(),
            approvals: self.approvals(),
            deliveries,
            begun,
            started,
            pending,
            revisions,
            pauses: self.hook_pauses_passed(),
            events: 0,
        }
    }

    /// [`RunJournal::checkpoint`] with each list holding only its entries
    /// past `from` (what a checkpoint of lengths `from` lacks), `responses`
    /// being the model's past `from.responses`: what a store appends to that
    /// checkpoint, read without copying what it has. `None` when a list is
    /// shorter than `from` says (the journal did not only grow since).
    pub fn checkpoint_after(
        &self,
        responses: Vec<hookbox_providers::ModelResponse>,
        from: &Lengths,
    ) -> Option<Checkpoint> {
        fn at(n: u64) -> Option<usize> {
            usize::try_from(n).ok()
        }
        let (PluginFields { begun, pending, revisions }, imports) = {
            let plugins = lock(&self.plugins);
            if from.imports.keys().any(|name| !plugins.contains_key(name)) {
                return None;
            }
            let fields = plugin_fields(&plugins);
            let mut imports = BTreeMap::new();
            for (name, p) in plugins.iter() {
                let added = p.entries_after(at(from.imports.get(name).copied().unwrap_or(0))?)?;
                if !added.is_empty() {
                    imports.insert(name.clone(), added);
                }
            }
            (fields, imports)
        };
        let tail = |n: u64, len: usize| at(n).filter(|n| *n <= len);
        let tools = {
            let tools = lock(&self.tools);
            tools.iter().skip(tail(from.tools, tools.len())?).cloned().collect()
        };
        let calls = lock(&self.calls).get(at(from.calls)?..)?.to_vec();
        let approvals = {
            let approvals = lock(&self.approvals);
            approvals.iter().skip(tail(from.approvals, approvals.len())?).cloned().collect()
        };
        let deliveries = lock(&self.deliveries).get(at(from.deliveries)?..)?.to_vec();
        let started = lock(&self.started).get(at(from.started)?..)?.to_vec();
        let run_id = lock(&self.run_id).clone().unwrap_or_default();
        let turn = lock(&self.turn).unwrap_or(1);
        Some(Checkpoint {
            run_id,
            turn,
            responses,
            tools,
            imports,
            calls,
            approvals,
            deliveries,
            begun,
            started,
            pending,
            revisions,
            pauses: self.hook_pauses_passed(),
            events: 0,
        })
    }

    /// A journal that replays `file`: the recorded run id, import values and tool outcomes.
    pub fn replaying(file: &JournalFile) -> Arc<Self> {
        let plugins = file
            .imports
            .iter()
            .map(|(name, entries)| (name.clone(), Arc::new(PluginJournal::new(name, true, entries.clone()))))
            .collect();
        Arc::new(RunJournal {
            replaying: true,
            run_id: Mutex::new(Some(file.run_id.clone())),
            turn: Mutex::new(Some(file.turn.max(1))),
            plugins: Mutex::new(plugins),
            attached: Mutex::default(),
            recorded: file.imports.keys().cloned().collect(),
            tools: Mutex::new(file.tools.iter().cloned().collect()),
            calls: Mutex::new(Vec::new()),
            approvals: Mutex::new(file.approvals.iter().cloned().collect()),
            tool_divergences: Mutex::new((Vec::new(), 0)),
            resume: None,
            deliveries: Mutex::default(),
            boundaries: std::sync::atomic::AtomicU64::new(0),
            started: Mutex::default(),
            safe: safe::SafeSlot::default(),
            pauses: pause::Pauses::default(),
        })
    }

    /// True when this journal replays a recording.
    pub fn is_replaying(&self) -> bool {
        self.replaying
    }

    /// The run's id: the recorded one on replay; else `fresh`, written down.
    pub fn run_id(&self, fresh: String) -> String {
        lock(&self.run_id).get_or_insert(fresh).clone()
    }

    /// The run's turn number in its session: the recorded one on replay; else
    /// `fresh`, written down.
    pub fn turn(&self, fresh: u32) -> u32 {
        *lock(&self.turn).get_or_insert(fresh)
    }

    /// `plugin`'s import journal (an empty one on replay if the recording has none).
    pub fn plugin(&self, plugin: &str) -> Arc<PluginJournal> {
        lock(&self.attached).insert(plugin.to_string());
        let journal = lock(&self.plugins)
            .entry(plugin.to_string())
            .or_insert_with(|| Arc::new(PluginJournal::new(plugin, self.replaying, Vec::new())))
            .clone();
        if let Some(points) = self.safe.get() {
            journal.set_safe_points(points.clone());
        }
        journal
    }

    /// Recording: writes down a tool outcome.
    pub fn push_tool(&self, record: ToolRecord) {
        if !self.replaying {
            lock(&self.tools).push_back(record);
        }
    }

    /// Replaying: the recorded outcome of the call `tool_call_id` (the first
    /// not yet used), if the recording has one.
    pub fn take_tool(&self, tool_call_id: &str) -> Option<ToolRecord> {
        let mut tools = lock(&self.tools);
        let at = tools.iter().position(|t| t.tool_call_id == tool_call_id)?;
        tools.remove(at)
    }

    /// Recording: writes down an approval's answer.
    pub fn push_approval(&self, record: ApprovalRecord) {
        if !self.replaying {
            lock(&self.approvals).push_back(record);
        }
    }

    /// Replaying: the recorded answer to approval `id`, if the recording has one.
    pub fn take_approval(&self, id: &str) -> Option<ApprovalRecord> {
        let mut approvals = lock(&self.approvals);
        let at = approvals.iter().position(|a| a.id == id)?;
        approvals.remove(at)
    }

    /// Every approval answer recorded.
    pub fn approvals(&self) -> Vec<ApprovalRecord> {
        lock(&self.approvals).iter().cloned().collect()
    }

    /// Writes down one hook call's outcome.
    pub fn record_call(&self, mut record: CallRecord) {
        // A hook's long strings (a 5 MB `replace-result`) are kept as a prefix and
        // a hash of the whole: the journal stays small, and a replay, whose calls
        // go through the same digest, still sees any difference.
        record.directive = record.directive.map(|d| d.map_text(digest_long));
        lock(&self.calls).push(record);
    }

    /// Every hook call so far, in order.
    pub fn calls(&self) -> Vec<CallRecord> {
        lock(&self.calls).clone()
    }

    /// Every plugin's import values.
    pub fn imports(&self) -> BTreeMap<String, Vec<ImportValue>> {
        lock(&self.plugins).iter().map(|(name, j)| (name.clone(), j.entries())).collect()
    }

    /// How many times a plugin's import values were cut back since the
    /// run began (a resumed run's plugin asked otherwise than its
    /// checkpoint). While it stays the same, every list of
    /// [`RunJournal::checkpoint`] only grows: a checkpoint extends the one
    /// before it, so a store may append what is new instead of writing all.
    pub fn rewrites(&self) -> u64 {
        lock(&self.plugins).values().map(|j| j.rewrites()).fold(0, u64::saturating_add)
    }

    /// Recording: plugins whose import log hit [`MAX_PLUGIN_ENTRIES`], with how many values were not written.
    pub fn cut(&self) -> BTreeMap<String, u64> {
        lock(&self.plugins).iter().filter(|(_, j)| j.dropped() > 0).map(|(n, j)| (n.clone(), j.dropped())).collect()
    }

    /// Every tool outcome recorded.
    pub fn tools(&self) -> Vec<ToolRecord> {
        lock(&self.tools).iter().cloned().collect()
    }

    /// Replaying: notes that a tool call went otherwise than in the
    /// recording (the first [`MAX_TOOL_DIVERGENCES`] are kept, the rest counted).
    pub fn note_tool_divergence(&self, what: String) {
        if self.replaying || self.resume.is_some() {
            let mut d = lock(&self.tool_divergences);
            if d.0.len() < MAX_TOOL_DIVERGENCES {
                d.0.push(what);
            } else {
                d.1 += 1;
            }
        }
    }

    /// Replaying: the first import divergence of each plugin both the
    /// recording and the replay have (see [`PluginJournal::divergence`]),
    /// then every tool call the replay ran or declined otherwise.
    pub fn divergences(&self) -> Vec<String> {
        let attached = lock(&self.attached).clone();
        let mut out: Vec<String> = lock(&self.plugins)
            .iter()
            .filter(|(n, _)| attached.contains(*n) && self.recorded.contains(*n))
            .filter_map(|(_, j)| j.divergence())
            .collect();
        let tools = lock(&self.tool_divergences);
        out.extend(tools.0.iter().cloned());
        if tools.1 > 0 {
            out.push(format!("{} more tool call(s) went otherwise (not listed)", tools.1));
        }
        out
    }
}

/// Characters of a directive string the journal keeps whole; a longer one is
/// kept as its first [`DIGEST_PREFIX_CHARS`] characters and a digest.
pub const JOURNAL_STRING_CHARS: usize = 4_096;

/// Characters of a long string the journal keeps before its digest.
pub const DIGEST_PREFIX_CHARS: usize = 1_024;

/// `s` as the journal keeps it: whole up to [`JOURNAL_STRING_CHARS`]
/// characters, else its first [`DIGEST_PREFIX_CHARS`] characters, then
/// `…[N chars, blake3 HEX]` (the length and BLAKE3 hash of the whole).
pub fn digest_long(s: &str) -> String {
    let chars = s.chars().count();
    if chars <= JOURNAL_STRING_CHARS {
        return s.to_string();
    }
    let prefix: String = s.chars().take(DIGEST_PREFIX_CHARS).collect();
    format!("{prefix}…[{chars} chars, blake3 {}]", blake3::hash(s.as_bytes()).to_hex())
}

/// The chain writes every hook call's outcome to the run's journal.
impl CallSink for RunJournal {
    fn push_call(&self, record: CallRecord) {
        self.record_call(record);
    }
}

#[cfg(test)]
mod tests;
