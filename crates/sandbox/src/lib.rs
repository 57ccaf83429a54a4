//! Hookbox's hook sandbox: WebAssembly component hooks in wasmtime, and the
//! [`HookChain`] that calls them in order and applies the contract's rules.
//! It stands alone: no agent loop, no model provider, no HTTP, no SQLite. An
//! embedder with its own agent loop builds a [`HookRuntime`], loads plugins
//! ([`HookRuntime::load`], [`HookRuntime::load_bytes`],
//! [`HookRuntime::load_async`]), makes a [`WasmHook`] per plugin per run and
//! dispatches [`Event`]s through a [`HookChain`].
//!
//! - One [`HookRuntime`] per process: the wasmtime engine (fuel and epoch
//!   interruption on, `concurrency_support(false)`, pooling allocator by
//!   default), one linker with WASI p2 and the `hookbox:hooks/host` imports
//!   of every supported version,
//!   a 1 ms epoch ticker thread holding only a weak reference to the engine,
//!   the on-disk component cache ([`ComponentCache`]) and the
//!   [`StateStore`] that keeps hook state.
//! - One [`WasmPlugin`] per loaded component: compiled once, its WIT version
//!   picked from the `hookbox:hooks/…@X.Y.Z` names it imports and exports
//!   ([`WasmPlugin::wit_version`]; any version outside
//!   [`SUPPORTED_WIT_VERSIONS`], or none, is refused with
//!   [`LoadError::UnsupportedVersion`], [`LoadError::MixedVersions`] or
//!   [`LoadError::NoWitVersion`]), its imports checked against its grants
//!   and resolved once, its config and options ([`PluginOptions`]: limits,
//!   fail policy, breaker, grants).
//! - One [`WasmHook`] per (run, plugin): a store and instance created on the
//!   first event and reused for the run. A call that fails in any way drops
//!   the store (wasmtime poisons a store after a trap, and a cancelled call
//!   leaves it unusable), so the next event gets a fresh instance. It also
//!   keeps the run's fuel and time budget and the crash-loop breaker, and
//!   takes its nondeterministic inputs from a [`HostEnv`] when given one.
//!
//! Deny by default: the WASI context has no preopened directories, no
//! environment, no arguments, stdin closed, sockets and name lookups denied;
//! the plugin's grants add environment variables and directories. A
//! component importing an interface no grant allows (sockets, HTTP) is
//! refused at load. A hook's stdout and stderr are captured into its log,
//! tagged with its name and capped per call. The rules a chain applies are
//! in `docs/contract.md`.
//!
//! WIT versions: the host binds each frozen version of `hookbox:hooks`
//! (`wit/frozen/hookbox-hooks@X.Y.Z/`, one bindings module each), never the
//! live `wit/hook.wit`, so a change to the live package cannot change what
//! plugins of a released version get. Supported today: 0.1.0
//! ([`SUPPORTED_WIT_VERSIONS`]). See `wit/README.md`.

mod bindings;
pub mod cache;
mod call;
mod chain;
mod commit;
pub mod compile;
mod convert;
mod ctx;
mod env;
mod error;
mod handler;
mod hook;
mod info;
mod instance;
mod load;
mod log;
pub mod options;
mod output;
mod plugin;
pub mod reply;
mod runtime;
mod runtime_options;
mod state;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use bindings::{PACKAGE, SUPPORTED_WIT_VERSIONS, WIT_VERSION, WORLD, WitVersion};
pub use cache::{CacheError, ComponentCache, Source, content_hash};
pub use chain::{CallSink, Decision, DispatchTrace, HookChain};
pub use compile::{CompileWorker, compile_worker_main};
pub use env::HostEnv;
pub use error::LoadError;
pub use handler::{HookHandler, HookReply};
pub use hook::WasmHook;
pub use hookbox_contract as contract;
pub use hookbox_contract::{
    CallRecord, ContentBlock, Directive, DirectiveRecord, Event, EventContext, EventKind, FailureKind, HookFailure,
    HookLog, PluginStats, SuspendReason, Suspension,
};
pub use info::{ComponentInfo, ImportInfo};
pub use load::{LoadedPlugin, PluginSource};
pub use options::{
    Breaker, DirGrant, DirMode, FAIL_CLOSED_MESSAGE, FailPolicy, Grants, ImportNeed, Limits, PluginOptions,
};
pub use plugin::WasmPlugin;
pub use reply::{InvalidOutput, check_directive};
pub use runtime::{HookRuntime, HookRuntimeBuilder, RuntimeOptions};
pub use state::{MemoryStateStore, Revision, StateError, StateStore, StoredState};
