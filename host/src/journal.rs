//! The run journal: what a run got from outside that a replay must give it
//! again, and what its hooks decided, so `hookbox replay JOURNAL` can run the
//! run again and say whether every hook decided the same.
//!
//! Seed 003 (`agents.now()`, `agents.uuid4()`, `agents.random()`,
//! `agents.sleep()`): a value that would differ between two executions is
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
//! in order. When a replayed plugin asks for something the journal does not
//! hold at that point (it asks for `random` where the recording has `now`, or
//! asks more often), it gets a live value and the plugin's journal notes the
//! first such divergence; its directives will usually differ too.
//!
//! A plugin's import log is capped at [`MAX_PLUGIN_ENTRIES`] entries; past
//! that, values are still live but no longer written, and the journal says
//! the plugin's log was cut (a replay of that plugin cannot be exact).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::config::Manifest;
use crate::event::Directive;
use crate::hooks::FailureKind;

/// The `format` field of a journal file.
pub const JOURNAL_FORMAT: &str = "hookbox-journal";
/// The journal layout version this build writes and reads.
pub const JOURNAL_VERSION: u32 = 1;
/// Most import values kept per plugin per run (about 100 bytes each in the file).
pub const MAX_PLUGIN_ENTRIES: usize = 100_000;
/// The largest journal file `hookbox replay` reads: 1 GiB.
pub const MAX_JOURNAL_BYTES: u64 = 1 << 30;

/// One value a hook got from a journaled import.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "import", rename_all = "kebab-case")]
pub enum ImportValue {
    /// `hookbox:hooks/host.now`: seconds and nanoseconds since the Unix epoch.
    Now {
        /// Whole seconds.
        seconds: u64,
        /// Nanoseconds past `seconds`.
        nanoseconds: u32,
    },
    /// `hookbox:hooks/host.random`.
    Random {
        /// The number.
        value: u64,
    },
    /// `hookbox:hooks/host.uuid`.
    Uuid {
        /// The hyphenated UUID.
        value: String,
    },
    /// `hookbox:hooks/host.sleep`: the wait asked for, in milliseconds.
    Sleep {
        /// Milliseconds.
        ms: u64,
    },
    /// `hookbox:hooks/host.get-state`: the state the store held.
    State {
        /// The state, if one was saved.
        state: Option<JournalState>,
    },
    /// `wasi:clocks/wall-clock.now`.
    WallClock {
        /// Whole seconds since the Unix epoch.
        seconds: u64,
        /// Nanoseconds past `seconds`.
        nanoseconds: u32,
    },
    /// `wasi:clocks/monotonic-clock.now`, in nanoseconds.
    MonotonicClock {
        /// Nanoseconds since an arbitrary origin (this process's first reading).
        ns: u64,
    },
    /// Bytes from `wasi:random/random` (`insecure: false`) or `wasi:random/insecure`.
    RandomBytes {
        /// True for the insecure generator.
        insecure: bool,
        /// The bytes, as lowercase hex.
        hex: String,
    },
    /// `wasi:random/insecure-seed`, fixed when an instance is created.
    InsecureSeed {
        /// The low 64 bits.
        low: u64,
        /// The high 64 bits.
        high: u64,
    },
}

impl ImportValue {
    /// The import's name in reports, e.g. `now` or `wasi:clocks/wall-clock`.
    pub fn import(&self) -> &'static str {
        match self {
            ImportValue::Now { .. } => "now",
            ImportValue::Random { .. } => "random",
            ImportValue::Uuid { .. } => "uuid",
            ImportValue::Sleep { .. } => "sleep",
            ImportValue::State { .. } => "get-state",
            ImportValue::WallClock { .. } => "wasi:clocks/wall-clock",
            ImportValue::MonotonicClock { .. } => "wasi:clocks/monotonic-clock",
            ImportValue::RandomBytes { insecure: false, .. } => "wasi:random/random",
            ImportValue::RandomBytes { insecure: true, .. } => "wasi:random/insecure",
            ImportValue::InsecureSeed { .. } => "wasi:random/insecure-seed",
        }
    }
}

