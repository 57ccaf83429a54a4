//! The Python, JavaScript (StarlingMonkey and QuickJS) and C hooks (built by `scripts/build-polyglot.sh`)
//! on the demo: each deny-tools build declines exactly the delete of `.env`
//! like the Rust one, within the sandbox defaults with margin; a trapping
//! Python hook and a JavaScript hook that loops forever are contained like
//! Rust ones. A test whose plugin was not built is skipped with a printed
//! reason, unless `HOOKBOX_REQUIRE_POLYGLOT` is set (CI), where it fails.
//!
//! Python and JavaScript components take about 10 s each to compile.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::path::Path;
use std::sync::Arc;

use hookbox::contract::Event;
use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::FailureKind;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::{Limits, PluginOptions};
use hookbox::{Agent, AgentConfig, RunResult, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{DEMO_PROMPT, DENY_TOOLS, config, demo_session, demo_workspace, polyglot_plugin};
use serde_json::json;

const DELETE_ID: &str = "call_jYdIdRZHxZTn5bWCq5jlMrJi";
const CREATE_ID: &str = "call_TmlTVWQbzrXCZ4jNsCVNbNqu";

/// Runs the demo with `plugins` (name, file, config) in order under `limits`;
/// returns the result, the requests the model received and the workspace.
async fn demo_run(
    plugins: &[(&str, &Path, serde_json::Value)],
    limits: Limits,
) -> (RunResult, Vec<serde_json::Value>, tempfile::TempDir) {
    let ws = demo_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let mut hooks: Vec<Box<dyn hookbox::sandbox::HookHandler>> = Vec::new();
    for (name, path, cfg) in plugins {
        let pairs: Vec<(&str, serde_json::Value)> =
            cfg.as_object().map(|o| o.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()).unwrap_or_default();
        let options = PluginOptions { limits, ..PluginOptions::default() };
        let plugin =
            runtime.load(name, path, config(&pairs), options).unwrap_or_else(|e| panic!("{name} loads: {e}")).plugin;
        hooks.push(Box::new(plugin.hook()));
    }
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("demo session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider.clone(), tools, AgentConfig::default());
    let mut chain = HookChain::new(hooks);
    let result = agent.run(DEMO_PROMPT, &mut chain).await.expect("run completes");
    (result, provider.requests(), ws)
}

/// demo.rs's assertions for a deny-tools build named `name`.
fn assert_demo_outcome(name: &str, result: &RunResult, requests: &[serde_json::Value], ws: &Path) {
    assert!(ws.join(".env").exists(), "{name}: the denied delete must not have run");
    assert!(ws.join("test.txt").exists(), "{name}: the allowed create must have run");
    assert_eq!(result.stop_reason, StopReason::EndTurn);
    assert!(result.hook_failures.is_empty(), "{name}: {:?}", result.hook_failures);
    let skips: Vec<_> = result.directives.iter().filter(|d| d.directive.action() == "skip-tool").collect();
    assert_eq!(skips.len(), 1, "{name}: {:?}", result.directives);
    assert_eq!(skips[0].plugin, name);
    assert_eq!(skips[0].event, "before-tool-call");

    assert_eq!(requests.len(), 2, "one request per recorded response");
    let messages = requests[1]["messages"].as_array().expect("messages");
    let tool_msgs: Vec<_> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 2, "every tool call gets exactly one result: {messages:?}");
    assert_eq!(tool_msgs[0]["tool_call_id"], DELETE_ID);
    assert_eq!(
        tool_msgs[0]["content"], "deny-tools: `delete_file` on `.env` is denied (pattern `.env`)",
        "{name}: the same reason text as the Rust build"
    );
    assert_eq!(tool_msgs[1]["tool_call_id"], CREATE_ID);
    let created = tool_msgs[1]["content"].as_str().expect("content");
    assert!(!created.contains("deny-tools") && created.contains("test.txt"), "create result: {created}");
    let results: Vec<_> = result
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCallResult { tool_call_id, success, .. } => Some((tool_call_id.clone(), *success)),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![(DELETE_ID.to_string(), false), (CREATE_ID.to_string(), true)]);
}

/// The demo with one deny-tools build under the default limits. The whole
/// run (every call, the first with instantiation) must fit in a quarter of
/// one call's fuel and deadline, so the per-call defaults leave at least 4x
/// margin. (Loading with no grant already proves that the component imports
/// nothing that needs one.)
async fn deny_tools_on_the_demo(name: &str, path: &Path) {
    let cfg = json!({ "paths": [".env", "*.pem", "secrets/**"] });
    let (result, requests, ws) = demo_run(&[(name, path, cfg)], Limits::default()).await;
    assert_demo_outcome(name, &result, &requests, ws.path());
    let stats = result.plugin_stats.iter().find(|s| s.plugin == name).expect("stats");
    assert_eq!(stats.calls, result.events.len() as u64, "{name} saw every event");
    let _ = std::io::Write::write_all(
        &mut std::io::stderr(),
        format!(
            "{name}: {} calls, fuel {} ({} per call), {} µs ({} µs per call, the first with instantiation)\n",
            stats.calls,
            stats.fuel_used,
            stats.fuel_used / stats.calls,
            stats.time_us,
            stats.time_us / stats.calls
        )
        .as_bytes(),
    );
    let d = Limits::default();
    assert!(stats.fuel_used < d.fuel / 4, "{name}: the run used {} fuel", stats.fuel_used);
    assert!(stats.time_us < d.deadline_ms * 1000 / 4, "{name}: the run took {} µs", stats.time_us);
}

