//! Per-plugin sandbox options: limits, fail policy, crash-loop breaker and
//! capability grants. They are the plugin's table in `hookbox.toml`; every
//! field has a documented default, and unknown keys are errors.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use hookbox_contract::EventKind;

/// Bytes in one WebAssembly page: memory grows in whole pages.
pub const WASM_PAGE_BYTES: u64 = 64 << 10;

/// The longest per-call deadline accepted, in milliseconds (one hour).
pub const MAX_DEADLINE_MS: u64 = 3_600_000;

/// Resource limits for one plugin.
///
/// The defaults leave the Rust example plugins a wide margin (a call of theirs
/// uses well under 1 % of the fuel, a few milliseconds and 1–2 MiB of memory)
/// while stopping a runaway hook in well under a second.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Fuel units per call (wasmtime fuel: about one unit per instruction). Default 100,000,000.
    pub fuel: u64,
    /// Wall-clock deadline per call, in milliseconds, covering guest code
    /// (epoch interruption) and time spent in host calls (a timeout around the call). Default 1,000.
    pub deadline_ms: u64,
    /// Linear memory cap per memory, in bytes; rounded up to a whole 64 KiB page. Default 64 MiB.
    pub memory_bytes: u64,
    /// Cap on one returned directive's lowered size, in bytes: every string's
    /// bytes plus the canonical ABI's fixed size of each element (16 bytes for
    /// the directive, 12 per content block). More is an `invalid-output`
    /// failure, checked as soon as the directive is lifted out of guest memory,
    /// before the host copies, records or applies it ([`crate::check_directive`]).
    /// Default 1 MiB.
    pub max_output_bytes: u64,
    /// Cap on the content blocks in one returned directive; more is an
    /// `invalid-output` failure. Default 1,024.
    pub max_output_blocks: u64,
    /// Cap on what one call may log, in bytes, for each of: the `log` import,
    /// stdout, stderr. The rest is dropped with a note. Default 64 KiB.
    pub max_log_bytes: u64,
    /// Cap on the log records one call may produce (`log` calls and lines of
    /// stdout and stderr together). The rest is dropped with a note. Default 1,000.
    pub max_log_records: u64,
    /// Log records the plugin may produce across one run; once reached, its log
    /// output is dropped for the rest of the run, with one note. Default 10,000.
    pub run_log_records: u64,
    /// Log bytes (message text) the plugin may produce across one run; once
    /// reached, its log output is dropped for the rest of the run, with one
    /// note. Default 4 MiB.
    pub run_log_bytes: u64,
    /// Fuel the plugin may use across all calls of one run; once spent, the
    /// plugin is skipped for the rest of the run. A call never gets more than
    /// what is left. Default: no budget.
    pub run_fuel: Option<u64>,
    /// Bytes of state the plugin may save per session (`set-state`); a bigger
    /// write is an `invalid-output` failure and the saved state stays. Default 1 MiB.
    pub max_state_bytes: u64,
    /// Hook time the plugin may use across all calls of one run, in milliseconds;
    /// once spent, the plugin is skipped for the rest of the run. A call's deadline
    /// never extends past what is left. Default: no budget.
    pub run_time_ms: Option<u64>,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel: 100_000_000,
            deadline_ms: 1_000,
            memory_bytes: 64 << 20,
            max_output_bytes: 1 << 20,
            max_output_blocks: 1_024,
            max_log_bytes: 64 << 10,
            max_log_records: 1_000,
            run_log_records: 10_000,
            run_log_bytes: 4 << 20,
            max_state_bytes: 1 << 20,
            run_fuel: None,
            run_time_ms: None,
        }
    }
}