impl ImportValue {
    /// The import with the argument that tells two calls apart (`sleep(5 ms)`,
    /// `wasi:random/random (16 bytes)`), for reports.
    pub fn what(&self) -> String {
        match self {
            ImportValue::Sleep { ms } => format!("sleep({ms} ms)"),
            ImportValue::RandomBytes { hex, .. } => format!("{} ({} bytes)", self.import(), hex.len() / 2),
            _ => self.import().to_string(),
        }
    }

    /// Checks a value read from a file: nanoseconds below 10^9, hex that is
    /// hex, a UUID that is one.
    fn check(&self) -> Result<(), String> {
        match self {
            ImportValue::Now { nanoseconds, .. } | ImportValue::WallClock { nanoseconds, .. }
                if *nanoseconds >= 1_000_000_000 =>
            {
                Err(format!("`nanoseconds` {nanoseconds} is not below 1,000,000,000"))
            }
            ImportValue::RandomBytes { hex, .. } | ImportValue::State { state: Some(JournalState { hex, .. }) }
                if from_hex(hex).is_none() =>
            {
                Err(format!("`hex` is not an even-length hex string: {}", truncate(hex, 40)))
            }
            ImportValue::Uuid { value } if uuid::Uuid::parse_str(value).is_err() => {
                Err(format!("`value` {} is not a UUID", truncate(value, 60)))
            }
            _ => Ok(()),
        }
    }
}

/// A hook state as journaled: the version that wrote it and its bytes as hex.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalState {
    /// The plugin version that wrote it.
    pub version: String,
    /// The bytes, as lowercase hex.
    pub hex: String,
}

/// Lowercase hex of `bytes`.
pub fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// The bytes of `hex`, or `None` if it is not an even-length hex string.
pub fn from_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len()).step_by(2).map(|i| hex.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok())).collect()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every update is a single push or index bump: a panic cannot leave it half-done.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// One plugin's import values for one run.
#[derive(Debug)]
pub struct PluginJournal {
    plugin: String,
    replaying: bool,
    inner: Mutex<PluginInner>,
}

#[derive(Debug, Default)]
struct PluginInner {
    /// Recording: what was handed out. Replaying: what the recording holds.
    entries: Vec<ImportValue>,
    /// Replaying: the next entry to hand out.
    next: usize,
    /// The first point where a replay could not use the recording.
    divergence: Option<String>,
    /// Recording: values handed out but not written (over the cap).
    dropped: u64,
}

impl PluginJournal {
    fn new(plugin: &str, replaying: bool, entries: Vec<ImportValue>) -> Self {
        PluginJournal {
            plugin: plugin.to_string(),
            replaying,
            inner: Mutex::new(PluginInner { entries, ..PluginInner::default() }),
        }
    }

    /// The value for one import call. Recording: `live()`, written down.
    /// Replaying: the next recorded value if `fits` it (the same import, the
    /// same length), else `live()` and the divergence is noted.
    pub fn take(&self, fits: impl Fn(&ImportValue) -> bool, live: impl FnOnce() -> ImportValue) -> ImportValue {
        let mut inner = lock(&self.inner);
        if !self.replaying {
            let value = live();
            if inner.entries.len() < MAX_PLUGIN_ENTRIES {
                inner.entries.push(value.clone());
            } else {
                inner.dropped += 1;
            }
            return value;
        }
        if inner.divergence.is_none() {
            let at = inner.next;
            match inner.entries.get(at) {
                Some(recorded) if fits(recorded) => {
                    let value = recorded.clone();
                    inner.next += 1;
                    return value;
                }
                recorded => {
                    let value = live();
                    inner.divergence = Some(match recorded {
                        Some(r) => format!(
                            "plugin `{}` asked for `{}` at import {} where the journal has `{}`",
                            self.plugin,
                            value.what(),
                            at + 1,
                            r.what()
                        ),
                        None => format!(
                            "plugin `{}` asked for `{}` past the journal's {} import value(s)",
                            self.plugin,
                            value.what(),
                            inner.entries.len()
                        ),
                    });
                    return value;
                }
            }
        }
        live()
    }

