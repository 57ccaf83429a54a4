//! The sandbox: WebAssembly component hooks in wasmtime.
//!
//! - One [`HookRuntime`] per process: the [`Engine`] (fuel and epoch
//!   interruption on, `concurrency_support(false)`), one [`Linker`] with WASI p2
//!   and the `hookbox:hooks/host` imports, and a 1 ms epoch ticker thread that
//!   holds only a weak reference to the engine.
//! - One [`WasmPlugin`] per loaded component: compiled once, imports resolved
//!   once ([`bindings::HookPre`]), its config and limits.
//! - One [`WasmHook`] per (run, plugin): a [`Store`] and instance created on the
//!   first event and reused for the run. A call that fails in any way drops the
//!   store (wasmtime poisons a store after a trap, and a cancelled call leaves it
//!   unusable), so the next event gets a fresh instance from the `HookPre`.
//!
//! Deny by default: the WASI context has no preopened directories, no
//! environment, no arguments, stdin closed, sockets and name lookups denied.
//! A hook's stdout and stderr are captured into the log, tagged with its name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable};
use wasmtime::{Config, Engine, ResourceLimiter, Store, Trap, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

use super::convert::{directive_from_wit, event_to_wit};
use super::{FailureKind, HookFailure, HookHandler, HookLog, HookReply};
use crate::event::{Directive, Event};

/// Host bindings generated from `wit/hook.wit` (world `hook`, `hookbox:hooks@0.1.0`).
#[allow(missing_docs)]
pub mod bindings {
    wasmtime::component::bindgen!({
        world: "hook",
        path: "../wit",
        exports: { default: async },
    });
}

/// The WIT package version this host implements.
pub const WIT_VERSION: &str = "0.1.0";
/// The fully qualified world this host runs.
pub const WORLD: &str = "hookbox:hooks/hook@0.1.0";

/// Per-plugin sandbox limits (the plugin's table in `hookbox.toml`).
///
/// The defaults leave the Rust example plugins a wide margin: one of their
/// calls uses well under 1 % of the fuel, a few milliseconds at most, and
/// about 1–2 MiB of linear memory.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Fuel units per call (wasmtime fuel: most instructions cost 1). Default 100,000,000.
    pub fuel: u64,
    /// Wall-clock deadline per call, in milliseconds. Default 1,000.
    pub deadline_ms: u64,
    /// Linear memory cap per memory, in bytes. Default 64 MiB.
    pub memory_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { fuel: 100_000_000, deadline_ms: 1_000, memory_bytes: 64 << 20 }
    }
}

/// Errors from loading or inspecting a plugin. Each names the file.
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
    /// The component does not target `hookbox:hooks/hook` or needs imports the host does not give.
    #[error("{path} does not fit the world {WORLD}: {message}")]
    WrongWorld {
        /// The file.
        path: PathBuf,
        /// What does not fit.
        message: String,
    },
    /// The limits are unusable.
    #[error("plugin `{plugin}`: {message}")]
    Limits {
        /// The plugin's name.
        plugin: String,
        /// What is wrong.
        message: String,
    },
    /// The engine could not be created.
    #[error("cannot create the wasmtime engine: {0}")]
    Engine(String),
}

/// What `hookbox check` prints about a component.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComponentInfo {
    /// The world it targets, e.g. `hookbox:hooks/hook@0.1.0`.
    pub world: String,
    /// The WIT package version, e.g. `0.1.0`.
    pub version: String,
    /// Everything the component imports, by name.
    pub imports: Vec<String>,
    /// Everything it exports, by name.
    pub exports: Vec<String>,
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

/// Bytes of log text (the `log` import plus stdout/stderr) kept per call; more is dropped with a note.
const LOG_CAP_BYTES: usize = 64 << 10;
/// Capacity of each captured stdout/stderr pipe per instance, in bytes.
const PIPE_CAPACITY: usize = 1 << 20;

/// The data of one plugin's store.
pub struct HookCtx {
    wasi: WasiCtx,
    table: ResourceTable,
    limiter: Limiter,
    plugin: Arc<str>,
    config: Arc<BTreeMap<String, String>>,
    logs: Vec<HookLog>,
    log_bytes: usize,
}

impl HookCtx {
    fn push_log(&mut self, level: &str, message: String) {
        if self.log_bytes >= LOG_CAP_BYTES {
            return;
        }
        self.log_bytes += message.len();
        let message = if self.log_bytes > LOG_CAP_BYTES {
            format!("{} … [log cap of {LOG_CAP_BYTES} bytes per call reached]", truncate_chars(&message, 200))
        } else {
            message
        };
        tracing::info!(plugin = %self.plugin, level, "{message}");
        self.logs.push(HookLog { plugin: self.plugin.to_string(), level: level.to_string(), message });
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
}

/// The process-wide wasmtime engine and linker for hooks.
pub struct HookRuntime {
    engine: Engine,
    linker: Linker<HookCtx>,
}

/// How often the epoch ticker advances the engine's epoch.
const EPOCH_TICK: Duration = Duration::from_millis(1);

impl HookRuntime {
    /// Creates the engine, the linker and the epoch ticker thread.
    ///
    /// Errors: [`LoadError::Engine`] if wasmtime rejects the configuration.
    pub fn new() -> Result<Self, LoadError> {
        let mut config = Config::new();
        config.consume_fuel(true).epoch_interruption(true).concurrency_support(false);
        let engine = Engine::new(&config).map_err(|e| LoadError::Engine(format!("{e:#}")))?;
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
        Ok(HookRuntime { engine, linker })
    }

