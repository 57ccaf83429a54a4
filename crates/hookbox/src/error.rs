//! [`Error`]: the crate's error, one variant per failing part, each keeping
//! its source.

use crate::config::ConfigError;
use crate::handle::HandleError;
use crate::journal::JournalError;
use crate::tools::ToolError;

/// What can go wrong assembling or driving an agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `hookbox.toml` cannot be read or parsed.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A setting or plugin list that cannot work (a message naming it).
    #[error("{0}")]
    Invalid(String),
    /// The hook runtime cannot be created.
    #[error(transparent)]
    Load(hookbox_sandbox::LoadError),
    /// A plugin cannot be loaded; `source_name` says where it came from.
    #[error("{source_name}: {source}")]
    Plugin {
        /// Where the plugin came from (`hookbox.toml (plugins[0])`, `--plugin x.wasm`).
        source_name: String,
        /// Why it cannot load.
        #[source]
        source: hookbox_sandbox::LoadError,
    },
    /// The model provider cannot be built.
    #[error(transparent)]
    Provider(#[from] hookbox_providers::SpecError),
    /// A workspace or tool error.
    #[error(transparent)]
    Tool(#[from] ToolError),
    /// A journal cannot be read or used.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A run handle refused an action.
    #[error(transparent)]
    Handle(#[from] HandleError),
    /// A state store cannot be opened.
    #[error(transparent)]
    State(#[from] hookbox_sandbox::StateError),
}