    /// The values recorded so far (recording) or held (replaying).
    pub fn entries(&self) -> Vec<ImportValue> {
        lock(&self.inner).entries.clone()
    }

    /// Replaying: the first point where the plugin's imports left the
    /// recording, or, if it never did, the recorded values it did not ask for.
    pub fn divergence(&self) -> Option<String> {
        let inner = lock(&self.inner);
        if let Some(d) = &inner.divergence {
            return Some(d.clone());
        }
        let unused = inner.entries.get(inner.next..).unwrap_or_default();
        match unused.first() {
            Some(first) if self.replaying => Some(format!(
                "plugin `{}` did not ask for {} recorded import value(s), from import {} (`{}`) on",
                self.plugin,
                unused.len(),
                inner.next + 1,
                first.what()
            )),
            _ => None,
        }
    }

    /// Replaying: recorded values the plugin never asked for.
    pub fn unused(&self) -> usize {
        let inner = lock(&self.inner);
        if self.replaying { inner.entries.len().saturating_sub(inner.next) } else { 0 }
    }

    /// Recording: values handed out past [`MAX_PLUGIN_ENTRIES`] and not written.
    pub fn dropped(&self) -> u64 {
        lock(&self.inner).dropped
    }

    /// `host.now`.
    pub fn now(&self) -> (u64, u32) {
        let v = self.take(
            |v| matches!(v, ImportValue::Now { .. }),
            || {
                let (seconds, nanoseconds) = unix_now();
                ImportValue::Now { seconds, nanoseconds }
            },
        );
        match v {
            ImportValue::Now { seconds, nanoseconds } => (seconds, nanoseconds.min(999_999_999)),
            _ => unix_now(),
        }
    }

    /// `host.random`.
    pub fn random(&self) -> u64 {
        match self.take(|v| matches!(v, ImportValue::Random { .. }), || ImportValue::Random { value: rand::random() }) {
            ImportValue::Random { value } => value,
            _ => rand::random(),
        }
    }

    /// `host.uuid`.
    pub fn uuid(&self) -> String {
        let live = || ImportValue::Uuid { value: uuid::Uuid::new_v4().to_string() };
        match self.take(|v| matches!(v, ImportValue::Uuid { .. }), live) {
            ImportValue::Uuid { value } => value,
            _ => uuid::Uuid::new_v4().to_string(),
        }
    }

    /// `host.sleep(ms)`: notes the wait (the caller waits).
    pub fn sleep(&self, ms: u64) {
        self.take(|v| matches!(v, ImportValue::Sleep { ms: m } if *m == ms), || ImportValue::Sleep { ms });
    }

    /// `host.get-state`: the recorded state on replay, `live()` otherwise.
    pub fn state(&self, live: impl FnOnce() -> Option<(String, Vec<u8>)>) -> Option<(String, Vec<u8>)> {
        let v = self.take(
            |v| matches!(v, ImportValue::State { .. }),
            || ImportValue::State { state: live().map(|(version, data)| JournalState { version, hex: to_hex(&data) }) },
        );
        match v {
            ImportValue::State { state } => state.and_then(|s| from_hex(&s.hex).map(|data| (s.version, data))),
            _ => None,
        }
    }

    /// The seed `wasi:random/insecure-seed` returns for a new instance.
    pub fn insecure_seed(&self) -> u128 {
        let live = || {
            let seed: u128 = rand::random();
            ImportValue::InsecureSeed { low: seed as u64, high: (seed >> 64) as u64 }
        };
        match self.take(|v| matches!(v, ImportValue::InsecureSeed { .. }), live) {
            ImportValue::InsecureSeed { low, high } => (u128::from(high) << 64) | u128::from(low),
            _ => rand::random(),
        }
    }

