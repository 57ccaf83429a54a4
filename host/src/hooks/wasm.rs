//! The sandbox: WebAssembly component hooks in wasmtime.
//!
//! - One [`HookRuntime`] per process: the [`Engine`] (fuel and epoch
//!   interruption on, `concurrency_support(false)`), one [`Linker`] with WASI p2
//!   and the `hookbox:hooks/host` imports, and a 1 ms epoch ticker thread that
//!   holds only a weak reference to the engine.
//! - One [`WasmPlugin`] per loaded component: compiled once, imports checked
//!   against its grants and resolved once ([`bindings::HookPre`]), its config
//!   and options.
//! - One [`WasmHook`] per (run, plugin): a [`Store`] and instance created on the
//!   first event and reused for the run. A call that fails in any way drops the
//!   store (wasmtime poisons a store after a trap, and a cancelled call leaves it
//!   unusable), so the next event gets a fresh instance from the `HookPre`.
//!   It also keeps the run's fuel and time budget and the crash-loop breaker.
//!
//! Deny by default: the WASI context has no preopened directories, no
//! environment, no arguments, stdin closed, sockets and name lookups denied;
//! the plugin's grants add environment variables and directories. A component
//! importing an interface no grant allows (sockets, HTTP) is refused at load.
//! A hook's stdout and stderr are captured into the log, tagged with its name
//! and capped per call.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::cache::{ComponentCache, Source};
use super::convert::{WitLists, directive_from_wit};
use super::options::{
    DirMode, FAIL_CLOSED_MESSAGE, FailPolicy, ImportNeed, PluginOptions, WASM_PAGE_BYTES, import_need,
};
use super::output::CappedPipe;
use super::state::{MemoryStateStore, StateStore, StoredState};
use super::{FailureKind, HookFailure, HookHandler, HookLog, HookReply, SuspendReason, Suspension};
use crate::event::{Directive, Event, EventKind};
use crate::journal::{JournalMonotonicClock, JournalRng, JournalWallClock, PluginJournal, RunJournal};

/// Host bindings generated from `wit/hook.wit` (world `hook`, `hookbox:hooks@0.1.0`).
#[allow(missing_docs)]
pub mod bindings {
    wasmtime::component::bindgen!({
        world: "hook",
        path: "../wit",
        // `sleep` waits without blocking the thread; everything else answers at once.
        imports: { "hookbox:hooks/host.sleep": async },
        exports: { default: async },
        // Events are lowered straight from borrowed strings: no copy per plugin per event.
        ownership: Borrowing { duplicate_if_necessary: true },
    });
}

/// The WIT package version this host implements.
pub const WIT_VERSION: &str = "0.1.0";
/// The fully qualified world this host runs.
pub const WORLD: &str = "hookbox:hooks/hook@0.1.0";

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
    /// The component does not target `hookbox:hooks/hook`.
    #[error("{path} does not fit the world {WORLD}: {message}")]
    WrongWorld {
        /// The file.
        path: PathBuf,
        /// What does not fit.
        message: String,
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

/// One import of a component and what it needs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportInfo {
    /// The import's name, e.g. `wasi:cli/stdout@0.2.6`.
    pub name: String,
    /// What it needs before the plugin may load.
    pub need: ImportNeed,
}

/// What `hookbox check` prints about a component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentInfo {
    /// The world it targets, e.g. `hookbox:hooks/hook@0.1.0`.
    pub world: String,
    /// The WIT package version, e.g. `0.1.0`.
    pub version: String,
    /// Everything the component imports, with the grant each needs.
    pub imports: Vec<ImportInfo>,
    /// Everything it exports, by name.
    pub exports: Vec<String>,
}

impl ComponentInfo {
    /// The grants the component needs to load (`dirs`), deduplicated.
    pub fn grants_needed(&self) -> Vec<&'static str> {
        if self.imports.iter().any(|i| i.need == ImportNeed::Dirs) { vec!["dirs"] } else { Vec::new() }
    }
}

/// A resource limiter that caps linear memory and remembers a refusal, so a
/// guest that aborts after a refused `memory.grow` is reported as `memory`.
struct Limiter {
    max_memory: usize,
    memory_refused: bool,
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
enum StateSource {
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

/// The data of one plugin's store.
pub struct HookCtx {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    plugin: Arc<str>,
    config: Arc<BTreeMap<String, String>>,
    logs: Vec<HookLog>,
    log_bytes: usize,
    log_cap: usize,
    log_dropped: usize,
    /// Where `get-state` reads the committed state from, set before each call.
    state_source: StateSource,
    /// The committed state, read on the first `get-state` of a call (read
    /// through to the store, so another process's saves are seen; a plugin
    /// that never asks costs no store read).
    state_read: Option<Option<StoredState>>,
    /// What `set-state` staged during this call; committed only on success.
    staged: Option<Vec<u8>>,
    /// Where `now`, `random`, `uuid`, `sleep`, `get-state` and WASI's clocks
    /// and random numbers are journaled, when the run keeps a journal.
    journal: Option<Arc<PluginJournal>>,
    /// When the current call's wall-clock deadline passes (read by the epoch callback).
    deadline: Instant,
}

impl HookCtx {
    fn push_log(&mut self, level: &str, message: String) {
        if self.log_bytes + message.len() > self.log_cap {
            self.log_dropped += message.len();
            return;
        }
        self.log_bytes += message.len();
        tracing::info!(plugin = %self.plugin, level, "{message}");
        self.logs.push(HookLog { plugin: self.plugin.to_string(), level: level.to_string(), message });
    }

