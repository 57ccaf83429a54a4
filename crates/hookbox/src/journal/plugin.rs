//! [`PluginJournal`]: one plugin's import values for one run, and its
//! [`HostEnv`] implementation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hookbox_sandbox::{HostEnv, StoredState};

use super::values::{ImportValue, JournalState, from_hex, to_hex};
use super::{MAX_PLUGIN_ENTRIES, lock};

/// One plugin's import values for one run.
#[derive(Debug)]
pub struct PluginJournal {
    plugin: String,
    replaying: bool,
    inner: Mutex<PluginInner>,
    /// Calls begun ([`HostEnv::begin_call`]), re-executed ones included: a
    /// checkpoint keeps this count, whether or not each call's record has
    /// reached the journal yet (a detached call's comes later).
    begun: AtomicU64,
    /// Calls ended ([`HostEnv::call_ended`]): `begun - ended` are in flight.
    ended: AtomicU64,
    /// Resuming: the calls begun before the checkpoint not yet begun again.
    replay_calls: AtomicU64,
    /// Resuming: true while the call begun last re-executes one begun
    /// before the checkpoint ([`HostEnv::replays_call`]).
    replaying_call: std::sync::atomic::AtomicBool,
    /// Where the run's journal is made durable when a call commits its state.
    safe: super::safe::SafeSlot,
    /// Commits written down and their calls not ended yet: (call number,
    /// the revision swapped); the checkpoint's, resuming, until re-executed.
    pending: Mutex<Vec<(u64, Option<u64>)>>,
    /// Resuming: the checkpoint's pending commits, by call number.
    resumed_pending: Mutex<Vec<(u64, Option<u64>)>>,
    /// The state revision the plugin's instance knew when its last call
    /// ended; resuming, the checkpoint's until a live call ends.
    revision: Mutex<Option<u64>>,
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
    /// Resuming: how many of `entries` came from the checkpoint; they are
    /// handed back in order before any live value is taken (and written).
    preloaded: usize,
    /// Resuming: how many times `entries` was cut back (the plugin asked
    /// otherwise than the checkpoint): what was written before may change.
    rewrites: u64,
}

impl PluginJournal {
    pub(crate) fn new(plugin: &str, replaying: bool, entries: Vec<ImportValue>) -> Self {
        PluginJournal {
            plugin: plugin.to_string(),
            replaying,
            inner: Mutex::new(PluginInner { entries, ..PluginInner::default() }),
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            replay_calls: AtomicU64::new(0),
            replaying_call: std::sync::atomic::AtomicBool::new(false),
            safe: super::safe::SafeSlot::default(),
            pending: Mutex::default(),
            resumed_pending: Mutex::default(),
            revision: Mutex::default(),
        }
    }

    /// Resuming from a checkpoint: `entries` are handed back in order, then
    /// live values are taken and written after them; the plugin's first
    /// `calls` calls are re-executions.
    pub(crate) fn resuming(plugin: &str, entries: Vec<ImportValue>, calls: u64) -> Self {
        let preloaded = entries.len();
        PluginJournal {
            plugin: plugin.to_string(),
            replaying: false,
            inner: Mutex::new(PluginInner { entries, preloaded, ..PluginInner::default() }),
            begun: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            replay_calls: AtomicU64::new(calls),
            replaying_call: std::sync::atomic::AtomicBool::new(false),
            safe: super::safe::SafeSlot::default(),
            pending: Mutex::default(),
            resumed_pending: Mutex::default(),
            revision: Mutex::default(),
        }
    }

    /// A call of the plugin begins: counted; resuming, it re-executes one
    /// begun before the checkpoint while any of those are left.
    pub fn begin_call(&self) {
        self.begun.fetch_add(1, Ordering::SeqCst);
        let replay = self.replay_calls.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        self.replaying_call.store(replay, Ordering::SeqCst);
    }

    /// Calls begun so far.
    pub fn begun(&self) -> u64 {
        self.begun.load(Ordering::SeqCst)
    }

    /// Calls begun and not ended yet: a detached call (observe-only
    /// hooks, `request-start`) still running while the run waits.
    pub fn calls_in_flight(&self) -> u64 {
        // `ended` first: a call ending between the two reads is not counted twice.
        let ended = self.ended.load(Ordering::SeqCst);
        self.begun().saturating_sub(ended)
    }

    /// Calls begun so far, counting those of the checkpoint not yet begun
    /// again: what a checkpoint written now must count (else a call
    /// re-executed after a second resume would commit its state again).
    pub fn begun_with_checkpoint(&self) -> u64 {
        self.begun().saturating_add(self.replay_calls.load(Ordering::SeqCst))
    }

    pub(crate) fn set_safe_points(&self, points: std::sync::Arc<dyn super::SafePoints>) {
        self.safe.set(points);
    }

    /// Resuming: the checkpoint's pending commits of this plugin (see [`HostEnv::pending_commit`]).
    pub(crate) fn set_resumed_pending(&self, pending: Vec<(u64, Option<u64>)>) {
        *lock(&self.resumed_pending) = pending;
    }

    /// Resuming: the state revision the plugin's instance knew at the checkpoint.
    pub(crate) fn set_revision(&self, revision: Option<u64>) {
        *lock(&self.revision) = revision;
    }

    /// The state revision the plugin's instance knew when its last call
    /// ended (resuming: the checkpoint's, while its calls re-execute).
    pub fn revision(&self) -> Option<u64> {
        *lock(&self.revision)
    }