#[tokio::test]
async fn python_deny_tools_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("python_deny_tools.wasm") {
        deny_tools_on_the_demo("python-deny-tools", &path).await;
    }
}

#[tokio::test]
async fn js_deny_tools_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("js_deny_tools.wasm") {
        deny_tools_on_the_demo("js-deny-tools", &path).await;
    }
}

#[tokio::test]
async fn js_quickjs_deny_tools_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("js_qjs_deny_tools.wasm") {
        deny_tools_on_the_demo("js-qjs-deny-tools", &path).await;
    }
}

#[tokio::test]
async fn c_deny_tools_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("c_deny_tools.wasm") {
        deny_tools_on_the_demo("c-deny-tools", &path).await;
    }
}

#[tokio::test]
async fn python_deny_tools_built_against_0_1_0_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("python_deny_tools_v0_1_0.wasm") {
        deny_tools_on_the_demo("python-deny-tools-0-1-0", &path).await;
    }
}

#[tokio::test]
async fn js_deny_tools_built_against_0_1_0_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("js_deny_tools_v0_1_0.wasm") {
        deny_tools_on_the_demo("js-deny-tools-0-1-0", &path).await;
    }
}

#[tokio::test]
async fn c_deny_tools_built_against_0_1_0_declines_exactly_the_delete() {
    if let Some(path) = polyglot_plugin("c_deny_tools_v0_1_0.wasm") {
        deny_tools_on_the_demo("c-deny-tools-0-1-0", &path).await;
    }
}

#[tokio::test]
async fn the_rust_deny_tools_passes_the_same_checks() {
    deny_tools_on_the_demo("deny-tools", Path::new(DENY_TOOLS)).await;
}

/// A failing guest first in the chain, the Rust deny-tools after it: the run
/// completes, deny-tools still acts, each failure is recorded with `kind` at
/// `before-tool-call` only, and every other event is answered (fresh instances).
async fn contained(name: &str, path: &Path, kind: &[FailureKind]) -> RunResult {
    let deny = Path::new(DENY_TOOLS);
    let (r, _, ws) =
        demo_run(&[(name, path, json!({})), ("deny-tools", deny, json!({"paths": [".env"]}))], Limits::default()).await;
    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert!(ws.path().join(".env").exists(), "deny-tools still blocked the delete");
    assert!(ws.path().join("test.txt").exists());
    assert_eq!(r.directives.iter().filter(|d| d.plugin == "deny-tools").count(), 1);
    assert_eq!(r.hook_failures.len(), 2, "one per before-tool-call: {:#?}", r.hook_failures);
    for f in &r.hook_failures {
        assert_eq!(f.plugin, name);
        assert_eq!(f.event, "before-tool-call");
        assert!(kind.contains(&f.kind), "{name}: {f:?}");
        assert!(!f.message.contains("cannot enter component"), "{}", f.message);
    }
    let stats = r.plugin_stats.iter().find(|s| s.plugin == name).expect("stats");
    assert_eq!(stats.calls, r.events.len() as u64, "{name} was called at every event, after each failure too");
    assert_eq!(stats.failures, 2);
    assert!(r.plugin_suspensions.is_empty(), "two failures do not trip the breaker: {:?}", r.plugin_suspensions);
    r
}

#[tokio::test]
async fn a_trapping_python_hook_is_contained_like_a_rust_one() {
    let Some(path) = polyglot_plugin("python_trap_on_tool.wasm") else { return };
    let r = contained("python-trap", &path, &[FailureKind::Trap]).await;
    // The SDK logs the exception before the component traps.
    let logged = r.hook_logs.iter().filter(|l| l.plugin == "python-trap" && l.level == "error").collect::<Vec<_>>();
    assert_eq!(logged.len(), 2, "{:?}", r.hook_logs);
    assert!(
        logged[0]
            .message
            .contains("RuntimeError: trap-on-tool: deliberate exception at before-tool-call for delete_file"),
        "{}",
        logged[0].message
    );
}

#[tokio::test]
async fn a_javascript_hook_that_loops_forever_is_contained_like_a_rust_one() {
    let Some(path) = polyglot_plugin("js_spin.wasm") else { return };
    let r = contained("js-spin", &path, &[FailureKind::OutOfFuel, FailureKind::Deadline]).await;
    for f in &r.hook_failures {
        let limits = Limits::default();
        assert!(f.duration_us < (limits.deadline_ms + limits.deadline_ms / 4 + 50) * 1000, "stopped in time: {f:?}");
    }
}
