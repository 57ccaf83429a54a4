//! `hookbox.toml`: the agent settings and the plugins to load, in order.
//!
//! ```toml
//! [agent]
//! system = "Just call tools without asking for confirmation."
//! max_iterations = 20
//!
//! [model]
//! read_timeout_ms = 300000       # optional: how long a response may send nothing
//!
//! [[plugins]]
//! name = "deny-tools"            # optional; default: the file name without `.wasm`
//! path = "deny_tools.wasm"       # relative to this file
//! limits = { fuel = 100000000, deadline_ms = 1000, memory_bytes = 67108864 }  # optional
//! fail = "closed"                # optional: a failure at before-tool-call declines the tool
//! breaker = { failures = 5, window_ms = 60000 }                                # optional
//! env = ["LANG"]                 # optional grants: environment variables…
//! dirs = [{ host = "data", guest = "/data", mode = "ro" }]                     # …and directories
//! [plugins.config]               # what the plugin's `get-config` sees
//! tools = ["delete_file"]
//! paths = [".env"]
//! ```
//!
//! Unknown keys are errors, so a typo never silently drops a setting.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::handle::PauseTimeout;
use hookbox_contract::EventKind;
use hookbox_sandbox::RuntimeOptions;
use hookbox_sandbox::{Breaker, DirGrant, FailPolicy, Grants, Limits, PluginOptions};

/// The whole file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Agent loop settings.
    #[serde(default)]
    pub agent: AgentConfig,
    /// How the hook runtime allocates instances (`pooling`, `max_instances`).
    #[serde(default)]
    pub runtime: RuntimeOptions,
    /// The live model provider's connection settings (the `[model]` table).
    #[serde(default)]
    pub model: ModelConfig,
    /// Session settings (the `[session]` table): what a session does with
    /// injections a turn did not deliver.
    #[serde(default)]
    pub session: SessionOptions,
    /// Who may post to whom between sessions (the `[routing]` table; default nobody).
    #[serde(default)]
    pub routing: crate::routing::RoutingPolicy,
    /// The plugins, in the order their hooks run.
    #[serde(default)]
    pub plugins: Vec<PluginEntry>,
}

/// What a session does with injections a turn did not deliver.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LateInjectionPolicy {
    /// Return them in the turn's `undelivered_injections` (the default).
    #[default]
    Surface,
    /// Send them, joined by a blank line, as the next turn.
    NewTurn,
}

/// Session settings (the manifest's `[session]` table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionOptions {
    /// What to do with undelivered injections.
    pub late_injection_policy: LateInjectionPolicy,
    /// The most follow-up turns one `run` may add under `new_turn`. Default 3.
    pub max_follow_up_turns: u32,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions { late_injection_policy: LateInjectionPolicy::Surface, max_follow_up_turns: 3 }
    }
}

/// One plugin's table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginEntry {
    /// The name in logs and traces; default: the file name without `.wasm`.
    pub name: Option<String>,
    /// The component file; a relative path is relative to the manifest's folder.
    pub path: PathBuf,
    /// The plugin's own configuration: any TOML values. Strings reach the
    /// plugin as they are; other values as JSON text.
    #[serde(default)]
    pub config: BTreeMap<String, toml::Value>,
    /// Sandbox limits; every field has a default (see [`Limits`]).
    #[serde(default)]
    pub limits: Limits,
    /// `open` (default: a failure is `continue`) or `closed` (a failure at
    /// `before-tool-call` declines the tool).
    #[serde(default)]
    pub fail: FailPolicy,
    /// The crash-loop breaker (default: 5 failures within 60,000 ms).
    #[serde(default)]
    pub breaker: Breaker,
    /// Host environment variables the plugin may read (default: none).
    #[serde(default)]
    pub env: Vec<String>,
    /// Host directories the plugin may open (default: none); `host` is relative to this file.
    #[serde(default)]
    pub dirs: Vec<DirGrant>,
    /// The plugin's version, stored with its state so a newer version can migrate it (default `0`).
    pub version: Option<String>,
    /// The events the plugin is entered for, e.g. `["before-tool-call"]`
    /// (default: every event). The host never calls it for the others.
    pub events: Option<Vec<EventKind>>,
    /// `true` for a plugin that only watches (an audit log, metrics): its calls
    /// run beside the loop instead of holding it, and any directive other than
    /// `continue` is ignored. Cannot be combined with `fail = "closed"`.
    #[serde(default)]
    pub observe: bool,
}

impl PluginEntry {
    /// An entry for `path` with no name, no config and default options.
    pub fn with_defaults(path: PathBuf) -> Self {
        PluginEntry {
            name: None,
            path,
            config: BTreeMap::new(),
            limits: Limits::default(),
            fail: FailPolicy::default(),
            breaker: Breaker::default(),
            env: Vec::new(),
            dirs: Vec::new(),
            version: None,
            events: None,
            observe: false,
        }
    }