    fn random_bytes(&self, insecure: bool, buf: &mut [u8]) {
        let n = buf.len();
        let v = self.take(
            |v| matches!(v, ImportValue::RandomBytes { insecure: i, hex } if *i == insecure && hex.len() == 2 * n),
            || {
                let mut live = vec![0u8; n];
                rand::fill(&mut live[..]);
                ImportValue::RandomBytes { insecure, hex: to_hex(&live) }
            },
        );
        match v {
            ImportValue::RandomBytes { hex, .. } => match from_hex(&hex) {
                Some(bytes) if bytes.len() == n => buf.copy_from_slice(&bytes),
                _ => rand::fill(buf),
            },
            _ => rand::fill(buf),
        }
    }
}

fn unix_now() -> (u64, u32) {
    let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
    (d.as_secs(), d.subsec_nanos())
}

/// `wasi:clocks/wall-clock` through a plugin's journal.
pub struct JournalWallClock(pub Arc<PluginJournal>);

impl wasmtime_wasi::HostWallClock for JournalWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        let v = self.0.take(
            |v| matches!(v, ImportValue::WallClock { .. }),
            || {
                let (seconds, nanoseconds) = unix_now();
                ImportValue::WallClock { seconds, nanoseconds }
            },
        );
        match v {
            ImportValue::WallClock { seconds, nanoseconds } => {
                Duration::from_secs(seconds).saturating_add(Duration::from_nanos(u64::from(nanoseconds)))
            }
            _ => SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default(),
        }
    }
}

/// `wasi:clocks/monotonic-clock` through a plugin's journal: nanoseconds since
/// this process first read it.
pub struct JournalMonotonicClock(pub Arc<PluginJournal>);

fn monotonic_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

impl wasmtime_wasi::HostMonotonicClock for JournalMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        match self.0.take(
            |v| matches!(v, ImportValue::MonotonicClock { .. }),
            || ImportValue::MonotonicClock { ns: monotonic_ns() },
        ) {
            ImportValue::MonotonicClock { ns } => ns,
            _ => monotonic_ns(),
        }
    }
}

/// `wasi:random/random` or `wasi:random/insecure` through a plugin's journal.
pub struct JournalRng {
    journal: Arc<PluginJournal>,
    insecure: bool,
}

impl JournalRng {
    /// The secure (`insecure: false`) or insecure generator of `journal`'s plugin.
    pub fn new(journal: Arc<PluginJournal>, insecure: bool) -> Self {
        JournalRng { journal, insecure }
    }
}

impl rand::TryRng for JournalRng {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        self.journal.random_bytes(self.insecure, &mut b);
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.journal.random_bytes(self.insecure, &mut b);
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.journal.random_bytes(self.insecure, dst);
        Ok(())
    }
}

/// What one tool call produced, as journaled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub name: String,
    /// False when a hook declined the call (no tool ran).
    pub ran: bool,
    /// The tool's result text, before the result cap.
    pub content: String,
    /// False when the tool failed or refused.
    pub success: bool,
    /// What the tool reported spending, in US dollars.
    pub reported_cost: Option<f64>,
    /// How long it took, in milliseconds (hooks see it in `tool-call-result`).
    pub duration_ms: u64,
}

/// One hook call's outcome, as journaled: a directive (`continue` included) or a failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The plugin.
    pub plugin: String,
    /// The event's WIT name.
    pub event: String,
    /// The event's iteration, if it has one.
    pub iteration: Option<u32>,
    /// The directive the hook returned, if the call succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub directive: Option<Directive>,
    /// The failure kind, if the call failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<FailureKind>,
}

impl CallRecord {
    /// `skip-tool("…")`, `continue` or `failed (trap)`, for reports.
    pub fn outcome(&self) -> String {
        match (&self.directive, self.failure) {
            (_, Some(kind)) => format!("failed ({})", kind.as_str()),
            (Some(d), None) => match serde_json::to_value(d).ok().and_then(|v| v.get("value").cloned()) {
                Some(serde_json::Value::Null) | None => d.action().to_string(),
                Some(v) => format!("{}({})", d.action(), truncate(&v.to_string(), 200)),
            },
            (None, None) => "nothing".to_string(),
        }
    }

