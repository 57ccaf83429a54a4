//! The demo end to end: recorded OpenAI traffic (the model asks to delete
//! `.env` and to create `test.txt` at once) with the deny-tools plugin.

#![allow(clippy::expect_used)] // helpers outside #[test] fns panic on broken preconditions

use std::sync::Arc;

use hookbox::providers::replay::ReplayProvider;
use hookbox::sandbox::HookChain;
use hookbox::sandbox::HookRuntime;
use hookbox::sandbox::PluginOptions;
use hookbox::{Agent, AgentConfig, StopReason};
use hookbox::{Workspace, workspace_tools};
use hookbox_tests::{DEMO_PROMPT, DENY_TOOLS, cli, config, demo_session, demo_workspace, repo_root};
use serde_json::json;

const DELETE_ID: &str = "call_jYdIdRZHxZTn5bWCq5jlMrJi";
const CREATE_ID: &str = "call_TmlTVWQbzrXCZ4jNsCVNbNqu";

#[tokio::test]
async fn deny_tools_blocks_the_delete_and_lets_the_create_run() {
    let ws = demo_workspace();
    let runtime = HookRuntime::new().expect("runtime");
    let deny = runtime
        .load("deny-tools", DENY_TOOLS.as_ref(), config(&[("paths", json!([".env"]))]), PluginOptions::default())
        .expect("deny-tools loads")
        .plugin;
    let provider = Arc::new(ReplayProvider::from_file(demo_session()).expect("demo session"));
    let tools = workspace_tools(Arc::new(Workspace::open(ws.path()).expect("workspace")));
    let agent = Agent::new(provider.clone(), tools, AgentConfig::default());
    let mut chain = HookChain::new(vec![Box::new(deny.hook())]);

    let result = agent.run(DEMO_PROMPT, &mut chain).await.expect("run completes");

    assert!(ws.path().join(".env").exists(), "the denied delete must not have run");
    assert!(ws.path().join("test.txt").exists(), "the allowed create must have run");
    assert_eq!(result.stop_reason, StopReason::EndTurn);
    assert_eq!(result.iterations, 1);
    assert!(result.hook_failures.is_empty(), "{:?}", result.hook_failures);

    // The directive: exactly one skip-tool, from deny-tools, at before-tool-call.
    let skips: Vec<_> = result.directives.iter().filter(|d| d.directive.action() == "skip-tool").collect();
    assert_eq!(skips.len(), 1, "{:?}", result.directives);
    assert_eq!(skips[0].plugin, "deny-tools");
    assert_eq!(skips[0].event, "before-tool-call");

    // The model's next request (OpenAI wire format) answers both calls, in order:
    // a declined result for exactly the denied call id and a normal one for the other.
    let requests = provider.requests();
    assert_eq!(requests.len(), 2, "one request per recorded response");
    let messages = requests[1]["messages"].as_array().expect("messages");
    let tool_msgs: Vec<_> = messages.iter().filter(|m| m["role"] == "tool").collect();
    assert_eq!(tool_msgs.len(), 2, "every tool call gets exactly one result: {messages:?}");
    assert_eq!(tool_msgs[0]["tool_call_id"], DELETE_ID);
    let declined = tool_msgs[0]["content"].as_str().expect("content");
    assert!(declined.contains("deny-tools") && declined.contains(".env"), "declined text: {declined}");
    assert_eq!(tool_msgs[1]["tool_call_id"], CREATE_ID);
    let created = tool_msgs[1]["content"].as_str().expect("content");
    assert!(!created.contains("deny-tools") && created.contains("test.txt"), "create result: {created}");
    // The assistant message before them carries the model's two calls unchanged.
    let assistant = messages.iter().find(|m| m["role"] == "assistant").expect("assistant message");
    assert_eq!(assistant["tool_calls"][0]["id"], DELETE_ID);
    assert_eq!(assistant["tool_calls"][0]["function"]["arguments"], "{\"path\": \".env\"}");

    // Hooks saw the declined result as unsuccessful, the create as successful.
    let results: Vec<_> = result
        .events
        .iter()
        .filter_map(|e| match e {
            hookbox::contract::Event::ToolCallResult { tool_call_id, success, .. } => {
                Some((tool_call_id.clone(), *success))
            }
            _ => None,
        })
        .collect();
    assert_eq!(results, vec![(DELETE_ID.to_string(), false), (CREATE_ID.to_string(), true)]);
}