    /// Commits written down but not known to have returned: (call number, revision swapped).
    pub fn pending_commits(&self) -> Vec<(u64, Option<u64>)> {
        let mut all = lock(&self.resumed_pending).clone();
        all.extend(lock(&self.pending).iter().copied());
        all
    }

    /// Resuming: true while calls begun before the checkpoint are left to
    /// begin again.
    pub fn replaying_calls(&self) -> bool {
        self.replay_calls.load(Ordering::SeqCst) > 0
    }

    /// Resuming: true while checkpoint values are left to hand back.
    pub(crate) fn catching_up(&self) -> bool {
        let inner = lock(&self.inner);
        self.replaying_calls() || inner.next < inner.preloaded
    }

    /// The value for one import call. Recording: `live()`, written down.
    /// Replaying: the next recorded value if `fits` it (the same import, the
    /// same length), else `live()` and the divergence is noted.
    pub fn take(&self, fits: impl Fn(&ImportValue) -> bool, live: impl FnOnce() -> ImportValue) -> ImportValue {
        let mut inner = lock(&self.inner);
        if !self.replaying {
            if inner.next < inner.preloaded {
                // Resuming: the checkpoint's value, while the plugin asks what it asked.
                let at = inner.next;
                if let Some(recorded) = inner.entries.get(at).filter(|r| fits(r)).cloned() {
                    inner.next += 1;
                    return recorded;
                }
                // It asks otherwise: the rest of the checkpoint's values are dropped and it goes live.
                let what = inner.entries.get(at).map(ImportValue::what).unwrap_or_default();
                inner.divergence = Some(format!(
                    "plugin `{}` asked at import {} for another value than the checkpoint's `{what}`",
                    self.plugin,
                    at + 1
                ));
                inner.entries.truncate(at);
                inner.preloaded = at;
                inner.rewrites += 1;
            }
            let value = live();
            if inner.entries.len() < MAX_PLUGIN_ENTRIES {
                inner.entries.push(value.clone());
            } else {
                inner.dropped += 1;
            }
            inner.next = inner.entries.len();
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

    /// The values after the first `n`; `None` when there are fewer than `n`.
    pub fn entries_after(&self, n: usize) -> Option<Vec<ImportValue>> {
        lock(&self.inner).entries.get(n..).map(<[ImportValue]>::to_vec)
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

    /// How many times the values written so far were cut back (a resumed
    /// run's plugin asked otherwise than its checkpoint): 0 while they only grow.
    pub fn rewrites(&self) -> u64 {
        lock(&self.inner).rewrites
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

    pub(crate) fn random_bytes(&self, insecure: bool, buf: &mut [u8]) {
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

/// Nanoseconds since this process first read its monotonic clock.
fn monotonic_ns() -> u64 {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = *ORIGIN.get_or_init(Instant::now);
    u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// A plugin's journal is its host environment: recording, it hands out live
/// values and writes them down; replaying, it hands the recorded ones back.
impl HostEnv for PluginJournal {
    fn now(&self) -> (u64, u32) {
        PluginJournal::now(self)
    }

    fn random(&self) -> u64 {
        PluginJournal::random(self)
    }

    fn uuid(&self) -> String {
        PluginJournal::uuid(self)
    }

    fn sleep(&self, ms: u64) {
        PluginJournal::sleep(self, ms);
    }

    fn state(&self, live: &mut dyn FnMut() -> Option<StoredState>) -> Option<StoredState> {
        PluginJournal::state(self, || live().map(|s| (s.version, s.data)))
            .map(|(version, data)| StoredState { version, data })
    }

    fn wall_clock(&self) -> Duration {
        let v = self.take(
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

    fn monotonic_ns(&self) -> u64 {
        match self.take(
            |v| matches!(v, ImportValue::MonotonicClock { .. }),
            || ImportValue::MonotonicClock { ns: monotonic_ns() },
        ) {
            ImportValue::MonotonicClock { ns } => ns,
            _ => monotonic_ns(),
        }
    }

    fn random_bytes(&self, insecure: bool, buf: &mut [u8]) {
        PluginJournal::random_bytes(self, insecure, buf);
    }

    fn insecure_seed(&self) -> u128 {
        PluginJournal::insecure_seed(self)
    }

    fn begin_call(&self) {
        PluginJournal::begin_call(self);
    }

    fn replays_call(&self) -> bool {
        self.replaying_call.load(Ordering::SeqCst)
    }

    fn committing(&self, expected: Option<u64>) -> bool {
        lock(&self.pending).push((self.begun(), expected));
        match self.safe.get() {
            Some(points) => points.committing(&self.plugin),
            None => true,
        }
    }

    fn call_ended(&self, known: Option<u64>) -> Option<u64> {
        // In this order, so that a checkpoint written meanwhile has either the
        // commit pending or the revision it made, and counts the call in
        // flight until both are there. (A commit that returned stays pending
        // until then: made again on resume, it finds it landed.)
        let settled = {
            let mut revision = lock(&self.revision);
            *revision = if self.replaying_call.load(Ordering::SeqCst) {
                // Re-executed: its reads came from the journal and its commit was
                // made the first time, so the checkpoint knows more, unless the
                // call made its pending commit again just now.
                (*revision).max(known)
            } else {
                known
            };
            *revision
        };
        let call = self.begun();
        lock(&self.pending).retain(|(n, _)| *n != call);
        self.ended.fetch_add(1, Ordering::SeqCst);
        settled
    }

    fn pending_commit(&self) -> Option<u64> {
        let call = self.begun();
        let mut resumed = lock(&self.resumed_pending);
        let at = resumed.iter().position(|(n, _)| *n == call)?;
        // Once: re-executed now.
        resumed.remove(at).1
    }
}
