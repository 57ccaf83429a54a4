//! [`JournalFile`]: the journal as `hookbox run --journal FILE` writes it
//! and `hookbox replay FILE` reads it, and [`JournalProvider`], the model of
//! a replay.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hookbox_contract::CallRecord;
use serde::{Deserialize, Serialize};

use super::values::{ImportValue, ToolRecord};
use super::{JOURNAL_FORMAT, JOURNAL_VERSION, MAX_JOURNAL_BYTES};
use crate::config::Manifest;

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
    /// The run's turn number in its session (1-based; hooks of WIT 0.2.0 see
    /// it in the event context). Journals written before it existed read as 1.
    #[serde(default = "first_turn")]
    pub turn: u32,
    /// The user's prompt.
    pub prompt: String,
    /// The session's conversation the run started from (the earlier turns a
    /// `--session` run continued), sent before the prompt; a replay starts
    /// from it too.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<hookbox_providers::Message>,
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
    /// Every approval's answer, in order (a replay answers with them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approvals: Vec<hookbox_contract::ApprovalRecord>,
    /// How the run ended (`end_turn`, `error`, …); a replay that ends otherwise differs.
    pub stop_reason: crate::outcome::StopReason,
}

/// A journal without `turn` recorded the first turn.
fn first_turn() -> u32 {
    1
}

/// The model of a replay: the journal's recorded responses, under the
/// provider and model names the recorded run had (hooks see them in
/// `run-start` and `request-start`, and prices follow the model).
pub struct JournalProvider {
    inner: hookbox_providers::replay::ReplayProvider,
    provider: String,
    model: String,
}

impl JournalProvider {
    /// The responses of `file`, labelled `path` in errors.
    ///
    /// Errors: the journal's `responses` is not a recorded session.
    pub fn new(file: &JournalFile, path: &Path) -> Result<Self, hookbox_providers::replay::ReplayError> {
        let inner = hookbox_providers::replay::ReplayProvider::from_journal_json(&file.responses, path)?;
        Ok(JournalProvider { inner, provider: file.provider.clone(), model: file.model.clone() })
    }
}

#[async_trait::async_trait]
impl hookbox_providers::ModelProvider for JournalProvider {
    fn name(&self) -> &str {
        &self.provider
    }

    fn model(&self) -> &str {
        &self.model
    }

    async fn complete(
        &self,
        request: &hookbox_providers::ModelRequest,
    ) -> Result<hookbox_providers::ModelResponse, hookbox_providers::ProviderError> {
        self.inner.complete(request).await
    }

    fn skip_answered(&self, responses: usize) {
        hookbox_providers::ModelProvider::skip_answered(&self.inner, responses);
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
        let kinds: Vec<&str> = hookbox_contract::EventKind::ALL.iter().map(|k| k.as_str()).collect();
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
