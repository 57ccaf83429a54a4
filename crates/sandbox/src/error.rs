//! [`LoadError`]: why a plugin could not be loaded or inspected.

use std::path::PathBuf;

/// Errors from loading or inspecting a plugin. Each names the file or plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("cannot read plugin {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The path is not a regular file (a directory, FIFO, socket or device):
    /// refused before it is opened for reading, so it cannot block or stream forever.
    #[error("plugin {path} is not a regular file (it is a {kind})")]
    NotAFile {
        /// The path.
        path: PathBuf,
        /// What it is: `directory`, `FIFO`, `socket`, `character device`, `block device`.
        kind: &'static str,
    },
    /// The file or upload is bigger than the runtime's `max_component_bytes`.
    #[error("plugin {path} is {bytes} bytes, over max_component_bytes = {max} ([runtime] in hookbox.toml)")]
    TooLarge {
        /// The file or upload label.
        path: PathBuf,
        /// Its size in bytes (at least `max + 1` when it grew while read).
        bytes: u64,
        /// The cap in bytes.
        max: u64,
    },
    /// The file is not WebAssembly at all.
    #[error("{path} is not a WebAssembly file (no `\\0asm` header)")]
    NotWasm {
        /// The file.
        path: PathBuf,
    },
    /// The file is a core module, not a component.
    #[error(
        "{path} is a core WebAssembly module, not a component: build it for wasm32-wasip2 or wrap it with `wasm-tools component new`"
    )]
    CoreModule {
        /// The file.
        path: PathBuf,
    },
    /// wasmtime could not compile the component.
    #[error("{path} is not a valid component: {message}")]
    Compile {
        /// The file.
        path: PathBuf,
        /// wasmtime's message.
        message: String,
    },
    /// Compiling the component was stopped by the compile worker's limits
    /// (`[runtime] compile_memory_bytes`, `compile_timeout_ms`), or the worker
    /// failed: the file may be a valid component that costs too much to compile.
    #[error("{path}: compiling was stopped: {message}")]
    CompileStopped {
        /// The file.
        path: PathBuf,
        /// Which limit, or what happened to the worker.
        message: String,
    },
    /// The component does not target `hookbox:hooks/hook`.
    #[error("{path} does not fit the world {world}: {message}")]
    WrongWorld {
        /// The file.
        path: PathBuf,
        /// The world it was checked against: the one of the version it
        /// declares, else the newest supported ([`crate::WORLD`]).
        world: String,
        /// What does not fit.
        message: String,
    },
    /// The component declares a `hookbox:hooks` version this host does not
    /// run: higher or lower than every one of [`crate::SUPPORTED_WIT_VERSIONS`]
    /// (versions match exactly), or `unversioned`.
    #[error(
        "{path} targets hookbox:hooks@{found}, a WIT version this host does not run (supported: {}): rebuild it against a supported version",
        supported.join(", ")
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version its `hookbox:hooks/…` imports and exports declare, e.g. `0.9.0`.
        found: String,
        /// The versions this host runs, oldest first.
        supported: Vec<String>,
    },
    /// The component's `hookbox:hooks/…` imports and exports declare more than one version.
    #[error(
        "{path} mixes hookbox:hooks versions {}: a component targets exactly one (supported: {})",
        found.join(" and "),
        supported.join(", ")
    )]
    MixedVersions {
        /// The file.
        path: PathBuf,
        /// The versions declared, sorted.
        found: Vec<String>,
        /// The versions this host runs, oldest first.
        supported: Vec<String>,
    },
    /// The component exports `on-event` but declares no `hookbox:hooks`
    /// version: it imports and exports nothing named `hookbox:hooks/…@X.Y.Z`.
    #[error(
        "{path} declares no hookbox:hooks version (it imports and exports nothing named `hookbox:hooks/…`): build it against world hook of a supported version ({})",
        supported.join(", ")
    )]
    NoWitVersion {
        /// The file.
        path: PathBuf,
        /// The versions this host runs, oldest first.
        supported: Vec<String>,
    },
    /// The component imports an interface its grants do not allow.
    #[error("{path} imports `{interface}`, which {why}")]
    Ungranted {
        /// The file.
        path: PathBuf,
        /// The interface, e.g. `wasi:sockets/tcp@0.2.6`.
        interface: String,
        /// Why it is refused.
        why: String,
    },
    /// The options are unusable (a zero limit, a grant that cannot be honoured).
    #[error("plugin `{plugin}`: {message}")]
    Options {
        /// The plugin's name.
        plugin: String,
        /// What is wrong.
        message: String,
    },
    /// The engine could not be created.
    #[error("cannot create the wasmtime engine: {0}")]
    Engine(String),
}
