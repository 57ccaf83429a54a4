//! The hook world embedded in wasmtime directly, without Hookbox: the limit a
//! WebAssembly hook host can reach (issue 7, row "raw wasmtime").
//!
//! What it does is what Hookbox must do at the least, configured the way
//! `wasmtime-notes.md` §5 and §10 recommend: fuel and epoch interruption on
//! (a 1 ms ticker thread), `concurrency_support(false)`, the pooling allocator
//! (or the on-demand one, to compare), one [`InstancePre`](wasmtime::component::InstancePre)
//! per component, WASI p2 with a deny-all context, and a host context that
//! answers `get-config` from a map and drops logs and state. Per call it
//! sets the fuel and an epoch deadline (trap on expiry), then makes the typed
//! call; the event is built once in its WIT form, so no conversion is timed.
//! Two generated bindings: [`sync_bindings`] (`call_on_event` is a plain
//! call) and [`async_bindings`] (`call_async`, as Hookbox calls hooks).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Sync bindings of the world `hook`: `call_on_event` is a plain call.
#[allow(missing_docs)]
pub mod sync_bindings {
    wasmtime::component::bindgen!({ world: "hook", path: "../wit" });
}

/// Async bindings of the world `hook` (exports async, imports sync but `sleep`), as Hookbox generates them.
#[allow(missing_docs)]
pub mod async_bindings {
    wasmtime::component::bindgen!({
        world: "hook",
        path: "../wit",
        imports: { "hookbox:hooks/host.sleep": async },
        exports: { default: async },
    });
}

/// Fuel per call, Hookbox's default.
pub const FUEL: u64 = 100_000_000;
/// Epoch ticks per call (the ticker ticks every millisecond): Hookbox's default 1,000 ms.
pub const DEADLINE_TICKS: u64 = 1_000;

/// The host side of one store: WASI (deny-all), the resource table and the plugin's config.
pub struct RawCtx {
    wasi: WasiCtx,
    table: ResourceTable,
    config: Arc<BTreeMap<String, String>>,
    /// Bytes the guest logged (kept only as a count).
    pub logged: usize,
}

impl RawCtx {
    /// A context answering `get-config` from `config`.
    pub fn new(config: Arc<BTreeMap<String, String>>) -> Self {
        RawCtx { wasi: WasiCtxBuilder::new().build(), table: ResourceTable::new(), config, logged: 0 }
    }
}

impl WasiView for RawCtx {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

macro_rules! host_impl {
    ($b:ident, $($sleep:tt)*) => {
        impl $b::hookbox::hooks::types::Host for RawCtx {}

        impl $b::hookbox::hooks::host::Host for RawCtx {
            fn log(&mut self, _level: $b::hookbox::hooks::host::LogLevel, message: String) {
                self.logged += message.len();
            }

            fn get_config(&mut self, key: String) -> Option<String> {
                self.config.get(&key).cloned()
            }

            fn config_keys(&mut self) -> Vec<String> {
                self.config.keys().cloned().collect()
            }

            fn get_state(&mut self) -> Option<$b::hookbox::hooks::host::State> {
                None
            }

            fn set_state(&mut self, _data: Vec<u8>) {}

            fn now(&mut self) -> $b::hookbox::hooks::host::Datetime {
                let d = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                $b::hookbox::hooks::host::Datetime { seconds: d.as_secs(), nanoseconds: d.subsec_nanos() }
            }

            fn random(&mut self) -> u64 {
                // Not a random number generator: the benchmark's hooks never ask.
                u64::from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().subsec_nanos())
            }

            fn uuid(&mut self) -> String {
                format!("00000000-0000-4000-8000-{:012x}", self.random() & 0xffff_ffff_ffff)
            }

            $($sleep)*
        }
    };
}

