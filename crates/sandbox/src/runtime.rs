//! [`HookRuntime`]: the process-wide wasmtime engine and linker for hooks,
//! with its [`RuntimeOptions`] (`[runtime]` in hookbox.toml), the epoch
//! ticker, the component cache and the state store.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use wasmtime::component::{HasSelf, Linker};
use wasmtime::{Config, Engine};

use crate::bindings::v0_1_0;
use crate::cache::ComponentCache;
use crate::compile::CompileWorker;
use crate::ctx::HookCtx;
use crate::error::LoadError;
use crate::options::WASM_PAGE_BYTES;
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

/// How the runtime allocates instances (`[runtime]` in hookbox.toml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeOptions {
    /// Use wasmtime's pooling instance allocator (default `true`): slots for
    /// instances, memories, tables and fiber stacks are reserved once (address
    /// space only) and reused, so creating an instance costs no mmap/munmap
    /// (about 1.3–2× cheaper in our measurements, and no IPI storms under
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
    /// The largest plugin file (or byte upload) the runtime reads and
    /// compiles, in bytes (default 64 MiB; the largest plugin we ship, Python
    /// with its interpreter, is 18.5 MiB). A bigger file is refused before it
    /// is read, so it bounds what loading allocates and, roughly linearly,
    /// what compiling it costs in time and memory.
    pub max_component_bytes: u64,
    /// The address space a compile worker may use, in bytes (default 4 GiB;
    /// `RLIMIT_AS`): a component that makes the compiler need more fails to
    /// load with a `compile` error. Applies when the runtime compiles in a
    /// worker process ([`HookRuntime::compile_worker`]; the `hookbox` binary
    /// always does).
    pub compile_memory_bytes: u64,
    /// How long a compile worker may take, in ms (default 120,000), wall
    /// clock; its CPU time is capped at the same number of seconds per core.
    /// Past it the worker is killed and the load fails with a `compile`
    /// error. Applies with a worker, as `compile_memory_bytes`.
    pub compile_timeout_ms: u64,
}

/// Default [`RuntimeOptions::max_component_bytes`]: 64 MiB.
pub const DEFAULT_MAX_COMPONENT_BYTES: u64 = 64 << 20;

/// Default [`RuntimeOptions::compile_memory_bytes`]: 4 GiB.
pub const DEFAULT_COMPILE_MEMORY_BYTES: u64 = 4 << 30;

/// Default [`RuntimeOptions::compile_timeout_ms`]: 120 s.
pub const DEFAULT_COMPILE_TIMEOUT_MS: u64 = 120_000;

/// The wasm32 address space: 4 GiB.
const WASM32_MAX_MEMORY: u64 = 1 << 32;

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            pooling: true,
            max_instances: 1_000,
            max_memory_bytes: WASM32_MAX_MEMORY,
            copy_on_write: true,
            max_component_bytes: DEFAULT_MAX_COMPONENT_BYTES,
            compile_memory_bytes: DEFAULT_COMPILE_MEMORY_BYTES,
            compile_timeout_ms: DEFAULT_COMPILE_TIMEOUT_MS,
        }
    }
}

impl RuntimeOptions {
    /// The wasmtime configuration for these options.
    pub(crate) fn config(&self) -> Result<Config, LoadError> {
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
        // The host imports of every supported version, side by side in one linker
        // (their names carry the version, so they never clash).
        v0_1_0::Hook::add_to_linker::<HookCtx, HasSelf<HookCtx>>(&mut linker, |c| c)
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
