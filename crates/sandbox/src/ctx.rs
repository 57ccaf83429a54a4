//! [`HookCtx`]: the data of one plugin's store — its WASI context, memory
//! limiter, config, log buffer, the state it read and staged, its
//! [`HostEnv`] — and the `hookbox:hooks/host` imports it answers.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hookbox_contract::HookLog;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::env::HostEnv;
use crate::log::LogBudget;
use crate::state::{Revision, StateStore, StoredState};

/// A resource limiter that caps linear memory and remembers a refusal, so a
/// guest that aborts after a refused `memory.grow` is reported as `memory`.
pub(crate) struct Limiter {
    pub(crate) max_memory: usize,
    pub(crate) memory_refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            self.memory_refused = true;
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}

/// Where `get-state` finds the committed state.
pub(crate) enum StateSource {
    /// The session's entry in the store.
    Store {
        /// The store.
        store: Arc<dyn StateStore>,
        /// The session.
        session: Arc<str>,
    },
    /// No session: what this handler saved, if anything.
    Fixed(Option<StoredState>),
}

/// What a call's first `get-state` read.
pub(crate) struct StateRead {
    /// The committed state, if any.
    pub(crate) state: Option<StoredState>,
    /// Its revision in the store (`None` when it came from elsewhere: no
    /// session, or a journal being replayed).
    pub(crate) revision: Option<Revision>,
    /// Why the store could not be read, if it could not (the guest then saw no state).
    pub(crate) error: Option<String>,
}

/// The data of one plugin's store.
pub struct HookCtx {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) plugin: Arc<str>,
    pub(crate) config: Arc<BTreeMap<String, String>>,
    pub(crate) logs: Vec<HookLog>,
    /// Bytes of `log` messages this call kept, against `log_cap` (`max_log_bytes`).
    pub(crate) log_bytes: usize,
    pub(crate) log_cap: usize,
    /// This call's record allowance (set before each call).
    pub(crate) log_budget: LogBudget,
    /// Where `get-state` reads the committed state from, set before each call.
    pub(crate) state_source: StateSource,
    /// The committed state, read on the first `get-state` of a call (read
    /// through to the store, so another process's saves are seen; a plugin
    /// that never asks costs no store read).
    pub(crate) state_read: Option<StateRead>,
    /// What `set-state` staged during this call; committed only on success.
    pub(crate) staged: Option<Vec<u8>>,
    /// Where `now`, `random`, `uuid`, `sleep`, `get-state` and WASI's clocks
    /// and random numbers come from (a run's journal); live values without one.
    pub(crate) env: Option<Arc<dyn HostEnv>>,
    /// When the current call's wall-clock deadline passes (read by the epoch callback).
    pub(crate) deadline: Instant,
}

impl HookCtx {
    pub(crate) fn push_log(&mut self, level: &str, message: String) {
        if self.log_bytes.saturating_add(message.len()) > self.log_cap {
            self.log_budget.drop_record(message.len());
            return;
        }
        if !self.log_budget.admit(message.len()) {
            return;
        }
        self.log_bytes += message.len();
        tracing::info!(plugin = %self.plugin, level, "{message}");
        self.logs.push(HookLog { plugin: self.plugin.to_string(), level: level.to_string(), message });
    }

    /// Takes this call's log lines and resets the per-call byte count.
    pub(crate) fn take_logs(&mut self) -> Vec<HookLog> {
        self.log_bytes = 0;
        std::mem::take(&mut self.logs)
    }
}