    /// Takes this call's log lines, with a note when some were dropped.
    fn take_logs(&mut self) -> Vec<HookLog> {
        let mut logs = std::mem::take(&mut self.logs);
        if self.log_dropped > 0 {
            logs.push(HookLog {
                plugin: self.plugin.to_string(),
                level: "warn".into(),
                message: format!(
                    "[hookbox] {} bytes of log dropped: over max_log_bytes = {} for this call",
                    self.log_dropped, self.log_cap
                ),
            });
        }
        self.log_bytes = 0;
        self.log_dropped = 0;
        logs
    }
}

impl WasiView for HookCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl bindings::hookbox::hooks::types::Host for HookCtx {}

impl bindings::hookbox::hooks::host::Host for HookCtx {
    fn log(&mut self, level: bindings::hookbox::hooks::host::LogLevel, message: String) {
        use bindings::hookbox::hooks::host::LogLevel;
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

    fn get_state(&mut self) -> Option<bindings::hookbox::hooks::host::State> {
        if self.state_read.is_none() {
            let live = || match &self.state_source {
                StateSource::Fixed(state) => state.clone(),
                StateSource::Store { store, session } => match store.load(session, &self.plugin) {
                    Ok(state) => state,
                    Err(e) => {
                        tracing::warn!(plugin = %self.plugin, "cannot load hook state: {e}");
                        None
                    }
                },
            };
            let state = match &self.journal {
                // On replay the journal gives the state the recorded run read.
                Some(journal) => journal
                    .state(|| live().map(|s| (s.version, s.data)))
                    .map(|(version, data)| StoredState { version, data }),
                None => live(),
            };
            self.state_read = Some(state);
        }
        self.state_read
            .as_ref()
            .and_then(Option::as_ref)
            .map(|s| bindings::hookbox::hooks::host::State { version: s.version.clone(), data: s.data.clone() })
    }

    fn set_state(&mut self, data: Vec<u8>) {
        self.staged = Some(data);
    }

    fn now(&mut self) -> bindings::hookbox::hooks::host::Datetime {
        let (seconds, nanoseconds) = match &self.journal {
            Some(journal) => journal.now(),
            None => {
                let d = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
                (d.as_secs(), d.subsec_nanos())
            }
        };
        bindings::hookbox::hooks::host::Datetime { seconds, nanoseconds }
    }

    fn random(&mut self) -> u64 {
        match &self.journal {
            Some(journal) => journal.random(),
            None => rand::random(),
        }
    }

    fn uuid(&mut self) -> String {
        match &self.journal {
            Some(journal) => journal.uuid(),
            None => uuid::Uuid::new_v4().to_string(),
        }
    }

    async fn sleep(&mut self, ms: u64) {
        if let Some(journal) = &self.journal {
            journal.sleep(ms);
        }
        // The call's backstop timeout ends a sleep past the deadline (a `deadline` failure).
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

/// The process-wide wasmtime engine and linker for hooks, and the store
/// that keeps their state.
pub struct HookRuntime {
    engine: Engine,
    linker: Linker<HookCtx>,
    state: Arc<dyn StateStore>,
    cache: Option<ComponentCache>,
    options: RuntimeOptions,
    notes: Vec<String>,
}

/// How often the epoch ticker advances the engine's epoch.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// How the runtime allocates instances (`[runtime]` in hookbox.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeOptions {
    /// Use wasmtime's pooling instance allocator (default `true`): slots for
    /// instances, memories, tables and fiber stacks are reserved once (address
    /// space only) and reused, so creating an instance costs no mmap/munmap
    /// (about 1.3–2× cheaper, wasmtime-notes §5, and no IPI storms under
    /// concurrency). `false` allocates each instance on demand.
    pub pooling: bool,
    /// With pooling: how many instances may be live at once across all runs
    /// (default 1,000; one per (run, plugin) while the run is in flight). Past
    /// it an instantiation fails with an `instantiate` failure, handled by the
    /// plugin's fail policy. Each slot reserves address space (about 4 GiB per
    /// linear memory, not resident) and keeps nothing resident when idle.
    pub max_instances: u32,
    /// The largest linear memory any plugin may have, in bytes (default
    /// 4 GiB, the wasm32 maximum; a plugin's `limits.memory_bytes` above it is
    /// a load error). With pooling each memory slot reserves this much address
    /// space, so a host that keeps tens of thousands of instances lowers it
    /// (e.g. 256 MiB); below 4 GiB wasmtime compiles bounds checks into
    /// memory accesses instead of relying on guard pages.
    pub max_memory_bytes: u64,
    /// Map each instance's initial memory copy-on-write from the compiled
    /// image (default true): instantiation is 2–4× faster, at two more memory
    /// mappings per instance. Turn it off to hold tens of thousands of live
    /// instances under Linux's `vm.max_map_count` (65,530 by default).
    pub copy_on_write: bool,
}

/// The wasm32 address space: 4 GiB.
const WASM32_MAX_MEMORY: u64 = 1 << 32;

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions { pooling: true, max_instances: 1_000, max_memory_bytes: WASM32_MAX_MEMORY, copy_on_write: true }
    }
}

impl RuntimeOptions {
    /// The wasmtime configuration for these options.
    fn config(&self) -> Result<Config, LoadError> {
        let mut config = Config::new();
        config.consume_fuel(true).epoch_interruption(true).concurrency_support(false);
        if !(WASM_PAGE_BYTES..=WASM32_MAX_MEMORY).contains(&self.max_memory_bytes) {
            return Err(LoadError::Engine(format!(
                "[runtime] max_memory_bytes = {} must be between one 64 KiB page ({WASM_PAGE_BYTES}) and 4 GiB ({WASM32_MAX_MEMORY})",
                self.max_memory_bytes
            )));
        }
        if self.max_memory_bytes < WASM32_MAX_MEMORY {
            config.memory_reservation(self.max_memory_bytes);
        }
        config.memory_init_cow(self.copy_on_write);
        if self.pooling {
            if self.max_instances == 0 {
                return Err(LoadError::Engine("[runtime] max_instances must be at least 1".into()));
            }
            let n = self.max_instances;
            let mut pool = wasmtime::PoolingAllocationConfig::new();
            // Per component: a Rust wasip2 guest has 3 core instances, 1 memory and 2 tables;
            // Python and JavaScript components have more modules (each 1 memory, up to a few tables).
            pool.total_component_instances(n)
                .total_core_instances(n.saturating_mul(8))
                .total_memories(n.saturating_mul(2))
                .total_tables(n.saturating_mul(8))
                // A store keeps the fiber stack of its last async call until it is
                // dropped (wasmtime 48), so every live instance holds one.
                .total_stacks(n)
                .max_tables_per_module(4)
                .max_memories_per_module(2)
                // The same ceiling as the resource limiter's table cap.
                .table_elements(100_000)
                .max_memory_size(usize::try_from(self.max_memory_bytes).unwrap_or(usize::MAX));
            config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
        }
        Ok(config)
    }
}

impl HookRuntime {
    /// Creates the engine (pooling allocator, [`RuntimeOptions::default`]),
    /// the linker and the epoch ticker thread.
    ///
    /// Errors: [`LoadError::Engine`] if wasmtime rejects the configuration
    /// (e.g. the pool's address space cannot be reserved).
    pub fn new() -> Result<Self, LoadError> {
        Self::with_options(RuntimeOptions::default())
    }