    /// Reads and compiles a component, checking the header first so a core
    /// module or a random file gets a precise error.
    fn compile(&self, path: &Path) -> Result<Component, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Io { path: path.to_path_buf(), source })?;
        // Header: b"\0asm", then a u16 version and a u16 layer (component model binary format):
        // core modules are version 1 layer 0, components version 0x0d layer 1.
        if bytes.len() < 8 || &bytes[0..4] != b"\0asm" {
            return Err(LoadError::NotWasm { path: path.to_path_buf() });
        }
        if bytes[6..8] == [0, 0] {
            return Err(LoadError::CoreModule { path: path.to_path_buf() });
        }
        Component::new(&self.engine, &bytes)
            .map_err(|e| LoadError::Compile { path: path.to_path_buf(), message: format!("{e:#}") })
    }

    fn pre(&self, path: &Path, component: &Component) -> Result<bindings::HookPre<HookCtx>, LoadError> {
        let wrong = |e: wasmtime::Error| LoadError::WrongWorld { path: path.to_path_buf(), message: format!("{e:#}") };
        let pre = self.linker.instantiate_pre(component).map_err(wrong)?;
        bindings::HookPre::new(pre).map_err(wrong)
    }

    /// Loads a plugin: compiles it, checks it against the world and resolves its imports once.
    ///
    /// `name` tags its logs and failures; `config` is what `get-config` returns.
    /// Errors: every [`LoadError`] variant, naming `path`.
    pub fn load(
        &self,
        name: &str,
        path: &Path,
        config: BTreeMap<String, String>,
        limits: Limits,
    ) -> Result<Arc<WasmPlugin>, LoadError> {
        if limits.fuel == 0 || limits.deadline_ms == 0 || limits.memory_bytes < 64 << 10 {
            return Err(LoadError::Limits {
                plugin: name.to_string(),
                message: format!(
                    "fuel and deadline_ms must be above 0 and memory_bytes at least one 64 KiB page (got {limits:?})"
                ),
            });
        }
        let component = self.compile(path)?;
        let pre = self.pre(path, &component)?;
        Ok(Arc::new(WasmPlugin {
            name: name.to_string(),
            path: path.to_path_buf(),
            engine: self.engine.clone(),
            pre,
            config: Arc::new(config),
            limits,
        }))
    }

    /// Validates a component against the world without running it.
    ///
    /// Errors: as [`HookRuntime::load`].
    pub fn inspect(&self, path: &Path) -> Result<ComponentInfo, LoadError> {
        let component = self.compile(path)?;
        let ty = component.component_type();
        let imports: Vec<String> = ty.imports(&self.engine).map(|(n, _)| n.to_string()).collect();
        let exports: Vec<String> = ty.exports(&self.engine).map(|(n, _)| n.to_string()).collect();
        if !exports.iter().any(|e| e == "on-event") {
            return Err(LoadError::WrongWorld {
                path: path.to_path_buf(),
                message: format!("it exports no `on-event` function (exports: {})", list_or_none(&exports)),
            });
        }
        let ours: Vec<&String> = imports.iter().filter(|i| i.starts_with("hookbox:hooks/")).collect();
        let version = ours.iter().find_map(|i| i.rsplit_once('@').map(|(_, v)| v.to_string())).ok_or_else(|| {
            LoadError::WrongWorld {
                path: path.to_path_buf(),
                message: format!("it imports nothing from hookbox:hooks (imports: {})", list_or_none(&imports)),
            }
        })?;
        self.pre(path, &component)?;
        Ok(ComponentInfo { world: format!("hookbox:hooks/hook@{version}"), version, imports, exports })
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
    limits: Limits,
}

impl WasmPlugin {
    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The component file it was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its limits.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// A handler for one run; the instance is created on its first event.
    pub fn hook(self: &Arc<Self>) -> WasmHook {
        WasmHook { plugin: self.clone(), live: None }
    }
}

/// A live instance: its store, the instance, and the captured output pipes.
struct Live {
    store: Store<HookCtx>,
    hook: bindings::Hook,
    stdout: MemoryOutputPipe,
    stderr: MemoryOutputPipe,
    stdout_seen: usize,
    stderr_seen: usize,
}

/// One plugin's handler for one run (see the module docs for the lifecycle).
pub struct WasmHook {
    plugin: Arc<WasmPlugin>,
    live: Option<Live>,
}

/// How a failed call is classified and described.
struct CallError {
    kind: FailureKind,
    message: String,
}