    /// `plugin `p` at before-tool-call (iteration 1)`.
    pub fn place(&self) -> String {
        match self.iteration {
            Some(i) => format!("plugin `{}` at `{}` (iteration {i})", self.plugin, self.event),
            None => format!("plugin `{}` at `{}`", self.plugin, self.event),
        }
    }

    fn same(&self, other: &CallRecord) -> bool {
        self.plugin == other.plugin
            && self.event == other.event
            && self.iteration == other.iteration
            && self.directive == other.directive
            && self.failure == other.failure
    }
}

/// The first `max` characters of `s`, with `…` when it was cut.
fn truncate(s: &str, max: usize) -> String {
    let head = crate::hooks::wasm::truncate_chars(s, max);
    if head.len() < s.len() { format!("{head}…") } else { s.to_string() }
}

/// The journal of one run in flight, shared by the agent and its hooks.
#[derive(Debug)]
pub struct RunJournal {
    replaying: bool,
    run_id: Mutex<Option<String>>,
    plugins: Mutex<BTreeMap<String, Arc<PluginJournal>>>,
    /// The plugins a hook was attached for ([`RunJournal::plugin`]).
    attached: Mutex<std::collections::BTreeSet<String>>,
    /// Replaying: the plugins the recording has import logs for.
    recorded: std::collections::BTreeSet<String>,
    tools: Mutex<VecDeque<ToolRecord>>,
    calls: Mutex<Vec<CallRecord>>,
}