    /// As [`HookRuntime::new`], with `options`.
    ///
    /// Errors: as [`HookRuntime::new`]; `max_instances = 0` with pooling.
    pub fn with_options(options: RuntimeOptions) -> Result<Self, LoadError> {
        let config = options.config()?;
        let mut notes = Vec::new();
        let (engine, options) = match Engine::new(&config) {
            Ok(engine) => (engine, options),
            Err(e) if options.pooling => {
                // The pool's address space could not be reserved (e.g. under `ulimit -v`):
                // allocate on demand instead, and say so.
                let fallback = RuntimeOptions { pooling: false, ..options };
                let engine = Engine::new(&fallback.config()?).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
                let note = format!(
                    "the pooling allocator is off: its address space could not be reserved ({e:#}); instances are \
                     allocated on demand. Lower [runtime] max_instances or max_memory_bytes to pool them"
                );
                tracing::warn!("{note}");
                notes.push(note);
                (engine, fallback)
            }
            Err(e) => return Err(LoadError::Engine(format!("{e:#}"))),
        };
        let weak = engine.weak();
        std::thread::Builder::new()
            .name("hookbox-epoch".into())
            .spawn(move || {
                while let Some(engine) = weak.upgrade() {
                    engine.increment_epoch();
                    drop(engine);
                    std::thread::sleep(EPOCH_TICK);
                }
            })
            .map_err(|e| LoadError::Engine(format!("cannot start the epoch ticker: {e}")))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        bindings::Hook::add_to_linker::<HookCtx, HasSelf<HookCtx>>(&mut linker, |c| c)
            .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(HookRuntime { engine, linker, state: Arc::new(MemoryStateStore::default()), cache: None, options, notes })
    }

    /// What the runtime could not do as asked (e.g. pooling fell back to on-demand allocation).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The options in effect (pooling is off here if it fell back).
    pub fn options(&self) -> RuntimeOptions {
        self.options
    }

    /// Keeps compiled components in `dir` (see [`super::cache`]), so later
    /// processes load them without compiling.
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.cache = Some(ComponentCache::new(dir));
        self
    }

    /// The directory `hookbox` uses for its component cache: `HOOKBOX_CACHE_DIR`
    /// (`off` turns the cache off), else `$XDG_CACHE_HOME/hookbox/components`,
    /// else `$HOME/.cache/hookbox/components`.
    pub fn default_cache_dir() -> Option<PathBuf> {
        match std::env::var_os("HOOKBOX_CACHE_DIR") {
            Some(v) if v == "off" => None,
            Some(v) if !v.is_empty() => Some(PathBuf::from(v)),
            _ => std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .map(|base| base.join("hookbox").join("components")),
        }
    }

    /// Keeps hook state in `store` (e.g. a [`super::state::SqliteStateStore`])
    /// instead of in memory; plugins loaded afterwards use it.
    pub fn with_state_store(mut self, store: Arc<dyn StateStore>) -> Self {
        self.state = store;
        self
    }

