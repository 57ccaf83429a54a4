//! Hookbox's benchmark suite (issue 7): what a hook costs next to the
//! alternatives, and how Hookbox scales.
//!
//! - `benches/dispatch.rs` (criterion): one `before-tool-call` event, the same
//!   hook logic (deny a tool by name: the `deny-tools` plugin's own
//!   [`deny_tools::Policy`]), through a native trait object, a raw wasmtime call
//!   ([`raw`]), Hookbox's [`WasmHook`](hookbox::sandbox::WasmHook) and
//!   [`HookChain`](hookbox::sandbox::HookChain), a fresh instance per run,
//!   and a process per event (`src/bin/stdin_hook.rs`); the no-op plugin's
//!   calls per second; the chain with 1, 10 and 100 plugins.
//! - `benches/load.rs` (criterion): loading a plugin with and without the
//!   precompiled-component cache.
//! - `src/bin/loadtest.rs`: memory per plugin and per instance, throughput of
//!   concurrent replayed runs, the agent loop's own share of a run, and
//!   concurrent sessions from 10 to 10,000; it prints markdown.
//!
//! This library holds what they share.

pub mod agentkit;
pub mod raw;
pub mod served;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use async_trait::async_trait;
use hookbox::contract::{Directive, Event, EventContext};
use hookbox::providers::ToolCall;
use hookbox::sandbox::{HookHandler, HookReply};

/// The tool the benchmark's hook denies.
pub const DENIED_TOOL: &str = "delete_file";
/// The call id of the benchmark's event (from the demo session).
pub const CALL_ID: &str = "call_jYdIdRZHxZTn5bWCq5jlMrJi";
/// The arguments of the benchmark's event.
pub const CALL_ARGS: &str = "{\"path\": \".env\"}";

/// The repository root (the parent of `bench/`).
pub fn repo_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().map_or_else(|| here.to_path_buf(), Path::to_path_buf)
}

/// A Rust plugin built by `cargo build --manifest-path plugins/Cargo.toml
/// --target wasm32-wasip2 --target-dir target/plugins [--release]`:
/// `profile` is `debug` (opt-level 1, as the tests use them) or `release`.
pub fn plugin_path(file: &str, profile: &str) -> PathBuf {
    repo_root().join("target/plugins/wasm32-wasip2").join(profile).join(format!("{file}.wasm"))
}

/// A polyglot plugin built by `scripts/build-polyglot.sh`.
pub fn polyglot_path(file: &str) -> PathBuf {
    repo_root().join("target/plugins/polyglot").join(format!("{file}.wasm"))
}

/// The demo's recorded session (two responses: two tool calls, then the answer).
pub fn demo_session() -> PathBuf {
    repo_root().join("examples/demo/session.json")
}

/// The deny-tools config of the benchmark: deny [`DENIED_TOOL`] by name.
pub fn deny_config() -> BTreeMap<String, String> {
    BTreeMap::from([("tools".to_string(), format!("[\"{DENIED_TOOL}\"]"))])
}

/// The benchmark's event: `before-tool-call` of `delete_file {"path": ".env"}`.
pub fn before_tool_call() -> Event {
    Event::BeforeToolCall {
        iteration: 1,
        call: ToolCall { id: CALL_ID.into(), name: DENIED_TOOL.into(), arguments: CALL_ARGS.into() },
    }
}

/// The deny-tools policy for `config`, exactly as the plugin builds it.
///
/// Errors: an invalid config (the plugin would panic).
pub fn deny_policy(config: &BTreeMap<String, String>) -> anyhow::Result<deny_tools::Policy> {
    deny_tools::Policy::from_config(|key| config.get(key).cloned()).map_err(anyhow::Error::msg)
}

/// The floor: the deny-tools logic as a native [`HookHandler`] trait object.
/// Per event it does what the plugin does: parse the arguments as JSON, check
/// the policy, format the reason.
pub struct NativeDeny {
    policy: deny_tools::Policy,
}

impl NativeDeny {
    /// A native hook with the policy of `config`.
    ///
    /// Errors: an invalid config.
    pub fn new(config: &BTreeMap<String, String>) -> anyhow::Result<Self> {
        Ok(NativeDeny { policy: deny_policy(config)? })
    }
}

#[async_trait]
impl HookHandler for NativeDeny {
    fn name(&self) -> &str {
        "native-deny"
    }

    async fn on_event(&mut self, event: &Event, _context: &EventContext) -> HookReply {
        let directive = match event {
            Event::BeforeToolCall { call, .. } => {
                let args = serde_json::from_str::<serde_json::Value>(&call.arguments).ok();
                match self.policy.check(&call.name, args.as_ref()) {
                    Some(reason) => Directive::SkipTool(Some(reason)),
                    None => Directive::Continue,
                }
            }
            _ => Directive::Continue,
        };
        HookReply { outcome: Ok(directive), logs: Vec::new(), suspension: None, fuel_used: 0, duration_us: 0 }
    }
}

/// Runs one event through a process: spawns `program` with `args`, writes the
/// event's JSON on its stdin, closes it, reads one JSON directive from its stdout.
///
/// Errors: the process cannot start, fails, or answers something that is not a directive.
pub fn process_hook(program: &Path, args: &[&str], event_json: &[u8]) -> anyhow::Result<Directive> {
    use std::io::Write;
    let mut child =
        Command::new(program).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn()?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(event_json)?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(out.status.success(), "the hook process failed: {}", out.status);
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// The process's resident memory: (`VmRSS`, `VmHWM`) in KiB, from `/proc/self/status`.
///
/// Errors: not Linux, or the file has no such line.
pub fn rss_kib() -> anyhow::Result<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let field = |name: &str| -> anyhow::Result<u64> {
        let line = status
            .lines()
            .find(|l| l.starts_with(name))
            .ok_or_else(|| anyhow::anyhow!("no {name} in /proc/self/status"))?;
        let kib = line.split_whitespace().nth(1).ok_or_else(|| anyhow::anyhow!("bad {name} line: {line}"))?;
        Ok(kib.parse()?)
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

/// The number of memory mappings of this process (`/proc/self/maps` lines;
/// Linux refuses new ones past `vm.max_map_count`).
pub fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").map(|m| m.lines().count()).unwrap_or(0)
}

/// The 1-minute load average, from `/proc/loadavg`.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}