impl RunJournal {
    /// A journal that records a live run.
    pub fn recording() -> Arc<Self> {
        Arc::new(RunJournal {
            replaying: false,
            run_id: Mutex::new(None),
            plugins: Mutex::new(BTreeMap::new()),
            attached: Mutex::default(),
            recorded: std::collections::BTreeSet::new(),
            tools: Mutex::new(VecDeque::new()),
            calls: Mutex::new(Vec::new()),
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
            plugins: Mutex::new(plugins),
            attached: Mutex::default(),
            recorded: file.imports.keys().cloned().collect(),
            tools: Mutex::new(file.tools.iter().cloned().collect()),
            calls: Mutex::new(Vec::new()),
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

    /// `plugin`'s import journal (an empty one on replay if the recording has none).
    pub fn plugin(&self, plugin: &str) -> Arc<PluginJournal> {
        lock(&self.attached).insert(plugin.to_string());
        lock(&self.plugins)
            .entry(plugin.to_string())
            .or_insert_with(|| Arc::new(PluginJournal::new(plugin, self.replaying, Vec::new())))
            .clone()
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

    /// Writes down one hook call's outcome.
    pub fn push_call(&self, record: CallRecord) {
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

    /// Recording: plugins whose import log hit [`MAX_PLUGIN_ENTRIES`], with how many values were not written.
    pub fn cut(&self) -> BTreeMap<String, u64> {
        lock(&self.plugins).iter().filter(|(_, j)| j.dropped() > 0).map(|(n, j)| (n.clone(), j.dropped())).collect()
    }

    /// Every tool outcome recorded.
    pub fn tools(&self) -> Vec<ToolRecord> {
        lock(&self.tools).iter().cloned().collect()
    }

    /// Replaying: the first import divergence of each plugin both the
    /// recording and the replay have (see [`PluginJournal::divergence`]).
    pub fn divergences(&self) -> Vec<String> {
        let attached = lock(&self.attached).clone();
        lock(&self.plugins)
            .iter()
            .filter(|(n, _)| attached.contains(*n) && self.recorded.contains(*n))
            .filter_map(|(_, j)| j.divergence())
            .collect()
    }
}

/// A journal file (`hookbox run --journal FILE`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalFile {
    /// Always [`JOURNAL_FORMAT`].
    pub format: String,
    /// [`JOURNAL_VERSION`].
    pub version: u32,
    /// The hookbox version that wrote it.
    pub hookbox_version: String,
    /// The run's id.
    pub run_id: String,
    /// The session given with `--session`, if any.
    pub session_id: Option<String>,
    /// The user's prompt.
    pub prompt: String,
    /// The provider hooks saw in `run-start`, e.g. `anthropic`.
    pub provider: String,
    /// The model hooks saw, e.g. `claude-sonnet-4-5`.
    pub model: String,
    /// The agent settings and plugins (absolute paths, config, limits, grants).
    pub manifest: Manifest,
    /// Each plugin's component file as loaded, by name: its BLAKE3 hash (hex).
    pub plugin_blake3: BTreeMap<String, String>,
    /// Every model response, as a `hookbox run --record` session.
    pub responses: serde_json::Value,
    /// Every tool outcome, in order.
    pub tools: Vec<ToolRecord>,
    /// Each plugin's import values, in call order.
    pub imports: BTreeMap<String, Vec<ImportValue>>,
    /// Plugins whose import log was cut at [`MAX_PLUGIN_ENTRIES`], with how many values were not written.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub imports_cut: BTreeMap<String, u64>,
    /// Every hook call's outcome, in order.
    pub calls: Vec<CallRecord>,
    /// How the run ended (`end_turn`, `error`, …); a replay that ends otherwise differs.
    pub stop_reason: crate::agent::StopReason,
}

/// The model of a replay: the journal's recorded responses, under the
/// provider and model names the recorded run had (hooks see them in
/// `run-start` and `request-start`, and prices follow the model).
pub struct JournalProvider {
    inner: crate::provider::replay::ReplayProvider,
    provider: String,
    model: String,
}

impl JournalProvider {
    /// The responses of `file`, labelled `path` in errors.
    ///
    /// Errors: the journal's `responses` is not a recorded session.
    pub fn new(file: &JournalFile, path: &Path) -> Result<Self, crate::provider::replay::ReplayError> {
        let inner = crate::provider::replay::ReplayProvider::from_json(&file.responses, path)?;
        Ok(JournalProvider { inner, provider: file.provider.clone(), model: file.model.clone() })
    }
}

#[async_trait::async_trait]
impl crate::model::ModelProvider for JournalProvider {
    fn name(&self) -> &str {
        &self.provider
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn wire_format(&self) -> Option<crate::provider::WireFormat> {
        None
    }

    async fn complete(
        &self,
        request: &crate::model::ModelRequest,
    ) -> Result<crate::model::ModelResponse, crate::model::ProviderError> {
        self.inner.complete(request).await
    }
}

/// Errors reading a journal file; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    /// The file cannot be read.
    #[error("cannot read journal {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a journal this build reads.
    #[error("{path} is not a hookbox journal: {what}")]
    Shape {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        what: String,
    },
}

impl JournalFile {
    /// Reads and checks a journal file.
    ///
    /// Errors: [`JournalError::Io`]; [`JournalError::Shape`] when it is not
    /// JSON, not a `hookbox-journal`, of another version, or a field is wrong.
    pub fn load(path: &Path) -> Result<JournalFile, JournalError> {
        let shape = |what: String| JournalError::Shape { path: path.to_path_buf(), what };
        let meta = std::fs::metadata(path).map_err(|source| JournalError::Io { path: path.to_path_buf(), source })?;
        if !meta.is_file() {
            return Err(shape("not a regular file".into()));
        }
        if meta.len() > MAX_JOURNAL_BYTES {
            return Err(shape(format!("{} bytes, over the {MAX_JOURNAL_BYTES}-byte limit", meta.len())));
        }
        let text =
            std::fs::read_to_string(path).map_err(|source| JournalError::Io { path: path.to_path_buf(), source })?;
        let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| shape(format!("not JSON: {e}")))?;
        match value.get("format").and_then(serde_json::Value::as_str) {
            Some(JOURNAL_FORMAT) => {}
            Some(other) => return Err(shape(format!("`format` is `{other}`, expected `{JOURNAL_FORMAT}`"))),
            None => return Err(shape(format!("no `format: \"{JOURNAL_FORMAT}\"` field"))),
        }
        match value.get("version").and_then(serde_json::Value::as_u64) {
            Some(v) if v == u64::from(JOURNAL_VERSION) => {}
            Some(v) => return Err(shape(format!("version {v}; this build reads version {JOURNAL_VERSION}"))),
            None => return Err(shape("no `version` number".into())),
        }
        let file: JournalFile = serde_json::from_value(value).map_err(|e| shape(e.to_string()))?;
        file.check().map_err(shape)?;
        Ok(file)
    }

    /// Checks what serde cannot: import values, event names, and that every
    /// plugin with imports or calls is one of the journal's plugins.
    fn check(&self) -> Result<(), String> {
        let names: std::collections::BTreeSet<String> =
            self.manifest.plugins.iter().map(crate::config::PluginEntry::display_name).collect();
        for (plugin, values) in &self.imports {
            if !names.contains(plugin) {
                return Err(format!("imports: plugin `{plugin}` is not one of the journal's plugins"));
            }
            for (i, v) in values.iter().enumerate() {
                v.check().map_err(|e| format!("imports.{plugin}[{i}] ({}): {e}", v.import()))?;
            }
        }
        let kinds: Vec<&str> = crate::event::EventKind::ALL.iter().map(|k| k.as_str()).collect();
        for (i, c) in self.calls.iter().enumerate() {
            if !names.contains(&c.plugin) {
                return Err(format!("calls[{i}]: plugin `{}` is not one of the journal's plugins", c.plugin));
            }
            if !kinds.contains(&c.event.as_str()) {
                return Err(format!(
                    "calls[{i}]: `{}` is not an event (expected one of {})",
                    c.event,
                    kinds.join(", ")
                ));
            }
            if c.directive.is_some() == c.failure.is_some() {
                return Err(format!("calls[{i}]: expected exactly one of `directive` and `failure`"));
            }
        }
        Ok(())
    }

    /// Writes the journal to `path` through a temporary file, so a failed
    /// write never leaves half a journal.
    ///
    /// Errors: the file cannot be written.
    pub fn write(&self, path: &Path) -> std::io::Result<()> {
        crate::output::write_atomically(path, &self.to_text()?)
    }

    /// The journal as pretty-printed JSON.
    ///
    /// Errors: it cannot be serialised (a non-finite number).
    pub fn to_text(&self) -> std::io::Result<String> {
        serde_json::to_string_pretty(self).map_err(std::io::Error::other)
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
                format!("hook call {}: {}: recorded {}, replayed {}", self.call, r.place(), r.outcome(), p.outcome())
            }
            (Some(r), Some(p)) => format!(
                "hook call {}: recorded {} → {}, replayed {} → {}",
                self.call,
                r.place(),
                r.outcome(),
                p.place(),
                p.outcome()
            ),
            (Some(r), None) => format!(
                "hook call {}: recorded {} → {}, but the replay made no such call",
                self.call,
                r.place(),
                r.outcome()
            ),
            (None, Some(p)) => format!(
                "hook call {}: the replay made a call the recording does not have: {} → {}",
                self.call,
                p.place(),
                p.outcome()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn call(plugin: &str, directive: Directive) -> CallRecord {
        CallRecord {
            plugin: plugin.into(),
            event: "before-tool-call".into(),
            iteration: Some(1),
            directive: Some(directive),
            failure: None,
        }
    }

    #[test]
    fn hex_round_trips_and_rejects_bad_input() {
        assert_eq!(to_hex(&[0, 1, 0xab, 0xff]), "0001abff");
        assert_eq!(from_hex("0001abff"), Some(vec![0, 1, 0xab, 0xff]));
        assert_eq!(from_hex("abc"), None);
        assert_eq!(from_hex("zz"), None);
        assert_eq!(from_hex("é1"), None);
    }

    #[test]
    fn a_recording_journal_hands_out_live_values_and_a_replay_hands_them_back() {
        let rec = PluginJournal::new("p", false, Vec::new());
        let t = rec.now();
        let r = rec.random();
        let u = rec.uuid();
        rec.sleep(5);
        let mut bytes = [0u8; 16];
        rec.random_bytes(false, &mut bytes);
        let seed = rec.insecure_seed();
        assert_eq!(rec.entries().len(), 6);
        let replay = PluginJournal::new("p", true, rec.entries());
        assert_eq!(replay.now(), t);
        assert_eq!(replay.random(), r);
        assert_eq!(replay.uuid(), u);
        replay.sleep(5);
        let mut again = [0u8; 16];
        replay.random_bytes(false, &mut again);
        assert_eq!(again, bytes);
        assert_eq!(replay.insecure_seed(), seed);
        assert_eq!(replay.divergence(), None);
        assert_eq!(replay.unused(), 0);
    }

    #[test]
    fn a_replay_asking_for_something_else_gets_a_live_value_and_a_divergence() {
        let rec = PluginJournal::new("p", false, Vec::new());
        rec.now();
        let replay = PluginJournal::new("p", true, rec.entries());
        let _ = replay.random();
        let d = replay.divergence().expect("divergence noted");
        assert!(d.contains("asked for `random` at import 1 where the journal has `now`"), "{d}");
        let replay = PluginJournal::new("p", true, Vec::new());
        let _ = replay.uuid();
        assert!(replay.divergence().expect("noted").contains("past the journal's 0 import value(s)"));
    }

    #[test]
    fn state_is_replayed_whatever_the_store_holds_now() {
        let rec = PluginJournal::new("p", false, Vec::new());
        let got = rec.state(|| Some(("1".into(), b"{\"n\":2}".to_vec())));
        assert_eq!(got, Some(("1".into(), b"{\"n\":2}".to_vec())));
        let replay = PluginJournal::new("p", true, rec.entries());
        let got = replay.state(|| panic!("a replay must not read the store"));
        assert_eq!(got, Some(("1".into(), b"{\"n\":2}".to_vec())));
    }

    #[test]
    fn the_import_log_is_capped() {
        let rec = PluginJournal::new("p", false, Vec::new());
        for _ in 0..MAX_PLUGIN_ENTRIES + 3 {
            rec.random();
        }
        assert_eq!(rec.entries().len(), MAX_PLUGIN_ENTRIES);
        assert_eq!(rec.dropped(), 3);
    }

    #[test]
    fn compare_finds_the_first_difference() {
        let a = vec![call("x", Directive::Continue), call("y", Directive::SkipTool(Some("no".into())))];
        assert!(compare(&a, &a).same());
        let b = vec![call("x", Directive::Continue), call("y", Directive::Continue)];
        let d = compare(&a, &b).first_difference.expect("differs");
        assert_eq!((d.call, d.plugin_call), (2, 1));
        assert_eq!(
            d.describe(),
            "hook call 2: plugin `y` at `before-tool-call` (iteration 1): recorded skip-tool(\"no\"), replayed continue"
        );
        // A plugin missing from the replay is named, not compared call by call.
        let c = compare(&a, &a[..1]);
        assert_eq!(c.first_difference, None);
        assert_eq!(c.missing_plugins, vec!["y".to_string()]);
        assert!(!c.same());
        // An added plugin before the others does not shift their calls.
        let added = vec![call("z", Directive::Continue), a[0].clone(), a[1].clone()];
        let c = compare(&a, &added);
        assert_eq!((c.first_difference, c.added_plugins.clone()), (None, vec!["z".to_string()]));
        // A plugin that makes fewer calls: the first one it did not make.
        let twice = vec![call("x", Directive::Continue), call("x", Directive::Continue)];
        let d = compare(&twice, &twice[..1]).first_difference.expect("fewer");
        assert_eq!((d.call, d.plugin_call), (2, 2));
        assert!(d.describe().contains("the replay made no such call"), "{}", d.describe());
    }
}