    /// Reads and compiles a component, checking the header first so a core
    /// module or a random file gets a precise error.
    /// Returns the component and the file's [`super::cache::content_hash`].
    fn compile(&self, path: &Path) -> Result<(Component, String), LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.to_path_buf(), source })?;
        let hash = super::cache::content_hash(&bytes);
        // Header: b"\0asm", then a u16 version and a u16 layer (component model binary format):
        // core modules are version 1 layer 0, components version 0x0d layer 1.
        if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
            return Err(LoadError::NotWasm { path: path.to_path_buf() });
        }
        if bytes[6..8] == [0, 0] {
            return Err(LoadError::CoreModule { path: path.to_path_buf() });
        }
        let compiled = match &self.cache {
            // The content hash is computed once: the journal and the cache key share it.
            Some(cache) => cache.load_hashed(&self.engine, &bytes, &hash).map(|(c, _)| c),
            None => Component::new(&self.engine, &bytes),
        };
        compiled
            .map(|c| (c, hash))
            .map_err(|e| LoadError::Compile { path: path.to_path_buf(), message: format!("{e:#}") })
    }

    /// Where `path`'s component would come from now: a valid cache entry, or a compile.
    /// Compiles (and caches) it when needed.
    ///
    /// Errors: as [`HookRuntime::load`].
    pub fn warm(&self, path: &Path) -> Result<Source, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.to_path_buf(), source })?;
        match &self.cache {
            Some(cache) => cache
                .load(&self.engine, &bytes)
                .map(|(_, source)| source)
                .map_err(|e| LoadError::Compile { path: path.to_path_buf(), message: format!("{e:#}") }),
            None => Ok(Source::Compiled),
        }
    }

    fn pre(&self, path: &Path, component: &Component) -> Result<bindings::HookPre<HookCtx>, LoadError> {
        let wrong = |e: wasmtime::Error| LoadError::WrongWorld { path: path.to_path_buf(), message: format!("{e:#}") };
        let pre = self.linker.instantiate_pre(component).map_err(wrong)?;
        bindings::HookPre::new(pre).map_err(wrong)
    }

    /// Describes a compiled component: world, version, imports with their needs, exports.
    fn describe(&self, path: &Path, component: &Component) -> Result<ComponentInfo, LoadError> {
        let ty = component.component_type();
        let imports: Vec<ImportInfo> =
            ty.imports(&self.engine).map(|(n, _)| ImportInfo { name: n.to_string(), need: import_need(n) }).collect();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(n, _)| n.to_string()).collect();
        if !exports.iter().any(|e| e == "on-event") {
            return Err(LoadError::WrongWorld {
                path: path.to_path_buf(),
                message: format!("it exports no `on-event` function (exports: {})", list_or_none(&exports)),
            });
        }
        let version = imports
            .iter()
            .filter(|i| i.name.starts_with("hookbox:hooks/"))
            .find_map(|i| i.name.rsplit_once('@').map(|(_, v)| v.to_string()))
            .unwrap_or_else(|| WIT_VERSION.to_string());
        Ok(ComponentInfo { world: format!("hookbox:hooks/hook@{version}"), version, imports, exports })
    }

    /// Loads a plugin: compiles it, checks its imports against its grants and the
    /// world, and resolves its imports once. Returns it with notes on adjusted
    /// options (e.g. memory rounded up to a page).
    ///
    /// `name` tags its logs and failures; `config` is what `get-config` returns.
    /// Errors: every [`LoadError`] variant, naming `path` or the plugin.
    pub fn load(
        &self,
        name: &str,
        path: &Path,
        config: BTreeMap<String, String>,
        options: PluginOptions,
    ) -> Result<(Arc<WasmPlugin>, Vec<String>), LoadError> {
        let bad = |message: String| LoadError::Options { plugin: name.to_string(), message };
        let (limits, notes) = options.limits.validated().map_err(bad)?;
        if limits.memory_bytes > self.options.max_memory_bytes {
            return Err(bad(format!(
                "limits.memory_bytes = {} is over the runtime's max_memory_bytes = {} ([runtime] in hookbox.toml)",
                limits.memory_bytes, self.options.max_memory_bytes
            )));
        }
        if options.events.as_ref().is_some_and(Vec::is_empty) {
            return Err(bad(
                "events = []: the plugin would never be called; list its events or leave `events` out".into()
            ));
        }
        if options.observe && options.fail == FailPolicy::Closed {
            return Err(bad(
                "observe = true with fail = \"closed\": an observe-only plugin cannot decline tools, so it cannot fail closed"
                    .into(),
            ));
        }
        let mut subscribed = [options.events.is_none(); EventKind::COUNT];
        for kind in options.events.iter().flatten() {
            subscribed[kind.index()] = true;
        }
        for dir in &options.grants.dirs {
            if !dir.guest.starts_with('/') {
                return Err(bad(format!("dirs: guest path `{}` must be absolute (e.g. `/data`)", dir.guest)));
            }
            if !dir.host.is_dir() {
                return Err(bad(format!("dirs: host path {} is not a directory", dir.host.display())));
            }
        }
        let (component, hash) = self.compile(path)?;
        let info = self.describe(path, &component)?;
        // Report a never-granted interface before one that only lacks a grant.
        let mut imports: Vec<&ImportInfo> = info.imports.iter().collect();
        imports.sort_by_key(|i| i.need != ImportNeed::Never);
        for import in imports {
            let refused = match import.need {
                ImportNeed::Always => None,
                ImportNeed::Dirs if !options.grants.dirs.is_empty() => None,
                ImportNeed::Dirs => Some(format!("needs a `dirs` grant and plugin `{name}` has none")),
                ImportNeed::Never => Some("no grant allows: hooks get no network and no other host interfaces".into()),
            };
            if let Some(why) = refused {
                return Err(LoadError::Ungranted { path: path.to_path_buf(), interface: import.name.clone(), why });
            }
        }
        let pre = self.pre(path, &component)?;
        let plugin = WasmPlugin {
            name: name.to_string(),
            path: path.to_path_buf(),
            engine: self.engine.clone(),
            pre,
            config: Arc::new(config),
            options: PluginOptions { limits, ..options },
            state: self.state.clone(),
            subscribed,
            hash,
        };
        plugin.trial_instantiate()?;
        for note in &notes {
            tracing::warn!(plugin = name, "{note}");
        }
        Ok((Arc::new(plugin), notes))
    }

    /// Validates a component against the world without running it.
    ///
    /// Errors: as [`HookRuntime::load`]; an import that no grant can allow is an error.
    pub fn inspect(&self, path: &Path) -> Result<ComponentInfo, LoadError> {
        let (component, _) = self.compile(path)?;
        let info = self.describe(path, &component)?;
        if let Some(never) = info.imports.iter().find(|i| i.need == ImportNeed::Never) {
            return Err(LoadError::Ungranted {
                path: path.to_path_buf(),
                interface: never.name.clone(),
                why: "no grant allows: hooks get no network and no other host interfaces".into(),
            });
        }
        self.pre(path, &component)?;
        Ok(info)
    }
}