    /// The plugin's name: `name`, or the file stem of `path`.
    pub fn display_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| plugin_name_from_path(&self.path))
    }

    /// The sandbox options of this entry.
    pub fn options(&self) -> PluginOptions {
        PluginOptions {
            limits: self.limits,
            fail: self.fail,
            breaker: self.breaker,
            grants: Grants { env: self.env.clone(), dirs: self.dirs.clone() },
            version: self.version.clone().unwrap_or_else(|| "0".to_string()),
            events: self.events.clone(),
            observe: self.observe,
        }
    }

    /// The config as the plugin sees it: key → string (non-strings as JSON text).
    pub fn config_strings(&self) -> BTreeMap<String, String> {
        self.config
            .iter()
            .map(|(k, v)| {
                let s = match v {
                    toml::Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                };
                (k.clone(), s)
            })
            .collect()
    }
}

/// The default plugin name for a file: its stem, `_` turned into `-`.
pub fn plugin_name_from_path(path: &Path) -> String {
    path.file_stem().map(|s| s.to_string_lossy().replace('_', "-")).unwrap_or_else(|| path.display().to_string())
}

/// Errors reading a manifest. Each names the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or does not fit the schema.
    #[error("invalid config {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message, with line and column.
        message: String,
    },
}

impl Manifest {
    /// Reads `path` and resolves plugin paths against its folder.
    ///
    /// Errors: [`ConfigError::Io`], [`ConfigError::Parse`] (with the line and column).
    pub fn load(path: &Path) -> Result<Manifest, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ConfigError::Io { path: path.to_path_buf(), source })?;
        let mut manifest: Manifest = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim().replace('\n', " "),
        })?;
        if manifest.model.read_timeout_ms == 0 {
            return Err(ConfigError::Parse {
                path: path.to_path_buf(),
                message: "`model.read_timeout_ms` must be at least 1 (milliseconds)".into(),
            });
        }
        let base = path.parent().unwrap_or(Path::new("."));
        for p in &mut manifest.plugins {
            if p.path.is_relative() {
                p.path = base.join(&p.path);
            }
            for d in &mut p.dirs {
                if d.host.is_relative() {
                    d.host = base.join(&d.host);
                }
            }
        }
        Ok(manifest)
    }
}

/// Settings of the live model provider (the `[model]` table of `hookbox.toml`);
/// the replay provider ignores them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelConfig {
    /// How long, in milliseconds, a response may send no bytes (waiting for
    /// it to begin, or between two pieces of a stream). A stream that goes
    /// quiet that long after it began is retried like a connection error
    /// unless part of its text was already streamed to the embedder
    /// ([`hookbox_providers::retry::is_retryable`]). Default 300,000; 0 is
    /// refused at load.
    pub read_timeout_ms: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        let ms = hookbox_providers::http::DEFAULT_READ_TIMEOUT.as_millis();
        ModelConfig { read_timeout_ms: u64::try_from(ms).unwrap_or(u64::MAX) }
    }
}

impl ModelConfig {
    /// The live provider options these settings give, with `base_url` (none:
    /// the API's environment variable, else its public default).
    pub fn http_options(&self, base_url: Option<&str>) -> hookbox_providers::http::HttpOptions {
        hookbox_providers::http::HttpOptions {
            base_url: base_url.map(str::to_owned),
            read_timeout: std::time::Duration::from_millis(self.read_timeout_ms.max(1)),
            ..hookbox_providers::http::HttpOptions::default()
        }
    }
}

/// Settings of the loop (the `[agent]` table of `hookbox.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// The system prompt, if any.
    pub system: Option<String>,
    /// The most iterations (tool roundtrips) a run may open; the run fails past it. Default 20.
    pub max_iterations: u32,
    /// Characters of a tool result shown to hooks in `tool-call-result`
    /// (500 by default; 0 shows the whole result).
    pub tool_result_preview_chars: usize,
    /// Fire `request-start` before each provider request (opt-in, observation only). Default false.
    pub emit_request_start: bool,
    /// How long a paused run may wait for resume, in milliseconds; none waits for ever.
    /// An unanswered pause must not hold a run's resources for ever.
    pub pause_timeout_ms: Option<u64>,
    /// What a pause timeout does: `abort` (default) or `resume`.
    pub on_pause_timeout: PauseTimeout,
    /// Attempts per model request, the first included, on 408/409/429/5xx/529
    /// and connection errors, with exponential backoff and full jitter, honouring
    /// `retry-after` ([`hookbox_providers::retry::RetryPolicy`]). Default 4.
    pub max_attempts: u32,
    /// Characters of a tool result kept for the model and the history; a longer
    /// result is cut on a character boundary with a marker, and hooks see
    /// `truncated: true`. 0 means no cap. Default 100,000.
    pub max_tool_result_chars: usize,
    /// Prices (USD per million tokens) by model prefix that win over the built-in
    /// table: `[agent.prices."gpt-4o"] input = 2.5, output = 10`.
    pub prices: std::collections::BTreeMap<String, hookbox_providers::pricing::PriceOverride>,
}