#[test]
fn the_demo_config_and_cli_produce_the_documented_json() {
    let ws = demo_workspace();
    // The demo's own config, with its plugin paths pointed at where build.rs put the
    // plugins (the same place unless CARGO_TARGET_DIR moves the target dir).
    let text = std::fs::read_to_string(repo_root().join("examples/demo/hookbox.toml")).expect("demo config");
    let built = std::path::Path::new(DENY_TOOLS).parent().expect("plugin dir").display().to_string();
    let text = text.replace("../../target/plugins/wasm32-wasip2/debug", &built);
    assert!(text.contains(DENY_TOOLS), "the demo config names deny_tools.wasm under target/plugins");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("hookbox.toml");
    std::fs::write(&config, text).expect("write config");
    let out = cli(&[
        "run",
        "--model",
        &format!("replay:{}", demo_session().display()),
        "--config",
        &config.display().to_string(),
        "--workspace",
        &ws.path().display().to_string(),
        "--json",
        DEMO_PROMPT,
    ]);
    assert_eq!(out.code, 0, "stderr:\n{}", out.stderr);
    let v = out.json();
    for key in [
        "final_answer",
        "stop_reason",
        "iterations",
        "usage",
        "events",
        "directives",
        "hook_failures",
        "injected_messages",
        "undelivered_injections",
        "error",
    ] {
        assert!(v.get(key).is_some(), "missing `{key}` in {v}");
    }
    assert_eq!(v["stop_reason"], "end_turn");
    assert_eq!(v["iterations"], 1);
    assert!(v["error"].is_null());
    // Usage from the recorded bodies: 71 + 133 prompt tokens, 46 + 19 completion tokens.
    assert_eq!(v["usage"]["input_tokens"], 204);
    assert_eq!(v["usage"]["output_tokens"], 65);
    assert!(v["usage"]["cost"].as_f64().expect("cost") > 0.0, "gpt-4o is priced");
    for e in v["events"].as_array().expect("events") {
        assert!(e.get("type").is_some() && e.get("iteration").is_some(), "{e}");
    }
    assert_eq!(v["directives"][0]["plugin"], "deny-tools");
    assert_eq!(v["directives"][0]["event"], "before-tool-call");
    assert_eq!(v["directives"][0]["action"], "skip-tool");
    assert!(ws.path().join(".env").exists());
    assert!(ws.path().join("test.txt").exists());
    // The readable trace on stderr names the directive.
    assert!(out.stderr.contains("[directive] deny-tools -> skip-tool"), "{}", out.stderr);
}

#[test]
fn record_writes_a_session_that_replays_to_the_same_trace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let recorded = dir.path().join("recorded.json");
    let run = |model: String, extra: &[&str]| {
        let ws = demo_workspace();
        let mut args = vec!["run".to_string(), "--model".into(), model, "--plugin".into(), DENY_TOOLS.into()];
        args.extend(["--workspace".to_string(), ws.path().display().to_string(), "--json".into()]);
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(DEMO_PROMPT.into());
        let out = cli(&args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let mut v = out.json();
        // Per-run values: the ids and the provider name (replay both times, but keep the check honest).
        v["events"][0]["run_id"] = json!(null);
        v["events"][0]["session_id"] = json!(null);
        // And how long each tool took (0 or 1 ms, as the machine goes).
        if let Some(events) = v["events"].as_array_mut() {
            for e in events.iter_mut().filter(|e| e.get("duration_ms").is_some()) {
                e["duration_ms"] = json!(null);
            }
        }
        (v["events"].clone(), v["directives"].clone(), v["usage"].clone())
    };
    let first = run(format!("replay:{}", demo_session().display()), &["--record", &recorded.display().to_string()]);
    let again = run(format!("replay:{}", recorded.display()), &[]);
    assert_eq!(first, again);
}