fn list_or_none(items: &[String]) -> String {
    if items.is_empty() { "none".to_string() } else { items.join(", ") }
}

/// A loaded, validated plugin: compiled once, shared by every run.
pub struct WasmPlugin {
    name: String,
    path: PathBuf,
    engine: Engine,
    pre: bindings::HookPre<HookCtx>,
    config: Arc<BTreeMap<String, String>>,
    options: PluginOptions,
    state: Arc<dyn StateStore>,
    /// Which events it is entered for, by [`EventKind::index`].
    subscribed: [bool; EventKind::COUNT],
    /// BLAKE3 hash of the component file as loaded, lowercase hex.
    hash: String,
}

impl WasmPlugin {
    /// BLAKE3 hash of the component file as it was loaded (lowercase hex,
    /// [`super::cache::content_hash`]).
    pub fn content_hash(&self) -> &str {
        &self.hash
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The component file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its options, as validated (memory rounded up to a page).
    pub fn options(&self) -> &PluginOptions {
        &self.options
    }

    /// A handler for one run; the instance is created on its first event.
    pub fn hook(self: &Arc<Self>) -> WasmHook {
        WasmHook {
            plugin: self.clone(),
            live: None,
            fuel_spent: 0,
            time_spent: Duration::ZERO,
            recent_failures: VecDeque::new(),
            suspended: None,
            session: None,
            committed: None,
            staged: None,
            journal: None,
        }
    }

    /// Instantiates once, at load, so limits too small to start the plugin (or a
    /// grant that cannot be opened) are a load error, not a failure on every event.
    /// Runs no guest code beyond the component's start functions.
    fn trial_instantiate(&self) -> Result<(), LoadError> {
        let limits = self.options.limits;
        let allowance = Allowance { fuel: limits.fuel, deadline: Duration::from_millis(limits.deadline_ms) };
        let fut = WasmHook::instantiate(Arc::new(self.clone_for_trial()), allowance, None);
        // Loading is synchronous; a small current-thread runtime drives the async instantiation.
        let result = match tokio::runtime::Handle::try_current() {
            Ok(_) => std::thread::scope(|s| s.spawn(|| block_on_fresh(fut)).join().unwrap_or(Err(None))),
            Err(_) => block_on_fresh(fut),
        };
        match result {
            Ok(()) => Ok(()),
            Err(message) => Err(LoadError::Options {
                plugin: self.name.clone(),
                message: message.unwrap_or_else(|| "the trial instantiation panicked".into()),
            }),
        }
    }

    fn clone_for_trial(&self) -> WasmPlugin {
        WasmPlugin {
            name: self.name.clone(),
            path: self.path.clone(),
            engine: self.engine.clone(),
            pre: self.pre.clone(),
            config: self.config.clone(),
            options: self.options.clone(),
            state: self.state.clone(),
            subscribed: self.subscribed,
            hash: self.hash.clone(),
        }
    }

    fn wasi_ctx(
        &self,
        stdout: &CappedPipe,
        stderr: &CappedPipe,
        journal: Option<&Arc<PluginJournal>>,
    ) -> Result<WasiCtx, String> {
        let mut b = WasiCtxBuilder::new();
        b.stdout(stdout.clone()).stderr(stderr.clone());
        if let Some(j) = journal {
            // WASI's clocks and random numbers go through the run's journal too.
            b.wall_clock(JournalWallClock(j.clone()))
                .monotonic_clock(JournalMonotonicClock(j.clone()))
                .secure_random(JournalRng::new(j.clone(), false))
                .insecure_random(JournalRng::new(j.clone(), true))
                .insecure_random_seed(j.insecure_seed());
        }
        for name in &self.options.grants.env {
            if let Ok(value) = std::env::var(name) {
                b.env(name, value);
            }
        }
        for dir in &self.options.grants.dirs {
            let perms = match dir.mode {
                DirMode::ReadOnly => FsPerms::ReadOnly,
                DirMode::ReadWrite => FsPerms::ReadWrite,
            };
            b.preopened_dir(&dir.host, &dir.guest, perms)
                .map_err(|e| format!("cannot open granted dir {}: {e:#}", dir.host.display()))?;
        }
        Ok(b.build())
    }
}

/// A live instance: its store, the instance, and the captured output pipes.
struct Live {
    store: Store<HookCtx>,
    hook: bindings::Hook,
    stdout: CappedPipe,
    stderr: CappedPipe,
}

/// One plugin's handler for one run (see the module docs for the lifecycle).
pub struct WasmHook {
    plugin: Arc<WasmPlugin>,
    live: Option<Live>,
    fuel_spent: u64,
    time_spent: Duration,
    recent_failures: VecDeque<Instant>,
    suspended: Option<SuspendReason>,
    /// The session this run belongs to (from its `run-start`), which keys the state.
    session: Option<Arc<str>>,
    /// State saved by a handler that saw no `run-start` (a conformance trace):
    /// kept in the handler only, since there is no session to key it by.
    committed: Option<StoredState>,
    /// What the last call staged, committed once its directive is validated.
    staged: Option<Vec<u8>>,
    /// This plugin's part of the run's journal, if the run keeps one.
    journal: Option<Arc<PluginJournal>>,
}

impl WasmHook {
    /// Journals this hook's nondeterministic imports (and WASI's clocks and
    /// random numbers) in `journal`, or replays them from it.
    pub fn with_journal(mut self, journal: &RunJournal) -> Self {
        self.journal = Some(journal.plugin(&self.plugin.name));
        self
    }
}

/// How a failed call is classified and described.
struct CallError {
    kind: FailureKind,
    message: String,
}

/// The fuel and deadline one call gets.
#[derive(Clone, Copy)]
struct Allowance {
    fuel: u64,
    deadline: Duration,
}

impl WasmHook {
    /// Creates a fresh store and instance. Takes the plugin, not `&self`, so the
    /// future holds no reference to the (non-`Sync`) live store.
    async fn instantiate(
        p: Arc<WasmPlugin>,
        allowance: Allowance,
        journal: Option<Arc<PluginJournal>>,
    ) -> Result<Live, CallError> {
        let limits = &p.options.limits;
        let log_cap = usize::try_from(limits.max_log_bytes).unwrap_or(usize::MAX);
        let stdout = CappedPipe::new(log_cap);
        let stderr = CappedPipe::new(log_cap);
        let wasi = p
            .wasi_ctx(&stdout, &stderr, journal.as_ref())
            .map_err(|message| CallError { kind: FailureKind::Instantiate, message })?;
        let ctx = HookCtx {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
                memory_refused: false,
            },
            plugin: Arc::from(p.name.as_str()),
            config: p.config.clone(),
            logs: Vec::new(),
            log_bytes: 0,
            log_cap,
            log_dropped: 0,
            state_source: StateSource::Fixed(None),
            state_read: None,
            staged: None,
            journal,
            deadline: Instant::now(),
        };
        let mut store = Store::new(&p.engine, ctx);
        store.limiter(|c| &mut c.limiter);
        // Set once per store: each call only moves `deadline` (no allocation per call).
        store.epoch_deadline_callback(|ctx| {
            Ok(if Instant::now() >= ctx.data().deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
        });
        arm(&mut store, allowance).map_err(|e| classify(&store, e))?;
        let hook = p.pre.instantiate_async(&mut store).await.map_err(|e| {
            let err = classify(&store, e);
            CallError {
                kind: FailureKind::Instantiate,
                message: match err.kind {
                    FailureKind::Trap if err.message.contains("concurrent limit") => format!(
                        "instantiation failed: {}: the instance pool is full (raise [runtime] max_instances)",
                        err.message
                    ),
                    FailureKind::Trap => format!("instantiation failed: {}", err.message),
                    kind => format!("instantiation failed ({}): {}", kind.as_str(), err.message),
                },
            }
        })?;
        Ok(Live { store, hook, stdout, stderr })
    }

