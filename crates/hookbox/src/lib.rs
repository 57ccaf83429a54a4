//! Hookbox: an LLM agent loop that calls sandboxed WebAssembly component
//! hooks at every point of the loop. This crate is the agent: the loop, the
//! tools, run handles, sessions, the run journal and replay, the manifest,
//! and [`AgentBuilder`], which assembles a runnable [`Agent`] from a
//! [`Manifest`].
//!
//! The pieces, in the order a run meets them:
//! - [`Manifest`]: `hookbox.toml`, the agent settings and the plugins to load.
//! - [`AgentBuilder`]: builds the hook runtime ([`sandbox::HookRuntime`]),
//!   loads each plugin once, and makes the [`Agent`]; [`Assembled::chain`]
//!   gives each run fresh hooks in a [`HookChain`].
//! - [`Agent`]: the loop. It fires the events of the contract ([`Event`]),
//!   asks the chain what the hooks decided, and honours the [`Directive`]s.
//!   [`RunHandle`] steers a run in flight; [`Session`] keeps a conversation,
//!   in a [`ConversationStore`] when it must outlive the process.
//! - [`providers::ModelProvider`]: where responses come from;
//!   [`providers::replay`] plays back recorded wire-format traffic offline.
//! - [`Tool`]: what the model may call; [`workspace_tools`] are confined to
//!   a [`Workspace`] directory.
//! - [`RunJournal`]: records what a run took from outside so
//!   `hookbox replay` can run it again; [`conformance`]: golden traces.
//!
//! The sandbox ([`sandbox`], crate `hookbox-sandbox`), the providers
//! ([`providers`], `hookbox-providers`) and the contract's types
//! ([`contract`], `hookbox-contract`) are crates of their own, re-exported
//! here. The hook contract is `wit/hook.wit` and `docs/contract.md`.

mod agent;
mod builder;
mod config;
pub mod conformance;
pub mod conversation;
mod error;
mod handle;
pub mod journal;
mod outcome;
pub mod output;
pub mod routing;
mod run;
mod session;
mod sqlite_conversation;
mod sqlite_state;
mod tools;

pub use hookbox_contract as contract;
pub use hookbox_providers as providers;
pub use hookbox_sandbox as sandbox;

pub use agent::{Agent, TraceSink, TurnContext};
pub use builder::{AgentBuilder, Assembled, CachePolicy, HookSet, default_cache_dir, default_data_dir, runtime_for};
pub use config::{
    AgentConfig, ConfigError, LateInjectionPolicy, Manifest, ModelConfig, PluginEntry, SessionOptions,
    plugin_name_from_path,
};
pub use conversation::{ConversationStore, ConversationStoreError, MemoryConversationStore, SessionSummary};
pub use error::Error;
pub use handle::{HandleError, PauseTimeout, RunHandle, UNRESUMABLE_PAUSE};
pub use hookbox_contract::{
    AnsweredBy, Approval, ApprovalAnswer, ApprovalReason, ApprovalRecord, ContentBlock, Directive, Event, EventKind,
};
pub use hookbox_sandbox::{DispatchTrace, HookChain, HookHandler, HookReply, HookRuntime};
pub use journal::RunJournal;
pub use outcome::{RunError, RunErrorInfo, RunResult, StopReason, StreamEvent, event_json};
pub use routing::{Delivery, MessageBus, MessageId, PostRecord, RouteError, RoutingPolicy};
pub use run::NOT_APPROVED_MESSAGE;
pub use session::{Session, SessionError, SessionFailure, SessionStream};
pub use sqlite_state::SqliteStateStore;
pub use tools::{Tool, ToolError, ToolOutput, Workspace, set_test_tool_delay_ms, workspace_tools};

/// Test support: [`sandbox::testing::ScriptedHook`] and the state store
/// checks (feature `test-support`).
#[cfg(feature = "test-support")]
pub use hookbox_sandbox::testing;
