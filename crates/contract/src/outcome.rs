//! What a hook call produced, as the host records it: failures and their
//! kinds, log lines, suspensions, per-plugin statistics, directive records
//! (the run record's `directives`) and call records (the journal's calls).

use serde::{Deserialize, Serialize};

use crate::Directive;

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
    /// The hook state could not be read or saved (the store failed, stayed
    /// locked past the call's deadline, or another run of the session saved
    /// first): the call's write is dropped.
    State,
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
            FailureKind::State => "state",
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

/// One directive a hook returned, as recorded in the run result (`directives`).
/// `continue` is not recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectiveRecord {
    /// The plugin that returned it.
    pub plugin: String,
    /// The event's WIT name.
    pub event: String,
    /// The event's iteration, if it has one.
    pub iteration: Option<u32>,
    /// The directive: `action` and `value`.
    #[serde(flatten)]
    pub directive: Directive,
    /// False when the directive was ignored (see `note`).
    pub honoured: bool,
    /// Why it was ignored, if it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    /// `plugin `p` at before-tool-call (iteration 1)`.
    pub fn place(&self) -> String {
        match self.iteration {
            Some(i) => format!("plugin `{}` at `{}` (iteration {i})", self.plugin, self.event),
            None => format!("plugin `{}` at `{}`", self.plugin, self.event),
        }
    }

    /// True when `other` is the same call with the same outcome.
    pub fn same(&self, other: &CallRecord) -> bool {
        self.plugin == other.plugin
            && self.event == other.event
            && self.iteration == other.iteration
            && self.directive == other.directive
            && self.failure == other.failure
    }
}