impl Default for AgentConfig {
    fn default() -> Self {
        AgentConfig {
            system: None,
            max_iterations: 20,
            tool_result_preview_chars: 500,
            emit_request_start: false,
            pause_timeout_ms: None,
            on_pause_timeout: PauseTimeout::Abort,
            max_attempts: 4,
            max_tool_result_chars: 100_000,
            prices: std::collections::BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plugins_in_order_with_config_and_limits() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hookbox.toml");
        std::fs::write(
            &path,
            r#"
[agent]
system = "be brief"
[[plugins]]
path = "a/deny_tools.wasm"
limits = { fuel = 5 }
[plugins.config]
tools = ["delete_file"]
mode = "strict"
[[plugins]]
name = "audit"
path = "/abs/audit.wasm"
"#,
        )
        .expect("write");
        let m = Manifest::load(&path).expect("valid manifest");
        assert_eq!(m.agent.system.as_deref(), Some("be brief"));
        assert_eq!(m.plugins.len(), 2);
        assert_eq!(m.plugins[0].display_name(), "deny-tools");
        assert_eq!(m.plugins[0].path, dir.path().join("a/deny_tools.wasm"));
        assert_eq!(m.plugins[0].limits.fuel, 5);
        assert_eq!(m.plugins[0].limits.deadline_ms, Limits::default().deadline_ms);
        let cfg = m.plugins[0].config_strings();
        assert_eq!(cfg.get("tools").map(String::as_str), Some(r#"["delete_file"]"#));
        assert_eq!(cfg.get("mode").map(String::as_str), Some("strict"));
        assert_eq!(m.plugins[1].display_name(), "audit");
        assert_eq!(m.plugins[1].path, PathBuf::from("/abs/audit.wasm"));
    }

    #[test]
    fn model_read_timeout_is_read_and_zero_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hookbox.toml");
        std::fs::write(&path, "[model]\nread_timeout_ms = 250\n").expect("write");
        let m = Manifest::load(&path).expect("valid manifest");
        assert_eq!(m.model.read_timeout_ms, 250);
        let options = m.model.http_options(Some("http://127.0.0.1:9"));
        assert_eq!(options.read_timeout, std::time::Duration::from_millis(250));
        assert_eq!(options.base_url.as_deref(), Some("http://127.0.0.1:9"));
        std::fs::write(&path, "[model]\nread_timeout_ms = 0\n").expect("write");
        let err = Manifest::load(&path).expect_err("zero is refused").to_string();
        assert!(err.contains("read_timeout_ms"), "{err}");
        std::fs::write(&path, "[model]\nread_timeout = 5\n").expect("write");
        assert!(Manifest::load(&path).is_err(), "unknown keys are errors");
    }

    #[test]
    fn unknown_keys_and_bad_toml_name_the_file_and_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[[plugins]]\npath = \"x.wasm\"\nfule = 3\n").expect("write");
        let err = Manifest::load(&path).expect_err("must fail").to_string();
        assert!(err.contains("bad.toml") && err.contains("fule"), "{err}");
        std::fs::write(&path, "[[plugins]\n").expect("write");
        let err = Manifest::load(&path).expect_err("must fail").to_string();
        assert!(err.contains("bad.toml") && err.contains("line 1"), "{err}");
        let err = Manifest::load(&dir.path().join("missing.toml")).expect_err("must fail").to_string();
        assert!(err.contains("missing.toml"), "{err}");
    }

    #[test]
    fn subscriptions_observe_and_runtime_options() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("hookbox.toml");
        std::fs::write(
            &path,
            "[runtime]\npooling = false\nmax_instances = 50\ncopy_on_write = false\n[[plugins]]\npath = \"a.wasm\"\n\
             events = [\"before-tool-call\", \"run-end\"]\nobserve = true\n",
        )
        .expect("write");
        let m = Manifest::load(&path).expect("valid manifest");
        assert_eq!(
            m.runtime,
            RuntimeOptions { pooling: false, max_instances: 50, copy_on_write: false, ..RuntimeOptions::default() }
        );
        let options = m.plugins[0].options();
        assert_eq!(options.events, Some(vec![EventKind::BeforeToolCall, EventKind::RunEnd]));
        assert!(options.observe);
        assert_eq!(Manifest::default().runtime, RuntimeOptions::default());
        assert_eq!(Manifest::default().model.read_timeout_ms, 300_000);
        assert_eq!(PluginEntry::with_defaults("x.wasm".into()).options().events, None, "default: every event");

        std::fs::write(&path, "[[plugins]]\npath = \"a.wasm\"\nevents = [\"before-tool\"]\n").expect("write");
        let err = Manifest::load(&path).expect_err("must fail").to_string();
        assert!(
            err.contains("before-tool") && err.contains("before-tool-call"),
            "names the bad event and the valid ones: {err}"
        );
    }
}