    /// What the next call may use: the per-call limits, cut to what the run budgets leave.
    fn allowance(&self) -> Allowance {
        let limits = &self.plugin.options.limits;
        let mut fuel = limits.fuel;
        if let Some(budget) = limits.run_fuel {
            fuel = fuel.min(budget.saturating_sub(self.fuel_spent));
        }
        let mut deadline = Duration::from_millis(limits.deadline_ms);
        if let Some(budget) = limits.run_time_ms {
            deadline = deadline.min(Duration::from_millis(budget).saturating_sub(self.time_spent));
        }
        Allowance { fuel, deadline }
    }

    async fn call(&mut self, event: &Event, allowance: Allowance) -> (Result<Directive, CallError>, u64, Vec<HookLog>) {
        if self.live.is_none() {
            match Self::instantiate(self.plugin.clone(), allowance, self.journal.clone()).await {
                Ok(live) => self.live = Some(live),
                Err(e) => return (Err(e), 0, Vec::new()),
            }
        }
        let Some(live) = self.live.as_mut() else {
            return (Err(CallError { kind: FailureKind::Instantiate, message: "no instance".into() }), 0, Vec::new());
        };
        let lists = WitLists::new(event);
        let wit_event = lists.event(event);
        {
            let ctx = live.store.data_mut();
            ctx.state_source = match &self.session {
                Some(session) => StateSource::Store { store: self.plugin.state.clone(), session: session.clone() },
                None => StateSource::Fixed(self.committed.clone()),
            };
            ctx.state_read = None;
            ctx.staged = None;
        }
        let armed = arm(&mut live.store, allowance);
        // The epoch callback bounds guest code; this timeout bounds everything
        // else (a host call that blocks), with a small grace over the deadline.
        let backstop = allowance.deadline + (allowance.deadline / 4).max(Duration::from_millis(5));
        let outcome = match armed {
            Err(e) => Err(classify(&live.store, e)),
            Ok(()) => match with_backstop(live.hook.call_on_event(&mut live.store, wit_event), backstop).await {
                Some(Ok(d)) => Ok(directive_from_wit(d)),
                Some(Err(e)) => Err(classify(&live.store, e)),
                None => Err(CallError {
                    kind: FailureKind::Deadline,
                    message: format!(
                        "the call did not return within its {} ms deadline (blocked in a host call)",
                        allowance.deadline.as_millis()
                    ),
                }),
            },
        };
        let fuel_used = allowance.fuel.saturating_sub(live.store.get_fuel().unwrap_or(0));
        let mut logs = live.store.data_mut().take_logs();
        let plugin = self.plugin.name.as_str();
        drain_pipe(plugin, "stdout", &live.stdout, &mut logs);
        // On a failure the guest's stderr (a panic message) goes into the failure, not the log.
        let mut stderr_logs = Vec::new();
        let stderr_text = drain_pipe(plugin, "stderr", &live.stderr, &mut stderr_logs);
        if outcome.is_ok() {
            logs.extend(stderr_logs);
        }
        let outcome = outcome.map_err(|mut e| {
            if !stderr_text.trim().is_empty() {
                e.message = format!("{}; stderr: {}", e.message, truncate_chars(stderr_text.trim(), 2_000));
            }
            e
        });
        self.staged = live.store.data_mut().staged.take();
        if outcome.is_err() {
            // A store is poisoned after a trap and unusable after a cancelled call:
            // never enter it again.
            self.live = None;
        }
        (outcome, fuel_used, logs)
    }