host_impl!(
    sync_bindings,
    fn sleep(&mut self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
);
host_impl!(
    async_bindings,
    async fn sleep(&mut self, ms: u64) {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
);

/// One engine, configured like Hookbox's plus the pooling allocator, with its epoch ticker.
pub struct RawEngine {
    engine: Engine,
    pooling: bool,
}

impl RawEngine {
    /// An engine with fuel, epoch interruption, `concurrency_support(false)`, and
    /// the pooling allocator when `pooling` (sized for 1,000 instances).
    ///
    /// Errors: wasmtime refuses the configuration, or the ticker thread cannot start.
    pub fn new(pooling: bool) -> Result<Self> {
        Self::configured(pooling.then_some(1_000), None, None, true)
    }

    /// As [`RawEngine::new`], with a pool of `pool` component instances (none:
    /// the on-demand allocator) and, if given, `Config::memory_reservation`
    /// (the virtual address space each linear memory reserves; default 4 GiB),
    /// `stacks` async stacks in the pool (default: one per instance), and
    /// `Config::memory_init_cow` (copy-on-write memory images: wasmtime's default, true).
    ///
    /// Errors: wasmtime refuses the configuration, or the ticker thread cannot start.
    pub fn configured(
        pool: Option<u32>,
        memory_reservation: Option<u64>,
        stacks: Option<u32>,
        memory_init_cow: bool,
    ) -> Result<Self> {
        let mut config = Config::new();
        config.consume_fuel(true).epoch_interruption(true).concurrency_support(false).memory_init_cow(memory_init_cow);
        if let Some(bytes) = memory_reservation {
            config.memory_reservation(bytes);
        }
        if let Some(n) = pool {
            let mut p = PoolingAllocationConfig::new();
            p.total_component_instances(n)
                .total_core_instances(n.saturating_mul(10))
                .total_memories(n)
                .total_tables(n.saturating_mul(4))
                .total_stacks(stacks.unwrap_or(n))
                .max_memory_size(64 << 20);
            config.allocation_strategy(InstanceAllocationStrategy::Pooling(p));
        }
        let engine = Engine::new(&config).map_err(anyhow::Error::from).context("creating the raw wasmtime engine")?;
        let weak = engine.weak();
        std::thread::Builder::new().name("raw-epoch".into()).spawn(move || {
            while let Some(engine) = weak.upgrade() {
                engine.increment_epoch();
                drop(engine);
                std::thread::sleep(Duration::from_millis(1));
            }
        })?;
        Ok(RawEngine { engine, pooling: pool.is_some() })
    }

    /// True when the pooling allocator is on.
    pub fn pooling(&self) -> bool {
        self.pooling
    }

    /// The wasmtime engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Compiles a component file (no cache).
    ///
    /// Errors: the file cannot be read or compiled.
    pub fn compile(&self, path: &Path) -> Result<Component> {
        Component::from_file(&self.engine, path)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("compiling {}", path.display()))
    }

    /// Links WASI (sync) and the host imports, and pre-instantiates `component`.
    ///
    /// Errors: the component does not fit the world.
    pub fn sync_pre(&self, component: &Component) -> Result<sync_bindings::HookPre<RawCtx>> {
        let mut linker = Linker::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
        sync_bindings::Hook::add_to_linker::<RawCtx, HasSelf<RawCtx>>(&mut linker, |c| c)?;
        Ok(sync_bindings::HookPre::new(linker.instantiate_pre(component)?)?)
    }

    /// Links WASI (async) and the host imports, and pre-instantiates `component`.
    ///
    /// Errors: the component does not fit the world.
    pub fn async_pre(&self, component: &Component) -> Result<async_bindings::HookPre<RawCtx>> {
        let mut linker = Linker::new(&self.engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        async_bindings::Hook::add_to_linker::<RawCtx, HasSelf<RawCtx>>(&mut linker, |c| c)?;
        Ok(async_bindings::HookPre::new(linker.instantiate_pre(component)?)?)
    }

    /// A fresh store, armed with fuel and a deadline.
    ///
    /// Errors: fuel cannot be set (not enabled).
    pub fn store(&self, config: &Arc<BTreeMap<String, String>>) -> Result<Store<RawCtx>> {
        let mut store = Store::new(&self.engine, RawCtx::new(config.clone()));
        arm(&mut store)?;
        Ok(store)
    }
}

/// Sets the per-call fuel and epoch deadline (the default epoch action: trap).
///
/// Errors: fuel is not enabled on the engine.
pub fn arm(store: &mut Store<RawCtx>) -> Result<()> {
    store.set_fuel(FUEL)?;
    store.set_epoch_deadline(DEADLINE_TICKS);
    Ok(())
}

/// A live instance called with the sync bindings.
pub struct SyncHook {
    store: Store<RawCtx>,
    hook: sync_bindings::Hook,
    context: sync_bindings::hookbox::hooks::types::EventContext,
}

impl SyncHook {
    /// Instantiates `pre` in a fresh store.
    ///
    /// Errors: the instantiation fails (e.g. the pool is exhausted).
    pub fn new(
        engine: &RawEngine,
        pre: &sync_bindings::HookPre<RawCtx>,
        config: &Arc<BTreeMap<String, String>>,
    ) -> Result<Self> {
        let mut store = engine.store(config)?;
        let hook = pre.instantiate(&mut store)?;
        Ok(SyncHook { store, hook, context: sync_context() })
    }

    /// One call: re-arms fuel and deadline, then calls `on-event`.
    ///
    /// Errors: the guest trapped or ran out of fuel or time.
    pub fn call(
        &mut self,
        event: &sync_bindings::hookbox::hooks::types::Event,
    ) -> Result<sync_bindings::hookbox::hooks::types::Directive> {
        arm(&mut self.store)?;
        Ok(self.hook.call_on_event(&mut self.store, event, &self.context)?)
    }
}

/// A live instance called with the async bindings (`call_async`, as Hookbox does).
pub struct AsyncHook {
    store: Store<RawCtx>,
    hook: async_bindings::Hook,
    context: async_bindings::hookbox::hooks::types::EventContext,
}

impl AsyncHook {
    /// Instantiates `pre` in a fresh store.
    ///
    /// Errors: the instantiation fails (e.g. the pool is exhausted).
    pub async fn new(
        engine: &RawEngine,
        pre: &async_bindings::HookPre<RawCtx>,
        config: &Arc<BTreeMap<String, String>>,
    ) -> Result<Self> {
        let mut store = engine.store(config)?;
        let hook = pre.instantiate_async(&mut store).await?;
        Ok(AsyncHook { store, hook, context: async_context() })
    }

    /// One call: re-arms fuel and deadline, then calls `on-event`.
    ///
    /// Errors: the guest trapped or ran out of fuel or time.
    pub async fn call(
        &mut self,
        event: &async_bindings::hookbox::hooks::types::Event,
    ) -> Result<async_bindings::hookbox::hooks::types::Directive> {
        arm(&mut self.store)?;
        Ok(self.hook.call_on_event(&mut self.store, event, &self.context).await?)
    }
}

/// The benchmark's `before-tool-call` event in the sync bindings' types.
pub fn sync_event() -> sync_bindings::hookbox::hooks::types::Event {
    use sync_bindings::hookbox::hooks::types as t;
    t::Event::BeforeToolCall(t::ToolCallEvent {
        iteration: 1,
        call: t::ToolCall {
            id: crate::CALL_ID.into(),
            name: crate::DENIED_TOOL.into(),
            arguments: crate::CALL_ARGS.into(),
        },
    })
}

/// The benchmark's `before-tool-call` event in the async bindings' types.
pub fn async_event() -> async_bindings::hookbox::hooks::types::Event {
    use async_bindings::hookbox::hooks::types as t;
    t::Event::BeforeToolCall(t::ToolCallEvent {
        iteration: 1,
        call: t::ToolCall {
            id: crate::CALL_ID.into(),
            name: crate::DENIED_TOOL.into(),
            arguments: crate::CALL_ARGS.into(),
        },
    })
}

/// The context every call of the benchmark passes (WIT 0.2.0), built once
/// per instance as a host would keep it per run, in `$t`'s types.
macro_rules! bench_context {
    ($t:path) => {{
        use $t as t;
        t::EventContext {
            run_id: "00000000-0000-4000-8000-000000000000".into(),
            session_id: "00000000-0000-4000-8000-000000000000".into(),
            turn: 1,
            iteration: 1,
            max_iterations: 10,
            retries: 0,
        }
    }};
}

fn sync_context() -> sync_bindings::hookbox::hooks::types::EventContext {
    bench_context!(sync_bindings::hookbox::hooks::types)
}

fn async_context() -> async_bindings::hookbox::hooks::types::EventContext {
    bench_context!(async_bindings::hookbox::hooks::types)
}

/// True when a sync-bindings directive is `skip-tool`.
pub fn sync_is_skip(d: &sync_bindings::hookbox::hooks::types::Directive) -> bool {
    matches!(d, sync_bindings::hookbox::hooks::types::Directive::SkipTool(_))
}

/// True when an async-bindings directive is `skip-tool`.
pub fn async_is_skip(d: &async_bindings::hookbox::hooks::types::Directive) -> bool {
    matches!(d, async_bindings::hookbox::hooks::types::Directive::SkipTool(_))
}