impl WasmHook {
    /// Creates a fresh store and instance. Takes the plugin, not `&self`, so the
    /// future holds no reference to the (non-`Sync`) live store.
    async fn instantiate(p: Arc<WasmPlugin>) -> Result<Live, CallError> {
        let stdout = MemoryOutputPipe::new(PIPE_CAPACITY);
        let stderr = MemoryOutputPipe::new(PIPE_CAPACITY);
        let wasi = WasiCtxBuilder::new().stdout(stdout.clone()).stderr(stderr.clone()).build();
        let ctx = HookCtx {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                max_memory: usize::try_from(p.limits.memory_bytes).unwrap_or(usize::MAX),
                memory_refused: false,
            },
            plugin: Arc::from(p.name.as_str()),
            config: p.config.clone(),
            logs: Vec::new(),
            log_bytes: 0,
        };
        let mut store = Store::new(&p.engine, ctx);
        store.limiter(|c| &mut c.limiter);
        arm(&mut store, &p.limits).map_err(|e| classify(&store, e))?;
        let hook = p.pre.instantiate_async(&mut store).await.map_err(|e| {
            let mut err = classify(&store, e);
            if err.kind == FailureKind::Trap {
                err.kind = FailureKind::Instantiate;
            }
            err
        })?;
        Ok(Live { store, hook, stdout, stderr, stdout_seen: 0, stderr_seen: 0 })
    }

    async fn call(&mut self, event: &Event) -> (Result<Directive, CallError>, u64, Vec<HookLog>) {
        let limits = self.plugin.limits;
        if self.live.is_none() {
            match Self::instantiate(self.plugin.clone()).await {
                Ok(live) => self.live = Some(live),
                Err(e) => return (Err(e), 0, Vec::new()),
            }
        }
        let Some(live) = self.live.as_mut() else {
            return (Err(CallError { kind: FailureKind::Instantiate, message: "no instance".into() }), 0, Vec::new());
        };
        let wit_event = event_to_wit(event);
        let armed = arm(&mut live.store, &limits);
        // The epoch callback bounds guest code; this timeout bounds everything
        // else (a host import that blocks), with a small grace over the deadline.
        let backstop = Duration::from_millis(limits.deadline_ms) + Duration::from_millis(100);
        let outcome = match armed {
            Err(e) => Err(classify(&live.store, e)),
            Ok(()) => {
                match tokio::time::timeout(backstop, live.hook.call_on_event(&mut live.store, &wit_event)).await {
                    Ok(Ok(d)) => Ok(directive_from_wit(d)),
                    Ok(Err(e)) => Err(classify(&live.store, e)),
                    Err(_) => Err(CallError {
                        kind: FailureKind::Deadline,
                        message: format!("call did not return within its {} ms deadline", limits.deadline_ms),
                    }),
                }
            }
        };
        let fuel_used = limits.fuel.saturating_sub(live.store.get_fuel().unwrap_or(0));
        let mut logs = std::mem::take(&mut live.store.data_mut().logs);
        live.store.data_mut().log_bytes = 0;
        let plugin = self.plugin.name.as_str();
        drain_pipe(plugin, "stdout", &live.stdout, &mut live.stdout_seen, &mut logs);
        let stderr_text = drain_pipe(plugin, "stderr", &live.stderr, &mut live.stderr_seen, &mut logs);
        let outcome = outcome.map_err(|mut e| {
            if !stderr_text.trim().is_empty() {
                e.message = format!("{}; stderr: {}", e.message, truncate_chars(stderr_text.trim(), 2_000));
            }
            e
        });
        if outcome.is_err() {
            // A store is poisoned after a trap and unusable after a cancelled call:
            // never enter it again.
            self.live = None;
        }
        (outcome, fuel_used, logs)
    }
}

/// Sets the fuel and the wall-clock deadline for the next call.
fn arm(store: &mut Store<HookCtx>, limits: &Limits) -> wasmtime::Result<()> {
    store.set_fuel(limits.fuel)?;
    let deadline = Instant::now() + Duration::from_millis(limits.deadline_ms);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        Ok(if Instant::now() >= deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
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

/// Moves new pipe output into `logs`, line by line; returns the new text.
fn drain_pipe(
    plugin: &str,
    stream: &str,
    pipe: &MemoryOutputPipe,
    seen: &mut usize,
    logs: &mut Vec<HookLog>,
) -> String {
    let contents = pipe.contents();
    if contents.len() <= *seen {
        return String::new();
    }
    let new = String::from_utf8_lossy(&contents[*seen..]).into_owned();
    *seen = contents.len();
    for line in new.lines().filter(|l| !l.trim().is_empty()) {
        tracing::info!(plugin, stream, "{line}");
        logs.push(HookLog { plugin: plugin.to_string(), level: stream.to_string(), message: line.to_string() });
    }
    new
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

    async fn on_event(&mut self, event: &Event) -> HookReply {
        let started = Instant::now();
        let (outcome, fuel_used, logs) = self.call(event).await;
        let duration_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let outcome = outcome.and_then(validate).map_err(|e| {
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
        HookReply { outcome, logs }
    }
}

/// Rejects directives whose payload the host cannot use.
fn validate(d: Directive) -> Result<Directive, CallError> {
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