impl Limits {
    /// Checks the limits and rounds `memory_bytes` up to a whole page.
    ///
    /// Returns the usable limits and notes on what was adjusted.
    /// Errors: a message naming the field for a zero or sub-page value.
    pub fn validated(mut self) -> Result<(Limits, Vec<String>), String> {
        let mut notes = Vec::new();
        let positive = [
            ("fuel", Some(self.fuel)),
            ("deadline_ms", Some(self.deadline_ms)),
            ("max_output_bytes", Some(self.max_output_bytes)),
            ("max_output_blocks", Some(self.max_output_blocks)),
            ("max_log_bytes", Some(self.max_log_bytes)),
            ("max_log_records", Some(self.max_log_records)),
            ("run_log_records", Some(self.run_log_records)),
            ("run_log_bytes", Some(self.run_log_bytes)),
            ("max_state_bytes", Some(self.max_state_bytes)),
            ("run_fuel", self.run_fuel),
            ("run_time_ms", self.run_time_ms),
        ];
        for (name, value) in positive {
            if value == Some(0) {
                return Err(format!("limits.{name} must be above 0"));
            }
        }
        if self.deadline_ms > MAX_DEADLINE_MS {
            return Err(format!(
                "limits.deadline_ms = {} is over the maximum of {MAX_DEADLINE_MS} ms (one hour)",
                self.deadline_ms
            ));
        }
        if self.memory_bytes < WASM_PAGE_BYTES {
            return Err(format!(
                "limits.memory_bytes = {} is below one 64 KiB WebAssembly page ({WASM_PAGE_BYTES} bytes)",
                self.memory_bytes
            ));
        }
        let rem = self.memory_bytes % WASM_PAGE_BYTES;
        if rem != 0 {
            let rounded = self.memory_bytes.saturating_add(WASM_PAGE_BYTES - rem);
            notes.push(format!(
                "limits.memory_bytes = {} is not a multiple of the 64 KiB page; rounded up to {rounded}",
                self.memory_bytes
            ));
            self.memory_bytes = rounded;
        }
        Ok((self, notes))
    }
}

/// What a failed call means at a veto point.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailPolicy {
    /// The default, resolved when the plugin loads ([`FailPolicy::resolve`]):
    /// `closed` for a guard, a plugin whose `events` name `before-tool-call`
    /// (it declared it decides on tool calls); `open` for every other plugin.
    #[default]
    Auto,
    /// A failure is treated as `continue` everywhere.
    Open,
    /// A failure at `before-tool-call` declines the tool (`skip-tool` with
    /// [`FAIL_CLOSED_MESSAGE`]); elsewhere it is `continue`. A quarantined or
    /// budget-exhausted fail-closed plugin keeps declining tools.
    Closed,
}

impl FailPolicy {
    /// `Auto` made concrete for a plugin entered for `events` (`None`: every
    /// event): `Closed` when the list names `before-tool-call` and the plugin
    /// is not observe-only, `Open` otherwise. `Open` and `Closed` stay as they are.
    pub fn resolve(self, events: Option<&[EventKind]>, observe: bool) -> FailPolicy {
        match self {
            FailPolicy::Auto if !observe && events.is_some_and(|e| e.contains(&EventKind::BeforeToolCall)) => {
                FailPolicy::Closed
            }
            FailPolicy::Auto => FailPolicy::Open,
            concrete => concrete,
        }
    }
}

/// The reason a fail-closed plugin's failure gives the model.
pub const FAIL_CLOSED_MESSAGE: &str = "Tool call declined: a safety hook failed and is configured fail-closed.";

/// The crash-loop breaker: after `failures` failures within `window_ms`, the
/// plugin is quarantined (skipped) for the rest of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Breaker {
    /// Failures that trip the breaker; 0 turns it off. Default 5.
    pub failures: u32,
    /// The window the failures are counted in, in milliseconds. Default 60,000.
    pub window_ms: u64,
}

impl Default for Breaker {
    fn default() -> Self {
        Breaker { failures: 5, window_ms: 60_000 }
    }
}

/// Access to a host directory, preopened for the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    /// The host directory (relative paths are relative to `hookbox.toml`'s folder).
    pub host: PathBuf,
    /// Where the guest sees it: an absolute guest path such as `/data`.
    pub guest: String,
    /// `ro` (default) or `rw`.
    #[serde(default)]
    pub mode: DirMode,
}

/// Read-only or read-write.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum DirMode {
    /// Read-only.
    #[default]
    #[serde(rename = "ro")]
    ReadOnly,
    /// Read-write.
    #[serde(rename = "rw")]
    ReadWrite,
}

/// Everything a plugin may reach beyond the default (nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Host environment variables the guest may read (by name; unset ones stay unset).
    #[serde(default)]
    pub env: Vec<String>,
    /// Host directories the guest may open.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
}

/// Everything the sandbox needs to know about one plugin besides its file and config.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginOptions {
    /// Resource limits.
    pub limits: Limits,
    /// Fail-open or fail-closed.
    pub fail: FailPolicy,
    /// The crash-loop breaker.
    pub breaker: Breaker,
    /// Capability grants.
    pub grants: Grants,
    /// The plugin's version, stored with its state (default `0`).
    pub version: String,
    /// The events the plugin is entered for; `None` (default) means every event.
    pub events: Option<Vec<EventKind>>,
    /// An observe-only plugin: its calls run beside the loop, its directives
    /// other than `continue` are ignored (default false).
    pub observe: bool,
}

