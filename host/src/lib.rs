//! Hookbox: an LLM agent loop that calls sandboxed WebAssembly component
//! hooks at every point of the loop.
//!
//! The pieces, in the order a run meets them:
//! - [`config::Manifest`]: `hookbox.toml`, the plugins to load and their config.
//! - [`hooks::wasm::HookRuntime`]: the wasmtime engine; loads each plugin once
//!   ([`hooks::wasm::WasmPlugin`]) and gives every run its own instance.
//! - [`agent::Agent`]: the loop. It fires the events of the contract
//!   ([`event::Event`]), asks the [`hooks::chain::HookChain`] what the hooks
//!   decided, and honours the [`event::Directive`]s.
//! - [`model::ModelProvider`]: where responses come from; [`provider::replay`]
//!   plays back recorded wire-format traffic offline.
//! - [`tools::Tool`]: what the model may call; the built-in tools are confined
//!   to a workspace directory.
//!
//! - [`conformance`]: golden traces, `hookbox test` and `hookbox run --record-trace`.
//!
//! The hook contract is `wit/hook.wit` (`hookbox:hooks/hook@0.1.0`).

pub mod agent;
pub mod cli;
pub mod config;
pub mod conformance;
pub mod event;
pub mod handle;
pub mod hooks;
pub mod journal;
pub mod model;
pub mod output;
pub mod provider;
pub mod session;
pub mod tools;