    /// Commits what a successful call staged with `set-state`.
    fn commit_state(&mut self, data: Vec<u8>) -> Result<(), CallError> {
        let cap = self.plugin.options.limits.max_state_bytes;
        let size = u64::try_from(data.len()).unwrap_or(u64::MAX);
        if size > cap {
            return Err(CallError {
                kind: FailureKind::InvalidOutput,
                message: format!("set-state of {size} bytes is over max_state_bytes = {cap}; the saved state stays"),
            });
        }
        let state = StoredState { version: self.plugin.options.version.clone(), data };
        let Some(session) = &self.session else {
            // No run-start seen (a conformance trace without one): keep it for this handler only.
            self.committed = Some(state);
            return Ok(());
        };
        // The store failing is the host's problem, not the hook's: the call
        // stands, and the failure is logged (the saved state stays as it was).
        if let Err(e) = self.plugin.state.save(session, &self.plugin.name, &state) {
            tracing::error!(plugin = %self.plugin.name, "hook state not saved: {e}");
        }
        Ok(())
    }

    /// Records a failure for the breaker; returns the suspension if it tripped.
    fn note_failure(&mut self, now: Instant) -> Option<SuspendReason> {
        let breaker = self.plugin.options.breaker;
        if breaker.failures == 0 {
            return None;
        }
        let window = Duration::from_millis(breaker.window_ms);
        self.recent_failures.push_back(now);
        while self.recent_failures.front().is_some_and(|t| now.duration_since(*t) > window) {
            self.recent_failures.pop_front();
        }
        (self.recent_failures.len() >= breaker.failures as usize).then_some(SuspendReason::CrashLoop)
    }

    /// Checks the run budgets after a call; returns the suspension if one is spent.
    fn budget_spent(&self) -> Option<SuspendReason> {
        let limits = &self.plugin.options.limits;
        let fuel_out = limits.run_fuel.is_some_and(|b| self.fuel_spent >= b);
        let time_out = limits.run_time_ms.is_some_and(|b| self.time_spent >= Duration::from_millis(b));
        (fuel_out || time_out).then_some(SuspendReason::Budget)
    }

    fn suspension_message(&self, reason: SuspendReason) -> String {
        let o = &self.plugin.options;
        match reason {
            SuspendReason::CrashLoop => format!(
                "quarantined for the rest of the run: {} failures within {} ms",
                o.breaker.failures, o.breaker.window_ms
            ),
            SuspendReason::Budget => format!(
                "skipped for the rest of the run: run budget spent (fuel {} of {:?}, time {} ms of {:?})",
                self.fuel_spent,
                o.limits.run_fuel,
                self.time_spent.as_millis(),
                o.limits.run_time_ms
            ),
        }
    }
}

/// Runs `fut` (an instantiation) to completion on a fresh current-thread runtime.
/// `Err(Some(message))` is a failed instantiation, `Err(None)` a runtime that could not start.
fn block_on_fresh(fut: impl std::future::Future<Output = Result<Live, CallError>>) -> Result<(), Option<String>> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().map_err(|e| Some(e.to_string()))?;
    rt.block_on(fut).map(drop).map_err(|e| Some(e.message))
}

/// Runs `fut` to completion, or gives up after `limit` (`None`). The timer is
/// armed only if `fut` does not finish at its first poll, so a call that never
/// waits (most hook calls) costs no timer registration.
async fn with_backstop<F: std::future::Future>(fut: F, limit: Duration) -> Option<F::Output> {
    use std::task::Poll;
    let deadline = tokio::time::Instant::now() + limit;
    let mut fut = std::pin::pin!(fut);
    let mut timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        let timer = timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Sets the fuel and the wall-clock deadline for the next call.
fn arm(store: &mut Store<HookCtx>, allowance: Allowance) -> wasmtime::Result<()> {
    store.set_fuel(allowance.fuel)?;
    store.data_mut().deadline = Instant::now() + allowance.deadline;
    store.set_epoch_deadline(1);
    Ok(())
}

fn classify(store: &Store<HookCtx>, e: wasmtime::Error) -> CallError {
    let kind = match e.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => FailureKind::OutOfFuel,
        Some(Trap::Interrupt) => FailureKind::Deadline,
        _ if store.data().limiter.memory_refused => FailureKind::Memory,
        _ => FailureKind::Trap,
    };
    let root = e.root_cause().to_string();
    let top = e.to_string();
    let message = if top == root || top.starts_with("error while executing") { root } else { format!("{top}: {root}") };
    CallError { kind, message }
}

/// Moves this call's pipe output into `logs`, line by line; returns its text.
fn drain_pipe(plugin: &str, stream: &str, pipe: &CappedPipe, logs: &mut Vec<HookLog>) -> String {
    let (bytes, dropped) = pipe.take();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        tracing::info!(plugin, stream, "{line}");
        logs.push(HookLog { plugin: plugin.to_string(), level: stream.to_string(), message: line.to_string() });
    }
    if dropped > 0 {
        logs.push(HookLog {
            plugin: plugin.to_string(),
            level: "warn".into(),
            message: format!("[hookbox] {dropped} bytes of {stream} dropped: over max_log_bytes for this call"),
        });
    }
    text
}