impl Default for PluginOptions {
    fn default() -> Self {
        PluginOptions {
            limits: Limits::default(),
            fail: FailPolicy::default(),
            breaker: Breaker::default(),
            grants: Grants::default(),
            version: "0".to_string(),
            events: None,
            observe: false,
        }
    }
}

/// What a component import needs before the plugin may load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ImportNeed {
    /// Always linked: the hook interfaces, WASI I/O streams, clocks, random,
    /// and the CLI interfaces (environment holds only granted variables; stdin is closed).
    Always,
    /// WASI filesystem: needs a `dirs` grant.
    Dirs,
    /// Never granted (sockets, HTTP, anything unknown): the plugin is refused.
    Never,
}

impl ImportNeed {
    /// What `hookbox check` prints for it.
    pub fn describe(self) -> &'static str {
        match self {
            ImportNeed::Always => "always available",
            ImportNeed::Dirs => "needs a `dirs` grant",
            ImportNeed::Never => "never granted: the plugin is refused",
        }
    }
}

/// Classifies one import name, e.g. `wasi:sockets/tcp@0.2.6`.
pub fn import_need(name: &str) -> ImportNeed {
    let unversioned = name.split('@').next().unwrap_or(name);
    let (package, _) = unversioned.split_once('/').unwrap_or((unversioned, ""));
    match package {
        "hookbox:hooks" | "wasi:io" | "wasi:clocks" | "wasi:random" | "wasi:cli" => ImportNeed::Always,
        "wasi:filesystem" => ImportNeed::Dirs,
        _ => ImportNeed::Never,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_rounded_up_to_a_page_and_said_so() {
        let (l, notes) = Limits { memory_bytes: 100_000, ..Limits::default() }.validated().expect("valid");
        assert_eq!(l.memory_bytes, 131_072);
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("rounded up to 131072"), "{notes:?}");
        let (l, notes) = Limits::default().validated().expect("valid");
        assert_eq!(l, Limits::default());
        assert!(notes.is_empty());
    }

    #[test]
    fn zero_and_sub_page_values_are_refused_naming_the_field() {
        for (limits, field) in [
            (Limits { memory_bytes: 0, ..Limits::default() }, "memory_bytes"),
            (Limits { memory_bytes: 65_535, ..Limits::default() }, "memory_bytes"),
            (Limits { fuel: 0, ..Limits::default() }, "fuel"),
            (Limits { deadline_ms: 0, ..Limits::default() }, "deadline_ms"),
            (Limits { run_fuel: Some(0), ..Limits::default() }, "run_fuel"),
        ] {
            let err = limits.validated().expect_err("refused");
            assert!(err.contains(field), "{err}");
        }
    }

    #[test]
    fn imports_are_classified() {
        assert_eq!(import_need("hookbox:hooks/host@0.1.0"), ImportNeed::Always);
        assert_eq!(import_need("wasi:cli/environment@0.2.6"), ImportNeed::Always);
        assert_eq!(import_need("wasi:io/streams@0.2.6"), ImportNeed::Always);
        assert_eq!(import_need("wasi:clocks/monotonic-clock@0.2.6"), ImportNeed::Always);
        assert_eq!(import_need("wasi:filesystem/preopens@0.2.6"), ImportNeed::Dirs);
        assert_eq!(import_need("wasi:sockets/tcp@0.2.6"), ImportNeed::Never);
        assert_eq!(import_need("wasi:http/outgoing-handler@0.2.6"), ImportNeed::Never);
        assert_eq!(import_need("acme:evil/thing"), ImportNeed::Never);
    }

    #[test]
    fn grants_parse_from_toml() {
        let g: Grants = toml::from_str(
            "env = [\"HOME\"]\ndirs = [{ host = \"data\", guest = \"/data\" }, { host = \"/tmp\", guest = \"/tmp\", mode = \"rw\" }]",
        )
        .expect("parse");
        assert_eq!(g.env, vec!["HOME".to_string()]);
        assert_eq!(g.dirs[0].mode, DirMode::ReadOnly);
        assert_eq!(g.dirs[1].mode, DirMode::ReadWrite);
        assert!(toml::from_str::<Grants>("dirs = [{ host = \"x\", guest = \"/x\", mode = \"wx\" }]").is_err());
    }
}