impl WasiView for HookCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl HookCtx {
    /// `get-state`: this plugin's committed state for the session, read once
    /// per call (through to the store, or from the journal on replay).
    fn host_get_state(&mut self) -> Option<&StoredState> {
        if self.state_read.is_none() {
            // A lock is waited for only until the call's deadline.
            let wait = self.deadline.saturating_duration_since(Instant::now());
            let (mut revision, mut error) = (None, None);
            let mut live = || match &self.state_source {
                StateSource::Fixed(state) => state.clone(),
                StateSource::Store { store, session } => match store.load(session, &self.plugin, wait) {
                    Ok((state, read)) => {
                        revision = Some(read);
                        state
                    }
                    Err(e) => {
                        // Reported as the call's `state` failure once it returns.
                        tracing::error!(plugin = %self.plugin, "cannot load hook state: {e}");
                        error = Some(e.to_string());
                        None
                    }
                },
            };
            let state = match &self.env {
                // On replay the journal gives the state the recorded run read.
                Some(env) => env.state(&mut live),
                None => live(),
            };
            self.state_read = Some(StateRead { state, revision, error });
        }
        self.state_read.as_ref().and_then(|r| r.state.as_ref())
    }

    /// `now`: seconds and nanoseconds since the Unix epoch, journaled.
    fn host_now(&mut self) -> (u64, u32) {
        match &self.env {
            Some(env) => env.now(),
            None => {
                let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                (d.as_secs(), d.subsec_nanos())
            }
        }
    }

    /// `random`: a random 64-bit number, journaled.
    fn host_random(&mut self) -> u64 {
        match &self.env {
            Some(env) => env.random(),
            None => rand::random(),
        }
    }

    /// `uuid`: a random version 4 UUID, hyphenated, journaled.
    fn host_uuid(&mut self) -> String {
        match &self.env {
            Some(env) => env.uuid(),
            None => uuid::Uuid::new_v4().to_string(),
        }
    }

    /// `sleep`: waits `ms` milliseconds, journaled.
    async fn host_sleep(&mut self, ms: u64) {
        if let Some(env) = &self.env {
            env.sleep(ms);
        }
        // The call's backstop timeout ends a sleep past the deadline (a `deadline` failure).
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// Implements version `$v`'s host imports for [`HookCtx`]: each converts
/// that version's types and calls the one implementation above, so every
/// version's plugins share the same state, journal and limits.
macro_rules! host_imports {
    ($v:ident) => {
        impl crate::bindings::$v::hookbox::hooks::types::Host for HookCtx {}

        impl crate::bindings::$v::hookbox::hooks::host::Host for HookCtx {
            fn log(&mut self, level: crate::bindings::$v::hookbox::hooks::host::LogLevel, message: String) {
                use crate::bindings::$v::hookbox::hooks::host::LogLevel;
                let level = match level {
                    LogLevel::Trace => "trace",
                    LogLevel::Debug => "debug",
                    LogLevel::Info => "info",
                    LogLevel::Warn => "warn",
                    LogLevel::Error => "error",
                };
                self.push_log(level, message);
            }

            fn get_config(&mut self, key: String) -> Option<String> {
                self.config.get(&key).cloned()
            }

            fn config_keys(&mut self) -> Vec<String> {
                self.config.keys().cloned().collect()
            }

            fn get_state(&mut self) -> Option<crate::bindings::$v::hookbox::hooks::host::State> {
                self.host_get_state().map(|s| crate::bindings::$v::hookbox::hooks::host::State {
                    version: s.version.clone(),
                    data: s.data.clone(),
                })
            }

            fn set_state(&mut self, data: Vec<u8>) {
                self.staged = Some(data);
            }

            fn now(&mut self) -> crate::bindings::$v::hookbox::hooks::host::Datetime {
                let (seconds, nanoseconds) = self.host_now();
                crate::bindings::$v::hookbox::hooks::host::Datetime { seconds, nanoseconds }
            }

            fn random(&mut self) -> u64 {
                self.host_random()
            }

            fn uuid(&mut self) -> String {
                self.host_uuid()
            }

            async fn sleep(&mut self, ms: u64) {
                self.host_sleep(ms).await
            }
        }
    };
}

host_imports!(v0_1_0);
host_imports!(v0_2_0);