/// The first `max` characters of `s` (never splits a character).
pub(crate) fn truncate_chars(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[async_trait::async_trait]
impl HookHandler for WasmHook {
    fn name(&self) -> &str {
        &self.plugin.name
    }

    fn fail_policy(&self) -> FailPolicy {
        self.plugin.options.fail
    }

    fn subscribed(&self, kind: EventKind) -> bool {
        self.plugin.subscribed[kind.index()]
    }

    fn observe_only(&self) -> bool {
        self.plugin.options.observe
    }

    fn run_started(&mut self, session_id: &str) {
        if self.session.as_deref() != Some(session_id) {
            if self.session.is_some() {
                // Another session: a fresh instance, so nothing the guest kept in
                // memory (globals, heap) crosses from one session to the next.
                self.live = None;
            }
            self.session = Some(Arc::from(session_id));
            self.committed = None;
        }
    }

    async fn on_event(&mut self, event: &Event) -> HookReply {
        if !self.plugin.subscribed[event.kind().index()] {
            // Not subscribed: never entered (the chain does not even call this).
            return HookReply {
                outcome: Ok(Directive::Continue),
                logs: Vec::new(),
                suspension: None,
                fuel_used: 0,
                duration_us: 0,
            };
        }
        if self.suspended.is_some() {
            // A suspended fail-closed guard keeps declining tools.
            let outcome = if self.plugin.options.fail == FailPolicy::Closed && event.kind() == EventKind::BeforeToolCall
            {
                Directive::SkipTool(Some(FAIL_CLOSED_MESSAGE.to_string()))
            } else {
                Directive::Continue
            };
            return HookReply {
                outcome: Ok(outcome),
                logs: Vec::new(),
                suspension: None,
                fuel_used: 0,
                duration_us: 0,
            };
        }
        if let Event::RunStart { session_id, .. } = event {
            // Also when the hook is driven directly (a conformance trace), not by a chain.
            self.run_started(session_id);
        }
        let allowance = self.allowance();
        let started = Instant::now();
        let (outcome, fuel_used, logs) = self.call(event, allowance).await;
        let elapsed = started.elapsed();
        self.fuel_spent = self.fuel_spent.saturating_add(fuel_used);
        self.time_spent += elapsed;
        let duration_us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        let max_output = self.plugin.options.limits.max_output_bytes;
        let staged = self.staged.take();
        let outcome = outcome.and_then(|d| validate(d, max_output)).and_then(|d| match staged {
            // State is committed only for a call that succeeded in every way.
            Some(data) => self.commit_state(data).map(|()| d),
            None => Ok(d),
        });
        let outcome = outcome.map_err(|e| {
            tracing::warn!(plugin = %self.plugin.name, event = %event.kind(), kind = e.kind.as_str(), "hook failed: {}", e.message);
            HookFailure {
                plugin: self.plugin.name.clone(),
                event: event.kind().to_string(),
                kind: e.kind,
                message: e.message,
                fuel_used,
                duration_us,
            }
        });
        if outcome.is_err() {
            // Whatever failed, the next call starts from a fresh instance and the committed state.
            self.live = None;
        }
        let tripped = if outcome.is_err() { self.note_failure(Instant::now()) } else { None };
        let suspension = tripped.or_else(|| self.budget_spent()).map(|reason| {
            self.suspended = Some(reason);
            self.live = None;
            let message = self.suspension_message(reason);
            tracing::warn!(plugin = %self.plugin.name, "{message}");
            Suspension { plugin: self.plugin.name.clone(), event: event.kind().to_string(), reason, message }
        });
        HookReply { outcome, logs, suspension, fuel_used, duration_us: duration_us.max(1) }
    }
}

/// Bytes of all strings a directive carries.
fn payload_bytes(d: &Directive) -> u64 {
    let blocks = |b: &[crate::event::ContentBlock]| -> usize {
        b.iter()
            .map(|c| match c {
                crate::event::ContentBlock::Text(t) => t.len(),
            })
            .sum()
    };
    let n = match d {
        Directive::Continue | Directive::Pause => 0,
        Directive::SkipTool(m) | Directive::Abort(m) => m.as_ref().map_or(0, String::len),
        Directive::ReplaceArguments(s)
        | Directive::ReplaceResult(s)
        | Directive::InjectMessage(s)
        | Directive::Retry(s)
        | Directive::Reject(s)
        | Directive::SkipRun(s) => s.len(),
        Directive::ReplaceContent(b) | Directive::ReplaceUserContent(b) => blocks(b),
    };
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Rejects directives the host cannot use: over the output cap, or invalid JSON arguments.
fn validate(d: Directive, max_output_bytes: u64) -> Result<Directive, CallError> {
    let size = payload_bytes(&d);
    if size > max_output_bytes {
        return Err(CallError {
            kind: FailureKind::InvalidOutput,
            message: format!("`{}` carries {size} bytes, over max_output_bytes = {max_output_bytes}", d.action()),
        });
    }
    if let Directive::ReplaceArguments(args) = &d {
        match serde_json::from_str::<serde_json::Value>(args) {
            Ok(serde_json::Value::Object(_)) => {}
            Ok(_) => {
                return Err(CallError {
                    kind: FailureKind::InvalidOutput,
                    message: "replace-arguments is valid JSON but not an object".into(),
                });
            }
            Err(e) => {
                return Err(CallError {
                    kind: FailureKind::InvalidOutput,
                    message: format!("replace-arguments is not valid JSON: {e}"),
                });
            }
        }
    }
    Ok(d)
}
