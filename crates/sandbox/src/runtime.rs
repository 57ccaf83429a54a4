//! [`HookRuntime`]: the process-wide wasmtime engine and linker for hooks,
//! built from [`RuntimeOptions`] (`[runtime]` in hookbox.toml), with the
//! epoch ticker, the component cache, the compile worker and the state store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmtime::Engine;
use wasmtime::component::{HasSelf, Linker};

use crate::bindings::{v0_1_0, v0_2_0};
use crate::cache::ComponentCache;
use crate::compile::CompileWorker;
use crate::ctx::HookCtx;
use crate::error::LoadError;
pub use crate::runtime_options::RuntimeOptions;
use crate::state::{MemoryStateStore, StateStore};

/// The process-wide wasmtime engine and linker for hooks, and the store
/// that keeps their state.
#[derive(Clone)]
pub struct HookRuntime {
    pub(crate) engine: Engine,
    pub(crate) linker: Arc<Linker<HookCtx>>,
    pub(crate) state: Arc<dyn StateStore>,
    pub(crate) cache: Option<ComponentCache>,
    pub(crate) options: RuntimeOptions,
    pub(crate) notes: Vec<String>,
    pub(crate) compile_worker: Option<Arc<CompileWorker>>,
}

/// How often the epoch ticker advances the engine's epoch.
const EPOCH_TICK: Duration = Duration::from_millis(1);

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
        // The host imports of every supported version, side by side in one linker
        // (their names carry the version, so they never clash).
        v0_1_0::Hook::add_to_linker::<HookCtx, HasSelf<HookCtx>>(&mut linker, |c| c)
            .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        v0_2_0::Hook::add_to_linker::<HookCtx, HasSelf<HookCtx>>(&mut linker, |c| c)
            .map_err(|e| LoadError::Engine(format!("{e:#}")))?;
        Ok(HookRuntime {
            engine,
            linker: Arc::new(linker),
            state: Arc::new(MemoryStateStore::default()),
            cache: None,
            options,
            notes,
            compile_worker: CompileWorker::process_default().cloned().map(Arc::new),
        })
    }

    /// Compiles components in `worker`, a child process with the compile
    /// limits of [`RuntimeOptions`] (see [`crate::compile`]), or in this
    /// process when `None`. The default is the process's
    /// ([`CompileWorker::set_process_default`]), else in this process.
    pub fn with_compile_worker(mut self, worker: Option<CompileWorker>) -> Self {
        self.compile_worker = worker.map(Arc::new);
        self
    }

    /// What the runtime could not do as asked (e.g. pooling fell back to on-demand allocation).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The worker this runtime compiles in, if any (see [`crate::compile`]).
    pub fn compile_worker(&self) -> Option<&CompileWorker> {
        self.compile_worker.as_deref()
    }

    /// The options in effect (pooling is off here if it fell back).
    pub fn options(&self) -> RuntimeOptions {
        self.options
    }

    /// Keeps compiled components in `dir` (see [`crate::cache`]), so later
    /// processes load them without compiling. A directory that cannot be
    /// trusted (writable by group or others, owned by another user, a key
    /// file others can read) or cannot be created is not used: the runtime
    /// then compiles every load, and says why in a warning and in
    /// [`HookRuntime::notes`].
    pub fn with_cache_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        match ComponentCache::open(dir) {
            Ok(cache) => self.cache = Some(cache),
            Err(e) => {
                let note = format!("the component cache is off: {e}");
                tracing::warn!("{note}");
                self.notes.push(note);
                self.cache = None;
            }
        }
        self
    }

    /// The directories no plugin's `dirs` grant may cover, contain or lie
    /// inside: the component cache's and the state store's
    /// ([`StateStore::location`]).
    pub(crate) fn protected_dirs(&self) -> Vec<(&'static str, PathBuf)> {
        let mut dirs = Vec::new();
        if let Some(cache) = &self.cache {
            dirs.push(("the component cache", cache.dir().to_path_buf()));
        }
        if let Some(dir) = self.state.location() {
            dirs.push(("the hook state database's directory", dir));
        }
        dirs
    }

    /// Keeps hook state in `store` (e.g. the agent crate's SQLite store)
    /// instead of in memory; plugins loaded afterwards use it.
    pub fn with_state_store(mut self, store: Arc<dyn StateStore>) -> Self {
        self.state = store;
        self
    }

    /// Removes `wasm`'s compiled artifact from the component cache, if the
    /// runtime has one (a component it was asked to load and that was
    /// refused, so that refused uploads leave nothing on disk).
    pub fn forget_cached(&self, wasm: &[u8]) {
        if let Some(cache) = &self.cache {
            cache.forget(&self.engine, &crate::cache::content_hash(wasm));
        }
    }

    /// A builder: options, cache directory and state store, then [`HookRuntimeBuilder::build`].
    pub fn builder() -> HookRuntimeBuilder {
        HookRuntimeBuilder::default()
    }
}

/// Builds a [`HookRuntime`]:
/// `HookRuntime::builder().options(o).cache_dir(dir).state_store(s).build()`.
#[derive(Default)]
pub struct HookRuntimeBuilder {
    options: RuntimeOptions,
    cache_dir: Option<PathBuf>,
    state: Option<Arc<dyn StateStore>>,
    compile_worker: Option<Option<CompileWorker>>,
}

impl HookRuntimeBuilder {
    /// Compiles in `worker`, or in this process when `None` (default: the
    /// process's default worker, see [`HookRuntime::with_compile_worker`]).
    pub fn compile_worker(mut self, worker: Option<CompileWorker>) -> Self {
        self.compile_worker = Some(worker);
        self
    }

    /// Instance allocation options (default [`RuntimeOptions::default`]).
    pub fn options(mut self, options: RuntimeOptions) -> Self {
        self.options = options;
        self
    }

    /// Keeps compiled components in `dir` (`None`, the default: no cache,
    /// every load compiles).
    pub fn cache_dir(mut self, dir: Option<PathBuf>) -> Self {
        self.cache_dir = dir;
        self
    }

    /// Keeps hook state in `store` (default: in memory, for the process).
    pub fn state_store(mut self, store: Arc<dyn StateStore>) -> Self {
        self.state = Some(store);
        self
    }

    /// Creates the engine, the linker and the epoch ticker.
    ///
    /// Errors: as [`HookRuntime::with_options`].
    pub fn build(self) -> Result<HookRuntime, LoadError> {
        let mut runtime = HookRuntime::with_options(self.options)?;
        if let Some(dir) = self.cache_dir {
            runtime = runtime.with_cache_dir(dir);
        }
        if let Some(store) = self.state {
            runtime = runtime.with_state_store(store);
        }
        if let Some(worker) = self.compile_worker {
            runtime = runtime.with_compile_worker(worker);
        }
        Ok(runtime)
    }
}
