//! A hook that traps never kills the run: it is logged, recorded in
//! `hook_failures` and treated as `continue`; the other plugins still act,
//! and the next call gets a fresh instance (a trapped store is never entered again).

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::FailureKind;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{DEMO_PROMPT, DENY_TOOLS, TRAP_ON_TOOL, cli, config, demo_session, demo_workspace};
use serde_json::json;

#[tokio::test]
async fn a_trapping_plugin_next_to_deny_tools_leaves_the_run_and_deny_tools_intact() {
    let ws = demo_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let trap = runtime
        .load("trap-on-tool", TRAP_ON_TOOL.as_ref(), Default::default(), PluginOptions::default())
        .expect("trap")
        .plugin;
    let deny = runtime
        .load("deny-tools", DENY_TOOLS.as_ref(), config(&[("paths", json!([".env"]))]), PluginOptions::default())
        .expect("deny")
        .plugin;
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider, tools, AgentConfig::default());
    // The trapping plugin runs first, so deny-tools acting proves the chain went on.
    let mut chain = HookChain::new(vec![Box::new(trap.hook()), Box::new(deny.hook())]);

    let r = agent.run(DEMO_PROMPT, &mut chain).await.expect("the run survives the trap");

    assert_eq!(r.stop_reason, StopReason::EndTurn);
    assert!(ws.path().join(".env").exists(), "deny-tools still blocked the delete");
    assert!(ws.path().join("test.txt").exists());
    assert_eq!(r.directives.iter().filter(|d| d.plugin == "deny-tools").count(), 1);

    // One failure per before-tool-call (two tool calls): each is a real trap of a
    // fresh instance, not "cannot enter component" from a poisoned store.
    assert_eq!(r.hook_failures.len(), 2, "{:#?}", r.hook_failures);
    for f in &r.hook_failures {
        assert_eq!(f.plugin, "trap-on-tool");
        assert_eq!(f.event, "before-tool-call");
        assert_eq!(f.kind, FailureKind::Trap);
        assert!(f.message.contains("unreachable"), "trap message: {}", f.message);
        assert!(f.message.contains("deliberate panic"), "the guest's panic text from stderr: {}", f.message);
        assert!(!f.message.contains("cannot enter component"), "{}", f.message);
        assert!(f.fuel_used > 0, "fuel used is recorded even when the call traps");
    }
    // The trapping plugin still saw the events after its trap (fresh instances).
    assert!(r.hook_failures.iter().all(|f| f.duration_us > 0));
}

#[test]
fn the_cli_reports_hook_failures_in_json_and_on_stderr() {
    let ws = demo_workspace();
    let out = cli(&[
        "run",
        "--model",
        &format!("replay:{}", demo_session().display()),
        "--plugin",
        TRAP_ON_TOOL,
        "--workspace",
        &ws.path().display().to_string(),
        "--json",
        DEMO_PROMPT,
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = out.json();
    let failures = v["hook_failures"].as_array().expect("hook_failures");
    assert_eq!(failures.len(), 2);
    assert_eq!(failures[0]["plugin"], "trap-on-tool");
    assert_eq!(failures[0]["event"], "before-tool-call");
    assert_eq!(failures[0]["kind"], "trap");
    assert!(failures[0]["message"].as_str().is_some_and(|m| !m.is_empty()));
    assert!(out.stderr.contains("[hook failure] trap-on-tool trap"), "{}", out.stderr);
    // Without deny-tools nothing blocks the delete: the trap was fail-open.
    assert!(!ws.path().join(".env").exists());
}
