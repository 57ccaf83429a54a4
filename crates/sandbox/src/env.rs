//! [`HostEnv`]: where a plugin's nondeterministic inputs come from.
//!
//! A hook that decides on the time or on chance must decide the same way
//! when its run is replayed. Every such input goes through one place: the
//! WIT host imports `now`, `random`, `uuid`, `sleep` and `get-state`, and
//! WASI's own wall clock, monotonic clock and random numbers
//! (`std::time::SystemTime::now()`, `Instant::now()` and std's randomly keyed
//! `HashMap` in a Rust guest). A handler given a [`HostEnv`]
//! ([`crate::WasmHook::with_host_env`]) asks it for all of them; one without
//! takes live values. The agent crate's run journal implements it: recording,
//! it hands out live values and writes them down; replaying, it hands the
//! recorded ones back.

use std::sync::Arc;
use std::time::Duration;

use crate::state::StoredState;

/// The source of one plugin's nondeterministic inputs for one run.
///
/// Implementations must be cheap to call (one call per import) and never
/// block: the sandbox calls them from inside a hook call, on an async worker.
pub trait HostEnv: Send + Sync + 'static {
    /// `host.now`: seconds and nanoseconds (below 10⁹) since the Unix epoch.
    fn now(&self) -> (u64, u32);
    /// `host.random`: a uniformly random u64.
    fn random(&self) -> u64;
    /// `host.uuid`: a version 4 UUID in its hyphenated text form.
    fn uuid(&self) -> String;
    /// `host.sleep(ms)`: told of a wait of `ms` milliseconds before the
    /// sandbox waits it (the wait itself, bounded by the call's deadline, is
    /// the sandbox's).
    fn sleep(&self, ms: u64);
    /// `host.get-state`: the state the call starts from. `live` reads the
    /// state store; a replaying environment returns the recorded state instead.
    fn state(&self, live: &mut dyn FnMut() -> Option<StoredState>) -> Option<StoredState>;
    /// `wasi:clocks/wall-clock`: the time since the Unix epoch.
    fn wall_clock(&self) -> Duration;
    /// `wasi:clocks/monotonic-clock`: nanoseconds since an arbitrary origin
    /// that does not move during the process.
    fn monotonic_ns(&self) -> u64;
    /// `wasi:random/random` (`insecure: false`) or `wasi:random/insecure`:
    /// fills `buf`.
    fn random_bytes(&self, insecure: bool, buf: &mut [u8]);
    /// `wasi:random/insecure-seed`, read once per instance.
    fn insecure_seed(&self) -> u128;
    /// Told when a call of the plugin begins (once per event the plugin is
    /// entered for, before anything else of the call). Default: nothing.
    fn begin_call(&self) {}
    /// True when the call being made (the last one begun) re-executes one
    /// already made and journaled (a run resumed from its checkpoint): what
    /// it stages with `set-state` was committed the first time and is not
    /// committed again. Default: false.
    fn replays_call(&self) -> bool {
        false
    }
    /// Told just before the call being made commits its hook state as a
    /// compare-and-swap on revision `expected` (`None`: a blind write). A
    /// journal that is made durable writes this pending commit down first,
    /// so that a re-execution of the call after a crash can tell whether the
    /// commit landed ([`HostEnv::pending_commit`]). May block, as the commit
    /// does. False when it could not be written down: the commit is then
    /// not made (the call fails with a `state` failure), since a crash
    /// after it could not be told from one before. Default: true.
    fn committing(&self, expected: Option<crate::state::Revision>) -> bool {
        let _ = expected;
        true
    }
    /// Told when that commit returned, whether it was saved or not. Default: nothing.
    fn committed(&self) {}
    /// For a call that re-executes one made before a checkpoint
    /// ([`HostEnv::replays_call`]): the revision its commit was to swap,
    /// if the checkpoint holds that commit as pending (cut off between
    /// being written down and its result). The sandbox then makes the
    /// commit again on that revision: if it had landed, the revision has
    /// moved and nothing changes; else it lands now. Default: none.
    fn pending_commit(&self) -> Option<crate::state::Revision> {
        None
    }
    /// Told when a call of the plugin ended (whatever its outcome), with the
    /// state revision its instance knows now: the one it last read or wrote,
    /// `None` when it knows none (it never read or wrote, or the instance
    /// was dropped). Returns the revision the instance is to know from now
    /// on, which its next commit swaps. A live call's is `known`. A call
    /// that re-executed one made before a checkpoint read the journal, not
    /// the store, and committed nothing, so its instance knows less than
    /// the one that made the call: a resuming environment returns the
    /// revision the plugin's instance knew when the checkpoint was written
    /// (or `known`, if later), so that a write after the resume that does not
    /// read first still swaps the revision the run last saw, as it would have
    /// without the park, instead of overwriting whatever another run of the
    /// session saved meanwhile. Default: `known`.
    fn call_ended(&self, known: Option<crate::state::Revision>) -> Option<crate::state::Revision> {
        known
    }
}

/// `wasi:clocks/wall-clock` through a [`HostEnv`].
pub(crate) struct EnvWallClock(pub(crate) Arc<dyn HostEnv>);

impl wasmtime_wasi::HostWallClock for EnvWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }

    fn now(&self) -> Duration {
        self.0.wall_clock()
    }
}

/// `wasi:clocks/monotonic-clock` through a [`HostEnv`].
pub(crate) struct EnvMonotonicClock(pub(crate) Arc<dyn HostEnv>);

impl wasmtime_wasi::HostMonotonicClock for EnvMonotonicClock {
    fn resolution(&self) -> u64 {
        1
    }

    fn now(&self) -> u64 {
        self.0.monotonic_ns()
    }
}

/// `wasi:random/random` or `wasi:random/insecure` through a [`HostEnv`].
pub(crate) struct EnvRng {
    pub(crate) env: Arc<dyn HostEnv>,
    pub(crate) insecure: bool,
}

impl rand::TryRng for EnvRng {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        let mut b = [0u8; 4];
        self.env.random_bytes(self.insecure, &mut b);
        Ok(u32::from_le_bytes(b))
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        let mut b = [0u8; 8];
        self.env.random_bytes(self.insecure, &mut b);
        Ok(u64::from_le_bytes(b))
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        self.env.random_bytes(self.insecure, dst);
        Ok(())
    }
}
