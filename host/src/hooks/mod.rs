//! The hook layer: what the agent loop asks ("what did the hooks decide?")
//! and the sandbox that answers it.
//!
//! - [`HookHandler`]: one hook as the loop sees it. [`wasm::WasmHook`] runs a
//!   WebAssembly component in wasmtime; tests and embedders can add native ones.
//! - [`chain::HookChain`]: runs the hooks of a run in their configured order
//!   and applies CONTRACT.md's rules (which directive is valid where, what ends
//!   the chain, replacements feed the next hook, injections accumulate).
//! - A failing hook is never an error of the run: it becomes a [`HookFailure`]
//!   in the run result and counts as `continue` (fail-open).

pub mod cache;
pub mod chain;
mod convert;
pub mod options;
mod output;
pub mod state;
pub mod wasm;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::event::{Directive, Event, EventKind};
use options::FailPolicy;

/// Why a hook call failed. Every kind is treated as `continue` by the loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The guest trapped (a panic, `unreachable`, out-of-bounds access, …).
    Trap,
    /// The call used up its fuel.
    OutOfFuel,
    /// The call ran past its wall-clock deadline.
    Deadline,
    /// The guest was refused memory beyond its cap.
    Memory,
    /// The guest returned something the host cannot use (e.g. invalid JSON in `replace-arguments`).
    InvalidOutput,
    /// A fresh instance could not be created.
    Instantiate,
}

impl FailureKind {
    /// The kebab-case name used in traces, e.g. `out-of-fuel`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Trap => "trap",
            FailureKind::OutOfFuel => "out-of-fuel",
            FailureKind::Deadline => "deadline",
            FailureKind::Memory => "memory",
            FailureKind::InvalidOutput => "invalid-output",
            FailureKind::Instantiate => "instantiate",
        }
    }
}

/// One failed hook call, as recorded in the run result (`hook_failures`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookFailure {
    /// The plugin's name.
    pub plugin: String,
    /// The event's WIT name, e.g. `before-tool-call`.
    pub event: String,
    /// The failure kind.
    pub kind: FailureKind,
    /// What went wrong: the trap message, plus what the guest wrote to stderr.
    pub message: String,
    /// Fuel units the call used (also when it trapped).
    pub fuel_used: u64,
    /// How long the call took, in microseconds.
    pub duration_us: u64,
}

/// One line a hook logged (through the `host.log` import, or its stdout/stderr).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookLog {
    /// The plugin's name.
    pub plugin: String,
    /// `trace`, `debug`, `info`, `warn`, `error`, or `stdout` / `stderr`.
    pub level: String,
    /// The text.
    pub message: String,
}

/// Why a plugin stopped being called for the rest of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuspendReason {
    /// Its per-run fuel or time budget is spent.
    Budget,
    /// The crash-loop breaker tripped (too many failures within its window).
    CrashLoop,
}

/// A plugin skipped for the rest of the run, as recorded in the run result
/// (`plugin_suspensions`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Suspension {
    /// The plugin's name.
    pub plugin: String,
    /// The event whose call suspended it.
    pub event: String,
    /// Why.
    pub reason: SuspendReason,
    /// A readable account, with the figures.
    pub message: String,
}

/// What one hook call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct HookReply {
    /// The directive, or the failure that stands for `continue` (or, for a
    /// fail-closed hook at `before-tool-call`, for `skip-tool`).
    pub outcome: Result<Directive, HookFailure>,
    /// Lines the hook logged during the call, in order.
    pub logs: Vec<HookLog>,
    /// Set when this call left the plugin suspended for the rest of the run.
    pub suspension: Option<Suspension>,
    /// Fuel the call used (0 for a native hook or a call that was skipped).
    pub fuel_used: u64,
    /// How long the call took, in microseconds (0 when it was skipped).
    pub duration_us: u64,
}

/// What one plugin cost over a run, as recorded in the run result (`plugin_stats`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PluginStats {
    /// The plugin's name.
    pub plugin: String,
    /// Calls that entered the hook (skipped calls of a suspended plugin are not counted).
    pub calls: u64,
    /// Calls that failed.
    pub failures: u64,
    /// Fuel used by all calls.
    pub fuel_used: u64,
    /// Time spent in all calls, in microseconds.
    pub time_us: u64,
}

/// Inside `impl HookHandler for Wrapper`, forwards every method but
/// `on_event` to the wrapped handler in field `$field`: its name, fail policy,
/// subscriptions, observe-only flag and session. A wrapper that left one of
/// them to the trait's default would silently change how the chain calls the
/// hook (every event instead of its subscriptions, say).
///
/// ```ignore
/// #[async_trait::async_trait]
/// impl HookHandler for Timed {
///     hookbox::forward_hook_handler!(inner);
///     async fn on_event(&mut self, event: &Event) -> HookReply { self.inner.on_event(event).await }
/// }
/// ```
#[macro_export]
macro_rules! forward_hook_handler {
    ($field:ident) => {
        fn name(&self) -> &str {
            self.$field.name()
        }

        fn fail_policy(&self) -> $crate::hooks::options::FailPolicy {
            self.$field.fail_policy()
        }

        fn run_started(&mut self, session_id: &str) {
            self.$field.run_started(session_id)
        }

        fn subscribed(&self, kind: $crate::event::EventKind) -> bool {
            self.$field.subscribed(kind)
        }

        fn observe_only(&self) -> bool {
            self.$field.observe_only()
        }
    };
}

/// One hook, as the agent loop sees it.
///
/// Lifecycle: the loop builds one handler per hook per run, calls
/// [`HookHandler::on_event`] for every event of the run in firing order, and
/// drops it when the run ends. A handler never returns an error: a failure is
/// a [`HookFailure`] inside the reply.
#[async_trait]
pub trait HookHandler: Send + 'static {
    /// The hook's name, as it appears in traces.
    fn name(&self) -> &str;
    /// What a failure means at `before-tool-call` (default: fail-open).
    fn fail_policy(&self) -> FailPolicy {
        FailPolicy::Open
    }
    /// Called for every hook at `run-start`, subscribed to it or not, with the
    /// run's session (which keys hook state). Default: nothing.
    fn run_started(&mut self, _session_id: &str) {}
    /// True when the hook wants events of `kind` (default: every kind). The
    /// chain never enters a hook for an event it does not subscribe to.
    fn subscribed(&self, _kind: EventKind) -> bool {
        true
    }
    /// True for a hook that only watches: its calls run beside the loop and
    /// its directives other than `continue` are ignored (default: false).
    fn observe_only(&self) -> bool {
        false
    }
    /// Handles one event.
    async fn on_event(&mut self, event: &Event) -> HookReply;
}
